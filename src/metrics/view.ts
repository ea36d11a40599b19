import { formatBytes } from "../bytes.ts";
import { compactPartial, settleLine } from "../job/output-text.ts";
import type { LiveState } from "../guard/live.ts";

/**
 * `1h02m`, `4m05s`, `12s`.
 *
 * @example
 * ```ts
 * formatDuration(3725); // "1h02m"
 * ```
 */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

const percent = (value: number | null, digits = 0): string => (value === null ? "–" : `${value.toFixed(digits)}%`);
const rate = (value: number | null): string =>
  value === null
    ? "–"
    : value >= 1e6
      ? `${(value / 1e6).toPrecision(3)}M`
      : value >= 1e4
        ? `${(value / 1e3).toPrecision(3)}k`
        : value >= 100
          ? value.toFixed(0)
          : value.toPrecision(3);

/** Styling switches for the view. */
export interface ViewStyle {
  color: boolean;
  width: number;
}

function paint(style: ViewStyle, code: string, text: string): string {
  return style.color ? `\u001b[${code}m${text}\u001b[0m` : text;
}

function memoryBar(used: number, cap: number, width: number, style: ViewStyle): string {
  const share = Math.min(1, used / cap);
  const filled = Math.round(share * width);
  const bar = "█".repeat(filled) + "░".repeat(width - filled);
  const code = share >= 0.95 ? "31" : share >= 0.85 ? "33" : "32";
  return paint(style, code, bar);
}

/**
 * The live view's lines (the block redrawn in place on a terminal).
 *
 * @example
 * ```ts
 * renderLiveView(state, { color: false, width: 100 }).join("\n");
 * // brim ▸ step 120/500 · 412 samples/s · ETA 1m02s · elapsed 30s
 * //   memory ██████░░░░ 7.10 GiB / 12.00 GiB GPU (peak 7.42 GiB) · util 97% · SM 61% · 280 W
 * //   data wait 4% · micro-batch 64 × 2 · loss 0.412
 * ```
 */
export function renderLiveView(state: LiveState, style: ViewStyle): string[] {
  const first = [
    `${paint(style, "1", "brim")} ▸ step ${state.steps}${state.totalSteps !== null ? `/${state.totalSteps}` : ""}`,
    `${rate(state.samplesPerS)} samples/s`,
    ...(state.etaS !== null ? [`ETA ${formatDuration(state.etaS)}`] : []),
    `elapsed ${formatDuration(state.elapsedS)}`,
  ].join(" · ");
  const scope = state.capScope === "gpu" ? "GPU" : "RAM";
  const memoryParts: string[] = [];
  if (state.memUsedBytes !== null) {
    const peak = state.memPeakBytes !== null ? ` (peak ${formatBytes(state.memPeakBytes)})` : "";
    if (state.capBytes !== null) {
      const barWidth = Math.max(10, Math.min(30, style.width - 70));
      memoryParts.push(
        `memory ${memoryBar(state.memUsedBytes, state.capBytes, barWidth, style)} ${formatBytes(state.memUsedBytes)} / ${formatBytes(state.capBytes)} ${scope}${peak}`,
      );
    } else {
      memoryParts.push(`memory ${formatBytes(state.memUsedBytes)} ${scope}${peak}`);
    }
  }
  if (state.gpuUtil !== null) memoryParts.push(`util ${percent(state.gpuUtil)}`);
  if (state.smActivity !== null) memoryParts.push(`SM ${percent(state.smActivity)}`);
  if (state.powerW !== null) memoryParts.push(`${state.powerW.toFixed(0)} W`);
  if (state.gpuUtil === null && state.cpuPercent !== null)
    memoryParts.push(`CPU ${percent(state.cpuPercent)} over ${state.processes ?? "?"} process${state.processes === 1 ? "" : "es"}`);
  const third = [
    `data wait ${percent(state.waitShare === null ? null : state.waitShare * 100)}`,
    ...(state.microBatch !== null
      ? [`micro-batch ${state.microBatch}${state.accumulation !== null && state.accumulation > 1 ? ` × ${state.accumulation}` : ""}`]
      : []),
    ...(state.loss !== null ? [`loss ${state.loss.toPrecision(4)}`] : []),
    ...(state.oomRecoveries > 0 ? [paint(style, "33", `${state.oomRecoveries} OOM recovered`)] : []),
  ].join(" · ");
  const lines = [first, ...(memoryParts.length > 0 ? [`  ${memoryParts.join(" · ")}`] : []), `  ${third}`];
  if (state.lastEvent !== null) lines.push(`  last: ${state.lastEvent}`);
  return lines.map((line) => clip(line, style.width, style.color));
}

/**
 * One plain line for logs (stdout not a terminal), printed every few seconds.
 *
 * @example
 * ```ts
 * renderStatusLine(state); // "brim: step 120/500 · 412 samples/s · memory 7.10 GiB/12.00 GiB GPU · wait 4% · util 97%"
 * ```
 */
export function renderStatusLine(state: LiveState): string {
  const parts = [`brim: step ${state.steps}${state.totalSteps !== null ? `/${state.totalSteps}` : ""}`, `${rate(state.samplesPerS)} samples/s`];
  if (state.memUsedBytes !== null) {
    parts.push(
      `memory ${formatBytes(state.memUsedBytes)}${state.capBytes !== null ? `/${formatBytes(state.capBytes)}` : ""} ${state.capScope === "gpu" ? "GPU" : "RAM"}`,
    );
  }
  parts.push(`wait ${percent(state.waitShare === null ? null : state.waitShare * 100)}`);
  if (state.gpuUtil !== null) parts.push(`util ${percent(state.gpuUtil)}`);
  if (state.etaS !== null) parts.push(`ETA ${formatDuration(state.etaS)}`);
  return parts.join(" · ");
}

function clip(line: string, width: number, color: boolean): string {
  const plain = color ? line.replace(/\u001b\[[0-9;]*m/g, "") : line;
  if (plain.length <= width) return line;
  return `${plain.slice(0, Math.max(1, width - 1))}…`;
}

/** Where the live view draws: a stream that may be a terminal. */
export interface Terminal {
  write(text: string): void;
  isTTY: boolean;
  columns: number;
}

/**
 * Keeps the live view at the bottom of a terminal while the job's own output scrolls above it; on a
 * stream that is not a terminal, prints a plain status line every `everyS` seconds instead.
 *
 * @example
 * ```ts
 * const view = new StatusFooter({ write: (t) => process.stderr.write(t), isTTY: true, columns: 100 }, { color: true });
 * view.line("epoch 1 done");     // job output
 * view.update(state, now);        // redraw
 * view.close();
 * ```
 */
export class StatusFooter {
  #terminal: Terminal;
  #color: boolean;
  #everyS: number;
  /** Rows the view (and the job's unfinished line above it) take on screen. */
  #drawn = 0;
  /** The job's current unfinished line, cut to its last `\r` update; redrawn above the view. */
  #pending = "";
  #lastPlainAt = Number.NEGATIVE_INFINITY;
  #last: LiveState | null = null;
  /** Off a terminal: the job's output on the view's stream ended mid-line (a progress bar's `\r` update). */
  #openLine = false;

  constructor(terminal: Terminal, options: { color: boolean; everyS?: number }) {
    this.#terminal = terminal;
    this.#color = options.color;
    this.#everyS = options.everyS ?? 10;
  }

  /** Prints one line of the job's output above the view, through `write` (the job's own stream). */
  line(text: string, write: (text: string) => void = (t) => this.#terminal.write(t)): void {
    this.chunk(`${text}\n`, write);
  }

  /**
   * Passes a piece of the job's output through as it came (partial lines and `\r` progress updates
   * included) through `write`, keeping the view below it. `onTerminal` false: that stream is not the
   * view's terminal (stdout piped), so it is written as is.
   */
  chunk(text: string, write: (text: string) => void = (t) => this.#terminal.write(t), onTerminal = true): void {
    if (!this.#terminal.isTTY || !onTerminal) {
      write(text);
      return;
    }
    this.#erase();
    write(text);
    const nl = text.lastIndexOf("\n");
    this.#pending = compactPartial(nl < 0 ? this.#pending + text : text.slice(nl + 1));
    if (this.#last) this.#draw(this.#last);
  }

  /** Off a terminal, notes the job's bytes passed through on the view's own stream as they were: whether they left a line open. */
  passed(text: string): void {
    if (text.length > 0) this.#openLine = !text.endsWith("\n");
  }

  /** Shows the new state (a redraw on a terminal; a plain line every few seconds otherwise). */
  update(state: LiveState, now: number): void {
    this.#last = state;
    if (this.#terminal.isTTY) {
      this.#erase();
      this.#draw(state);
    } else if (now - this.#lastPlainAt >= this.#everyS) {
      this.#lastPlainAt = now;
      // on a line of its own, never glued to the end of the job's unfinished progress-bar line
      this.#terminal.write(`${this.#openLine ? "\n" : ""}${renderStatusLine(state)}\n`);
      this.#openLine = false;
    }
  }

  /**
   * Draws `state` one last time (so the last frame shows what the summary will say) and leaves it on
   * screen; stops drawing.
   */
  close(state?: LiveState): void {
    if (state !== undefined && this.#terminal.isTTY) {
      this.#erase();
      this.#draw(state);
    }
    this.#drawn = 0;
    this.#last = null;
  }

  #draw(state: LiveState): void {
    const columns = Math.max(40, this.#terminal.columns);
    const lines = renderLiveView(state, { color: this.#color, width: columns });
    // the job's unfinished line stays where it is; the view starts on the next row
    const pendingRows = this.#pending === "" ? 0 : Math.max(1, Math.ceil(visibleLength(this.#pending) / columns));
    this.#terminal.write(`${pendingRows > 0 ? "\n" : ""}${lines.join("\n")}\n`);
    this.#drawn = lines.length + pendingRows;
  }

  #erase(): void {
    if (this.#drawn === 0) return;
    this.#terminal.write(`\u001b[${this.#drawn}F\u001b[J${this.#pending}`);
    this.#drawn = 0;
  }
}

function visibleLength(text: string): number {
  return settleLine(text).replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "").length;
}
