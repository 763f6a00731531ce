// chronoq dashboard: vanilla JS over the JSON API, polled once a second.
"use strict";
(function () {
  const POLL_MS = 1000;     // at most one refresh a second
  const HISTORY = 60;       // samples kept per queue for the charts
  const LIMIT = 50;         // jobs listed per tab
  const STATUSES = ["scheduled", "pending", "processing", "completed", "dead"];

  const state = { queue: "", tab: "scheduled", open: "", history: {}, demo: false, cron: true, busy: false };
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
    if (r.status === 401) $("auth").hidden = false;
    if (!r.ok) {
      const e = data && data.error;
      const err = new Error(e ? e.code + ": " + e.message + (e.field ? " (" + e.field + ")" : "") : "HTTP " + r.status);
      err.status = r.status;
      throw err;
    }
    return data;
  }

  let msgTimer = 0;
  function say(text, ok) {
    const m = $("msg");
    m.textContent = text;
    m.className = ok ? "ok" : "err";
    clearTimeout(msgTimer);
    msgTimer = setTimeout(() => { m.textContent = ""; }, 6000);
  }

  // act runs an action, reports it, and refreshes at once.
  async function act(label, fn) {
    try {
      const r = await fn();
      say(label + (typeof r === "string" ? ": " + r : ""), true);
    } catch (e) {
      say(label + " failed: " + e.message, false);
    }
    refresh();
  }

  function rel(iso) {
    if (!iso) return "—";
    const d = (Date.parse(iso) - Date.now()) / 1000;
    const a = Math.abs(d);
    const s = a < 1 ? "now" : a < 90 ? Math.round(a) + "s" : a < 5400 ? Math.round(a / 60) + "m" : Math.round(a / 3600) + "h";
    if (s === "now") return s;
    return d > 0 ? "in " + s : s + " ago";
  }
  function timeCell(iso) { return el("td", { title: iso || "" }, rel(iso)); }
  function fmtMs(ms) { return ms < 1000 ? ms + "ms" : (ms / 1000).toFixed(1) + "s"; }

  // spark draws a tiny line chart of values as inline SVG.
  function spark(values, cls, title) {
    const w = 80, h = 18, NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", w);
    svg.setAttribute("height", h);
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    const t = document.createElementNS(NS, "title");
    t.textContent = title;
    svg.append(t);
    const max = Math.max(1, ...values);
    const pts = values.map((v, i) => {
      const x = values.length < 2 ? 0 : (i * (w - 2)) / (HISTORY - 1) + 1;
      return x.toFixed(1) + "," + (h - 1 - (v / max) * (h - 2)).toFixed(1);
    });
    const pl = document.createElementNS(NS, "polyline");
    pl.setAttribute("class", cls);
    pl.setAttribute("points", pts.join(" "));
    svg.append(pl);
    return svg;
  }

  function record(q, now) {
    const h = state.history[q.name] || (state.history[q.name] = []);
    const last = h[h.length - 1];
    let rate = 0;
    if (last && now > last.t) rate = Math.max(0, (q.completed_total - last.completed) / ((now - last.t) / 1000));
    h.push({ t: now, completed: q.completed_total, rate, late: q.oldest_pending_age_ms });
    if (h.length > HISTORY) h.shift();
    return h;
  }

  function renderQueues(qs) {
    const tb = $("queues").tBodies[0];
    const now = Date.now();
    const rows = qs.map((q) => {
      const h = record(q, now);
      const rate = h[h.length - 1].rate;
      return el("tr", { class: "q" + (q.name === state.queue ? " selected" : ""), dataset: { queue: q.name } },
        el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); select(q.name); } }, q.name),
          q.paused ? el("span", { class: "badge" }, "paused") : ""),
        el("td", {}, q.scheduled), el("td", {}, q.pending), el("td", {}, q.processing), el("td", {}, q.dead),
        el("td", {}, q.completed_total), el("td", {}, q.failed_total), el("td", {}, q.retried_total),
        el("td", {}, q.reclaimed_total), timeCell(q.next_run_at),
        el("td", {}, spark(h.map((s) => s.rate), "tp", "completed/s, last minute"), " " + rate.toFixed(1) + "/s"),
        el("td", {}, spark(h.map((s) => s.late), "lt", "oldest pending age, last minute"), " " + fmtMs(q.oldest_pending_age_ms)),
        el("td", {}, el("button", { onclick: () => act("reclaim " + q.name, () => reclaim(q.name)) }, "reclaim")));
    });
    tb.replaceChildren(...rows);
    $("no-queues").hidden = qs.length > 0;

    const sel = $("queue-select");
    const names = qs.map((q) => q.name);
    if (!state.queue && names.length) state.queue = state.demo && names.includes("demo") ? "demo" : names[0];
    if (sel.options.length !== names.length || names.some((n, i) => sel.options[i].value !== n)) {
      sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    }
    sel.value = state.queue;
    const cur = qs.find((q) => q.name === state.queue);
    if (cur) {
      $("count-scheduled").textContent = cur.scheduled;
      $("count-pending").textContent = cur.pending;
      $("count-processing").textContent = cur.processing;
      $("count-completed").textContent = cur.completed_total;
      $("count-dead").textContent = cur.dead;
      $("q-pause").hidden = cur.paused;
      $("q-resume").hidden = !cur.paused;
    }
  }

  async function reclaim(q) {
    const r = await api("POST", "/v1/queues/" + encodeURIComponent(q) + "/reclaim");
    return r.reclaimed.length + " job(s) reclaimed";
  }

  function jobPath(j) { return "/v1/queues/" + encodeURIComponent(j.queue) + "/jobs/" + encodeURIComponent(j.id); }

  function jobActions(j) {
    const b = (label, fn) => el("button", { class: "act", dataset: { act: label }, onclick: (e) => { e.stopPropagation(); act(label + " " + j.id.slice(-8), fn); } }, label);
    const out = [];
    if (j.status === "scheduled") out.push(b("run now", () => api("POST", jobPath(j) + "/retry")));
    if (j.status === "scheduled" || j.status === "pending") out.push(b("cancel", () => api("DELETE", jobPath(j))));
    if (j.status === "processing") out.push(b("cancel", () => api("DELETE", jobPath(j))));
    if (j.status === "dead") out.push(b("retry", () => api("POST", jobPath(j) + "/retry")));
    if (j.status === "dead" || j.status === "completed") out.push(b("delete", () => api("DELETE", jobPath(j))));
    return out;
  }

  function renderJobs(jobs) {
    const tab = state.tab;
    $("time-head").textContent = { scheduled: "run at", pending: "due", processing: "lease until", completed: "completed", dead: "died" }[tab];
    const rows = jobs.map((j) => {
      const t = tab === "processing" ? j.lease_until : tab === "completed" ? j.completed_at : j.run_at;
      return el("tr", { class: "job" + (j.id === state.open ? " selected" : ""), dataset: { id: j.id, status: j.status }, onclick: () => openJob(j) },
        el("td", { title: j.id }, el("code", {}, j.id.slice(-12))), el("td", {}, j.kind), el("td", {}, j.status),
        el("td", {}, j.attempts + "/" + j.max_attempts), timeCell(t),
        el("td", { class: "err", title: j.last_error || "" }, j.last_error || ""), el("td", {}, ...jobActions(j)));
    });
    $("jobs").tBodies[0].replaceChildren(...rows);
    $("no-jobs").hidden = jobs.length > 0;
    $("dead-actions").hidden = tab !== "dead";
    for (const b of document.querySelectorAll("#tabs button[data-tab]")) b.classList.toggle("on", b.dataset.tab === tab);
  }

  async function openJob(j) {
    state.open = j.id;
    state.openQueue = j.queue;
    await showJob();
  }

  async function showJob() {
    if (!state.open) { $("detail").hidden = true; return; }
    try {
      const j = await api("GET", "/v1/queues/" + encodeURIComponent(state.openQueue) + "/jobs/" + encodeURIComponent(state.open));
      $("detail").hidden = false;
      $("detail-id").textContent = j.id;
      $("detail-job").textContent = JSON.stringify(Object.assign({}, j, { payload: undefined, result: undefined, last_error: undefined }), null, 2);
      $("detail-payload").textContent = JSON.stringify(j.payload, null, 2);
      $("detail-result").textContent = j.result === null ? "—" : JSON.stringify(j.result, null, 2);
      $("detail-error").textContent = j.last_error || "—";
      $("detail-resched").hidden = !(j.status === "scheduled" || j.status === "pending");
      renderDeliveries(j.deliveries || []);
    } catch (e) {
      if (e.status === 404) { state.open = ""; $("detail").hidden = true; } else throw e;
    }
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

  function renderCron(entries) {
    const rows = entries.map((c) => el("tr", {},
      el("td", {}, c.name), el("td", {}, el("code", {}, c.schedule), c.paused ? el("span", { class: "badge" }, "paused") : ""),
      el("td", {}, c.queue), el("td", {}, c.kind), timeCell(c.next_run_at), timeCell(c.last_run_at),
      el("td", {}, c.last_job_id ? el("code", {}, c.last_job_id.slice(-12)) : "—")));
    $("cron").tBodies[0].replaceChildren(...rows);
    $("no-cron").hidden = entries.length > 0;
  }

  function renderDemo(d) {
    for (const k of ["running", "busy", "completed", "failed", "hung", "released"]) $("demo-" + k).textContent = d[k];
    const box = $("demo-kinds");
    if (!box.childElementCount) {
      box.append(...d.kinds.map((k) => el("label", {}, el("input", { type: "checkbox", value: k, checked: true }), " " + k)));
    }
  }

  function fmtAge(sec) {
    return sec < 90 ? Math.round(sec) + "s" : sec < 5400 ? Math.round(sec / 60) + "m" : sec < 172800 ? Math.round(sec / 3600) + "h" : Math.round(sec / 86400) + "d";
  }

  // fmtOffset writes seconds with their sign: "+0.4 ms", "-30.0 s".
  function fmtOffset(sec) {
    const a = Math.abs(sec);
    return (sec < 0 ? "-" : "+") + (a < 1 ? (a * 1000).toFixed(1) + " ms" : a.toFixed(1) + " s");
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

  function select(q) {
    state.queue = q;
    state.open = "";
    refresh();
  }

  let timer = 0;
  async function refresh() {
    clearTimeout(timer);
    if (state.busy) { state.again = true; return; }
    state.busy = true;
    try {
      const [qs, demo, cron, status] = await Promise.all([
        api("GET", "/v1/queues"),
        state.demo !== null ? api("GET", "/v1/demo").catch((e) => { if (e.status === 404) return null; throw e; }) : null,
        state.cron ? api("GET", "/v1/cron").catch((e) => { if (e.status === 404) return null; throw e; }) : null,
        api("GET", "/v1/status").catch((e) => { if (e.status === 404) return null; throw e; }),
      ]);
      renderStatus(status);
      state.demo = demo ? true : null;
      $("demo-panel").hidden = !demo;
      if (demo) renderDemo(demo);
      state.cron = cron !== null;
      $("cron-panel").hidden = !cron;
      if (cron) renderCron(cron.entries);
      renderQueues(qs.queues);
      if (state.queue) {
        const [r, q] = await Promise.all([
          api("GET", "/v1/queues/" + encodeURIComponent(state.queue) + "/jobs?status=" + state.tab + "&limit=" + LIMIT),
          api("GET", "/v1/queues/" + encodeURIComponent(state.queue)).catch((e) => { if (e.status === 404) return null; throw e; }),
        ]);
        renderJobs(r.jobs);
        renderQueueConfig(q);
      }
      await showJob();
      $("auth").hidden = true;
      $("live").textContent = "live · " + new Date().toLocaleTimeString();
    } catch (e) {
      $("live").textContent = "offline: " + e.message;
    } finally {
      state.busy = false;
      if (state.again) { state.again = false; timer = setTimeout(refresh, 0); } else timer = setTimeout(refresh, POLL_MS);
    }
  }

  function queuePath(suffix) { return "/v1/queues/" + encodeURIComponent(state.queue) + suffix; }

  function wire() {
    for (const b of document.querySelectorAll("#tabs button[data-tab]")) {
      b.addEventListener("click", () => { state.tab = b.dataset.tab; refresh(); });
    }
    $("queue-select").addEventListener("change", (e) => select(e.target.value));
    $("q-pause").addEventListener("click", () => act("pause " + state.queue, () => api("POST", queuePath("/pause"))));
    $("q-resume").addEventListener("click", () => act("resume " + state.queue, () => api("POST", queuePath("/resume"))));
    $("q-reclaim").addEventListener("click", () => act("reclaim sweep of " + state.queue, () => reclaim(state.queue)));
    $("dead-retry").addEventListener("click", () => act("retry dead", async () => (await api("POST", queuePath("/dead/retry"), {})).requeued + " requeued"));
    $("dead-purge").addEventListener("click", () => act("purge dead", async () => (await api("DELETE", queuePath("/dead"))).deleted + " deleted"));
    $("detail-close").addEventListener("click", () => { state.open = ""; $("detail").hidden = true; });
    $("resched-go").addEventListener("click", () => act("reschedule", () => {
      const v = $("resched-value").value.trim();
      const body = /^\d{4}-/.test(v) ? { run_at: v } : { delay: v };
      return api("PATCH", "/v1/queues/" + encodeURIComponent(state.openQueue) + "/jobs/" + encodeURIComponent(state.open), body);
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
      return d.size + " worker(s)";
    }));
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
      if (!state.queue) state.queue = "demo";
      return r.enqueued + " job(s), first " + rel(r.first_run_at);
    }));
  }

  wire();
  refresh();
})();
