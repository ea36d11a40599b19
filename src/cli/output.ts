/** Where commands print: the real streams, or buffers in tests. */
export interface Output {
  stdout(text: string): void;
  stderr(text: string): void;
}

/** The process's own streams. */
export const processOutput: Output = {
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
};
