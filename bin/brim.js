#!/usr/bin/env node
// Runs the built CLI; `npm run build` makes dist/.
import { main } from "../dist/cli/main.js";

process.exitCode = await main(process.argv.slice(2));
