// Images sent with a message: attached or pasted in the composer, each uploaded to the person's
// home first (through the files API, a name taken gets a free one) and kept in a tray above the
// message box until it is sent; the server reads them from there and sends them to the model
// (a model that does not read images is refused, with its reason in the alert line).

import { $, api } from "./dom.js";

// The image types a model reads, by extension.
const IMAGE = /\.(png|jpe?g|gif|webp)$/i;
// The paste's file name by its type.
const PASTED = { "image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp" };

// The page's URL of an image of the person's view.
export const imageSrc = (path) => `/api/files/raw?path=${encodeURIComponent(path)}&inline=1`;

// Whether a file is an image sent to the model rather than named in the message.
export const isImage = (file) => IMAGE.test(file.name) && file.type.startsWith("image/");

// The names in the home now (an upload never replaces one).
export async function takenNames() {
  return new Set((await api("GET", "/api/files")).entries.map((e) => e.name));
}

// A name not in `taken`: `name`, else `stem (2).ext`, `stem (3).ext`, …
export function freeName(name, taken) {
  if (!taken.has(name)) return name;
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  for (let n = 2; ; n++) {
    const next = `${stem} (${n})${ext}`;
    if (!taken.has(next)) return next;
  }
}

// Uploads `blob` to the home as `name` (or a free name beside it): its path.
export async function upload(name, blob, taken) {
  const free = freeName(name, taken);
  taken.add(free);
  const r = await fetch(`/api/files/content?path=${encodeURIComponent(free)}`, { method: "PUT", body: blob, credentials: "same-origin" });
  let v = null;
  try { v = await r.json(); } catch { /* not JSON */ }
  if (!r.ok) throw new Error((v && v.error) || `${r.status}`);
  return v.path;
}

// The tray of images going with the next message.
export class ImageTray {
  constructor(onError) {
    this.onError = onError;
    this.list = [];
    this.node = $("div", { class: "imagetray", id: "imagetray", hidden: true });
  }

  add(path) {
    this.list.push(path);
    const chip = $("span", { class: "imagechip", "data-path": path },
      $("img", { src: imageSrc(path), alt: path.split("/").pop() }));
    chip.append($("button", { type: "button", class: "dropimage", title: `Leave out ${path}`, text: "×",
      onclick: () => { this.list = this.list.filter((p) => p !== path); chip.remove(); this.node.hidden = !this.list.length; } }));
    this.node.append(chip);
    this.node.hidden = false;
    document.body.dataset.images = String(this.list.length);
  }

  paths() {
    return [...this.list];
  }

  clear() {
    this.list = [];
    this.node.replaceChildren();
    this.node.hidden = true;
    document.body.dataset.images = "0";
  }

  // Uploads image files (attached or pasted) and adds them.
  async addFiles(files) {
    let taken;
    try { taken = await takenNames(); } catch (e) { this.onError(e.message); return; }
    for (const f of files) {
      const ext = PASTED[f.type] || "png";
      const name = f.name && IMAGE.test(f.name) ? f.name : `pasted-${new Date().toISOString().replace(/[:.]/g, "-")}.${ext}`;
      try { this.add(await upload(name, f, taken)); } catch (e) { this.onError(e.message); }
    }
  }

  // A paste into the message box: its images go to the tray; text pastes as text.
  pasted(ev) {
    const files = [...(ev.clipboardData?.items || [])]
      .filter((i) => i.kind === "file" && PASTED[i.type])
      .map((i) => i.getAsFile())
      .filter((f) => f);
    if (!files.length) return;
    ev.preventDefault();
    this.addFiles(files);
  }
}

// The images a person's message carried, drawn under it.
export function messageImages(paths) {
  return $("div", { class: "msgimages" }, ...paths.map((p) => $("img", { class: "mdimage", src: imageSrc(p), alt: p.split("/").pop(), title: p })));
}
