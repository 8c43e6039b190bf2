// Runnel console: plain JavaScript, no framework. Every text from the
// broker goes into the page through textContent (never innerHTML).
"use strict";

const state = { session: null, timer: null };

function h(tag, attrs, ...kids) {
  const ns = tag.startsWith("svg:") ? "http://www.w3.org/2000/svg" : null;
  const el = ns ? document.createElementNS(ns, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function show(...nodes) {
  const view = document.getElementById("view");
  view.replaceChildren(...nodes);
}

function message(text, isError) {
  const m = document.getElementById("message");
  m.textContent = text;
  m.className = isError ? "error" : "";
  m.hidden = !text;
}

async function api(path, opts) {
  const o = { credentials: "same-origin", headers: {} };
  if (opts && opts.method === "POST") {
    o.method = "POST";
    o.headers["X-Runnel-Csrf"] = state.session.csrfToken;
    o.body = opts.body === undefined ? "" : opts.body;
  }
  const r = await fetch(path, o);
  let body = null;
  try { body = await r.json(); } catch (e) { body = { error: r.statusText }; }
  if (!r.ok) {
    const err = new Error(body && body.error ? body.error : "HTTP " + r.status);
    err.status = r.status;
    throw err;
  }
  return body;
}

function fmtBytes(n) {
  if (n === undefined || n === null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

function fmtTime(ms) {
  return ms >= 0 ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "";
}

function table(cols, rows, onRow) {
  const head = h("tr", {}, cols.map(c => h("th", { class: c.num ? "num" : null }, c.title)));
  const body = rows.map(r => h("tr", {
    class: onRow ? "link" : null,
    "data-key": onRow ? r.__key : null,
    onclick: onRow ? () => onRow(r) : null,
  }, cols.map(c => h("td", { class: c.num ? "num" : null }, c.get(r)))));
  return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
}

// ---- bytes: base64 from the API, shown as text, JSON or hex ---------------

function b64bytes(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

function hex(bytes) {
  const parts = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16), b => b.toString(16).padStart(2, "0"));
    parts.push(row.join(" "));
  }
  return parts.join("\n");
}

function renderBytes(field, mode) {
  if (field === null) return h("span", { class: "null" }, "null");
  const bytes = b64bytes(field.b64);
  let kind = mode;
  if (kind === "auto") kind = field.text ? "text" : "hex";
  if (kind !== "hex" && !field.text) kind = "hex";
  if (kind === "hex") return h("pre", { class: "val hex", "data-kind": "hex" }, hex(bytes));
  const text = new TextDecoder().decode(bytes);
  if (kind === "json") {
    try {
      return h("pre", { class: "val", "data-kind": "json" }, JSON.stringify(JSON.parse(text), null, 2));
    } catch (e) { /* not JSON: as text */ }
  }
  return h("pre", { class: "val", "data-kind": "text" }, text);
}

// ---- topics ----------------------------------------------------------------

async function viewTopics() {
  const { topics } = await api("/api/topics");
  show(h("h1", {}, "Topics"), table([
    { title: "Name", get: t => h("a", { href: "#/topics/" + encodeURIComponent(t.name) }, t.name) },
    { title: "Partitions", num: true, get: t => t.partitions },
    { title: "Records", num: true, get: t => t.records },
    { title: "Size", num: true, get: t => fmtBytes(t.size) },
    { title: "Internal", get: t => t.internal ? "yes" : "" },
  ], topics.map(t => Object.assign(t, { __key: t.name })),
  t => { location.hash = "#/topics/" + encodeURIComponent(t.name); }));
  document.querySelector("table").id = "topics-table";
}

function recordsForm(topic, partitions, out) {
  const part = h("select", { name: "partition" }, partitions.map(p => h("option", { value: p.partition }, p.partition)));
  const offset = h("input", { name: "offset", type: "number", min: 0, placeholder: "earliest" });
  const ts = h("input", { name: "timestamp", type: "datetime-local", step: 1 });
  const mode = h("select", { name: "mode" }, ["auto", "text", "json", "hex"].map(m => h("option", { value: m }, m)));
  const max = h("input", { name: "max", type: "number", min: 1, max: 100, value: 50 });
  let last = null;
  const load = async () => {
    const q = new URLSearchParams({ partition: part.value, max: max.value || 50 });
    if (offset.value !== "") q.set("offset", offset.value);
    else if (ts.value) q.set("timestamp", String(new Date(ts.value).getTime()));
    last = await api("/api/topics/" + encodeURIComponent(topic) + "/records?" + q);
    draw();
  };
  const draw = () => {
    if (!last) return;
    const rows = last.records.map(r => Object.assign(r, { __key: String(r.offset) }));
    const t = table([
      { title: "Offset", num: true, get: r => r.offset },
      { title: "Timestamp", get: r => fmtTime(r.timestamp) },
      { title: "Key", get: r => renderBytes(r.key, mode.value) },
      { title: "Value", get: r => renderBytes(r.value, mode.value) },
      { title: "Headers", get: r => r.headers.map(x => h("div", {}, x.key + ": ", renderBytes(x.value, mode.value))) },
    ], rows);
    t.id = "records-table";
    out.replaceChildren(
      h("p", { class: "muted" }, `partition ${last.partition}: offsets ${last.low}–${last.high}; showing ${rows.length}, next ${last.nextOffset}`),
      t,
      rows.length ? h("button", { type: "button", onclick: () => { offset.value = last.nextOffset; run(load); } }, "Next page") : null);
  };
  mode.addEventListener("change", draw);
  return h("form", { class: "bar", id: "records-form", onsubmit: e => { e.preventDefault(); run(load); } },
    h("label", {}, "Partition", part), h("label", {}, "From offset", offset),
    h("label", {}, "or from time", ts), h("label", {}, "Max", max), h("label", {}, "Show as", mode),
    h("button", { type: "submit", id: "load-records" }, "Load records"));
}

function produceForm(topic, partitions) {
  const part = h("select", { name: "partition" }, partitions.map(p => h("option", { value: p.partition }, p.partition)));
  const key = h("input", { name: "key", placeholder: "key (optional)" });
  const value = h("textarea", { name: "value", rows: 2, cols: 40, placeholder: "value" });
  const send = async () => {
    const q = new URLSearchParams({ partition: part.value });
    if (key.value !== "") q.set("key", key.value);
    const r = await api("/api/topics/" + encodeURIComponent(topic) + "/produce?" + q, { method: "POST", body: value.value });
    message(`Produced to partition ${r.partition} at offset ${r.offset}`);
  };
  return h("form", { class: "bar", id: "produce-form", onsubmit: e => { e.preventDefault(); run(send); } },
    h("label", {}, "Partition", part), h("label", {}, "Key", key), h("label", {}, "Value", value),
    h("button", { type: "submit", disabled: !state.session.writeEnabled }, "Produce test record"));
}

async function viewTopic(name) {
  const t = await api("/api/topics/" + encodeURIComponent(name));
  const records = h("div", { id: "records" });
  show(
    h("h1", {}, "Topic ", h("span", { id: "topic-name" }, t.name)),
    h("p", { class: "muted" }, "Topic id " + t.topicId),
    h("h2", {}, "Partitions"),
    table([
      { title: "Partition", num: true, get: p => p.partition },
      { title: "Leader", num: true, get: p => p.leader },
      { title: "Replicas", get: p => p.replicas.join(", ") },
      { title: "ISR", get: p => p.isr.join(", ") },
      { title: "Low watermark", num: true, get: p => p.online ? p.low : "loading" },
      { title: "High watermark", num: true, get: p => p.online ? p.high : "" },
      { title: "Size", num: true, get: p => fmtBytes(p.size) },
    ], t.partitions),
    h("h2", {}, "Records"),
    recordsForm(t.name, t.partitions, records),
    records,
    h("h2", {}, "Produce a test record"),
    produceForm(t.name, t.partitions),
    h("details", {}, h("summary", {}, `Configs (${t.configs.length})`),
      table([
        { title: "Name", get: c => c.name },
        { title: "Value", get: c => c.value },
        { title: "Source", get: c => c.source },
      ], t.configs)));
}

// ---- groups ----------------------------------------------------------------

// The lag verdicts of docs/lag.md: OK is quiet, the rest stand out.
function statusBadge(status) {
  return h("span", { class: "status " + (status === "OK" ? "ok" : "bad") }, status);
}

function fmtLagTime(ms) {
  if (ms < 0) return "?";
  if (ms < 1000) return ms + " ms";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
  return Math.round(ms / 60000) + " min";
}

async function viewGroups() {
  const { groups } = await api("/api/groups");
  const t = table([
    { title: "Group", get: g => h("a", { href: "#/groups/" + encodeURIComponent(g.groupId) }, g.groupId) },
    { title: "Type", get: g => g.type },
    { title: "State", get: g => g.state },
    { title: "Members", num: true, get: g => g.members },
    { title: "Partitions", num: true, get: g => g.partitions },
    { title: "Lag", num: true, get: g => g.lag },
    { title: "Status", get: g => statusBadge(g.status) },
  ], groups.map(g => Object.assign(g, { __key: g.groupId })),
  g => { location.hash = "#/groups/" + encodeURIComponent(g.groupId); });
  t.id = "groups-table";
  show(h("h1", {}, "Groups"), t);
}

function lagChart(points) {
  const W = 720, H = 220, L = 56, R = 12, T = 12, B = 28;
  const svg = h("svg:svg", { class: "chart", id: "lag-chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "lag over time" });
  if (points.length === 0) {
    svg.append(h("svg:text", { x: L, y: H / 2 }, "no lag samples yet"));
    return svg;
  }
  const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 1000);
  const step = Math.max(1, Math.ceil(Math.max(...points.map(p => p[1])) / 4));
  const maxLag = step * 4; // whole-number ticks
  const x = t => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = v => H - B - (H - T - B) * v / maxLag;
  for (let i = 0; i <= 4; i++) {
    const v = step * i;
    svg.append(h("svg:line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }),
      h("svg:text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v));
  }
  svg.append(h("svg:line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }),
    h("svg:line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }),
    h("svg:text", { x: L, y: H - 8 }, new Date(t0).toLocaleTimeString()),
    h("svg:text", { x: W - R, y: H - 8, "text-anchor": "end" }, new Date(t1).toLocaleTimeString()));
  const path = points.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
  svg.append(h("svg:path", { class: "area", d: `${path} L${x(points[points.length - 1][0]).toFixed(1)} ${H - B} L${L} ${H - B} Z` }),
    h("svg:path", { class: "line", d: path }));
  for (const p of points) svg.append(h("svg:circle", { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2.5, fill: "#1565c0" }, h("svg:title", {}, `${fmtTime(p[0])}: ${p[1]}`)));
  return svg;
}

function resetForm(g) {
  const to = h("select", { name: "to", id: "reset-to" }, ["earliest", "latest", "timestamp"].map(v => h("option", { value: v }, v)));
  const ts = h("input", { name: "timestamp", type: "datetime-local", step: 1 });
  const reset = async () => {
    const q = new URLSearchParams({ to: to.value });
    if (to.value === "timestamp") q.set("timestamp", String(new Date(ts.value).getTime()));
    const r = await api("/api/groups/" + encodeURIComponent(g.groupId) + "/reset?" + q, { method: "POST" });
    message(`Reset ${r.offsets.length} partition(s) of ${g.groupId} to ${to.value}`);
    route(true);
  };
  return h("form", { class: "bar", id: "reset-form", onsubmit: e => { e.preventDefault(); run(reset); } },
    h("label", {}, "Reset offsets to", to), h("label", {}, "Time (for timestamp)", ts),
    h("button", { type: "submit", id: "reset-button" }, "Reset offsets"),
    h("span", { class: "muted" }, g.empty ? "" : "the group has members: it must be empty"),
    state.session.writeEnabled ? null : h("span", { class: "muted" }, " (writes are disabled)"));
}

async function viewGroup(id) {
  const g = await api("/api/groups/" + encodeURIComponent(id));
  show(
    h("h1", {}, "Group ", h("span", { id: "group-name" }, g.groupId)),
    h("div", { class: "cards" },
      h("div", { class: "card" }, "State", h("b", { id: "group-state" }, g.state)),
      h("div", { class: "card" }, "Type", h("b", {}, g.type)),
      h("div", { class: "card" }, g.type === "consumer" ? "Group epoch" : "Generation", h("b", {}, g.epoch)),
      h("div", { class: "card" }, "Total lag", h("b", { id: "group-lag" }, g.lag)),
      h("div", { class: "card" }, "Lag status", h("b", { id: "group-status" }, statusBadge(g.status)))),
    h("h2", {}, "Lag over time"),
    lagChart(g.lagHistory),
    h("h2", {}, "Offsets and lag per partition"),
    Object.assign(table([
      { title: "Topic", get: o => o.topic },
      { title: "Partition", num: true, get: o => o.partition },
      { title: "Committed", num: true, get: o => o.committed },
      { title: "High watermark", num: true, get: o => o.high },
      { title: "Lag", num: true, get: o => o.lag },
      { title: "Lag time", num: true, get: o => fmtLagTime(o.lagMs) },
      { title: "Status", get: o => statusBadge(o.status) },
      { title: "Committed at", get: o => fmtTime(o.commitTimestamp) },
    ], g.offsets), { id: "offsets-table" }),
    h("h2", {}, `Members (${g.members.length})`),
    table([
      { title: "Member", get: m => m.memberId },
      { title: "Client", get: m => m.clientId },
      { title: "Host", get: m => m.host },
      { title: "Assignment", get: m => (m.assignment || []).map(a => a.topic + ": " + a.partitions.join(",")).join("; ") },
    ], g.members),
    h("h2", {}, "Reset offsets"),
    resetForm(g));
  state.timer = setTimeout(() => route(true), 2000);
}

// ---- brokers ---------------------------------------------------------------

async function viewBrokers() {
  const c = await api("/api/cluster");
  show(h("h1", {}, "Cluster ", c.clusterId),
    h("div", { class: "cards" },
      h("div", { class: "card" }, "Mode", h("b", {}, c.mode)),
      h("div", { class: "card" }, "Controller", h("b", {}, c.controllerId)),
      h("div", { class: "card" }, "Topics", h("b", {}, c.topics)),
      h("div", { class: "card" }, "Partitions", h("b", {}, c.partitions)),
      h("div", { class: "card" }, "Groups", h("b", {}, c.groups))),
    h("h2", {}, "Brokers"),
    table([
      { title: "Node", num: true, get: b => b.nodeId },
      { title: "Version", get: b => b.version },
      { title: "Listeners", get: b => b.listeners.map(l => `${l.name} ${l.host}:${l.port} (${l.securityProtocol})`).join("; ") },
    ], c.brokers));
}

// ---- routing ---------------------------------------------------------------

async function run(fn) {
  try {
    await fn();
  } catch (e) {
    message(e.message, true);
  }
}

// A banner while retention has deleted records some group had not read.
async function guardBanner() {
  const s = await api("/api/session");
  const g = s.retentionGuard, el = document.getElementById("guard-banner");
  el.hidden = !(g && g.warnings > 0);
  if (!el.hidden)
    el.textContent = `Retention deleted ${g.recordsLost} record(s) that consumer groups had not read ` +
      `(${g.warnings} time(s) since start, runnel.retention.guard=${g.mode}); the broker log names the groups.`;
}

function route(refresh) {
  clearTimeout(state.timer);
  if (!refresh) message("");
  guardBanner().catch(() => {});
  const parts = (location.hash || "#/topics").slice(2).split("/").map(decodeURIComponent);
  document.querySelectorAll("[data-nav]").forEach(a => a.classList.toggle("active", a.dataset.nav === parts[0]));
  if (parts[0] === "topics" && parts[1]) return run(() => viewTopic(parts[1]));
  if (parts[0] === "groups" && parts[1]) return run(() => viewGroup(parts[1]));
  if (parts[0] === "groups") return run(viewGroups);
  if (parts[0] === "brokers") return run(viewBrokers);
  return run(viewTopics);
}

async function start() {
  try {
    state.session = await api("/api/session");
  } catch (e) {
    show(h("p", { class: "error" }, "Cannot reach the console API: " + e.message));
    return;
  }
  document.getElementById("who").textContent = state.session.principal || "";
  const mode = document.getElementById("mode");
  mode.textContent = state.session.writeEnabled ? "writes enabled" : "read-only";
  mode.classList.toggle("write", state.session.writeEnabled);
  window.addEventListener("hashchange", () => route());
  route();
}

start();
