/**
 * A small terminal screen for tests: applies text with \r, \n, ESC[nF (up n lines, column 0), ESC[J
 * (clear to the end), ESC[K, and drops other escapes (colours), wrapping at `columns`.
 */
export function renderScreen(text: string, columns = 200): string[] {
  const rows: string[][] = [[]];
  let row = 0;
  let col = 0;
  const line = (): string[] => (rows[row] ??= []);
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (ch === "\u001b") {
      const m = /^\u001b\[([0-9;?]*)([A-Za-z])/.exec(text.slice(i));
      if (m === null) continue;
      i += m[0].length - 1;
      const n = Number(m[1] || "1");
      if (m[2] === "F") {
        row = Math.max(0, row - n);
        col = 0;
      } else if (m[2] === "J") {
        line().length = col;
        rows.length = row + 1;
      } else if (m[2] === "K") line().length = col;
      continue;
    }
    if (ch === "\r") col = 0;
    else if (ch === "\n") {
      row++;
      col = 0;
      line();
    } else {
      if (col >= columns) {
        row++;
        col = 0;
      }
      const l = line();
      while (l.length < col) l.push(" ");
      l[col++] = ch;
    }
  }
  return rows.map((r) => r.join("").trimEnd()).filter((r, i, all) => r !== "" || i < all.length - 1);
}
