// Kura console: plain JavaScript, no dependencies. Talks only to this server:
// /admin/ (tables, regions, flush, compact, split, heatmap) and the HBase REST API (scan, put).
"use strict";

(function () {
  const APPS = [
    { table: "blog", label: "Blog", hint: "articles by user and category", api: "/apps/blog/" },
    { table: "useractions", label: "User actions", hint: "action log per user", api: "/apps/actions/" },
    { table: "access", label: "Access counter", hint: "hourly, daily and total hits", api: "/apps/counter/" },
    { table: "graph", label: "Graph", hint: "nodes and relationships", api: "/apps/graph/" },
  ];
  const RATE_POLL_MS = 2000;
  const RATE_POINTS = 90; // 3 minutes at 2 s
  const HEATMAP_POLL_MS = 5000;
  const TABLES_POLL_MS = 5000;

  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  const state = {
    tables: [],
    table: null, // name of the table shown
    tab: "regions",
    regionSamples: null, // {at, byId: {id: {reads, writes}}}
    regionRates: {}, // id -> {r, w}
    rateHistory: [], // [{at, r, w}]
    valueMode: "text",
    scan: { prefix: "", pages: [], lastRows: null },
    heatmap: null,
    timers: [],
  };

  // ---------- small helpers ----------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v == null) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v);
      }
    }
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function fmtInt(n) {
    return Number(n || 0).toLocaleString("en-US");
  }

  function fmtBytes(n) {
    n = Number(n || 0);
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 2 : 1)) + " " + units[i];
  }

  function fmtRate(n) {
    if (!n) return "0";
    if (n >= 100) return n.toFixed(0);
    if (n >= 10) return n.toFixed(1);
    return n.toFixed(2);
  }

  function toast(msg, kind) {
    const t = el("div", { class: "toast " + (kind || "") , text: msg });
    $("#toasts").append(t);
    setTimeout(() => t.remove(), kind === "error" ? 7000 : 3500);
  }

  async function api(method, url, body, headers) {
    const opts = { method, headers: Object.assign({ Accept: "application/json" }, headers || {}) };
    const token = sessionStorage.getItem("kura-token");
    if (token) opts.headers.Authorization = "Bearer " + token;
    if (body !== undefined) {
      opts.body = typeof body === "string" ? body : JSON.stringify(body);
      opts.headers["Content-Type"] = "application/json";
    }
    let res;
    try {
      res = await fetch(url, opts);
      $("#conn").classList.remove("down");
    } catch (e) {
      $("#conn").classList.add("down");
      throw new Error("server unreachable");
    }
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = text; }
    }
    if (res.status === 401) showTokenBar();
    if (!res.ok) {
      const msg = data && data.error ? data.error.message : (typeof data === "string" && data ? data.trim() : res.statusText);
      const err = new Error(msg || ("HTTP " + res.status));
      err.status = res.status;
      throw err;
    }
    return data;
  }

  // A server started with a token file wants `Authorization: Bearer <token>` on every call.
  function showTokenBar() {
    const bar = $("#token-form");
    if (!bar.hidden) return;
    bar.hidden = false;
    $("#token-input").focus();
  }

  const enc = new TextEncoder();
  const dec = new TextDecoder("utf-8", { fatal: true });

  function b64ToBytes(s) {
    const bin = atob(s || "");
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function bytesToB64(bytes) {
    let bin = "";
    for (const b of bytes) bin += String.fromCharCode(b);
    return btoa(bin);
  }

  // Percent-encodes raw bytes for a query parameter (the REST API decodes to bytes).
  function pctBytes(bytes) {
    let s = "";
    for (const b of bytes) {
      const c = String.fromCharCode(b);
      s += /[A-Za-z0-9\-_.~]/.test(c) ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0");
    }
    return s;
  }

  // The smallest key greater than every key with this prefix, or null if there is none.
  function prefixEnd(bytes) {
    const b = Array.from(bytes);
    while (b.length && b[b.length - 1] === 0xff) b.pop();
    if (!b.length) return null;
    b[b.length - 1] += 1;
    return Uint8Array.from(b);
  }

  // Text as bytes, with `\xNN` for any byte and `\\` for a backslash (how keys are displayed).
  function parseEscaped(text) {
    const out = [];
    for (let i = 0; i < text.length;) {
      if (text[i] === "\\" && text[i + 1] === "x" && /^[0-9a-fA-F]{2}$/.test(text.substr(i + 2, 2))) {
        out.push(parseInt(text.substr(i + 2, 2), 16));
        i += 4;
      } else if (text[i] === "\\" && text[i + 1] === "\\") {
        out.push(0x5c);
        i += 2;
      } else {
        const cp = text.codePointAt(i);
        const ch = String.fromCodePoint(cp);
        out.push(...enc.encode(ch));
        i += ch.length;
      }
    }
    return Uint8Array.from(out);
  }

  function hex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
  }

  // Bytes as readable text: valid UTF-8 with control characters escaped, else \xNN escapes.
  function textNode(bytes) {
    let s = null;
    try { s = dec.decode(bytes); } catch (_) { s = null; }
    const frag = document.createDocumentFragment();
    if (s !== null && !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(s)) {
      frag.append(s);
      return frag;
    }
    let run = "";
    for (const b of bytes) {
      if (b >= 0x20 && b < 0x7f) { run += String.fromCharCode(b); continue; }
      if (run) { frag.append(run); run = ""; }
      frag.append(el("span", { class: "esc", text: "\\x" + b.toString(16).padStart(2, "0") }));
    }
    if (run) frag.append(run);
    return frag;
  }

  // An 8-byte value that is not text is most likely a counter (increment): show its number.
  function int64Hint(bytes) {
    if (bytes.length !== 8) return null;
    try {
      const s = dec.decode(bytes);
      if (!/[\u0000-\u001f\u007f]/.test(s)) return null;
    } catch (_) { /* not UTF-8: binary */ }
    return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigInt64(0).toString();
  }

  function fmtTime(ms) {
    const d = new Date(ms);
    if (isNaN(d.getTime())) return String(ms);
    return d.toISOString().replace("T", " ").replace("Z", " UTC");
  }

  // ---------- routing ----------

  function route() {
    state.gen = (state.gen || 0) + 1;
    const h = decodeURIComponent(location.hash.replace(/^#/, "")) || "/";
    const m = h.match(/^\/table\/([^/]+)(?:\/(regions|rows|heatmap|schema))?/);
    stopTimers();
    if (m) {
      showTable(m[1], m[2] || "regions");
    } else {
      showOverview();
    }
  }

  function showView(id) {
    for (const v of $$(".view")) v.hidden = v.id !== id;
  }

  function stopTimers() {
    for (const t of state.timers) clearInterval(t);
    state.timers = [];
  }

  function every(ms, fn) {
    fn();
    state.timers.push(setInterval(fn, ms));
  }

  // ---------- sidebar + overview ----------

  async function loadTables() {
    try {
      const data = await api("GET", "/admin/tables");
      state.tables = data.tables || [];
    } catch (e) {
      state.tables = state.tables || [];
      return;
    }
    renderSidebar();
    if (!state.table) renderOverviewTables();
  }

  function renderSidebar() {
    const list = $("#table-list");
    list.replaceChildren();
    if (!state.tables.length) list.append(el("li", { class: "muted", text: "no tables yet" }));
    for (const t of state.tables) {
      list.append(el("li", null, el("a", {
        href: "#/table/" + encodeURIComponent(t.name),
        class: t.name === state.table ? "active" : null,
        "data-table": t.name,
        title: t.name,
      }, el("span", { text: t.name }), el("span", { class: "count", text: t.regions + (t.regions === 1 ? " region" : " regions") }))));
    }
    const apps = $("#app-list");
    apps.replaceChildren();
    for (const a of APPS) {
      const exists = state.tables.some((t) => t.name === a.table);
      apps.append(el("li", null, exists
        ? el("a", { href: "#/table/" + a.table + "/rows", title: a.hint + " (table " + a.table + ")", "data-app": a.table,
            class: a.table === state.table ? "active" : null },
            el("span", { text: a.label }), el("span", { class: "count", text: a.table }))
        : el("span", { class: "disabled", title: "table " + a.table + " does not exist yet" },
            el("span", { text: a.label }), el("span", { class: "count", text: a.table }))));
    }
  }

  async function showOverview() {
    state.table = null;
    showView("view-overview");
    renderSidebar();
    every(TABLES_POLL_MS, async () => {
      await loadTables();
      await renderSummary();
    });
  }

  function renderOverviewTables() {
    const body = $("#overview-tables tbody");
    body.replaceChildren();
    if (!state.tables.length) {
      body.append(el("tr", null, el("td", { colspan: 8, class: "muted", text: "No tables yet: create one below or through the REST API." })));
    }
    for (const t of state.tables) {
      const s = state.tableTotals && state.tableTotals[t.name];
      body.append(el("tr", null,
        el("td", null, el("a", { href: "#/table/" + encodeURIComponent(t.name), text: t.name })),
        el("td", { text: t.families.map((f) => f.name).join(", ") }),
        el("td", { class: "num", text: fmtInt(t.buckets) }),
        el("td", { class: "num", text: fmtInt(t.regions) }),
        el("td", { class: "num", text: s ? fmtInt(s.cells) : "…" }),
        el("td", { class: "num", text: s ? fmtBytes(s.bytes) : "…" }),
        el("td", { class: "num", text: s ? fmtInt(s.reads) : "…" }),
        el("td", { class: "num", text: s ? fmtInt(s.writes) : "…" })));
    }
  }

  async function renderSummary() {
    const totals = {};
    let regions = 0, cells = 0, bytes = 0, reads = 0, writes = 0, logBytes = 0;
    await Promise.all(state.tables.map(async (t) => {
      try {
        const r = await api("GET", "/admin/tables/" + encodeURIComponent(t.name) + "/regions");
        const s = { cells: 0, bytes: 0, reads: 0, writes: 0 };
        for (const g of r.regions) {
          s.cells += g.cells; s.bytes += g.bytes; s.reads += g.reads; s.writes += g.writes;
          logBytes += g.log_bytes;
        }
        totals[t.name] = s;
        regions += r.regions.length; cells += s.cells; bytes += s.bytes; reads += s.reads; writes += s.writes;
      } catch (_) { /* dropped meanwhile */ }
    }));
    if (state.table) return;
    state.tableTotals = totals;
    renderOverviewTables();
    const server = await serverFigures();
    if (state.table) return;
    const cards = $("#summary-cards");
    cards.replaceChildren();
    const card = (label, value, title) => el("div", { class: "card", title },
      el("div", { class: "label", text: label }), el("div", { class: "value", text: value }));
    cards.append(card("Tables", fmtInt(state.tables.length)), card("Regions", fmtInt(regions)),
      card("Cells", fmtInt(cells), "every stored version and delete marker"), card("Data", fmtBytes(bytes)),
      card("Log", fmtBytes(logBytes)), card("Reads", fmtInt(reads)), card("Writes", fmtInt(writes)));
    if (server) {
      cards.append(
        card("HTTP requests/s", server.rate == null ? "…" : fmtRate(server.rate), "from /metrics, this console's own polling included"),
        card("Scanners open", fmtInt(server.scanners)),
        card("Uptime", fmtDuration(server.uptime), server.startup ? "store opened in " + server.startup.toFixed(2) + " s" : null));
    }
  }

  // A few figures from /metrics (Prometheus text): total requests, open scanners, uptime.
  async function serverFigures() {
    let text;
    try {
      const headers = {};
      const token = sessionStorage.getItem("kura-token");
      if (token) headers.Authorization = "Bearer " + token;
      const res = await fetch("/metrics", { headers });
      if (!res.ok) return null;
      text = await res.text();
    } catch (_) {
      return null;
    }
    let total = 0, scanners = 0, uptime = 0, startup = 0;
    for (const line of text.split("\n")) {
      if (line.startsWith("#")) continue;
      const sp = line.lastIndexOf(" ");
      const v = Number(line.slice(sp + 1));
      if (line.startsWith("kura_http_requests_total{")) total += v;
      else if (line.startsWith("kura_scanners_open ")) scanners = v;
      else if (line.startsWith("kura_uptime_seconds ")) uptime = v;
      else if (line.startsWith("kura_startup_seconds ")) startup = v;
    }
    const now = performance.now();
    const prev = state.requestSample;
    state.requestSample = { at: now, total };
    const rate = prev && now > prev.at ? Math.max(0, (total - prev.total) * 1000 / (now - prev.at)) : null;
    return { rate, scanners, uptime, startup };
  }

  function fmtDuration(s) {
    s = Math.floor(s || 0);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
  }

  // ---------- table view ----------

  function tableInfo() {
    return state.tables.find((t) => t.name === state.table);
  }

  async function showTable(name, tab) {
    const switched = state.table !== name;
    state.table = name;
    state.tab = tab;
    if (switched) {
      state.regionSamples = null;
      state.regionRates = {};
      state.rateHistory = [];
      state.scan = { prefix: "", pages: [], lastRows: null };
      $("#scan-prefix").value = "";
      $("#rows-table tbody").replaceChildren(el("tr", null, el("td", { colspan: 4, class: "muted", text: "Press Scan to browse rows." })));
      $("#scan-status").textContent = "";
      $("#scan-next").disabled = true;
      $("#scan-first").disabled = true;
    }
    const gen = state.gen;
    await loadTables();
    if (gen !== state.gen) return;
    const info = tableInfo();
    if (!info) {
      showView("view-missing");
      $("#missing-text").textContent = "There is no table named “" + name + "”.";
      return;
    }
    showView("view-table");
    renderSidebar();
    $("#t-name").textContent = info.name;
    const app = APPS.find((a) => a.table === info.name);
    $("#t-app").hidden = !app;
    if (app) {
      $("#t-app").replaceChildren("Table of the ", el("strong", { text: app.label }), " application (" + app.hint + "), served under ",
        el("code", { text: app.api }), ".");
    }
    $("#t-sub").textContent = info.families.length + (info.families.length === 1 ? " family" : " families") +
      " · " + info.buckets + " salt buckets · " + info.regions + (info.regions === 1 ? " region" : " regions");
    for (const a of $$("#tabs a")) a.classList.toggle("on", a.dataset.tab === tab);
    for (const t of $$(".tab")) t.hidden = t.id !== "tab-" + tab;
    renderSchema(info);
    state.timers.push(setInterval(loadTables, TABLES_POLL_MS));
    if (tab === "regions") every(RATE_POLL_MS, pollRegions);
    if (tab === "heatmap") every(HEATMAP_POLL_MS, pollHeatmap);
    if (tab === "rows" && switched) scan(true);
    if (tab === "rows" && !switched && !state.scan.lastRows) scan(true);
  }

  function renderSchema(info) {
    const body = $("#family-table tbody");
    body.replaceChildren();
    for (const f of info.families) {
      const attrs = Object.entries(f.attributes || {}).map(([k, v]) => k + "=" + v).join(", ");
      body.append(el("tr", null, el("td", null, el("code", { text: f.name })),
        el("td", { class: "num", text: f.max_versions }),
        el("td", { text: f.ttl_secs == null ? "forever" : fmtInt(f.ttl_secs) + " s" }),
        el("td", { class: "muted", text: attrs || "–" })));
    }
    const dl = $("#settings");
    dl.replaceChildren();
    const kv = (k, v) => dl.append(el("dt", { text: k }), el("dd", { text: v }));
    kv("Salt buckets", String(info.buckets));
    kv("Salt prefix length", info.salt_prefix_len == null ? "whole key" : info.salt_prefix_len + " bytes");
    kv("Initial regions", info.initial_regions == null ? "server default" : String(info.initial_regions));
    kv("Regions now", String(info.regions));
    for (const [k, v] of Object.entries(info.attributes || {})) kv(k, v);
  }

  async function pollRegions() {
    const name = state.table;
    let data;
    try {
      data = await api("GET", "/admin/tables/" + encodeURIComponent(name) + "/regions");
    } catch (e) {
      if (e.status === 404) route();
      return;
    }
    if (state.table !== name) return;
    const now = performance.now();
    const byId = {};
    for (const r of data.regions) byId[r.id] = { reads: r.reads, writes: r.writes };
    const prev = state.regionSamples;
    if (prev) {
      const dt = (now - prev.at) / 1000;
      let tr = 0, tw = 0;
      const rates = {};
      for (const r of data.regions) {
        const p = prev.byId[r.id];
        // A region new since the last poll (a split) has no earlier sample: count from zero.
        const dr = Math.max(0, r.reads - (p ? p.reads : 0));
        const dw = Math.max(0, r.writes - (p ? p.writes : 0));
        rates[r.id] = { r: dr / dt, w: dw / dt };
        tr += dr; tw += dw;
      }
      state.regionRates = rates;
      state.rateHistory.push({ at: Date.now(), r: tr / dt, w: tw / dt });
      if (state.rateHistory.length > RATE_POINTS) state.rateHistory.shift();
    }
    state.regionSamples = { at: now, byId };
    renderRegions(data);
    drawRateChart();
  }

  function renderRegions(data) {
    $("#region-count").textContent = data.regions.length;
    const info = tableInfo();
    if (info && info.regions !== data.regions.length) {
      info.regions = data.regions.length;
      $("#t-sub").textContent = info.families.length + (info.families.length === 1 ? " family" : " families") +
        " · " + info.buckets + " salt buckets · " + info.regions + (info.regions === 1 ? " region" : " regions");
      renderSidebar();
    }
    const body = $("#region-table tbody");
    // Keep a split input the user is typing in.
    const focused = document.activeElement;
    const typing = focused && focused.tagName === "INPUT" && focused.value !== "" && focused.closest("#region-table");
    if (typing && !state.forceRender) return;
    state.forceRender = false;
    body.replaceChildren();
    for (const r of data.regions) {
      const rate = state.regionRates[r.id] || { r: 0, w: 0 };
      const bar = el("div", { class: "rangebar", title: "buckets " + r.bucket_start + " to " + (r.bucket_end - 1) });
      const span = el("span");
      span.style.left = (100 * r.bucket_start / data.buckets) + "%";
      span.style.width = Math.max(1, 100 * (r.bucket_end - r.bucket_start) / data.buckets) + "%";
      bar.append(span);
      const input = el("input", { type: "number", min: r.bucket_start + 1, max: r.bucket_end - 1, placeholder: "at…",
        title: "first bucket of the new upper region", "aria-label": "split bucket for region " + r.id });
      const canSplit = r.bucket_end - r.bucket_start >= 2;
      const mode = el("select", { "aria-label": "how to choose the split point of region " + r.id,
        title: "Without a bucket: split in the middle, where the writes (size) or the reads and writes (load) halve" },
        el("option", { value: "middle", text: "middle" }), el("option", { value: "size", text: "by size" }),
        el("option", { value: "load", text: "by load" }));
      const btn = el("button", { class: "btn small", "data-split": r.id, text: "Split", disabled: canSplit ? null : "disabled",
        onclick: () => splitRegion(r.id, input.value, mode.value, btn) });
      body.append(el("tr", { "data-region": r.id },
        el("td", null, el("code", { text: "#" + r.id }), r.poisoned ? el("span", { class: "ver", text: "unavailable" }) : null),
        el("td", null, el("span", { text: "[" + r.bucket_start + ", " + r.bucket_end + ")" }), bar),
        el("td", { class: "num", text: fmtInt(r.cells) }),
        el("td", { class: "num", text: fmtBytes(r.bytes) }),
        el("td", { class: "num", text: fmtBytes(r.memtable_bytes) }),
        el("td", { class: "num", text: fmtInt(r.segments) }),
        el("td", { class: "num", text: fmtBytes(r.log_bytes) }),
        el("td", { class: "num", text: fmtRate(rate.r) }),
        el("td", { class: "num", text: fmtRate(rate.w) }),
        el("td", { class: "num", text: r.group_commit_avg ? r.group_commit_avg.toFixed(1) : "–" }),
        el("td", { class: "num", text: fmtInt(r.flushes) + " / " + fmtInt(r.compactions) }),
        el("td", { class: "split-cell" }, canSplit ? input : null, canSplit ? mode : null, btn)));
    }
  }

  function drawRateChart() {
    const c = $("#rate-chart");
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth || 600, h = c.clientHeight || 180;
    if (c.width !== Math.round(w * dpr)) { c.width = Math.round(w * dpr); c.height = Math.round(h * dpr); }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const pad = { l: 48, r: 10, t: 10, b: 22 };
    const pts = state.rateHistory;
    const max = Math.max(1, ...pts.map((p) => Math.max(p.r, p.w)));
    const nice = niceMax(max);
    const x = (i) => pad.l + (w - pad.l - pad.r) * (RATE_POINTS - pts.length + i) / (RATE_POINTS - 1);
    const y = (v) => h - pad.b - (h - pad.t - pad.b) * v / nice;
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b7385";
    g.strokeStyle = "#e2e5eb";
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = nice * i / 4;
      const yy = Math.round(y(v)) + 0.5;
      g.beginPath(); g.moveTo(pad.l, yy); g.lineTo(w - pad.r, yy); g.stroke();
      g.textAlign = "right"; g.textBaseline = "middle";
      g.fillText(fmtRate(v), pad.l - 6, yy);
    }
    g.textAlign = "left"; g.textBaseline = "alphabetic";
    g.fillText("−" + Math.round(RATE_POINTS * RATE_POLL_MS / 60000) + " min", pad.l, h - 6);
    g.textAlign = "right";
    g.fillText("now", w - pad.r, h - 6);
    if (pts.length < 2) {
      g.textAlign = "center";
      g.fillText(pts.length ? "measuring…" : "waiting for the first samples…", w / 2, h / 2);
      return;
    }
    g.fillStyle = "rgba(47, 111, 222, 0.12)";
    g.beginPath();
    g.moveTo(x(0), y(0));
    pts.forEach((p, i) => g.lineTo(x(i), y(p.r)));
    g.lineTo(x(pts.length - 1), y(0));
    g.closePath();
    g.fill();
    for (const [key, color] of [["r", "#2f6fde"], ["w", "#e0792b"]]) {
      g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
      pts.forEach((p, i) => (i ? g.lineTo(x(i), y(p[key])) : g.moveTo(x(i), y(p[key]))));
      g.stroke();
    }
    const last = pts[pts.length - 1];
    g.textAlign = "left";
    g.fillStyle = "#1d2330";
    g.fillText(fmtRate(last.r) + " reads/s · " + fmtRate(last.w) + " writes/s", pad.l + 8, pad.t + 12);
  }

  function niceMax(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  async function adminAction(btn, label, url) {
    btn.classList.add("busy");
    try {
      const r = await api("POST", url);
      toast(label + " done", "ok");
      return r;
    } catch (e) {
      toast(label + " failed: " + e.message, "error");
      return null;
    } finally {
      btn.classList.remove("busy");
      state.forceRender = true;
      if (state.tab === "regions") pollRegions();
    }
  }

  async function splitRegion(id, bucket, by, btn) {
    let url = "/admin/tables/" + encodeURIComponent(state.table) + "/regions/" + id + "/split";
    if (bucket !== "" && bucket != null) url += "?bucket=" + encodeURIComponent(bucket);
    else if (by && by !== "middle") url += "?by=" + encodeURIComponent(by);
    const r = await adminAction(btn, "Split of region #" + id, url);
    if (r) {
      toast("Region #" + id + " is now regions #" + r.into[0] + " and #" + r.into[1] +
        (r.at_bucket != null ? " (split at bucket " + r.at_bucket + ")" : ""), "ok");
      await loadTables();
    }
  }

  // ---------- row browser ----------

  async function scan(first) {
    const name = state.table;
    if (first) {
      state.scan.prefix = $("#scan-prefix").value;
      state.scan.pages = [null];
    }
    const limit = Number($("#scan-limit").value);
    const versions = Number($("#scan-versions").value);
    const prefix = parseEscaped(state.scan.prefix);
    const start = state.scan.pages[state.scan.pages.length - 1];
    $("#scan-status").textContent = "scanning…";
    let data;
    try {
      // The first page is a stateless prefix scan (GET /{t}/{prefix}*); later pages start at a
      // row key, which may be any bytes, so they use a one-shot scanner with base64 bounds.
      data = start
        ? await scannerPage(name, start, prefix.length ? prefixEnd(prefix) : null, limit + 1, versions)
        : await api("GET", "/" + encodeURIComponent(name) + "/" + pctBytes(prefix) + "*?limit=" + (limit + 1) +
            "&maxversions=" + versions);
    } catch (e) {
      if (e.status === 404) data = { Row: [] };
      else {
        $("#scan-status").textContent = "";
        toast("Scan failed: " + e.message, "error");
        return;
      }
    }
    if (state.table !== name) return;
    const rows = (data && data.Row) || [];
    const more = rows.length > limit;
    const shown = rows.slice(0, limit);
    state.scan.lastRows = shown;
    state.scan.nextStart = more ? b64ToBytes(rows[limit].key) : null;
    renderRows();
    const page = state.scan.pages.length;
    $("#scan-status").textContent = shown.length
      ? "page " + page + " · " + shown.length + (shown.length === 1 ? " row" : " rows") + (more ? " · more follow" : "")
      : "no rows" + (state.scan.prefix ? " with prefix “" + state.scan.prefix + "”" : "");
    $("#scan-next").disabled = !more;
    $("#scan-first").disabled = page <= 1;
  }

  // One page through a stateful scanner: create it, read up to `rows` rows, delete it.
  async function scannerPage(table, startRow, endRow, rows, versions) {
    const model = { startRow: bytesToB64(startRow), maxVersions: versions };
    if (endRow) model.endRow = bytesToB64(endRow);
    const headers = { "Content-Type": "application/json", Accept: "application/json" };
    const token = sessionStorage.getItem("kura-token");
    if (token) headers.Authorization = "Bearer " + token;
    const created = await fetch("/" + encodeURIComponent(table) + "/scanner", { method: "PUT", headers, body: JSON.stringify(model) });
    if (created.status === 401) showTokenBar();
    const loc = created.headers.get("Location");
    if (!created.ok || !loc) {
      const err = new Error("scanner: " + created.status + " " + (await created.text()).trim());
      err.status = created.status;
      throw err;
    }
    // The Location is absolute (HBase's rule); only its path matters to a same-origin page.
    const path = new URL(loc, location.href).pathname;
    try {
      const res = await fetch(path + "?n=" + rows, { headers });
      if (res.status === 204) return { Row: [] };
      if (!res.ok) throw new Error("scanner: " + res.status + " " + (await res.text()).trim());
      return await res.json();
    } finally {
      fetch(path, { method: "DELETE", headers }).catch(() => {});
    }
  }

  function renderRows() {
    const body = $("#rows-table tbody");
    body.replaceChildren();
    const rows = state.scan.lastRows || [];
    if (!rows.length) {
      body.append(el("tr", null, el("td", { colspan: 4, class: "muted", text: "No rows." })));
      return;
    }
    for (const row of rows) {
      const key = b64ToBytes(row.key);
      const cells = row.Cell || [];
      let prevCol = null, version = 0;
      cells.forEach((c, i) => {
        const col = b64ToBytes(c.column);
        const colKey = c.column;
        version = colKey === prevCol ? version + 1 : 0;
        prevCol = colKey;
        const val = b64ToBytes(c.$);
        const tr = el("tr", { class: i === 0 ? "rowstart" : null, "data-row": bytesToB64(key) });
        if (i === 0) {
          const td = el("td", { class: "key", rowspan: cells.length });
          td.append(textNode(key));
          tr.append(td);
        }
        const colTd = el("td");
        colTd.append(textNode(col));
        if (version > 0) colTd.append(el("span", { class: "ver", text: "older v" + (version + 1) }));
        tr.append(colTd);
        tr.append(el("td", { class: "ts", title: String(c.timestamp) }, fmtTime(c.timestamp), el("span", { class: "raw", text: String(c.timestamp) })));
        const vtd = el("td", { class: "val" });
        if (state.valueMode === "hex") vtd.append(hex(val) || "(empty)");
        else if (val.length === 0) vtd.append(el("span", { class: "muted", text: "(empty)" }));
        else {
          vtd.append(textNode(val));
          const n = int64Hint(val);
          if (n !== null) vtd.append(el("span", { class: "ver", title: "the 8 bytes read as a big-endian signed integer (HBase counters)", text: "= " + n }));
        }
        tr.append(vtd);
        body.append(tr);
      });
    }
  }

  async function putCell(form) {
    const field = (n) => form.elements.namedItem(n).value;
    const row = field("row");
    const column = field("column");
    if (!column.includes(":")) {
      toast("Column must be family:qualifier", "error");
      return;
    }
    const body = { Row: [{ key: bytesToB64(enc.encode(row)), Cell: [{ column: bytesToB64(enc.encode(column)), $: bytesToB64(enc.encode(field("value"))) }] }] };
    try {
      await api("PUT", "/" + encodeURIComponent(state.table) + "/" + encodeURIComponent(row), body);
      toast("Put " + row + " / " + column, "ok");
      scan(true);
    } catch (e) {
      toast("Put failed: " + e.message, "error");
    }
  }

  // ---------- heatmap ----------

  // Magma-like ramp: 0 = background, 1 = hottest.
  const RAMP = [[11, 13, 23], [59, 15, 112], [140, 41, 129], [222, 73, 104], [254, 159, 109], [252, 253, 191]];
  function color(t) {
    t = Math.max(0, Math.min(1, t));
    const x = t * (RAMP.length - 1);
    const i = Math.min(RAMP.length - 2, Math.floor(x));
    const f = x - i;
    const a = RAMP[i], b = RAMP[i + 1];
    return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
  }

  async function pollHeatmap() {
    const name = state.table;
    let data;
    try {
      data = await api("GET", "/admin/tables/" + encodeURIComponent(name) + "/heatmap");
    } catch (e) {
      if (e.status === 404) route();
      return;
    }
    if (state.table !== name) return;
    state.heatmap = data;
    drawHeatmap($("#hm-reads"), data, data.reads, data.max_reads);
    drawHeatmap($("#hm-writes"), data, data.writes, data.max_writes);
    const cols = data.times.length;
    const minutes = cols > 1 ? ((data.times[cols - 1] - data.starts[0]) / 60000).toFixed(1) : "0";
    $("#hm-info").textContent = data.buckets + " buckets × " + cols + " intervals (" + minutes + " min)";
    $("#hm-max").textContent = "max " + fmtInt(Math.max(data.max_reads, data.max_writes)) + " ops / interval (log scale)";
    renderHotBuckets(data);
  }

  // The buckets with the most operations over the last minute (12 intervals of 5 s).
  function renderHotBuckets(data) {
    const n = data.times.length;
    const from = Math.max(0, n - Math.ceil(60000 / data.interval_ms));
    const totals = [];
    let all = 0;
    for (let b = 0; b < data.buckets; b++) {
      let r = 0, w = 0;
      for (let i = from; i < n; i++) { r += data.reads[i][b]; w += data.writes[i][b]; }
      if (r + w > 0) totals.push({ b, r, w });
      all += r + w;
    }
    totals.sort((x, y) => (y.r + y.w) - (x.r + x.w));
    const body = $("#hot-table tbody");
    body.replaceChildren();
    if (!totals.length) {
      body.append(el("tr", null, el("td", { colspan: 5, class: "muted", text: "No reads or writes in the last minute." })));
      return;
    }
    for (const t of totals.slice(0, 8)) {
      const region = (data.regions || []).find((g) => t.b >= g.bucket_start && t.b < g.bucket_end);
      const share = (t.r + t.w) / all;
      const bar = el("span", { class: "share" + (t.r >= t.w ? " reads" : "") });
      bar.style.width = Math.max(2, Math.round(160 * share)) + "px";
      body.append(el("tr", null,
        el("td", null, el("code", { text: String(t.b) })),
        el("td", { text: region ? "#" + region.id : "–" }),
        el("td", { class: "num", text: fmtInt(t.r) }),
        el("td", { class: "num", text: fmtInt(t.w) }),
        el("td", null, bar, (100 * share).toFixed(1) + "%")));
    }
  }

  function drawHeatmap(canvas, data, matrix, max) {
    const cols = data.capacity + 1; // fixed width: the newest column stays at the right edge
    const rows = data.buckets;
    canvas.width = cols;
    canvas.height = rows;
    const g = canvas.getContext("2d");
    const img = g.createImageData(cols, rows);
    const offset = cols - matrix.length;
    const lmax = Math.log1p(Math.max(1, max));
    for (let x = 0; x < cols; x++) {
      const col = x >= offset ? matrix[x - offset] : null;
      for (let y = 0; y < rows; y++) {
        const v = col ? col[y] : 0;
        const [r, gg, b] = color(v ? 0.12 + 0.88 * Math.log1p(v) / lmax : 0);
        const i = (y * cols + x) * 4;
        img.data[i] = r; img.data[i + 1] = gg; img.data[i + 2] = b; img.data[i + 3] = 255;
      }
    }
    g.putImageData(img, 0, 0);
    // Region boundaries.
    g.fillStyle = "rgba(120, 200, 255, 0.55)";
    for (const r of data.regions || []) {
      if (r.bucket_start > 0) g.fillRect(0, r.bucket_start, cols, Math.max(0.6, rows / 300));
    }
    canvas._hm = { data, matrix, offset, cols, rows };
  }

  function heatmapTip(ev) {
    const canvas = ev.currentTarget;
    const hm = canvas._hm;
    const tip = $("#hm-tip");
    if (!hm) { tip.hidden = true; return; }
    const rect = canvas.getBoundingClientRect();
    const x = Math.floor((ev.clientX - rect.left) / rect.width * hm.cols);
    const y = Math.floor((ev.clientY - rect.top) / rect.height * hm.rows);
    const idx = x - hm.offset;
    if (idx < 0 || idx >= hm.matrix.length || y < 0 || y >= hm.rows) { tip.hidden = true; return; }
    const region = (hm.data.regions || []).find((r) => y >= r.bucket_start && y < r.bucket_end);
    const from = new Date(hm.data.starts[idx]).toLocaleTimeString();
    const to = new Date(hm.data.times[idx]).toLocaleTimeString();
    tip.textContent = "bucket " + y + (region ? " (region #" + region.id + ")" : "") + "\n" + from + " – " + to +
      (idx === hm.matrix.length - 1 && hm.data.partial_last ? " (in progress)" : "") +
      "\nreads " + fmtInt(hm.data.reads[idx][y]) + " · writes " + fmtInt(hm.data.writes[idx][y]);
    tip.style.left = ev.clientX + 14 + "px";
    tip.style.top = ev.clientY + 14 + "px";
    tip.hidden = false;
  }

  // ---------- wiring ----------

  function init() {
    window.addEventListener("hashchange", route);
    for (const a of $$("#tabs a")) {
      a.addEventListener("click", (ev) => {
        ev.preventDefault();
        location.hash = "#/table/" + encodeURIComponent(state.table) + "/" + a.dataset.tab;
      });
    }
    $("#btn-flush").addEventListener("click", (ev) =>
      adminAction(ev.currentTarget, "Flush", "/admin/tables/" + encodeURIComponent(state.table) + "/flush"));
    $("#btn-compact").addEventListener("click", (ev) =>
      adminAction(ev.currentTarget, "Compaction", "/admin/tables/" + encodeURIComponent(state.table) + "/compact?major=false"));
    $("#btn-major").addEventListener("click", (ev) =>
      adminAction(ev.currentTarget, "Major compaction", "/admin/tables/" + encodeURIComponent(state.table) + "/compact?major=true"));
    $("#token-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem("kura-token", $("#token-input").value.trim());
      $("#token-form").hidden = true;
      route();
    });
    $("#scan-form").addEventListener("submit", (ev) => { ev.preventDefault(); scan(true); });
    $("#scan-next").addEventListener("click", () => {
      if (!state.scan.nextStart) return;
      state.scan.pages.push(state.scan.nextStart);
      scan(false);
    });
    $("#scan-first").addEventListener("click", () => scan(true));
    for (const b of $$("#value-mode button")) {
      b.addEventListener("click", () => {
        state.valueMode = b.dataset.mode;
        for (const o of $$("#value-mode button")) o.classList.toggle("on", o === b);
        renderRows();
      });
    }
    $("#put-form").addEventListener("submit", (ev) => { ev.preventDefault(); putCell(ev.currentTarget); });
    $("#create-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const f = ev.currentTarget;
      const name = f.elements.namedItem("name").value.trim();
      const fams = f.elements.namedItem("families").value.split(",").map((s) => s.trim()).filter(Boolean);
      try {
        const versions = f.elements.namedItem("versions").value.trim();
        const regions = f.elements.namedItem("regions").value.trim();
        const schema = { name, ColumnSchema: fams.map((n) => (versions ? { name: n, VERSIONS: versions } : { name: n })) };
        if (regions) schema.KURA_REGIONS = regions;
        await api("PUT", "/" + encodeURIComponent(name) + "/schema", schema);
        toast("Created table " + name, "ok");
        location.hash = "#/table/" + encodeURIComponent(name);
      } catch (e) {
        toast("Create failed: " + e.message, "error");
      }
    });
    for (const c of [$("#hm-reads"), $("#hm-writes")]) {
      c.addEventListener("mousemove", heatmapTip);
      c.addEventListener("mouseleave", () => { $("#hm-tip").hidden = true; });
    }
    window.addEventListener("resize", () => { if (state.tab === "regions") drawRateChart(); });
    route();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
