// `brim` from the sources, as bin/brim.js runs it from dist/: for tests that need the CLI as its own process.
import { main } from "../../src/cli/main.ts";

process.exitCode = await main(process.argv.slice(2));
