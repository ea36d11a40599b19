/**
 * Unified diffs of a config before and after an edit, as `diff -u` and `patch` know them.
 *
 * @module
 */

type Op = { kind: " " | "-" | "+"; line: string };

const CONTEXT = 3;
const MAX_EDIT_DISTANCE = 4000;

/**
 * A unified diff (`---`/`+++` headers, `@@` hunks, 3 lines of context, `\ No newline at end of
 * file` where a side lacks one) from `before` to `after`; `""` when they are equal. Both headers
 * name `path`, so `patch -p0` applies it in the directory the path is relative to — unless a line
 * is longer than 400 characters: it is shown cut (`… [N more characters not shown]`), since a diff is
 * for reading, and a 50 MB line printed whole is not.
 *
 * @example
 * ```ts
 * unifiedDiff("conf.yaml", "a: 1\nb: 2\n", "a: 1\nb: 3\n");
 * // "--- conf.yaml\n+++ conf.yaml\n@@ -1,2 +1,2 @@\n a: 1\n-b: 2\n+b: 3\n"
 * ```
 */
export function unifiedDiff(path: string, before: string, after: string): string {
  if (before === after) return "";
  const ops = diffLines(splitLines(before), splitLines(after));
  const changed = ops.flatMap((op, i) => (op.kind === " " ? [] : [i]));
  const aBefore = new Int32Array(ops.length + 1);
  const bBefore = new Int32Array(ops.length + 1);
  ops.forEach((op, i) => {
    aBefore[i + 1] = (aBefore[i] ?? 0) + (op.kind === "+" ? 0 : 1);
    bBefore[i + 1] = (bBefore[i] ?? 0) + (op.kind === "-" ? 0 : 1);
  });
  let out = `--- ${path}\n+++ ${path}\n`;
  let g = 0;
  while (g < changed.length) {
    let h = g;
    while (h + 1 < changed.length && (changed[h + 1] ?? 0) - (changed[h] ?? 0) - 1 <= 2 * CONTEXT) h++;
    const from = Math.max(0, (changed[g] ?? 0) - CONTEXT);
    const to = Math.min(ops.length, (changed[h] ?? 0) + CONTEXT + 1);
    const aStart = aBefore[from] ?? 0;
    const bStart = bBefore[from] ?? 0;
    out += `@@ -${hunkRange(aStart, (aBefore[to] ?? 0) - aStart)} +${hunkRange(bStart, (bBefore[to] ?? 0) - bStart)} @@\n`;
    for (const op of ops.slice(from, to)) {
      const line = shown(op.line);
      out += line.endsWith("\n") ? `${op.kind}${line}` : `${op.kind}${line}\n\\ No newline at end of file\n`;
    }
    g = h + 1;
  }
  return out;
}

// A line longer than this is cut in the diff (the file itself is written whole): a diff is read by a person.
const MAX_SHOWN_CHARS = 400;

function shown(line: string): string {
  const body = line.endsWith("\n") ? line.slice(0, -1) : line;
  if (body.length <= MAX_SHOWN_CHARS) return line;
  return `${body.slice(0, MAX_SHOWN_CHARS)}… [${body.length - MAX_SHOWN_CHARS} more characters not shown]${line.endsWith("\n") ? "\n" : ""}`;
}

function hunkRange(start: number, length: number): string {
  if (length === 1) return String(start + 1);
  return `${length === 0 ? start : start + 1},${length}`;
}

function splitLines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

function diffLines(a: readonly string[], b: readonly string[]): Op[] {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const midA = a.slice(pre, a.length - suf);
  const midB = b.slice(pre, b.length - suf);
  const middle = shortestEdit(midA, midB) ?? [...midA.map((line): Op => ({ kind: "-", line })), ...midB.map((line): Op => ({ kind: "+", line }))];
  return [...a.slice(0, pre).map((line): Op => ({ kind: " ", line })), ...middle, ...a.slice(a.length - suf).map((line): Op => ({ kind: " ", line }))];
}

// Myers' O(ND) algorithm; each round keeps only the window of diagonals it could reach.
function shortestEdit(a: readonly string[], b: readonly string[]): Op[] | null {
  const n = a.length;
  const m = b.length;
  const max = n + m;
  const off = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= Math.min(max, MAX_EDIT_DISTANCE); d++) {
    trace.push(v.slice(off - d - 1, off + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && (v[off + k - 1] ?? 0) < (v[off + k + 1] ?? 0)) ? (v[off + k + 1] ?? 0) : (v[off + k - 1] ?? 0) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[off + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b);
    }
  }
  return null;
}

function backtrack(trace: readonly Int32Array[], a: readonly string[], b: readonly string[]): Op[] {
  const ops: Op[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d] ?? new Int32Array(0);
    const at = (k: number) => v[k + d + 1] ?? 0;
    const k = x - y;
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : at(prevK);
    const prevY = d === 0 ? 0 : prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push({ kind: " ", line: a[x - 1] ?? "" });
      x--;
      y--;
    }
    if (d > 0) {
      if (x === prevX) ops.push({ kind: "+", line: b[y - 1] ?? "" });
      else ops.push({ kind: "-", line: a[x - 1] ?? "" });
      x = prevX;
      y = prevY;
    }
  }
  return ops.reverse();
}
