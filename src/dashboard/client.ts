/**
 * The only script of the dashboard: on a live run's page, follow the run's event stream and swap in
 * the charts, numbers and tiles the server renders. Plain JavaScript served inline (with the page's
 * CSP nonce); everything it inserts was rendered and escaped by the server.
 *
 * Stream events: `entries` (new timeline entries, JSON array), `charts` ({charts: {id: svg},
 * numbers: [{label, value}], tiles: [{label, value}]}), `end` ({cause, message}).
 *
 * @example
 * ```ts
 * `<script nonce="${nonce}">${LIVE_SCRIPT}</script>`;
 * ```
 */
export const LIVE_SCRIPT = `
(() => {
  const main = document.querySelector("main[data-live='true']");
  if (!main) return;
  const id = main.getAttribute("data-run");
  const from = main.getAttribute("data-offset") || "0";
  const token = new URLSearchParams(location.search).get("token");
  const url = "/api/runs/" + encodeURIComponent(id) + "/events?from=" + encodeURIComponent(from) + (token ? "&token=" + encodeURIComponent(token) : "");
  const status = document.querySelector("[data-status]");
  let received = 0;
  const source = new EventSource(url);
  const rows = (selector, items) => {
    const body = document.querySelector(selector);
    if (!body) return;
    body.replaceChildren(...items.map((item) => {
      const tr = document.createElement("tr");
      const th = document.createElement("th");
      const td = document.createElement("td");
      th.textContent = item.label;
      td.textContent = item.value;
      tr.append(th, td);
      return tr;
    }));
  };
  source.addEventListener("entries", (event) => {
    const entries = JSON.parse(event.data);
    received += entries.length;
    main.setAttribute("data-received", String(received));
    main.setAttribute("data-samples", String(Number(main.getAttribute("data-samples") || "0") + entries.filter((e) => e.kind === "sample").length));
  });
  source.addEventListener("charts", (event) => {
    const update = JSON.parse(event.data);
    for (const [chart, svg] of Object.entries(update.charts)) {
      const box = document.querySelector('[data-chart-box="' + chart + '"]:not([data-static])');
      if (box) box.innerHTML = svg;
    }
    rows("table.numbers tbody", update.numbers);
    for (const tile of update.tiles) {
      const el = document.querySelector('[data-tile="' + tile.label + '"] .value');
      if (el) el.textContent = tile.value;
    }
    main.setAttribute("data-updates", String(Number(main.getAttribute("data-updates") || "0") + 1));
    document.dispatchEvent(new Event("brim:charts"));
  });
  source.addEventListener("end", (event) => {
    const end = JSON.parse(event.data);
    if (status) status.textContent = "ended: " + end.cause + (end.message ? " (" + end.message + ")" : "") + " · reload for the findings of the whole run";
    for (const el of document.querySelectorAll("[data-live-badge], [data-live-note]")) el.remove();
    main.setAttribute("data-live", "ended");
    source.close();
  });
  source.onerror = () => { if (status && main.getAttribute("data-live") === "true") status.textContent = "reconnecting…"; };
  source.onopen = () => { if (status && main.getAttribute("data-live") === "true") status.textContent = "live"; };
})();
`;

/**
 * The home page's script: the filter box hides rows that do not contain its words (a tune stays
 * when one of its trials matches), and the lists are fetched again every `data-refresh-ms` (while the
 * tab is visible), keeping the filter and the opened trial groups.
 *
 * @example
 * ```ts
 * `<script nonce="${nonce}">${HOME_SCRIPT}</script>`;
 * ```
 */
export const HOME_SCRIPT = `
(() => {
  const main = document.querySelector("main[data-home]");
  if (!main) return;
  const input = main.querySelector("[data-filter]");
  const apply = () => {
    const words = (input.value || "").toLowerCase().split(/\\s+/).filter(Boolean);
    const hit = (el) => words.every((w) => el.textContent.toLowerCase().includes(w));
    let shown = 0;
    for (const tr of main.querySelectorAll("table.runs > tbody > tr:not(.trial)")) {
      const on = hit(tr);
      tr.classList.toggle("filtered-out", !on);
      if (on) shown++;
    }
    for (const tr of main.querySelectorAll("table.tunes > tbody > tr.tune")) {
      const id = tr.getAttribute("data-tune-id");
      const group = main.querySelector('tr.trials[data-trials-of="' + id + '"]');
      const trials = group ? [...group.querySelectorAll("tr.trial")] : [];
      let any = false;
      for (const t of trials) {
        const on = words.length === 0 || hit(t) || hit(tr);
        t.classList.toggle("filtered-out", !on);
        any = any || on;
      }
      const on = words.length === 0 || hit(tr) || any;
      tr.classList.toggle("filtered-out", !on);
      if (group) {
        group.classList.toggle("filtered-out", !on);
        if (words.length > 0 && any && !hit(tr)) group.querySelector("details").open = true;
      }
      if (on) shown++;
    }
    main.setAttribute("data-shown", String(shown));
  };
  input.addEventListener("input", apply);
  const every = Number(main.getAttribute("data-refresh-ms") || "0");
  const refresh = async () => {
    if (document.hidden) return;
    try {
      const res = await fetch(location.href, { headers: { accept: "text/html" } });
      if (!res.ok) return;
      const next = new DOMParser().parseFromString(await res.text(), "text/html").querySelector("[data-lists]");
      const lists = main.querySelector("[data-lists]");
      if (!next || !lists) return;
      const open = new Set([...lists.querySelectorAll("tr.trials details[open]")].map((d) => d.closest("tr").getAttribute("data-trials-of")));
      lists.replaceWith(next);
      for (const tr of next.querySelectorAll("tr.trials")) if (open.has(tr.getAttribute("data-trials-of"))) tr.querySelector("details").open = true;
      apply();
      main.setAttribute("data-refreshes", String(Number(main.getAttribute("data-refreshes") || "0") + 1));
    } catch {
      // the dashboard stopped: keep what is shown
    }
  };
  if (every > 0) setInterval(refresh, every);
  apply();
})();
`;

/**
 * The compare page's script: the filter box hides picker rows that do not contain its words (ticked
 * rows stay), and the picker's form does the rest without script.
 *
 * @example
 * ```ts
 * `<script nonce="${nonce}">${COMPARE_SCRIPT}</script>`;
 * ```
 */
export const COMPARE_SCRIPT = `
(() => {
  const box = document.querySelector("form[data-run-picker] input[data-filter]");
  if (!box) return;
  box.addEventListener("input", () => {
    const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    for (const row of document.querySelectorAll("tr[data-pick-row]")) {
      const ticked = row.querySelector("input[data-pick]").checked;
      const text = row.textContent.toLowerCase();
      row.classList.toggle("filtered-out", !ticked && !words.every((w) => text.includes(w)));
    }
  });
})();
`;
