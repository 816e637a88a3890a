// Weft dashboard: renders the frames and tap events the server streams.
// Every value from the mesh is inserted as text (never as markup): paths,
// authorities and identities come from clients and proxies.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MAX_TAP_ROWS = 60;
let lastFrame = null;

function el(tag, attrs, ...children) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "text") e.textContent = v;
    else if (k === "onclick") e.addEventListener("click", v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) if (c) e.appendChild(c);
  return e;
}

const fmt = {
  pct: (v) => (v === null || v === undefined ? "-" : (100 * v).toFixed(2) + "%"),
  rps: (v) => (v === null || v === undefined ? "-" : v.toFixed(1) + "rps"),
  ms: (v) => (v === null || v === undefined ? "-" : v < 10 ? v.toFixed(1) + "ms" : v.toFixed(0) + "ms"),
  short: (id) => { if (!id) return "-"; const i = id.indexOf(".serviceaccount.identity."); return i > 0 ? id.slice(0, i) : id; },
};

function health(g) {
  if (!g || g.successRate === null || g.successRate === undefined || g.requests === 0) return "none";
  if (g.successRate >= 0.99) return "ok";
  if (g.successRate >= 0.95) return "warn";
  return "bad";
}

function fillTable(id, rows, makeRow) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows.map(makeRow));
}

function td(text, cls) { return el("td", { text: text, class: cls }); }

// ---- topology ----

function layout(nodes, edges) {
  // Columns by longest call path from the callers that nobody calls.
  const depth = {};
  nodes.forEach((n) => (depth[n.id] = 0));
  for (let i = 0; i < nodes.length; i++) {
    let changed = false;
    for (const e of edges) {
      if (e.src === e.dst) continue;
      if (depth[e.dst] < depth[e.src] + 1 && depth[e.src] + 1 < nodes.length) { depth[e.dst] = depth[e.src] + 1; changed = true; }
    }
    if (!changed) break;
  }
  const cols = {};
  [...nodes].sort((a, b) => a.id.localeCompare(b.id)).forEach((n) => { (cols[depth[n.id]] = cols[depth[n.id]] || []).push(n); });
  const ncols = Math.max(1, Object.keys(cols).length);
  const pos = {};
  const W = 960, H = 360, bw = 200, bh = 62;
  Object.entries(cols).forEach(([c, list]) => {
    const x = 30 + (Number(c) * (W - 60 - bw)) / Math.max(1, ncols - 1);
    list.forEach((n, i) => { pos[n.id] = { x: ncols === 1 ? (W - bw) / 2 : x, y: ((i + 1) * H) / (list.length + 1) - bh / 2, w: bw, h: bh }; });
  });
  return pos;
}

function drawTopology(f) {
  const svg = document.getElementById("topology");
  const pos = layout(f.nodes, f.edges);
  const parts = [];
  const defs = el("svg:defs", {});
  for (const c of ["ok", "warn", "bad", "none", "denied"]) {
    defs.appendChild(el("svg:marker", { id: "arrow-" + c, viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      el("svg:path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead " + c, fill: c === "ok" ? "#1a9850" : c === "warn" ? "#e6a800" : c === "none" ? "#9e9e9e" : "#d73027" })));
  }
  parts.push(defs);
  const denials = {};
  for (const d of f.denials) (denials[d.edge] = denials[d.edge] || []).push(d);
  f.edges.forEach((e, i) => {
    const a = pos[e.src], b = pos[e.dst];
    if (!a || !b) return;
    const denied = e.denied > 0;
    const cls = denied && e.golden.requests === 0 ? "denied" : health(e.golden);
    const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
    // Bend the curve around the boxes it would cross, so that every
    // edge and its label stay visible and clickable.
    const others = Object.entries(pos).filter(([id]) => id !== e.src && id !== e.dst).map(([, p]) => p);
    const hits = (cx, cy) => {
      for (let k = 1; k < 24; k++) {
        const t = k / 24, x = (1 - t) * (1 - t) * x1 + 2 * (1 - t) * t * cx + t * t * x2, y = (1 - t) * (1 - t) * y1 + 2 * (1 - t) * t * cy + t * t * y2;
        for (const o of others) if (x > o.x - 8 && x < o.x + o.w + 8 && y > o.y - 8 && y < o.y + o.h + 8) return true;
      }
      return false;
    };
    const base = (i % 3 - 1) * 14 + (denied ? 28 : 0);
    let mx = (x1 + x2) / 2, my = (y1 + y2) / 2 + base;
    for (const extra of [0, 100, -100, 170, -170, 240, -240]) {
      if (!hits(mx, (y1 + y2) / 2 + base + extra)) { my = (y1 + y2) / 2 + base + extra; break; }
    }
    const lx = (x1 + 2 * mx + x2) / 4, ly = (y1 + 2 * my + y2) / 4;
    const key = e.src + "->" + e.dst;
    const path = el("svg:path", { d: `M${x1},${y1} Q${mx},${my} ${x2},${y2}`, class: "edge " + cls + (denied ? " denied" : ""),
      "marker-end": "url(#arrow-" + (denied ? "denied" : cls) + ")", "data-edge": key });
    const lock = e.secured ? "mTLS · " : "";
    let label = lock + fmt.rps(e.golden.rps) + " · " + fmt.pct(e.golden.successRate);
    if (denied) label = "✕ denied " + Math.round(e.denied) + (e.deniedRps !== null && e.deniedRps !== undefined ? " (" + e.deniedRps.toFixed(1) + "/s)" : "") + (e.golden.requests > 0 ? " · " + label : "");
    const text = el("svg:text", { x: lx, y: ly - 5, "text-anchor": "middle", class: "edge-label" + (denied ? " denied" : ""), "data-edge-label": key, text: label });
    const title = "client " + (e.clientId || "-") + " → server " + (e.serverId || "-");
    path.appendChild(el("svg:title", { text: title }));
    text.appendChild(el("svg:title", { text: title }));
    if (denied && denials[key]) {
      const show = () => explain(denials[key][0]);
      path.addEventListener("click", show);
      text.addEventListener("click", show);
    }
    parts.push(path, text);
  });
  for (const n of f.nodes) {
    const p = pos[n.id];
    const g = el("svg:g", { class: "node" + (n.pods > 0 ? "" : " unscraped"), "data-node": n.id, transform: `translate(${p.x},${p.y})` });
    g.appendChild(el("svg:rect", { width: p.w, height: p.h, rx: 6 }));
    g.appendChild(el("svg:text", { x: 10, y: 18, text: n.name + (n.pods > 0 ? "  (" + n.meshed + "/" + n.pods + " meshed)" : "") }));
    g.appendChild(el("svg:text", { x: 10, y: 34, class: "id", text: n.identity ? "id " + fmt.short(n.identity) : (n.kind === "egressnetwork" ? "EgressNetwork, " + n.namespace : n.namespace) }));
    g.appendChild(el("svg:text", { x: 10, y: 52, class: "id", text: n.pods > 0 ? "in " + fmt.rps(n.golden.rps) + " · " + fmt.pct(n.golden.successRate) + " · p99 " + fmt.ms(n.golden.p99) : "" }));
    g.appendChild(el("svg:title", { text: n.identity || n.id }));
    parts.push(g);
  }
  svg.replaceChildren(...parts);
}

async function explain(d) {
  const box = document.getElementById("explain");
  box.classList.remove("hidden");
  document.getElementById("explain-text").textContent = "evaluating the policy…";
  document.getElementById("explain-command").textContent = d.command;
  const q = new URLSearchParams({ from: d.from, namespace: d.namespace, pod: d.pod, port: d.port });
  try {
    const r = await fetch("api/explain?" + q.toString());
    if (!r.ok) { document.getElementById("explain-text").textContent = "no explanation: " + (await r.text()); return; }
    const x = await r.json();
    document.getElementById("explain-text").textContent = "denied " + d.from + " → " + d.namespace + "/" + d.pod + " port " + d.port + "\n\n" + (x.error ? "error: " + x.error : x.explanation);
  } catch (err) {
    document.getElementById("explain-text").textContent = "no explanation: " + err;
  }
}

// ---- charts ----

function chart(points, key, lines, title, maxFixed, bare) {
  const W = 300, H = 90, pad = 4;
  const vals = [];
  for (const p of points) { const g = p.series[key]; for (const l of lines) if (g && g[l.field] !== null && g[l.field] !== undefined) vals.push(g[l.field] * (l.scale || 1)); }
  const max = maxFixed || Math.max(1e-9, ...vals);
  const svg = el("svg:svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", "data-chart": key + ":" + title });
  const n = Math.max(2, points.length);
  for (const l of lines) {
    let d = "";
    points.forEach((p, i) => {
      const g = p.series[key];
      if (!g || g[l.field] === null || g[l.field] === undefined) return;
      const x = pad + (i * (W - 2 * pad)) / (n - 1), y = H - pad - ((g[l.field] * (l.scale || 1)) / max) * (H - 2 * pad);
      d += (d ? " L" : "M") + x.toFixed(1) + "," + y.toFixed(1);
    });
    if (d) svg.appendChild(el("svg:path", { d: d, class: "line " + l.cls }));
  }
  if (!bare) svg.appendChild(el("svg:text", { x: W - 4, y: 11, "text-anchor": "end", class: "label", text: title + " (max " + (maxFixed ? maxFixed * 100 + "%" : max.toFixed(1)) + ")" }));
  return svg;
}

function drawCharts(f) {
  const box = document.getElementById("charts");
  const cards = f.nodes.filter((n) => n.pods > 0).map((n) => {
    const key = "node:" + n.id;
    return el("div", { class: "chart", "data-workload": n.id },
      el("h3", { text: n.name }),
      chart(f.history, key, [{ field: "rps", cls: "rps" }], "requests/s"),
      chart(f.history, key, [{ field: "successRate", cls: "sr" }], "success", 1),
      chart(f.history, key, [{ field: "p50", cls: "p50" }, { field: "p95", cls: "p95" }, { field: "p99", cls: "p99" }], "latency p50/p95/p99 ms"));
  });
  box.replaceChildren(...cards);
}

function spark(points, key) {
  return chart(points, key, [{ field: "rps", cls: "rps" }], "rps", 0, true);
}

// ---- tables ----

function drawTables(f) {
  const nodes = Object.fromEntries(f.nodes.map((n) => [n.id, n]));
  const name = (id) => (nodes[id] ? nodes[id].name : id);
  fillTable("edges", f.edges, (e) => el("tr", { class: e.denied > 0 ? "denied" : "", "data-edge-row": e.src + "->" + e.dst },
    td(name(e.src)), td(name(e.dst)), td(e.clientId || "-"), td(e.serverId || "-"), td(e.secured ? "yes, both sides" : "no"),
    td(fmt.rps(e.golden.rps), "num"), td(fmt.pct(e.golden.successRate), "num"), td(String(Math.round(e.denied)), "num")));
  fillTable("workloads", f.nodes.filter((n) => n.pods > 0), (n) => el("tr", {},
    td(n.id), td(n.identity || "-"), td(n.meshed + "/" + n.pods), td(fmt.rps(n.golden.rps), "num"), td(fmt.pct(n.golden.successRate), "num"),
    td(fmt.ms(n.golden.p50), "num"), td(fmt.ms(n.golden.p95), "num"), td(fmt.ms(n.golden.p99), "num"), td(String(n.tcpConnections), "num"), td(fmt.pct(n.golden.mtlsShare), "num")));
  fillTable("routes", f.routes, (r) => {
    const cell = el("td", {});
    const s = spark(f.history, "route:" + r.workload + "|" + r.route);
    s.setAttribute("class", "spark");
    cell.appendChild(s);
    return el("tr", {}, td(name(r.workload)), td(r.route), td(r.authority), td(fmt.rps(r.golden.rps), "num"), td(fmt.pct(r.golden.successRate), "num"),
      td(fmt.ms(r.golden.p50), "num"), td(fmt.ms(r.golden.p99), "num"), cell);
  });
  fillTable("authz", f.authz, (a) => el("tr", { class: a.denied > 0 ? "denied" : "" },
    td(name(a.workload)), td(a.server || "-"), td(a.route || "-"), td(a.authorization || "[unauthorized]"), td(a.port),
    td(String(Math.round(a.allowed)), "num"), td(String(Math.round(a.denied)), "num")));
  fillTable("top", f.top, (t) => el("tr", {}, td(t.source), td(t.destination), td(t.method), td(t.path), td(String(t.count), "num"),
    td(fmt.pct(t.successRate), "num"), td(fmt.ms(t.bestMs), "num"), td(fmt.ms(t.worstMs), "num"), td(fmt.ms(t.lastMs), "num")));
}

// ---- tap ----

const pending = new Map();

function peer(meta, addr) {
  if (meta) for (const k of ["deployment", "statefulset", "daemonset", "pod"]) if (meta[k]) return meta[k];
  return addr || "-";
}

function onTap(events) {
  const body = document.querySelector("#tap tbody");
  for (const e of events) {
    const id = e.proxy + "/" + e.streamBase + "/" + e.stream;
    if (e.kind === "req") { pending.set(id, { req: e }); if (pending.size > 5000) pending.delete(pending.keys().next().value); continue; }
    const p = pending.get(id);
    if (!p) continue;
    if (e.kind === "rsp") { p.status = e.status; continue; }
    pending.delete(id);
    const r = p.req;
    const tls = r.sourceMeta && r.sourceMeta.tls === "true" || r.destinationMeta && r.destinationMeta.tls === "true";
    const row = el("tr", { class: p.status >= 400 ? "denied" : "", "data-tap-row": "1" },
      td(new Date().toLocaleTimeString()), td(r.proxy + " (" + (r.direction === "inbound" ? "in" : "out") + ")"), td(peer(r.sourceMeta, r.source)),
      td(peer(r.destinationMeta, r.destination)), td(r.method), td(r.authority), td(r.path), td(p.status ? String(p.status) : "-", "num"),
      td(fmt.ms((e.sinceRequestNs || 0) / 1e6), "num"), td(tls ? "yes" : "no"));
    body.insertBefore(row, body.firstChild);
  }
  while (body.children.length > MAX_TAP_ROWS) body.removeChild(body.lastChild);
}

// ---- frames ----

function onFrame(f) {
  lastFrame = f;
  document.getElementById("window").textContent = f.windowSeconds > 0 ? "(last " + f.windowSeconds.toFixed(0) + "s)" : "(since the proxies started)";
  const st = document.getElementById("status");
  st.textContent = f.nodes.length + " workloads · " + f.edges.length + " edges · updated " + new Date(f.at).toLocaleTimeString() +
    (f.unreachable.length ? " · " + f.unreachable.length + " proxies unreachable" : "");
  document.getElementById("tap-status").textContent = f.tap.enabled ? "(" + f.tap.streams + " taps open" + (f.stats.tapDropped ? ", " + f.stats.tapDropped + " events dropped" : "") + ")" : "(tap unavailable" + (f.tap.error ? ": " + f.tap.error : "") + ")";
  drawTopology(f);
  drawCharts(f);
  drawTables(f);
}

function connect() {
  const es = new EventSource("api/events");
  es.addEventListener("frame", (m) => onFrame(JSON.parse(m.data)));
  es.addEventListener("tap", (m) => onTap(JSON.parse(m.data)));
  es.onerror = () => { document.getElementById("status").textContent = "disconnected; retrying…"; };
}

document.getElementById("explain-close").addEventListener("click", () => document.getElementById("explain").classList.add("hidden"));
connect();
