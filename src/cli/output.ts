import { fstatSync } from "node:fs";

/** Where commands print: the real streams, or buffers in tests. */
export interface Output {
  stdout(text: string): void;
  stderr(text: string): void;
  /** True when stderr is a terminal (the live view redraws in place there). */
  stderrIsTTY?: boolean;
  /** True when stdout is a terminal. */
  stdoutIsTTY?: boolean;
  /** Terminal height in rows. */
  rows?: number;
  /** Terminal width in columns. */
  columns?: number;
  /** Colors allowed (a terminal, and NO_COLOR unset). */
  color?: boolean;
  /** True when stdout and stderr lead to the same file, pipe or terminal (`> log 2>&1`): a line one leaves open, the other continues. */
  sameTarget?: boolean;
  /** Writes bytes as they are (a job's output passed through unchanged, whatever its encoding). */
  bytes?(stream: 1 | 2, bytes: Uint8Array): void;
}

let sameTargetOnce: boolean | null = null;

/** Whether stdout and stderr are one open file (same device and inode); false where either cannot be read. Read once: the streams stay where they are. */
function sameTarget(): boolean {
  if (sameTargetOnce !== null) return sameTargetOnce;
  try {
    const [a, b] = [fstatSync(1), fstatSync(2)];
    sameTargetOnce = a.dev === b.dev && a.ino === b.ino;
  } catch {
    sameTargetOnce = false;
  }
  return sameTargetOnce;
}

/** The process's own streams. */
export const processOutput: Output = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
  bytes: (stream, bytes) => void (stream === 1 ? process.stdout : process.stderr).write(bytes),
  get stderrIsTTY() {
    return process.stderr.isTTY === true;
  },
  get stdoutIsTTY() {
    return process.stdout.isTTY === true;
  },
  get rows() {
    return process.stderr.rows || 24;
  },
  get columns() {
    return process.stderr.columns || Number(process.env.COLUMNS) || 100;
  },
  get sameTarget() {
    return sameTarget();
  },
  get color() {
    return process.stderr.isTTY === true && (process.env.NO_COLOR ?? "") === "";
  },
};
