// The files page: the user's view as a tree (levels, mounts and read-only entries marked), a
// file opened beside it, upload into and download from the view (its rules apply: a refusal is
// the view's own text).

import { $, alertBox, api, app, setAlertBox } from "./dom.js";
import { inline, markdown } from "./render.js";
export const LEVEL_TITLE = { none: "not open", ro: "read only", stage: "read and change", commit: "read, change and commit" };

// A name as the page shows it: a text-direction control (which would show `inv\u202Etxt.exe` as
// "invexe.txt") is drawn as its code point instead of acting on the text around it.
export const BIDI = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;
export function shownName(name) {
  return name.replace(BIDI, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
}

// A mounted repository's state in the files tree: its branch and what is staged, not committed.
function gitMark(g) {
  if (g.state === "missing") return $("span", { class: "mark git", text: "not cloned" });
  const staged = g.staged ? ` · ${g.staged} staged` : "";
  return $("span", { class: "mark git", text: `${g.branch || "detached"} @ ${g.head}${staged}`, title: "the branch the mount's working tree is on, its commit, and the changes staged and not committed" });
}

export async function filesPage() {
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
  setAlertBox($("div", { class: "notice error", role: "alert", id: "alert" }));
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
