// The leafsearch console: a page of the node's own origin that uses its REST API as any client
// does. The credentials typed at the login stay in this closure (never in the page's storage)
// and go with every request; `credentials: "omit"` keeps the browser's own HTTP authentication
// (and its dialog) out of it.
"use strict";

(() => {
  let auth = null; // the Authorization header value, or null
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : String(child));
    return node;
  };
  const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? ""));
  const short = (value, limit = 80) => {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text === undefined ? "" : text.length > limit ? text.slice(0, limit - 1) + "…" : text;
  };

  // ---- talking to the node ---------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      const error = body && body.error;
      const reason =
        error && typeof error === "object"
          ? `${error.type}: ${error.reason}`
          : typeof error === "string" ? error : `HTTP ${status}`;
      super(`${status} ${reason}`);
      this.status = status;
      this.body = body;
    }
  }

  async function send(method, path, body, contentType = "application/json") {
    const headers = {};
    if (auth) headers.authorization = auth;
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (body !== undefined && body !== null && body !== "") {
      headers["content-type"] = contentType;
      init.body = typeof body === "string" ? body : JSON.stringify(body);
    }
    return fetch(path, init);
  }

  async function api(method, path, body) {
    const response = await send(method, path, body);
    const text = await response.text();
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
    if (!response.ok) {
      if (response.status === 401 && auth) showLogin("The node refused the credentials.");
      throw new ApiError(response.status, parsed);
    }
    return parsed;
  }

  function parseBody(textarea, errorBox) {
    const text = textarea.value.trim();
    if (!text) return {};
    try {
      return JSON.parse(text);
    } catch (exc) {
      const at = /position (\d+)/.exec(exc.message);
      let where = "";
      if (at) {
        const before = text.slice(0, Number(at[1]));
        const line = before.split("\n").length;
        where = ` (line ${line}, column ${before.length - before.lastIndexOf("\n")})`;
      }
      errorBox.textContent = `The body is not JSON${where}: ${exc.message}`;
      return null;
    }
  }

  const showError = (box, exc) => {
    box.textContent = exc instanceof ApiError && exc.body && typeof exc.body === "object"
      ? `${exc.message}\n${JSON.stringify(exc.body.error, null, 2)}` : String(exc.message || exc);
  };

  // ---- login -------------------------------------------------------------------------------

  function showLogin(message = "") {
    auth = null;
    $("tabs").hidden = true;
    $("logout").hidden = true;
    $("who").textContent = "";
    document.querySelectorAll(".view").forEach((v) => (v.hidden = true));
    $("login").hidden = false;
    $("login-error").textContent = message;
    stopPolling();
  }

  async function enter() {
    $("login").hidden = true;
    $("tabs").hidden = false;
    $("logout").hidden = auth === null;
    $("who").textContent = "";
    show("indices");
    if (auth) {
      try {
        const me = await api("GET", "/_security/_authenticate");
        $("who").textContent = me.username || "";
      } catch { /* shown by the views' own requests */ }
    }
  }

  $("login-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("login-apikey").value.trim();
    const user = $("login-user").value;
    auth = key ? `ApiKey ${key}` : `Basic ${btoa(unescape(encodeURIComponent(`${user}:${$("login-password").value}`)))}`;
    $("login-password").value = "";
    $("login-apikey").value = "";
    const response = await send("GET", "/");
    if (response.ok) enter();
    else showLogin(response.status === 401 ? "Wrong user, password or API key." : `HTTP ${response.status}`);
  });
  $("logout").addEventListener("click", () => showLogin());

  // ---- views -------------------------------------------------------------------------------

  let current = null;
  function show(view) {
    current = view;
    document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.view === view));
    document.querySelectorAll(".view").forEach((v) => (v.hidden = v.id !== `view-${view}`));
    if (view === "indices") loadIndices();
    if (view === "node") startPolling(); else stopPolling();
  }
  document.querySelectorAll("#tabs button").forEach((b) => b.addEventListener("click", () => show(b.dataset.view)));

  // ---- indices -----------------------------------------------------------------------------

  async function loadIndices() {
    const body = $("indices-table").tBodies[0];
    $("indices-error").textContent = "";
    let rows;
    try {
      rows = await api("GET", "/_cat/indices?format=json&bytes=b&s=index&expand_wildcards=all&h=health,status,index,docs.count,store.size,pri,rep");
    } catch (exc) { showError($("indices-error"), exc); return; }
    let aliases = {};
    try { aliases = await api("GET", "/_alias"); } catch { aliases = {}; }
    body.replaceChildren();
    $("index-names").replaceChildren(...rows.map((r) => el("option", { value: r.index })));
    for (const row of rows) {
      const names = Object.keys((aliases[row.index] || {}).aliases || {}).join(", ");
      body.append(el("tr", { "data-index": row.index, onclick: () => showIndex(row.index) },
        el("td", {}, el("span", { class: `health ${row.health}` }), row.health || ""),
        el("td", {}, row.status),
        el("td", {}, row.index),
        el("td", { class: "num" }, fmt(Number(row["docs.count"] ?? 0))),
        el("td", { class: "num" }, bytes(Number(row["store.size"] ?? 0))),
        el("td", { class: "num" }, row.pri),
        el("td", { class: "num" }, row.rep),
        el("td", {}, names)));
    }
    if (!$("walk-index").value && rows.length) $("walk-index").value = rows[0].index;
  }
  $("indices-refresh").addEventListener("click", loadIndices);

  function bytes(n) {
    const units = ["b", "kb", "mb", "gb", "tb"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${i ? n.toFixed(1) : n}${units[i]}`;
  }

  let detail = { index: null, view: "fields", data: {} };
  async function showIndex(index) {
    detail = { index, view: detail.view, data: {} };
    $("index-detail").hidden = false;
    $("index-detail-name").textContent = index;
    const name = encodeURIComponent(index);
    try {
      const [mappings, settings, caps] = await Promise.all([
        api("GET", `/${name}/_mapping`), api("GET", `/${name}/_settings`),
        api("GET", `/${name}/_field_caps?fields=*`),
      ]);
      detail.data = { mappings, settings, caps };
    } catch (exc) { showError($("indices-error"), exc); return; }
    renderDetail();
  }
  function renderDetail() {
    document.querySelectorAll("[data-detail]").forEach((b) => b.classList.toggle("active", b.dataset.detail === detail.view));
    const fields = $("index-fields");
    fields.hidden = detail.view !== "fields";
    $("index-json").hidden = detail.view === "fields";
    if (detail.view === "fields") {
      const rows = [];
      for (const [field, types] of Object.entries(detail.data.caps.fields || {})) {
        if (field.startsWith("_")) continue;
        for (const [type, cap] of Object.entries(types)) {
          rows.push(el("tr", {}, el("td", {}, field), el("td", {}, type),
            el("td", {}, cap.searchable ? "yes" : "no"), el("td", {}, cap.aggregatable ? "yes" : "no")));
        }
      }
      fields.tBodies[0].replaceChildren(...rows);
    } else {
      $("index-json").textContent = JSON.stringify(detail.data[detail.view], null, 2);
    }
  }
  document.querySelectorAll("[data-detail]").forEach((b) => b.addEventListener("click", () => {
    detail.view = b.dataset.detail;
    if (detail.index) renderDetail();
  }));

  // ---- hits as a table ---------------------------------------------------------------------

  function hitsTable(table, hits, wanted) {
    const first = hits.find((h) => h._source && typeof h._source === "object");
    const fields = wanted.length ? wanted : Object.keys(first ? first._source : {}).slice(0, 5);
    const indices = new Set(hits.map((h) => h._index));
    const columns = [...(indices.size > 1 ? ["_index"] : []), "_id", "_score", "sort", ...fields];
    table.tHead.replaceChildren(el("tr", {}, ...columns.map((c) => el("th", {}, c))));
    const rows = [];
    for (const hit of hits) {
      const cells = columns.map((c) => {
        if (c === "_index" || c === "_id") return el("td", {}, hit[c]);
        if (c === "_score") return el("td", { class: "num" }, hit._score ?? "");
        if (c === "sort") return el("td", { class: "json" }, hit.sort ? short(hit.sort, 60) : "");
        return el("td", {}, short(lookup(hit._source, c)));
      });
      const row = el("tr", { "data-id": hit._id }, ...cells);
      row.addEventListener("click", () => {
        const next = row.nextElementSibling;
        if (next && next.classList.contains("raw")) { next.remove(); return; }
        row.after(el("tr", { class: "raw" }, el("td", { colspan: columns.length, class: "json" }, JSON.stringify(hit, null, 2))));
      });
      rows.push(row);
    }
    table.tBodies[0].replaceChildren(...rows);
  }
  function lookup(source, path) {
    if (!source || typeof source !== "object") return "";
    if (path in source) return source[path];
    let value = source;
    for (const part of path.split(".")) {
      if (value === null || typeof value !== "object") return "";
      value = value[part];
    }
    return value ?? "";
  }

  // ---- query -------------------------------------------------------------------------------

  let lastQuery = null;
  async function runQuery(from) {
    const box = $("query-error");
    box.textContent = "";
    const body = parseBody($("query-body"), box);
    if (body === null) return;
    if (from !== undefined) {
      body.from = Math.max(0, from);
      $("query-body").value = JSON.stringify(body, null, 2);
    }
    const index = $("query-index").value.trim() || "*";
    let result;
    try {
      result = await api("POST", `/${encodeURIComponent(index).replace(/%2C/g, ",").replace(/%2A/g, "*")}/_search`, body);
    } catch (exc) { showError(box, exc); return; }
    lastQuery = { body, result };
    $("query-result").hidden = false;
    const total = result.hits.total;
    const count = total ? `${total.relation === "gte" ? "≥ " : ""}${fmt(total.value)}` : "?";
    const start = body.from || 0;
    $("query-summary").textContent =
      `${count} hits, ${result.took} ms; showing ${fmt(start + (result.hits.hits.length ? 1 : 0))}–${fmt(start + result.hits.hits.length)}`;
    $("query-prev").disabled = start === 0;
    const wanted = $("query-fields").value.split(",").map((f) => f.trim()).filter(Boolean);
    hitsTable($("query-hits"), result.hits.hits, wanted);
    renderAggs($("query-aggs"), result.aggregations || {});
    $("query-raw").textContent = JSON.stringify(result, null, 2);
  }
  $("query-run").addEventListener("click", () => runQuery());
  $("query-body").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) runQuery(); });
  const pageSize = () => (lastQuery && lastQuery.body.size !== undefined ? lastQuery.body.size : 10);
  $("query-next").addEventListener("click", () => runQuery(((lastQuery && lastQuery.body.from) || 0) + pageSize()));
  $("query-prev").addEventListener("click", () => runQuery(((lastQuery && lastQuery.body.from) || 0) - pageSize()));
  $("query-raw-toggle").addEventListener("click", () => { $("query-raw").hidden = !$("query-raw").hidden; });

  function renderAggs(box, aggs, depth = 0) {
    if (depth === 0) box.replaceChildren();
    for (const [name, agg] of Object.entries(aggs)) {
      if (!agg || typeof agg !== "object") continue;
      const block = el("div", { class: "agg", "data-agg": name }, el("h3", {}, name));
      let buckets = agg.buckets;
      if (buckets && !Array.isArray(buckets)) buckets = Object.entries(buckets).map(([key, b]) => ({ key, ...b }));
      if (Array.isArray(buckets)) {
        const most = Math.max(1, ...buckets.map((b) => b.doc_count || 0));
        for (const b of buckets) {
          const fill = el("div", { class: "fill" });
          fill.style.width = `${(100 * (b.doc_count || 0)) / most}%`; // CSSOM: the policy allows no inline style
          block.append(el("div", { class: "row" },
            el("span", {}, short(b.key_as_string ?? b.key, 40)), el("div", {}, fill),
            el("span", { class: "count" }, fmt(b.doc_count))));
        }
      } else if ("value" in agg) {
        block.append(el("p", {}, agg.value_as_string ?? fmt(agg.value)));
      } else {
        block.append(el("pre", {}, JSON.stringify(agg, null, 2)));
      }
      box.append(block);
    }
  }

  // ---- walk, scroll, export ----------------------------------------------------------------

  let walk = null;
  const walkStatus = (entries) => $("walk-status").replaceChildren(
    ...entries.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-key": k }, v)]));

  function walkSettings() {
    const box = $("walk-error");
    box.textContent = "";
    const body = parseBody($("walk-body"), box);
    const index = $("walk-index").value.trim();
    if (body === null) return null;
    if (!index) { box.textContent = "Choose an index."; return null; }
    return { body, index, size: Number($("walk-size").value) || 1000, keepAlive: $("walk-keepalive").value.trim() || "1m", box };
  }

  function showWalk() {
    const seconds = (performance.now() - walk.started) / 1000;
    walkStatus([
      ["point in time", walk.pit ? `${walk.pit.slice(0, 24)}…` : "closed"],
      ["keep-alive", walk.keepAlive],
      ["position", `${fmt(walk.read)} of ${fmt(walk.total)}`],
      ["pages read", fmt(walk.pages)],
      ["distinct documents", fmt(walk.ids.size)],
      ["documents seen twice", fmt(walk.repeated)],
      ["documents per second", fmt(Math.round(walk.read / Math.max(seconds, 1e-3)))],
      ["cursor (search_after)", walk.after ? JSON.stringify(walk.after) : "start"],
      ["state", walk.state],
    ]);
    $("walk-progress").hidden = false;
    $("walk-progress").max = Math.max(walk.total, 1);
    $("walk-progress").value = walk.read;
  }

  function walkButtons(running) {
    $("walk-next").disabled = !running;
    $("walk-all").disabled = !running;
    $("walk-stop").disabled = !running;
    $("walk-start").disabled = running;
  }

  async function startWalk() {
    const settings = walkSettings();
    if (!settings) return;
    if (walk && walk.pit) await closeWalk();
    let opened;
    try {
      opened = await api("POST", `/${encodeURIComponent(settings.index)}/_pit?keep_alive=${encodeURIComponent(settings.keepAlive)}`);
    } catch (exc) { showError(settings.box, exc); return; }
    walk = { ...settings, pit: opened.id, after: null, read: 0, pages: 0, total: 0, ids: new Set(), repeated: 0, started: performance.now(), state: "open", stop: false };
    walkButtons(true);
    await walkPage();
  }

  async function walkPage() {
    const body = { ...walk.body, size: walk.size, pit: { id: walk.pit, keep_alive: walk.keepAlive } };
    if (!body.sort) body.sort = [{ _shard_doc: "asc" }];
    body.track_total_hits = walk.pages === 0;
    if (walk.after) body.search_after = walk.after;
    let result;
    try { result = await api("POST", "/_search", body); } catch (exc) {
      showError(walk.box, exc);
      walk.state = "failed";
      showWalk();
      return false;
    }
    const hits = result.hits.hits;
    if (result.pit_id) walk.pit = result.pit_id;
    if (walk.pages === 0) walk.total = result.hits.total ? result.hits.total.value : 0;
    walk.pages += 1;
    for (const hit of hits) {
      const key = `${hit._index}/${hit._id}`;
      if (walk.ids.has(key)) walk.repeated += 1; else walk.ids.add(key);
    }
    walk.read += hits.length;
    if (hits.length) walk.after = hits[hits.length - 1].sort;
    if (hits.length) hitsTable($("walk-hits"), hits.slice(0, 50), []);
    if (hits.length < walk.size) {
      walk.state = "done";
      await closeWalk();
    }
    showWalk();
    return hits.length === walk.size;
  }

  async function closeWalk() {
    if (walk && walk.pit) {
      try { await api("DELETE", "/_pit", { id: walk.pit }); } catch { /* already expired */ }
      walk.pit = null;
    }
    walkButtons(false);
  }

  $("walk-start").addEventListener("click", startWalk);
  $("walk-next").addEventListener("click", () => walkPage());
  $("walk-all").addEventListener("click", async () => {
    walk.stop = false;
    walk.state = "walking";
    while (!walk.stop && (await walkPage())) { /* page after page */ }
  });
  $("walk-stop").addEventListener("click", async () => {
    if (!walk) return;
    walk.stop = true;
    walk.state = "stopped";
    await closeWalk();
    showWalk();
  });

  $("scroll-run").addEventListener("click", async () => {
    const settings = walkSettings();
    if (!settings) return;
    const slices = Math.max(1, Number($("walk-slices").value) || 1);
    const started = performance.now();
    const counts = new Array(slices).fill(0);
    const ids = new Set();
    let repeated = 0;
    const scrollIds = new Set();
    const show = (state) => walkStatus([
      ["scroll slices", fmt(slices)],
      ...counts.map((c, i) => [`slice ${i}`, fmt(c)]),
      ["documents", fmt(counts.reduce((a, b) => a + b, 0))],
      ["distinct documents", fmt(ids.size)],
      ["documents seen twice", fmt(repeated)],
      ["documents per second", fmt(Math.round(ids.size / Math.max((performance.now() - started) / 1000, 1e-3)))],
      ["state", state],
    ]);
    const take = (hits) => { for (const h of hits) { const k = `${h._index}/${h._id}`; if (ids.has(k)) repeated += 1; else ids.add(k); } };
    async function readSlice(i) {
      const body = { ...settings.body, size: settings.size };
      if (slices > 1) body.slice = { id: i, max: slices };
      let page = await api("POST", `/${encodeURIComponent(settings.index)}/_search?scroll=${encodeURIComponent(settings.keepAlive)}`, body);
      while (page.hits.hits.length) {
        scrollIds.add(page._scroll_id);
        counts[i] += page.hits.hits.length;
        take(page.hits.hits);
        show("scrolling");
        page = await api("POST", "/_search/scroll", { scroll: settings.keepAlive, scroll_id: page._scroll_id });
      }
      scrollIds.add(page._scroll_id);
    }
    try {
      await Promise.all(counts.map((_, i) => readSlice(i)));
      show("done");
    } catch (exc) { showError(settings.box, exc); show("failed"); }
    if (scrollIds.size) {
      try { await api("DELETE", "/_search/scroll", { scroll_id: [...scrollIds] }); } catch { /* expired */ }
    }
  });

  $("export-run").addEventListener("click", async () => {
    const settings = walkSettings();
    if (!settings) return;
    const index = encodeURIComponent(settings.index);
    const started = performance.now();
    const parts = [];
    let lines = 0;
    let total = 0;
    const progress = (how, state) => {
      walkStatus([
        ["export", how], ["documents", `${fmt(lines)} of ${fmt(total)}`],
        ["documents per second", fmt(Math.round(lines / Math.max((performance.now() - started) / 1000, 1e-3)))],
        ["state", state]]);
      $("walk-progress").hidden = false;
      $("walk-progress").max = Math.max(total, 1);
      $("walk-progress").value = lines;
    };
    try {
      const counted = await api("POST", `/${index}/_count`, settings.body.query ? { query: settings.body.query } : {});
      total = counted.count;
      const response = await send("POST", `/${index}/_export`, settings.body);
      if (response.ok) {
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let rest = "";
        let complete = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          const text = rest + value;
          const cut = text.lastIndexOf("\n") + 1;
          rest = text.slice(cut);
          for (const line of text.slice(0, cut).split("\n")) {
            if (!line) continue;
            if (line.startsWith('{"_export"')) { complete = true; continue; }
            if (line.startsWith('{"error"')) throw new Error(`the export stopped: ${line}`);
            parts.push(line, "\n");
            lines += 1;
          }
          progress("streaming (POST /<index>/_export)", "reading");
        }
        if (!complete) throw new Error("the export ended before its last line");
      } else if ([400, 404, 405].includes(response.status)) {
        lines = 0;
        await exportByPages(settings, parts, (n) => { lines += n; progress("point in time + search_after", "reading"); });
      } else {
        const text = await response.text();
        let parsed = text;
        try { parsed = JSON.parse(text); } catch { /* not JSON */ }
        throw new ApiError(response.status, parsed);
      }
    } catch (exc) { showError(settings.box, exc); progress("", "failed"); return; }
    const link = $("export-link");
    if (link.href) URL.revokeObjectURL(link.href);
    link.href = URL.createObjectURL(new Blob(parts, { type: "application/x-ndjson" }));
    link.download = `${settings.index}.ndjson`;
    link.textContent = `Save ${settings.index}.ndjson (${fmt(lines)} documents)`;
    link.hidden = false;
    progress(lines === total ? "complete" : "complete (the index changed meanwhile)", "done");
    link.click();
  });

  async function exportByPages(settings, parts, counted) {
    const opened = await api("POST", `/${encodeURIComponent(settings.index)}/_pit?keep_alive=${encodeURIComponent(settings.keepAlive)}`);
    let pit = opened.id;
    let after = null;
    try {
      for (;;) {
        const body = { ...settings.body, size: settings.size, pit: { id: pit, keep_alive: settings.keepAlive }, track_total_hits: false };
        if (!body.sort) body.sort = [{ _shard_doc: "asc" }];
        if (after) body.search_after = after;
        const result = await api("POST", "/_search", body);
        pit = result.pit_id || pit;
        const hits = result.hits.hits;
        for (const hit of hits) parts.push(JSON.stringify({ _index: hit._index, _id: hit._id, _source: hit._source, sort: hit.sort }), "\n");
        counted(hits.length);
        if (hits.length < settings.size) break;
        after = hits[hits.length - 1].sort;
      }
    } finally {
      try { await api("DELETE", "/_pit", { id: pit }); } catch { /* expired */ }
    }
  }

  // ---- any request -------------------------------------------------------------------------

  $("request-send").addEventListener("click", async () => {
    const method = $("request-method").value;
    const path = $("request-path").value.trim();
    const text = $("request-body").value;
    const ndjson = /\/_(bulk|msearch)(\?|$)/.test(path);
    const response = await send(method, path.startsWith("/") ? path : `/${path}`, text.trim() ? text : null,
      ndjson ? "application/x-ndjson" : "application/json");
    const body = await response.text();
    $("request-status").textContent = `${response.status} ${response.statusText}`;
    $("request-status").className = response.ok ? "" : "error";
    let shown = body;
    try { shown = JSON.stringify(JSON.parse(body), null, 2); } catch { /* not JSON */ }
    $("request-response").textContent = shown;
    if (response.status === 401 && auth) showLogin("The node refused the credentials.");
  });

  // ---- the node ----------------------------------------------------------------------------

  const history = [];
  let poller = null;
  function startPolling() {
    if (poller === null) { pollNode(); poller = setInterval(pollNode, 2000); }
  }
  function stopPolling() {
    if (poller !== null) { clearInterval(poller); poller = null; }
  }

  async function pollNode() {
    $("node-error").textContent = "";
    let stats;
    try { stats = await api("GET", "/_nodes/stats"); } catch (exc) { showError($("node-error"), exc); return; }
    const node = Object.values(stats.nodes)[0];
    $("node-name").textContent = node.name;
    const search = node.indices.search;
    const indexing = node.indices.indexing || {};
    history.push({
      at: Date.now(), queries: search.query_total, queryMs: search.query_time_in_millis,
      docs: indexing.index_total || 0, indexMs: indexing.index_time_in_millis || 0,
    });
    while (history.length > 151) history.shift(); // five minutes of 2-second polls
    const rates = history.slice(1).map((now, i) => {
      const before = history[i];
      const seconds = Math.max((now.at - before.at) / 1000, 1e-3);
      const queries = now.queries - before.queries;
      const docs = now.docs - before.docs;
      return {
        searchRate: queries / seconds, searchLatency: queries ? (now.queryMs - before.queryMs) / queries : 0,
        indexRate: docs / seconds, indexLatency: docs ? (now.indexMs - before.indexMs) / docs : 0,
      };
    });
    chart($("chart-search-rate"), rates.map((r) => r.searchRate));
    chart($("chart-search-latency"), rates.map((r) => r.searchLatency));
    chart($("chart-index-rate"), rates.map((r) => r.indexRate));
    chart($("chart-index-latency"), rates.map((r) => r.indexLatency));
    const workers = node.search_workers || {};
    $("node-workers").replaceChildren(...[
      ["workers", workers.count], ["ready", workers.ready], ["lost", workers.lost], ["jobs running", workers.jobs],
      ["walks served by the server process", workers.walks_in_server_process],
    ].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, fmt(v ?? 0))]));
    $("node-breakers").tBodies[0].replaceChildren(...Object.entries(node.breakers || {}).map(([name, b]) => el("tr", {},
      el("td", {}, name), el("td", { class: "num" }, bytes(b.estimated_size_in_bytes || 0)),
      el("td", { class: "num" }, bytes(b.limit_size_in_bytes || 0)), el("td", { class: "num" }, fmt(b.tripped || 0)))));
    try {
      const contexts = await api("GET", "/_cat/search_contexts?format=json");
      $("node-contexts").tBodies[0].replaceChildren(...contexts.map((c) => el("tr", {},
        el("td", {}, c.type), el("td", {}, c.indices), el("td", {}, c.owner), el("td", {}, c.age),
        el("td", {}, c.keep_alive), el("td", {}, c.time_left), el("td", { class: "num" }, c.requests))));
    } catch (exc) { showError($("node-error"), exc); }
  }

  function chart(svg, values) {
    if (values.length === 1) values = [values[0], values[0]]; // a line from the first poll on
    const top = Math.max(1e-9, ...values);
    const width = 300;
    const step = width / 150;
    const start = width - step * Math.max(values.length - 1, 0);
    const points = values.map((v, i) => `${(start + i * step).toFixed(1)},${(95 - (v / top) * 85).toFixed(1)}`).join(" ");
    const last = values.length ? values[values.length - 1] : 0;
    svg.replaceChildren();
    const ns = "http://www.w3.org/2000/svg";
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points);
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", "4");
    label.setAttribute("y", "10");
    label.textContent = `now ${last.toFixed(1)}, peak ${top > 1e-6 ? top.toFixed(1) : "0"} (last 5 minutes)`;
    svg.dataset.peak = top > 1e-6 ? String(top) : "0";
    svg.append(line, label);
  }

  // ---- start -------------------------------------------------------------------------------

  (async () => {
    const response = await send("GET", "/");
    if (response.status === 401) showLogin();
    else enter();
  })();
})();
