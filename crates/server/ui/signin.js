// The sign-in page.

import { $, api, app } from "./dom.js";
// ---------------------------------------------------------------------------------------------
// Sign-in.

export function signIn() {
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
