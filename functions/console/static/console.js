// The threads console: sign in with an API key, list the tenant's threads, open one (timeline,
// branches, fork points), start a run and watch it live from the craze stream (streamed text,
// tool rows, todos), approve / deny / remember, answer questions, cancel.
//
// Plain modern JavaScript, no framework and no build. Every call is same-origin and relative to
// the page (`v1/...`), so the console works under a stage prefix. The key stays in this tab's
// sessionStorage and goes out only as the bearer token.
//
// Following a run: the host serves the stream in windows (buffered SSE on API Gateway REST), so
// the console reads a window with fetch, keeps the last SSE id, and reconnects with
// Last-Event-ID while the thread's status says the run is working (GET v1/threads/{id}); a park
// shows what it waits on, and a decision resumes following from where it was.
"use strict";

const KEY = "threads-console-key";
const main = document.getElementById("main");
const toast = document.getElementById("toast");
const signout = document.getElementById("signout");

// ------------------------------------------------------------------ small DOM helpers
function h(tag, attrs = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function say(text, bad = false) {
  toast.textContent = text;
  toast.className = bad ? "bad" : "";
  clearTimeout(say.t);
  say.t = setTimeout(() => { toast.textContent = ""; }, 6000);
}

function when(ms) {
  if (typeof ms !== "number") return "";
  const d = new Date(ms);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

const STATUS = { idle: "idle", in_turn: "working", parked: "waiting", cancelled: "cancelled",
  inspection_only: "inspection only", unreadable: "unreadable" };

function badge(status) {
  return h("span", { class: `badge s-${status}` }, STATUS[status] || status);
}

// ------------------------------------------------------------------ the API
class ApiError extends Error {
  constructor(code, message, status) { super(`${code}: ${message}`); this.code = code; this.status = status; }
}

function token() { return sessionStorage.getItem(KEY); }

async function api(method, path, { body, query, headers = {}, raw = false, signal } = {}) {
  const url = new URL(path, document.baseURI);
  for (const [k, v] of Object.entries(query || {})) if (v !== undefined && v !== null) url.searchParams.set(k, v);
  const init = { method, headers: { Authorization: `Bearer ${token()}`, ...headers }, signal };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const resp = await fetch(url, init);
  if (raw && resp.ok) return resp;
  const text = await resp.text();
  const data = text ? JSON.parse(text) : null;
  if (!resp.ok) {
    const err = (data && data.error) || { code: "unexpected", message: resp.statusText };
    if (resp.status === 401) { sessionStorage.removeItem(KEY); }
    throw new ApiError(err.code, err.message, resp.status);
  }
  return { data, resp };
}

const T = (id, rest = "") => `v1/threads/${encodeURIComponent(id)}${rest}`;

function nextLink(resp, base) {
  const link = resp.headers.get("Link") || "";
  const m = link.match(/<([^>]+)>;\s*rel="next"/);
  return m ? new URL(m[1], base).toString() : null;
}

// ------------------------------------------------------------------ routing
function go(hash) { if (location.hash === hash) render(); else location.hash = hash; }
window.addEventListener("hashchange", render);
signout.addEventListener("click", () => { sessionStorage.removeItem(KEY); stopFollowing(); go("#/"); });

function render() {
  stopFollowing();
  signout.hidden = !token();
  if (!token()) return renderSignIn();
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "t" && parts[1]) return renderThread(parts[1], parts[2] === "b" ? parts[3] : null, parts[4] === "r" ? parts[5] : null);
  return renderThreads();
}

function screen(title, ...kids) {
  main.replaceChildren(h("h1", { text: title }), ...kids);
  document.title = `${title} · threads console`;
  main.focus({ preventScroll: true });
}

function failed(err) {
  if (err instanceof ApiError && err.status === 401) { say("The key was refused: sign in again.", true); return render(); }
  say(err.message || String(err), true);
}

// ------------------------------------------------------------------ sign in
function renderSignIn() {
  const input = h("input", { id: "key", name: "key", type: "password", autocomplete: "off", required: true,
    placeholder: "dev:api:local:alice", "aria-describedby": "key-help" });
  const form = h("form", { class: "card", onsubmit: async (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    try {
      await api("GET", "v1/threads", { query: { limit: 1 } });
      go("#/");
    } catch (err) {
      sessionStorage.removeItem(KEY);
      say(`Sign-in failed: ${err.message}`, true);
    }
  } },
  h("label", { for: "key" }, "API key"), input,
  h("p", { id: "key-help", class: "help" }, "Kept in this tab only (session storage). With `threads-aws dev --dev-tokens`, any dev:api:<tenant>:<you> works."),
  h("button", { type: "submit" }, "Sign in"));
  screen("Sign in", form);
  input.focus();
}

// ------------------------------------------------------------------ threads
function startForm(threadId = null, branchId = null) {
  const agent = h("input", { id: "agent", name: "agent", value: "demo", required: true, autocomplete: "off" });
  const prompt = h("textarea", { id: "prompt", name: "prompt", rows: 3, required: true,
    placeholder: "note: buy milk" });
  return h("form", { class: "card start", onsubmit: async (e) => {
    e.preventDefault();
    const body = { agent: agent.value.trim(), input: prompt.value };
    if (threadId) body.thread_id = threadId;
    if (branchId) body.branch_id = branchId;
    try {
      const { data } = await api("POST", "v1/runs", { body, headers: { "Idempotency-Key": crypto.randomUUID() } });
      go(`#/t/${data.thread_id}/b/${data.branch_id}/r/${data.run_id}`);
    } catch (err) { failed(err); }
  } },
  h("h2", {}, threadId ? "Continue this thread" : "Start a run"),
  h("div", { class: "row" },
    h("div", { class: "field agent" }, h("label", { for: "agent" }, "Agent"), agent),
    h("div", { class: "field grow" }, h("label", { for: "prompt" }, "Prompt"), prompt)),
  h("button", { type: "submit" }, "Start"));
}

async function renderThreads() {
  const list = h("ul", { class: "threads", "aria-label": "Threads, newest first" });
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "Load more");
  screen("Threads", startForm(), h("h2", {}, "Your threads"), list, more);
  let url = new URL("v1/threads", document.baseURI).toString() + "?limit=25";
  async function load() {
    try {
      const { data, resp } = await api("GET", url);
      for (const t of data.threads) {
        list.append(h("li", {},
          h("a", { href: `#/t/${t.thread_id}`, class: "title" }, t.title || "(no prompt yet)"),
          h("span", { class: "meta" }, badge(t.status), " ", t.agent || "", " · ", when(t.last_activity_at)),
          h("code", { class: "id" }, t.thread_id)));
      }
      if (!list.children.length) list.append(h("li", { class: "empty" }, "No threads yet: start a run above."));
      url = nextLink(resp, url);
      more.hidden = !url;
    } catch (err) { failed(err); }
  }
  more.addEventListener("click", load);
  await load();
}

// ------------------------------------------------------------------ one thread
function summary(ev) {
  const d = ev.data || {};
  switch (ev.type) {
    case "user_input": return d.text ?? (d.content || []).map((p) => p.text || `[${p.type}]`).join(" ");
    case "model_response": return (d.content || []).map((p) => p.type === "text" ? p.text : p.type === "tool_use" ? `→ ${p.name}` : "").join(" ");
    case "tool_call": return `${d.name} ${JSON.stringify(d.input ?? {})}`;
    case "tool_result": return `${d.call_id}: ${d.is_error ? "error" : "ok"}`;
    case "permission_decision": return `${d.decision} ${d.call_id || ""}`;
    case "approval_granted": case "approval_denied": return d.challenge_id || "";
    case "parked": return `waiting on ${d.address?.kind} ${d.address?.id}`;
    case "turn_completed": return d.reason || "";
    case "thread_started": return d.agent_name || "";
    default: return "";
  }
}

async function renderThread(threadId, branchId, runId) {
  const detail = h("section", { class: "card detail", "aria-label": "Thread" });
  const live = h("section", { class: "card live", "aria-label": "Live run", hidden: !runId });
  const waiting = h("section", { class: "card waiting", "aria-label": "Waiting for you", hidden: true });
  const timeline = h("ol", { class: "timeline", "aria-label": "Timeline" });
  screen("Thread", detail, waiting, live, startForm(threadId, branchId), h("h2", {}, "Timeline"), timeline);
  let info;
  try {
    info = (await api("GET", T(threadId))).data;
  } catch (err) { return failed(err); }
  const branch = branchId || info.main_branch_id;
  document.querySelector("h1").textContent = info.title || "Thread";
  const cancel = h("button", { type: "button", class: "danger", onclick: async () => {
    try { await api("POST", T(threadId, "/cancel"), { query: { branch_id: branch } }); say("Cancel requested."); refresh(); }
    catch (err) { failed(err); }
  } }, "Cancel run");
  function drawDetail(d) {
    const b = d.branches.find((x) => x.branch_id === branch) || d.branches[0];
    cancel.hidden = !b || (b.status !== "in_turn" && b.status !== "parked");
    detail.replaceChildren(
      h("p", { class: "meta" }, badge(b ? b.status : d.status), " ", d.agent || "", " · started ", when(d.created_at),
        " · ", `${d.open_approvals} approvals, ${d.open_questions} questions open`),
      b && b.usage ? h("p", { class: "meta" }, `tokens: ${b.usage.input_tokens} in, ${b.usage.output_tokens} out`) : null,
      h("nav", { "aria-label": "Branches", class: "branches" }, h("span", {}, "Branches: "),
        d.branches.map((x) => h("a", { href: `#/t/${threadId}/b/${x.branch_id}`, "aria-current": x.branch_id === branch ? "page" : null },
          x.parent_branch_id ? `fork at ${x.fork_at_seq}` : "main", " ", badge(x.status)))),
      cancel);
    return b;
  }
  async function drawTimeline() {
    const { data } = await api("GET", T(threadId, "/timeline"), { query: { branch_id: branch } });
    timeline.replaceChildren(...data.entries.map(({ event: ev, fork_point: fp }) => h("li", {},
      h("span", { class: "seq" }, ev.seq), h("span", { class: "type" }, ev.type), h("span", { class: "what" }, summary(ev)),
      fp ? h("button", { type: "button", class: "secondary small", "aria-label": `Fork at ${ev.seq}`, onclick: () => fork(ev) }, "Fork here") : null)));
    return data.entries;
  }
  async function fork(ev) {
    try {
      const { data } = await api("POST", T(threadId, "/forks"), { query: { branch_id: branch }, body: { event_id: ev.event_id } });
      say(`Forked at ${ev.seq}.`);
      go(`#/t/${threadId}/b/${data.branch_id}`);
    } catch (err) { failed(err); }
  }
  async function drawWaiting(entries) {
    const items = [];
    const approvals = (await api("GET", T(threadId, "/approvals"), { query: { branch_id: branch } })).data;
    for (const a of approvals) items.push(approvalCard(threadId, branch, a, resume));
    for (const q of openQuestions(entries)) items.push(questionCard(threadId, branch, q, resume));
    waiting.hidden = !items.length;
    waiting.replaceChildren(h("h2", {}, "Waiting for you"), ...items);
    const first = waiting.querySelector("button, input");
    if (first) first.focus();
  }
  async function refresh() {
    try {
      const d = (await api("GET", T(threadId))).data;
      const b = drawDetail(d);
      const entries = await drawTimeline();
      await drawWaiting(entries);
      return b;
    } catch (err) { failed(err); return null; }
  }
  function resume() {
    if (runId) follow(threadId, branch, runId, live, refresh);
    else refresh();
  }
  drawDetail(info);
  const entries = await drawTimeline().catch((err) => { failed(err); return []; });
  await drawWaiting(entries).catch(failed);
  if (runId) follow(threadId, branch, runId, live, refresh);
}

function openQuestions(entries) {
  const calls = new Map();
  const open = new Map();
  for (const { event: ev } of entries) {
    if (ev.type === "tool_call") calls.set(ev.data.call_id, ev.data);
    if (ev.type === "parked" && ev.data.address?.kind === "input") open.set(ev.data.address.id, calls.get(ev.data.address.id));
    if (ev.type === "resumed" && ev.data.address?.kind === "input") open.delete(ev.data.address.id);
  }
  return [...open].map(([id, call]) => ({ call_id: id, ...((call && call.input) || {}) }));
}

function approvalCard(threadId, branch, a, done) {
  const id = `remember-${a.challenge_id}`;
  const remember = a.suggested_rules.length ? h("select", { id },
    h("option", { value: "" }, "just this once"), a.suggested_rules.map((r) => h("option", { value: r }, `always allow: ${r}`))) : null;
  async function decide(decision) {
    const body = { decision };
    if (decision === "grant" && remember && remember.value) body.remember_rule = remember.value;
    try {
      await api("POST", T(threadId, `/approvals/${encodeURIComponent(a.challenge_id)}`), { query: { branch_id: branch }, body });
      say(decision === "grant" ? "Approved." : "Denied.");
      done();
    } catch (err) { failed(err); }
  }
  return h("div", { class: "ask", role: "group", "aria-label": `Approval for ${a.tool}` },
    h("p", {}, h("strong", {}, a.tool), " wants to run with ", h("code", {}, JSON.stringify(a.input))),
    remember ? h("label", { for: id }, "Remember") : null, remember,
    h("div", { class: "buttons" },
      h("button", { type: "button", onclick: () => decide("grant") }, "Approve"),
      h("button", { type: "button", class: "danger", onclick: () => decide("deny") }, "Deny")));
}

function questionCard(threadId, branch, q, done) {
  const name = `q-${q.call_id}`;
  const options = Array.isArray(q.options) ? q.options : [];
  const multi = !!q.multi_select;
  const text = options.length ? null : h("input", { id: name, name, required: true, autocomplete: "off" });
  const choices = options.map((o, i) => h("label", { class: "choice" },
    h("input", { type: multi ? "checkbox" : "radio", name, value: o, required: !multi && i === 0 }), " ", o));
  return h("form", { class: "ask", "aria-label": `Question: ${q.question || ""}`, onsubmit: async (e) => {
    e.preventDefault();
    let answer;
    if (text) answer = text.value;
    else {
      const picked = [...e.target.querySelectorAll(`input[name="${CSS.escape(name)}"]:checked`)].map((x) => x.value);
      if (!picked.length) return say("Pick an answer.", true);
      answer = multi ? picked : picked[0];
    }
    try {
      await api("POST", T(threadId, `/questions/${encodeURIComponent(q.call_id)}/answer`), { query: { branch_id: branch }, body: { answer } });
      say("Answered.");
      done();
    } catch (err) { failed(err); }
  } },
  text ? h("label", { for: name }, q.question || "Question") : h("p", {}, q.question || "Question"),
  text, choices.length ? h("fieldset", {}, h("legend", {}, multi ? "Pick any" : "Pick one"), choices) : null,
  h("button", { type: "submit" }, "Answer"));
}

// ------------------------------------------------------------------ following a run (craze)
let following = null;

function stopFollowing() {
  if (following) following.abort();
  following = null;
}

function runView(live) {
  const text = h("div", { class: "text", "aria-live": "polite" });
  const tools = h("ul", { class: "tools", "aria-label": "Tools" });
  const todos = h("ul", { class: "todos", "aria-label": "To-dos" });
  const state = h("p", { class: "state", role: "status" }, "connecting…");
  const usage = h("p", { class: "meta usage" });
  live.hidden = false;
  live.replaceChildren(h("h2", {}, "Live run"), state, text, tools, todos, usage);
  return { text, tools, todos, state, usage, rows: new Map(), entry: null, thought: null, skipReplay: false };
}

// Every craze kind the seed schema has (craze-mapping.md §1). Absent members are normal (zero
// values are omitted on the wire: a `text` without `text` is a commit marker), so nothing here
// prints a member it has not checked: `str` turns a missing one into "".
const str = (v) => (typeof v === "string" ? v : typeof v === "number" ? String(v) : "");

function line(view, cls, ...kids) {
  const el = h("p", { class: cls }, ...kids);
  view.text.append(el);
  view.entry = null;
  view.thought = null;
  return el;
}

function applyCraze(view, ev) {
  if (ev.replayed && view.skipReplay) return; // this view already shows the thread's history
  const replayed = ev.replayed ? " replayed" : "";
  switch (ev.type) {
    case "replay":
      if (ev.replay && ev.replay.phase === "start") {
        view.skipReplay = view.text.childElementCount > 0;
        if (!view.skipReplay) line(view, "meta", "Earlier in this thread:");
      } else {
        if (!view.skipReplay) line(view, "meta", "Now:");
        view.skipReplay = false;
      }
      break;
    case "turn":
      if (ev.turn && ev.turn.phase === "started") {
        line(view, "prompt", str(ev.turn.text));
        view.entry = h("p", { class: "reply" });
        view.text.append(view.entry);
      }
      break;
    case "user":
      if (ev.agent) line(view, `prompt agent${replayed}`, `task for ${ev.agent}: `, str(ev.text));
      else line(view, `prompt${replayed}`, ev.interjection ? "(mid-turn) " : "", str(ev.text));
      break;
    case "text":
    case "thought": {
      const chunk = str(ev.text);
      if (!chunk || ev.agent) break; // a commit marker, or a sub-agent's own transcript
      const key = ev.type === "text" ? "entry" : "thought";
      if (!view[key]) {
        view[key] = h("p", { class: (ev.type === "text" ? "reply" : "thought") + replayed });
        view.text.append(view[key]);
        if (ev.type === "thought") view.entry = null;
      }
      view[key].append(chunk);
      if (ev.type === "text") view.thought = null;
      break;
    }
    case "tool": {
      const t = ev.tool || {};
      let row = view.rows.get(t.id);
      if (!row) { row = h("li", {}); view.rows.set(t.id, row); view.tools.append(row); }
      const busy = t.status === "pending" || t.status === "in_progress";
      row.className = `tool t-${str(t.status)}`;
      row.replaceChildren(h("span", { class: busy ? "spin" : "dot", "aria-hidden": "true" }),
        h("strong", {}, str(t.name) || str(t.toolName) || "tool"), " ", str(t.title), " ", h("em", {}, str(t.status)));
      view.entry = null; // text after a tool is a new paragraph
      view.thought = null;
      break;
    }
    case "subagent": {
      const a = ev.subagent || {};
      const key = `agent:${str(a.id)}`;
      let row = view.rows.get(key);
      if (!row) { row = h("li", {}); view.rows.set(key, row); view.tools.append(row); }
      row.className = `tool t-${str(a.status)}`;
      row.replaceChildren(h("span", { class: a.status === "running" ? "spin" : "dot", "aria-hidden": "true" }),
        h("strong", {}, "agent"), " ", str(a.subagentType) || str(a.id), " ", h("em", {}, str(a.status)));
      break;
    }
    case "todos":
      view.todos.replaceChildren(...(ev.todos || []).map((t) => h("li", { class: `todo ${str(t.status)}` },
        t.status === "completed" ? "✓ " : t.status === "in_progress" ? "▸ " : "○ ", str(t.content))));
      break;
    case "plan": {
      const p = ev.plan || {};
      line(view, "plan", h("strong", {}, str(p.name) || "Plan"), str(p.overview) ? ` — ${str(p.overview)}` : "",
        h("br"), str(p.plan));
      view.state.textContent = "plan proposed: leave plan mode to accept it";
      break;
    }
    case "permission": view.state.textContent = "waiting for your approval"; break;
    case "question": view.state.textContent = "waiting for your answer"; break;
    case "ask": {
      const a = ev.ask || {};
      if (a.kind === "plan") line(view, "meta", a.accepted ? "Plan accepted." : `Plan ${str(a.outcome).replace("_", " ")}.`);
      if (a.outcome === "answered") view.state.textContent = "working…";
      break;
    }
    case "command": {
      const c = ev.command || {};
      const pc = c.pluginCommand || {};
      line(view, "prompt", str(pc.display) || str(pc.qualified) || str(c.path), " ", str(c.text));
      break;
    }
    case "queue": {
      const q = ev.queue || {};
      line(view, "meta", `queued (${str(ev.queueChange) || "queued"}): `, str(q.text));
      break;
    }
    case "compaction": {
      const c = ev.compaction || {};
      if (c.phase === "started") view.state.textContent = "compacting the context…";
      else line(view, "meta", c.err ? `Compaction failed: ${str(c.err)}` : "Context compacted.");
      break;
    }
    case "foreign_turn": {
      const f = ev.foreignTurn || {};
      if (f.running) line(view, "prompt", str(f.text) || str(f.reason));
      break;
    }
    case "meta": {
      const st = ev.state || {};
      if (st.reason === "retry_wait") view.state.textContent = str(st.detail) || "retrying";
      if (st.usage && st.usage.session) {
        const u = st.usage.session;
        view.usage.textContent = `session: ${Number(u.input) || 0} tokens in, ${Number(u.output) || 0} out`;
      }
      if (str(st.mode)) view.usage.dataset.mode = st.mode;
      break;
    }
    case "error": {
      const e = ev.err || {};
      view.state.textContent = `error: ${str(e.message) || str(e.class) || "the run failed"}`;
      break;
    }
    default: break; // done: the follow loop reports the end
  }
}

async function follow(threadId, branch, runId, live, refresh) {
  stopFollowing();
  const ctl = new AbortController();
  following = ctl;
  const view = live.view || (live.view = runView(live));
  live.lastId = live.lastId || null;
  view.state.textContent = "working…";
  view.state.className = "state busy";
  try {
    // After the status leaves in_turn, one more window: events committed after the last
    // window ended still come (a settled run's window answers at once).
    let last = null;
    for (let windows = 0; windows < 10000 && !ctl.signal.aborted; windows++) {
      const headers = live.lastId ? { "Last-Event-ID": live.lastId } : {};
      const resp = await api("GET", T(threadId, `/runs/${encodeURIComponent(runId)}/events`),
        { query: { format: "craze" }, headers, raw: true, signal: ctl.signal });
      await readSse(resp, ctl.signal, (id, data) => {
        if (id) live.lastId = id;
        applyCraze(view, data);
      });
      if (last) break;
      const b = await refresh();
      if (!b) return;
      if (b.status !== "in_turn") last = b;
    }
    if (last) {
      view.state.className = "state";
      view.state.textContent = last.status === "parked" ? "waiting for you (below)" : `finished: ${STATUS[last.status] || last.status}`;
    }
  } catch (err) {
    if (err.name !== "AbortError") failed(err);
  } finally {
    if (following === ctl) following = null;
  }
}

// One buffered SSE window: `id:` and `data:` lines, blank-line separated. Hand-written because
// EventSource cannot send an Authorization header; the format is the simple part of the spec.
async function readSse(resp, signal, onMessage) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let id = null;
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (data.length) onMessage(id, JSON.parse(data.join("\n")));
        id = null; data = [];
      } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line.startsWith("id:")) id = line.slice(3).trim();
    }
    if (done || signal.aborted) break;
  }
  if (data.length) onMessage(id, JSON.parse(data.join("\n")));
}

render();
