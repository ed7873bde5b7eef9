// The Jervis console: a client of the public REST API, nothing more. The
// API key lives in sessionStorage and goes out as a bearer header, never in
// a URL. Every URL is relative to the page, so the console works behind a
// path prefix. No inline script: the Content-Security-Policy forbids it.
"use strict";

const KEY = "jervis.key";
const ROLE = "jervis.role";
const SOURCES = ["EMAIL", "JIRA", "CONFLUENCE", "GIT", "FILE"];
const main = document.getElementById("main");
const nav = document.getElementById("nav");
const logout = document.getElementById("logout");

// el builds an element: el("a", {href: "#/x", class: "c"}, "text", child).
// Text is always set as text, never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElementNS(tag === "svg" || attrs?.svg ? "http://www.w3.org/2000/svg" : "http://www.w3.org/1999/xhtml", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "svg" || v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const svg = (tag, attrs, ...children) => el(tag, { ...attrs, svg: true }, ...children);

function url(path) { return new URL(path, document.baseURI); }

// api calls the REST API with the key; it answers the decoded JSON or
// throws an Error carrying the API's message and status.
async function api(path, opts = {}) {
  const headers = { Authorization: "Bearer " + sessionStorage.getItem(KEY) };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(url(path), { method: opts.method || "GET", headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const err = new Error(data?.error?.message || res.statusText);
    err.status = res.status;
    throw err;
  }
  return data;
}

function show(...children) {
  main.replaceChildren(...children.flat());
}
function problem(err) {
  return el("p", { class: "error", role: "alert" }, err.message || String(err));
}
function route() {
  const [path, query] = location.hash.slice(1).split("?");
  return { parts: (path || "/").split("/").filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(query || "") };
}
function go(hash) { location.hash = hash; }

// ---- sign in

async function signIn(key) {
  sessionStorage.setItem(KEY, key);
  try {
    await api("api/v1/documents?limit=1");
    sessionStorage.setItem(ROLE, "client");
  } catch (err) {
    if (err.status !== 403) {
      sessionStorage.removeItem(KEY);
      throw err;
    }
    await api("admin/v1/stats");
    sessionStorage.setItem(ROLE, "admin");
  }
}

function loginScreen(message) {
  const input = el("input", { id: "key", type: "password", autocomplete: "off", required: true, "aria-describedby": "key-help" });
  const out = el("div");
  const form = el("form", { class: "card narrow", onsubmit: async (ev) => {
    ev.preventDefault();
    try {
      await signIn(input.value.trim());
      go(sessionStorage.getItem(ROLE) === "admin" ? "#/pipeline" : "#/search");
    } catch (err) {
      out.replaceChildren(problem(err));
    }
  } },
  el("h1", {}, "Sign in"),
  el("label", { for: "key" }, "API key"),
  input,
  el("p", { id: "key-help", class: "hint" }, "A client key opens search, items and documents; the admin key opens the pipeline and operations. It is kept in this tab only."),
  el("button", { type: "submit" }, "Sign in"), out);
  show(message ? problem(new Error(message)) : [], form);
  input.focus();
}

// ---- search

function highlight(text, terms) {
  const words = terms.filter((t) => t.length > 1).map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) return [text];
  const re = new RegExp("(" + words.join("|") + ")", "gi");
  return text.split(re).map((part, i) => (i % 2 ? el("mark", {}, part) : part));
}

async function searchScreen({ params }) {
  const q = params.get("q") || "";
  const types = (params.get("types") || "").split(",").filter(Boolean);
  const input = el("input", { id: "q", type: "search", value: q, required: true });
  const boxes = SOURCES.map((s) => el("label", { class: "check" }, el("input", { type: "checkbox", name: "type", value: s, checked: types.includes(s) }), s.toLowerCase()));
  const form = el("form", { class: "search", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    const picked = [...form.querySelectorAll("input[name=type]:checked")].map((b) => b.value);
    go("#/search?" + new URLSearchParams({ q: input.value, types: picked.join(",") }));
  } },
  el("label", { for: "q" }, "Search"), input, el("button", { type: "submit" }, "Search"),
  el("fieldset", {}, el("legend", {}, "Sources"), boxes));
  const results = el("section", { id: "results", "aria-label": "Results" });
  show(form, results);
  if (!q) { input.focus(); return; }
  results.replaceChildren(el("p", { class: "hint" }, "Searching…"));
  try {
    const qs = new URLSearchParams({ query: q, limit: "10", expand: "1" });
    if (types.length) qs.set("sourceTypes", types.join(","));
    const t0 = performance.now();
    const pack = await api("api/v1/search?" + qs);
    const took = performance.now() - t0;
    const terms = q.split(/\s+/);
    const items = (pack.items || []).filter((it) => it.kind === "item" || it.kind === "passage");
    const timings = Object.entries(pack.timingsMs || {}).map(([k, v]) => `${k} ${v.toFixed(1)} ms`).join(", ");
    results.replaceChildren(
      el("p", { class: "hint", id: "timings" }, `${items.length} items in ${took.toFixed(0)} ms (${timings})`),
      el("ol", { class: "items" }, items.map((it) => {
        const [source, external] = (it.sourceUrn || ":").split(/:(.*)/s);
        const node = (it.nodeKeys || [])[0];
        return el("li", { class: "item" },
          el("h2", {}, node ? el("a", { href: "#/node/" + encodeURIComponent(node) + "?" + new URLSearchParams({ source: it.sourceUrn || "" }) }, it.title || it.sourceUrn) : (it.title || it.sourceUrn)),
          el("p", { class: "meta" }, el("span", { class: "tag" }, source.toLowerCase()), " ", external,
            it.date ? el("time", { datetime: it.date }, " · " + it.date.slice(0, 10)) : "", " · score ", it.score.toFixed(3),
            node ? [" · ", el("a", { href: "#/node/" + encodeURIComponent(node) + "?" + new URLSearchParams({ source: it.sourceUrn || "" }) }, "the source document")] : ""),
          (it.passages || [{ text: it.content }]).map((p) => el("blockquote", { class: "passage" }, highlight(p.text, terms))));
      })));
  } catch (err) {
    results.replaceChildren(problem(err));
  }
}

// ---- an item: its node and the graph around it

const PALETTE = ["#1f6feb", "#b35900", "#1a7f37", "#a40e26", "#8250df", "#0a7d8c", "#7d4e00", "#57606a"];
function color(type) {
  let h = 0;
  for (const c of type) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}
// enter runs fn for Enter or Space on a focused drawing element.
function enter(ev, fn) {
  if (ev.key === "Enter" || ev.key === " ") {
    ev.preventDefault();
    fn();
  }
}
function short(key, n = 28) { return key.length > n ? key.slice(0, n - 1) + "…" : key; }

// layout places the start in the middle and each depth on a ring.
function layout(nodes, size) {
  const byDepth = new Map();
  for (const n of nodes) byDepth.set(n.depth, [...(byDepth.get(n.depth) || []), n]);
  const pos = new Map();
  const c = size / 2;
  for (const [d, ns] of byDepth) {
    const r = d === 0 ? 0 : (size / 2 - 70) * (d / Math.max(...byDepth.keys()));
    ns.forEach((n, i) => {
      const a = (2 * Math.PI * i) / ns.length + d * 0.4;
      pos.set(n.key, { x: c + r * Math.cos(a) + (d === 0 && ns.length > 1 ? 30 * i : 0), y: c + r * Math.sin(a) });
    });
  }
  return pos;
}

async function nodeScreen({ parts, params }) {
  const key = parts.slice(1).join("/");
  const depth = Math.min(3, Math.max(1, Number(params.get("depth")) || 1));
  const evidence = el("aside", { id: "evidence", class: "card", "aria-live": "polite" }, el("p", { class: "hint" }, "Choose an edge to see its evidence."));
  show(el("p", { class: "hint" }, "Loading…"));
  try {
    const node = await api("api/v1/nodes/" + encodeURIComponent(key));
    const hood = await api(`api/v1/nodes/${encodeURIComponent(node.key)}/neighbors?depth=${depth}&limit=60`);
    const size = 560;
    const pos = layout(hood.nodes, size);
    const openEdge = async (e) => {
      evidence.replaceChildren(el("p", { class: "hint" }, "Loading…"));
      try {
        const full = await api("api/v1/edges/" + encodeURIComponent(`${e.edgeType}::${e.from}->${e.to}`));
        evidence.replaceChildren(
          el("h2", {}, `${e.from} —${e.edgeType}→ ${e.to}`),
          el("p", { class: "meta" }, `origin ${full.origin} · confidence ${full.confidence}`),
          ...(full.evidence || []).map((ev) => el("blockquote", { class: "passage evidence-text" }, ev.text)));
      } catch (err) {
        evidence.replaceChildren(problem(err));
      }
    };
    const drawing = svg("svg", { viewBox: `0 0 ${size} ${size}`, class: "graph", role: "img", "aria-label": `The graph around ${node.key}, depth ${depth}` },
      hood.edges.filter((e) => pos.has(e.from) && pos.has(e.to)).map((e) => {
        const a = pos.get(e.from), b = pos.get(e.to);
        return svg("g", { class: "edge", "data-key": `${e.edgeType}::${e.from}->${e.to}`, tabindex: "0", role: "button",
          "aria-label": `${e.from} ${e.edgeType} ${e.to}: show the evidence`, onclick: () => openEdge(e), onkeydown: (ev) => enter(ev, () => openEdge(e)) },
          svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y }),
          svg("line", { class: "hit", x1: a.x, y1: a.y, x2: b.x, y2: b.y }),
          svg("text", { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 3, class: "edge-label" }, e.edgeType));
      }),
      hood.nodes.map((n) => {
        const p = pos.get(n.key);
        const open = () => go("#/node/" + encodeURIComponent(n.key) + "?depth=" + depth);
        return svg("g", { class: "node", "data-key": n.key, tabindex: "0", role: "link", "aria-label": `${n.type} ${n.key}`, onclick: open, onkeydown: (ev) => enter(ev, open) },
          svg("circle", { cx: p.x, cy: p.y, r: n.depth === 0 ? 12 : 8, fill: color(n.type) }),
          svg("text", { x: p.x + 12, y: p.y + 4 }, short(n.key)));
      }));
    const types = [...new Set(hood.nodes.map((n) => n.type))].sort();
    const doc = params.get("source") ? await itemDocument(params.get("source")) : [];
    show(
      el("h1", {}, node.props?.title || node.key),
      el("p", { class: "meta" }, el("span", { class: "tag" }, node.type), " ", node.key, ` · ${node.ragChunks.length} chunks · first seen ${node.firstSeen.slice(0, 10)}, last ${node.lastSeen.slice(0, 10)}`),
      doc,
      el("nav", { class: "depth", "aria-label": "Depth" }, "Depth: ", [1, 2, 3].map((d) => d === depth ? el("strong", {}, String(d)) :
        el("a", { href: `#/node/${encodeURIComponent(node.key)}?` + new URLSearchParams({ depth: String(d), source: params.get("source") || "" }) }, String(d)))),
      el("div", { class: "split" },
        el("figure", { class: "card" }, drawing, el("figcaption", {}, types.map((t) => el("span", { class: "legend" }, el("i", { class: "dot", "data-color": color(t) }), t)))),
        evidence),
      el("h2", {}, "Edges"),
      el("ul", { class: "edges" }, hood.edges.map((e) => el("li", {}, el("button", { type: "button", class: "link", onclick: () => openEdge(e) }, `${e.from} —${e.edgeType}→ ${e.to}`)))),
      el("h2", {}, "Properties"), el("pre", {}, JSON.stringify(node.props || {}, null, 2)));
    for (const dot of main.querySelectorAll("i.dot")) dot.style.background = dot.dataset.color;
  } catch (err) {
    show(problem(err));
  }
}

// itemDocument is the source document of a search item (its URN): the
// latest version's date, state, quarantine reason, text and metadata, and
// every version.
async function itemDocument(urn) {
  try {
    const versions = (await api("api/v1/documents?" + new URLSearchParams({ sourceUrn: urn }))).items;
    if (!versions.length) return [];
    const d = versions[0];
    return el("section", { id: "item-document", class: "card", "aria-label": "Source document" },
      el("h2", {}, "Source document"),
      el("p", { class: "meta" }, el("span", { class: "tag" }, d.sourceType.toLowerCase()), ` ${d.externalId} · observed ${(d.observedAt || "").slice(0, 10)} · ${d.state}`),
      d.error ? el("p", { class: "error" }, `${d.state === "QUARANTINED" ? "Quarantined" : "Failed"}: ${d.error.message}`) : [],
      (d.normalized?.warnings || []).map((w) => el("p", { class: "warning" }, w)),
      el("details", {}, el("summary", {}, "Text"), el("pre", { class: "body" }, d.normalized?.body || "")),
      el("details", {}, el("summary", {}, "Metadata"), el("pre", {}, JSON.stringify(d.normalized?.metadata || {}, null, 2))),
      el("p", { class: "versions" }, `${versions.length} version${versions.length > 1 ? "s" : ""}: `,
        versions.map((v, i) => [i ? ", " : "", el("a", { href: "#/document/" + encodeURIComponent(v.id) }, `${v.version} (${(v.observedAt || v.updatedAt).slice(0, 10)}, ${v.state})`)])));
  } catch (err) {
    return problem(err);
  }
}

// ---- documents, with the pipeline's events live

let stream = null;
function stopStream() { if (stream) { stream.abort(); stream = null; } }

// events reads the event stream — the client's, or with the admin key
// every client's — (Server-Sent Events over fetch, which can carry the key
// as a header) and calls on(type, data, id) for each. It calls opened()
// once the stream is open (or failed to open): from then on no event is
// missed, so a screen reads its list after that.
async function events(on, after, opened = () => {}) {
  stopStream();
  stream = new AbortController();
  const path = sessionStorage.getItem(ROLE) === "admin" ? "admin/v1/events" : "api/v1/events";
  let res;
  try {
    res = await fetch(url(path + (after ? "?after=" + after : "")), { headers: { Authorization: "Bearer " + sessionStorage.getItem(KEY) }, signal: stream.signal });
  } finally {
    opened();
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      const id = /^id: (.*)$/m.exec(block)?.[1];
      if (type) on(type, data ? JSON.parse(data) : null, id);
    }
  }
}

async function documentsScreen({ params }) {
  const state = params.get("state") || "";
  const states = ["", "NEW", "INDEXING", "INDEXED", "QUARANTINED"];
  const counter = el("output", { id: "event-count" }, "0");
  const list = el("section", { id: "documents", "aria-label": "Documents" });
  show(el("h1", {}, "Documents"),
    el("nav", { class: "filters", "aria-label": "State" }, states.map((s) => s === state ? el("strong", {}, s || "all") : el("a", { href: "#/documents?state=" + s }, s || "all"))),
    el("p", { class: "hint" }, "Pipeline events seen live: ", counter), list);
  let seen = 0;
  const load = async () => {
    try {
      const qs = new URLSearchParams({ limit: "50" });
      if (state) qs.set("state", state);
      const docs = await api("api/v1/documents?" + qs);
      list.replaceChildren(el("table", {},
        el("thead", {}, el("tr", {}, ["Source", "Item", "State", "Reason", "Updated"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, docs.items.map((d) => el("tr", {},
          el("td", {}, d.sourceType.toLowerCase()),
          el("td", {}, el("a", { href: "#/document/" + encodeURIComponent(d.id) }, d.normalized?.title || d.externalId)),
          el("td", {}, d.state),
          el("td", { class: "reason" }, d.error?.message || ""),
          el("td", {}, d.updatedAt.slice(0, 19).replace("T", " ")))))));
    } catch (err) {
      list.replaceChildren(problem(err));
    }
  };
  // The stream open first, then the list: nothing that happens in between
  // is missed.
  let pending = null;
  await new Promise((opened) => events(() => {
    counter.textContent = String(++seen);
    clearTimeout(pending);
    pending = setTimeout(load, 200);
  }, "now", opened).catch(() => {}));
  await load();
}

async function documentScreen({ parts }) {
  try {
    const d = await api("api/v1/documents/" + encodeURIComponent(parts[1]));
    show(el("h1", {}, d.normalized?.title || d.externalId),
      el("p", { class: "meta" }, el("span", { class: "tag" }, d.sourceType.toLowerCase()), ` ${d.externalId} · version ${d.version} · ${d.state} · ID `, el("code", { id: "document-id" }, d.id)),
      d.error ? el("p", { class: "error", id: "quarantine-reason" }, `${d.state === "QUARANTINED" ? "Quarantined" : "Failed"}: ${d.error.message}`) : [],
      (d.normalized?.warnings || []).map((w) => el("p", { class: "warning" }, w)),
      el("h2", {}, "Text"), el("pre", { class: "body" }, d.normalized?.body || ""),
      el("h2", {}, "Metadata"), el("pre", {}, JSON.stringify(d.normalized?.metadata || {}, null, 2)));
  } catch (err) {
    show(problem(err));
  }
}

// ---- tasks: what the qualifier routed, with its TaskMemory

async function tasksScreen({ params }) {
  const state = params.get("state") || "READY_FOR_GPU";
  const states = ["READY_FOR_GPU", "NEW", "QUALIFICATION_IN_PROGRESS", "DONE", "FAILED"];
  const list = el("section", { id: "tasks", "aria-label": "Tasks" });
  show(el("h1", {}, "Tasks"),
    el("nav", { class: "filters", "aria-label": "State" }, states.map((s) => s === state ? el("strong", {}, s) : el("a", { href: "#/tasks?state=" + s }, s))), list);
  try {
    const tasks = await api("api/v1/tasks?" + new URLSearchParams({ state, limit: "50" }));
    list.replaceChildren(tasks.items.length ? el("table", {},
      el("thead", {}, el("tr", {}, ["Task", "Kind", "State", "Attempts", "Updated"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, tasks.items.map((x) => el("tr", {},
        el("td", {}, el("a", { href: "#/task/" + encodeURIComponent(x.id) }, x.id.slice(0, 12))),
        el("td", {}, x.kind), el("td", {}, x.state), el("td", { class: "num" }, String(x.attempts ?? 0)),
        el("td", {}, (x.updatedAt || "").slice(0, 19).replace("T", " ")))))) : el("p", { class: "hint" }, "No task in this state."));
  } catch (err) {
    list.replaceChildren(problem(err));
  }
}

async function taskScreen({ parts }) {
  try {
    const x = await api("api/v1/tasks/" + encodeURIComponent(parts[1]));
    const m = x.memory || {};
    show(el("h1", {}, `${x.kind} task`),
      el("p", { class: "meta" }, `${x.id} · ${x.state} · attempts ${x.attempts ?? 0}`),
      x.error ? el("p", { class: "error" }, x.error.message) : [],
      el("h2", {}, "Routing"),
      el("p", { id: "routing" }, `${m.routingDecision || "—"}: ${m.routingReason || "not yet qualified"}`),
      el("h2", {}, "Context summary"), el("pre", { id: "summary" }, m.contextSummary || ""),
      (m.warnings || []).map((w) => el("p", { class: "warning" }, w)),
      el("h2", {}, "Graph"), el("ul", {}, (m.graphNodeKeys || []).map((k) => el("li", {}, el("a", { href: "#/node/" + encodeURIComponent(k) }, k)))),
      el("h2", {}, "Events"), el("ol", {}, (x.events || []).map((e) => el("li", {}, `${e.at.slice(0, 19).replace("T", " ")} ${e.type}`))));
  } catch (err) {
    show(problem(err));
  }
}

// ---- admin: clients, their keys and link patterns

async function clientsScreen({ parts }) {
  const chosen = parts[1];
  const box = el("section", { id: "clients" });
  const id = el("input", { id: "new-client", type: "text", required: true, pattern: "[a-z0-9][a-z0-9_-]*" });
  const name = el("input", { id: "new-client-name", type: "text" });
  const out = el("div", { "aria-live": "polite" });
  const create = el("form", { class: "card narrow", onsubmit: async (ev) => {
    ev.preventDefault();
    try {
      await api("admin/v1/clients", { method: "POST", body: { id: id.value, name: name.value || undefined } });
      go("#/clients/" + encodeURIComponent(id.value));
    } catch (err) { out.replaceChildren(problem(err)); }
  } }, el("h2", {}, "New client"), el("label", { for: "new-client" }, "ID"), id, el("label", { for: "new-client-name" }, "Name"), name,
  el("button", { type: "submit" }, "Create"), out);
  show(el("h1", {}, "Clients"), box, create);
  try {
    const cs = (await api("admin/v1/clients")).items;
    box.replaceChildren(el("ul", { class: "clients" }, cs.map((c) => el("li", {}, c.id === chosen ? el("strong", {}, c.name || c.id) :
      el("a", { href: "#/clients/" + encodeURIComponent(c.id) }, c.name || c.id), ` (${c.id})`))));
    if (chosen) box.append(await clientDetail(chosen));
  } catch (err) {
    box.replaceChildren(problem(err));
  }
}

async function clientDetail(client) {
  const c = encodeURIComponent(client);
  const section = el("section", { id: "client-detail", class: "card" }, el("h2", {}, `Client ${client}`));
  const reload = () => render();
  // Keys: the secret of a new one is shown once, here.
  const keys = (await api(`admin/v1/clients/${c}/keys`)).items;
  const keyName = el("input", { id: "key-name", type: "text", required: true });
  const secret = el("div", { id: "new-secret", "aria-live": "polite" });
  const keyRow = (k) => {
    const state = el("td", {}, k.revokedAt ? "revoked" : "active");
    const revoke = k.revokedAt ? "" : el("button", { type: "button", class: "link", onclick: async () => {
      try {
        await api(`admin/v1/keys/${encodeURIComponent(k.id)}/revoke`, { method: "POST" });
        state.textContent = "revoked";
        revoke.remove();
      } catch (err) { secret.replaceChildren(problem(err)); }
    } }, "Revoke");
    return el("tr", {}, el("td", {}, k.name || k.id), state, el("td", {}, revoke));
  };
  const body = el("tbody", {}, keys.map(keyRow));
  section.append(el("h3", {}, "API keys"), el("table", {}, body),
    el("form", { onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const created = await api(`admin/v1/clients/${c}/keys`, { method: "POST", body: { name: keyName.value } });
        body.append(keyRow(created));
        secret.replaceChildren(el("p", { class: "warning" }, "The key's secret, shown this once — copy it now:"), el("pre", { id: "secret" }, created.secret));
      } catch (err) { secret.replaceChildren(problem(err)); }
    } }, el("label", { for: "key-name" }, "New key's name"), keyName, el("button", { type: "submit" }, "Create key")), secret);
  // Link patterns.
  const patterns = (await api(`admin/v1/clients/${c}/link-patterns`)).items;
  const kind = el("select", { id: "pattern-kind" }, el("option", { value: "block" }, "block"), el("option", { value: "allow" }, "allow"));
  const pattern = el("input", { id: "pattern", type: "text", required: true });
  const perr = el("div", { "aria-live": "polite" });
  section.append(el("h3", {}, "Link patterns"),
    el("ul", { id: "patterns" }, patterns.map((p) => el("li", {}, `${p.kind} ${p.pattern} `, el("button", { type: "button", class: "link", onclick: async () => {
      try { await api(`admin/v1/clients/${c}/link-patterns`, { method: "DELETE", body: { kind: p.kind, pattern: p.pattern } }); reload(); } catch (err) { perr.replaceChildren(problem(err)); }
    } }, "Remove")))),
    el("form", { onsubmit: async (ev) => {
      ev.preventDefault();
      try { await api(`admin/v1/clients/${c}/link-patterns`, { method: "POST", body: { kind: kind.value, pattern: pattern.value } }); reload(); } catch (err) { perr.replaceChildren(problem(err)); }
    } }, el("label", { for: "pattern-kind" }, "Kind"), kind, el("label", { for: "pattern" }, "Pattern (a host, *.host or an http(s) URL)"), pattern,
    el("button", { type: "submit" }, "Add pattern")), perr);
  return section;
}

// ---- admin: the pipeline and operations

function countsTable(caption, counts) {
  return el("table", {}, el("caption", {}, caption),
    el("tbody", {}, Object.entries(counts || {}).sort().map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k),
      el("td", { class: typeof v === "number" ? "num" : undefined }, String(v))))));
}

async function pipelineScreen() {
  const box = el("section", { id: "stats", "aria-label": "Pipeline" });
  const counter = el("output", { id: "pipeline-events" }, "0");
  show(el("h1", {}, "Pipeline"), el("p", { class: "hint" }, "Live: every client's pipeline events seen: ", counter, " (and a refresh every 10 s)."), box);
  let seen = 0, pending = null, timer = null;
  const load = async () => {
    if (!box.isConnected) return;
    clearTimeout(timer);
    try {
      const s = await api("admin/v1/stats");
      box.replaceChildren(el("div", { class: "grid" },
        countsTable("Documents by state", s.documents),
        countsTable("Tasks by state", s.tasks),
        countsTable("Failures by class", s.failures),
        countsTable("Oldest waiting", Object.fromEntries(Object.entries(s.oldestWaiting || {}).map(([k, v]) => [k.replace(".", " "), v.slice(0, 19).replace("T", " ")]))),
        s.executor ? countsTable("Executor", { state: s.executor.idle ? "idle: may run READY_FOR_GPU tasks" : "yielding to users",
          "users being answered": s.executor.usersActive, "runs preempted": s.executor.preemptions, "idle after (s)": s.executor.idleAfterSeconds }) :
          countsTable("Executor", { state: "not in this process" }),
        Object.entries(s.documentsBySource || {}).map(([src, c]) => countsTable(`${src.toLowerCase()} documents`, c)),
        Object.entries(s.tasksByKind || {}).map(([k, c]) => countsTable(`${k} tasks`, c)),
        el("table", {}, el("caption", {}, "Backends"), el("tbody", {}, (s.backends || []).map((b) => el("tr", {}, el("th", { scope: "row" }, `${b.role}: ${b.backend}`), el("td", {}, b.ok ? "ok" : b.error)))))));
      timer = setTimeout(load, 10000);
    } catch (err) {
      box.replaceChildren(problem(err));
    }
  };
  await new Promise((opened) => events(() => {
    counter.textContent = String(++seen);
    clearTimeout(pending);
    pending = setTimeout(load, 300);
  }, "now", opened).catch(() => {}));
  await load();
}

async function operateScreen() {
  const out = el("section", { id: "job", "aria-live": "polite" });
  let clients = [];
  try { clients = (await api("admin/v1/clients")).items; } catch (err) { out.append(problem(err)); }
  const client = el("select", { id: "client", required: true }, clients.map((c) => el("option", { value: c.id }, c.name || c.id)));
  const source = el("select", { id: "source" }, el("option", { value: "" }, "all"), SOURCES.map((s) => el("option", { value: s }, s.toLowerCase())));
  const docs = el("input", { id: "documents", type: "text", placeholder: "all", "aria-describedby": "documents-help" });
  const dry = el("input", { id: "dry", type: "checkbox", checked: true });
  const form = el("form", { class: "card narrow", onsubmit: async (ev) => {
    ev.preventDefault();
    out.replaceChildren(el("p", { class: "hint" }, "Starting…"));
    const body = { client: client.value, dryRun: dry.checked };
    if (source.value) body.sourceType = source.value;
    const ids = docs.value.split(/[\s,]+/).filter(Boolean);
    if (ids.length) body.documentIds = ids;
    try {
      let job = await api("admin/v1/reprocess", { method: "POST", body });
      const bar = el("progress", { max: "1", value: "0", "aria-label": "Progress" });
      const line = el("p", {});
      out.replaceChildren(el("h2", {}, dry.checked ? "Dry run" : "Reprocess"), bar, line);
      while (job.state === "running") {
        await new Promise((r) => setTimeout(r, 300));
        job = await api("admin/v1/jobs/" + encodeURIComponent(job.id));
        bar.max = String(Math.max(1, job.progress.selected));
        bar.value = String(job.progress.processed);
      }
      const p = job.progress;
      bar.max = String(Math.max(1, p.selected));
      bar.value = String(p.processed);
      line.textContent = job.state === "done"
        ? `${job.request.dryRun ? "Would replay" : "Replayed"} ${p.selected} documents (${p.documentsReset} to the indexers, ${p.tasksReset} tasks to the qualifier, ${p.conflicts} changed meanwhile).`
        : `Failed: ${job.error}`;
      line.id = "job-result";
    } catch (err) {
      out.replaceChildren(problem(err));
    }
  } },
  el("h1", {}, "Reprocess"),
  el("label", { for: "client" }, "Client"), client,
  el("label", { for: "source" }, "Source"), source,
  el("label", { for: "documents" }, "Documents"), docs,
  el("p", { id: "documents-help", class: "hint" }, "Document IDs, to retry some (a quarantined one goes back to the indexers); empty: all of the selection."),
  el("label", { class: "check", for: "dry" }, dry, " Dry run first: count what would be replayed"),
  el("button", { type: "submit" }, "Start"));
  // Connections: poll one now.
  const polled = el("div", { id: "poll-result", "aria-live": "polite" });
  let conns = [];
  try { conns = (await api("admin/v1/connections")).items; } catch (err) { polled.append(problem(err)); }
  const connections = el("section", { class: "card narrow", "aria-label": "Connections" }, el("h2", {}, "Connections"),
    conns.length ? el("table", {}, el("tbody", {}, conns.map((c) => el("tr", {},
      el("th", { scope: "row" }, c.id), el("td", {}, `${c.type} → ${c.client}`), el("td", {}, c.schedule || ""),
      el("td", {}, c.pollable ? el("button", { type: "button", class: "link", onclick: async () => {
        try {
          const r = await api(`admin/v1/connections/${encodeURIComponent(c.id)}/poll`, { method: "POST" });
          polled.replaceChildren(el("p", {}, `${r.connection}: ${r.status}`));
        } catch (err) { polled.replaceChildren(problem(err)); }
      } }, "Poll now") : "polled by another process"))))) : el("p", { class: "hint" }, "No connection is configured."), polled);
  show(form, out, connections);
}

// ---- the router

const SCREENS = {
  client: { search: searchScreen, node: nodeScreen, documents: documentsScreen, document: documentScreen, tasks: tasksScreen, task: taskScreen },
  admin: { pipeline: pipelineScreen, operate: operateScreen, clients: clientsScreen },
};
const NAV = {
  client: [["search", "Search"], ["documents", "Documents"], ["tasks", "Tasks"]],
  admin: [["pipeline", "Pipeline"], ["operate", "Operate"], ["clients", "Clients"]],
};

async function render() {
  stopStream();
  const r = route();
  const role = sessionStorage.getItem(ROLE);
  logout.hidden = !role;
  nav.replaceChildren(...(NAV[role] || []).map(([k, label]) => el("a", { href: "#/" + k, "aria-current": r.parts[0] === k ? "page" : undefined }, label)));
  if (!role || r.parts[0] === "login") return loginScreen();
  const screen = SCREENS[role][r.parts[0]];
  if (!screen) return go(role === "admin" ? "#/pipeline" : "#/search");
  await screen(r);
}

logout.addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ROLE);
  go("#/login");
});
window.addEventListener("hashchange", render);
render();
