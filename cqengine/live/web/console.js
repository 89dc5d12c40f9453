// The console page: draws what the server pushes (server-sent events) and makes the two
// calls the page offers. No library, no build step.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const withToken = (path) => (token ? `${path}?token=${encodeURIComponent(token)}` : path);
const SVG = "http://www.w3.org/2000/svg";
const CENTER = 210, RADIUS = 135;
const HISTORY = 120; // looks kept in the charts (a look a second: two minutes)
const COLORS = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#757575"];

// what tests and the benchmark read: ms since navigation to the first ring drawn, and
// from a publish on this page to its first alert shown
window.consoleTimes = { drawn: null, lags: [] };
const published = new Map(); // docno -> performance.now() at the click
const history = { documents: [], alerts: [], bytes: [] };

function el(tag, attrs = {}, text = "") {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text) e.textContent = text;
  return e;
}

// a node's place on the circle: its id as a fraction of the id space, clockwise from the top
function place(id) {
  const angle = (parseInt(id.slice(0, 8), 16) / 2 ** 32) * 2 * Math.PI - Math.PI / 2;
  return [CENTER + RADIUS * Math.cos(angle), CENTER + RADIUS * Math.sin(angle), angle];
}

function drawRing(look) {
  const svg = document.getElementById("ring");
  svg.replaceChildren();
  const defs = el("defs");
  const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 18, refY: 5,
    markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" });
  marker.append(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#90a4ae" }));
  defs.append(marker);
  svg.append(defs, el("circle", { class: "track", cx: CENTER, cy: CENTER, r: RADIUS }));
  // a node down has no id of its own to tell: it keeps the place it had when last seen
  const where = {};
  for (const n of look.nodes) {
    if (n.id) lastIds[n.address] = n.id;
    const id = n.id || lastIds[n.address];
    if (id) where[n.address] = place(id);
  }
  for (const n of look.nodes) {
    if (n.up && where[n.address] && where[n.successor] && n.successor !== n.address) {
      const [x1, y1] = where[n.address], [x2, y2] = where[n.successor];
      // a chord bowed towards the centre: a successor link, not the circle itself
      const mx = (x1 + x2) / 2, my = (y1 + y2) / 2;
      const cx = mx + (CENTER - mx) * 0.25, cy = my + (CENTER - my) * 0.25;
      svg.append(el("path", { class: "link", d: `M ${x1} ${y1} Q ${cx} ${cy} ${x2} ${y2}` }));
    }
  }
  const short = new Set(look.short_of_copies);
  for (const n of look.nodes) {
    if (!where[n.address]) continue;
    const [x, y, angle] = where[n.address];
    const state = !n.up ? "down" : short.has(n.address) ? "short" : "up";
    const g = el("g", { class: `node ${n.up ? "up" : "down"} ${state}`, "data-address": n.address });
    const r = 8 + Math.min(10, Math.sqrt(n.index_entries || 0) / 3);
    g.append(el("circle", { cx: x, cy: y, r }));
    const lx = CENTER + (RADIUS + 24) * Math.cos(angle), ly = CENTER + (RADIUS + 24) * Math.sin(angle) + 4;
    const label = n.up ? `${n.address.split(":").pop()} · ${n.index_entries}/${n.subscriptions}` : `${n.address.split(":").pop()} down`;
    g.append(el("text", { x: lx, y: ly, "text-anchor": Math.cos(angle) < -0.2 ? "end" : Math.cos(angle) > 0.2 ? "start" : "middle" }, label));
    g.append(el("title", {}, `${n.address} ${n.up ? `id ${n.id}, ${n.index_entries} entries, ${n.subscriptions} subscriptions` : "down"}`));
    svg.append(g);
  }
  svg.append(el("text", { x: CENTER, y: CENTER, "text-anchor": "middle", class: "count" },
    `${look.up} of ${look.nodes.length} up`));
}
const lastIds = {};

function drawTable(look) {
  const rows = look.nodes.map((n) => {
    const tr = document.createElement("tr");
    const cells = [n.address, n.id ? n.id.slice(0, 8) : "", n.up ? "up" : "down",
      n.index_entries ?? "", n.subscriptions ?? "", n.alerts_waiting ?? "", n.up ? `${n.copies}/${Math.min(look.replicas, look.up)}` : ""];
    cells.forEach((c, i) => {
      const td = document.createElement("td");
      td.textContent = c;
      if (i === 2) td.className = c;
      tr.append(td);
    });
    return tr;
  });
  document.querySelector("#nodes tbody").replaceChildren(...rows);
  const down = look.nodes.length - look.up;
  document.getElementById("status").textContent =
    `${look.nodes.length} nodes, ${look.up} up` + (down ? `, ${down} down` : "");
  const copies = document.getElementById("copies");
  copies.textContent = look.short_of_copies.length
    ? `ranges short of copies: ${look.short_of_copies.join(", ")}`
    : `every range has its ${Math.min(look.replicas, look.up)} copies`;
  copies.className = look.short_of_copies.length ? "short" : "";
}

function push(series, value) {
  series.push(value);
  if (series.length > HISTORY) series.shift();
}

function chart(id, series, colors) {
  const c = document.getElementById(id), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const top = Math.max(1, ...series.flat());
  series.forEach((line, i) => {
    g.strokeStyle = colors[i % colors.length];
    g.beginPath();
    line.forEach((v, x) => { // the newest look at the right edge
      const px = ((HISTORY - line.length + x) / (HISTORY - 1)) * c.width;
      const py = c.height - 4 - (v / top) * (c.height - 8);
      x ? g.lineTo(px, py) : g.moveTo(px, py);
    });
    g.stroke();
  });
}

const fmt = (v) => (v >= 1e6 ? `${(v / 1e6).toFixed(1)} M` : v >= 1e3 ? `${(v / 1e3).toFixed(1)} k` : v.toFixed(v < 10 ? 1 : 0));

function drawRates(rates) {
  push(history.documents, rates.documents);
  push(history.alerts, rates.alerts);
  push(history.bytes, rates.bytes);
  document.getElementById("docs-rate").textContent = fmt(rates.documents);
  document.getElementById("alerts-rate").textContent = fmt(rates.alerts);
  const all = Object.values(rates.bytes).reduce((a, b) => a + b, 0);
  document.getElementById("bytes-rate").textContent = fmt(all);
  chart("docs-chart", [history.documents], COLORS);
  chart("alerts-chart", [history.alerts], COLORS.slice(1));
  // the busiest kinds over the window, each a line; the rest together
  const totals = {};
  for (const look of history.bytes) for (const [k, v] of Object.entries(look)) totals[k] = (totals[k] || 0) + v;
  const kinds = Object.keys(totals).sort((a, b) => totals[b] - totals[a]).slice(0, COLORS.length - 1);
  const lines = kinds.map((k) => history.bytes.map((look) => look[k] || 0));
  lines.push(history.bytes.map((look) => Object.entries(look).filter(([k]) => !kinds.includes(k)).reduce((a, [, v]) => a + v, 0)));
  chart("bytes-chart", lines, COLORS);
  document.getElementById("bytes-legend").replaceChildren(...[...kinds, "other"].map((k, i) => {
    const s = document.createElement("span");
    s.style.color = COLORS[i];
    s.textContent = k;
    return s;
  }));
}

function showAlert(a) {
  const li = document.createElement("li");
  li.dataset.docno = a.docno;
  li.dataset.subscription = a.subscription_id;
  const b = document.createElement("b");
  b.textContent = a.docno;
  li.append(b, ` ${a.title || a.snippet || ""}`);
  document.getElementById("alerts").prepend(li);
  if (published.has(a.docno)) {
    window.consoleTimes.lags.push(performance.now() - published.get(a.docno));
    published.delete(a.docno);
  }
}

async function post(path, body) {
  const r = await fetch(withToken(path), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}

function answer(id, text, failed) {
  const e = document.getElementById(id);
  e.textContent = text;
  e.className = failed ? "reply error" : "reply";
}

document.getElementById("subscribe-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  try {
    const s = await post("/api/subscribe", { query: document.getElementById("query").value });
    const alts = s.alternatives.map((a) => `${a.query} [${a.index_term}]`).join(" OR ");
    answer("subscribed", `subscribed ${s.subscription_id}: ${s.query} (${alts}) at ${s.home}` +
      (s.dropped.length ? `; dropped ${s.dropped.join(", ")}` : ""));
    document.getElementById("subscribed").dataset.subscription = s.subscription_id;
  } catch (e) {
    answer("subscribed", e.message, true);
  }
});

document.getElementById("publish-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const docno = document.getElementById("docno").value;
  const started = performance.now();
  if (docno) published.set(docno, started); // its alert may come before the reply does
  try {
    const p = await post("/api/publish", { docno, text: document.getElementById("text").value });
    if (!docno) published.set(p.docno, started);
    answer("published", p.accepted ? `published ${p.docno}: ${p.terms} terms` : `${p.docno} not accepted`, !p.accepted);
    document.getElementById("published").dataset.docno = p.docno;
  } catch (e) {
    answer("published", e.message, true);
  }
});

const events = new EventSource(withToken("/events"));
events.addEventListener("ring", (ev) => {
  const look = JSON.parse(ev.data);
  drawRing(look);
  drawTable(look);
  drawRates(look.rates);
  if (window.consoleTimes.drawn === null) window.consoleTimes.drawn = performance.now();
});
events.addEventListener("alert", (ev) => showAlert(JSON.parse(ev.data)));
events.onerror = () => { document.getElementById("status").textContent = "console unreachable: retrying"; };
