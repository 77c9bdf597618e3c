// A message's actions: copy it, and send the person's again — edited, or as a regenerate of
// the model's answer to it — in its place (the chat goes back to before it first).

import { $ } from "./dom.js";

// A message's buttons, drawn by the style sheet (no text of their own: a message's text is
// only its words): copy its text, and for the person's a line to edit it and send it again, for
// the model's a regenerate (its person's message sent again).
export function messageActions(view, msg, textOf, user) {
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
      type: "button", class: "act regenerate", title: "Regenerate", "aria-label": "Regenerate: send the message before it again, in its place",
      onclick: () => { if (!view.run && msg.userText) view.post(msg.userText, [], backTo(view, msg.userRun, true)); },
    }));
  } else {
    bar.append($("button", {
      type: "button", class: "act editmsg", title: "Edit and send again", "aria-label": "Edit the message and send it in its place",
      onclick: () => editAgain(view, msg, user),
    }));
  }
  return bar;
}

// How a message sent again replaces the one of `run`: the chat goes back to before it (the
// files too when `code`). A chat on a device keeps its history and sends a new message.
function backTo(view, run, code) {
  return run && !view.chat.device ? { from: run, code } : null;
}

// The person's message in a box to change it; Send goes back to before it (the files its
// chat changed since too, unless unticked) and sends the new text in its place.
function editAgain(view, msg, text) {
  const box = $("textarea", { class: "editbox", rows: Math.min(12, text.split("\n").length + 1), "aria-label": "The message, to send again" });
  box.value = text;
  const form = $("div", { class: "editagain" }, box);
  const close = () => { form.remove(); msg.hidden = false; };
  const files = $("input", { type: "checkbox", class: "putback", checked: true });
  if (backTo(view, msg.run, true)) {
    form.append($("label", { class: "putback", title: "Put the files the chat changed from this message on back as they were" },
      files, " Put back the files changed since"));
  }
  form.append($("div", { class: "buttons" },
    $("button", {
      type: "button", class: "primary sendagain", text: "Send",
      onclick: async () => { if (box.value.trim() && !view.run && (await view.post(box.value, [], backTo(view, msg.run, files.checked)))) close(); },
    }),
    $("button", { type: "button", text: "Cancel", onclick: close })));
  msg.hidden = true;
  msg.after(form);
  box.focus();
}
