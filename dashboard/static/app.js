// chronoq dashboard: vanilla JS over the JSON API, kept live by the event
// stream (GET /v1/events, Server-Sent Events) rather than by polling.
//
// How it fits together (add a view in three steps: a <div data-view="x">
// in index.html, an entry in `views` below, a route in `routes`):
// - routes: hash routes ("#/queues", "#/queues/{queue}",
//   "#/queues/{queue}/jobs/{id}", "#/queues/{queue}/flow/{key}",
//   "#/workers", "#/workers/after/{cursor}",
//   "#/workflows", "#/workflows/{id}", "#/webhooks", "#/webhooks/{id}")
//   name a view and its parameters; route()
//   shows that view's <div data-view> and hides the others.
// - views: {enter(params), leave(), load(), event(type, data)}: enter when
//   shown, load to read its data again (each full resync), event for each
//   job event while it is shown.
// - stream(url, opts): an EventSource kept open, reopened after a growing
//   delay (BACKOFF_MS) on an error. The browser sends the session cookie
//   with it, as with every fetch (an EventSource cannot send an
//   Authorization header). A view with a stream of its own opens it with
//   stream() in enter and closes it in leave (the job page does: its log,
//   progress and status, resuming after the last log line it shows: url
//   may be a function, called at each reopen).
// - live: the page's stream, /v1/events for every queue. Each event moves
//   the queue counts at once (applyEvent), feeds the charts, then goes to
//   the shown view. Each time it opens, everything is read again, since
//   the events of while it was down are lost.
// - sync: what an event cannot tell (a cancel's previous status, the next
//   scheduled time, the new oldest pending job) makes a re-read of the
//   queue stats, at most every SOON_MS; and everything is read again every
//   RESYNC_MS, so a missed event never leaves a number stale for long.
// - workers: the registry has no event stream; the workers view reads its
//   page every WORKERS_MS while shown, and WORKERS_EVENT_MS after a job
//   event that may have changed what a worker holds (a claim, or any event
//   of a job a listed worker holds), at most every WORKERS_SOON_MS.
// - flow: the selected queue's flow keys (the FLOW_TOP with the most
//   jobs, how many have jobs, the queue's flow limits) and a picked key's
//   jobs, read again after the queue's events, at most every FLOW_MS.
// - webhooks: the event webhook subscriptions, and one's dead deliveries
//   (#/webhooks/{id}), read every WORKERS_MS while shown.
// - workflows: a workflow's page draws its graph (layered by depth) and
//   moves each node's box on its job's events; the workflow (or the list
//   of them) is read again on those events, at most every WF_MS.
"use strict";
(function () {
  const RESYNC_MS = 30000;  // everything read again, whatever the events said
  const SOON_MS = 2000;     // queue stats read again after an uncertain event, at most this often
  const LIST_MS = 500;      // the shown job list, job or demo read again after an event, at most this often
  const DEMO_SETTLE_MS = 1000; // the demo's counters read again when its events have been quiet this long
  const BACKOFF_MS = [1000, 2000, 5000, 10000, 30000]; // reconnect delays, by attempt (±25 %)
  const WINDOW_S = 180;     // chart history, seconds
  const RATE_S = 5;         // throughput averaged over this many seconds
  const MAX_SERIES = 8;     // queues drawn per chart (the busiest)
  const COLORS = ["#2563eb", "#d97706", "#15803d", "#b91c1c", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
  const MAX_KNOWN = 10000;  // jobs whose last status the page keeps
  const MAX_KEPT = 3;       // reads in a row that may leave a queue's event-moved counts as they are
  const LIMIT = 50;         // jobs listed per tab
  const WORKERS_LIMIT = 50; // workers listed per page
  const WORKERS_MS = 5000;  // the workers page read again this often while shown
  const WORKERS_EVENT_MS = 1200; // ... and this long after a job event that concerns it (Go workers tell the registry within 1 s)
  const WORKERS_SOON_MS = 1000;  // ... at most this often
  const EVENT_TYPES = ["enqueued", "promoted", "claimed", "completed", "retried", "dead", "reclaimed", "released",
    "canceled", "rescheduled", "run_now", "deleted", "ready", "rearmed"];
  const DEPTHS = new Set(["scheduled", "pending", "processing", "dead"]);
  const FINISHED = new Set(["completed", "dead", "canceled"]); // a job's stream ends after these
  const FLOW_TOP = 20;      // flow keys listed, the most jobs first
  const FLOW_JOBS = 50;     // a flow key's pending (and processing) jobs listed
  const FLOW_MS = 2000;     // the flow keys read again after an event of their queue, at most this often
  const WF_MS = 1000;       // the shown workflow (or list of them) read again after an event of its jobs, at most this often
  const WF_MAX_DRAWN = 200; // a workflow with more nodes is listed, not drawn
  const WF_BOX = { w: 190, h: 60, gx: 72, gy: 14, pad: 12 }; // a node's box, the gaps between columns and rows, the margin

  const state = {
    queues: new Map(),  // name -> the queue's JSON (GET /v1/queues), moved by events; _at: when its lateness was known
    history: new Map(), // name -> {done: Map(second -> completions), samples: [{t, rate, late}]}
    queue: "", tab: "scheduled", jobs: [],
    demo: undefined,    // the demo's status; null: no demo routes
    cron: undefined,    // null: no cron routes
    view: null, params: {},
    events: 0,          // events received; a read that events overtook is done again
    queuesRead: false,  // the queues have been read once: until then the list says "Loading…"
  };
  const $ = (id) => document.getElementById(id);

  // el builds an element: el("td", {class: "x"}, "text", child...).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  const NS = "http://www.w3.org/2000/svg";
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // api calls the JSON API; it throws an Error carrying the API's error.
  async function api(method, path, body) {
    const opt = { method, headers: {}, credentials: "same-origin" };
    if (body !== undefined) {
      opt.headers["Content-Type"] = "application/json";
      opt.body = JSON.stringify(body);
    }
    const r = await fetch(path, opt);
    const txt = await r.text();
    let data = null;
    if (txt) { try { data = JSON.parse(txt); } catch (_) { data = null; } }
    $("auth").hidden = r.status !== 401;
    if (!r.ok) {
      const e = data && data.error;
      const err = new Error(e ? e.code + ": " + e.message + (e.field ? " (" + e.field + ")" : "") : "HTTP " + r.status);
      err.status = r.status;
      throw err;
    }
    return data;
  }
  const or404 = (p) => p.catch((e) => { if (e.status === 404) return null; throw e; });

  // throttle runs fn at most once per ms: at once when it last ran longer
  // ago, else ms after that run; calls meanwhile fold into one run.
  function throttle(fn, ms) {
    let last = 0, timer = 0, running = false, again = false;
    async function run() {
      timer = 0;
      if (running) { again = true; return; }
      running = true;
      last = Date.now();
      try { await fn(); } catch (e) { report(e); } finally {
        running = false;
        if (again) { again = false; t(); }
      }
    }
    function t() { if (!timer) timer = setTimeout(run, Math.max(0, last + ms - Date.now())); }
    t.cancel = () => { clearTimeout(timer); timer = 0; again = false; };
    return t;
  }

  let msgTimer = 0;
  function say(text, ok) {
    const m = $("msg");
    m.textContent = text;
    m.className = ok ? "ok" : "err";
    clearTimeout(msgTimer);
    msgTimer = setTimeout(() => { m.textContent = ""; }, 6000);
  }
  function report(e) { if (e && e.status !== 401) say(e.message, false); }

  // act runs an action, reports it, and reads everything again (not every
  // action makes an event: pause, resume, the demo pool).
  async function act(label, fn) {
    try {
      const r = await fn();
      say(label + (typeof r === "string" ? ": " + r : ""), true);
    } catch (e) {
      say(label + " failed: " + e.message, false);
    }
    resync();
  }

  // Times ----------------------------------------------------------------

  function rel(iso) {
    if (!iso) return "—";
    const d = (Date.parse(iso) - Date.now()) / 1000;
    const a = Math.abs(d);
    const s = a < 1 ? "now" : a < 90 ? Math.round(a) + "s" : a < 5400 ? Math.round(a / 60) + "m" : Math.round(a / 3600) + "h";
    if (s === "now") return s;
    return d > 0 ? "in " + s : s + " ago";
  }
  // timeCell shows a time relative to now; the clock tick keeps it true.
  function timeCell(iso) { return el("td", { title: iso || "", dataset: { at: iso || "" } }, rel(iso)); }
  function fmtMs(ms) { return ms < 1000 ? Math.round(ms) + "ms" : (ms / 1000).toFixed(1) + "s"; }
  // fmtLate writes an age: "250ms", "12.5s", "3m", "2h".
  function fmtLate(ms) { return ms < 90000 ? fmtMs(ms) : fmtAge(ms / 1000); }
  function fmtAge(sec) {
    return sec < 90 ? Math.round(sec) + "s" : sec < 5400 ? Math.round(sec / 60) + "m" : sec < 172800 ? Math.round(sec / 3600) + "h" : Math.round(sec / 86400) + "d";
  }
  // fmtOffset writes seconds with their sign: "+0.4 ms", "-30.0 s".
  function fmtOffset(sec) {
    const a = Math.abs(sec);
    return (sec < 0 ? "-" : "+") + (a < 1 ? (a * 1000).toFixed(1) + " ms" : a.toFixed(1) + " s");
  }

  // Queue counts -----------------------------------------------------------

  // lateness is the age of the queue's oldest pending job now: the last
  // known age, grown by the time since.
  function lateness(q, now) { return q.pending > 0 ? q.oldest_pending_age_ms + Math.max(0, now - q._at) : 0; }

  // eventsOf is, per queue, how many events the page has applied to it: a
  // read of the stats started before the last of them may predate it.
  function eventsOf() { return new Map([...state.queues.values()].map((q) => [q.name, q._events || 0])); }

  function queueEvents(name) { const q = state.queues.get(name); return q ? q._events || 0 : 0; }

  // setQueues takes the queues as a read answered them (GET /v1/queues),
  // started when eventsOf() answered before. A queue that events moved
  // while the read was under way keeps the counts the events gave it and is
  // read again soon, unless that happened MAX_KEPT times in a row.
  function setQueues(list, before) {
    const now = Date.now();
    const next = new Map();
    let again = false;
    for (const q of list) {
      const cur = state.queues.get(q.name);
      if (cur && before && (cur._events || 0) !== (before.get(q.name) || 0) && (cur._kept || 0) < MAX_KEPT) {
        cur._kept = (cur._kept || 0) + 1;
        next.set(q.name, cur);
        again = true;
        continue;
      }
      next.set(q.name, Object.assign({}, q, { _at: now, _events: cur ? cur._events : 0, _kept: 0 }));
    }
    // A queue the read does not know, which events made while it was under
    // way, is kept too.
    for (const cur of state.queues.values()) {
      if (!next.has(cur.name) && before && (cur._events || 0) !== (before.get(cur.name) || 0) && (cur._kept || 0) < MAX_KEPT) {
        cur._kept = (cur._kept || 0) + 1;
        next.set(cur.name, cur);
        again = true;
      }
    }
    state.queues = next;
    state.queuesRead = true;
    for (const name of state.history.keys()) if (!next.has(name)) state.history.delete(name);
    if (again) soonStats();
  }

  function blankQueue(name) {
    return { name, paused: false, scheduled: 0, pending: 0, processing: 0, dead: 0, completed_total: 0, failed_total: 0,
      retried_total: 0, reclaimed_total: 0, next_run_at: null, oldest_pending_age_ms: 0, _at: Date.now() };
  }

  // known is the last status the page saw of recent jobs (from events and
  // reads), for the events that do not say what a job was.
  const known = new Map();
  function know(id, status) {
    known.delete(id);
    if (!status) return;
    known.set(id, status);
    if (known.size > MAX_KNOWN) known.delete(known.keys().next().value);
  }

  // applyEvent moves a queue's counts by one job event. What the event
  // cannot tell asks for a re-read of the stats (soonStats).
  function applyEvent(type, d) {
    let q = state.queues.get(d.queue);
    if (!q) {
      q = blankQueue(d.queue);
      state.queues.set(d.queue, q);
      soonStats(); // its pause state, its next run
    }
    q._events = (q._events || 0) + 1;
    const now = Date.now();
    const pendingBefore = q.pending, lateBefore = lateness(q, now);
    const move = (from, to) => {
      if (DEPTHS.has(from)) q[from] = Math.max(0, q[from] - 1);
      if (DEPTHS.has(to)) q[to]++;
    };
    const was = known.get(d.id);
    know(d.id, type === "deleted" ? "" : d.status);
    switch (type) {
    case "enqueued": move("", d.status); break;
    case "promoted": move("scheduled", "pending"); break;
    case "claimed": move("pending", "processing"); break;
    case "completed": move("processing", ""); q.completed_total++; countDone(d.queue, now); break;
    case "retried": move("processing", d.status); q.failed_total++; q.retried_total++; break;
    case "reclaimed": move("processing", "pending"); q.reclaimed_total++; break;
    case "released": move("processing", "pending"); break;
    case "dead": move("processing", "dead"); soonStats(); break; // a failure or a lapsed lease: which total, the event does not say
    case "deleted": move(d.status, ""); break; // its status: what the job was
    case "ready": move("waiting", d.status); break; // a workflow node released: pending, or scheduled
    default: // canceled, rescheduled, run_now: from which status, the event does not say; the page may know
      if (was) move(was, d.status); else soonStats();
    }
    if (type === "claimed" && q.pending > 0) soonStats(); // the next oldest pending job's age
    if (type === "promoted" || d.status === "scheduled") soonStats(); // the next run
    // The oldest pending job's age: none when nothing is pending, 0 when the
    // first job became pending now.
    q.oldest_pending_age_ms = q.pending === 0 || pendingBefore === 0 ? 0 : lateBefore;
    q._at = now;
    renderSoon();
  }

  let statsReading = false;
  async function readStats() {
    if (statsReading) { soonStats(); return; }
    statsReading = true;
    try {
      const before = eventsOf();
      const qs = await api("GET", "/v1/queues");
      setQueues(qs.queues, before);
      renderQueues();
    } finally { statsReading = false; }
  }
  const soonStats = throttle(readStats, SOON_MS);

  // Charts ---------------------------------------------------------------

  function hist(name) {
    let h = state.history.get(name);
    if (!h) state.history.set(name, h = { done: new Map(), samples: [] });
    return h;
  }
  function countDone(name, now) {
    const h = hist(name), s = Math.floor(now / 1000);
    h.done.set(s, (h.done.get(s) || 0) + 1);
  }

  // sample adds one point a second to each queue's history: throughput
  // (completions of the last RATE_S whole seconds) and lateness.
  function sample(now) {
    const sec = Math.floor(now / 1000);
    for (const q of state.queues.values()) {
      const h = hist(q.name);
      if (h.samples.length && h.samples[h.samples.length - 1].t === sec) continue;
      let n = 0;
      for (let s = sec - RATE_S; s < sec; s++) n += h.done.get(s) || 0;
      for (const s of h.done.keys()) if (s < sec - RATE_S) h.done.delete(s);
      h.samples.push({ t: sec, rate: n / RATE_S, late: lateness(q, now) / 1000 });
      while (h.samples.length && h.samples[0].t <= sec - WINDOW_S) h.samples.shift();
    }
  }

  // niceCeil rounds up to 1, 2 or 5 times a power of ten.
  function niceCeil(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }
  function fmtNum(v) { return v >= 100 || v === Math.round(v) ? String(Math.round(v)) : v >= 10 ? v.toFixed(1) : v.toFixed(2); }

  // drawChart draws a line chart sized to its box (its width, a fixed
  // height): y axis with ticks and unit, time axis, one line per series,
  // and an HTML legend.
  // axis titles the y axis; fmt writes a value; unit follows a value in
  // the legend.
  function drawChart(fig, axis, fmt, unit, series, nowSec) {
    const plot = fig.querySelector(".plot");
    const W = Math.max(240, plot.clientWidth), H = 220;
    const L = 64, R = 14, T = 12, B = 40;
    let max = 0;
    for (const s of series) for (const p of s.points) max = Math.max(max, p.v);
    // The span: since the first sample (at least a minute), at most WINDOW_S.
    let first = nowSec;
    for (const s of series) if (s.points.length) first = Math.min(first, s.points[0].t);
    const span = Math.min(WINDOW_S, Math.max(60, nowSec - first));
    const step = span <= 60 ? 15 : span <= 120 ? 30 : 60;
    const top = niceCeil(max), t0 = nowSec - span;
    const x = (t) => L + ((t - t0) / span) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    const svg = svgEl("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, role: "img", "data-span": span,
      "aria-label": fig.querySelector("figcaption").textContent });
    svg.dataset.max = String(max);
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4, yy = y(v).toFixed(1);
      svg.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: yy, y2: yy }));
      svg.append(svgEl("text", { class: "tick y", x: L - 6, y: yy, "text-anchor": "end", "dominant-baseline": "middle" }, fmt(v)));
    }
    for (let a = 0; a <= span; a += step) {
      const xx = x(nowSec - a).toFixed(1);
      svg.append(svgEl("line", { class: "axis", x1: xx, x2: xx, y1: H - B, y2: H - B + 4 }));
      svg.append(svgEl("text", { class: "tick x", x: xx, y: H - B + 16, "text-anchor": a === 0 ? "end" : a + step > span ? "start" : "middle" },
        a === 0 ? "now" : a % 60 === 0 ? a / 60 + " min ago" : a + " s ago"));
    }
    svg.append(svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    svg.append(svgEl("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
    svg.append(svgEl("text", { class: "unit", x: 12, y: T + (H - T - B) / 2, "text-anchor": "middle",
      transform: "rotate(-90 12 " + (T + (H - T - B) / 2) + ")" }, axis));
    svg.append(svgEl("text", { class: "unit", x: L + (W - L - R) / 2, y: H - 4, "text-anchor": "middle" }, "time"));
    for (const s of series) {
      if (!s.points.length) continue;
      const d = s.points.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + " " + y(p.v).toFixed(1)).join(" ");
      const path = svgEl("path", { class: "series", d, stroke: s.color, "data-queue": s.name });
      path.append(svgEl("title", {}, s.name));
      svg.append(path);
    }
    plot.replaceChildren(svg);
    fig.querySelector(".legend").replaceChildren(...series.map((s) => {
      const last = s.points.length ? s.points[s.points.length - 1].v : 0;
      const sw = svgEl("svg", { width: 12, height: 12, "aria-hidden": "true" });
      sw.append(svgEl("rect", { width: 12, height: 12, rx: 2, fill: s.color }));
      return el("li", { dataset: { queue: s.name } }, sw, " " + s.name + " ", el("span", { class: "muted" }, fmt(last) + unit));
    }));
  }

  function renderCharts(now) {
    const nowSec = Math.floor(now / 1000);
    // The busiest queues, by the sum of their throughput and lateness.
    const names = [...state.queues.keys()];
    const weight = (n) => hist(n).samples.reduce((a, p) => a + p.rate + p.late, 0);
    const top = names.map((n) => [n, weight(n)]).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, MAX_SERIES)
      .map((e) => e[0]).sort();
    const series = (key) => top.map((n, i) => ({ name: n, color: COLORS[i % COLORS.length],
      points: hist(n).samples.map((p) => ({ t: p.t, v: p[key] })) }));
    drawChart($("chart-throughput"), "jobs/s", fmtNum, " jobs/s", series("rate"), nowSec);
    drawChart($("chart-lateness"), "age", (v) => fmtLate(v * 1000), "", series("late"), nowSec);
  }

  // Rendering of the queues view --------------------------------------------

  let renderTimer = 0;
  // renderSoon renders the queues within 100 ms, once for many events.
  function renderSoon() { if (!renderTimer) renderTimer = setTimeout(() => { renderTimer = 0; renderQueues(); }, 100); }

  // The queues table is updated in place (a row per queue, kept), so that
  // a button under the pointer is not replaced while events stream in.
  const qRows = new Map(); // name -> {tr, cells}
  function queueRow(name) {
    let r = qRows.get(name);
    if (r) return r;
    const td = (cls) => el("td", { class: cls });
    const badge = el("span", { class: "badge" }, "paused");
    const cells = { badge, scheduled: td("n-scheduled"), pending: td("n-pending"), processing: td("n-processing"),
      dead: td("n-dead"), completed_total: td("n-completed"), failed_total: td("n-failed"), retried_total: td("n-retried"),
      reclaimed_total: td("n-reclaimed"), next: td("n-next"), rate: td("n-rate"), late: td("n-late") };
    cells.name = el("a", { href: "#/queues/" + encodeURIComponent(name) }, name);
    const tr = el("tr", { class: "q", dataset: { queue: name } }, el("td", {}, cells.name),
      cells.scheduled, cells.pending, cells.processing, cells.dead, cells.completed_total, cells.failed_total,
      cells.retried_total, cells.reclaimed_total, cells.next, cells.rate, cells.late,
      el("td", {}, el("button", { onclick: () => act("reclaim " + name, () => reclaim(name)) }, "reclaim")));
    r = { tr, cells };
    qRows.set(name, r);
    return r;
  }
  function setText(e, v) { v = String(v); if (e.textContent !== v) e.textContent = v; }

  function renderQueues() {
    const qs = [...state.queues.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
    const now = Date.now();
    const rows = qs.map((q) => {
      const { tr, cells } = queueRow(q.name);
      const h = hist(q.name).samples, rate = h.length ? h[h.length - 1].rate : 0;
      tr.classList.toggle("selected", q.name === state.queue);
      if (q.paused && !cells.badge.isConnected) cells.name.after(cells.badge);
      if (!q.paused && cells.badge.isConnected) cells.badge.remove();
      for (const k of ["scheduled", "pending", "processing", "dead", "completed_total", "failed_total", "retried_total", "reclaimed_total"]) {
        setText(cells[k], q[k]);
      }
      cells.next.dataset.at = q.next_run_at || "";
      cells.next.title = q.next_run_at || "";
      setText(cells.next, rel(q.next_run_at));
      setText(cells.rate, fmtNum(rate) + "/s");
      setText(cells.late, fmtLate(lateness(q, now)));
      return tr;
    });
    for (const name of qRows.keys()) if (!state.queues.has(name)) qRows.delete(name);
    const tb = $("queues").tBodies[0];
    if (tb.children.length !== rows.length || rows.some((r, i) => tb.children[i] !== r)) tb.replaceChildren(...rows);
    $("queues-loading").hidden = state.queuesRead;
    $("no-queues").hidden = qs.length > 0 || !state.queuesRead;

    const sel = $("queue-select");
    const names = qs.map((q) => q.name);
    const before = state.queue;
    if (!state.queue && names.length) state.queue = state.demo && names.includes(state.demo.queue) ? state.demo.queue : names[0];
    if (state.queue !== before) { soonJobs(); soonFlow(); }
    if (state.queue && !names.includes(state.queue)) names.push(state.queue);
    if (sel.options.length !== names.length || names.some((n, i) => sel.options[i].value !== n)) {
      sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    }
    if (sel.value !== state.queue) sel.value = state.queue;
    const cur = state.queues.get(state.queue) || blankQueue(state.queue);
    setText($("count-scheduled"), cur.scheduled);
    setText($("count-pending"), cur.pending);
    setText($("count-processing"), cur.processing);
    setText($("count-completed"), cur.completed_total);
    setText($("count-dead"), cur.dead);
    $("q-pause").hidden = !!cur.paused;
    $("q-resume").hidden = !cur.paused;
  }

  async function reclaim(q) {
    const r = await api("POST", "/v1/queues/" + encodeURIComponent(q) + "/reclaim");
    return r.reclaimed.length + " job(s) reclaimed";
  }

  function jobPath(j) { return "/v1/queues/" + encodeURIComponent(j.queue) + "/jobs/" + encodeURIComponent(j.id); }
  function jobHash(queue, id) { return "#/queues/" + encodeURIComponent(queue) + "/jobs/" + encodeURIComponent(id); }

  function jobActions(j) {
    const b = (label, fn) => el("button", { class: "act", dataset: { act: label }, onclick: (e) => { e.stopPropagation(); act(label + " " + j.id.slice(-8), fn); } }, label);
    const out = [];
    if (j.status === "scheduled") out.push(b("run now", () => api("POST", jobPath(j) + "/retry")));
    if (j.status === "scheduled" || j.status === "pending" || j.status === "processing") out.push(b("cancel", () => api("DELETE", jobPath(j))));
    if (j.status === "dead") out.push(b("retry", () => api("POST", jobPath(j) + "/retry")));
    if (j.status === "dead" || j.status === "completed" || j.status === "canceled") out.push(b("delete", () => api("DELETE", jobPath(j))));
    return out;
  }

  function renderJobs() {
    const tab = state.tab, jobs = state.jobs;
    $("time-head").textContent = { scheduled: "run at", pending: "due", processing: "lease until", completed: "completed", dead: "died" }[tab];
    const rows = jobs.map((j) => {
      const t = tab === "processing" ? j.lease_until : tab === "completed" ? j.completed_at : j.run_at;
      return el("tr", { class: "job", dataset: { id: j.id, status: j.status }, onclick: () => { location.hash = jobHash(j.queue, j.id); } },
        el("td", { title: j.id }, el("a", { href: jobHash(j.queue, j.id) }, el("code", {}, j.id.slice(-12)))), el("td", {}, j.kind), el("td", {}, j.status),
        el("td", {}, j.attempts + "/" + j.max_attempts), timeCell(t),
        el("td", { class: "err", title: j.last_error || "" }, j.last_error || ""), el("td", {}, ...jobActions(j)));
    });
    $("jobs").tBodies[0].replaceChildren(...rows);
    $("no-jobs").hidden = jobs.length > 0;
    $("dead-actions").hidden = tab !== "dead";
    for (const b of document.querySelectorAll("#tabs button[data-tab]")) b.classList.toggle("on", b.dataset.tab === tab);
  }

  // configFor is the queue whose push target and limits are shown ("": to
  // read again); events do not change them.
  let configFor = "";
  async function loadJobs() {
    if (!state.queue) { state.jobs = []; renderJobs(); return; }
    const q = state.queue, tab = state.tab, seen = queueEvents(q);
    const [r, cfg] = await Promise.all([
      api("GET", "/v1/queues/" + encodeURIComponent(q) + "/jobs?status=" + tab + "&limit=" + LIMIT),
      configFor === q ? undefined : or404(api("GET", "/v1/queues/" + encodeURIComponent(q))),
    ]);
    if (q !== state.queue || tab !== state.tab) return; // a newer load is on its way
    state.jobs = r.jobs;
    for (const j of r.jobs) know(j.id, j.status);
    renderJobs();
    if (cfg !== undefined) { renderQueueConfig(cfg); configFor = q; }
    if (queueEvents(q) !== seen) soonJobs(); // an event of the queue overtook the read
  }
  const soonJobs = throttle(loadJobs, LIST_MS);

  // renderQueueConfig shows the selected queue's push target and limits
  // (GET /v1/queues/{queue}).
  function renderQueueConfig(q) {
    const p = q && q.push;
    $("queue-target").textContent = p ? "push: " + p.target.method + " " + (p.target.url || "(each job's own target)") +
      " · timeout " + p.target.timeout + " · " + p.concurrency + " per dispatcher" : "pull queue (no push target)";
    const l = q && q.limits;
    const parts = [];
    if (l && l.rate) parts.push(l.rate + "/s (burst " + l.burst + ")");
    if (l && l.max_in_flight) parts.push("at most " + l.max_in_flight + " in flight");
    $("queue-limits").textContent = parts.length ? "· limits: " + parts.join(", ") : "· no limits";
  }

  // Flow keys of the selected queue -----------------------------------------

  // flow is the selected queue's flow keys panel: its FLOW_TOP keys with
  // the most jobs (GET /v1/queues/{queue}/flow/keys), the queue's flow
  // limits (GET /v1/queues/{queue}/flow, read again on a change of queue
  // and each resync: events do not change them) and, when one is picked
  // (#/queues/{queue}/flow/{key}), that key's jobs
  // (GET /v1/queues/{queue}/flow/keys/{key}). The panel is hidden while the
  // queue has no key with jobs, no flow limits and no key picked, and on
  // a server without these routes (404).
  const flow = { key: "", limitsFor: "", limits: null };

  function flowHash(queue, key) { return "#/queues/" + encodeURIComponent(queue) + "/flow/" + encodeURIComponent(key); }

  // fmtFlowOverride says a key's own limits (a FlowOverride), "" none.
  function fmtFlowOverride(o) {
    if (!o) return "";
    const parts = ["weight " + (o.weight || 1)];
    if (o.max_in_flight) parts.push("at most " + o.max_in_flight + " in flight");
    if (o.rate) parts.push(o.rate + "/s (burst " + o.burst + ")");
    return parts.join(", ");
  }

  // fmtFlowLimits says the queue's limits for each flow key (FlowLimits),
  // "" none.
  function fmtFlowLimits(l) {
    if (!l) return "";
    const parts = [];
    if (l.max_in_flight) parts.push("at most " + l.max_in_flight + " in flight");
    if (l.rate) parts.push(l.rate + "/s (burst " + l.burst + ")");
    if (l.strategy && l.strategy !== "queue") parts.push("at the in-flight limit: " + l.strategy.replace(/_/g, " "));
    return parts.join(", ");
  }

  function idList(queue, ids) {
    return ids.map((id) => el("li", {}, el("a", { href: jobHash(queue, id), title: id }, el("code", {}, id))));
  }

  // renderFlow shows keys (the keys page: {keys, total}), the limits and
  // the picked key's jobs (null: none picked); keys null: no panel.
  function renderFlow(queue, keys, limits, picked) {
    const list = keys ? keys.keys || [] : [], total = keys ? keys.total || 0 : 0;
    const lim = fmtFlowLimits(limits);
    $("flow-panel").hidden = !keys || (total === 0 && !lim && !flow.key);
    $("flow-panel").dataset.read = queue; // the queue it was drawn for: for the tests, which wait for a read
    setText($("flow-queue"), queue);
    setText($("flow-total"), total);
    $("flow-top").hidden = total <= FLOW_TOP;
    setText($("flow-limits"), lim ? "Each key: " + lim + "." : "No flow limits: the keys take turns.");
    $("flow-keys").tBodies[0].replaceChildren(...list.map((k) => el("tr",
      { class: "flow-key" + (k.key === flow.key ? " selected" : ""), dataset: { key: k.key }, onclick: () => { location.hash = flowHash(queue, k.key); } },
      el("td", {}, el("a", { href: flowHash(queue, k.key) }, k.key)), el("td", {}, k.pending), el("td", {}, k.in_flight),
      el("td", {}, fmtFlowOverride(k.override) || "—"))));
    $("no-flow-keys").hidden = list.length > 0;
    $("flow-key-box").hidden = !picked;
    if (!picked) return;
    setText($("flow-key-name"), picked.key);
    setText($("flow-key-pending"), picked.pending);
    setText($("flow-key-in-flight"), picked.in_flight);
    setText($("flow-key-override"), picked.override ? "· override: " + fmtFlowOverride(picked.override) : "");
    $("flow-key-close").href = "#/queues/" + encodeURIComponent(queue);
    const pend = picked.pending_jobs || [], proc = picked.processing_jobs || [];
    $("flow-key-pending-jobs").replaceChildren(...idList(queue, pend));
    $("flow-key-processing-jobs").replaceChildren(...idList(queue, proc));
    $("no-flow-key-pending").hidden = pend.length > 0;
    $("no-flow-key-processing").hidden = proc.length > 0;
  }

  async function loadFlow() {
    const q = state.queue, key = flow.key;
    if (!q) { renderFlow("", null, null, null); return; }
    const base = "/v1/queues/" + encodeURIComponent(q) + "/flow";
    const [keys, limits, picked] = await Promise.all([
      or404(api("GET", base + "/keys?offset=0&limit=" + FLOW_TOP)),
      flow.limitsFor === q ? flow.limits : or404(api("GET", base)),
      key ? or404(api("GET", base + "/keys/" + encodeURIComponent(key) + "?limit=" + FLOW_JOBS)) : null,
    ]);
    if (q !== state.queue || key !== flow.key) return; // a newer load is on its way
    flow.limitsFor = q;
    flow.limits = limits;
    renderFlow(q, keys, limits, picked);
  }
  const soonFlow = throttle(loadFlow, FLOW_MS);

  let cronTimer = 0;
  function renderCron(entries) {
    const rows = entries.map((c) => el("tr", {},
      el("td", {}, c.name), el("td", {}, el("code", {}, c.schedule), c.paused ? el("span", { class: "badge" }, "paused") : ""),
      el("td", {}, c.queue), el("td", {}, c.kind), timeCell(c.next_run_at), timeCell(c.last_run_at),
      el("td", {}, c.last_job_id ? el("code", {}, c.last_job_id.slice(-12)) : "—")));
    $("cron").tBodies[0].replaceChildren(...rows);
    $("no-cron").hidden = entries.length > 0;
    // Read the entries again just after the next one is due, to show its run.
    clearTimeout(cronTimer);
    const next = Math.min(...entries.filter((c) => c.next_run_at && !c.paused).map((c) => Date.parse(c.next_run_at)));
    if (isFinite(next) && next - Date.now() < RESYNC_MS) {
      cronTimer = setTimeout(() => api("GET", "/v1/cron?limit=1000").then((c) => renderCron(c.entries), report), Math.max(1000, next - Date.now() + 1000));
    }
  }

  // The demo: the pool form shows the pool's settings as the server has
  // them; a field the user has changed since is left alone until applied.
  const demoFields = [["demo-size", "size"], ["demo-latency", "latency"], ["demo-fail", "fail_rate"], ["demo-hang", "hang_rate"]];
  const demoShown = {}; // field -> the value the page last put in it
  function renderDemo(d, force) {
    for (const k of ["running", "busy", "completed", "failed", "hung", "released"]) $("demo-" + k).textContent = d[k];
    for (const [id, key] of demoFields) {
      const inp = $(id), v = String(d[key]);
      if (force || inp.value === (demoShown[id] || "")) { inp.value = v; demoShown[id] = v; }
    }
    const box = $("demo-kinds");
    if (!box.childElementCount) {
      box.append(...d.kinds.map((k) => el("label", {}, el("input", { type: "checkbox", value: k, checked: true }), " " + k)));
    }
  }
  async function readDemo() {
    const d = await or404(api("GET", "/v1/demo"));
    if (d) renderDemo(d);
    return d;
  }
  // The pool's counters move just after the events of its jobs (in the
  // demo's process, not in Redis): read them at once, and once more when
  // its events have been quiet for DEMO_SETTLE_MS.
  const soonDemoNow = throttle(readDemo, LIST_MS);
  let demoSettle = 0;
  function soonDemo() {
    soonDemoNow();
    clearTimeout(demoSettle);
    demoSettle = setTimeout(() => readDemo().catch(report), DEMO_SETTLE_MS);
  }
  // followPool reads the pool until it runs as many workers as it was told
  // to (workers stop when their job is done), after an apply; bounded.
  let follow = 0;
  function followPool(d, tries) {
    clearTimeout(follow);
    if (!d || d.running === d.size || tries <= 0) return;
    follow = setTimeout(() => readDemo().then((n) => followPool(n, tries - 1), report), LIST_MS);
  }

  // renderStatus shows how far this instance's clock is from Redis's
  // (GET /v1/status), as a warning past the server's threshold (1 s).
  function renderStatus(st) {
    const c = $("clock");
    c.hidden = !st;
    if (!st) return;
    const off = st.redis_clock_offset_seconds;
    if (!st.redis_clock_measured_at) {
      c.textContent = "Redis clock offset: not measured yet";
      c.classList.remove("warn");
      return;
    }
    c.textContent = "Redis clock offset " + fmtOffset(off) + " (±" + fmtOffset(st.redis_clock_bound_seconds).slice(1) + ")" +
      (st.redis_clock_warning ? ": fix this host's clock (NTP)" : "");
    c.classList.toggle("warn", st.redis_clock_warning);
    c.dataset.offset = String(off);
    const way = off < 0 ? "behind" : "ahead of";
    c.title = "Redis's clock is " + fmtOffset(Math.abs(off)).slice(1) + " " + way + " this instance's, as the instance last measured it " +
      "at " + st.redis_clock_measured_at + " (to within half that round trip). Redis time " + st.redis_time + ", instance time " + st.time + ". " +
      "chronoq " + st.version + " (" + st.go_version + "), up " + fmtAge(st.uptime_seconds) + ".";
  }

  // The job page -----------------------------------------------------------

  const job = { queue: "", id: "", data: null }; // the job whose page is shown

  function renderJob(j) {
    job.data = j;
    know(j.id, j.status);
    $("job-gone").hidden = true;
    $("detail-job").textContent = JSON.stringify(Object.assign({}, j, { payload: undefined, result: undefined, last_error: undefined, artifacts: undefined }), null, 2);
    $("detail-payload").textContent = JSON.stringify(j.payload, null, 2);
    $("detail-result").textContent = j.result === null || j.result === undefined ? "—" : JSON.stringify(j.result, null, 2);
    $("detail-error").textContent = j.last_error || "—";
    setJobStatus(j.status, j.attempts);
    $("job-workflow").hidden = !j.workflow;
    if (j.workflow) {
      $("job-workflow-node").textContent = j.workflow.node;
      $("job-workflow-link").href = "#/workflows/" + encodeURIComponent(j.workflow.id);
      $("job-workflow-link").textContent = "workflow " + j.workflow.id.slice(-12);
    }
    renderDeliveries(j.deliveries || []);
    if (j.progress) renderProgress(j.progress);
    renderArtifacts(j.artifacts || {}); // new names only: the job's stream keeps the shown ones current
  }

  function setJobStatus(status, attempts) {
    const s = $("job-status");
    s.textContent = status;
    s.dataset.status = status;
    $("job-attempts").textContent = attempts;
    $("detail-resched").hidden = !(status === "scheduled" || status === "pending");
    $("detail-actions").replaceChildren(...(status === "deleted" ? [] : jobActions({ queue: job.queue, id: job.id, status })));
  }

  async function loadJob() {
    const q = job.queue, id = job.id, seen = queueEvents(q), started = Date.now();
    if (!id) return;
    let j;
    try {
      j = await api("GET", "/v1/queues/" + encodeURIComponent(q) + "/jobs/" + encodeURIComponent(id));
    } catch (e) {
      if (e.status !== 404) throw e;
      j = null;
    }
    if (q !== job.queue || id !== job.id) return;
    if (j) {
      renderJob(j);
      // Retried since its stream ended (and the event was missed): open it
      // again. Not on a read begun before the end: it may predate it.
      if (!FINISHED.has(j.status) && started >= jl.endedAt) openJobStream();
    } else { $("job-gone").hidden = false; setJobStatus("deleted", $("job-attempts").textContent); closeJobStream("deleted"); }
    await loadHolder(j);
    if (queueEvents(q) !== seen) soonJob(); // an event of the queue overtook the read
  }
  const soonJob = throttle(loadJob, LIST_MS);

  // loadHolder shows which worker holds the open job, when the workers page
  // saw one hold it: that worker is read again (GET /v1/workers/{id}) and
  // shown while it is processing and the worker still lists it. Nothing is
  // read for a job no worker was seen holding.
  async function loadHolder(j) {
    if (!j) { $("job-holder").hidden = true; return; }
    const wid = workers.holders.get(j.queue + "/" + j.id);
    let w = null;
    if (j.status === "processing" && wid) w = await or404(api("GET", "/v1/workers/" + encodeURIComponent(wid)));
    if (j.queue !== job.queue || j.id !== job.id) return;
    const holds = !!w && w.jobs.some((h) => h.queue === j.queue && h.id === j.id);
    $("job-holder").hidden = !holds;
    if (holds) {
      $("job-holder-id").textContent = w.id + (w.host ? " on " + w.host : "");
      $("job-holder").dataset.worker = w.id;
    }
  }

  // jobEvent shows an event of the open job at once, then reads the job
  // again for what the event does not carry (result, error, deliveries).
  function jobEvent(type, d) {
    if (d.queue !== job.queue || d.id !== job.id) return;
    const status = type === "deleted" ? "deleted" : d.status;
    setJobStatus(status, d.attempts);
    const at = d.at ? new Date(d.at) : new Date();
    $("job-events").prepend(el("li", { dataset: { type, status } }, el("time", { datetime: d.at || "" }, at.toLocaleTimeString()),
      " " + type + " → ", el("b", {}, status), " (attempts " + d.attempts + ")"));
    $("no-job-events").hidden = true;
    if (type === "deleted") closeJobStream("deleted");
    else if (!FINISHED.has(status)) openJobStream();
    soonJob();
  }

  // The job's own stream: its log, progress and status ---------------------
  //
  // GET .../jobs/{id}/stream, open while the job's page is shown and the
  // job is not finished: each log line (its SSE id is its seq), each
  // progress and status change, each artifact attached or replaced
  // (`artifact`), and the log's truncation (`log_truncated`). It reopens
  // with ?after=<the last seq shown>, and a line at or below that seq is
  // dropped, so a reconnect never shows a line twice (artifacts and the
  // truncation come again at each opening, and show as they are). The
  // stream ends after a finished job's status; the page closes it then,
  // and opens it again if the job is retried. The log's lines are added to
  // the page in batches, one per animation frame (a catch-up of 1000 lines
  // is one layout), and the log box follows the new lines while it is
  // scrolled to its bottom. Nothing of it is polled.
  const jl = { stream: null, seq: 0, lines: 0, pending: [], frame: 0, progressAt: "", artifacts: new Map(), state: "", info: null, endedAt: 0 };

  function resetJobLive() {
    closeJobStream("");
    cancelAnimationFrame(jl.frame);
    Object.assign(jl, { seq: 0, lines: 0, pending: [], frame: 0, progressAt: "", state: "", info: null, endedAt: 0 });
    jl.artifacts.clear();
    $("job-log").replaceChildren();
    $("job-log").hidden = true;
    $("no-job-log").hidden = false;
    $("job-log-count").textContent = "";
    $("job-log-truncated").hidden = true;
    $("job-progress").value = 0;
    $("job-progress").dataset.percent = "";
    $("job-progress-pct").textContent = "—";
    $("job-progress-msg").textContent = "no progress reported";
    $("job-artifacts").replaceChildren();
    $("no-job-artifacts").hidden = false;
  }

  function openJobStream() {
    if (jl.stream || !job.id) return;
    jl.stream = stream(() => jobPath(job) + "/stream?after=" + jl.seq, {
      types: ["log", "progress", "status", "artifact", "log_truncated"],
      event: jobStreamEvent,
      state(s, info) { showJobStream(s, info); },
    });
  }

  // closeJobStream closes the job's stream; why ("completed", "deleted"…)
  // is shown as the reason it ended.
  function closeJobStream(why) {
    if (jl.stream) jl.stream.close();
    jl.stream = null;
    if (why) { jl.endedAt = Date.now(); showJobStream("ended", why); }
  }

  function showJobStream(s, info) {
    jl.state = s;
    jl.info = info;
    const e = $("job-stream");
    e.dataset.state = s;
    if (s === "live") e.textContent = "● live";
    else if (s === "connecting") e.textContent = "connecting…";
    else if (s === "ended") e.textContent = "stream ended: job " + info;
    else {
      const sec = Math.max(0, Math.ceil((info.retryAt - Date.now()) / 1000));
      e.textContent = "stream down · " + (sec > 0 ? "reconnecting in " + sec + "s" : "reconnecting…");
    }
  }

  function jobStreamEvent(type, d) {
    if (type === "log") {
      if (!(d.seq > jl.seq)) return; // shown already (a reconnect's catch-up)
      jl.seq = d.seq;
      jl.pending.push(d);
      if (!jl.frame) jl.frame = requestAnimationFrame(flushLog);
    } else if (type === "progress") {
      renderProgress(d);
    } else if (type === "artifact") {
      showArtifact(d.name, d.value);
    } else if (type === "log_truncated") {
      $("job-log-truncated").hidden = false;
    } else if (type === "status") {
      if (d.id !== job.id) return;
      setJobStatus(d.status, d.attempts); // (not know(): the page's counts move by /v1/events alone)
      soonJob(); // its result, error, fields
      if (FINISHED.has(d.status)) closeJobStream(d.status); // its artifacts came before
    }
  }

  function pad(n, w) { return String(n).padStart(w, "0"); }
  function clockTime(iso) {
    const t = new Date(iso);
    return isNaN(t) ? "" : pad(t.getHours(), 2) + ":" + pad(t.getMinutes(), 2) + ":" + pad(t.getSeconds(), 2) + "." + pad(t.getMilliseconds(), 3);
  }

  // flushLog adds the lines that came since the last frame, in one go.
  function flushLog() {
    jl.frame = 0;
    if (!jl.pending.length) return;
    const box = $("job-log");
    const follow = box.hidden || box.scrollHeight - box.scrollTop - box.clientHeight <= 8;
    const frag = document.createDocumentFragment();
    for (const l of jl.pending) {
      frag.append(el("li", { dataset: { seq: String(l.seq) } }, el("span", { class: "seq" }, l.seq),
        el("time", { datetime: l.at, title: l.at }, clockTime(l.at)), el("span", { class: "text" }, l.line)));
    }
    jl.lines += jl.pending.length;
    jl.pending = [];
    box.append(frag);
    box.hidden = false;
    $("no-job-log").hidden = true;
    $("job-log-count").textContent = jl.lines + (jl.lines === 1 ? " line" : " lines");
    if (follow) box.scrollTop = box.scrollHeight;
  }

  function renderProgress(p) {
    if (!p || (jl.progressAt && p.updated_at && p.updated_at < jl.progressAt)) return; // an older one
    jl.progressAt = p.updated_at || jl.progressAt;
    const pct = Math.max(0, Math.min(100, Number(p.percent) || 0));
    $("job-progress").value = pct;
    $("job-progress").dataset.percent = String(pct);
    $("job-progress-pct").textContent = (Math.round(pct * 10) / 10) + "%";
    const m = $("job-progress-msg");
    m.textContent = p.message || "";
    m.title = p.updated_at ? "reported " + p.updated_at : "";
  }

  // showArtifact shows an artifact (from the job's stream) as pretty JSON
  // in a collapsible box, in name order: a new one is added, a changed one
  // replaced; a box the user closed stays closed, one whose value did not
  // change is left alone.
  function showArtifact(name, value) {
    const json = JSON.stringify(value, null, 2);
    let a = jl.artifacts.get(name);
    if (a && a.json === json) return;
    if (!a) {
      const pre = el("pre", {});
      const size = el("span", { class: "muted small" });
      const d = el("details", { class: "artifact", open: true, dataset: { name } }, el("summary", {}, el("code", {}, name), " ", size), pre);
      a = { d, pre, size, json: "" };
      jl.artifacts.set(name, a);
      const box = $("job-artifacts");
      const next = [...box.children].find((c) => c.dataset.name > name);
      box.insertBefore(d, next || null);
    }
    a.json = json;
    a.pre.textContent = json;
    a.size.textContent = new Blob([JSON.stringify(value)]).size + " bytes";
    $("no-job-artifacts").hidden = true;
  }

  // renderArtifacts shows the artifacts of a read of the job whose names
  // are not shown yet: a read may be older than the stream's events, which
  // keep the shown ones current (an artifact is never removed, only
  // replaced).
  function renderArtifacts(arts) {
    for (const name of Object.keys(arts)) if (!jl.artifacts.has(name)) showArtifact(name, arts[name]);
  }

  // renderDeliveries shows a push job's attempts: each request's response
  // status (or its error), duration and outcome.
  function renderDeliveries(ds) {
    $("detail-deliveries-box").hidden = ds.length === 0;
    $("detail-deliveries").tBodies[0].replaceChildren(...ds.map((d) => el("tr", { class: "delivery", dataset: { status: String(d.status) } },
      el("td", {}, d.attempt), timeCell(d.at), el("td", { title: d.url }, el("code", {}, d.url)),
      el("td", { class: d.status >= 200 && d.status < 300 ? "" : "err" }, d.status ? d.status : "—"),
      el("td", {}, fmtMs(Math.round(d.duration_ms))), el("td", {}, d.outcome),
      el("td", { class: "err", title: d.error || "" }, d.error || ""))));
  }

  // The workers page ---------------------------------------------------------

  // workers: the page of GET /v1/workers shown (cursor: where it starts,
  // "" the first), and the jobs its workers hold ("queue/id"), whose events
  // make it read again.
  // holders: "queue/id" -> the worker that held the job at the last read
  // (kept when the view is left: the job page asks that worker, see
  // loadHolder).
  const workers = { cursor: null, held: new Set(), timer: 0, eventTimer: 0, holders: new Map() };

  async function loadWorkers() {
    const cursor = workers.cursor;
    if (cursor === null) return;
    const r = await or404(api("GET", "/v1/workers?limit=" + WORKERS_LIMIT + (cursor ? "&cursor=" + encodeURIComponent(cursor) : "")));
    if (workers.cursor !== cursor) return; // left, or another page: its own read is on its way
    renderWorkers(r || { workers: [], next_cursor: "", live: 0 });
  }
  const soonWorkers = throttle(loadWorkers, WORKERS_SOON_MS);

  // workersAfterEvent reads the page WORKERS_EVENT_MS after an event that
  // may have changed it (once for many): a worker tells the registry of a
  // job it claimed or finished just after the event (a Go worker within a
  // second).
  function workersAfterEvent() {
    if (!workers.eventTimer) workers.eventTimer = setTimeout(() => { workers.eventTimer = 0; soonWorkers(); }, WORKERS_EVENT_MS);
  }

  function chips(list) { return (list || []).map((x) => el("span", { class: "chip" }, x)); }

  function renderWorkers(r) {
    $("workers-live").textContent = r.live;
    workers.held = new Set();
    const rows = r.workers.map((w) => {
      for (const j of w.jobs) {
        workers.held.add(j.queue + "/" + j.id);
        workers.holders.delete(j.queue + "/" + j.id);
        workers.holders.set(j.queue + "/" + j.id, w.id);
      }
      return el("tr", { class: "worker", dataset: { id: w.id, jobs: String(w.jobs.length) } },
        el("td", { class: "w-id" }, el("code", {}, w.id)),
        el("td", { class: "w-host" }, w.host || "—"),
        el("td", { class: "w-labels" }, ...chips(w.labels)),
        el("td", { class: "w-queues" }, ...(w.queues || []).map((q) => el("a", { href: "#/queues/" + encodeURIComponent(q), class: "chip" }, q))),
        el("td", { class: "w-version" }, w.version || "—"),
        Object.assign(timeCell(w.started_at), { className: "w-started" }),
        Object.assign(timeCell(w.last_seen_at), { className: "w-seen" }),
        Object.assign(timeCell(w.expires_at), { className: "w-expires" }),
        el("td", { class: "jobs" }, ...(w.jobs.length ? w.jobs.map((j) => el("a", { href: jobHash(j.queue, j.id), class: "held",
          title: j.queue + "/" + j.id, dataset: { queue: j.queue, id: j.id } }, el("code", {}, j.queue + "/" + j.id.slice(-12)))) : ["—"])));
    });
    while (workers.holders.size > MAX_KNOWN) workers.holders.delete(workers.holders.keys().next().value);
    $("workers").tBodies[0].replaceChildren(...rows);
    $("no-workers").hidden = rows.length > 0 || !!workers.cursor;
    $("workers-first").hidden = !workers.cursor;
    const next = $("workers-next");
    next.hidden = !r.next_cursor;
    next.href = r.next_cursor ? "#/workers/after/" + encodeURIComponent(r.next_cursor) : "#/workers";
  }

  // Event webhooks ------------------------------------------------------------
  //
  // #/webhooks lists the subscriptions (GET /v1/webhooks); #/webhooks/{id}
  // also shows that one's dead deliveries, with a button that sends them
  // again. Read every WORKERS_MS while shown: deliveries have no event
  // stream.

  const hooks = { id: null, timer: 0 };

  async function loadWebhooks() {
    const id = hooks.id;
    if (id === null) return;
    let r;
    try { r = await api("GET", "/v1/webhooks"); } catch (e) {
      if (e.status !== 404) throw e;
      $("webhooks-off").hidden = false; // a server without them
      return;
    }
    if (hooks.id !== id) return;
    const all = (l) => (l && l.length ? l.join(", ") : "*");
    const rows = r.webhooks.map((w) => el("tr", { class: "webhook" + (w.id === id ? " on" : ""), dataset: { id: w.id },
      onclick: () => { location.hash = "#/webhooks/" + encodeURIComponent(w.id); } },
      el("td", { class: "h-id" }, el("code", {}, w.id)),
      el("td", { class: "h-url" }, w.url),
      el("td", { class: "h-queues" }, all(w.queues)),
      el("td", { class: "h-kinds" }, all(w.kinds)),
      el("td", { class: "h-events" }, all(w.events)),
      Object.assign(timeCell(w.created_at), { className: "h-created" }),
      el("td", { class: "h-pending" }, String(w.pending)),
      el("td", { class: "h-dead" }, String(w.dead))));
    $("webhooks").tBodies[0].replaceChildren(...rows);
    $("no-webhooks").hidden = rows.length > 0;
    if (!id) return;
    const d = await or404(api("GET", "/v1/webhooks/" + encodeURIComponent(id) + "/dead?limit=100"));
    if (hooks.id !== id) return;
    const dl = d ? d.deliveries : [];
    $("webhook-dead").tBodies[0].replaceChildren(...dl.map((x) => el("tr", { class: "dead-delivery", dataset: { id: x.id } },
      el("td", {}, el("code", {}, x.id)),
      el("td", { class: "d-event" }, x.event.type),
      el("td", {}, el("a", { href: jobHash(x.event.data.queue, x.event.data.id) }, el("code", {}, x.event.data.queue + "/" + x.event.data.id.slice(-12)))),
      el("td", { class: "d-attempts" }, String(x.attempts)),
      timeCell(x.died_at),
      el("td", { class: "d-error" }, x.error))));
    $("no-webhook-dead").hidden = dl.length > 0;
  }
  const soonWebhooks = throttle(loadWebhooks, LIST_MS);

  function retryWebhookDead() {
    const id = hooks.id;
    if (!id) return;
    act("send the dead deliveries again", async () => {
      const r = await api("POST", "/v1/webhooks/" + encodeURIComponent(id) + "/dead/retry", {});
      soonWebhooks();
      return r.retried + " pending again";
    });
  }

  // Workflows ----------------------------------------------------------------
  //
  // #/workflows lists the recent ones (GET /v1/workflows), read again on
  // the events of workflow jobs (at most every WF_MS). #/workflows/{id}
  // draws one's graph: its nodes in layers by depth (the longest path from
  // a root), left to right, each a box with its name, queue, status,
  // attempts and timings, linking to its job's page; its edges as curves.
  // A node's box moves at once on its job's events (matched by queue and
  // job id), and the workflow is read again, at most every WF_MS, on those
  // events for what they do not tell (its status, timings, errors).

  // wfJobs: "queue/id" of jobs the page saw to be workflow nodes (their
  // enqueued-waiting, ready or rearmed events, a workflow read), whose
  // events make the list read again.
  const wfJobs = new Set();
  function wfJob(key) {
    wfJobs.delete(key);
    wfJobs.add(key);
    if (wfJobs.size > MAX_KNOWN) wfJobs.delete(wfJobs.values().next().value);
  }
  const jobKey = (queue, id) => queue + "/" + id;
  // isWorkflowEvent tells the events of a workflow's node, noting the node.
  function isWorkflowEvent(type, d) {
    const key = jobKey(d.queue, d.id);
    if (type === "ready" || type === "rearmed" || (type === "enqueued" && d.status === "waiting")) { wfJob(key); return true; }
    return wfJobs.has(key);
  }

  function wfStatusSpan(status, extra) {
    return el("span", Object.assign({ class: "status", dataset: { status: status || "gone" } }, extra || {}), status || "gone");
  }
  // tookMs is how long a node's job ran (its last claim to its end).
  function took(n) {
    if (!n.started_at || !n.ended_at) return "";
    const ms = Date.parse(n.ended_at) - Date.parse(n.started_at);
    return isFinite(ms) && ms >= 0 ? fmtMs(ms) : "";
  }

  async function loadWorkflows() {
    if (state.view !== "workflows") return;
    const r = await or404(api("GET", "/v1/workflows?limit=" + LIMIT));
    if (state.view !== "workflows") return;
    renderWorkflows(r ? r.workflows : []);
  }
  const soonWorkflows = throttle(loadWorkflows, WF_MS);

  function renderWorkflows(list) {
    const order = ["waiting", "scheduled", "pending", "processing", "completed", "dead", "canceled", "gone"];
    const rows = list.map((w) => el("tr", { class: "wf", dataset: { id: w.id, status: w.status } },
      el("td", { title: w.id }, el("a", { href: "#/workflows/" + encodeURIComponent(w.id) }, el("code", {}, w.id))),
      el("td", {}, wfStatusSpan(w.status)),
      el("td", { class: "wf-n" }, w.nodes),
      el("td", { class: "wf-counts" }, ...Object.keys(w.counts).sort((a, b) => order.indexOf(a) - order.indexOf(b))
        .map((s) => el("span", { class: "chip", dataset: { status: s } }, s + " " + w.counts[s]))),
      el("td", {}, w.on_failure),
      timeCell(w.created_at), timeCell(w.ended_at || w.canceled_at)));
    $("workflows").tBodies[0].replaceChildren(...rows);
    $("workflows-loading").hidden = true;
    $("no-workflows").hidden = rows.length > 0;
  }

  // wf: the workflow whose page is shown: its last read (nodes moved by
  // events since), and per node its box and row; byJob: "queue/id" -> the
  // node's index; evs: per node, the page's event count at its last
  // event (a read begun before it may predate it).
  const wf = { id: "", data: null, byJob: new Map(), parts: [], evs: [], events: 0 };

  function resetWf(id) {
    Object.assign(wf, { id, data: null, byJob: new Map(), parts: [], evs: [], events: 0 });
    $("wf-id").textContent = id;
    $("wf-loading").hidden = false;
    $("wf-gone").hidden = true;
    $("wf-graph").replaceChildren();
    $("wf-too-big").hidden = true;
    $("wf-nodes").tBodies[0].replaceChildren();
    $("wf-times").textContent = "";
    $("wf-summary").textContent = "";
    $("wf-cancel").hidden = $("wf-retry").hidden = true;
    const s = $("wf-status");
    s.textContent = "…";
    s.dataset.status = "";
  }

  async function loadWf() {
    const id = wf.id, seen = wf.events;
    if (!id) return;
    let w;
    try {
      w = await api("GET", "/v1/workflows/" + encodeURIComponent(id));
    } catch (e) {
      if (e.status !== 404) throw e;
      w = null;
    }
    if (id !== wf.id) return;
    if (!w) {
      resetWf(id);
      $("wf-loading").hidden = true;
      $("wf-gone").hidden = false;
      $("wf-status").textContent = "not found";
      return;
    }
    showWf(w, seen);
    if (wf.events !== seen) soonWf(); // an event of its nodes overtook the read
  }
  const soonWf = throttle(loadWf, WF_MS);

  // showWf shows a read of the workflow, begun when the page had seen
  // `seen` of its events: a node with a later event keeps what the event
  // said (the read may predate it).
  function showWf(w, seen) {
    $("wf-loading").hidden = true;
    const old = wf.data;
    if (!old || old.id !== w.id || old.nodes.length !== w.nodes.length) {
      wf.data = w;
      buildWf(w);
    } else {
      w.nodes.forEach((n, i) => {
        if (wf.evs[i] > seen) Object.assign(n, { status: old.nodes[i].status, attempts: old.nodes[i].attempts });
      });
      wf.data = w;
    }
    for (let i = 0; i < w.nodes.length; i++) updateWfNode(i);
    renderWfHead();
  }

  // layoutWf places the nodes: each in the column of its depth (the
  // longest path from a root), ordered within it by the mean position of
  // its parents, then of its children, then of its parents again (fewer
  // crossings). Answers [{x, y}] by node, and the size.
  function layoutWf(nodes) {
    const idx = new Map(nodes.map((n, i) => [n.name, i]));
    const parents = nodes.map((n) => n.depends_on.map((p) => idx.get(p)).filter((j) => j !== undefined));
    const children = nodes.map(() => []);
    parents.forEach((ps, i) => { for (const p of ps) children[p].push(i); });
    const depth = nodes.map(() => 0), indeg = parents.map((ps) => ps.length);
    const todo = [];
    indeg.forEach((d, i) => { if (d === 0) todo.push(i); });
    while (todo.length) {
      const i = todo.shift();
      for (const c of children[i]) {
        depth[c] = Math.max(depth[c], depth[i] + 1);
        if (--indeg[c] === 0) todo.push(c);
      }
    }
    const layers = [];
    nodes.forEach((_, i) => { (layers[depth[i]] = layers[depth[i]] || []).push(i); });
    for (let d = 0; d < layers.length; d++) layers[d] = layers[d] || [];
    const pos = new Array(nodes.length).fill(0); // centred index within its layer
    const place = () => layers.forEach((l) => l.forEach((i, k) => { pos[i] = k - (l.length - 1) / 2; }));
    place();
    const mean = (js, i) => (js.length ? js.reduce((a, j) => a + pos[j], 0) / js.length : pos[i]);
    const sweep = (rel, from, to, step) => {
      for (let d = from; d !== to; d += step) {
        const key = new Map(layers[d].map((i) => [i, mean(rel[i], i)]));
        layers[d].sort((a, b) => key.get(a) - key.get(b) || a - b);
        place();
      }
    };
    sweep(parents, 1, layers.length, 1);
    sweep(children, layers.length - 2, -1, -1);
    sweep(parents, 1, layers.length, 1);
    const tallest = Math.max(...layers.map((l) => l.length));
    const colH = (n) => n * WF_BOX.h + (n - 1) * WF_BOX.gy;
    const xy = nodes.map((_, i) => ({
      x: WF_BOX.pad + depth[i] * (WF_BOX.w + WF_BOX.gx),
      y: WF_BOX.pad + (colH(tallest) - colH(layers[depth[i]].length)) / 2 + (pos[i] + (layers[depth[i]].length - 1) / 2) * (WF_BOX.h + WF_BOX.gy),
    }));
    return { xy, parents, width: 2 * WF_BOX.pad + layers.length * WF_BOX.w + (layers.length - 1) * WF_BOX.gx, height: 2 * WF_BOX.pad + colH(tallest) };
  }

  function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + "…" : s; }

  // buildWf draws the graph and the table of nodes of a workflow (its
  // nodes never change; updateWfNode moves each).
  function buildWf(w) {
    wf.byJob = new Map();
    wf.evs = w.nodes.map(() => 0);
    wf.parts = w.nodes.map((n, i) => {
      wf.byJob.set(jobKey(n.queue, n.job_id), i);
      wfJob(jobKey(n.queue, n.job_id));
      return { row: null, g: null, edges: [] };
    });
    const drawn = w.nodes.length <= WF_MAX_DRAWN;
    $("wf-too-big").hidden = drawn;
    if (drawn) {
      const L = layoutWf(w.nodes);
      const svg = svgEl("svg", { id: "wf-svg", width: L.width, height: L.height, viewBox: "0 0 " + L.width + " " + L.height,
        role: "img", "aria-label": "the graph of workflow " + w.id, "data-nodes": w.nodes.length });
      const defs = svgEl("defs");
      const marker = svgEl("marker", { id: "wf-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
      marker.append(svgEl("path", { d: "M0 0 L10 5 L0 10 z", class: "wf-arrow" }));
      defs.append(marker);
      const edges = svgEl("g", { class: "wf-edges" }), boxes = svgEl("g", { class: "wf-nodes" });
      w.nodes.forEach((n, i) => {
        const to = L.xy[i];
        for (const p of L.parents[i]) {
          const from = L.xy[p];
          const x1 = from.x + WF_BOX.w, y1 = from.y + WF_BOX.h / 2, x2 = to.x, y2 = to.y + WF_BOX.h / 2;
          const dx = Math.min(60, (x2 - x1) / 2);
          const e = svgEl("path", { class: "wf-edge", "data-from": w.nodes[p].name, "data-to": n.name, "marker-end": "url(#wf-arrow)",
            d: "M" + x1 + " " + y1 + " C" + (x1 + dx) + " " + y1 + " " + (x2 - dx) + " " + y2 + " " + x2 + " " + y2 });
          edges.append(e);
          wf.parts[p].edges.push(e);
        }
        const a = svgEl("a", { class: "wf-node", href: jobHash(n.queue, n.job_id), "data-name": n.name, transform: "translate(" + to.x + " " + to.y + ")" });
        const title = svgEl("title");
        const meta = svgEl("text", { class: "wf-meta", x: 10, y: 36 });
        const time = svgEl("text", { class: "wf-time", x: 10, y: 52 });
        a.append(title, svgEl("rect", { width: WF_BOX.w, height: WF_BOX.h, rx: 6 }),
          svgEl("text", { class: "wf-name", x: 10, y: 18 }, clip(n.name, 24)), meta, time);
        boxes.append(a);
        Object.assign(wf.parts[i], { g: a, title, meta, time });
      });
      svg.append(defs, edges, boxes);
      $("wf-graph").replaceChildren(svg);
    } else $("wf-graph").replaceChildren();
    const rows = w.nodes.map((n, i) => {
      const r = el("tr", { class: "wf-node-row", dataset: { name: n.name } });
      wf.parts[i].row = r;
      return r;
    });
    $("wf-nodes").tBodies[0].replaceChildren(...rows);
  }

  // updateWfNode shows node i as wf.data has it: its box, its edges out
  // (coloured by how it went) and its row.
  function updateWfNode(i) {
    const n = wf.data.nodes[i], p = wf.parts[i], st = n.status || "gone";
    if (p.g) {
      if (p.g.dataset.status !== st) p.g.dataset.status = st;
      setText(p.meta, clip(n.queue, 14) + " · " + st);
      const t = took(n);
      if (t) { setText(p.time, "attempts " + n.attempts + " · took " + t); delete p.time.dataset.at; }
      else if (st === "processing" && n.started_at) {
        p.time.replaceChildren("attempts " + n.attempts + " · started ", svgEl("tspan", { "data-at": n.started_at }, rel(n.started_at)));
      } else setText(p.time, "attempts " + n.attempts);
      setText(p.title, n.name + " (" + n.queue + "/" + n.job_id + "): " + st + ", attempts " + n.attempts +
        (n.enqueued_at ? "\nenqueued " + n.enqueued_at : "") + (n.started_at ? "\nstarted " + n.started_at : "") +
        (n.ended_at ? "\nended " + n.ended_at : "") + (n.last_error ? "\nlast error: " + n.last_error : ""));
      for (const e of p.edges) if (e.dataset.status !== st) e.dataset.status = st;
    }
    p.row.dataset.status = st;
    p.row.replaceChildren(el("td", {}, el("b", {}, n.name)), el("td", {}, n.depends_on.join(", ") || "—"), el("td", {}, n.queue),
      el("td", { title: n.job_id }, el("a", { href: jobHash(n.queue, n.job_id) }, el("code", {}, n.job_id.slice(-12)))),
      el("td", {}, wfStatusSpan(n.status)), el("td", {}, n.attempts), timeCell(n.started_at), el("td", {}, took(n) || "—"),
      el("td", { class: "err", title: n.last_error || "" }, n.last_error || ""));
  }

  function renderWfHead() {
    const w = wf.data;
    const s = $("wf-status");
    s.textContent = w.status;
    s.dataset.status = w.status;
    const counts = new Map();
    for (const n of w.nodes) counts.set(n.status || "gone", (counts.get(n.status || "gone") || 0) + 1);
    $("wf-summary").textContent = w.nodes.length + " nodes · " + [...counts].map(([k, v]) => k + " " + v).join(" · ") + " · on failure: " + w.on_failure;
    const t = (label, iso) => (iso ? label + " " + new Date(iso).toLocaleString() : "");
    $("wf-times").textContent = [t("created", w.created_at), t("ended", w.ended_at), t("canceled", w.canceled_at)].filter(Boolean).join(" · ");
    $("wf-cancel").hidden = w.status !== "running";
    $("wf-retry").hidden = !w.nodes.some((n) => n.status === "dead" || n.status === "canceled");
  }

  // wfEvent moves a node of the shown workflow by its job's event, at
  // once, and reads the workflow again soon.
  function wfEvent(type, d) {
    if (!wf.data) return;
    const i = wf.byJob.get(jobKey(d.queue, d.id));
    if (i === undefined) return;
    const n = wf.data.nodes[i];
    n.status = type === "deleted" ? null : d.status;
    n.attempts = d.attempts;
    if (type === "claimed") Object.assign(n, { started_at: d.at || n.started_at, ended_at: null });
    if (FINISHED.has(n.status)) n.ended_at = d.at || n.ended_at;
    if (type === "rearmed" || type === "ready") n.ended_at = null;
    wf.evs[i] = ++wf.events;
    updateWfNode(i);
    renderWfHead(); // its counts (the workflow's own status comes with the read)
    soonWf();
  }

  function wfAction(label, what) {
    const id = wf.id;
    act(label, async () => {
      const w = await api("POST", "/v1/workflows/" + encodeURIComponent(id) + "/" + what);
      if (id === wf.id) showWf(w, wf.events);
      return w.status;
    });
  }

  // Views and routes -------------------------------------------------------

  const views = {
    queues: {
      enter(p) {
        if (p.queue && p.queue !== state.queue) { state.queue = p.queue; state.jobs = []; renderJobs(); }
        flow.key = p.key || "";
        renderQueues();
        renderCharts(Date.now());
        soonJobs();
        loadFlow().catch(report); // at once: a key picked shows its jobs without waiting out FLOW_MS
        if (state.demo) soonDemo(); // its counters did not follow while another view was shown
      },
      load: () => Promise.all([loadJobs(), loadFlow()]),
      event(type, d) {
        if (d.queue === state.queue && (d.status === state.tab || state.jobs.some((j) => j.id === d.id))) soonJobs();
        if (d.queue === state.queue) soonFlow();
        if (state.demo && d.queue === state.demo.queue) soonDemo();
      },
    },
    job: {
      enter(p) {
        Object.assign(job, { queue: p.queue, id: p.id, data: null });
        $("detail-id").textContent = p.id;
        $("detail-queue").textContent = p.queue;
        $("job-back").href = "#/queues/" + encodeURIComponent(p.queue);
        $("job-back").textContent = "← jobs of " + p.queue;
        for (const id of ["detail-job", "detail-payload", "detail-result", "detail-error"]) $(id).textContent = "";
        $("job-events").replaceChildren();
        $("no-job-events").hidden = false;
        $("job-gone").hidden = true;
        $("job-holder").hidden = true;
        $("job-workflow").hidden = true;
        setJobStatus("…", "");
        renderDeliveries([]);
        resetJobLive();
        showJobStream("connecting");
        openJobStream();
        soonJob();
      },
      leave() { resetJobLive(); job.id = ""; soonJob.cancel(); },
      load: loadJob,
      event: jobEvent,
    },
    workers: {
      enter(p) {
        workers.cursor = p.cursor || "";
        workers.held = new Set();
        $("workers-live").textContent = "…";
        $("workers").tBodies[0].replaceChildren();
        $("no-workers").hidden = true;
        soonWorkers();
        clearInterval(workers.timer);
        workers.timer = setInterval(soonWorkers, WORKERS_MS);
      },
      leave() {
        workers.cursor = null;
        clearInterval(workers.timer);
        clearTimeout(workers.eventTimer);
        workers.timer = workers.eventTimer = 0;
        soonWorkers.cancel();
      },
      load: loadWorkers,
      event(type, d) {
        if (type === "claimed" || workers.held.has(d.queue + "/" + d.id)) workersAfterEvent();
      },
    },
    webhooks: {
      enter(p) {
        hooks.id = p.id || "";
        $("webhooks").tBodies[0].replaceChildren();
        $("no-webhooks").hidden = true;
        $("webhooks-off").hidden = true;
        $("webhook-dead-panel").hidden = !hooks.id;
        $("webhook-dead-id").textContent = hooks.id;
        $("webhook-dead").tBodies[0].replaceChildren();
        $("no-webhook-dead").hidden = true;
        soonWebhooks();
        clearInterval(hooks.timer);
        hooks.timer = setInterval(soonWebhooks, WORKERS_MS);
      },
      leave() { hooks.id = null; clearInterval(hooks.timer); hooks.timer = 0; soonWebhooks.cancel(); },
      load: loadWebhooks,
    },
    workflows: {
      enter() {
        $("workflows").tBodies[0].replaceChildren();
        $("no-workflows").hidden = true;
        $("workflows-loading").hidden = false;
        soonWorkflows();
      },
      leave() { soonWorkflows.cancel(); },
      load: loadWorkflows,
      event(type, d) { if (isWorkflowEvent(type, d)) soonWorkflows(); },
    },
    workflow: {
      enter(p) { resetWf(p.id); soonWf(); },
      leave() { wf.id = ""; soonWf.cancel(); },
      load: loadWf,
      event: wfEvent,
    },
    notfound: {
      enter() { $("notfound-hash").textContent = location.hash; },
    },
  };

  // routes: "#/a/:x/b/:y" patterns, first match wins; "" is "#/queues".
  const routes = [
    ["/queues", "queues"],
    ["/queues/:queue", "queues"],
    ["/queues/:queue/jobs/:id", "job"],
    ["/queues/:queue/flow/:key", "queues"],
    ["/workers", "workers"],
    ["/workers/after/:cursor", "workers"],
    ["/webhooks", "webhooks"],
    ["/webhooks/:id", "webhooks"],
    ["/workflows", "workflows"],
    ["/workflows/:id", "workflow"],
  ].map(([pattern, view]) => {
    const names = [];
    const re = new RegExp("^" + pattern.replace(/:(\w+)/g, (_, n) => { names.push(n); return "([^/]+)"; }) + "$");
    return { re, names, view };
  });

  function route() {
    let path = location.hash.replace(/^#/, "") || "/queues";
    if (path === "/") path = "/queues";
    let view = "notfound", params = {};
    for (const r of routes) {
      const m = r.re.exec(path);
      if (!m) continue;
      try {
        params = Object.fromEntries(r.names.map((n, i) => [n, decodeURIComponent(m[i + 1])]));
        view = r.view;
      } catch (_) { /* a malformed escape: not found */ }
      break;
    }
    if (state.view && views[state.view].leave) views[state.view].leave();
    state.view = view;
    state.params = params;
    for (const d of document.querySelectorAll("[data-view]")) d.hidden = d.dataset.view !== view;
    for (const a of document.querySelectorAll("#nav a[data-nav]")) a.classList.toggle("on", a.dataset.nav === view || (view === "job" && a.dataset.nav === "queues") ||
      (view === "workflow" && a.dataset.nav === "workflows"));
    views[view].enter(params);
  }

  // Sync -----------------------------------------------------------------

  let resyncTimer = 0, resyncing = false, resyncAgain = false;
  // resync reads everything again: the queues, the instance's status, cron,
  // the demo and the shown view. It runs at each (re)connect of the event
  // stream, after each action, and every RESYNC_MS.
  async function resync() {
    clearTimeout(resyncTimer);
    resyncTimer = setTimeout(resync, RESYNC_MS);
    if (resyncing) { resyncAgain = true; return; }
    resyncing = true;
    const l = $("live");
    l.dataset.resyncs = String(Number(l.dataset.resyncs || 0) + 1); // begun: for the tests, which count the page's reads
    const before = eventsOf();
    try {
      const [qs, demo, cron, status] = await Promise.all([
        api("GET", "/v1/queues"),
        state.demo !== null ? or404(api("GET", "/v1/demo")) : null,
        state.cron !== null ? or404(api("GET", "/v1/cron?limit=1000")) : null,
        or404(api("GET", "/v1/status")),
      ]);
      renderStatus(status);
      state.demo = demo;
      $("demo-panel").hidden = !demo;
      if (demo) renderDemo(demo);
      state.cron = cron;
      $("cron-panel").hidden = !cron;
      if (cron) renderCron(cron.entries);
      setQueues(qs.queues, before);
      renderQueues();
      configFor = "";
      flow.limitsFor = "";
      const v = views[state.view];
      if (v.load) await v.load();
      $("live").dataset.synced = new Date().toISOString();
      showLive();
    } catch (e) {
      live.why = e.message;
      showLive();
    } finally {
      resyncing = false;
      if (resyncAgain) { resyncAgain = false; resync(); }
    }
  }

  // The event stream -------------------------------------------------------

  // stream opens an EventSource on src (its URL) and keeps it open: on an
  // error it closes it and opens it again after BACKOFF_MS (the browser's
  // own retry gives up on an HTTP error). src may be a function answering
  // the URL, called at each (re)open: a stream that resumes says from where
  // in its URL (a new EventSource sends no Last-Event-ID). opts: types, the
  // event names to take; event(type, data) with each event's JSON; open()
  // each time it opens;
  // state(s, info) with s "connecting", "live" or "down" and info
  // {attempt, retryAt}. The browser sends the session cookie with it.
  // Answers {close()}. (For a view's own stream, e.g. one job's, open it in
  // enter and close it in leave.)
  function stream(src, opts) {
    const st = { es: null, attempt: 0, retryAt: 0, timer: 0, closed: false };
    const tell = (s) => { if (opts.state) opts.state(s, st); };
    function connect() {
      st.timer = 0;
      if (st.closed) return;
      tell("connecting");
      const url = typeof src === "function" ? src() : src;
      const es = new EventSource(url);
      st.es = es;
      const on = (e) => {
        let d;
        try { d = JSON.parse(e.data); } catch (_) { return; }
        opts.event(e.type, d);
      };
      for (const t of opts.types) es.addEventListener(t, on);
      es.onopen = () => {
        if (es !== st.es) return;
        st.attempt = 0;
        tell("live");
        if (opts.open) opts.open();
      };
      es.onerror = () => {
        if (es !== st.es) return;
        es.close();
        st.es = null;
        const base = BACKOFF_MS[Math.min(st.attempt, BACKOFF_MS.length - 1)];
        const delay = Math.round(base * (0.75 + Math.random() / 2));
        st.attempt++;
        st.retryAt = Date.now() + delay;
        st.timer = setTimeout(connect, delay);
        tell("down");
      };
    }
    connect();
    return {
      close() {
        st.closed = true;
        clearTimeout(st.timer);
        if (st.es) st.es.close();
        st.es = null;
      },
    };
  }

  // live is the page's stream of every queue's job events.
  const live = { state: "connecting", attempt: 0, retryAt: 0, why: "" };

  function showLive() {
    const l = $("live");
    l.dataset.state = live.state;
    const synced = l.dataset.synced ? " · read " + new Date(l.dataset.synced).toLocaleTimeString() : "";
    if (live.state === "live") {
      l.textContent = "live";
      l.title = "events stream in as they happen" + synced + "; everything is read again every " + RESYNC_MS / 1000 + " s";
    } else if (live.state === "connecting") {
      l.textContent = "connecting…";
    } else {
      const s = Math.max(0, Math.ceil((live.retryAt - Date.now()) / 1000));
      l.textContent = (live.why ? "offline: " + live.why + " · " : "disconnected · ") + (s > 0 ? "reconnecting in " + s + "s" : "reconnecting…");
      l.title = "the event stream is down (attempt " + live.attempt + "); numbers may be stale" + synced;
    }
  }

  function startLive() {
    stream("/v1/events", {
      types: EVENT_TYPES,
      event(type, d) {
        state.events++;
        $("live").dataset.events = String(state.events);
        applyEvent(type, d);
        isWorkflowEvent(type, d); // notes the jobs of workflows
        const v = views[state.view];
        if (v.event) v.event(type, d);
      },
      open() {
        live.why = "";
        resync(); // the events of while it was closed are lost: read everything
      },
      state(s, info) {
        Object.assign(live, { state: s, attempt: info.attempt, retryAt: info.retryAt });
        showLive();
        if (s !== "down") return;
        // Why: a 401 shows the sign-in banner (api does), anything else here.
        api("GET", "/v1/status").then(() => { live.why = ""; }, (e) => { live.why = e.status === 401 ? "signed out" : e.message; })
          .finally(showLive);
        // A stream that never opened (too many streams open: 503) still
        // leaves the page its reads: the first now, then every RESYNC_MS.
        if (!$("live").dataset.synced) resync();
      },
    });
  }

  // The clock: once a second, relative times, the charts and the status
  // line move on; nothing is read from the server.
  function tick() {
    const now = Date.now();
    sample(now);
    if (state.view === "queues") {
      renderCharts(now);
      renderQueues();
    }
    for (const c of document.querySelectorAll("[data-at]")) if (c.dataset.at) c.textContent = rel(c.dataset.at);
    if (live.state === "down") showLive();
    if (state.view === "job" && jl.state === "down") showJobStream("down", jl.info);
  }

  function queuePath(suffix) { return "/v1/queues/" + encodeURIComponent(state.queue) + suffix; }

  function wire() {
    window.addEventListener("hashchange", route);
    window.addEventListener("resize", () => { if (state.view === "queues") renderCharts(Date.now()); });
    for (const b of document.querySelectorAll("#tabs button[data-tab]")) {
      b.addEventListener("click", () => { state.tab = b.dataset.tab; state.jobs = []; renderJobs(); soonJobs(); });
    }
    $("queue-select").addEventListener("change", (e) => { location.hash = "#/queues/" + encodeURIComponent(e.target.value); });
    $("q-pause").addEventListener("click", () => act("pause " + state.queue, () => api("POST", queuePath("/pause"))));
    $("q-resume").addEventListener("click", () => act("resume " + state.queue, () => api("POST", queuePath("/resume"))));
    $("q-reclaim").addEventListener("click", () => act("reclaim sweep of " + state.queue, () => reclaim(state.queue)));
    $("webhook-retry").addEventListener("click", retryWebhookDead);
    $("dead-retry").addEventListener("click", () => act("retry dead", async () => (await api("POST", queuePath("/dead/retry"), {})).requeued + " requeued"));
    $("dead-purge").addEventListener("click", () => act("purge dead", async () => (await api("DELETE", queuePath("/dead"))).deleted + " deleted"));
    $("resched-go").addEventListener("click", () => act("reschedule", () => {
      const v = $("resched-value").value.trim();
      const body = /^\d{4}-/.test(v) ? { run_at: v } : { delay: v };
      return api("PATCH", "/v1/queues/" + encodeURIComponent(job.queue) + "/jobs/" + encodeURIComponent(job.id), body);
    }));
    $("enqueue").addEventListener("submit", (e) => {
      e.preventDefault();
      act("enqueue", async () => {
        let payload;
        try { payload = JSON.parse($("enq-payload").value || "{}"); } catch (_) { throw new Error("payload is not valid JSON"); }
        const body = { queue: $("enq-queue").value.trim(), kind: $("enq-kind").value.trim(), payload };
        const when = $("enq-when").value;
        if (when === "delay") body.delay = $("enq-delay").value.trim();
        if (when === "at") {
          const t = new Date($("enq-at").value);
          if (isNaN(t)) throw new Error("pick a time");
          body.run_at = t.toISOString();
        }
        const j = await api("POST", "/v1/jobs", body);
        return j.id + " " + j.status;
      });
    });
    $("demo-apply").addEventListener("click", () => act("workers", async () => {
      const d = await api("POST", "/v1/demo/pool", {
        size: Number($("demo-size").value), latency: $("demo-latency").value.trim(),
        fail_rate: Number($("demo-fail").value), hang_rate: Number($("demo-hang").value),
      });
      renderDemo(d, true);
      followPool(d, 40);
      return d.size + " worker(s)";
    }));
    $("demo-workflow").addEventListener("click", () => act("sample workflow", async () => {
      const r = await api("POST", "/v1/demo/workflow", { width: Number($("demo-wf-width").value) });
      location.hash = "#/workflows/" + encodeURIComponent(r.id);
      return r.id + " (" + r.nodes + " nodes)";
    }));
    $("wf-cancel").addEventListener("click", () => wfAction("cancel workflow", "cancel"));
    $("wf-retry").addEventListener("click", () => wfAction("retry workflow", "retry"));
    $("demo-batch").addEventListener("click", () => act("batch", async () => {
      const when = $("demo-when").value;
      const body = {
        count: Number($("demo-count").value), max_attempts: Number($("demo-attempts").value),
        visibility: $("demo-visibility").value.trim(),
        kinds: [...document.querySelectorAll("#demo-kinds input:checked")].map((i) => i.value),
      };
      if (when === "delay") body.delay = $("demo-delay").value.trim();
      if (when === "spread") body.spread = "1m";
      const r = await api("POST", "/v1/demo/batch", body);
      if (!state.queue && state.demo) state.queue = state.demo.queue;
      return r.enqueued + " job(s), first " + rel(r.first_run_at);
    }));
  }

  wire();
  route();
  startLive();
  setInterval(tick, 1000);
})();
