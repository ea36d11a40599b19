#!/usr/bin/env node
// Runs the built CLI; `npm run build` makes dist/.
import { main } from "../dist/cli/main.js";

// A reader that goes away (`brim tune --help | head`, a closed terminal) makes writes fail with
// EPIPE or EIO: what brim prints is then lost, but brim finishes what it is doing (a guarded job
// is still stopped cleanly) instead of dying of an unhandled stream error.
for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});

process.exitCode = await main(process.argv.slice(2));
