// The chat list (the side bar) and what a chat's cards draw besides its events: the plan, a
// call's subject, the change a permission question is about.

import { firstLine } from "./app.js";
import { $, alertLine, api } from "./dom.js";
import { diffView } from "./render.js";
// ---------------------------------------------------------------------------------------------
// The chat list (the side bar) and a chat.

export const MODES = ["manual", "edit", "auto", "plan"];

export function sideBar(me, chats, current, layout) {
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

export let sideBarFollow = () => {};

export const TASK_MARK = { todo: "☐", doing: "▶", done: "✓", dropped: "✗" };

// The plan card: phases and their tasks with their status, redrawn whenever the plan changes.
export function planCard(plan) {
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
export function callSubject(block, call) {
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
export function base64(bytes) {
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

export function proposed(block, call) {
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
