// Kairox web app. Every string from the server (answers, memory bodies, summaries,
// tool results) goes into the page as text (textContent, input .value), never as HTML.
"use strict";

const $ = (sel) => document.querySelector(sel);
// This tab's session survives a reload (sessionStorage); a new tab starts from the
// browser's last one (localStorage); a first visit starts a session of its own rather
// than opening the newest session of some other client.
let sessionId = sessionStorage.getItem("kairox.session") || localStorage.getItem("kairox.session") || "";

function rememberSession() {
  sessionStorage.setItem("kairox.session", sessionId);
  localStorage.setItem("kairox.session", sessionId);
}

// Each turn's trace, kept in this browser by turn id so a reload shows it again (the
// server does not store traces); the oldest go beyond TRACES_KEPT.
const TRACES_KEPT = 200;

function keepTrace(turnId, trace) {
  if (!turnId || !trace) return;
  try {
    const ids = JSON.parse(localStorage.getItem("kairox.traces") || "[]").filter((t) => t !== turnId);
    ids.push(turnId);
    while (ids.length > TRACES_KEPT) localStorage.removeItem(`kairox.trace.${ids.shift()}`);
    localStorage.setItem(`kairox.trace.${turnId}`, JSON.stringify(trace));
    localStorage.setItem("kairox.traces", JSON.stringify(ids));
  } catch (e) { /* storage full or disabled: the trace shows until the next reload */ }
}

function keptTrace(turnId) {
  try { return JSON.parse(localStorage.getItem(`kairox.trace.${turnId}`) || "null"); } catch (e) { return null; }
}

// el("div", {class: "x", onclick: f}, "text", child): strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else if (v !== false && v !== null && v !== undefined) node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function status(text, isError) {
  const s = $("#status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function api(method, path, body) {
  const opts = { method, headers: { "X-Kairox-CSRF": "1" }, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(path, opts);
  if (!r.ok) {
    let detail = r.statusText;
    try { detail = (await r.json()).detail; } catch (e) { /* not JSON */ }
    if (typeof detail !== "string") detail = JSON.stringify(detail);
    status(detail, true);
    throw new Error(detail);
  }
  return r.json();
}

// --- sessions --------------------------------------------------------------------------

async function loadSessions() {
  const sessions = (await api("GET", "/api/sessions")).filter((s) => !s.session_id.startsWith("_"));
  if (!sessionId || !sessions.some((s) => s.session_id === sessionId)) {
    const started = await api("POST", "/api/sessions", {});
    sessionId = started.session_id;
    sessions.unshift({ session_id: sessionId, workspace_id: started.workspace });
  }
  const select = $("#session-select");
  select.replaceChildren(...sessions.map((s) =>
    el("option", { value: s.session_id, selected: s.session_id === sessionId, "data-workspace": s.workspace_id || "default" }, s.session_id)));
  rememberSession();
}

async function newSession() {
  sessionId = (await api("POST", "/api/sessions", {})).session_id;
  rememberSession();
  await loadSessions();
  await refresh();
}

// --- chat ------------------------------------------------------------------------------

function bubble(role, text) {
  const body = el("div", { class: "text" }, text);
  const node = el("div", { class: `msg ${role}` }, el("div", { class: "role" }, role), body);
  if (role === "user" || role === "assistant") node.append(rememberButton(node, body));
  $("#messages").append(node);
  return { node, body };
}

function traceView(trace) {
  const rows = Object.entries(trace.layers).map(([name, layer]) =>
    el("li", {}, `${name}: ${layer.tokens} tokens, ${layer.included.length} in`
      + (layer.dropped.length ? `, ${layer.dropped.length} dropped` : ""),
    layer.included.length ? el("ul", {}, ...layer.included.map((i) => el("li", {}, `${i.label} (${i.tokens})`))) : null,
    layer.dropped.length ? el("ul", { class: "dropped" }, ...layer.dropped.map((i) => el("li", {}, `✗ ${i.label}: ${i.reason}`))) : null));
  return el("details", { class: "trace" },
    el("summary", {}, `trace: ${trace.total} of ${trace.budget} tokens`), el("ul", {}, ...rows));
}

function proposalCard(p) {
  const body = el("textarea", { class: "card-body", rows: 2, readonly: true });
  body.value = p.body;
  const result = el("span", { class: "note verdict" });
  const buttons = el("div", { class: "buttons" });
  // Edit also opens the scope and key: a personal fact filed under workspace is fixed here
  const scope = el("select", { class: "card-scope", "aria-label": "scope" },
    ...["user", "workspace", "session"].map((s) => el("option", { value: s, selected: s === p.scope }, s)));
  const key = el("input", { class: "card-key", "aria-label": "key", placeholder: "key" });
  key.value = p.key || "";
  const fields = el("div", { class: "card-fields", hidden: true }, "scope ", scope, " key ", key);
  const decide = async (action) => {
    try {
      if (action === "reject") {
        await api("POST", `/api/approvals/${encodeURIComponent(p.id)}/reject`, {});
        settleCard(card, "rejected");
      } else {
        const edited = body.value !== p.body ? body.value : null;
        const decision = { body: edited };
        if (scope.value !== p.scope) decision.scope = scope.value;
        if (key.value.trim() !== (p.key || "")) decision.key = key.value.trim();
        settleCard(card, "accepted", await api("POST", `/api/approvals/${encodeURIComponent(p.id)}/accept`, decision));
      }
    } catch (e) { /* shown in the status line */ }
  };
  buttons.append(
    el("button", { type: "button", class: "approve", onclick: () => decide("accept") }, "Approve"),
    el("button", { type: "button", class: "reject", onclick: () => decide("reject") }, "Reject"),
    el("button", { type: "button", class: "edit", onclick: () => { body.readOnly = false; fields.hidden = false; body.focus(); } }, "Edit"));
  const title = el("div", { class: "card-title" }, `Remember this? ${p.scope}${p.key ? ":" + p.key : ""}`
      + (p.tainted ? " (echoes a tool result or retrieved text)" : ""));
  const card = el("div", { class: "card", "data-proposal": p.id }, title, scopeChecked(p), fields, body, buttons, result);
  return card;
}

// The scope check moved this proposal: say what the model wrote (Edit changes it again)
function scopeChecked(p) {
  if (!p.model_scope || p.model_scope === p.scope) return null;
  return el("div", { class: "note scope-check" }, `the model wrote ${p.model_scope}; the scope check chose ${p.scope}`);
}

// A decided card reads the same live and after a reload: accepted, "Remembered:" with the
// scope and key it was stored under (an edit may change both) and "Saved to memory.";
// rejected, its own title and "Rejected.". The buttons go, the fields lock and close.
function settleCard(card, status, stored) {
  if (status === "accepted") {
    card.querySelector(".card-title").textContent =
      `Remembered: ${stored.scope}${stored.key ? ":" + stored.key : ""}`;
  }
  card.querySelector(".verdict").textContent =
    status === "accepted" ? "Saved to memory." : status === "rejected" ? "Rejected." : status;
  card.classList.add("decided");
  card.querySelector(".buttons")?.remove();
  card.querySelector(".card-body").readOnly = true;
  card.querySelector(".card-scope").disabled = true;
  card.querySelector(".card-key").readOnly = true;
  card.querySelector(".card-fields").hidden = true;
}

// A card already decided (shown on reload): the live card, settled as it was then
// (`accepted`: the scope and key the memory was stored under, from its MemoryAccepted).
function decidedCard(p) {
  const card = proposalCard({ ...p, body: p.final_body || p.body });
  settleCard(card, p.status, p.accepted || p);
  return card;
}

// proposals grouped by the turn that raised them
function byTurnOf(proposals) {
  const groups = new Map();
  for (const p of proposals) groups.set(p.turn_id, [...(groups.get(p.turn_id) || []), p]);
  return groups;
}

// the line under a reply whose session memory was kept at once, live and after a reload
function notedNote(key, body) {
  return el("div", { class: "note" }, `noted for this session: ${key || ""} ${body}`);
}

// Bumped by every send(): a chat reload that was in flight when a turn began would
// otherwise replace the turn's streaming bubbles with the older stored messages.
let turnsStarted = 0;

async function loadChat() {
  const started = turnsStarted;
  const sid = encodeURIComponent(sessionId);
  const [events, pending, proposed, summaries] = await Promise.all([
    api("GET", `/api/sessions/${sid}/messages`),
    api("GET", "/api/approvals"),
    api("GET", `/api/sessions/${sid}/proposals`),
    api("GET", `/api/sessions/${sid}/summaries`),
  ]);
  if (turnsStarted !== started) return;  // the turn's stream draws the chat now
  $("#messages").replaceChildren();
  // each reply as it was: its trace (kept in this browser) and its cards, decided or not
  // (a session memory has a card only when it waited: a tainted one)
  const byTurn = byTurnOf(proposed.filter((p) => (p.scope !== "session" || p.tainted) && p.status !== "superseded"));
  // a session memory noted at once: said under its reply, as when it was noted
  const notedBy = byTurnOf(proposed.filter((p) => p.scope === "session" && !p.tainted && p.status === "accepted"));
  const shown = new Set();
  const drawn = new Set();
  for (const e of events) {
    const covering = summaries.find((s) => s.first_seq <= e.seq && e.seq <= s.last_seq);
    if (covering) {  // a compacted range: one [Summary] card in place of its messages
      if (!drawn.has(covering.seq)) { drawn.add(covering.seq); $("#messages").append(streamSummaryCard(covering)); }
      continue;
    }
    if (e.type === "UserMessageAdded") attachmentLinks(bubble("user", e.payload.text), e);
    else if (e.type === "AssistantMessageCompleted") {
      const answer = bubble("assistant", e.payload.text);
      answer.node.dataset.seq = e.seq;
      const trace = keptTrace(e.payload.turn_id);
      if (trace) answer.node.append(traceView(trace));
      // "Nothing was saved": the warning given with the reply, recorded with it
      if (e.unsaved) answer.node.append(el("div", { class: "error unsaved" }, e.unsaved));
      for (const p of notedBy.get(e.payload.turn_id) || []) {
        answer.node.append(notedNote(p.key, p.final_body || p.body));
      }
      for (const p of byTurn.get(e.payload.turn_id) || []) {
        $("#messages").append(p.status === "pending" ? proposalCard(p) : decidedCard(p));
        shown.add(p.id);
      }
    }
    else if (e.type === "ToolInvocationCompleted") bubble("tool", `${e.payload.tool_name}: ${e.payload.result}`);
    // a turn whose process died mid-reply: said under its last message
    if (e.interrupted) $("#messages").append(el("div", { class: "note interrupted" }, e.interrupted));
  }
  for (const p of pending.filter((p) => p.session_id === sessionId && !shown.has(p.id))) $("#messages").append(proposalCard(p));
  $("#messages").scrollTop = $("#messages").scrollHeight;
}

// "Remember this": on every message, and on a text selection inside one. The form keeps
// the text (editable) as a long-term chunk, scope session unless another is chosen; the
// message's seq goes along when the page knows it (the server finds it otherwise).
function rememberButton(node, body) {
  return el("button", { type: "button", class: "remember", title: "Keep this message in long-term memory",
    onclick: () => rememberForm(node, body.textContent) }, "Remember this");
}

function rememberForm(node, text) {
  node.querySelector(".remember-form")?.remove();
  const editor = el("textarea", { class: "remember-text", rows: 2 });
  editor.value = text.trim();
  const scope = el("select", { class: "remember-scope" },
    ...["session", "project", "global"].map((s) => el("option", { value: s }, s)));
  const form = el("form", { class: "remember-form" }, editor, scope,
    el("button", { type: "submit" }, "Keep"),
    el("button", { type: "button", onclick: () => form.remove() }, "Cancel"));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const spec = { text: editor.value.trim(), scope: scope.value };
    if (!spec.text) return;
    if (node.dataset.seq) spec.source_seq = Number(node.dataset.seq);
    try {
      const chunk = await api("POST", `/api/sessions/${encodeURIComponent(sessionId)}/remember`, spec);
      form.replaceWith(el("div", { class: "note remembered" }, `kept in long-term memory [${chunk.scope}]: ${chunk.text}`));
    } catch (err) { /* shown in the status line */ }
  });
  node.append(form);
  editor.focus();
}

function selectionButton() {
  const button = el("button", { type: "button", id: "remember-selection", hidden: true }, "Remember this");
  let picked = null;
  button.addEventListener("mousedown", (e) => e.preventDefault());  // keep the selection
  button.addEventListener("click", () => { button.hidden = true; if (picked) rememberForm(picked.node, picked.text); });
  document.addEventListener("selectionchange", () => {
    const sel = window.getSelection();
    const text = sel && !sel.isCollapsed ? sel.toString().trim() : "";
    const start = text && sel.anchorNode ? (sel.anchorNode.nodeType === 1 ? sel.anchorNode : sel.anchorNode.parentElement) : null;
    const node = start?.closest("#messages .msg");
    if (!node || !node.contains(sel.focusNode) || start.closest(".remember-form")) { button.hidden = true; picked = null; return; }
    picked = { node, text };
    const rect = sel.getRangeAt(0).getBoundingClientRect();
    button.style.top = `${window.scrollY + rect.bottom + 4}px`;
    button.style.left = `${window.scrollX + rect.left}px`;
    button.hidden = false;
  });
  document.body.append(button);
}

// A prompt's attachments, each a link to the original as it was sent.
function attachmentLinks(b, e) {
  b.node.dataset.seq = e.seq;
  const atts = e.payload.attachments || [];
  if (!atts.length) return;
  const sid = encodeURIComponent(sessionId);
  b.node.append(el("div", { class: "note attached" }, "attached: ", ...atts.flatMap((a, i) => [i ? ", " : "",
    el("a", { href: `/api/sessions/${sid}/messages/${e.seq}/attachments/${i}`, download: a.filename || "attachment" },
      a.filename || "attachment")])));
}

// A compacted range in the chat: collapsed to one line; opened, the Memory view's card
// (the summary's numbered lines with Drop / Pin / Pin to long-term, Edit, the originals).
const openSummaries = new Set();

function streamSummaryCard(s) {
  const n = s.originals.length;
  const when = s.created_at ? new Date(s.created_at * 1000).toLocaleString() : "";
  const card = el("details", { class: "stream-summary", "data-seq": s.seq, open: openSummaries.has(s.seq) },
    el("summary", {}, `[Summary] seqs ${s.first_seq}-${s.last_seq} · ${n} message${n === 1 ? "" : "s"} · compacted ${when}`),
    summaryCard(s));
  card.addEventListener("toggle", () => { if (card.open) openSummaries.add(s.seq); else openSummaries.delete(s.seq); });
  return card;
}

// Server-sent events from a POST: parsed from the response stream by hand (EventSource
// only does GET).
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) yield [name, JSON.parse(data)];
    }
  }
}

// The files chosen under the prompt, read as {filename, data (base64)} for the turn.
function readUploads() {
  return Promise.all([...$("#attach").files].map((file) => new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve({ filename: file.name, data: String(reader.result).split(",", 2)[1] || "" });
    reader.onerror = () => reject(new Error(`cannot read ${file.name}`));
    reader.readAsDataURL(file);
  })));
}

async function send(prompt) {
  turnsStarted += 1;
  const attachments = await readUploads();
  $("#attach").value = ""; $("#attached").textContent = "";
  const asked = bubble("user", prompt);
  if (attachments.length) asked.node.append(el("div", { class: "note attached" }, `attached: ${attachments.map((a) => a.filename).join(", ")}`));
  const answer = bubble("assistant", "");
  answer.node.classList.add("streaming");
  // in the bubble until the first token: a local model may take a while to start
  const thinking = el("div", { class: "thinking" }, "thinking…");
  answer.node.append(thinking);
  let trace = null;
  $("#send").disabled = true;
  status("thinking…");
  let compacted = false;
  try {
    const r = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/turns`, {
      method: "POST", credentials: "same-origin",
      headers: { "X-Kairox-CSRF": "1", "Content-Type": "application/json" },
      body: JSON.stringify({ prompt, attachments }),
    });
    if (!r.ok) {
      let detail = r.statusText;
      try { detail = (await r.json()).detail; } catch (e) { /* not JSON */ }
      throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
    }
    for await (const [name, data] of sseEvents(r)) {
      if (name === "notice") answer.node.before(el("div", { class: "note tools-notice" }, data.message));
      else if (name === "delta") { thinking.remove(); answer.body.textContent += data.text; }
      else if (name === "trace") { trace = data; answer.node.append(traceView(data)); }
      else if (name === "proposal") $("#messages").append(proposalCard(data));
      else if (name === "accepted") answer.node.append(notedNote(data.payload.key, data.payload.body));
      else if (name === "compaction") {
        answer.node.append(el("div", { class: "note" }, `${data.type} ${data.payload.reason || ""}`));
        if (data.type === "ContextCompactionCompleted") compacted = true;
      }
      else if (name === "error") answer.node.append(el("div", { class: "error" }, data.message));
      else if (name === "done") {
        keepTrace(data.turn_id, trace);
        if (data.acknowledgement && !answer.body.textContent) answer.body.textContent = data.acknowledgement;
        if (data.unsaved) answer.node.append(el("div", { class: "error unsaved" }, data.unsaved));
        for (const line of data.notes || []) answer.node.append(el("div", { class: "note" }, line));
        answer.node.classList.add("done");
      }
    }
    status("");
    if (compacted) await loadChat();  // the compacted range becomes a [Summary] card
  } catch (e) {
    answer.node.append(el("div", { class: "error" }, String(e.message || e)));
    status(String(e.message || e), true);
  } finally {
    thinking.remove();
    answer.node.classList.remove("streaming");
    $("#send").disabled = false;
    $("#messages").scrollTop = $("#messages").scrollHeight;
  }
}

// --- memory view: layers, summaries, compaction ----------------------------------------

async function loadMemoryView() {
  const sid = encodeURIComponent(sessionId);
  const [context, summaries] = await Promise.all([
    api("GET", `/api/sessions/${sid}/context`),
    api("GET", `/api/sessions/${sid}/summaries`),
  ]);
  const t = context.trace;
  $("#budget").textContent = `${t.total} of ${t.budget} tokens (window ${t.context_window}, reserve ${t.reserve})`;
  $("#layers").replaceChildren(...context.messages.map((m, i) =>
    el("div", { class: "layer" }, el("div", { class: "role" }, `${i + 1}. ${m.role}`),
      el("pre", {}, typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 1)))));
  $("#layers").append(traceView(t));
  $("#pins").replaceChildren(...context.pinned.map((p) => el("li", {}, p.text, " ",
    el("button", { type: "button", onclick: async () => { await api("DELETE", `/api/sessions/${sid}/pins/${encodeURIComponent(p.fact_id)}`); loadMemoryView(); } }, "Unpin"))));
  $("#summaries").replaceChildren(...summaries.map(summaryCard));
  if (!summaries.length) $("#summaries").append(el("p", { class: "note" }, "No summary yet: Compact now writes one."));
}

function summaryCard(s) {
  const sid = encodeURIComponent(sessionId);
  const editor = el("textarea", { class: "summary-editor", rows: 6, hidden: true });
  editor.value = s.text;
  // numbered as `kairox summary show` prints them: a number names its line after a drop
  const lines = el("ol", { class: "chunks" }, ...s.lines.map((c) => el("li", { value: c.index, "data-line": c.index }, c.text, " ",
    el("button", { type: "button", class: "drop", title: "Drop this line from what later turns see", onclick: async () => {
      await api("POST", `/api/sessions/${sid}/summaries/${s.seq}/drop`, { chunk: c.index }); refresh();
    } }, "Drop"),
    el("button", { type: "button", class: "pin", title: "Pin this line: verbatim in every turn", onclick: async () => {
      await api("POST", `/api/sessions/${sid}/summaries/${s.seq}/pin`, { line: c.index }); status(`pinned: ${c.text}`); refresh();
    } }, "Pin"),
    el("button", { type: "button", class: "keep", title: "Keep this line in long-term memory (this session)", onclick: async () => {
      await api("POST", `/api/sessions/${sid}/summaries/${s.seq}/longterm`, { line: c.index }); status(`kept in long-term memory: ${c.text}`);
    } }, "Pin to long-term"))));
  const originals = el("details", { class: "originals" },
    el("summary", {}, `[Summary] of seqs ${s.first_seq}-${s.last_seq}: ${s.originals.length} original messages`),
    ...s.originals.map((e) => el("div", { class: "msg original" },
      el("div", { class: "role" }, `#${e.seq} ${e.type === "UserMessageAdded" ? "user" : e.type === "AssistantMessageCompleted" ? "assistant" : "tool"}`),
      el("div", { class: "text" }, e.payload.text ?? e.payload.result ?? ""))));
  const save = el("button", { type: "button", hidden: true, onclick: async () => {
    await api("PUT", `/api/sessions/${sid}/summaries/${s.seq}`, { text: editor.value }); refresh();
  } }, "Save summary");
  return el("div", { class: "card summary", "data-seq": s.seq },
    el("div", { class: "card-title" }, `[Summary] seqs ${s.first_seq}-${s.last_seq} (${s.strategy})`),
    lines, editor,
    el("div", { class: "buttons" },
      el("button", { type: "button", onclick: () => { editor.hidden = false; save.hidden = false; } }, "Edit"), save),
    originals);
}

async function compact(first, last) {
  const r = await api("POST", `/api/sessions/${encodeURIComponent(sessionId)}/compact`,
    { first_seq: first || null, last_seq: last || null });
  $("#compact-result").textContent = `${r.status}${r.reason ? ": " + r.reason : ""}`;
  loadMemoryView();
}

// --- memories browser ------------------------------------------------------------------

async function loadMemories() {
  const q = $("#memory-search").value, scope = $("#memory-scope").value;
  const params = new URLSearchParams();
  if (q) params.set("q", q);
  if (scope) params.set("scope", scope);
  const [records, pending] = await Promise.all([api("GET", `/api/memories?${params}`), api("GET", "/api/approvals")]);
  $("#pending").replaceChildren(...pending.map(proposalCard));
  if (!pending.length) $("#pending").append(el("p", { class: "note" }, "Nothing waiting."));
  $("#memory-table tbody").replaceChildren(...records.map(memoryRow));
}

function memoryRow(m) {
  const body = el("td", { class: "body" }, m.body);
  const actions = el("td", { class: "buttons" });
  const history = el("td", { colspan: 4, class: "history" });
  const historyRow = el("tr", { hidden: true }, history);
  actions.append(
    el("button", { type: "button", class: "edit", onclick: () => {
      const editor = el("textarea", { rows: 2, class: "memory-editor" });
      editor.value = m.body;
      const save = el("button", { type: "button", class: "save", onclick: async () => {
        await api("PUT", `/api/memories/${encodeURIComponent(m.id)}`, { body: editor.value }); loadMemories();
      } }, "Save");
      body.replaceChildren(editor, save);
    } }, "Edit"),
    el("button", { type: "button", class: "delete", onclick: async () => {
      await api("DELETE", `/api/memories/${encodeURIComponent(m.id)}`); loadMemories();
    } }, "Delete"),
    el("button", { type: "button", onclick: async () => {
      const versions = await api("GET", `/api/memories/${encodeURIComponent(m.id)}/history`);
      history.replaceChildren(el("ol", {}, ...versions.map((v) => el("li", {}, `${v.body} (${v.ended || "current"})`))));
      historyRow.hidden = !historyRow.hidden;
    } }, "History"));
  const frag = document.createDocumentFragment();
  frag.append(el("tr", { "data-memory": m.id }, el("td", {}, m.scope), el("td", {}, m.key || "-"), body, actions), historyRow);
  return frag;
}

// --- long-term and packs ---------------------------------------------------------------

async function loadLongterm() {
  const chunks = await api("GET", "/api/longterm");
  $("#chunk-table tbody").replaceChildren(...chunks.map((c) => {
    const text = el("td", {}, c.text);
    return el("tr", {},
      el("td", {}, el("input", { type: "checkbox", class: "pick", value: c.id })),
      el("td", {}, c.scope), text,
      el("td", { class: "buttons" },
        el("button", { type: "button", onclick: () => {
          const editor = el("input", { class: "chunk-editor" });
          editor.value = c.text;
          text.replaceChildren(editor, el("button", { type: "button", onclick: async () => {
            await api("PUT", `/api/longterm/${encodeURIComponent(c.id)}`, { text: editor.value }); loadLongterm();
          } }, "Save"));
        } }, "Edit"),
        el("button", { type: "button", onclick: async () => { await api("DELETE", `/api/longterm/${encodeURIComponent(c.id)}`); loadLongterm(); } }, "Delete")));
  }));
}

async function loadPacks() {
  const packs = await api("GET", "/api/packs");
  $("#packs").replaceChildren(...packs.map((p) => {
    const editor = el("textarea", { rows: 3 });
    editor.value = p.text;
    const n = encodeURIComponent(p.name);
    return el("div", { class: "card pack" },
      el("div", { class: "card-title" }, `${p.name} (${p.level}${p.draft ? ", draft" : ""})`), editor,
      el("div", { class: "buttons" },
        el("button", { type: "button", onclick: async () => { await api("PUT", `/api/packs/${n}`, { text: editor.value }); loadPacks(); } }, "Save"),
        el("button", { type: "button", onclick: async () => { await api("POST", `/api/packs/${n}/activate`, { active: true }); status(`activated ${p.name}`); } }, "Activate"),
        el("button", { type: "button", onclick: async () => { await api("POST", `/api/packs/${n}/publish`, { level: "team" }); loadPacks(); } }, "Publish to team"),
        el("button", { type: "button", onclick: async () => { await api("DELETE", `/api/packs/${n}`); loadPacks(); } }, "Delete")));
  }));
  if (!packs.length) $("#packs").append(el("p", { class: "note" }, "No packs yet."));
  const problems = await api("GET", "/api/packs/problems");
  $("#packs").append(...problems.map((p) => el("p", { class: "note pack-problem" }, `skipped ${p.path}: ${p.problem}`)));
}

async function loadUsage() {
  const rows = await api("GET", "/api/usage");
  $("#usage-table tbody").replaceChildren(...rows.filter((u) => !u.session_id.startsWith("_")).map((u) =>
    el("tr", { class: u.session_id === sessionId ? "current" : "" },
      ...[u.session_id, u.turns, u.chat_prompt_tokens, u.chat_completion_tokens, u.compactions,
        u.compaction_prompt_tokens, u.compaction_completion_tokens, u.total_tokens].map((v) => el("td", {}, v)))));
}

// --- wiring ----------------------------------------------------------------------------

const loaders = { chat: loadChat, memory: loadMemoryView, memories: loadMemories, longterm: loadLongterm, packs: loadPacks, usage: loadUsage };
let currentTab = "chat";

async function refresh() {
  try { await loaders[currentTab](); } catch (e) { /* shown in the status line */ }
}

function showTab(name) {
  currentTab = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll(".tab")) s.hidden = s.id !== `tab-${name}`;
  return refresh();
}

document.addEventListener("DOMContentLoaded", async () => {
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  $("#new-session").addEventListener("click", newSession);
  $("#session-select").addEventListener("change", (e) => {
    sessionId = e.target.value; rememberSession(); refresh();
  });
  $("#prompt-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("#prompt").value.trim();
    if (!text || $("#send").disabled) return;
    $("#prompt").value = "";
    send(text);
  });
  $("#prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("#prompt-form").requestSubmit(); }
  });
  $("#compact-now").addEventListener("click", () => compact());
  $("#compact-range").addEventListener("click", () => compact(Number($("#range-first").value), Number($("#range-last").value)));
  $("#memory-refresh").addEventListener("click", loadMemoryView);
  $("#pin-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("#pin-text").value.trim();
    if (!text) return;
    await api("POST", `/api/sessions/${encodeURIComponent(sessionId)}/pins`, { text });
    $("#pin-text").value = "";
    loadMemoryView();
  });
  $("#memory-search").addEventListener("input", loadMemories);
  $("#memory-scope").addEventListener("change", loadMemories);
  $("#memories-refresh").addEventListener("click", loadMemories);
  $("#chunk-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $("#chunk-text").value.trim(), scope = $("#chunk-scope").value;
    if (!text) return;
    const spec = { text, scope };
    if (scope === "session") spec.session_id = sessionId;
    if (scope === "project") spec.workspace = ($("#session-select").selectedOptions[0] || {}).dataset?.workspace || "default";
    await api("POST", "/api/longterm", spec);
    $("#chunk-text").value = "";
    loadLongterm();
  });
  $("#promote").addEventListener("click", async () => {
    const ids = [...document.querySelectorAll("#chunk-table .pick:checked")].map((c) => c.value);
    if (!ids.length) { status("select chunks first", true); return; }
    const pack = await api("POST", "/api/packs/promote", { chunk_ids: ids });
    status(`promoted into draft pack ${pack.name}`);
  });
  $("#pack-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const name = $("#pack-name").value.trim();
    if (!name) return;
    await api("POST", "/api/packs", { name, text: $("#pack-text").value });
    $("#pack-name").value = ""; $("#pack-text").value = "";
    loadPacks();
  });
  selectionButton();
  $("#attach").addEventListener("change", () => {
    $("#attached").textContent = [...$("#attach").files].map((f) => f.name).join(", ");
  });
  try { await loadSessions(); } catch (e) { return; }
  await showTab("chat");
  $("#send").disabled = false;  // a session exists and its chat is shown: a prompt may go
});
