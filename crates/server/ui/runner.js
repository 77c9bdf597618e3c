// The Python runner: Pyodide in a frame sandboxed into an origin of its own (no cookies, no
// reading the app's API). The chat page posts it a run; it answers with what the run did.
//
// In:  {type: "run", id, code, cwd, files: {PATH: text}, save: [PATH]}
// Out: {type: "loading"|"started", id} then {type: "done", id, stdout, stderr, result, error,
//      saved: {PATH: Uint8Array}, missing: [PATH], duration_ms}
"use strict";

const VERSION = "314.0.7";
// What stderr keeps of a long run: its head and its tail, this many characters each.
const STDERR_KEEP = 4000;

let loading = null;

function headTail(text, keep) {
  if (text.length <= 2 * keep) return text;
  const gone = text.length - 2 * keep;
  return `${text.slice(0, keep)}\n[${gone} characters elided]\n${text.slice(-keep)}`;
}

function pyodide() {
  if (!loading) {
    const base = new URL(`/pyodide/${VERSION}/`, location.href).href;
    loading = import(`${base}pyodide.mjs`).then((m) => m.loadPyodide({ indexURL: base }));
  }
  return loading;
}

function mkdirs(py, dir) {
  if (dir && dir !== "/") py.FS.mkdirTree(dir);
}

function dirOf(path) {
  const at = path.lastIndexOf("/");
  return at > 0 ? path.slice(0, at) : "/";
}

async function run(msg) {
  const answer = (v) => parent.postMessage({ id: msg.id, ...v }, "*");
  answer({ type: "loading" });
  let py;
  try {
    py = await pyodide();
  } catch (e) {
    answer({ type: "done", error: `Pyodide did not load: ${e.message}`, stdout: "", stderr: "", saved: {}, missing: [], duration_ms: 0 });
    return;
  }
  let stdout = "";
  let stderr = "";
  py.setStdout({ batched: (s) => { stdout += `${s}\n`; } });
  py.setStderr({ batched: (s) => { stderr += `${s}\n`; } });
  const copied = [];
  try {
    mkdirs(py, msg.cwd);
    py.FS.chdir(msg.cwd || "/");
    for (const [path, text] of Object.entries(msg.files || {})) {
      mkdirs(py, dirOf(path));
      py.FS.writeFile(path, text);
      copied.push(path);
    }
    for (const path of msg.save || []) {
      mkdirs(py, dirOf(path));
      try { py.FS.unlink(path); } catch { /* not there */ }
    }
  } catch (e) {
    answer({ type: "done", error: `The files could not be copied in: ${e.message}`, stdout, stderr, saved: {}, missing: [], duration_ms: 0 });
    return;
  }
  answer({ type: "started" });
  const start = performance.now();
  let result = null;
  let error = null;
  // A fresh namespace for each run: variables do not carry over.
  const globals = py.toPy({});
  try {
    const value = await py.runPythonAsync(msg.code, { globals });
    if (value !== undefined && value !== null) {
      result = typeof value === "object" && typeof value.toString === "function" ? value.toString() : String(value);
      if (value && typeof value.destroy === "function") value.destroy();
    }
  } catch (e) {
    error = String(e.message || e);
  } finally {
    globals.destroy();
  }
  const duration_ms = Math.round(performance.now() - start);
  const saved = {};
  const missing = [];
  for (const path of msg.save || []) {
    try {
      saved[path] = py.FS.readFile(path);
    } catch {
      missing.push(path);
    }
  }
  for (const path of [...copied, ...(msg.save || [])]) {
    try { py.FS.unlink(path); } catch { /* gone */ }
  }
  answer({ type: "done", stdout, stderr: headTail(stderr, STDERR_KEEP), result, error, saved, missing, duration_ms });
}

addEventListener("message", (ev) => {
  if (ev.source !== parent) return;
  const msg = ev.data || {};
  if (msg.type === "run") run(msg);
});
parent.postMessage({ type: "ready" }, "*");
