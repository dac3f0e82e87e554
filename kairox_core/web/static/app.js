// Kairox web app. Every string from the server (answers, memory bodies, summaries,
// tool results) goes into the page as text (textContent, input .value), never as HTML.
"use strict";

const $ = (sel) => document.querySelector(sel);
let sessionId = localStorage.getItem("kairox.session") || "";

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
    if (sessions.length) sessionId = sessions[0].session_id;
    else sessionId = (await api("POST", "/api/sessions", {})).session_id;
  }
  const select = $("#session-select");
  select.replaceChildren(...(sessions.length ? sessions : [{ session_id: sessionId }]).map((s) =>
    el("option", { value: s.session_id, selected: s.session_id === sessionId, "data-workspace": s.workspace_id || "default" }, s.session_id)));
  localStorage.setItem("kairox.session", sessionId);
}

async function newSession() {
  sessionId = (await api("POST", "/api/sessions", {})).session_id;
  localStorage.setItem("kairox.session", sessionId);
  await loadSessions();
  await refresh();
}

// --- chat ------------------------------------------------------------------------------

function bubble(role, text) {
  const body = el("div", { class: "text" }, text);
  const node = el("div", { class: `msg ${role}` }, el("div", { class: "role" }, role), body);
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
  const result = el("span", { class: "note" });
  const buttons = el("div", { class: "buttons" });
  const decide = async (action) => {
    try {
      if (action === "reject") await api("POST", `/api/approvals/${encodeURIComponent(p.id)}/reject`, {});
      else {
        const edited = body.value !== p.body ? body.value : null;
        await api("POST", `/api/approvals/${encodeURIComponent(p.id)}/accept`, { body: edited });
      }
      result.textContent = action === "reject" ? "Rejected." : "Saved to memory.";
      card.classList.add("decided");
      buttons.remove();
      body.readOnly = true;
    } catch (e) { /* shown in the status line */ }
  };
  buttons.append(
    el("button", { type: "button", class: "approve", onclick: () => decide("accept") }, "Approve"),
    el("button", { type: "button", class: "reject", onclick: () => decide("reject") }, "Reject"),
    el("button", { type: "button", class: "edit", onclick: () => { body.readOnly = false; body.focus(); } }, "Edit"));
  const card = el("div", { class: "card", "data-proposal": p.id },
    el("div", { class: "card-title" }, `Remember this? ${p.scope}${p.key ? ":" + p.key : ""}`
      + (p.tainted ? " (echoes a tool result or retrieved text)" : "")),
    body, buttons, result);
  return card;
}

// Bumped by every send(): a chat reload that was in flight when a turn began would
// otherwise replace the turn's streaming bubbles with the older stored messages.
let turnsStarted = 0;

async function loadChat() {
  const started = turnsStarted;
  const [events, pending] = await Promise.all([
    api("GET", `/api/sessions/${encodeURIComponent(sessionId)}/messages`),
    api("GET", "/api/approvals"),
  ]);
  if (turnsStarted !== started) return;  // the turn's stream draws the chat now
  $("#messages").replaceChildren();
  for (const e of events) {
    if (e.type === "UserMessageAdded") bubble("user", e.payload.text);
    else if (e.type === "AssistantMessageCompleted") bubble("assistant", e.payload.text);
    else if (e.type === "ToolInvocationCompleted") bubble("tool", `${e.payload.tool_name}: ${e.payload.result}`);
  }
  for (const p of pending.filter((p) => p.session_id === sessionId)) $("#messages").append(proposalCard(p));
  $("#messages").scrollTop = $("#messages").scrollHeight;
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

async function send(prompt) {
  turnsStarted += 1;
  bubble("user", prompt);
  const answer = bubble("assistant", "");
  answer.node.classList.add("streaming");
  $("#send").disabled = true;
  status("thinking…");
  try {
    const r = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/turns`, {
      method: "POST", credentials: "same-origin",
      headers: { "X-Kairox-CSRF": "1", "Content-Type": "application/json" },
      body: JSON.stringify({ prompt }),
    });
    if (!r.ok) {
      let detail = r.statusText;
      try { detail = (await r.json()).detail; } catch (e) { /* not JSON */ }
      throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
    }
    for await (const [name, data] of sseEvents(r)) {
      if (name === "delta") answer.body.textContent += data.text;
      else if (name === "trace") answer.node.append(traceView(data));
      else if (name === "proposal") $("#messages").append(proposalCard(data));
      else if (name === "accepted") answer.node.append(el("div", { class: "note" }, `noted for this session: ${data.payload.key || ""} ${data.payload.body}`));
      else if (name === "compaction") answer.node.append(el("div", { class: "note" }, `${data.type} ${data.payload.reason || ""}`));
      else if (name === "error") answer.node.append(el("div", { class: "error" }, data.message));
      else if (name === "done") {
        if (data.acknowledgement && !answer.body.textContent) answer.body.textContent = data.acknowledgement;
        answer.node.classList.add("done");
      }
    }
    status("");
  } catch (e) {
    answer.node.append(el("div", { class: "error" }, String(e.message || e)));
    status(String(e.message || e), true);
  } finally {
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
  const lines = el("ol", { class: "chunks", start: 0 }, ...s.chunks.map((c, i) => el("li", {}, c, " ",
    el("button", { type: "button", class: "drop", title: "Drop this chunk", onclick: async () => {
      await api("POST", `/api/sessions/${sid}/summaries/${s.seq}/drop`, { chunk: i }); loadMemoryView();
    } }, "Drop"))));
  const originals = el("details", { class: "originals" },
    el("summary", {}, `[Summary] of seqs ${s.first_seq}-${s.last_seq}: ${s.originals.length} original messages`),
    ...s.originals.map((e) => el("div", { class: "msg original" },
      el("div", { class: "role" }, `#${e.seq} ${e.type === "UserMessageAdded" ? "user" : e.type === "AssistantMessageCompleted" ? "assistant" : "tool"}`),
      el("div", { class: "text" }, e.payload.text ?? e.payload.result ?? ""))));
  const save = el("button", { type: "button", hidden: true, onclick: async () => {
    await api("PUT", `/api/sessions/${sid}/summaries/${s.seq}`, { text: editor.value }); loadMemoryView();
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
    sessionId = e.target.value; localStorage.setItem("kairox.session", sessionId); refresh();
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
  try { await loadSessions(); } catch (e) { return; }
  await showTab("chat");
  $("#send").disabled = false;  // a session exists and its chat is shown: a prompt may go
});
