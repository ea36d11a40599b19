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
      const box = document.querySelector('[data-chart-box="' + chart + '"]');
      if (box) box.innerHTML = svg;
    }
    rows("table.numbers tbody", update.numbers);
    for (const tile of update.tiles) {
      const el = document.querySelector('[data-tile="' + tile.label + '"] .value');
      if (el) el.textContent = tile.value;
    }
    main.setAttribute("data-updates", String(Number(main.getAttribute("data-updates") || "0") + 1));
  });
  source.addEventListener("end", (event) => {
    const end = JSON.parse(event.data);
    if (status) status.textContent = "ended: " + end.cause + (end.message ? " (" + end.message + ")" : "") + " · reload for the findings of the whole run";
    main.setAttribute("data-live", "ended");
    source.close();
  });
  source.onerror = () => { if (status && main.getAttribute("data-live") === "true") status.textContent = "reconnecting…"; };
  source.onopen = () => { if (status && main.getAttribute("data-live") === "true") status.textContent = "live"; };
})();
`;
