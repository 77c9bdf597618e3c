// The LLeMbas pages: sign-in, the chat list and the chat, in one hand-written module.
//
// Safety: nothing a model, a tool or a user wrote is ever parsed as HTML here. Every element is
// made with createElement and filled with textContent; Markdown is turned into DOM nodes by the
// small renderer below, so a model's `<script>` or `onerror=` is shown as text and never runs
// (the pages' Content-Security-Policy forbids inline script besides).

const $ = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
  return e;
};

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const init = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let v = null;
  try { v = text ? JSON.parse(text) : null; } catch { v = text; }
  if (!r.ok) throw new ApiError(r.status, (v && v.error) || `${r.status} ${r.statusText}`);
  return v;
}

const app = document.getElementById("app");

// ---------------------------------------------------------------------------------------------
// Markdown, safely: a block parser and an inline parser that build DOM nodes.

const SAFE_URL = /^(https?:|mailto:|\/|#|\.)/i;

// An image of a message: a file of the user's own view (through the raw route, which shows
// only raster images inline) or a data: URL of a raster image; never a remote address (the
// page's CSP forbids those anyway). Anything else: null, and the Markdown stays text.
const DATA_IMAGE = /^data:image\/(png|jpeg|gif|webp|avif|bmp);base64,[A-Za-z0-9+/=]+$/;
function image(alt, url) {
  let src = null;
  if (DATA_IMAGE.test(url)) src = url;
  else if (!/^[a-z][a-z0-9+.-]*:|^\/\//i.test(url)) src = `/api/files/raw?path=${encodeURIComponent(url)}&inline=1`;
  if (!src) return null;
  return $("img", { class: "mdimage", src, alt, title: alt || null, loading: "lazy" });
}

function inline(text) {
  const out = document.createDocumentFragment();
  // code spans, links, bold, italics; anything else is text.
  const re = /(`+)([\s\S]*?[^`])\1(?!`)|!\[([^\]\n]*)\]\(([^)\s]+)\)|\[([^\]\n]+)\]\(([^)\s]+)\)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\n]+)\*|(?<![\w])_([^_\n]+)_(?![\w])/g;
  let at = 0;
  for (const m0 of text.matchAll(re)) {
    // Groups as before the image's two: code 1–2, link 3–4, bold 5–6, italics 7–8.
    const m = [m0[0], m0[1], m0[2], m0[5], m0[6], m0[7], m0[8], m0[9], m0[10]];
    m.index = m0.index;
    if (m.index > at) out.append(text.slice(at, m.index));
    if (m0[4] !== undefined) {
      out.append(image(m0[3], m0[4]) || m0[0]);
      at = m0.index + m0[0].length;
      continue;
    }
    if (m[1]) out.append($("code", { text: m[2].replace(/^ (.*) $/, "$1") }));
    else if (m[3]) {
      const url = m[4];
      if (SAFE_URL.test(url)) {
        const a = $("a", { href: url, rel: "noopener noreferrer nofollow", target: "_blank" });
        a.append(inline(m[3]));
        out.append(a);
      } else out.append(m[0]);
    } else if (m[5] || m[6]) {
      const b = $("strong");
      b.append(inline(m[5] || m[6]));
      out.append(b);
    } else {
      const i = $("em");
      i.append(inline(m[7] || m[8]));
      out.append(i);
    }
    at = m.index + m[0].length;
  }
  if (at < text.length) out.append(text.slice(at));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Code, highlighted: one tokenizer a family of languages. Each token is a text node in a span,
// so nothing of the code is ever read as HTML.

const WORDS = {
  rust: "as async await break const continue crate dyn else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while",
  js: "async await break case catch class const continue debugger default delete do else export extends false finally for from function if import in instanceof let new null of return static super switch this throw true try typeof undefined var void while with yield",
  python: "and as assert async await break class continue def del elif else except False finally for from global if import in is lambda None nonlocal not or pass raise return self True try while with yield",
  go: "break case chan const continue default defer else fallthrough false for func go goto if import interface map nil package range return select struct switch true type var",
  c: "auto bool break case catch char class const constexpr continue default delete do double else enum explicit extern false float for friend goto if inline int long namespace new nullptr operator private protected public return short signed sizeof static struct switch template this throw true try typedef typename union unsigned using virtual void volatile while",
  java: "abstract boolean break byte case catch char class const continue default do double else enum extends false final finally float for fun if implements import in instanceof int interface is long namespace new null object override package private protected public return short static string super switch this throw throws true try using val var void volatile when while",
  sh: "case do done elif else esac exit export fi for function if in local readonly return set shift source then unset until while",
  sql: "add all alter and as asc begin by commit create default delete desc distinct drop exists from group having in index inner insert into is join key left limit not null offset on or order outer primary references right rollback select set table union update values where",
  json: "false null true",
  toml: "false true",
};
const LANG = {
  rs: "rust", rust: "rust", js: "js", javascript: "js", ts: "js", typescript: "js", jsx: "js",
  tsx: "js", mjs: "js", py: "python", python: "python", python3: "python", go: "go",
  golang: "go", c: "c", h: "c", cpp: "c", "c++": "c", cc: "c", hpp: "c", java: "java",
  kotlin: "java", kt: "java", cs: "java", csharp: "java", swift: "java", sh: "sh", bash: "sh",
  shell: "sh", zsh: "sh", console: "sh", sql: "sql", json: "json", jsonc: "json",
  toml: "toml", yaml: "toml", yml: "toml", ini: "toml",
};
const DQ = String.raw`"(?:\\.|[^"\\\n])*"`;
const SQ = String.raw`'(?:\\.|[^'\\\n])*'`;
const BQ = String.raw`\x60(?:\\[\s\S]|[^\x60\\])*\x60`;
const SLASH = String.raw`\/\/[^\n]*|\/\*[\s\S]*?\*\/`;
const HASH = String.raw`#[^\n]*`;
// In a shell a comment starts a word: `${#list}` and `a#b` are none.
const SH_HASH = String.raw`(?<![^\s;&|(])#[^\n]*`;
const SYNTAX = {
  rust: [SLASH, String.raw`b?"(?:\\[\s\S]|[^"\\])*"|b?'(?:\\.|[^\\'\n])'`],
  js: [SLASH, `${DQ}|${SQ}|${BQ}`],
  python: [HASH, String.raw`[rbfRBF]{0,2}(?:"{3}[\s\S]*?"{3}|'{3}[\s\S]*?'{3}|` + `${DQ}|${SQ})`],
  go: [SLASH, `${DQ}|${SQ}|` + String.raw`\x60[^\x60]*\x60`],
  c: [SLASH, `${DQ}|${SQ}`],
  java: [SLASH, `${DQ}|${SQ}`],
  sh: [SH_HASH, String.raw`"(?:\\[\s\S]|[^"\\])*"|'[^']*'`],
  sql: [String.raw`--[^\n]*`, String.raw`'(?:''|[^'])*'`],
  json: [null, DQ],
  toml: [HASH, `${DQ}|${SQ}`],
};
const NUMBER = String.raw`\b(?:0[xob][\da-fA-F_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)(?:[a-z]\w*)?\b`;
// Longer code is drawn plain: highlighting it again at every streamed piece would cost.
const HIGHLIGHT_MAX = 100000;
const tokenizers = new Map();

function tokenizer(lang) {
  const family = LANG[(lang || "").toLowerCase()];
  if (!family) return null;
  if (!tokenizers.has(family)) {
    const [comment, string] = SYNTAX[family];
    const re = new RegExp(`(${comment || "(?!)"})|(${string})|(${NUMBER})|([A-Za-z_]\\w*)`, "g");
    tokenizers.set(family, {
      re,
      words: new Set(WORDS[family].split(" ")),
      caseless: family === "sql",
      types: family !== "sql" && family !== "sh",
    });
  }
  return tokenizers.get(family);
}

/** The code as text nodes, its comments, strings, numbers, keywords and type names in spans. */
export function highlight(code, lang) {
  const out = document.createDocumentFragment();
  const t = code.length <= HIGHLIGHT_MAX ? tokenizer(lang) : null;
  if (!t) {
    out.append(code);
    return out;
  }
  let at = 0;
  for (const m of code.matchAll(t.re)) {
    let cls = m[1] ? "hl-com" : m[2] ? "hl-str" : m[3] ? "hl-num" : null;
    if (m[4]) {
      if (t.words.has(t.caseless ? m[4].toLowerCase() : m[4])) cls = "hl-kw";
      else if (t.types && /^[A-Z][a-z]/.test(m[4])) cls = "hl-ty";
    }
    if (!cls) continue;
    if (m.index > at) out.append(code.slice(at, m.index));
    out.append($("span", { class: cls, text: m[0] }));
    at = m.index + m[0].length;
  }
  if (at < code.length) out.append(code.slice(at));
  return out;
}

function codeBlock(code, lang) {
  const inner = $("code", { class: lang ? `language-${lang}` : null });
  inner.append(highlight(code, lang));
  const pre = $("pre", {}, inner);
  const copy = $("button", {
    class: "copy", type: "button", text: "Copy", title: "Copy the code",
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(code);
        copy.textContent = "Copied";
      } catch {
        const r = document.createRange();
        r.selectNodeContents(pre);
        const s = getSelection();
        s.removeAllRanges();
        s.addRange(r);
        copy.textContent = "Selected";
      }
      setTimeout(() => { copy.textContent = "Copy"; }, 1500);
    },
  });
  return $("div", { class: "codeblock" }, $("div", { class: "bar" }, $("span", { class: "lang", text: lang || "" }), copy), pre);
}

// A table's delimiter row (`| --- | :-: |`) and a row's cells (outer pipes optional, `\|` kept).
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
function cells(line) {
  const t = line.trim().replace(/^\|/, "").replace(/(?<!\\)\|$/, "");
  return t.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

export function markdown(src) {
  const root = $("div", { class: "md" });
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let para = [];
  const flush = () => {
    if (para.length) {
      const p = $("p");
      para.forEach((l, n) => {
        if (n) p.append($("br"));
        p.append(inline(l));
      });
      root.append(p);
      para = [];
    }
  };
  while (i < lines.length) {
    const line = lines[i];
    let m;
    if ((m = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/))) {
      flush();
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence)) body.push(lines[i++]);
      i++;
      root.append(codeBlock(body.join("\n"), m[2]));
      continue;
    }
    if ((m = line.match(/^(#{1,6})\s+(.*)$/))) {
      flush();
      const h = $(`h${Math.min(m[1].length + 2, 6)}`);
      h.append(inline(m[2]));
      root.append(h);
      i++;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      root.append($("hr"));
      i++;
      continue;
    }
    if (/^\s*>/.test(line)) {
      flush();
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*> ?/, ""));
      const q = $("blockquote");
      q.append(...markdown(quoted.join("\n")).childNodes);
      root.append(q);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && lines[i + 1].includes("|") && TABLE_RULE.test(lines[i + 1])) {
      flush();
      const aligns = cells(lines[i + 1]).map((c) => (/^:-+:$/.test(c) ? "center" : /-:$/.test(c) ? "right" : /^:-/.test(c) ? "left" : null));
      const row = (l, tag) => $("tr", {}, ...cells(l).map((c, n) => {
        const td = $(tag, { class: aligns[n] ? `al-${aligns[n]}` : null });
        td.append(inline(c));
        return td;
      }));
      const head = $("thead", {}, row(line, "th"));
      const body = $("tbody");
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) body.append(row(lines[i++], "td"));
      root.append($("div", { class: "tablewrap" }, $("table", {}, head, body)));
      continue;
    }
    if ((m = line.match(/^\s*([-*+]|\d+[.)])\s+/))) {
      flush();
      const ordered = /\d/.test(m[1]);
      const list = $(ordered ? "ol" : "ul");
      while (i < lines.length && (m = lines[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/))) {
        const li = $("li");
        li.append(inline(m[2]));
        list.append(li);
        i++;
      }
      root.append(list);
      continue;
    }
    if (!line.trim()) {
      flush();
      i++;
      continue;
    }
    para.push(line);
    i++;
  }
  flush();
  return root;
}

// ---------------------------------------------------------------------------------------------
// Diffs: a line diff of two texts (longest common subsequence; large texts fall back to whole).

function diffLines(before, after) {
  const a = before === "" ? [] : before.replace(/\n$/, "").split("\n");
  const b = after === "" ? [] : after.replace(/\n$/, "").split("\n");
  if (a.length * b.length > 4_000_000) {
    return [...a.map((t) => ["-", t]), ...b.map((t) => ["+", t])];
  }
  const n = a.length, m = b.length;
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let x = n - 1; x >= 0; x--)
    for (let y = m - 1; y >= 0; y--)
      dp[x][y] = a[x] === b[y] ? dp[x + 1][y + 1] + 1 : Math.max(dp[x + 1][y], dp[x][y + 1]);
  const out = [];
  let x = 0, y = 0;
  while (x < n && y < m) {
    if (a[x] === b[y]) { out.push([" ", a[x]]); x++; y++; }
    else if (dp[x + 1][y] >= dp[x][y + 1]) out.push(["-", a[x++]]);
    else out.push(["+", b[y++]]);
  }
  while (x < n) out.push(["-", a[x++]]);
  while (y < m) out.push(["+", b[y++]]);
  return out;
}

function diffView(before, after) {
  const pre = $("pre", { class: "diff" });
  const all = diffLines(before, after);
  // Context: three lines around each change.
  const keep = all.map(() => false);
  all.forEach(([k], n) => {
    if (k !== " ") for (let d = -3; d <= 3; d++) if (all[n + d]) keep[n + d] = true;
  });
  let skipped = false;
  all.forEach(([k, t], n) => {
    if (!keep[n]) {
      if (!skipped) pre.append($("span", { class: "ctx muted", text: "  …" }));
      skipped = true;
      return;
    }
    skipped = false;
    pre.append($("span", { class: k === "+" ? "add" : k === "-" ? "del" : "ctx", text: `${k} ${t}` }));
  });
  return pre;
}

// A unified diff as the harness gives it (a permission question's `change`), lines coloured.
function unifiedView(text) {
  const pre = $("pre", { class: "diff" });
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const head = line.startsWith("+++") || line.startsWith("---") || line.startsWith("@@");
    const kind = head ? "ctx muted" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append($("span", { class: kind, text: line }));
  }
  return pre;
}

// ---------------------------------------------------------------------------------------------
// Sign-in.

function signIn() {
  const next = new URLSearchParams(location.search).get("next");
  const err = $("p", { class: "error", role: "alert" });
  const user = $("input", { id: "username", name: "username", autocomplete: "username", required: true, autofocus: true });
  const pass = $("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true });
  const form = $("form", {
    class: "signin",
    onsubmit: async (ev) => {
      ev.preventDefault();
      err.textContent = "";
      try {
        // The server says where to go: `next` when it is a path of this server, else the list.
        const signedIn = await api("POST", "/api/auth/login", { username: user.value, password: pass.value, next });
        location.assign(signedIn.next);
      } catch (e) {
        err.textContent = e.message;
        pass.select();
      }
    },
  },
  $("h1", { text: "LLeMbas" }),
  $("label", { for: "username", text: "Username" }), user,
  $("label", { for: "password", text: "Password" }), pass,
  $("button", { class: "primary", type: "submit", id: "signin", text: "Sign in" }),
  err,
  $("p", { class: "muted" }, "No account? An admin adds one with ", $("code", { text: "llembas-server user add" }), "."));
  app.replaceChildren(form);
}

// ---------------------------------------------------------------------------------------------
// The chat list (the side bar) and a chat.

const MODES = ["manual", "edit", "auto", "plan"];

function sideBar(me, chats, current, layout) {
  const list = $("ul", { class: "chatlist", id: "chatlist" });
  const search = $("input", { class: "search", type: "search", placeholder: "Search titles", id: "search", "aria-label": "Search chats by title" });
  const draw = () => {
    const q = search.value.trim().toLowerCase();
    list.replaceChildren();
    for (const c of chats) {
      const title = c.title || "New chat";
      if (q && !title.toLowerCase().includes(q)) continue;
      const li = $("li", { class: c.id === current ? "current" : null, "data-id": c.id });
      const link = $("a", { href: `/chats/${encodeURIComponent(c.id)}`, text: (c.running ? "● " : "") + title, title });
      const rename = $("button", {
        type: "button", text: "✎", title: "Rename", class: "rename",
        onclick: () => {
          const input = $("input", { value: c.title, "aria-label": "New title" });
          const save = async () => {
            const t = input.value.trim();
            if (t && t !== c.title) {
              try {
                await api("PATCH", `/api/chats/${encodeURIComponent(c.id)}`, { title: t });
                c.title = t;
                if (c.id === current) document.dispatchEvent(new CustomEvent("retitle", { detail: t }));
              } catch (e) { alertLine(e.message); }
            }
            draw();
          };
          input.addEventListener("keydown", (ev) => {
            if (ev.key === "Enter") { ev.preventDefault(); save(); }
            if (ev.key === "Escape") { ev.stopPropagation(); draw(); }
          });
          input.addEventListener("blur", save);
          li.replaceChildren(input);
          input.focus();
          input.select();
        },
      });
      const del = $("button", {
        type: "button", text: "×", title: "Delete", class: "delete",
        onclick: () => {
          const yes = $("button", {
            type: "button", class: "danger confirm", text: "Delete",
            onclick: async () => {
              try {
                await api("DELETE", `/api/chats/${encodeURIComponent(c.id)}`);
                chats.splice(chats.indexOf(c), 1);
                if (c.id === current) location.assign("/chats");
              } catch (e) { alertLine(e.message); }
              draw();
            },
          });
          li.replaceChildren($("span", { class: "muted", text: `Delete “${title}”?` }), yes,
            $("button", { type: "button", text: "Keep", onclick: draw }));
        },
      });
      li.append(link, rename, del);
      list.append(li);
    }
    if (!list.children.length) list.append($("li", { class: "muted", text: q ? "No chat has that in its title." : "No chats yet." }));
  };
  search.addEventListener("input", draw);
  draw();
  // What the page's stream says about any chat of the list: running or not, its first title.
  sideBarFollow = (e) => {
    const c = chats.find((x) => x.id === e.chat);
    if (!c) return;
    const ev = e.event || {};
    if (ev.type === "run_started") c.running = e.run;
    else if (ev.type === "run_ended") c.running = null;
    else if (ev.type === "user_input" && !c.title) c.title = firstLine(ev.text);
    else return;
    if (!list.querySelector("input")) draw();
  };
  const mode = $("select", { id: "newmode", "aria-label": "Mode of the new chat" },
    $("option", { value: "", text: "my mode" }),
    ...MODES.map((m) => $("option", { value: m, text: m })));
  // Where the new chat runs: on this server, or on a linked device in a directory it shares.
  const where = $("select", { id: "newwhere", "aria-label": "Where the new chat runs" },
    $("option", { value: "", text: "on this server" }));
  const dir = $("input", { id: "newdir", placeholder: "directory on the device", "aria-label": "Directory on the device", hidden: true });
  let devices = [];
  // Shown only to a user with a linked device.
  const whereRow = $("div", { class: "new where", hidden: true }, where, dir);
  api("GET", "/api/devices").then((list) => {
    devices = list;
    whereRow.hidden = list.length === 0;
    for (const d of list) {
      where.append($("option", { value: d.id, text: `on ${d.name}${d.online ? "" : " (offline)"}` }));
    }
  }).catch(() => {});
  where.addEventListener("change", () => {
    const d = devices.find((x) => x.id === where.value);
    dir.hidden = !d;
    if (d && !dir.value) dir.value = (d.limits?.roots || [])[0] || "";
  });
  const newChat = $("button", {
    class: "primary", type: "button", id: "newchat", text: "New chat",
    onclick: async () => {
      try {
        // No mode picked: the user's default (their settings).
        const body = mode.value ? { mode: mode.value } : {};
        if (where.value) Object.assign(body, { device: where.value, dir: dir.value });
        const v = await api("POST", "/api/chats", body);
        location.assign(`/chats/${encodeURIComponent(v.id)}`);
      } catch (e) { alertLine(e.message); }
    },
  });
  const logout = $("button", {
    type: "button", text: "Sign out", id: "signout",
    onclick: async () => {
      try { await api("POST", "/api/auth/logout"); } finally { location.assign("/login"); }
    },
  });
  const close = $("button", { class: "menu", type: "button", text: "✕", title: "Close", onclick: () => layout.classList.remove("open") });
  return $("nav", { class: "side" },
    $("header", {}, $("span", { class: "who", text: me.username }), $("a", { href: "/files", id: "fileslink", text: "Files" }),
      $("a", { href: "/settings", id: "settingslink", text: "Settings" }),
      $("a", { href: "/devices", id: "deviceslink", text: "Devices" }), logout, close),
    $("div", { class: "new" }, mode, newChat),
    whereRow,
    search, list);
}

let alertBox = null;
let sideBarFollow = () => {};
function alertLine(text) {
  if (alertBox) alertBox.textContent = text;
}

const TASK_MARK = { todo: "☐", doing: "▶", done: "✓", dropped: "✗" };

// The plan card: phases and their tasks with their status, redrawn whenever the plan changes.
function planCard(plan) {
  const card = $("section", { class: "plan", id: "plan", "aria-label": "Plan" });
  if (!plan) return card;
  const tasks = (plan.phases || []).flatMap((p) => p.tasks || []);
  const done = tasks.filter((t) => t.status === "done").length;
  const body = $("div", { class: "body" });
  const details = $("details", { open: true },
    $("summary", {}, $("strong", { text: plan.title || "Plan" }), $("span", { class: "muted count", text: ` ${done}/${tasks.length} done` })),
    body);
  if (plan.summary) body.append($("p", { class: "muted", text: plan.summary }));
  for (const ph of plan.phases || []) {
    body.append($("div", { class: "phase", text: ph.title || "" }));
    const ul = $("ul");
    for (const t of ph.tasks || []) {
      const status = t.status || "todo";
      ul.append($("li", { class: `task ${status}`, "data-task": t.id, "data-status": status },
        $("span", { class: "mark", text: TASK_MARK[status] || "·" }), " ", t.title || ""));
    }
    body.append(ul);
  }
  card.append(details);
  return card;
}

// What a tool card says about the call in one line, by its block.
function callSubject(block, call) {
  const a = call.arguments || {};
  switch (block) {
    case "shell": return a.command || (typeof a.code === "string" ? a.code.split("\n")[0] : "");
    case "edit": case "read": return a.path || "";
    case "search": return [a.pattern || a.query, a.path].filter(Boolean).join(" in ");
    case "web": return a.url || a.query || "";
    case "task": return [a.agent, a.prompt].filter(Boolean).join(": ");
    default: {
      const shown = Object.entries(a).filter(([k]) => k !== "purpose").map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
      return shown.join(" ");
    }
  }
}

// The change or command a permission question is about, from the call's arguments.
// Bytes as base64, a chunk at a time (a large file would overflow the call's arguments).
function base64(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

function proposed(block, call) {
  const a = call.arguments || {};
  if (call.name === "python" && typeof a.code === "string") {
    const saves = Array.isArray(a.save) && a.save.length ? `\n# saves ${a.save.join(", ")}` : "";
    return $("pre", { text: `${a.code}${saves}` });
  }
  if (call.name === "write" && typeof a.content === "string") return diffView("", a.content);
  if (call.name === "edit" && typeof a.old_string === "string") return diffView(a.old_string, a.new_string || "");
  if (block === "shell" && a.command) return $("pre", { text: a.command });
  return null;
}

async function chatPage(id) {
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
  alertBox = $("div", { class: "notice error", role: "alert", id: "alert" });
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

class ChatView {
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
    const head = $("div", { class: "chathead" }, this.menu, this.title, this.deviceTag, this.modeTag, this.modelTag, this.contextTag, this.status, this.stopButton);
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
    const attachLabel = $("label", { for: "attach", class: "attach", title: "Attach files: uploaded to your home, named in the message" }, "Attach");
    const composer = $("div", { class: "composer" }, attachLabel, this.attach, this.input, this.send,
      $("span", { class: "hint muted", text: "Enter sends · Shift-Enter new line · Esc stops" }));
    // The chat's background jobs (`task` in the background), running and ended, above the
    // composer: they go on while the log scrolls.
    this.jobsCount = $("span", { class: "count muted" });
    this.jobsList = $("div", { class: "joblist" });
    this.jobsPanel = $("section", { class: "jobs", id: "jobs", hidden: true, "aria-label": "Background jobs" },
      $("div", { class: "jobshead" }, $("strong", { text: "Background jobs" }), this.jobsCount), this.jobsList);
    this.main.append(head, alertBox, this.planSlot, this.log, this.jobsPanel, composer);
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
      const saved = { log: this.log, turn: this.turn, text: this.text, last: this.last, live: this.live, lastUser: this.lastUser };
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
    if (await this.post(text)) this.input.value = "";
  }

  async attachFiles() {
    alertBox.textContent = "";
    let taken;
    try {
      taken = new Set((await api("GET", "/api/files")).entries.map((e) => e.name));
    } catch (e) {
      alertBox.textContent = e.message;
      return;
    }
    const paths = [];
    for (const f of this.attach.files) {
      const name = freeName(f.name, taken);
      taken.add(name);
      const r = await fetch(`/api/files/content?path=${encodeURIComponent(name)}`, { method: "PUT", body: f, credentials: "same-origin" });
      let v = null;
      try { v = await r.json(); } catch { /* not JSON */ }
      if (!r.ok) {
        alertBox.textContent = (v && v.error) || `${r.status}`;
        continue;
      }
      paths.push(v.path);
    }
    this.attach.value = "";
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
  async post(text) {
    alertBox.textContent = "";
    this.sentAt = performance.now();
    try {
      const v = await api("POST", `/api/chats/${encodeURIComponent(this.chat.id)}/messages`, { text });
      // The stream may have told the run's start, and even its end, before this answer came.
      if (!this.run && !this.ended.has(v.run)) this.setRunning(v.run);
      document.body.dataset.sent = v.run;
      return true;
    } catch (e) {
      alertBox.textContent = e.message;
      return false;
    }
  }

  // A message's buttons, drawn by the style sheet (no text of their own: a message's text is
  // only its words): copy its text, and for the person's a line to edit it and send it again, for
  // the model's a regenerate (its person's message sent again).
  actions(msg, textOf, user) {
    const bar = $("div", { class: "msgactions" });
    const copy = $("button", {
      type: "button", class: "act copymsg", title: "Copy", "aria-label": "Copy the message",
      onclick: async () => {
        const text = textOf();
        try {
          await navigator.clipboard.writeText(text);
          copy.classList.add("done");
        } catch {
          const r = document.createRange();
          r.selectNodeContents(msg);
          getSelection().removeAllRanges();
          getSelection().addRange(r);
        }
        document.body.dataset.copied = text;
        setTimeout(() => copy.classList.remove("done"), 1500);
      },
    });
    bar.append(copy);
    if (user === null) {
      // The model's turn: its person's message, sent again.
      bar.append($("button", {
        type: "button", class: "act regenerate", title: "Regenerate", "aria-label": "Regenerate: send the message before it again",
        onclick: () => { if (!this.run && msg.userText) this.post(msg.userText); },
      }));
    } else {
      bar.append($("button", {
        type: "button", class: "act editmsg", title: "Edit and send again", "aria-label": "Edit the message and send it as a new one",
        onclick: () => this.editAgain(msg, user),
      }));
    }
    return bar;
  }

  // The person's message in a box to change it; Send posts it as a new message (this one stays).
  editAgain(msg, text) {
    const box = $("textarea", { class: "editbox", rows: Math.min(12, text.split("\n").length + 1), "aria-label": "The message, to send again" });
    box.value = text;
    const form = $("div", { class: "editagain" }, box);
    const close = () => { form.remove(); msg.hidden = false; };
    form.append($("div", { class: "buttons" },
      $("button", {
        type: "button", class: "primary sendagain", text: "Send",
        onclick: async () => { if (box.value.trim() && !this.run && (await this.post(box.value))) close(); },
      }),
      $("button", { type: "button", text: "Cancel", onclick: close })));
    msg.hidden = true;
    msg.after(form);
    box.focus();
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
    this.log.append(node);
    if (follow) this.log.scrollTop = this.log.scrollHeight;
    return node;
  }

  assistant() {
    if (!this.turn) {
      const turn = $("div", { class: "msg assistant" });
      turn.userText = this.lastUser;
      const answers = () => [...turn.querySelectorAll(".answer")].map((a) => a.mdSource || "").join("\n\n");
      turn.append(this.actions(turn, answers, null));
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
    switch (e.type) {
      case "run_started":
        if (!this.older) this.setRunning(s.run);
        break;
      case "user_input":
        if (e.origin === "machine") {
          this.machine(s.id, e.text || "");
          break;
        }
        if (!this.chat.title) {
          this.chat.title = firstLine(e.text);
          this.title.textContent = this.chat.title;
        }
        this.turn = null;
        this.text = null;
        this.lastUser = e.text;
        {
          const msg = $("div", { class: "msg user", text: e.text });
          msg.append(this.actions(msg, () => e.text, e.text));
          this.add(msg);
        }
        break;
      case "text_delta": {
        if (!this.text) {
          const node = $("div", { class: "md answer" });
          this.assistant().append(node);
          this.text = { node, src: "" };
        }
        this.text.src += e.text;
        this.text.node.mdSource = this.text.src;
        this.drawText();
        break;
      }
      case "reasoning_delta": {
        const turn = this.assistant();
        let r = turn.lastElementChild;
        if (!r || !r.classList.contains("reasoning")) {
          r = $("details", { class: "reasoning" }, $("summary", { text: "Reasoning" }), $("div"));
          turn.append(r);
          this.text = null;
        }
        r.lastElementChild.append(e.text);
        break;
      }
      case "model_answered":
        this.text = null;
        if (e.usage && !this.older) {
          this.ctx.used = (e.usage.input_tokens || 0) + (e.usage.output_tokens || 0);
          this.drawContext();
        }
        break;
      case "tool_call_started":
        this.toolStarted(e.call, e.block);
        break;
      case "tool_call_asked":
        this.asked(e);
        break;
      case "tool_call_answered": {
        const card = this.cards.get(e.call_id);
        if (card) {
          card.ask?.remove();
          const a = e.answer || {};
          card.state.textContent = a.answer === "deny" ? "refused" : a.answer === "always" ? "allowed always" : "allowed";
          if (a.answer === "deny") card.state.className = "state bad";
        }
        break;
      }
      case "edit": {
        const card = this.cards.get(e.call_id);
        if (card) {
          card.preview?.remove();
          card.node.append(diffView(e.before || "", e.after || ""));
        }
        break;
      }
      case "tool_output": {
        const card = this.cards.get(e.call_id);
        if (card) {
          if (!card.live) card.live = card.node.appendChild($("pre", { class: "live" }));
          card.live.append(e.text);
        }
        break;
      }
      case "tool_call_finished": {
        const r = e.result || {};
        const card = this.cards.get(r.call_id);
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
        this.text = null;
        break;
      }
      case "plan_changed": {
        // The newest page carries the plan as it is now: an older one's is history.
        if (this.older) break;
        const card = planCard(e.plan);
        const folded = this.plan && this.plan.querySelector("details") && !this.plan.querySelector("details").open;
        if (folded) card.querySelector("details")?.removeAttribute("open");
        if (this.plan) this.plan.replaceWith(card);
        else this.planSlot.append(card);
        this.plan = card;
        break;
      }
      case "mode_changed":
        if (this.older) break;
        this.chat.mode = e.mode;
        this.modeTag.value = e.mode;
        break;
      case "job_started": {
        const j = this.job(e.job_id);
        j.kind.textContent = e.kind === "command" ? "command" : "subagent";
        j.title.textContent = e.title || "";
        this.add($("p", { class: "notice jobnote", "data-job": e.job_id, text: `Job ${e.job_id} started: ${e.title}` }));
        break;
      }
      case "job_note":
        this.jobLine(this.job(e.job_id), s.id * 100, e.text || "");
        break;
      case "subagent_call":
        this.subagentCall(e);
        break;
      case "job_ended": {
        const j = this.jobEnded(this.job(e.job_id), e.end || {});
        this.add($("p", { class: "notice jobnote", "data-job": e.job_id, text: `Job ${e.job_id} ${j.endText}` }));
        break;
      }
      case "question":
        this.question(e);
        break;
      case "show":
        this.show(e);
        break;
      case "python":
        this.runPython(e);
        break;
      case "notice":
        this.add($("p", { class: `notice ${e.level === "warning" ? "error" : ""}`, text: e.text }));
        if (e.device_offline && this.deviceTag && !this.older) this.deviceTag.classList.replace("online", "offline");
        break;
      case "compacted":
        if (!this.older) {
          this.ctx.used = e.after_tokens;
          this.drawContext();
        }
        this.add($("p", { class: "notice", text: `Context compacted: ${e.before_tokens} → ${e.after_tokens} tokens` }));
        break;
      case "error":
        this.add($("p", { class: "notice error", text: e.message }));
        break;
      case "turn_ended": {
        const r = e.reason || {};
        if (r.kind === "error" || r.kind === "model_unavailable") this.add($("p", { class: "notice error", text: r.message }));
        else if (r.kind === "budget") this.add($("p", { class: "notice", text: `Stopped at the ${r.limit} limit.` }));
        else if (r.kind === "context_overflow") this.add($("p", { class: "notice error", text: "The context is full." }));
        this.turn = null;
        this.text = null;
        break;
      }
      case "run_ended":
        this.ended.add(e.run);
        if (e.status === "stopped") this.add($("p", { class: "notice", id: `stopped-${e.run}`, text: "Stopped." }));
        // A device chat's notice says why (the device went offline).
        else if (e.status === "interrupted" && !this.chat.device) this.add($("p", { class: "notice", text: "Interrupted (the server restarted)." }));
        if (!this.older && (this.run === e.run || !this.run)) this.setRunning(null);
        this.turn = null;
        this.text = null;
        break;
      default:
        break;
    }
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
    const node = $("div", { class: "job", "data-job": id, "data-state": "running" },
      $("div", { class: "head" }, $("span", { class: "name", text: `#${id}` }), kind, title, state), out);
    let at = this.jobsList.firstChild;
    while (at && Number(at.dataset.job) < Number(id)) at = at.nextSibling;
    this.jobsList.insertBefore(node, at);
    j = { id, node, kind, title, state, out, lines: [], status: "running", endText: "" };
    this.jobs.set(id, j);
    this.jobsPanel.hidden = false;
    this.drawJobsCount();
    return j;
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
    this.drawJobsCount();
    return j;
  }

  drawJobsCount() {
    const running = [...this.jobs.values()].filter((j) => j.status === "running").length;
    this.jobsCount.textContent = `${running} running · ${this.jobs.size - running} ended`;
    document.body.dataset.jobsRunning = String(running);
  }

  // A message the harness wrote to the agent (a job's end or report woke it): drawn as the job's
  // lines in its card, not as the person's words.
  machine(id, text) {
    this.turn = null;
    this.text = null;
    // One message may carry several marks (a report and the job's end, when both came while
    // the agent was busy); each goes to its job.
    const marks = /<job id="([^"]+)" kind="([^"]*)" state="([^"]*)">\n([^\n]*)\n([\s\S]*?)\n?<\/job>|<job-report id="([^"]+)">\n([\s\S]*?)\n?<\/job-report>/g;
    let found = 0;
    for (const m of text.matchAll(marks)) {
      found += 1;
      if (m[1] !== undefined) {
        const j = this.job(m[1]);
        if (j.title.textContent === `job ${m[1]}`) j.title.textContent = m[4];
        this.jobLine(j, id * 100 + found, m[5]);
      } else {
        this.jobLine(this.job(m[6]), id * 100 + found, m[7]);
      }
    }
    if (!found) this.add($("details", { class: "msg machine" }, $("summary", { text: "A message from the harness" }), $("pre", { text })));
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
  async view(path, kind, line) {
    const v = this.openViewer();
    v.name.textContent = path;
    if (kind === "html") {
      const frame = $("iframe", { class: "shown", sandbox: "allow-scripts", title: path, referrerpolicy: "no-referrer",
        src: `/show?path=${encodeURIComponent(path)}` });
      v.body.replaceChildren(frame);
      return;
    }
    const text = (await api("GET", `/api/files/content?path=${encodeURIComponent(path)}`)).content;
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
    const card = this.cards.get(e.call_id);
    const again = $("button", { type: "button", class: "reopen", text: `Open ${e.title || e.path}`,
      onclick: () => this.view(e.path, e.kind, e.line).catch((err) => { alertBox.textContent = err.message; }) });
    if (card) card.node.append($("div", { class: "shownfile" }, again));
    if (!this.live || !e.ask) return;
    let opened = true;
    try {
      await this.view(e.path, e.kind, e.line);
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
function firstLine(text) {
  const line = text.split("\n").map((l) => l.trim()).find((l) => l) || "";
  return [...line].slice(0, 80).join("");
}

// A name not in `taken`: `name`, else `stem (2).ext`, `stem (3).ext`, …
function freeName(name, taken) {
  if (!taken.has(name)) return name;
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  for (let n = 2; ; n++) {
    const next = `${stem} (${n})${ext}`;
    if (!taken.has(next)) return next;
  }
}

// ---------------------------------------------------------------------------------------------
// A mounted repository's state in the files tree: its branch and what is staged, not committed.
function gitMark(g) {
  if (g.state === "missing") return $("span", { class: "mark git", text: "not cloned" });
  const staged = g.staged ? ` · ${g.staged} staged` : "";
  return $("span", { class: "mark git", text: `${g.branch || "detached"} @ ${g.head}${staged}`, title: "the branch the mount's working tree is on, its commit, and the changes staged and not committed" });
}

// The files page: the user's view as a tree (levels, mounts and read-only entries marked), a
// file opened beside it, upload into and download from the view (its rules apply: a refusal is
// the view's own text).

const LEVEL_TITLE = { none: "not open", ro: "read only", stage: "read and change", commit: "read, change and commit" };

// A name as the page shows it: a text-direction control (which would show `inv\u202Etxt.exe` as
// "invexe.txt") is drawn as its code point instead of acting on the text around it.
const BIDI = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;
function shownName(name) {
  return name.replace(BIDI, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

async function filesPage() {
  let me;
  try {
    me = await api("GET", "/api/auth/me");
  } catch (e) {
    if (e.status === 401) {
      location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
      return;
    }
    throw e;
  }
  alertBox = $("div", { class: "notice error", role: "alert", id: "alert" });
  const tree = $("ul", { class: "tree", id: "tree" });
  const viewer = $("section", { class: "viewer", id: "viewer" }, $("p", { class: "muted", text: "Open a file to read it here." }));
  const here = $("code", { id: "here" });
  const upload = $("input", { type: "file", id: "upload", multiple: true, disabled: true, "aria-label": "Upload files" });
  let current = null; // the directory uploads go to: { path, children, level }
  const dirs = new Map();

  const choose = (d) => {
    if (current) current.row.classList.remove("chosen");
    current = d;
    d.row.classList.add("chosen");
    here.textContent = d.path;
    upload.disabled = !(d.level === "stage" || d.level === "commit");
  };

  const entryPath = (dir, name) => (dir === "/" ? `/${name}` : `${dir}/${name}`);

  async function load(d) {
    alertBox.textContent = "";
    let v;
    try {
      v = await api("GET", `/api/view?path=${encodeURIComponent(d.path)}`);
    } catch (e) {
      alertBox.textContent = e.message;
      return;
    }
    d.level = v.level;
    d.children.replaceChildren();
    for (const e of v.entries) {
      const path = entryPath(v.path, e.name);
      const marks = [];
      if (e.mount) marks.push($("span", { class: "mark mount", text: "mount" }));
      if (e.git) marks.push(gitMark(e.git));
      if (e.read_only) marks.push($("span", { class: "mark ro", text: "read-only" }));
      const level = $("span", { class: `level level-${e.level}`, text: e.passage ? "passage" : e.level, title: e.passage ? "a way through, not open itself" : LEVEL_TITLE[e.level] || e.level });
      if (e.kind === "dir") {
        const li = $("li", { class: "dir", "data-path": path });
        const toggle = $("button", { type: "button", class: "toggle", text: "▸", "aria-label": `Open ${shownName(e.name)}` });
        const name = $("button", { type: "button", class: "name", text: `${shownName(e.name)}/` });
        const row = $("div", { class: "row" }, toggle, name, level, ...marks);
        const children = $("ul");
        const sub = { path, children, row, level: e.level, open: false };
        dirs.set(path, sub);
        const flip = async () => {
          sub.open = !sub.open;
          toggle.textContent = sub.open ? "▾" : "▸";
          if (sub.open) await load(sub);
          else children.replaceChildren();
        };
        toggle.addEventListener("click", flip);
        name.addEventListener("click", async () => {
          choose(sub);
          if (!sub.open) await flip();
        });
        li.append(row, children);
        d.children.append(li);
      } else {
        const li = $("li", { class: "file", "data-path": path });
        const name = $("button", { type: "button", class: "name", text: shownName(e.name), title: shownName(e.name), onclick: () => open(path, e.size) });
        const down = $("button", { type: "button", class: "download", text: "↓", title: `Download ${shownName(e.name)}`, onclick: () => download(path) });
        li.append($("div", { class: "row" }, $("span", { class: "toggle" }), name, level, ...marks, down));
        d.children.append(li);
      }
      const li = d.children.lastElementChild;
      if (e.level === "stage" || e.level === "commit") changeButtons(d, li, e.name, path);
    }
    if (!v.entries.length) d.children.append($("li", { class: "muted", text: v.truncated ? "(too many entries to list)" : "(empty)" }));
  }

  async function read(path) {
    return (await api("GET", `/api/files/content?path=${encodeURIComponent(path)}`)).content;
  }

  const rawUrl = (path, inline) => `/api/files/raw?path=${encodeURIComponent(path)}${inline ? "&inline=1" : ""}`;
  const IMAGE = /\.(png|jpe?g|gif|webp|avif|bmp)$/i;

  function opened(path, body) {
    viewer.replaceChildren($("div", { class: "openedhead" },
      $("h3", { class: "opened", text: shownName(path) }),
      $("button", { type: "button", class: "download", text: "Download", onclick: () => download(path) })), body);
  }

  async function open(path, size) {
    alertBox.textContent = "";
    if (IMAGE.test(path)) {
      opened(path, $("img", { class: "shown-image", src: rawUrl(path, true), alt: shownName(path) }));
      return;
    }
    try {
      const text = await read(path);
      opened(path, /\.(md|markdown)$/i.test(path) ? markdown(text) : $("pre", { text }));
    } catch (e) {
      if (e.status !== 409 || !/binary|UTF-8/i.test(e.message)) {
        alertBox.textContent = e.message;
        return;
      }
      const bytes = size === undefined || size === null ? "" : `, ${size} bytes`;
      opened(path, $("p", { class: "binary" }, `binary file${bytes} — `,
        $("a", { href: rawUrl(path, false), download: "", class: "binarydownload", text: "Download" })));
    }
  }

  function download(path) {
    alertBox.textContent = "";
    const a = $("a", { href: rawUrl(path, false), download: "", class: "hidden-link" });
    document.body.append(a);
    a.click();
    a.remove();
    document.body.dataset.downloaded = path;
  }

  // Rename (✎: a line for the new name, Enter moves it) and delete (×, asked first: to the trash).
  function changeButtons(d, li, name, path) {
    const row = li.querySelector(":scope > .row");
    const rename = $("button", {
      type: "button", class: "rename", text: "✎", title: `Rename ${shownName(name)}`,
      onclick: () => {
        const input = $("input", { class: "newname", value: name, "aria-label": "New name" });
        const again = () => load(d);
        input.addEventListener("keydown", async (ev) => {
          if (ev.key === "Escape") { ev.preventDefault(); await again(); }
          if (ev.key !== "Enter") return;
          ev.preventDefault();
          const to = input.value.trim();
          if (!to || to === name) { await again(); return; }
          try {
            await api("POST", "/api/files/move", { from: path, to: to.startsWith("/") ? to : entryPath(d.path, to) });
            await again();
          } catch (err) { alertBox.textContent = err.message; }
        });
        row.replaceChildren($("span", { class: "toggle" }), input);
        input.focus();
        input.select();
      },
    });
    const del = $("button", {
      type: "button", class: "delete", text: "×", title: `Delete ${shownName(name)}`,
      onclick: () => {
        const yes = $("button", {
          type: "button", class: "danger confirm", text: "To the trash",
          onclick: async () => {
            try {
              await api("DELETE", `/api/files?path=${encodeURIComponent(path)}`);
              if (viewer.querySelector(".opened")?.textContent === shownName(path)) viewer.replaceChildren();
            } catch (err) { alertBox.textContent = err.message; }
            await load(d);
          },
        });
        row.replaceChildren($("span", { class: "toggle" }), $("span", { class: "muted", text: `Delete “${shownName(name)}”?` }), yes,
          $("button", { type: "button", text: "Keep", onclick: () => load(d) }));
      },
    });
    row.append(rename, del);
  }

  // The trash: what the user deleted from places they may change, each restorable; emptied for good.
  async function showTrash() {
    alertBox.textContent = "";
    let v;
    try {
      v = await api("GET", "/api/trash");
    } catch (e) {
      alertBox.textContent = e.message;
      return;
    }
    const list = $("ul", { class: "trash", id: "trashlist" });
    for (const item of v.items) {
      list.append($("li", { "data-path": item.path },
        $("code", { class: "trashpath", text: shownName(item.path), title: shownName(item.path) }),
        $("button", {
          type: "button", class: "restore", text: "Restore",
          onclick: async () => {
            try {
              await api("POST", `/api/trash/${encodeURIComponent(item.id)}/restore`);
              await reloadTree();
            } catch (e) { alertBox.textContent = e.message; }
            await showTrash();
          },
        })));
    }
    if (!v.items.length) list.append($("li", { class: "muted", text: "The trash is empty." }));
    const empty = $("button", {
      type: "button", class: "danger", id: "emptytrash", text: "Empty the trash", disabled: !v.items.length,
      onclick: () => {
        const yes = $("button", {
          type: "button", class: "danger confirm", text: "Delete for good",
          onclick: async () => {
            try { await api("DELETE", "/api/trash"); } catch (e) { alertBox.textContent = e.message; }
            await showTrash();
          },
        });
        empty.replaceWith($("span", { class: "muted", text: `Delete ${v.items.length} for good? ` }), yes,
          $("button", { type: "button", text: "Keep", onclick: showTrash }));
      },
    });
    viewer.replaceChildren($("h3", { class: "opened", text: "Trash" }), list, empty);
  }

  async function reloadTree() {
    for (const d of dirs.values()) if (d.open) await load(d);
  }

  upload.addEventListener("change", async () => {
    if (!current) return;
    alertBox.textContent = "";
    for (const f of upload.files) {
      const path = entryPath(current.path, f.name);
      const r = await fetch(`/api/files/content?path=${encodeURIComponent(path)}`, { method: "PUT", body: f, credentials: "same-origin" });
      if (!r.ok) {
        let msg = `${r.status}`;
        try { msg = (await r.json()).error || msg; } catch { /* not JSON */ }
        alertBox.textContent = msg;
      }
    }
    upload.value = "";
    if (current.open || current.path === "/") await load(current);
    document.body.dataset.uploaded = String(Number(document.body.dataset.uploaded || 0) + 1);
  });

  app.replaceChildren($("div", { class: "filespage" },
    $("div", { class: "chathead" }, $("a", { href: "/chats", text: "← Chats" }), $("h2", { text: `Files of ${me.username}` }),
      $("button", { type: "button", id: "trashlink", text: "Trash", onclick: showTrash })),
    alertBox,
    $("div", { class: "filesbody" },
      $("div", { class: "treepane" }, tree,
        $("div", { class: "uploadbar" }, $("label", { for: "upload" }, "Upload into ", here), upload)),
      viewer)));
  // The tree's top: the places the user's grants open; the home directory open and chosen.
  const top = await api("GET", "/api/view");
  const holder = { path: "", children: tree, row: null, level: "none", open: true };
  for (const r of top.roots) {
    const li = $("li", { class: "dir root", "data-path": r.path });
    const toggle = $("button", { type: "button", class: "toggle", text: "▸", "aria-label": `Open ${r.path}` });
    const name = $("button", { type: "button", class: "name", text: r.path });
    const marks = [];
    if (r.mount) marks.push($("span", { class: "mark mount", text: "mount" }));
    if (r.git) marks.push(gitMark(r.git));
    if (r.read_only) marks.push($("span", { class: "mark ro", text: "read-only" }));
    const row = $("div", { class: "row" }, toggle, name, $("span", { class: `level level-${r.level}`, text: r.level, title: LEVEL_TITLE[r.level] || r.level }), ...marks);
    const children = $("ul");
    const d = { path: r.path, children, row, level: r.level, open: false };
    dirs.set(r.path, d);
    const flip = async () => {
      d.open = !d.open;
      toggle.textContent = d.open ? "▾" : "▸";
      if (d.open) await load(d);
      else children.replaceChildren();
    };
    toggle.addEventListener("click", flip);
    name.addEventListener("click", async () => {
      choose(d);
      if (!d.open) await flip();
    });
    li.append(row, children);
    holder.children.append(li);
    if (r.path === top.home) {
      await flip();
      choose(d);
    }
  }
  if (!top.roots.length) tree.append($("li", { class: "muted", text: "No place is open to you yet: an admin grants them." }));
}

// ---------------------------------------------------------------------------------------------
// Settings: the user's personality preset, and the mode and model of a new chat; for an admin,
// the accounts (add, disable, role) and each account's grants. The page only calls the API.

const LEVELS = ["none", "ro", "stage", "commit"];

// A panel opened below a long table is scrolled to, not left below the window's edge.
function inView(panel) {
  panel.scrollIntoView({ block: "start" });
}
const ROLES = ["user", "admin", "pending"];

async function settingsPage() {
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
  alertBox = $("div", { class: "notice error", role: "alert", id: "alert" });
  const s = await api("GET", "/api/settings");
  const personality = $("select", { id: "personality" },
    ...s.personalities.map((p) => $("option", { value: p.name, text: p.title, selected: p.name === s.personality })));
  const mode = $("select", { id: "defaultmode" }, ...s.modes.map((m) => $("option", { value: m, text: m, selected: m === s.mode })));
  const model = $("select", { id: "defaultmodel" }, $("option", { value: "", text: "the server's default", selected: !s.model }),
    ...s.models.map((m) => $("option", { value: m, text: m, selected: m === s.model })));
  const saved = $("span", { class: "muted", id: "saved", role: "status" });
  const save = $("button", {
    class: "primary", type: "button", id: "savesettings", text: "Save",
    onclick: async () => {
      alertBox.textContent = "";
      saved.textContent = "";
      try {
        await api("PUT", "/api/settings", { personality: personality.value, mode: mode.value, model: model.value || null });
        saved.textContent = "Saved.";
        document.body.dataset.saved = String(Number(document.body.dataset.saved || 0) + 1);
      } catch (e) { alertBox.textContent = e.message; }
    },
  });
  const mine = $("section", { class: "settings", id: "mine" },
    $("h3", { text: "Your chats" }),
    $("label", { for: "personality", text: "Personality" }), personality,
    $("p", { class: "muted", text: "How the model talks to you, in every chat from its next message." }),
    $("label", { for: "defaultmode", text: "Mode of a new chat" }), mode,
    $("label", { for: "defaultmodel", text: "Model of a new chat" }), model,
    $("div", { class: "buttons" }, save, saved));
  const body = $("div", { class: "settingsbody" }, mine, passwordSection());
  if (me.role === "admin") body.append(await adminSection(me));
  app.replaceChildren($("div", { class: "settingspage" },
    $("div", { class: "chathead" }, $("a", { href: "/chats", text: "← Chats" }), $("h2", { text: "Settings" })),
    alertBox, body));
}

// The user's own password: the current one asked for; their other sign-ins end.
function passwordSection() {
  const current = $("input", { id: "curpass", type: "password", autocomplete: "current-password" });
  const fresh = $("input", { id: "freshpass", type: "password", autocomplete: "new-password" });
  const done = $("span", { class: "muted", id: "passdone", role: "status" });
  const change = $("button", {
    class: "primary", type: "button", id: "changepass", text: "Change password",
    onclick: async () => {
      alertBox.textContent = "";
      done.textContent = "";
      try {
        const v = await api("POST", "/api/auth/password", { current: current.value, new: fresh.value });
        current.value = "";
        fresh.value = "";
        done.textContent = `Changed; ${v.sessions_ended} other sign-in${v.sessions_ended === 1 ? "" : "s"} ended.`;
      } catch (e) { alertBox.textContent = e.message; }
    },
  });
  return $("section", { class: "settings", id: "password" },
    $("h3", { text: "Password" }),
    $("label", { for: "curpass", text: "Current password" }), current,
    $("label", { for: "freshpass", text: "New password (8 characters or more)" }), fresh,
    $("div", { class: "buttons" }, change, done));
}

// The MCP servers users' chats get, for an admin: listed, added (a program or a URL, for
// everyone or named users), removed.
async function adminMcp() {
  const list = $("table", { class: "mcp", id: "mcpservers" });
  const draw = async () => {
    let v;
    try { v = await api("GET", "/api/admin/mcp"); } catch (e) { alertBox.textContent = e.message; return; }
    list.replaceChildren($("tr", {}, $("th", { text: "Server" }), $("th", { text: "Runs" }), $("th", { text: "For" }), $("th")));
    for (const m of v.servers) {
      const runs = m.url ? m.url : [m.command, ...(m.args || [])].join(" ");
      const remove = $("button", {
        type: "button", class: "dropmcp", text: "Remove",
        onclick: async () => {
          alertBox.textContent = "";
          try { await api("DELETE", `/api/admin/mcp/${encodeURIComponent(m.name)}`); } catch (e) { alertBox.textContent = e.message; }
          await draw();
        },
      });
      const who = m.users ? m.users.join(", ") : "everyone";
      list.append($("tr", { "data-mcp": m.name }, $("td", { text: m.enabled ? m.name : `${m.name} (off)` }), $("td", { text: runs }), $("td", { text: who }), $("td", {}, remove)));
    }
  };
  const name = $("input", { id: "mcpname", autocomplete: "off", "aria-label": "MCP server's name", placeholder: "name" });
  const runs = $("input", { id: "mcpruns", autocomplete: "off", "aria-label": "Command line or URL", placeholder: "command and arguments, or https://…" });
  const token = $("input", { id: "mcptoken", autocomplete: "off", "aria-label": "Token variable", placeholder: "token variable (URL only)" });
  const users = $("input", { id: "mcpusers", autocomplete: "off", "aria-label": "Users", placeholder: "users (empty: everyone)" });
  const add = $("button", {
    class: "primary", type: "button", id: "addmcp", text: "Add server",
    onclick: async () => {
      alertBox.textContent = "";
      const line = runs.value.trim();
      const body = /^https?:\/\//.test(line)
        ? { url: line, bearer_token_env: token.value.trim() || null }
        : { command: line.split(/\s+/)[0], args: line.split(/\s+/).slice(1) };
      const named = users.value.split(/[\s,]+/).filter(Boolean);
      if (named.length) body.users = named;
      try {
        await api("PUT", `/api/admin/mcp/${encodeURIComponent(name.value.trim())}`, body);
        name.value = ""; runs.value = ""; token.value = ""; users.value = "";
        await draw();
      } catch (e) { alertBox.textContent = e.message; }
    },
  });
  await draw();
  return $("section", { class: "mcpadmin" },
    $("h3", { text: "MCP servers" }), list,
    $("div", { class: "addmcp" }, name, runs, token, users, add));
}

// The accounts and their grants, for an admin.
async function adminSection(me) {
  const list = $("table", { class: "users", id: "users" });
  const grants = $("section", { class: "grants", id: "grants" });
  const draw = async () => {
    let users;
    try { users = await api("GET", "/api/admin/users"); } catch (e) { alertBox.textContent = e.message; return; }
    list.replaceChildren($("tr", {}, $("th", { text: "User" }), $("th", { text: "Role" }), $("th", { text: "Disabled" }), $("th")));
    for (const u of users) {
      const self = u.id === me.id;
      const role = $("select", { class: "role", "aria-label": `Role of ${u.username}`, disabled: self },
        ...ROLES.map((r) => $("option", { value: r, text: r, selected: r === u.role })));
      const off = $("input", { type: "checkbox", class: "disabled", "aria-label": `${u.username} disabled`, checked: u.disabled, disabled: self });
      const change = async (v) => {
        alertBox.textContent = "";
        try {
          await api("PATCH", `/api/admin/users/${u.id}`, v);
          document.body.dataset.changed = String(Number(document.body.dataset.changed || 0) + 1);
        } catch (e) { alertBox.textContent = e.message; }
        await draw();
      };
      role.addEventListener("change", () => change({ role: role.value }));
      off.addEventListener("change", () => change({ disabled: off.checked }));
      const open = $("button", { type: "button", class: "opengrants", text: "Grants", onclick: () => editGrants(u) });
      const reset = $("button", { type: "button", class: "resetpass", text: "Password", disabled: self, onclick: () => resetPassword(u) });
      const remove = $("button", {
        type: "button", class: "deleteuser", text: "Delete", disabled: self,
        onclick: async () => {
          if (!confirm(`Delete ${u.username}? Their chats go, their home goes to the trash.`)) return;
          alertBox.textContent = "";
          try { await api("DELETE", `/api/admin/users/${u.id}`); } catch (e) { alertBox.textContent = e.message; }
          await draw();
        },
      });
      list.append($("tr", { "data-user": u.username }, $("td", { text: u.username }), $("td", {}, role), $("td", {}, off), $("td", {}, open, reset, remove)));
    }
  };
  // A user's password set anew: their sessions and tokens end.
  const resetPassword = (u) => {
    alertBox.textContent = "";
    const pass = $("input", { type: "password", id: "resetpass", autocomplete: "new-password", "aria-label": `New password of ${u.username}` });
    const set = $("button", {
      class: "primary", type: "button", id: "setpass", text: "Set password",
      onclick: async () => {
        alertBox.textContent = "";
        try {
          await api("POST", `/api/admin/users/${u.id}/password`, { password: pass.value });
          grants.replaceChildren($("p", { class: "muted", role: "status", text: `The password of ${u.username} is set; their sign-ins and tokens ended.` }));
        } catch (e) { alertBox.textContent = e.message; }
      },
    });
    grants.replaceChildren($("h4", { text: `Password of ${u.username}` }), pass, $("div", { class: "buttons" }, set));
    inView(grants);
  };
  const editGrants = async (u) => {
    alertBox.textContent = "";
    let v;
    try { v = await api("GET", `/api/admin/users/${u.id}/grants`); } catch (e) { alertBox.textContent = e.message; return; }
    const rows = $("div", { class: "rows" });
    const row = (g) => {
      const path = $("input", { class: "path", value: g.path, "aria-label": "Path", placeholder: "/home/NAME" });
      const level = $("select", { class: "level", "aria-label": "Level" }, ...LEVELS.map((l) => $("option", { value: l, text: l, selected: l === g.level })));
      const r = $("div", { class: "grant" }, path, level, $("button", { type: "button", class: "drop", text: "×", title: "Remove", onclick: () => r.remove() }));
      rows.append(r);
    };
    v.grants.forEach(row);
    const saveGrants = $("button", {
      class: "primary", type: "button", id: "savegrants", text: "Save grants",
      onclick: async () => {
        alertBox.textContent = "";
        const list = [...rows.querySelectorAll(".grant")].map((r) => ({ path: r.querySelector(".path").value.trim(), level: r.querySelector(".level").value }))
          .filter((g) => g.path);
        try {
          await api("PUT", `/api/admin/users/${u.id}/grants`, { grants: list });
          document.body.dataset.granted = String(Number(document.body.dataset.granted || 0) + 1);
          await editGrants(u);
        } catch (e) { alertBox.textContent = e.message; }
      },
    });
    grants.replaceChildren($("h4", { text: `Grants of ${u.username}` }), rows,
      $("div", { class: "buttons" }, $("button", { type: "button", id: "addgrant", text: "Add a path", onclick: () => row({ path: "", level: "ro" }) }), saveGrants));
    inView(grants);
  };
  const name = $("input", { id: "newuser", autocomplete: "off", "aria-label": "New user's name", placeholder: "name" });
  const pass = $("input", { id: "newpass", type: "password", autocomplete: "new-password", "aria-label": "New user's password", placeholder: "password" });
  const role = $("select", { id: "newrole", "aria-label": "New user's role" }, ...ROLES.map((r) => $("option", { value: r, text: r })));
  const add = $("button", {
    class: "primary", type: "button", id: "adduser", text: "Add user",
    onclick: async () => {
      alertBox.textContent = "";
      try {
        await api("POST", "/api/admin/users", { username: name.value.trim(), password: pass.value, role: role.value });
        name.value = "";
        pass.value = "";
        await draw();
        document.body.dataset.added = String(Number(document.body.dataset.added || 0) + 1);
      } catch (e) { alertBox.textContent = e.message; }
    },
  });
  await draw();
  return $("section", { class: "settings admin", id: "admin" },
    $("h3", { text: "Users" }), list,
    $("div", { class: "adduser" }, name, pass, role, add),
    grants, await adminMcp(), await adminMounts());
}

// The repositories mounted into the tree, for an admin: listed with their state, mounted (a git
// URL, a forge's kind and address, the token's variable by name), unmounted.
async function adminMounts() {
  const list = $("table", { class: "mcp", id: "mounts" });
  const draw = async () => {
    let v;
    try { v = await api("GET", "/api/admin/mounts"); } catch (e) { alertBox.textContent = e.message; return; }
    list.replaceChildren($("tr", {}, $("th", { text: "Path" }), $("th", { text: "Remote" }), $("th", { text: "Forge" }), $("th", { text: "State" }), $("th")));
    for (const m of v.mounts) {
      const remove = $("button", {
        type: "button", class: "dropmount", text: "Unmount",
        onclick: async () => {
          alertBox.textContent = "";
          try { await api("DELETE", `/api/admin/mounts${m.path}`); } catch (e) { alertBox.textContent = e.message; }
          await draw();
        },
      });
      const state = m.state === "cloned" ? `${m.checked_out || "detached"} @ ${(m.head || "").slice(0, 12)}` : m.state;
      list.append($("tr", { "data-mount": m.path }, $("td", { text: m.path }), $("td", { text: m.url }), $("td", { text: m.forge === "none" ? "git only" : `${m.forge} ${m.repo || ""}` }), $("td", { text: state }), $("td", {}, remove)));
    }
  };
  const path = $("input", { id: "mountpath", autocomplete: "off", "aria-label": "Path in the tree", placeholder: "/repos/site" });
  const url = $("input", { id: "mounturl", autocomplete: "off", "aria-label": "Git URL", placeholder: "https://forge.example/owner/repo.git" });
  const forge = $("select", { id: "mountforge", "aria-label": "Forge" },
    $("option", { value: "none", text: "git only" }), $("option", { value: "forgejo", text: "Forgejo" }), $("option", { value: "gitea", text: "Gitea" }));
  const apiBase = $("input", { id: "mountapi", autocomplete: "off", "aria-label": "Forge address", placeholder: "forge address (https://forge.example)" });
  const token = $("input", { id: "mounttoken", autocomplete: "off", "aria-label": "Token variable", placeholder: "token variable" });
  const add = $("button", {
    class: "primary", type: "button", id: "addmount", text: "Mount",
    onclick: async () => {
      alertBox.textContent = "";
      const body = { url: url.value.trim(), forge: forge.value };
      if (apiBase.value.trim()) body.api = apiBase.value.trim();
      if (token.value.trim()) body.token_env = token.value.trim();
      const at = "/" + path.value.trim().replace(/^\/+/, "");
      try {
        await api("PUT", `/api/admin/mounts${at}`, body);
        path.value = ""; url.value = ""; apiBase.value = ""; token.value = ""; forge.value = "none";
        await draw();
      } catch (e) { alertBox.textContent = e.message; }
    },
  });
  await draw();
  return $("section", { class: "mcpadmin" },
    $("h3", { text: "Mounted repositories" }), list,
    $("div", { class: "addmcp" }, path, url, forge, apiBase, token, add));
}


// ---------------------------------------------------------------------------------------------
// Linked devices: confirm a pairing code (`llembas link URL` prints it), the list, revoke.

function ago(seconds) {
  if (!seconds) return "never";
  const d = Math.max(0, Math.round(Date.now() / 1000 - seconds));
  if (d < 60) return "just now";
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  return new Date(seconds * 1000).toLocaleString();
}

async function devicesPage() {
  try {
    await api("GET", "/api/auth/me");
  } catch (e) {
    if (e.status === 401) {
      location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
      return;
    }
    throw e;
  }
  alertBox = $("div", { class: "notice error", role: "alert", id: "alert" });
  const code = $("input", { id: "usercode", autocomplete: "off", placeholder: "XXXX-XXXX",
    value: new URLSearchParams(location.search).get("code") || "" });
  const name = $("input", { id: "devicename", autocomplete: "off", placeholder: "my laptop" });
  const done = $("span", { class: "muted", id: "paired", role: "status" });
  const list = $("table", { class: "users", id: "devices" });
  const draw = async () => {
    let devices;
    try { devices = await api("GET", "/api/devices"); } catch (e) { alertBox.textContent = e.message; return; }
    list.replaceChildren($("tr", {}, $("th", { text: "Device" }), $("th", { text: "State" }),
      $("th", { text: "Shares" }), $("th")));
    for (const d of devices) {
      const roots = d.limits && Array.isArray(d.limits.roots) ? d.limits.roots : null;
      const shares = roots === null ? "—" : roots.length === 0 ? "remote work off" : roots.join(", ");
      const revoke = $("button", { type: "button", class: "danger", text: "Revoke",
        onclick: async () => {
          if (!confirm(`Revoke ${d.name}? It must be paired again to link.`)) return;
          try { await api("DELETE", `/api/devices/${encodeURIComponent(d.id)}`); } catch (e) { alertBox.textContent = e.message; }
          await draw();
        } });
      list.append($("tr", { "data-device": d.id },
        $("td", { text: d.name }),
        $("td", { class: d.online ? "online" : "muted", text: d.online ? "online" : `offline, last seen ${ago(d.last_seen)}` }),
        $("td", { text: shares }),
        $("td", {}, revoke)));
    }
    if (devices.length === 0) list.append($("tr", {}, $("td", { colspan: "4", class: "muted", text: "No device linked yet." })));
    document.body.dataset.devices = String(devices.length);
  };
  const answer = (approve) => async () => {
    alertBox.textContent = "";
    done.textContent = "";
    try {
      if (approve) {
        const v = await api("POST", "/api/devices/confirm", { user_code: code.value, name: name.value || null });
        done.textContent = `Linked ${v.name}: it connects in a few seconds.`;
      } else {
        await api("POST", "/api/devices/deny", { user_code: code.value });
        done.textContent = "Refused.";
      }
      code.value = "";
      await draw();
    } catch (e) { alertBox.textContent = e.message; }
  };
  const pairing = $("section", { class: "settings", id: "pairing" },
    $("h3", { text: "Link a device" }),
    $("p", { class: "muted", text: "Run `llembas link " + location.origin + "` on the machine, then enter the code it prints." }),
    $("label", { for: "usercode", text: "Code" }), code,
    $("label", { for: "devicename", text: "Name (optional)" }), name,
    $("div", { class: "buttons" },
      $("button", { class: "primary", type: "button", id: "confirmdevice", text: "Link it", onclick: answer(true) }),
      $("button", { type: "button", id: "denydevice", text: "Refuse", onclick: answer(false) }), done));
  const mine = $("section", { class: "settings", id: "mydevices" }, $("h3", { text: "Your devices" }), list);
  app.replaceChildren($("div", { class: "settingspage" },
    $("div", { class: "chathead" }, $("a", { href: "/chats", text: "← Chats" }), $("h2", { text: "Devices" })),
    alertBox, $("div", { class: "settingsbody" }, pairing, mine)));
  await draw();
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const path = location.pathname;
  try {
    if (path === "/login") signIn();
    else if (path === "/" || path === "/chats" || path === "/chats/") await chatPage(null);
    else if (path.startsWith("/chats/")) await chatPage(decodeURIComponent(path.slice("/chats/".length)));
    else if (path === "/files") await filesPage();
    else if (path === "/settings") await settingsPage();
    else if (path === "/devices") await devicesPage();
    else location.replace("/chats");
  } catch (e) {
    app.replaceChildren($("p", { class: "error", text: `The page failed: ${e.message}` }));
  }
  document.body.dataset.ready = "yes";
}

main();
