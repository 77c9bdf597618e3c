// A chat written out by its owner: the chat head's Export and Share controls, and the page a
// share link opens (`/shared/TOKEN`), read-only, with no sign-in, marked as a shared copy.

import { $, alertBox, api, app } from "./dom.js";
import { markdown } from "./render.js";

// The page of a share link: the copy its owner shared, drawn by the same Markdown renderer as
// the chat (nothing in it is parsed as HTML), under a banner that says what it is.
export async function sharedPage(token) {
  let v;
  try {
    v = await api("GET", `/api/shared/${encodeURIComponent(token)}`);
  } catch (e) {
    app.replaceChildren($("main", { class: "shared" },
      $("p", { class: "notice error", id: "sharegone", text: e.status === 404 ? "This shared chat does not exist, or its owner stopped sharing it." : e.message })));
    return;
  }
  document.title = `${v.title || "Shared chat"} · shared`;
  const when = new Date(v.created * 1000).toLocaleString();
  const banner = $("p", { class: "sharebanner", id: "sharebanner", role: "note",
    text: `Shared chat, read-only: a copy ${v.by} shared on ${when}. Tool results are left out.` });
  const body = $("article", { class: "sharedbody", id: "shared" }, ...markdown(v.markdown).childNodes);
  app.replaceChildren($("main", { class: "shared" }, banner, body));
}

// The chat head's controls: Export (Markdown or JSON, a download) and Share (a read-only link
// the owner copies, makes anew or ends). A device chat keeps its transcript on the device: the
// server answers why, shown in the alert line.
export function shareControls(chat) {
  const id = encodeURIComponent(chat.id);
  const exportMenu = $("select", { id: "export", class: "tag", "aria-label": "Export", title: "Export this chat" },
    $("option", { value: "", text: "Export", selected: true }),
    $("option", { value: "markdown", text: "Markdown" }),
    $("option", { value: "json", text: "JSON" }));
  exportMenu.addEventListener("change", async () => {
    const format = exportMenu.value;
    exportMenu.value = "";
    if (!format) return;
    alertBox.textContent = "";
    const r = await fetch(`/api/chats/${id}/export?format=${format}`, { credentials: "same-origin" });
    if (!r.ok) {
      let v = null;
      try { v = await r.json(); } catch { /* not JSON */ }
      alertBox.textContent = (v && v.error) || `${r.status}`;
      return;
    }
    const name = /filename="([^"]*)"/.exec(r.headers.get("content-disposition") || "");
    const a = $("a", { href: URL.createObjectURL(await r.blob()), download: name ? name[1] : `chat.${format}` });
    a.click();
    URL.revokeObjectURL(a.href);
    document.body.dataset.exported = format;
  });
  const link = $("input", { id: "sharelink", readonly: true, "aria-label": "Share link" });
  const stop = $("button", { type: "button", id: "unshare", text: "Stop sharing" });
  const copy = $("button", { type: "button", id: "copyshare", text: "Copy" });
  const panel = $("div", { class: "sharepanel", id: "sharepanel", hidden: true },
    $("span", { class: "muted", id: "sharestate" }), link, copy, stop);
  const state = (text) => { panel.querySelector("#sharestate").textContent = text; };
  const share = $("button", { type: "button", id: "share", class: "tag", text: "Share" });
  share.addEventListener("click", async () => {
    alertBox.textContent = "";
    try {
      const v = await api("POST", `/api/chats/${id}/share`);
      link.value = new URL(v.url, location.origin).href;
      link.hidden = copy.hidden = false;
      state("Anyone with this link can read a copy of this chat as it is now (tool results left out):");
      panel.hidden = false;
      stop.hidden = false;
      document.body.dataset.shared = "yes";
    } catch (e) {
      alertBox.textContent = e.message;
    }
  });
  copy.addEventListener("click", () => navigator.clipboard?.writeText(link.value).catch(() => {}));
  stop.addEventListener("click", async () => {
    alertBox.textContent = "";
    try {
      await api("DELETE", `/api/chats/${id}/share`);
      link.value = "";
      link.hidden = copy.hidden = stop.hidden = true;
      state("Not shared: the link no longer opens.");
      document.body.dataset.shared = "no";
    } catch (e) {
      alertBox.textContent = e.message;
    }
  });
  // Shared before: the link is not shown again (only its hash is kept); it may be ended or made anew.
  api("GET", `/api/chats/${id}/share`).then((v) => {
    if (v.shared) {
      link.hidden = copy.hidden = true;
      state(`Shared since ${new Date(v.shared * 1000).toLocaleString()}. Share again for a new link (the old one ends).`);
      panel.hidden = false;
    }
  }).catch(() => {});
  return { controls: [exportMenu, share], panel };
}
