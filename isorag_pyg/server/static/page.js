"use strict";
// ISO-RAG's page: ask a question (POST /answer, streamed as server-sent events), show the answer
// with clickable [n] citations and the retrieved passages, and draw the question's local graph
// (POST /explain) as SVG. Plain browser APIs only: the page loads nothing from the internet.

const $ = (id) => document.getElementById(id);
const KEY_STORE = "isorag-api-key";
const MARKER = /\[(\d+(?:\s*,\s*\d+)*)\]/g;  // [1] or [1, 3]

class HttpError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

// --- requests -------------------------------------------------------------------------------

function headers() {
  const sent = {"content-type": "application/json"};
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) sent.authorization = `Bearer ${key}`;
  return sent;
}

/** The server's error (its JSON body's one-line detail); a 401 asks for the API key. */
async function errorOf(response) {
  let detail = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && typeof body.detail === "string") detail = body.detail;
  } catch (_) { /* not JSON: keep the status line */ }
  if (response.status === 401) $("key-box").hidden = false;
  return new HttpError(response.status, detail);
}

async function request(path, body) {
  const options = body === undefined ? {headers: headers()} : {method: "POST", headers: headers(), body: JSON.stringify(body)};
  const response = await fetch(path, options);
  if (!response.ok) throw await errorOf(response);
  return response;
}

/** Calls onEvent(name, data) for each server-sent event of a fetch() response, as it arrives. */
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const {value, done} = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), {stream: !done});
    buffer = buffer.replace(/\r\n|\r(?=[^\n])/g, "\n");  // a final \r may be the half of a \r\n
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      dispatch(buffer.slice(0, end), onEvent);
      buffer = buffer.slice(end + 2);
    }
    if (done) {
      if (buffer.trim()) dispatch(buffer, onEvent);
      return;
    }
  }
}

function dispatch(block, onEvent) {
  let name = "message";
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
  }
  if (data.length) onEvent(name, JSON.parse(data.join("\n")));
}

// --- answer and passages --------------------------------------------------------------------

let passageIds = new Map();  // citation number -> passage id

function element(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = text;
  return made;
}

function citationLink(n) {
  const link = element("a", "cite", `[${n}]`);
  link.href = `#passage-${n}`;
  link.dataset.n = n;
  return link;
}

/** The answer text with each [n] of a listed passage as a link to it. */
function showAnswer(text) {
  const answer = $("answer");
  answer.replaceChildren();
  let last = 0;
  for (const match of text.matchAll(MARKER)) {
    const numbers = match[1].split(",").map((n) => Number(n.trim()));
    if (!numbers.every((n) => passageIds.has(n))) continue;
    answer.append(text.slice(last, match.index));
    numbers.forEach((n) => answer.append(citationLink(n)));
    last = match.index + match[0].length;
  }
  answer.append(text.slice(last));
}

function showCitations(citations) {
  $("citations").replaceChildren(...citations.map((c) => {
    const item = element("li");
    item.append(citationLink(c.n), ` ${c.title} `, element("span", "id", c.id));
    if (c.by === "match") item.append(element("span", "by", " matched to the answer"));
    return item;
  }));
}

function showPassages(passages) {
  passageIds = new Map(passages.map((p) => [p.n, p.id]));
  $("passages").replaceChildren(...passages.map((p) => {
    const item = element("li", "passage");
    item.id = `passage-${p.n}`;
    item.value = p.n;
    item.dataset.id = p.id;
    const head = element("div", "passage-head");
    head.append(element("span", "num", `[${p.n}]`), element("strong", "", p.title), element("span", "id", p.id),
      element("span", "score", `score ${Number(p.score).toFixed(3)}`));
    item.append(head, element("p", "", p.text));
    return item;
  }));
}

/** Scroll to passage n and highlight it, and its node in the graph. */
function focusPassage(n) {
  const item = $(`passage-${n}`);
  if (!item) return;
  document.querySelectorAll(".highlight").forEach((el) => el.classList.remove("highlight"));
  item.classList.add("highlight");
  item.scrollIntoView({behavior: "smooth", block: "center"});
  const node = [...document.querySelectorAll("#graph .node")].find((el) => el.dataset.id === item.dataset.id);
  if (node) node.classList.add("highlight");
}

function showTimings(timings) {
  const parts = Object.entries(timings || {}).filter(([, v]) => typeof v === "number" || typeof v === "string")
    .map(([key, v]) => key.endsWith("_s") ? `${key.slice(0, -2).replace(/_/g, " ")} ${Number(v).toFixed(3)} s`
      : `${key.replace(/_/g, " ")} ${typeof v === "number" ? +v.toFixed(3) : v}`);
  $("timings").textContent = parts.join(" · ");
}

async function streamAnswer(question, k, retriever) {
  let response;
  try {
    response = await request("answer", {question, k, retriever, stream: true});
  } catch (err) {
    if (err.status === 401 || err.status === 422 || err.status === 400 || err.status === 413) throw err;
    $("answer-note").textContent = `No answer: ${err.message}. The retrieved passages are shown below.`;
    const [result] = await (await request("retrieve", {questions: [question], k, retriever})).json();
    showPassages(result.results.map((p, i) => ({n: i + 1, ...p})));
    return;
  }
  let text = "";
  await readEvents(response, (name, data) => {
    if (name === "passages") showPassages(data.passages);
    else if (name === "token") showAnswer(text += data.text);
    else if (name === "done") {
      showPassages(data.passages);
      showAnswer(data.answer);
      showCitations(data.citations);
      showTimings(data.timings);
    } else if (name === "error") $("answer-note").textContent = `The reader failed (${data.status}): ${data.detail}`;
  });
}

// --- the graph ------------------------------------------------------------------------------

const WIDTH = 800, HEIGHT = 600, MARGIN = 30, LABEL_ROOM = 110;  // labels sit right of their node

/** Node positions in the box: a fixed number of force-directed steps (fewer for a large graph:
 * each is quadratic in its nodes) from a golden-angle spiral in the trace's order, so that the
 * same trace always gives the same picture. */
function layout(count, links) {
  const pos = Array.from({length: count}, (_, i) => {
    const r = Math.sqrt((i + 0.5) / count), a = i * 2.399963;
    return [r * Math.cos(a), r * Math.sin(a)];
  });
  const ideal = 1.6 / Math.sqrt(Math.max(count, 1));
  let step = 0.08;
  const rounds = Math.max(60, Math.min(300, Math.floor(3e7 / (count * count || 1))));
  for (let round = 0; round < rounds; round++) {
    const push = pos.map(([x, y]) => [-x * 1.5, -y * 1.5]);  // gravity: components and lone nodes stay close
    for (let i = 0; i < count; i++) {
      for (let j = i + 1; j < count; j++) {
        const dx = pos[i][0] - pos[j][0], dy = pos[i][1] - pos[j][1];
        const d2 = Math.max(dx * dx + dy * dy, 1e-6), f = (ideal * ideal) / d2;
        push[i][0] += dx * f; push[i][1] += dy * f; push[j][0] -= dx * f; push[j][1] -= dy * f;
      }
    }
    for (const [a, b] of links) {
      const dx = pos[a][0] - pos[b][0], dy = pos[a][1] - pos[b][1], f = Math.hypot(dx, dy) / ideal;
      push[a][0] -= dx * f; push[a][1] -= dy * f; push[b][0] += dx * f; push[b][1] += dy * f;
    }
    pos.forEach((p, i) => {
      const length = Math.hypot(push[i][0], push[i][1]);
      if (length > 0) { p[0] += (push[i][0] / length) * Math.min(length, step); p[1] += (push[i][1] / length) * Math.min(length, step); }
    });
    step *= 0.985;
  }
  const xs = pos.map((p) => p[0]), ys = pos.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const sx = (WIDTH - 2 * MARGIN - LABEL_ROOM) / (x1 - x0 || 1), sy = (HEIGHT - 2 * MARGIN) / (y1 - y0 || 1);
  return pos.map(([x, y]) => [MARGIN + (x - x0) * sx, MARGIN + (y - y0) * sy]);
}

function svgElement(svg, tag, attributes) {
  const made = document.createElementNS(svg.namespaceURI, tag);
  for (const [name, value] of Object.entries(attributes)) made.setAttribute(name, value);
  return made;
}

function drawGraph(trace) {
  const svg = $("graph");
  svg.replaceChildren();
  const nodes = trace.candidates, where = new Map(nodes.map((id, i) => [id, i]));
  const kept = trace.kept_edges.map(([u, v]) => [where.get(u), where.get(v)]);
  const pruned = trace.pruned_edges.map(([u, v]) => [where.get(u), where.get(v)]);
  const xy = layout(nodes.length, kept.concat(pruned));
  const seeds = new Set(trace.seeds), entitySeeds = new Set(trace.entity_seeds), top = new Set(trace.top.map((t) => t.id));
  const most = Math.max(...Object.values(trace.ppr), 1e-12);
  const edges = svgElement(svg, "g", {class: "edges"});
  for (const [list, kind] of [[kept, "kept"], [pruned, "pruned"]]) {
    for (const [a, b] of list) {
      edges.append(svgElement(svg, "line", {class: `edge ${kind}`, x1: xy[a][0], y1: xy[a][1], x2: xy[b][0], y2: xy[b][1]}));
    }
  }
  const drawn = svgElement(svg, "g", {class: "nodes"});
  nodes.forEach((id, i) => {
    const r = 3 + 13 * Math.sqrt((trace.ppr[id] || 0) / most), [x, y] = xy[i];
    const entity = id.startsWith("entity:");
    const roles = [seeds.has(id) && "seed", entitySeeds.has(id) && "entity-seed", top.has(id) && "top", entity && "entity"].filter(Boolean);
    const group = svgElement(svg, "g", {class: ["node", ...roles].join(" "), "data-id": id});
    group.append(entity ? svgElement(svg, "rect", {x: x - r, y: y - r, width: 2 * r, height: 2 * r})
      : svgElement(svg, "circle", {cx: x, cy: y, r}));
    const title = trace.titles[id] || id;
    const tip = svgElement(svg, "title", {});
    tip.textContent = `${title} (${id})\nPPR mass ${(trace.ppr[id] || 0).toExponential(2)}${roles.length ? `\n${roles.join(", ")}` : ""}`;
    group.append(tip);
    if (top.has(id) || seeds.has(id) || entitySeeds.has(id)) {
      const label = svgElement(svg, "text", {x: x + r + 3, y: y + 4});
      label.textContent = title.length > 24 ? `${title.slice(0, 23)}…` : title;
      group.append(label);
    }
    group.addEventListener("click", () => {
      const n = [...passageIds].find(([, pid]) => pid === id);
      if (n) focusPassage(n[0]);
    });
    drawn.append(group);
  });
  svg.append(edges, drawn);
  showLegend(trace, kept.length, pruned.length);
}

function outsideGraph(trace) {  // a hybrid with BM25 may retrieve passages the walk's local graph does not hold
  const drawn = new Set(trace.candidates), outside = trace.top.filter((t) => !drawn.has(t.id)).length;
  return outside ? `, ${outside} of them found by BM25 outside this graph` : "";
}

function showLegend(trace, kept, pruned) {
  const entries = [["kept", `kept edge (${kept})`], ["pruned", `pruned by the isoperimetric filter (${pruned})`],
    ["seed", `dense seed (${trace.seeds.length})`], ["entity-seed", `query-matched entity seed (${trace.entity_seeds.length})`],
    ["entity", `entity node (${trace.candidates.filter((id) => id.startsWith("entity:")).length})`],
    ["top", `retrieved: the top ${trace.top.length}${outsideGraph(trace)}`], ["size", "node size: PPR mass"]];
  $("legend").replaceChildren(...entries.map(([kind, text]) => {
    const item = element("li");
    item.append(element("span", `swatch ${kind}`), text);
    return item;
  }));
  const total = kept + pruned;
  $("graph-note").textContent = `${trace.candidates.length} candidates; the filter pruned ${pruned} of ${total} edges` +
    (total ? ` (${Math.round((100 * pruned) / total)}%).` : ".");
}

async function explain(question, k) {
  try {
    drawGraph(await (await request("explain", {question, k})).json());
  } catch (err) {
    $("graph-note").textContent = `No graph: ${err.message}`;
  }
}

// --- the page -------------------------------------------------------------------------------

function reset() {
  passageIds = new Map();
  for (const id of ["answer", "citations", "passages", "graph", "legend"]) $(id).replaceChildren();
  for (const id of ["answer-note", "timings", "graph-note", "status"]) $(id).textContent = "";
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim(), k = Number($("k").value), retriever = $("retriever").value;
  if (!question) return;
  reset();
  document.body.dataset.state = "busy";
  $("submit").disabled = true;
  $("status").textContent = "Retrieving and reading…";
  try {
    await Promise.all([streamAnswer(question, k, retriever), explain(question, k)]);
    $("status").textContent = "";
  } catch (err) {
    $("status").textContent = err.message;
  } finally {
    $("submit").disabled = false;
    document.body.dataset.state = "done";
  }
}

async function loadInfo() {
  try {
    const info = await (await request("info")).json();
    $("index-info").textContent = `${info.passages} passages · version ${info.version}`;
    $("retriever").replaceChildren(...info.retrievers.map((name) => element("option", "", name)));
    $("retriever").value = info.retrievers.includes("iso") ? "iso" : info.retrievers[0];
    $("k").max = info.settings.max_k;
    $("key-box").hidden = true;
  } catch (err) {
    $("status").textContent = err.message;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("ask").addEventListener("submit", ask);
  $("question").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("ask").requestSubmit(); }
  });
  document.body.addEventListener("click", (event) => {
    const link = event.target.closest("a.cite");
    if (link) { event.preventDefault(); focusPassage(Number(link.dataset.n)); }
  });
  $("save-key").addEventListener("click", () => {
    sessionStorage.setItem(KEY_STORE, $("api-key").value.trim());
    $("api-key").value = "";
    loadInfo();
  });
  loadInfo();
});
