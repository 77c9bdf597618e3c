// Linked devices: confirm a pairing code (`llembas link URL` prints it), the list, revoke.

import { $, alertBox, api, app, setAlertBox } from "./dom.js";
export function ago(seconds) {
  if (!seconds) return "never";
  const d = Math.max(0, Math.round(Date.now() / 1000 - seconds));
  if (d < 60) return "just now";
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400) return `${Math.round(d / 3600)} h ago`;
  return new Date(seconds * 1000).toLocaleString();
}

export async function devicesPage() {
  try {
    await api("GET", "/api/auth/me");
  } catch (e) {
    if (e.status === 401) {
      location.assign(`/login?next=${encodeURIComponent(location.pathname + location.search)}`);
      return;
    }
    throw e;
  }
  setAlertBox($("div", { class: "notice error", role: "alert", id: "alert" }));
  const code = $("input", { id: "usercode", autocomplete: "off", placeholder: "XXXX-XXXX",
    value: new URLSearchParams(location.search).get("code") || "" });
  const name = $("input", { id: "devicename", autocomplete: "off", placeholder: "my laptop" });
  const done = $("span", { class: "muted", id: "paired", role: "status" });
  const list = $("table", { class: "users", id: "devices" });
  let drawn = null;
  const draw = async () => {
    let devices;
    try { devices = await api("GET", "/api/devices"); } catch (e) { alertBox.textContent = e.message; return; }
    // Drawn again only when it changed (a button about to be clicked stays).
    const seen = JSON.stringify(devices.map((d) => ({ ...d, last_seen: d.online ? null : d.last_seen })));
    if (seen === drawn) return;
    drawn = seen;
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
      name.value = "";
      await draw();
    } catch (e) { alertBox.textContent = e.message; }
  };
  const pairing = $("section", { class: "settings", id: "pairing" },
    $("h3", { text: "Link a device" }),
    $("p", { class: "muted" }, "Run ", $("code", { text: `llembas link ${location.origin}` }), " on the machine, then enter the code it prints."),
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
  // A device linked a moment after its code was confirmed, or dropped, shows so without a
  // reload: the list is asked again while the page is open.
  const follow = setInterval(() => { if (list.isConnected) draw(); else clearInterval(follow); }, 2000);
}
