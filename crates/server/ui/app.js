// The LLeMbas pages: the entry module (it routes a path to its page) and the chat, whose events
// are drawn through the table `ON_EVENT`, one handler a type.
//
// Safety: nothing a model, a tool or a user wrote is ever parsed as HTML here. Every element is
// made with createElement and filled with textContent; Markdown is turned into DOM nodes by
// render.js, so a model's `<script>` or `onerror=` is shown as text and never runs (the pages'
// Content-Security-Policy forbids inline script besides).

import { devicesPage } from "./devices.js";
import { $, alertBox, api, app, setAlertBox } from "./dom.js";
import { filesPage } from "./files.js";
import { ImageTray, isImage, messageImages, takenNames, upload } from "./images.js";
import { messageActions } from "./messages.js";
import { diffView, markdown, unifiedView } from "./render.js";
import { settingsPage } from "./settings.js";
import { sharedPage, shareControls } from "./shared.js";
import { base64, callSubject, MODES, planCard, proposed, sideBar, sideBarFollow } from "./sidebar.js";
import { signIn } from "./signin.js";
export async function chatPage(id) {
  let me;
  try {
    me = await api("GET", "/api/auth/me");
  } catch (e) {
    if (e.status === 401) {
      location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
      return;
    }
    throw e;
  }
  const chats = await api("GET", "/api/chats");
  const layout = $("div", { class: "layout" });
  const main = $("main", { class: "main" });
  setAlertBox($("div", { class: "notice error", role: "alert", id: "alert" }));
  layout.append(sideBar(me, chats, id, layout), main);
  app.replaceChildren(layout);
  const menu = $("button", { class: "menu", type: "button", text: "☰", title: "Chats", onclick: () => layout.classList.add("open") });
  if (!id) {
    // At phone width the list (and its New chat) is this page, not folded behind ☰.
    layout.classList.add("listing");
    main.append($("div", { class: "chathead" }, menu, $("h2", { text: "Chats" })),
      $("div", { class: "log" }, alertBox, $("p", { class: "empty muted", text: "Pick a chat, or start a new one." })));
    return;
  }
  let chat;
  try {
    chat = await api("GET", `/api/chats/${encodeURIComponent(id)}?messages=0`);
  } catch (e) {
    main.append($("div", { class: "chathead" }, menu, $("h2", { text: "Chats" })),
      $("div", { class: "log" }, $("p", { class: "empty error", id: "missing", text: e.status === 404 ? "No such chat." : e.message })));
    return;
  }
  new ChatView(chat, main, menu, layout).start();
}

export class ChatView {
  constructor(chat, main, menu, layout) {
    this.chat = chat;
    this.main = main;
    this.menu = menu;
    this.layout = layout;
    // Events told while the page loads are history: what they asked was answered or went.
    this.live = false;
    this.viewer = null;
    this.python = null;
    this.last = 0;
    this.seen = new Set();
    this.run = chat.running || null;
    this.cards = new Map();
    // The chat's background jobs by id, each a card of the jobs panel.
    this.jobs = new Map();
    this.turn = null;
    this.text = null;
    this.pending = null;
    this.dirty = new Set();
    this.ended = new Set();
    this.sentAt = null;
    // The history shown is its last runs; `before` is the cursor of the page older than it.
    this.before = chat.before ?? null;
    this.older = false;
    this.loading = false;
    this.ctx = { used: chat.context?.used ?? null, window: chat.context?.window ?? null };
  }

  start() {
    const c = this.chat;
    this.title = $("h2", { id: "title", text: c.title || "New chat" });
    this.status = $("span", { class: "tag", id: "status" });
    this.stopButton = $("button", { type: "button", id: "stop", class: "danger", text: "Stop", title: "Stop the run (Esc)", onclick: () => this.stop() });
    this.modeTag = $("select", { class: "tag", id: "mode", title: "Permission mode", "aria-label": "Permission mode" },
      ...MODES.map((m) => $("option", { value: m, text: m, selected: m === c.mode })));
    this.modeTag.addEventListener("change", async () => {
      const mode = this.modeTag.value;
      try {
        await api("POST", `/api/chats/${encodeURIComponent(c.id)}/mode`, { mode });
        this.chat.mode = mode;
      } catch (e) {
        alertBox.textContent = e.message;
        this.modeTag.value = this.chat.mode;
      }
    });
    // The chat's model, chosen from those the server lets users use.
    this.modelTag = $("select", { class: "tag", id: "model", title: "Model", "aria-label": "Model" },
      $("option", { value: c.model, text: c.model, selected: true }));
    api("GET", "/api/models").then((v) => {
      const names = [...new Set([...(v.models || []), this.chat.model])];
      this.modelTag.replaceChildren(...names.map((m) => $("option", { value: m, text: m, selected: m === this.chat.model })));
      document.body.dataset.models = String(names.length);
    }).catch(() => {});
    this.modelTag.addEventListener("change", async () => {
      const model = this.modelTag.value;
      try {
        const v = await api("POST", `/api/chats/${encodeURIComponent(c.id)}/model`, { model });
        this.chat.model = model;
        this.ctx.window = v.window ?? null;
        this.drawContext();
      } catch (e) {
        alertBox.textContent = e.message;
        this.modelTag.value = this.chat.model;
      }
    });
    this.contextTag = $("span", { class: "tag", id: "context", title: "Context use: tokens of the model's window the last answer filled" });
    // A chat on a linked device: where it runs, and whether the device is online.
    const d = c.device;
    this.deviceTag = d ? $("span", { class: `tag device ${d.online ? "online" : "offline"}`, id: "device",
      title: d.online ? "Runs on this linked device" : "The device is offline: start `llembas link` on it",
      text: `on ${d.name} · ${d.cwd}${d.online ? "" : " · offline"}` }) : null;
    const sharing = shareControls(c);
    const head = $("div", { class: "chathead" }, this.menu, this.title, this.deviceTag, this.modeTag, this.modelTag, this.contextTag, ...sharing.controls, this.status, this.stopButton);
    this.log = $("div", { class: "log", id: "log", "aria-live": "polite" });
    this.olderBar = $("button", { type: "button", id: "older", class: "older", text: "Older messages", hidden: true, onclick: () => this.loadOlder() });
    this.log.append(this.olderBar);
    this.log.addEventListener("scroll", () => {
      if (this.log.scrollTop < 120) this.loadOlder();
    });
    this.plan = null;
    // The plan card sits above the log, not in it: it never covers the cards scrolled under it.
    this.planSlot = $("div", { class: "planslot", id: "planslot" });
    this.input = $("textarea", { id: "prompt", rows: 2, placeholder: "Message", "aria-label": "Message" });
    this.send = $("button", { class: "primary", type: "button", id: "send", text: "Send", onclick: () => this.submit() });
    this.input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.submit();
      }
    });
    // Attach: files uploaded into the chat's directory (the user's home) through the files API,
    // each named in the message by its path; a name taken gets a free one, nothing is replaced.
    this.attach = $("input", { type: "file", id: "attach", multiple: true, class: "attachinput", "aria-label": "Attach files" });
    this.attach.addEventListener("change", () => this.attachFiles());
    const attachLabel = $("label", { for: "attach", class: "attach", title: "Attach files: uploaded to your home, named in the message (images go to the model)" }, "Attach");
    // Images pasted or attached: sent to the model with the message.
    this.images = new ImageTray((text) => { alertBox.textContent = text; });
    this.input.addEventListener("paste", (ev) => this.images.pasted(ev));
    const composer = $("div", { class: "composer" }, this.images.node, attachLabel, this.attach, this.input, this.send,
      $("span", { class: "hint muted", text: "Enter sends · Shift-Enter new line · Esc stops" }));
    // The chat's background jobs (`task` in the background), running and ended, above the
    // composer: they go on while the log scrolls.
    this.jobsCount = $("span", { class: "count muted" });
    this.jobsList = $("div", { class: "joblist" });
    this.jobsPanel = $("section", { class: "jobs", id: "jobs", hidden: true, "aria-label": "Background jobs" },
      $("div", { class: "jobshead" }, $("strong", { text: "Background jobs" }), this.jobsCount), this.jobsList);
    this.main.append(head, sharing.panel, alertBox, this.planSlot, this.log, this.jobsPanel, composer);
    document.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape" && this.run) {
        ev.preventDefault();
        this.stop();
      }
    });
    document.addEventListener("retitle", (ev) => { this.title.textContent = ev.detail; });
    for (const e of c.events || []) this.apply(e);
    this.live = true;
    this.olderBar.hidden = this.before === null;
    this.drawContext();
    if (this.log.children.length <= 1) this.log.append($("p", { class: "empty muted", id: "hello", text: "Say what you want done." }));
    this.setRunning(this.run);
    this.follow();
    this.input.focus();
    this.log.scrollTop = this.log.scrollHeight;
    this.fill();
  }

  // Older pages until the log can scroll (a short page leaves nothing to scroll up by).
  async fill() {
    while (this.before !== null && this.log.scrollHeight <= this.log.clientHeight) {
      if (!(await this.loadOlder())) break;
    }
  }

  // The page of history before the oldest shown, drawn above it; the view stays where it was.
  async loadOlder() {
    if (this.before === null || this.loading) return false;
    this.loading = true;
    try {
      const v = await api("GET", `/api/chats/${encodeURIComponent(this.chat.id)}?before=${this.before}`);
      const holder = $("div");
      // Drawn as history: what it asked was answered or went, its runs ended.
      const saved = { log: this.log, turn: this.turn, text: this.text, last: this.last, live: this.live, lastUser: this.lastUser, lastUserRun: this.lastUserRun, eventRun: this.eventRun };
      this.live = false;
      this.log = holder;
      this.turn = null;
      this.text = null;
      this.last = 0;
      this.older = true;
      try {
        for (const e of v.events || []) this.apply(e);
      } finally {
        Object.assign(this, saved);
        this.older = false;
      }
      // Drawn now, not at the next frame: the view is kept by the height it adds.
      for (const t of this.dirty) t.node.replaceChildren(...markdown(t.src).childNodes);
      this.dirty.clear();
      const log = this.log;
      const from = log.scrollHeight - log.scrollTop;
      const at = this.olderBar.nextSibling;
      for (const n of [...holder.childNodes]) log.insertBefore(n, at);
      log.scrollTop = log.scrollHeight - from;
      this.before = v.before ?? null;
      this.olderBar.hidden = this.before === null;
      document.body.dataset.pages = String(Number(document.body.dataset.pages || 1) + 1);
      return true;
    } catch (e) {
      alertBox.textContent = e.message;
      return false;
    } finally {
      this.loading = false;
    }
  }

  drawContext() {
    const { used, window: win } = this.ctx;
    const k = (n) => (n >= 10_000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
    let text = "context –";
    if (used !== null && win) text = `context ${k(used)} / ${k(win)} (${Math.round((100 * used) / win)}%)`;
    else if (used !== null) text = `context ${k(used)}`;
    else if (win) text = `context – / ${k(win)}`;
    this.contextTag.textContent = text;
    document.body.dataset.context = used === null ? "" : String(used);
  }

  // One stream for the page; it goes on after the newest event the server had when the chat
  // was read (`stream_after`: the chat's history came with the chat), and the browser sends
  // Last-Event-ID itself when it reconnects. It names the chat: while it is open the chat has a
  // page (its `show` viewer and its `python`). A stream that asked for more than the server
  // replays says `stream_reset`: the page is read again. A stream the server closed for good
  // (signed out, or a newer page took its place) says why and is not opened again.
  follow() {
    const after = this.chat.stream_after ?? this.last;
    const es = new EventSource(`/api/events?after=${after}&chat=${encodeURIComponent(this.chat.id)}`);
    es.onmessage = (m) => {
      let e;
      try { e = JSON.parse(m.data); } catch { return; }
      if (e.event && e.event.type === "stream_reset") { es.close(); location.reload(); return; }
      sideBarFollow(e);
      if (e.chat === this.chat.id) this.apply(e);
    };
    es.addEventListener("closed", (m) => {
      es.close();
      document.body.dataset.stream = "closed";
      let why = {};
      try { why = JSON.parse(m.data); } catch { /* said nothing */ }
      if (why.reason === "signed_out") { location.assign("/login"); return; }
      alertBox.textContent = why.text || "This page no longer follows the chat: reload it.";
    });
    es.onopen = () => { document.body.dataset.stream = "open"; };
    es.onerror = () => { document.body.dataset.stream = "reconnecting"; };
    this.es = es;
  }

  setRunning(run) {
    this.run = run;
    this.stopButton.hidden = !run;
    this.status.textContent = run ? "running" : "idle";
    this.send.disabled = !!run;
    this.modelTag.disabled = !!run;
    document.body.dataset.running = run ? "yes" : "no";
  }

  async submit() {
    const text = this.input.value;
    if (!text.trim() || this.run) return;
    if (await this.post(text, this.images.paths())) {
      this.input.value = "";
      this.images.clear();
    }
  }

  async attachFiles() {
    alertBox.textContent = "";
    const files = [...this.attach.files];
    this.attach.value = "";
    await this.images.addFiles(files.filter(isImage));
    let taken;
    try {
      taken = await takenNames();
    } catch (e) {
      alertBox.textContent = e.message;
      return;
    }
    const paths = [];
    for (const f of files.filter((f) => !isImage(f))) {
      try { paths.push(await upload(f.name, f, taken)); } catch (e) { alertBox.textContent = e.message; }
    }
    if (paths.length) {
      const before = this.input.value.replace(/\s+$/, "");
      const refs = paths.map((p) => `Attached: ${p}`).join("\n");
      this.input.value = before ? `${before}\n${refs}` : refs;
      this.input.focus();
    }
    document.body.dataset.attached = String(Number(document.body.dataset.attached || 0) + paths.length);
  }

  // Sends a message as the person's (the composer, a regenerate, an edit sent again): true when
  // the run started.
  // `back`: the message replaces an earlier one of the person ({from: its run, code: whether
  // the files the chat changed from it on go back}): the chat goes back to before it first.
  async post(text, images = [], back = null) {
    alertBox.textContent = "";
    this.sentAt = performance.now();
    try {
      const body = images.length ? { text, images } : { text };
      if (back) Object.assign(body, back);
      const v = await api("POST", `/api/chats/${encodeURIComponent(this.chat.id)}/messages`, body);
      // The stream may have told the run's start, and even its end, before this answer came.
      if (!this.run && !this.ended.has(v.run)) this.setRunning(v.run);
      document.body.dataset.sent = v.run;
      return true;
    } catch (e) {
      alertBox.textContent = e.message;
      return false;
    }
  }

  async stop() {
    if (!this.run) return;
    try {
      await api("POST", `/api/runs/${encodeURIComponent(this.run)}/stop`);
      this.status.textContent = "stopping";
    } catch (e) {
      alertBox.textContent = e.message;
    }
  }

  atBottom() {
    const l = this.log;
    return l.scrollHeight - l.scrollTop - l.clientHeight < 80;
  }

  add(node) {
    const follow = this.atBottom();
    const hello = document.getElementById("hello");
    if (hello) hello.remove();
    if (this.eventRun && !node.dataset.run) node.dataset.run = this.eventRun;
    this.log.append(node);
    if (follow) this.log.scrollTop = this.log.scrollHeight;
    return node;
  }

  assistant() {
    if (!this.turn) {
      const turn = $("div", { class: "msg assistant" });
      turn.userText = this.lastUser;
      turn.userRun = this.lastUserRun;
      const answers = () => [...turn.querySelectorAll(".answer")].map((a) => a.mdSource || "").join("\n\n");
      turn.append(messageActions(this, turn, answers, null));
      this.turn = this.add(turn);
    }
    return this.turn;
  }

  // The streamed answer: its Markdown is drawn again at most once a frame.
  drawText() {
    this.dirty.add(this.text);
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = null;
      const follow = this.atBottom();
      for (const t of this.dirty) t.node.replaceChildren(...markdown(t.src).childNodes);
      this.dirty.clear();
      if (follow) this.log.scrollTop = this.log.scrollHeight;
      if (this.sentAt !== null) {
        document.body.dataset.firstToken = String(Math.round(performance.now() - this.sentAt));
        this.sentAt = null;
      }
    });
  }

  apply(s) {
    if (this.seen.has(s.id) || s.id <= this.last) return;
    this.seen.add(s.id);
    this.last = s.id;
    if (!this.older) document.body.dataset.last = String(s.id);
    const e = s.event || {};
    this.eventRun = s.run || null;
    if (Object.hasOwn(ON_EVENT, e.type)) ON_EVENT[e.type](this, e, s);
  }

  // A background job's card in the jobs panel, made by its first event seen, whichever that
  // is (an older page drawn later may tell its start after its end); cards stay in id order.
  job(id) {
    let j = this.jobs.get(id);
    if (j) return j;
    const kind = $("span", { class: "kind" });
    const title = $("span", { class: "what", text: `job ${id}` });
    const state = $("span", { class: "state", text: "running" });
    const out = $("pre", { class: "out", hidden: true });
    const head = $("div", { class: "head" }, $("span", { class: "name", text: `#${id}` }), kind, title, state);
    const node = $("div", { class: "job", "data-job": id, "data-state": "running" }, head, out);
    // A device chat's jobs run on the device: their output and stop are asked of it.
    if (this.chat.device) head.append(...this.deviceJobVerbs(id));
    let at = this.jobsList.firstChild;
    while (at && Number(at.dataset.job) < Number(id)) at = at.nextSibling;
    this.jobsList.insertBefore(node, at);
    j = { id, node, kind, title, state, out, lines: [], status: "running", endText: "" };
    this.jobs.set(id, j);
    this.jobsPanel.hidden = false;
    this.drawJobsCount();
    return j;
  }

  // The person's job verbs for a job on a linked device (`_lembas/job/output`, `…/stop`).
  deviceJobVerbs(id) {
    const base = `/api/chats/${encodeURIComponent(this.chat.id)}/jobs/${encodeURIComponent(id)}`;
    const output = $("button", { type: "button", class: "joboutput", text: "Output", onclick: async () => {
      try {
        const v = await api("GET", `${base}/output`);
        const j = this.jobs.get(id);
        j.out.textContent = v.text || "(no output)";
        j.out.hidden = false;
      } catch (err) { alertBox.textContent = err.message; }
    } });
    const stop = $("button", { type: "button", class: "jobstop", text: "Stop", onclick: async () => {
      try { await api("POST", `${base}/stop`); } catch (err) { alertBox.textContent = err.message; }
    } });
    return [output, stop];
  }

  // A line of what a job said (a report, its reply): kept in the order of `id` (the event's id
  // times 100, plus the mark's place in a message of several), the last shown.
  jobLine(j, id, text) {
    text = text.replace(/\s+$/, "");
    if (!text || j.lines.some((l) => l.id === id || l.text === text)) return;
    j.lines.push({ id, text });
    j.lines.sort((a, b) => a.id - b.id);
    j.out.textContent = j.lines.map((l) => l.text).join("\n");
    j.out.hidden = false;
    j.out.scrollTop = j.out.scrollHeight;
  }

  jobEnded(j, end) {
    const status = end.status || "done";
    j.status = status;
    if (status === "failed") j.endText = `failed: ${end.message || "?"}`;
    else if (status === "stopped") j.endText = "stopped";
    else j.endText = typeof end.exit_code === "number" ? `done, exit code ${end.exit_code}` : "done";
    j.state.textContent = j.endText;
    j.state.className = status === "done" && !end.exit_code ? "state ok" : "state bad";
    j.node.dataset.state = status;
    j.node.querySelector(".jobstop")?.remove();
    this.drawJobsCount();
    return j;
  }

  drawJobsCount() {
    const running = [...this.jobs.values()].filter((j) => j.status === "running").length;
    this.jobsCount.textContent = `${running} running · ${this.jobs.size - running} ended`;
    document.body.dataset.jobsRunning = String(running);
  }

  // A message the harness wrote to the agent (a job's end or report woke it): drawn as the job's
  // lines in its card, not as the person's words. The server gives its marks as fields (`jobs`:
  // `job_id`, and for a job's end `kind`, `state`, `title`; `text`).
  machine(id, e) {
    this.turn = null;
    this.text = null;
    // One message may carry several marks (a report and the job's end, when both came while
    // the agent was busy); each goes to its job.
    const marks = Array.isArray(e.jobs) ? e.jobs : [];
    marks.forEach((m, n) => {
      const j = this.job(m.job_id);
      if (m.title !== undefined && j.title.textContent === `job ${m.job_id}`) j.title.textContent = m.title;
      this.jobLine(j, id * 100 + n + 1, m.text || "");
    });
    if (!marks.length) this.add($("details", { class: "msg machine" }, $("summary", { text: "A message from the harness" }), $("pre", { text: e.text || "" })));
  }

  toolStarted(call, block) {
    if (block === "plan" || block === "hidden") return;
    this.text = null;
    const purpose = call.arguments && call.arguments.purpose;
    const state = $("span", { class: "state", text: "running" });
    const node = $("div", { class: `tool block-${block}`, "data-call": call.id },
      $("div", { class: "head" },
        $("span", { class: "name", text: call.name }),
        $("span", { class: "what", text: callSubject(block, call) }),
        purpose ? $("span", { class: "purpose", text: purpose }) : null,
        state));
    this.assistant().append(node);
    this.cards.set(call.id, { node, state, call, block });
    if (this.atBottom()) this.log.scrollTop = this.log.scrollHeight;
  }

  // A subagent's own call: a line in its task's card (or under its job), marked as it ends.
  subagentCall(e) {
    if (e.block === "plan" || e.block === "hidden") return;
    const card = e.task_call_id ? this.cards.get(e.task_call_id) : null;
    const id = `${e.task_call_id || "job-" + e.job_id}/${e.call.id}`;
    let line = this.log.querySelector(`[data-subcall="${CSS.escape(id)}"]`);
    if (!line) {
      line = $("div", { class: "subcall", "data-subcall": id },
        $("span", { class: "name", text: e.call.name }),
        $("span", { class: "what", text: callSubject(e.block, e.call) }),
        $("span", { class: "state", text: "running" }));
      if (card) card.node.append(line);
      else if (e.job_id) this.assistant().append(line);
      else return;
    }
    const state = line.querySelector(".state");
    if (e.status === "done") { state.textContent = "done"; state.className = "state ok"; }
    if (e.status === "failed") { state.textContent = `failed: ${e.reason || ""}`; state.className = "state bad"; }
  }

  // The `question` tool: its options as buttons and a line of one's own; the answer goes back
  // to the run. Drawn in the call's card (or alone), gone when the call has its result.
  question(e) {
    let card = this.cards.get(e.call_id);
    if (!card) {
      const state = $("span", { class: "state", text: "asks" });
      const node = this.assistant().appendChild($("div", { class: "tool block-tool", "data-call": e.call_id },
        $("div", { class: "head" }, $("span", { class: "name", text: "question" }), state)));
      card = { node, state, call: { name: "question", arguments: {} }, block: "tool" };
      this.cards.set(e.call_id, card);
    }
    card.state.textContent = "asks";
    const own = $("input", { class: "note own", placeholder: "Or write your answer", "aria-label": "Your answer" });
    const send = async (text) => {
      if (!text.trim()) return;
      try {
        await api("POST", `/api/questions/${encodeURIComponent(e.ask)}`, { answer: text });
        card.ask?.remove();
        card.ask = null;
        card.node.append($("p", { class: "answered", text: `Answered: ${text}` }));
      } catch (err) {
        alertBox.textContent = err.message;
      }
    };
    own.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") { ev.preventDefault(); send(own.value); }
    });
    const options = (e.options || []).map((o) => (typeof o === "string" ? o : JSON.stringify(o)));
    card.ask = $("div", { class: "ask question" },
      $("div", { class: "q" }, $("strong", { text: e.question || "" })),
      $("div", { class: "buttons" },
        ...options.map((o) => $("button", { type: "button", class: "option", text: o, onclick: () => send(o) })),
        own,
        $("button", { type: "button", class: "primary answer", text: "Answer", onclick: () => send(own.value) })));
    if (!e.ask) card.ask.querySelectorAll("button, input").forEach((b) => { b.disabled = true; });
    card.node.append(card.ask);
    if (this.atBottom()) this.log.scrollTop = this.log.scrollHeight;
  }

  // The viewer beside the chat, made on first use.
  openViewer() {
    if (!this.viewer) {
      const body = $("div", { class: "body" });
      const name = $("h3", { class: "opened" });
      const close = $("button", { type: "button", class: "close", text: "✕", title: "Close the viewer",
        onclick: () => { this.layout.classList.remove("viewing"); node.hidden = true; } });
      const node = $("aside", { class: "viewer showpane", id: "viewer", "aria-label": "Viewer" },
        $("div", { class: "viewhead" }, name, close), body);
      this.layout.append(node);
      this.viewer = { node, name, body };
    }
    this.viewer.node.hidden = false;
    this.layout.classList.add("viewing");
    return this.viewer;
  }

  // Opens a file of the view in the viewer: Markdown drawn, code and text with line numbers,
  // HTML in a frame sandboxed into an origin of its own (scripts, no same origin).
  // A linked device's file comes in its event (`device`): the server cannot read its disk.
  async view(path, kind, line, device) {
    const v = this.openViewer();
    v.name.textContent = path;
    if (kind === "html") {
      const src = device ? `/show/device?chat=${encodeURIComponent(this.chat.id)}&call=${encodeURIComponent(device.call_id)}`
        : `/show?path=${encodeURIComponent(path)}`;
      const frame = $("iframe", { class: "shown", sandbox: "allow-scripts", title: path, referrerpolicy: "no-referrer", src });
      v.body.replaceChildren(frame);
      return;
    }
    const text = device ? device.content
      : (await api("GET", `/api/files/content?path=${encodeURIComponent(path)}`)).content;
    if (kind === "markdown") {
      v.body.replaceChildren(markdown(text));
      return;
    }
    const pre = $("pre", { class: `numbered ${kind}` });
    text.replace(/\n$/, "").split("\n").forEach((l, n) => {
      pre.append($("span", { class: "ln", "data-line": n + 1, text: `${String(n + 1).padStart(4)}  ` }), l, "\n");
    });
    v.body.replaceChildren(pre);
    if (line) pre.querySelector(`[data-line="${line}"]`)?.scrollIntoView({ block: "center" });
  }

  // A `show` call: its file in the viewer, and the run told it opened (or did not).
  async show(e) {
    const from = e.device ? e : null;
    const card = this.cards.get(e.call_id);
    const again = $("button", { type: "button", class: "reopen", text: `Open ${e.title || e.path}`,
      onclick: () => this.view(e.path, e.kind, e.line, from).catch((err) => { alertBox.textContent = err.message; }) });
    if (card) card.node.append($("div", { class: "shownfile" }, again));
    else if (from) this.add($("div", { class: "shownfile" }, again));
    if (!this.live || !e.ask) return;
    let opened = true;
    try {
      await this.view(e.path, e.kind, e.line, from);
    } catch (err) {
      alertBox.textContent = err.message;
      opened = false;
    }
    try {
      await api("POST", `/api/shows/${encodeURIComponent(e.ask)}`, { opened });
    } catch (err) {
      alertBox.textContent = err.message;
    }
  }

  // The Python runner: a hidden frame sandboxed into an origin of its own, made on first use
  // and again after a run passed its time (removing the frame stops it).
  runner() {
    if (this.python) return this.python;
    const frame = $("iframe", { class: "python", sandbox: "allow-scripts", title: "Python", src: "/python/runner.html" });
    const waiting = new Map();
    let ready;
    const r = { frame, waiting, ready: new Promise((ok) => { ready = ok; }) };
    r.onmessage = (ev) => {
      if (ev.source !== frame.contentWindow) return;
      const m = ev.data || {};
      if (m.type === "ready") { ready(); return; }
      const w = waiting.get(m.id);
      if (w) w(m);
    };
    addEventListener("message", r.onmessage);
    document.body.append(frame);
    this.python = r;
    return r;
  }

  dropRunner() {
    if (!this.python) return;
    removeEventListener("message", this.python.onmessage);
    this.python.frame.remove();
    this.python = null;
  }

  // A `python` call: the files it reads fetched through the view, the code run in the frame
  // within its time, and what it did posted to the run with the files it saved (base64); the
  // server keeps only those the call listed, through the chat's own write path.
  async runPython(e) {
    if (!this.live || !e.ask) return;
    const cwd = e.cwd || "/";
    const abs = (p) => (p.startsWith("/") ? p : `${cwd.replace(/\/$/, "")}/${p}`);
    const post = (v) => api("POST", `/api/python/${encodeURIComponent(e.ask)}`, v).catch((err) => { alertBox.textContent = err.message; });
    const files = {};
    try {
      for (const p of e.files || []) {
        files[abs(p)] = (await api("GET", `/api/files/content?path=${encodeURIComponent(abs(p))}`)).content;
      }
    } catch (err) {
      await post({ error: `The files could not be read: ${err.message}`, duration_ms: 0 });
      return;
    }
    const seconds = e.timeout || 30;
    const r = this.runner();
    await r.ready;
    const id = e.ask;
    const done = await new Promise((resolve) => {
      let timer = setTimeout(() => resolve({ timeout: "Pyodide did not load within 120 s." }), 120_000);
      r.waiting.set(id, (m) => {
        if (m.type === "started") {
          clearTimeout(timer);
          timer = setTimeout(() => resolve({ timeout: `The run passed its time (${seconds} s) and was stopped.` }), seconds * 1000);
        } else if (m.type === "done") {
          clearTimeout(timer);
          resolve(m);
        }
      });
      r.frame.contentWindow.postMessage({ type: "run", id, code: e.code || "", cwd, files, save: (e.save || []).map(abs) }, "*");
    });
    r.waiting.delete(id);
    if (done.timeout) {
      this.dropRunner();
      await post({ error: `TimeoutError: ${done.timeout}`, duration_ms: seconds * 1000 });
      return;
    }
    const saved = {};
    for (const [path, bytes] of Object.entries(done.saved || {})) {
      if (bytes instanceof Uint8Array) saved[path] = base64(bytes);
    }
    await post({ stdout: String(done.stdout || ""), stderr: String(done.stderr || ""), result: done.result ?? null,
      error: done.error ?? null, saved, duration_ms: Number(done.duration_ms) || 0 });
    document.body.dataset.python = String(Number(document.body.dataset.python || 0) + 1);
  }

  asked(e) {
    const card = this.cards.get(e.call_id);
    if (!card) return;
    const q = e.question || {};
    card.state.textContent = "asks";
    const note = $("input", { class: "note", placeholder: "Note for the model (with No)", "aria-label": "Note" });
    const answer = async (a) => {
      try {
        await api("POST", `/api/approvals/${encodeURIComponent(e.approval)}`, a === "no" && note.value.trim() ? { answer: a, note: note.value.trim() } : { answer: a });
      } catch (err) {
        alertBox.textContent = err.message;
      }
    };
    // The change the harness foresaw (write, edit, multiedit, a patch), else one drawn from the
    // call's arguments.
    const preview = typeof q.change === "string" && q.change ? unifiedView(q.change) : proposed(card.block, card.call);
    if (preview) {
      preview.classList.add("preview");
      card.preview = preview;
      card.node.append(preview);
    }
    card.ask = $("div", { class: "ask" },
      $("div", { class: "q" }, $("strong", { text: `Allow ${q.tool || card.call.name}` }), " ", $("code", { text: q.subject || "" }), $("span", { class: "muted", text: ` · risk ${q.risk || "?"}` }),
        q.reason ? $("div", { class: "muted", text: q.reason }) : null),
      $("div", { class: "buttons" },
        $("button", { type: "button", class: "primary yes", text: "Yes", onclick: () => answer("yes") }),
        $("button", { type: "button", class: "always", text: q.pattern && q.pattern !== "*" ? `Always (${q.pattern})` : "Always", onclick: () => answer("always") }),
        $("button", { type: "button", class: "danger no", text: "No", onclick: () => answer("no") }),
        note));
    card.node.append(card.ask);
    this.log.scrollTop = this.log.scrollHeight;
  }
}

// A chat's title from its first message, as the server makes it: the first line with words,
// trimmed, at most 80 characters.
export function firstLine(text) {
  const line = text.split("\n").map((l) => l.trim()).find((l) => l) || "";
  return [...line].slice(0, 80).join("");
}

// What the page does with each event of a chat's stream (`view`: the chat's view, `s`: the
// stored event around it, `e`: the event). An event of another type changes nothing.
export const ON_EVENT = {
  run_started(view, e, s) {
    if (!view.older) view.setRunning(s.run);
    // The images the person's message carries, drawn with it.
    view.runImages = e.images || null;
  },
  user_input(view, e, s) {
    if (e.origin === "machine") {
      view.machine(s.id, e);
      return;
    }
    if (!view.chat.title) {
      view.chat.title = firstLine(e.text);
      view.title.textContent = view.chat.title;
    }
    view.turn = null;
    view.text = null;
    view.lastUser = e.text;
    view.lastUserRun = s.run;
    {
      const msg = $("div", { class: "msg user", text: e.text });
      msg.run = s.run;
      if (view.runImages) msg.append(messageImages(view.runImages));
      view.runImages = null;
      msg.append(messageActions(view, msg, () => e.text, e.text));
      view.add(msg);
    }
  },
  // The chat went back to before the person's message of `e.run`: that run and those after it
  // leave the page; what was put back is said.
  rewound(view, e) {
    const first = [...view.log.children].find((n) => n.dataset.run === e.run);
    if (first) {
      let n = first;
      while (n) { const next = n.nextSibling; n.remove(); n = next; }
    }
    view.turn = null;
    view.text = null;
    view.add($("p", { class: "notice rewound", text: `Went back to before message ${e.turn}. ${e.said}` }));
  },
  text_delta(view, e, s) {
    if (!view.text) {
      const node = $("div", { class: "md answer" });
      view.assistant().append(node);
      view.text = { node, src: "" };
    }
    view.text.src += e.text;
    view.text.node.mdSource = view.text.src;
    view.drawText();
  },
  reasoning_delta(view, e, s) {
    const turn = view.assistant();
    let r = turn.lastElementChild;
    if (!r || !r.classList.contains("reasoning")) {
      r = $("details", { class: "reasoning" }, $("summary", { text: "Reasoning" }), $("div"));
      turn.append(r);
      view.text = null;
    }
    r.lastElementChild.append(e.text);
  },
  model_answered(view, e, s) {
    view.text = null;
    if (e.usage && !view.older) {
      view.ctx.used = (e.usage.input_tokens || 0) + (e.usage.output_tokens || 0);
      view.drawContext();
    }
  },
  tool_call_started(view, e, s) {
    view.toolStarted(e.call, e.block);
  },
  tool_call_asked(view, e, s) {
    view.asked(e);
  },
  tool_call_answered(view, e, s) {
    const card = view.cards.get(e.call_id);
    if (card) {
      card.ask?.remove();
      const a = e.answer || {};
      card.state.textContent = a.answer === "deny" ? "refused" : a.answer === "always" ? "allowed always" : "allowed";
      if (a.answer === "deny") card.state.className = "state bad";
    }
  },
  edit(view, e, s) {
    const card = view.cards.get(e.call_id);
    if (card) {
      card.preview?.remove();
      card.node.append(diffView(e.before || "", e.after || ""));
    }
  },
  tool_output(view, e, s) {
    const card = view.cards.get(e.call_id);
    if (card) {
      if (!card.live) card.live = card.node.appendChild($("pre", { class: "live" }));
      card.live.append(e.text);
    }
  },
  tool_call_finished(view, e, s) {
    const r = e.result || {};
    const card = view.cards.get(r.call_id);
    if (card) {
      card.ask?.remove();
      card.ask = null;
      if (card.state.textContent !== "refused") {
        card.state.textContent = r.is_error ? "failed" : "done";
        card.state.className = r.is_error ? "state bad" : "state ok";
      }
      card.node.append($("details", { class: "result" }, $("summary", { text: "Result" }), $("pre", { text: r.content || "" })));
      // A pull request, merge or release made on the forge: a card with its link.
      const link = !r.is_error && ["pr", "merge", "release"].includes(card.call.name) && /https?:\/\/[^\s)"]+/.exec(r.content || "");
      if (link) {
        const said = (r.content || "").split("\n").map((l) => l.trim()).find((l) => /^(Opened|Merged|Released)/.test(l)) || card.call.name;
        card.node.append($("div", { class: "forgecard" },
          $("strong", { text: said.split(":")[0] }), " ",
          $("a", { href: link[0], target: "_blank", rel: "noopener noreferrer", text: link[0] })));
      }
    }
    view.text = null;
  },
  plan_changed(view, e, s) {
    // The newest page carries the plan as it is now: an older one's is history.
    if (view.older) return;
    const card = planCard(e.plan);
    const folded = view.plan && view.plan.querySelector("details") && !view.plan.querySelector("details").open;
    if (folded) card.querySelector("details")?.removeAttribute("open");
    if (view.plan) view.plan.replaceWith(card);
    else view.planSlot.append(card);
    view.plan = card;
  },
  mode_changed(view, e, s) {
    if (view.older) return;
    view.chat.mode = e.mode;
    view.modeTag.value = e.mode;
  },
  job_started(view, e, s) {
    const j = view.job(e.job_id);
    j.kind.textContent = e.kind === "command" ? "command" : "subagent";
    j.title.textContent = e.title || "";
    view.add($("p", { class: "notice jobnote", "data-job": e.job_id, text: `Job ${e.job_id} started: ${e.title}` }));
  },
  job_note(view, e, s) {
    view.jobLine(view.job(e.job_id), s.id * 100, e.text || "");
  },
  subagent_call(view, e, s) {
    view.subagentCall(e);
  },
  job_ended(view, e, s) {
    const j = view.jobEnded(view.job(e.job_id), e.end || {});
    view.add($("p", { class: "notice jobnote", "data-job": e.job_id, text: `Job ${e.job_id} ${j.endText}` }));
  },
  question(view, e, s) {
    view.question(e);
  },
  show(view, e, s) {
    view.show(e);
  },
  python(view, e, s) {
    view.runPython(e);
  },
  notice(view, e, s) {
    view.add($("p", { class: `notice ${e.level === "warning" ? "error" : ""}`, text: e.text }));
    if (e.device_offline && view.deviceTag && !view.older) view.deviceTag.classList.replace("online", "offline");
  },
  compacted(view, e, s) {
    if (!view.older) {
      view.ctx.used = e.after_tokens;
      view.drawContext();
    }
    view.add($("p", { class: "notice", text: `Context compacted: ${e.before_tokens} → ${e.after_tokens} tokens` }));
  },
  error(view, e, s) {
    view.add($("p", { class: "notice error", text: e.message }));
  },
  turn_ended(view, e, s) {
    const r = e.reason || {};
    if (r.kind === "error" || r.kind === "model_unavailable") view.add($("p", { class: "notice error", text: r.message }));
    else if (r.kind === "budget") view.add($("p", { class: "notice", text: `Stopped at the ${r.limit} limit.` }));
    else if (r.kind === "context_overflow") view.add($("p", { class: "notice error", text: "The context is full." }));
    view.turn = null;
    view.text = null;
  },
  run_ended(view, e, s) {
    view.ended.add(e.run);
    if (e.status === "stopped") view.add($("p", { class: "notice", id: `stopped-${e.run}`, text: "Stopped." }));
    // A device chat's notice says why (the device went offline).
    else if (e.status === "interrupted" && !view.chat.device) view.add($("p", { class: "notice", text: "Interrupted (the server restarted)." }));
    if (!view.older && (view.run === e.run || !view.run)) view.setRunning(null);
    view.turn = null;
    view.text = null;
  },
};

// ---------------------------------------------------------------------------------------------

export async function main() {
  const path = location.pathname;
  try {
    if (path === "/login") signIn();
    else if (path === "/" || path === "/chats" || path === "/chats/") await chatPage(null);
    else if (path.startsWith("/chats/")) await chatPage(decodeURIComponent(path.slice("/chats/".length)));
    else if (path === "/files") await filesPage();
    else if (path === "/settings") await settingsPage();
    else if (path === "/devices") await devicesPage();
    else if (path.startsWith("/shared/")) await sharedPage(decodeURIComponent(path.slice("/shared/".length)));
    else location.replace("/chats");
  } catch (e) {
    app.replaceChildren($("p", { class: "error", text: `The page failed: ${e.message}` }));
  }
  document.body.dataset.ready = "yes";
}

main();
