//! Sessions on disk: one directory per session under the data directory's `sessions/`, holding
//! the loop's transcript (`transcript.jsonl`, written by the loop's rules as events happen) and
//! `meta.json` (where it ran, on which model, its title), so `llembas sessions` can list them and
//! `--resume` find them.
//!
//! A crash (`kill -9`) in the middle of an append can leave a torn last line. Before the next
//! append, [`mend_torn_tail`] cuts the file back to its last complete line and keeps the
//! fragment aside in `transcript.jsonl.torn-<n>` (the first free `n` from 1) beside it, so the
//! next event starts on a line of its own and nothing that was written is thrown away.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result};

pub use harness_agent::Meta;
use harness_agent::SeamError;

/// The sessions directory, and the session this process holds (see [`Store::hold`]).
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    held: Option<std::sync::Arc<std::fs::File>>,
}

/// How long a session that this very process still holds (a session just left, whose driver
/// is ending) is waited for before it is refused.
const OWN_HOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// A short stable hex digest of a text (an instance id from a path).
pub fn short_hash(text: &str) -> String {
    // FNV-1a, 32 bits: stable across runs and platforms.
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

pub use harness_agent::time::{format_time, now};

impl Store {
    /// The store under `root` (created when the first session is).
    pub fn new(root: PathBuf) -> Store {
        Store { root, held: None }
    }

    /// Holds the session `id` for this process, as long as this store (or a clone) lives: an
    /// exclusive OS lock on its `lock` file, which the system releases however the process
    /// ends. Refused, naming the process that holds it, while another does: two processes on one
    /// session would run its calls twice and interleave its transcript.
    pub fn hold(&mut self, id: &str) -> Result<()> {
        use std::io::{Read as _, Seek as _, Write as _};
        let path = self.dir(id).join("lock");
        let mut file = std::fs::File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let deadline = std::time::Instant::now() + OWN_HOLD_WAIT;
        loop {
            if file.try_lock().is_ok() {
                break;
            }
            let mut holder = String::new();
            let _ = file
                .rewind()
                .and_then(|()| file.read_to_string(&mut holder));
            let holder = holder.trim();
            let ours = holder == std::process::id().to_string();
            if !ours || std::time::Instant::now() >= deadline {
                let who = if holder.is_empty() {
                    "another process".to_owned()
                } else {
                    format!("process {holder}")
                };
                anyhow::bail!(
                    "session {id} is open in another llembas ({who}): end that one first, or start a new session"
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.held = Some(std::sync::Arc::new(file));
        Ok(())
    }

    /// A new session's directory and metadata.
    pub fn create(&self, cwd: &Path, model: &str) -> Result<Meta> {
        let t = now();
        let stamp: String = format_time(t)
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tag = (nanos ^ std::process::id().rotate_left(16)) & 0xffff;
        let id = format!("{}-{}-{tag:04x}", &stamp[..8], &stamp[8..]);
        let meta = Meta {
            id,
            cwd: cwd.to_path_buf(),
            created: t,
            updated: t,
            title: String::new(),
            model: model.to_owned(),
            mode: None,
        };
        let dir = self.dir(&meta.id);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        self.save(&meta)?;
        Ok(meta)
    }

    /// A session's directory.
    pub fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// A session's transcript file.
    pub fn transcript(&self, id: &str) -> PathBuf {
        self.dir(id).join("transcript.jsonl")
    }

    /// Writes a session's metadata (atomically: a temporary file renamed over the old one).
    pub fn save(&self, meta: &Meta) -> Result<()> {
        let path = self.dir(&meta.id).join("meta.json");
        let text = serde_json::to_string_pretty(meta)?;
        harness_fs::write_atomic(&path, text.as_bytes())?;
        Ok(())
    }

    /// Every session, newest first; those of `cwd` only when given.
    pub fn list(&self, cwd: Option<&Path>) -> Result<Vec<Meta>> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot list {}", self.root.display()));
            }
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path().join("meta.json");
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(meta) = serde_json::from_str::<Meta>(&text) else {
                continue;
            };
            if cwd.is_none_or(|c| c == meta.cwd) {
                out.push(meta);
            }
        }
        out.sort_by(|a, b| b.updated.cmp(&a.updated).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    /// The session to resume: the one whose id is or starts with `id`, or the newest of `cwd`.
    pub fn find(&self, id: &str, cwd: &Path) -> Result<Meta> {
        let all = self.list(None)?;
        harness_agent::store::pick(&all, id, cwd)
            .cloned()
            .map_err(|e| anyhow::anyhow!(e))
    }

    /// `session_search` over every saved session but `skip` (harness-agent's ranking).
    pub fn search(&self, query: &str, limit: usize, skip: &str) -> String {
        let sessions = self
            .list(None)
            .unwrap_or_default()
            .into_iter()
            .filter(|m| m.id != skip)
            .filter_map(|m| {
                let entries = read_transcript(&self.transcript(&m.id)).ok()?;
                Some((m, entries))
            });
        harness_agent::session_search::search(query, sessions, limit, skip)
    }
}

/// Reads a saved transcript (up to its last complete event).
pub fn read_transcript(path: &Path) -> Result<Vec<harness_loop::transcript::Entry>> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let loaded = harness_loop::transcript::read(std::io::BufReader::new(f))
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(loaded.entries)
}

/// Cuts a torn last line off the transcript at `path` (a file whose last byte is not a newline:
/// an append the crash cut), back to the end of its last complete line, and keeps the cut bytes
/// in `<path>.torn-<n>` (the first free `n` from 1) beside it. Returns that file when there was
/// a fragment; a missing, empty or whole file is left as it is.
pub fn mend_torn_tail(path: &Path) -> Result<Option<PathBuf>> {
    use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", path.display())),
    };
    let len = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    // The end of the last complete line, found by reading back from the end a block at a time.
    let mut valid = 0u64;
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let buf = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(buf))
            .with_context(|| format!("cannot read {}", path.display()))?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            valid = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if valid == len {
        return Ok(None);
    }
    let mut fragment = Vec::with_capacity((len - valid) as usize);
    file.seek(SeekFrom::Start(valid))
        .and_then(|_| (&mut file).take(len - valid).read_to_end(&mut fragment))
        .with_context(|| format!("cannot read {}", path.display()))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut n = 1u32;
    let (aside_path, mut aside) = loop {
        let p = path.with_file_name(format!("{name}.torn-{n}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => break (p, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", p.display())),
        }
    };
    aside
        .write_all(&fragment)
        .and_then(|()| aside.sync_all())
        .with_context(|| format!("cannot write {}", aside_path.display()))?;
    file.set_len(valid)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot cut the torn tail of {}", path.display()))?;
    Ok(Some(aside_path))
}

/// The runtime's store: transcripts as JSONL files appended event by event, metadata beside.
impl harness_agent::SessionStore for Store {
    fn create(&self, place: &str, model: &str) -> std::result::Result<Meta, SeamError> {
        Store::create(self, Path::new(place), model)
            .map_err(|e| SeamError::store("", format!("{e:#}")))
    }

    fn save(&self, meta: &Meta) -> std::result::Result<(), SeamError> {
        Store::save(self, meta).map_err(|e| SeamError::store(&meta.id, format!("{e:#}")))
    }

    fn append(
        &self,
        id: &str,
        entries: &[harness_loop::transcript::Entry],
    ) -> std::result::Result<(), SeamError> {
        if entries.is_empty() {
            return Ok(());
        }
        let path = self.transcript(id);
        let failed = |message: String| SeamError::file(&path.display().to_string(), message);
        mend_torn_tail(&path).map_err(|e| failed(format!("{e:#}")))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| failed(format!("cannot open {}: {e}", path.display())))?;
        harness_loop::transcript::TranscriptWriter::new(file)
            .append_all(entries)
            .map_err(|e| {
                failed(format!(
                    "cannot write the transcript {}: {e}",
                    path.display()
                ))
            })
    }

    fn load(
        &self,
        id: &str,
    ) -> std::result::Result<Vec<harness_loop::transcript::Entry>, SeamError> {
        let path = self.transcript(id);
        read_transcript(&path)
            .map_err(|e| SeamError::file(&path.display().to_string(), format!("{e:#}")))
    }

    fn find(&self, id: &str) -> std::result::Result<Meta, SeamError> {
        let path = self.dir(id).join("meta.json");
        let failed = |message: String| SeamError::file(&path.display().to_string(), message);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| failed(format!("cannot read {}: {e}", path.display())))?;
        serde_json::from_str(&text).map_err(|e| failed(format!("{}: {e}", path.display())))
    }

    fn searches(&self) -> bool {
        true
    }

    fn search(&self, query: &str, limit: usize, skip: &str) -> Option<String> {
        Some(Store::search(self, query, limit, skip))
    }
}
