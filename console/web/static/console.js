// The ward console: the board of wearers, the live alert list, one alert's
// page and the system's health, from the daemon's JSON API (docs/console.md).
// Live updates come as server-sent events (/api/stream); every change sends
// the session's CSRF token. Nothing here is loaded from elsewhere: a base
// station is often offline.
"use strict";

const state = {
  user: null,
  role: "viewer",
  csrf: "",
  wearers: [],
  alerts: [],
  showResolved: false,
  route: "board",
  alertSeqShown: null,
};

const roleRank = { viewer: 0, carer: 1, admin: 2 };
const may = (role) => roleRank[state.role] >= roleRank[role];

// ---- the API ---------------------------------------------------------------

async function api(path, body) {
  const options = { credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.headers["X-CSRF-Token"] = state.csrf;
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  if (response.status === 401) {
    window.location.href = "/login.html";
    throw new Error("the session has ended");
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = (answer.error && answer.error.message) || response.statusText;
    throw new Error(message);
  }
  return answer;
}

// ---- small helpers ---------------------------------------------------------

function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function toast(text, kind) {
  const box = document.getElementById("toast");
  box.textContent = text;
  box.className = "toast " + (kind || "");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => box.classList.add("hidden"), 4000);
}

function wearerName(id, fallbackName) {
  if (fallbackName) return fallbackName;
  const w = state.wearers.find((x) => x.id === id);
  return w && w.display_name ? w.display_name : "wearer " + id;
}

// What the alert is, for a row: kind and pattern, and where under the foot
// for a pressure hotspot (region and foot are set only on those).
function alertWhat(a) {
  const where = a.region ? ", " + (a.foot ? a.foot + " " : "") + a.region.replace(/_/g, " ") : "";
  return a.kind + " (" + a.pattern + where + ")";
}

function timeText(alert) {
  const iso = alert.detected_at_iso || "";
  return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace(/([+-]\d\d:\d\d|Z)$/, "") : "";
}

function stateBadge(s) {
  const level = s.escalation_level ? " (escalated " + s.escalation_level + ")" : "";
  return el("span", { class: "badge state-" + s.state }, s.state + level);
}

// ---- loading ---------------------------------------------------------------

async function loadWearers() {
  const answer = await api("/api/wearers");
  state.wearers = answer.wearers || [];
}

async function loadAlerts() {
  const query = state.showResolved ? "?include_resolved=true&limit=500" : "?limit=500";
  const answer = await api("/api/alerts" + query);
  state.alerts = answer.alerts || [];
}

async function refresh() {
  try {
    await Promise.all([loadWearers(), loadAlerts()]);
    render();
  } catch (e) {
    toast(e.message, "bad");
  }
}

// ---- actions ---------------------------------------------------------------

async function act(seq, action, body) {
  try {
    await api("/api/alerts/" + seq + "/" + action, body || {});
    toast("alert " + seq + ": " + action + " done", "good");
    await refresh();
    if (state.route === "alert") await showAlert(seq);
  } catch (e) {
    toast("alert " + seq + ": " + e.message, "bad");
    const box = document.getElementById("alert-error");
    if (box) box.textContent = e.message;
  }
}

function actionButtons(row) {
  const seq = row.alert.seq;
  const s = row.state.state;
  const box = el("span", { class: "buttons" });
  if (!may("carer")) return box;
  if (s === "new")
    box.append(el("button", { type: "button", class: "ack", "data-seq": seq,
                              onclick: () => act(seq, "ack") }, "Acknowledge"));
  if (s !== "resolved")
    box.append(el("button", { type: "button", class: "resolve", "data-seq": seq,
                              onclick: () => act(seq, "resolve") }, "Resolve"));
  if (row.alert.kind === "sensor_offline") return box;  // no window: nothing to learn from
  box.append(el("button", { type: "button", class: "mark-true", "data-seq": seq,
                            onclick: () => act(seq, "mark", { verdict: "true" }) }, "Real"));
  box.append(el("button", { type: "button", class: "mark-false", "data-seq": seq,
                            onclick: () => act(seq, "mark", { verdict: "false" }) }, "False alarm"));
  return box;
}

// ---- views -----------------------------------------------------------------

function renderBoard() {
  const board = document.getElementById("board");
  board.replaceChildren();
  if (state.wearers.length === 0)
    board.append(el("p", { class: "hint" }, "No wearer yet: none registered and no sensor has sent."));
  for (const w of state.wearers) {
    const last = state.alerts.find((row) => row.alert.wearer === w.id);
    const devices = el("ul", { class: "devices" });
    for (const d of w.devices || [])
      devices.append(el("li", {},
                        el("span", { class: "badge sensor-" + d.state, "data-wearer": w.id }, d.state),
                        " device " + d.device +
                            (d.silent_s !== undefined && d.silent_s !== null
                                 ? ", last frame " + Math.round(d.silent_s) + " s ago" : "")));
    if ((w.devices || []).length === 0) devices.append(el("li", { class: "hint" }, "no sensor seen yet"));
    const place = [w.room ? "room " + w.room : "", w.bed ? "bed " + w.bed : ""].filter(Boolean).join(", ");
    board.append(el("article", { class: "card" + (w.active === false ? " inactive" : ""),
                                 id: "wearer-" + w.id },
                    el("h3", {}, wearerName(w.id, w.display_name)),
                    el("p", { class: "place" }, place || (w.registered ? "" : "not registered")),
                    devices,
                    el("p", { class: "last-alert" },
                       last ? el("a", { href: "#/alert/" + last.alert.seq },
                                 "last alert: " + last.alert.kind + " (" + last.alert.severity + ") " +
                                     timeText(last.alert))
                            : "no open alert")));
  }
  const body = document.querySelector("#board-alerts tbody");
  body.replaceChildren();
  for (const row of state.alerts.filter((r) => r.state.state !== "resolved")) {
    const a = row.alert;
    body.append(el("tr", { class: "alert-row severity-" + a.severity, "data-seq": a.seq },
                   el("td", {}, timeText(a)),
                   el("td", {}, wearerName(a.wearer, a.wearer_name)),
                   el("td", {}, el("a", { href: "#/alert/" + a.seq }, alertWhat(a))),
                   el("td", {}, el("span", { class: "badge severity " + a.severity }, a.severity)),
                   el("td", {}, stateBadge(row.state)),
                   el("td", {}, actionButtons(row))));
  }
}

function renderAlertList() {
  const body = document.querySelector("#alert-list tbody");
  body.replaceChildren();
  for (const row of state.alerts) {
    const a = row.alert;
    body.append(el("tr", { class: "alert-row severity-" + a.severity, "data-seq": a.seq },
                   el("td", {}, el("a", { href: "#/alert/" + a.seq }, String(a.seq))),
                   el("td", {}, timeText(a)),
                   el("td", {}, wearerName(a.wearer, a.wearer_name)),
                   el("td", {}, alertWhat(a)),
                   el("td", {}, el("span", { class: "badge severity " + a.severity }, a.severity)),
                   el("td", {}, stateBadge(row.state)),
                   el("td", {}, actionButtons(row))));
  }
}

function drawSignal(container, signal) {
  container.replaceChildren();
  const total = signal.lead_in + signal.length;
  for (const channel of signal.channels) {
    const canvas = el("canvas", { width: 900, height: 140, class: "signal",
                                  "aria-label": "channel " + channel.channel });
    container.append(el("p", { class: "channel-name" }, channel.channel), canvas);
    const g = canvas.getContext("2d");
    const values = channel.values;
    let lo = Math.min(...values), hi = Math.max(...values);
    if (!(hi > lo)) { hi = lo + 1; }
    const x = (k) => 40 + (k / Math.max(1, total - 1)) * (canvas.width - 50);
    const y = (v) => canvas.height - 10 - ((v - lo) / (hi - lo)) * (canvas.height - 20);
    g.fillStyle = "#fde7c7";
    g.fillRect(x(signal.lead_in), 0, x(total - 1) - x(signal.lead_in), canvas.height);
    g.strokeStyle = "#999";
    g.strokeRect(40, 0, canvas.width - 50, canvas.height);
    g.fillStyle = "#333";
    g.font = "11px sans-serif";
    g.fillText(hi.toPrecision(3), 2, 12);
    g.fillText(lo.toPrecision(3), 2, canvas.height - 4);
    g.strokeStyle = "#1f5fa8";
    g.lineWidth = 1.5;
    g.beginPath();
    values.forEach((v, k) => (k === 0 ? g.moveTo(x(k), y(v)) : g.lineTo(x(k), y(v))));
    g.stroke();
  }
  if (signal.rate_hz)
    container.append(el("p", { class: "hint" },
                        (total / signal.rate_hz).toFixed(1) + " s at " + signal.rate_hz + " Hz; matched part " +
                            (signal.length / signal.rate_hz).toFixed(1) + " s"));
}

function drawMatch(container, match) {
  container.replaceChildren();
  if (match.approximate)
    container.append(el("p", { class: "hint" },
                        "Drawn approximately: the pattern normalises per wearer (the baseline is not stored), or a dimension's match began before the stored window."));
  for (const d of match.dims) {
    const canvas = el("canvas", { width: 900, height: 200, class: "signal match",
                                  "aria-label": "dim " + d.pattern_dim + " against the example" });
    container.append(el("p", { class: "channel-name" },
                        "dim " + d.pattern_dim + " on " + d.channel + ", example " + match.example +
                            ", DTW distance " + Number(d.distance).toFixed(3)), canvas);
    const g = canvas.getContext("2d");
    const m = d.window.length;
    const range = (values) => {
      let lo = Math.min(...values), hi = Math.max(...values);
      if (!(hi > lo)) hi = lo + 1;
      return [lo, hi];
    };
    const [qlo, qhi] = range(d.example), [wlo, whi] = range(d.window);
    const x = (k) => 10 + (k / Math.max(1, m - 1)) * (canvas.width - 20);
    const yq = (v) => 10 + (1 - (v - qlo) / (qhi - qlo)) * 70;
    const yw = (v) => 115 + (1 - (v - wlo) / (whi - wlo)) * 75;
    g.strokeStyle = "#c5ccd6";
    g.lineWidth = 1;
    const stride = Math.max(1, Math.floor(d.path.length / 60));
    for (let p = 0; p < d.path.length; p += stride) {
      const [i, j] = d.path[p];
      g.beginPath();
      g.moveTo(x(i), yq(d.example[i]));
      g.lineTo(x(j), yw(d.window[j]));
      g.stroke();
    }
    const curve = (values, y, colour) => {
      g.strokeStyle = colour;
      g.lineWidth = 1.5;
      g.beginPath();
      values.forEach((v, k) => (k === 0 ? g.moveTo(x(k), y(v)) : g.lineTo(x(k), y(v))));
      g.stroke();
    };
    curve(d.example, yq, "#8d4f00");
    curve(d.window, yw, "#1f5fa8");
  }
}

async function showAlert(seq) {
  state.alertSeqShown = seq;
  const title = document.getElementById("alert-title");
  const facts = document.getElementById("alert-facts");
  const actions = document.getElementById("alert-actions");
  const events = document.getElementById("alert-events");
  const dims = document.querySelector("#alert-dims tbody");
  document.getElementById("alert-error").textContent = "";
  let answer;
  try {
    answer = await api("/api/alerts/" + seq);
  } catch (e) {
    title.textContent = "alert " + seq;
    document.getElementById("alert-error").textContent = e.message;
    return;
  }
  const a = answer.alert;
  title.textContent = "Alert " + a.seq + ": " + a.kind + " of " + wearerName(a.wearer, a.wearer_name);
  actions.replaceChildren(stateBadge(answer.state), " ", actionButtons({ alert: a, state: answer.state }));
  facts.replaceChildren();
  const fact = (name, value) => facts.append(el("dt", {}, name), el("dd", {}, value));
  fact("Detected", timeText(a) + " " + (a.zone || ""));
  fact("Wearer", wearerName(a.wearer, a.wearer_name) + " (id " + a.wearer + ", device " + a.device + ")");
  fact("Pattern", a.pattern + " (" + a.kind + ", " + a.severity + ")");
  if (a.region) fact("Where", (a.foot ? a.foot + " foot, " : "") + a.region.replace(/_/g, " "));
  fact("Distance", Number(a.distance).toFixed(3) + ", " + a.matched_dims + " of " + a.pattern_dims + " dims");
  fact("Latency", Math.round(a.latency_ms) + " ms from the sample to the alert");
  const s = answer.state;
  if (s.acknowledged_by) fact("Acknowledged", s.acknowledged_by);
  if (s.resolved_by) fact("Resolved", s.resolved_by);
  const activeMarks = (answer.marks || []).filter((m) => !m.withdrawn_at);
  if (activeMarks.length) fact("Marked", activeMarks.map((m) => (m.verdict === "true" ? "real" : "false alarm")).join(", "));
  events.replaceChildren();
  for (const e of answer.events || [])
    events.append(el("li", {}, (e.at_iso || "").replace("T", " ").replace(/\.\d+.*/, "") + " " +
                                   e.type.replace("alert_", "") + " by " + e.actor +
                                   (e.details && e.details.note ? ": " + e.details.note : "")));
  if ((answer.events || []).length === 0) events.append(el("li", { class: "hint" }, "nothing yet"));
  dims.replaceChildren();
  const signalBox = document.getElementById("alert-signal");
  try {
    const signal = await api("/api/alerts/" + seq + "/signal");
    for (const d of signal.dims || [])
      dims.append(el("tr", {}, el("td", {}, d.pattern_dim),
                     el("td", {}, signal.channels[d.pattern_dim] ? signal.channels[d.pattern_dim].channel : d.stream_dim),
                     el("td", {}, Number(d.distance).toFixed(3))));
    drawSignal(signalBox, signal);
  } catch (e) {
    signalBox.replaceChildren(el("p", { class: "hint" }, "no signal stored: " + e.message));
  }
  const matchBox = document.getElementById("alert-match");
  try {
    drawMatch(matchBox, await api("/api/alerts/" + seq + "/match"));
  } catch (e) {
    matchBox.replaceChildren(el("p", { class: "hint" }, "not available: " + e.message));
  }
}

async function showHealth() {
  const box = document.getElementById("health");
  let status;
  try {
    status = await api("/api/health");
  } catch (e) {
    box.replaceChildren(el("p", { class: "error" }, e.message));
    return;
  }
  box.replaceChildren();
  const pick = (obj, path) => path.split(".").reduce((o, k) => (o && o[k] !== undefined ? o[k] : undefined), obj);
  const rows = [
    ["Search backend", pick(status, "engine.backend")],
    ["Deadline misses", pick(status, "engine.deadline_misses")],
    ["Ticks", pick(status, "engine.ticks")],
    ["Frame queue depth", pick(status, "ingest.queue_depth")],
    ["Frames accepted", pick(status, "ingest.frames")],
    ["Malformed frames", pick(status, "ingest.malformed")],
    ["Alerts committed", pick(status, "sink.committed")],
    ["Alerts waiting to be stored", pick(status, "sink.pending")],
    ["Alert latency p50 (ms)", pick(status, "latency.alert_p50_ms")],
    ["Alert latency p99 (ms)", pick(status, "latency.alert_p99_ms")],
    ["Control queue", pick(status, "control.pipeline_queue_depth")],
    ["Console sessions", pick(status, "console.sessions")],
  ];
  const table = el("table", { class: "plain", id: "health-summary" });
  for (const [name, value] of rows)
    if (value !== undefined) table.append(el("tr", {}, el("th", {}, name),
                                             el("td", {}, typeof value === "number" ? +value.toFixed(3) : String(value))));
  box.append(table);
  for (const section of ["engine", "ingest", "sink", "wearers", "bridges", "console"]) {
    if (!status[section] || typeof status[section] !== "object") continue;
    const details = el("details", {}, el("summary", {}, section));
    const t = el("table", { class: "plain" });
    const walk = (obj, prefix) => {
      for (const [k, v] of Object.entries(obj)) {
        if (v && typeof v === "object" && !Array.isArray(v)) walk(v, prefix + k + ".");
        else t.append(el("tr", {}, el("th", {}, prefix + k), el("td", {}, JSON.stringify(v))));
      }
    };
    walk(status[section], "");
    details.append(t);
    box.append(details);
  }
}

function render() {
  if (state.route === "board") renderBoard();
  if (state.route === "alerts") renderAlertList();
}

function route() {
  const hash = window.location.hash || "#/board";
  const match = hash.match(/^#\/alert\/(\d+)$/);
  state.route = match ? "alert" : hash.replace("#/", "");
  if (!["board", "alerts", "alert", "health"].includes(state.route)) state.route = "board";
  for (const view of document.querySelectorAll(".view")) view.classList.add("hidden");
  document.getElementById("view-" + state.route).classList.remove("hidden");
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("current", link.id === "nav-" + state.route);
  if (state.route === "alert") showAlert(Number(match[1]));
  else if (state.route === "health") showHealth();
  else render();
}

// ---- live updates ----------------------------------------------------------

function connectStream() {
  const live = document.getElementById("live");
  const source = new EventSource("/api/stream");
  source.onopen = () => { live.textContent = "live"; live.className = "live on"; refresh(); };
  source.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
  source.addEventListener("alert", (event) => {
    const alert = JSON.parse(event.data);
    toast("new alert: " + alert.kind + " of " + wearerName(alert.wearer, alert.wearer_name),
          alert.severity === "critical" ? "bad" : "");
    refresh();
  });
  source.addEventListener("event", (event) => {
    const e = JSON.parse(event.data);
    refresh();
    if (state.route === "alert" && e.alert_seq === state.alertSeqShown) showAlert(e.alert_seq);
  });
}

// Admins register wearers and change their names, rooms and beds; a
// number already registered is changed, a new one added.
function setUpWearerForm() {
  if (!may("admin")) return;
  document.getElementById("wearer-admin").classList.remove("hidden");
  const field = (id) => document.getElementById(id);
  field("wearer-id").addEventListener("change", () => {
    const w = state.wearers.find((x) => x.id === Number(field("wearer-id").value) && x.registered);
    if (!w) return;
    field("wearer-name").value = w.display_name || "";
    field("wearer-room").value = w.room || "";
    field("wearer-bed").value = w.bed || "";
    field("wearer-notes").value = w.notes || "";
    field("wearer-active").checked = w.active !== false;
  });
  field("wearer-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    field("wearer-error").textContent = "";
    const id = Number(field("wearer-id").value);
    const body = {
      display_name: field("wearer-name").value,
      room: field("wearer-room").value,
      bed: field("wearer-bed").value,
      notes: field("wearer-notes").value,
      active: field("wearer-active").checked,
    };
    const known = state.wearers.some((x) => x.id === id && x.registered);
    try {
      if (known) await api("/api/wearers/" + id, body);
      else await api("/api/wearers", Object.assign({ id }, body));
      toast("wearer " + id + " saved", "good");
      await refresh();
    } catch (e) {
      field("wearer-error").textContent = e.message;
    }
  });
}

async function start() {
  try {
    const session = await api("/api/session");
    state.user = session.user;
    state.role = session.role;
    state.csrf = session.csrf;
  } catch (e) {
    return;  // api() has gone to the login page
  }
  document.getElementById("who").textContent = state.user + " (" + state.role + ")";
  document.getElementById("logout").addEventListener("click", async () => {
    try { await api("/api/logout", {}); } catch (e) { /* gone anyway */ }
    window.location.href = "/login.html";
  });
  document.getElementById("show-resolved").addEventListener("change", (event) => {
    state.showResolved = event.target.checked;
    refresh();
  });
  window.addEventListener("hashchange", route);
  setUpWearerForm();
  await refresh();
  route();
  connectStream();
  // Sensor states change without events (a quiet sensor turns stale first).
  setInterval(() => { if (state.route === "board") refresh(); }, 5000);
}

start();
