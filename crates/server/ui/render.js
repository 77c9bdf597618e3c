// What a model or a tool wrote, drawn as DOM nodes: Markdown (blocks and inlines), code
// highlighted, tables, diffs. Nothing of it is ever parsed as HTML.

import { $ } from "./dom.js";
// ---------------------------------------------------------------------------------------------
// Markdown, safely: a block parser and an inline parser that build DOM nodes.

export const SAFE_URL = /^(https?:|mailto:|\/|#|\.)/i;

// An image of a message: a file of the user's own view (through the raw route, which shows
// only raster images inline) or a data: URL of a raster image; never a remote address (the
// page's CSP forbids those anyway). Anything else: null, and the Markdown stays text.
export const DATA_IMAGE = /^data:image\/(png|jpeg|gif|webp|avif|bmp);base64,[A-Za-z0-9+/=]+$/;
export function image(alt, url) {
  let src = null;
  if (DATA_IMAGE.test(url)) src = url;
  else if (!/^[a-z][a-z0-9+.-]*:|^\/\//i.test(url)) src = `/api/files/raw?path=${encodeURIComponent(url)}&inline=1`;
  if (!src) return null;
  return $("img", { class: "mdimage", src, alt, title: alt || null, loading: "lazy" });
}

export function inline(text) {
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

export const WORDS = {
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
export const LANG = {
  rs: "rust", rust: "rust", js: "js", javascript: "js", ts: "js", typescript: "js", jsx: "js",
  tsx: "js", mjs: "js", py: "python", python: "python", python3: "python", go: "go",
  golang: "go", c: "c", h: "c", cpp: "c", "c++": "c", cc: "c", hpp: "c", java: "java",
  kotlin: "java", kt: "java", cs: "java", csharp: "java", swift: "java", sh: "sh", bash: "sh",
  shell: "sh", zsh: "sh", console: "sh", sql: "sql", json: "json", jsonc: "json",
  toml: "toml", yaml: "toml", yml: "toml", ini: "toml",
};
export const DQ = String.raw`"(?:\\.|[^"\\\n])*"`;
export const SQ = String.raw`'(?:\\.|[^'\\\n])*'`;
export const BQ = String.raw`\x60(?:\\[\s\S]|[^\x60\\])*\x60`;
export const SLASH = String.raw`\/\/[^\n]*|\/\*[\s\S]*?\*\/`;
export const HASH = String.raw`#[^\n]*`;
// In a shell a comment starts a word: `${#list}` and `a#b` are none.
export const SH_HASH = String.raw`(?<![^\s;&|(])#[^\n]*`;
export const SYNTAX = {
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
export const NUMBER = String.raw`\b(?:0[xob][\da-fA-F_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?)(?:[a-z]\w*)?\b`;
// Longer code is drawn plain: highlighting it again at every streamed piece would cost.
export const HIGHLIGHT_MAX = 100000;
export const tokenizers = new Map();

export function tokenizer(lang) {
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

export function codeBlock(code, lang) {
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
export const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
export function cells(line) {
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

export function diffLines(before, after) {
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

export function diffView(before, after) {
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
export function unifiedView(text) {
  const pre = $("pre", { class: "diff" });
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const head = line.startsWith("+++") || line.startsWith("---") || line.startsWith("@@");
    const kind = head ? "ctx muted" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append($("span", { class: kind, text: line }));
  }
  return pre;
}
