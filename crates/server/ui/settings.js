// Settings: the user's personality preset, and the mode and model of a new chat; for an admin,
// the accounts (add, disable, role) and each account's grants. The page only calls the API.

import { $, alertBox, api, app, setAlertBox } from "./dom.js";
export const LEVELS = ["none", "ro", "stage", "commit"];

// A panel opened below a long table is scrolled to, not left below the window's edge.
export function inView(panel) {
  panel.scrollIntoView({ block: "start" });
}
export const ROLES = ["user", "admin", "pending"];

export async function settingsPage() {
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
  setAlertBox($("div", { class: "notice error", role: "alert", id: "alert" }));
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
export function passwordSection() {
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
export async function adminMcp() {
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
export async function adminSection(me) {
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
      // Fetch now: the branch moves forward when no chat has changes in the working tree.
      const fetchNow = $("button", {
        type: "button", class: "fetchmount", text: "Fetch",
        onclick: async () => {
          alertBox.textContent = "";
          try {
            const f = await api("POST", `/api/admin/mounts${m.path}`);
            if (f.fetched && f.fetched.behind > 0) {
              alertBox.textContent = `${m.path}: fetched; ${f.fetched.behind} commit(s) behind the remote, not moved: chats have changes in its working tree.`;
            }
          } catch (e) { alertBox.textContent = e.message; }
          await draw();
        },
      });
      const state = m.state === "cloned" ? `${m.checked_out || "detached"} @ ${(m.head || "").slice(0, 12)}` : m.state;
      list.append($("tr", { "data-mount": m.path }, $("td", { text: m.path }), $("td", { text: m.url }), $("td", { text: m.forge === "none" ? "git only" : `${m.forge} ${m.repo || ""}` }), $("td", { text: state }), $("td", {}, fetchNow, " ", remove)));
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
