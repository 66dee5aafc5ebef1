// The searchd console: plain DOM, no framework, only the public HTTP API.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  for (const kid of kids) {
    if (kid === undefined || kid === null) continue;
    e.append(kid instanceof Node ? kid : String(kid));
  }
  return e;
}

const FACET_SIZE = 10;
const MAX_FACET_FIELDS = 8;

const state = {
  collections: [],
  name: null,
  info: null,
  embedder: false,
  selected: new Map(), // keyword field -> Set of values (JSON-encoded)
  distinct: new Set(), // keyword fields whose every value is on one document (ids, titles): no facet
  ranges: new Map(), // numeric or date field -> {type, min, max}
  key: sessionStorage.getItem("searchd-key") || "",
  last: null, // the last hits' opener, for focus after the document view closes
  seq: 0,
};

class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers["content-type"] = "application/json";
  if (state.key) headers["authorization"] = "Bearer " + state.key;
  let r;
  try {
    r = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError("network", "the server could not be reached (" + e.message + ")", 0);
  }
  let v = null;
  try {
    v = await r.json();
  } catch (e) {
    v = null;
  }
  if (!r.ok) {
    const err = (v && v.error) || {};
    if (r.status === 401) $("#keybox").open = true;
    throw new ApiError(err.code || "http_" + r.status, err.message || r.statusText, r.status);
  }
  return v;
}

const collPath = (name) => "/collections/" + encodeURIComponent(name);

// ---------------------------------------------------------------------------------------
// Errors

function showError(e, hint) {
  const box = $("#error");
  box.replaceChildren(
    el("strong", { text: e.code || "error" }),
    " ",
    e.message || String(e),
    hint ? el("p", { class: "hint", text: hint }) : null,
  );
  box.hidden = false;
}

function clearError() {
  const box = $("#error");
  box.hidden = true;
  box.replaceChildren();
}

// ---------------------------------------------------------------------------------------
// Numbers

const fmtInt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "–");

function fmtMs(ms) {
  if (typeof ms !== "number" || !isFinite(ms)) return "–";
  if (ms < 1) return (ms * 1000).toFixed(0) + " µs";
  if (ms < 100) return ms.toFixed(2) + " ms";
  return ms.toFixed(0) + " ms";
}

// ---------------------------------------------------------------------------------------
// Live statistics

async function pollStats() {
  if (document.visibilityState === "hidden") return;
  try {
    const s = await api("GET", "/stats");
    state.embedder = !!s.embedder;
    const lat = s.latency_ms || {};
    $("#stat-qps").textContent = typeof s.qps_1m === "number" ? s.qps_1m.toFixed(2) : "–";
    // No search in the window: the server's percentiles are 0, not a measured latency.
    const measured = typeof s.qps_1m === "number" && s.qps_1m > 0;
    $("#stat-p50").textContent = measured ? fmtMs(lat.p50) : "–";
    $("#stat-p99").textContent = measured ? fmtMs(lat.p99) : "–";
    $("#stat-requests").textContent = fmtInt(s.requests && s.requests.total);
    $("#stat-inflight").textContent = fmtInt(s.inflight);
    $("#stats").classList.remove("stale");
  } catch (e) {
    $("#stats").classList.add("stale");
  }
}

// ---------------------------------------------------------------------------------------
// Collections and their mapping

async function loadCollections() {
  const list = $("#collections");
  try {
    const v = await api("GET", "/collections");
    state.collections = v.collections || [];
    list.replaceChildren(
      ...state.collections.map((c) => {
        const docs = c.info && typeof c.info.docs === "number" ? fmtInt(c.info.docs) + " docs" : c.state;
        return el(
          "li",
          {},
          el(
            "button",
            { type: "button", class: "coll", "data-name": c.name, disabled: !c.ready },
            el("span", { class: "name", text: c.name }),
            el("span", { class: "muted", text: docs }),
          ),
        );
      }),
    );
    for (const b of list.querySelectorAll("button.coll")) {
      b.addEventListener("click", () => selectCollection(b.dataset.name));
    }
    const fromHash = decodeURIComponent(location.hash.slice(1));
    const pick =
      state.collections.find((c) => c.name === fromHash && c.ready) ||
      state.collections.find((c) => c.name === v.default && c.ready) ||
      state.collections.find((c) => c.ready);
    if (pick) await selectCollection(pick.name);
    else list.append(el("li", { class: "muted", text: "no collection is ready" }));
  } catch (e) {
    list.replaceChildren(el("li", { class: "muted", text: "could not list collections" }));
    showError(e);
  }
}

function fieldsOf(info) {
  const m = info && info.mapping;
  return (m && Array.isArray(m.fields) && m.fields) || [];
}

function defaultMode(info) {
  const lexical = !!(info && info.lexical);
  const model = !!(info && info.model) && state.embedder;
  if (lexical && model) return "hybrid";
  if (lexical) return "lexical";
  if (model) return "dense";
  return "id";
}

async function selectCollection(name) {
  clearError();
  let info;
  try {
    info = (await api("GET", collPath(name))).info;
  } catch (e) {
    showError(e);
    return;
  }
  state.name = name;
  state.info = info;
  state.selected = new Map();
  state.distinct = new Set();
  state.ranges = new Map();
  history.replaceState(null, "", "#" + encodeURIComponent(name));
  for (const b of document.querySelectorAll("button.coll")) {
    b.setAttribute("aria-current", b.dataset.name === name ? "true" : "false");
  }
  renderAbout(info);
  $("#mode").value = defaultMode(info);
  renderFilters();
  await run();
}

function renderAbout(info) {
  const facts = [
    ["name", state.name],
    ["documents", fmtInt(info.docs)],
    ["dimensions", info.dim],
    ["metric", info.metric],
    ["segments", info.segments],
    ["text field", info.text_field || "none"],
    ["lexical", info.lexical ? info.lexical.analyzer : "no"],
    ["model", info.model ? info.model.name || "yes" : "none"],
  ];
  $("#facts").replaceChildren(
    ...facts.map(([k, v]) => el("div", {}, el("dt", { text: k }), el("dd", { text: v === undefined || v === null ? "–" : String(v) }))),
  );
  const rows = fieldsOf(info).map((f) =>
    el("tr", {}, el("th", { scope: "row", text: f.name }), el("td", { text: f.type + (f.array ? "[]" : "") }), el("td", { text: fmtInt(f.docs) })),
  );
  if (!rows.length) rows.push(el("tr", {}, el("td", { colSpan: 3, class: "muted", text: "no indexed fields" })));
  $("#mapping tbody").replaceChildren(...rows);
  $("#about").hidden = false;
}

// ---------------------------------------------------------------------------------------
// Filters built from the mapping

function keywordFields() {
  return fieldsOf(state.info)
    .filter((f) => f.type === "keyword" || f.type === "bool")
    .slice(0, MAX_FACET_FIELDS);
}

function rangeFields() {
  return fieldsOf(state.info).filter((f) => f.type === "integer" || f.type === "float" || f.type === "datetime");
}

function renderFilters() {
  const box = $("#filters");
  const parts = [el("h2", { text: "Filters" })];
  for (const f of keywordFields()) {
    parts.push(
      el(
        "fieldset",
        { class: "facet", "data-field": f.name },
        el("legend", { text: f.name }),
        el("ul", { class: "buckets" }, el("li", { class: "muted", text: "…" })),
      ),
    );
  }
  for (const f of rangeFields()) {
    const date = f.type === "datetime";
    const input = (end) =>
      el("input", {
        type: date ? "date" : "number",
        step: f.type === "integer" ? "1" : "any",
        class: "range-" + end,
        id: "range-" + end + "-" + f.name,
        "data-field": f.name,
      });
    parts.push(
      el(
        "fieldset",
        { class: "range", "data-field": f.name, "data-type": f.type },
        el("legend", { text: f.name + (date ? " (date)" : "") }),
        el("label", { for: "range-min-" + f.name, text: "from" }),
        input("min"),
        el("label", { for: "range-max-" + f.name, text: "to" }),
        input("max"),
      ),
    );
  }
  if (parts.length === 1) parts.push(el("p", { class: "muted", text: "The mapping has no keyword, numeric or date field." }));
  box.replaceChildren(...parts);
  for (const inp of box.querySelectorAll("fieldset.range input")) {
    inp.addEventListener("change", () => {
      const fs = inp.closest("fieldset");
      state.ranges.set(fs.dataset.field, {
        type: fs.dataset.type,
        min: $(".range-min", fs).value,
        max: $(".range-max", fs).value,
      });
      run();
    });
  }
}

function rangeClause(field, r) {
  const o = {};
  const num = (s) => {
    const x = Number(s);
    if (s === "" || !isFinite(x)) throw new ApiError("invalid_input", field + ": " + JSON.stringify(s) + " is not a number", 0);
    return x;
  };
  if (r.min !== "") o.gte = r.type === "datetime" ? r.min : num(r.min);
  if (r.max !== "") o.lte = r.type === "datetime" ? r.max + "T23:59:59.999Z" : num(r.max);
  return Object.keys(o).length ? { range: { [field]: o } } : null;
}

// The filter of every selection but `except`'s (a facet's counts ignore its own
// selection, so its other values stay visible with what choosing them would give).
function filterFor(except) {
  const must = [];
  for (const [field, set] of state.selected) {
    if (field === except || set.size === 0) continue;
    const values = [...set].map((s) => JSON.parse(s));
    must.push(values.length === 1 ? { term: { [field]: values[0] } } : { terms: { [field]: values } });
  }
  for (const [field, r] of state.ranges) {
    const c = rangeClause(field, r);
    if (c) must.push(c);
  }
  if (must.length === 0) return undefined;
  if (must.length === 1) return must[0];
  return { bool: { filter: must } };
}

function renderFacet(field, reply, unfiltered) {
  const fs = document.querySelector('fieldset.facet[data-field="' + CSS.escape(field) + '"]');
  if (!fs) return;
  // Counted over the whole collection, a field whose most common value is on one document
  // and that has more values than shown is an identifier, not a facet: its box is hidden.
  if (unfiltered && reply && reply.buckets) {
    const top = reply.buckets.length ? reply.buckets[0].count : 0;
    if (top === 1 && reply.other_count > 0) state.distinct.add(field);
    else state.distinct.delete(field);
  }
  fs.hidden = state.distinct.has(field) && !(state.selected.get(field) || new Set()).size;
  const had = document.activeElement && fs.contains(document.activeElement) ? document.activeElement.dataset.value : null;
  const chosen = state.selected.get(field) || new Set();
  const buckets = (reply && reply.buckets) || [];
  const seen = new Set();
  const items = buckets.map((b) => {
    const key = JSON.stringify(b.value);
    seen.add(key);
    return [key, b.value, b.count];
  });
  for (const key of chosen) if (!seen.has(key)) items.push([key, JSON.parse(key), null]);
  const ul = $("ul.buckets", fs);
  if (!items.length) {
    ul.replaceChildren(el("li", { class: "muted", text: "no values" }));
    return;
  }
  ul.replaceChildren(
    ...items.map(([key, value, count], i) => {
      const id = "facet-" + field + "-" + i;
      return el(
        "li",
        {},
        el("input", { type: "checkbox", id, checked: chosen.has(key), "data-field": field, "data-value": key }),
        el("label", { for: id }, el("span", { class: "value", text: String(value) }), " ", el("span", { class: "count", text: count === null ? "–" : fmtInt(count) })),
      );
    }),
  );
  if (reply && reply.other_count) ul.append(el("li", { class: "muted", text: "+ " + fmtInt(reply.other_count) + " in other values" }));
  for (const box of ul.querySelectorAll("input[type=checkbox]")) {
    box.addEventListener("change", () => {
      const set = state.selected.get(field) || new Set();
      if (box.checked) set.add(box.dataset.value);
      else set.delete(box.dataset.value);
      state.selected.set(field, set);
      run();
    });
    if (had !== null && box.dataset.value === had) box.focus();
  }
}

// ---------------------------------------------------------------------------------------
// Searching

function idValue(s) {
  return /^-?\d{1,15}$/.test(s) ? Number(s) : s;
}

function hint(e, mode) {
  if (e.status !== 400 && e.status !== 404 && e.status !== 503) return undefined;
  if (mode === "hybrid" || mode === "dense") {
    return "Text search in this mode needs a model on the server and the collection. Try mode lexical, or mode id (a document id: more like this), or clear the query to list documents by filter.";
  }
  if (mode === "lexical") {
    return "Lexical search needs the collection's text index. Try mode id (a document id), or clear the query to list documents by filter.";
  }
  if (mode === "id") return "Mode id takes the id of a stored document and finds its nearest neighbours.";
  return undefined;
}

async function run() {
  if (!state.name) return;
  const seq = ++state.seq;
  clearError();
  const name = state.name;
  const text = $("#q").value.trim();
  const mode = $("#mode").value;
  const k = Math.max(1, Math.min(1000, parseInt($("#k").value, 10) || 10));
  let filter;
  try {
    filter = filterFor(null);
  } catch (e) {
    showError(e);
    return;
  }
  const facetFields = keywordFields().map((f) => f.name);
  const facetFilters = facetFields.map((field) => filterFor(field));
  const facetJobs = facetFields.map((field, i) => {
    const body = { field, size: FACET_SIZE };
    if (facetFilters[i]) body.filter = facetFilters[i];
    return api("POST", collPath(name) + "/facet", body);
  });
  const countJob = api("POST", collPath(name) + "/count", filter ? { filter } : {});
  let hitsJob;
  if (text) {
    const body = mode === "id" ? { id: idValue(text) } : { text, mode };
    Object.assign(body, { k, fields: true, explain: true });
    if (filter) body.filter = filter;
    hitsJob = api("POST", collPath(name) + "/search", body).then((v) => ({ kind: "search", v }));
  } else {
    const body = { size: k, fields: true };
    if (filter) body.filter = filter;
    hitsJob = api("POST", collPath(name) + "/scroll", body).then((v) => ({ kind: "scroll", v }));
  }
  const [hits, count, ...facets] = await Promise.allSettled([hitsJob, countJob, ...facetJobs]);
  if (seq !== state.seq) return; // a newer query is on its way
  facets.forEach((r, i) => renderFacet(facetFields[i], r.status === "fulfilled" ? r.value : null, !facetFilters[i]));
  const matched = count.status === "fulfilled" ? count.value.count : null;
  $("#results").dataset.matched = matched === null ? "" : String(matched);
  if (hits.status === "rejected") {
    renderHits([], null);
    $("#summary").textContent = matched === null ? "" : fmtInt(matched) + " documents match the filters";
    $("#explain").hidden = true;
    showError(hits.reason, text ? hint(hits.reason, mode) : undefined);
    return;
  }
  const { kind, v } = hits.value;
  renderHits(v.hits || [], kind);
  const took = typeof v.took_us === "number" ? " in " + fmtMs(v.took_us / 1000) : "";
  const what = kind === "search" ? (v.hits || []).length + " hits (" + v.mode + ")" + took : "the first " + (v.hits || []).length + " by id";
  $("#summary").textContent = (matched === null ? "" : fmtInt(matched) + " documents match the filters · ") + what;
  renderExplain(kind === "search" ? v : null);
}

function fieldsList(fields) {
  const dl = el("dl", { class: "fields" });
  const textField = state.info && state.info.text_field;
  for (const [k, val] of Object.entries(fields || {})) {
    if (Array.isArray(val) && val.length > 8 && val.every((x) => typeof x === "number")) continue; // a vector
    let s = typeof val === "string" ? val : JSON.stringify(val);
    if (s.length > 300) s = s.slice(0, 300) + "…";
    dl.append(el("div", { class: k === textField ? "text" : "" }, el("dt", { text: k }), el("dd", { text: s })));
  }
  return dl;
}

function renderHits(hits, kind) {
  const ol = $("#hits");
  if (!hits.length) {
    ol.replaceChildren(kind ? el("li", { class: "muted none", text: "No hits." }) : "");
    return;
  }
  ol.replaceChildren(
    ...hits.map((h) => {
      const open = el("button", { type: "button", class: "open", "data-id": JSON.stringify(h.id), text: String(h.id) });
      open.addEventListener("click", () => openDoc(h.id, open));
      return el(
        "li",
        { class: "hit", "data-id": JSON.stringify(h.id) },
        el(
          "div",
          { class: "head" },
          open,
          typeof h.score === "number" ? el("span", { class: "score", title: "score", text: h.score.toPrecision(4) }) : null,
        ),
        fieldsList(h.fields),
      );
    }),
  );
}

function renderExplain(v) {
  const box = $("#explain");
  if (!v) {
    box.hidden = true;
    return;
  }
  const x = v.explain || {};
  const facts = [
    ["mode", v.mode],
    ["plan", x.plan || v.plan || "–"],
    ["k", x.k],
    ["ef", x.ef],
    ["matched", x.matched],
    ["took", fmtMs(v.took_us / 1000)],
    ["segments", Array.isArray(x.segments) ? x.segments.length : undefined],
  ];
  $("#plan").replaceChildren(
    ...facts
      .filter(([, val]) => val !== undefined && val !== null)
      .map(([k, val]) => el("div", {}, el("dt", { text: k }), el("dd", { text: String(val) }))),
  );
  const stages = x.stages_us || v.timings_us || {};
  const max = Math.max(1, ...Object.values(stages).filter((n) => typeof n === "number"));
  $("#stages tbody").replaceChildren(
    ...Object.entries(stages).map(([name, us]) =>
      el(
        "tr",
        { "data-stage": name },
        el("th", { scope: "row", text: name }),
        el("td", { class: "num", text: fmtInt(us) }),
        el("td", {}, el("meter", { min: 0, max, value: us, title: name + ": " + us + " µs" })),
      ),
    ),
  );
  box.hidden = false;
}

// ---------------------------------------------------------------------------------------
// The document view

async function openDoc(id, opener) {
  state.last = opener || null;
  const dlg = $("#doc");
  $("#doc-title").textContent = "Document " + String(id);
  $("#doc-error").hidden = true;
  $("#doc-fields tbody").replaceChildren(el("tr", {}, el("td", { class: "muted", text: "loading…" })));
  $("#doc-json").textContent = "";
  $("#doc-similar").dataset.id = JSON.stringify(id);
  if (!dlg.open) dlg.showModal();
  try {
    const d = await api("GET", collPath(state.name) + "/docs/" + encodeURIComponent(String(id)));
    $("#doc-fields tbody").replaceChildren(
      ...Object.entries(d.fields || {}).map(([k, val]) =>
        el("tr", {}, el("th", { scope: "row", text: k }), el("td", {}, el("code", { text: typeof val === "string" ? val : JSON.stringify(val) }))),
      ),
    );
    $("#doc-json").textContent = JSON.stringify(d, null, 2);
  } catch (e) {
    $("#doc-fields tbody").replaceChildren();
    const box = $("#doc-error");
    box.replaceChildren(el("strong", { text: e.code }), " ", e.message);
    box.hidden = false;
  }
  $("#doc-close").focus();
}

function closeDoc() {
  const dlg = $("#doc");
  if (dlg.open) dlg.close();
}

// ---------------------------------------------------------------------------------------
// Wiring

function wire() {
  $("#search").addEventListener("submit", (e) => {
    e.preventDefault();
    run();
  });
  $("#mode").addEventListener("change", () => {
    if ($("#q").value.trim()) run();
  });
  $("#reset").addEventListener("click", () => {
    state.selected = new Map();
    state.ranges = new Map();
    renderFilters();
    run();
  });
  $("#doc-close").addEventListener("click", closeDoc);
  $("#doc").addEventListener("close", () => {
    if (state.last && document.contains(state.last)) state.last.focus();
  });
  $("#doc-similar").addEventListener("click", () => {
    const id = JSON.parse($("#doc-similar").dataset.id || "null");
    closeDoc();
    $("#q").value = String(id);
    $("#mode").value = "id";
    run();
  });
  $("#keyform").addEventListener("submit", (e) => {
    e.preventDefault();
    state.key = $("#key").value.trim();
    if (state.key) sessionStorage.setItem("searchd-key", state.key);
    else sessionStorage.removeItem("searchd-key");
    $("#keybox").open = false;
    loadCollections();
    pollStats();
  });
  document.addEventListener("keydown", (e) => {
    const t = e.target;
    const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement;
    if (e.key === "/" && !typing && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      $("#q").focus();
      $("#q").select();
    } else if (e.key === "Escape" && $("#doc").open) {
      e.preventDefault();
      closeDoc();
    }
  });
}

async function start() {
  wire();
  await pollStats();
  setInterval(pollStats, 2000);
  await loadCollections();
  document.body.dataset.ready = "true";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
