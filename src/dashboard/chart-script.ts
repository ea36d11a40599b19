/**
 * The run page's chart script, as TensorBoard's scalars page behaves: a smoothing slider for the loss
 * (the same de-biased moving average as the server's `smoothPoints`, kept in localStorage), and on
 * every chart the values under the pointer (the nearest point of each series, with a guide line).
 * Plain JavaScript served inline with the page's CSP nonce; it reads what the server drew from the
 * charts' `data-*` attributes (the plot's domain and scale, each series' values) and inserts text
 * only through `textContent`. Live pages redraw their charts: it re-smooths on `brim:charts`.
 *
 * @example
 * ```ts
 * `<script nonce="${nonce}">${CHART_SCRIPT}</script>`;
 * ```
 */
export const CHART_SCRIPT = `
(() => {
  const KEY = "brim.loss-smoothing";
  const slider = document.querySelector("input[data-smoothing]");
  const shown = document.querySelector("[data-smoothing-value]");
  const mapper = (rect) => {
    const n = (a) => Number(rect.getAttribute(a));
    const X = n("x"), Y = n("y"), W = n("width"), H = n("height");
    const log = (axis) => rect.getAttribute("data-" + axis + "-scale") !== "linear";
    const f = (v, axis) => {
      const a = n("data-" + axis + "-min"), b = n("data-" + axis + "-max");
      return log(axis) ? (Math.log(Math.max(v, 1e-12)) - Math.log(a)) / ((Math.log(b) - Math.log(a)) || 1) : (v - a) / ((b - a) || 1);
    };
    const inv = (t, axis) => {
      const a = n("data-" + axis + "-min"), b = n("data-" + axis + "-max");
      return log(axis) ? Math.exp(Math.log(a) + t * (Math.log(b) - Math.log(a))) : a + t * (b - a);
    };
    return { X, Y, W, H, tx: (v) => X + f(v, "x") * W, ty: (v) => Y + H - f(v, "y") * H, fx: (px) => inv((px - X) / W, "x") };
  };
  const values = (el, axis) => (el.getAttribute("data-" + axis) || "").split(" ").filter(Boolean).map(Number);
  const smooth = () => {
    if (!slider) return;
    const w = Math.min(0.999, Math.max(0, Number(slider.value)));
    if (shown) shown.textContent = w.toFixed(2);
    for (const svg of document.querySelectorAll('svg[data-chart="loss"], svg[data-chart^="metric-"]')) {
      const rect = svg.querySelector("rect.plot");
      if (!rect) continue;
      const m = mapper(rect);
      for (const raw of svg.querySelectorAll('g.series[data-style="points"]')) {
        const name = raw.getAttribute("data-series") + ", smoothed";
        const line = [...svg.querySelectorAll("g.series")].find((g) => g.getAttribute("data-series") === name);
        const poly = line && line.querySelector("polyline");
        if (!poly) continue;
        const dots = [...raw.querySelectorAll("circle")];
        const xs = dots.map((c) => Number(c.getAttribute("data-x")));
        let last = 0;
        const ys = dots.map((c, i) => {
          last = last * w + (1 - w) * Number(c.getAttribute("data-y"));
          return w > 0 ? last / (1 - Math.pow(w, i + 1)) : last;
        });
        poly.setAttribute("points", xs.map((x, i) => m.tx(x).toFixed(1) + "," + m.ty(ys[i]).toFixed(1)).join(" "));
        poly.setAttribute("data-x", xs.join(" "));
        poly.setAttribute("data-y", ys.map((y) => String(Number(y.toPrecision(6)))).join(" "));
      }
    }
    document.body.setAttribute("data-smoothing", String(w));
  };
  if (slider) {
    const kept = localStorage.getItem(KEY);
    if (kept !== null && kept !== "" && Number.isFinite(Number(kept))) slider.value = kept;
    slider.addEventListener("input", () => {
      localStorage.setItem(KEY, slider.value);
      smooth();
    });
    document.addEventListener("brim:charts", smooth);
    smooth();
  }

  const tip = document.createElement("div");
  tip.setAttribute("data-hover-tip", "");
  tip.hidden = true;
  document.body.append(tip);
  const NS = "http://www.w3.org/2000/svg";
  const hide = () => {
    tip.hidden = true;
    for (const g of document.querySelectorAll("line[data-hover-line]")) g.remove();
  };
  const fmt = (v) => (Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : String(Number(v.toPrecision(5))));
  document.addEventListener("mousemove", (ev) => {
    const svg = ev.target && ev.target.closest ? ev.target.closest("svg[data-chart]") : null;
    const rect = svg && svg.querySelector("rect.plot");
    if (!svg || !rect || !svg.getScreenCTM()) return hide();
    const pt = svg.createSVGPoint();
    pt.x = ev.clientX;
    pt.y = ev.clientY;
    const p = pt.matrixTransform(svg.getScreenCTM().inverse());
    const m = mapper(rect);
    if (p.x < m.X || p.x > m.X + m.W || p.y < m.Y || p.y > m.Y + m.H) return hide();
    const at = m.fx(p.x);
    const rows = [];
    let nearest = null;
    for (const g of svg.querySelectorAll("g.series")) {
      let best = null;
      for (const el of g.querySelectorAll("[data-x]")) {
        const xs = values(el, "x"), ys = values(el, "y");
        xs.forEach((x, i) => {
          if (best === null || Math.abs(x - at) < Math.abs(best[0] - at)) best = [x, ys[i]];
        });
      }
      if (best === null) continue;
      rows.push([g.getAttribute("data-series"), best]);
      if (nearest === null || Math.abs(best[0] - at) < Math.abs(nearest - at)) nearest = best[0];
    }
    if (nearest === null) return hide();
    tip.replaceChildren();
    const head = document.createElement("div");
    head.setAttribute("data-hover-x", String(nearest));
    head.textContent = (rect.getAttribute("data-x-label") || "x") + " " + fmt(nearest);
    tip.append(head);
    for (const [name, [x, y]] of rows) {
      const row = document.createElement("div");
      row.setAttribute("data-hover-series", name);
      row.setAttribute("data-hover-value", String(y));
      row.textContent = name + ": " + fmt(y) + (x !== nearest ? " (at " + fmt(x) + ")" : "");
      tip.append(row);
    }
    tip.style.left = ev.pageX + 14 + "px";
    tip.style.top = ev.pageY + 10 + "px";
    tip.hidden = false;
    let line = svg.querySelector("line[data-hover-line]");
    if (!line) {
      for (const old of document.querySelectorAll("line[data-hover-line]")) old.remove();
      line = document.createElementNS(NS, "line");
      line.setAttribute("data-hover-line", "");
      line.setAttribute("stroke", "#888");
      line.setAttribute("stroke-dasharray", "3 3");
      line.setAttribute("pointer-events", "none");
      svg.append(line);
    }
    const x = m.tx(nearest).toFixed(1);
    line.setAttribute("x1", x);
    line.setAttribute("x2", x);
    line.setAttribute("y1", String(m.Y));
    line.setAttribute("y2", String(m.Y + m.H));
  });
  document.addEventListener("mouseleave", hide);
})();
`;
