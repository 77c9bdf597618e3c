// The LLeMbas pages: sign-in, the chat list and the chat, in one hand-written module.
//
// Safety: nothing a model, a tool or a user wrote is ever parsed as HTML here. Every element is
// made with createElement and filled with textContent; Markdown is turned into DOM nodes by the
// small renderer below, so a model's `<script>` or `onerror=` is shown as text and never runs
// (the pages' Content-Security-Policy forbids inline script besides).

export const $ = (tag, attrs = {}, ...kids) => {
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

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(method, path, body) {
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

export const app = document.getElementById("app");

// The page's alert line: the element each page shows errors in (set when the page is drawn).
export let alertBox = null;
export function setAlertBox(element) {
  alertBox = element;
}
export function alertLine(text) {
  if (alertBox) alertBox.textContent = text;
}
