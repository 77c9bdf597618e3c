//! The checkpoints' snapshots of a project in a git repository: a shadow repository of its own
//! in the session's directory (never the person's `.git`: their branches, index, refs, hooks
//! and config are not touched), run as `git --git-dir=SHADOW --work-tree=TOP` with its own
//! index, and `objects/info/alternates` pointing at the project's object store, so files the
//! project has committed cost nothing. A snapshot is the tree `git write-tree` gives after
//! `git add -A` (the project's `.gitignore` honoured); no commit, branch or ref is made. Files
//! over [`CAP`] are kept as a short stub naming their size and time, so a change to them is
//! seen but not kept.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use harness_agent::SeamError;
use harness_agent::checkpoint::Snapshots;

/// Files over this many bytes are not kept in a snapshot.
pub const CAP: u64 = 4 * 1024 * 1024;

/// How a stub of a file over the cap starts.
const STUB: &str = "llembas-snapshot: over the cap\n";

/// A project's shadow repository.
#[derive(Debug, Clone)]
pub struct Shadow {
    git_dir: PathBuf,
    /// The project's top directory (the work tree).
    top: PathBuf,
}

impl Shadow {
    /// The shadow repository at `git_dir` for the project `dir` is in (made when new); `Err`
    /// with the reason the commands' changes are not covered (not a git repository, no git).
    pub fn open(dir: &Path, git_dir: &Path) -> Result<Shadow, String> {
        // Read only, in the person's repository: where it is and where its objects are.
        let out = Command::new("git")
            .args(["rev-parse", "--show-toplevel", "--git-common-dir"])
            .current_dir(dir)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("git cannot be run ({e})"))?;
        if !out.status.success() {
            return Err("not a git repository".into());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let (Some(top), Some(common)) = (lines.next(), lines.next()) else {
            return Err("not a git repository".into());
        };
        let top = std::fs::canonicalize(top).unwrap_or_else(|_| PathBuf::from(top));
        let common = dir.join(common);
        let shadow = Shadow {
            git_dir: git_dir.to_path_buf(),
            top,
        };
        if !git_dir.join("HEAD").exists() {
            shadow.init(&common).map_err(|e| e.to_string())?;
        }
        Ok(shadow)
    }

    /// Makes the shadow repository: no templates (so no hooks), the project's objects as
    /// alternates, its excludes, and its index as the first one (so unchanged files are not
    /// read again).
    fn init(&self, common: &Path) -> Result<(), SeamError> {
        std::fs::create_dir_all(&self.git_dir).map_err(|e| self.failed(e))?;
        self.git(&["init", "-q", "--template="], None)?;
        let info = self.git_dir.join("objects/info");
        std::fs::create_dir_all(&info).map_err(|e| self.failed(e))?;
        let objects = common.join("objects");
        if objects.is_dir() {
            let objects = std::fs::canonicalize(&objects).unwrap_or(objects);
            std::fs::write(info.join("alternates"), format!("{}\n", objects.display()))
                .map_err(|e| self.failed(e))?;
        }
        if let Ok(exclude) = std::fs::read(common.join("info/exclude")) {
            let _ = std::fs::create_dir_all(self.git_dir.join("info"));
            let _ = std::fs::write(self.git_dir.join("info/exclude"), exclude);
        }
        let _ = std::fs::copy(common.join("index"), self.git_dir.join("index"));
        Ok(())
    }

    fn failed(&self, e: impl std::fmt::Display) -> SeamError {
        SeamError::file(&self.git_dir.display().to_string(), e)
    }

    /// Runs git on the shadow repository (hooks off, no system or person's config); its
    /// output.
    fn git(&self, args: &[&str], input: Option<&[u8]>) -> Result<Vec<u8>, SeamError> {
        use std::io::Write as _;
        let mut cmd = Command::new("git");
        cmd.args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.autocrlf=false",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.safecrlf=false",
            "-c",
            "core.untrackedCache=false",
            "-c",
            "core.splitIndex=false",
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
        ])
        .args(args)
        .current_dir(&self.top)
        .env("GIT_DIR", &self.git_dir)
        .env("GIT_WORK_TREE", &self.top)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0");
        for v in [
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            "GIT_NAMESPACE",
            "GIT_CEILING_DIRECTORIES",
            "GIT_COMMON_DIR",
        ] {
            cmd.env_remove(v);
        }
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let line = format!("git {}", args.join(" "));
        let mut child = cmd.spawn().map_err(|e| SeamError::command(&line, e))?;
        if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(bytes)
                .map_err(|e| SeamError::command(&line, e))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| SeamError::command(&line, e))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(SeamError::command(
                &line,
                format!("{line} failed: {}", err.trim()),
            ));
        }
        Ok(out.stdout)
    }

    /// A path of the work tree as git names it (relative to the top); `None` outside it.
    fn rel<'a>(&self, path: &'a str) -> Option<&'a str> {
        Path::new(path)
            .strip_prefix(&self.top)
            .ok()
            .and_then(Path::to_str)
    }

    /// The files git would add that are over the cap (new or changed since the last
    /// snapshot).
    fn over_cap(&self) -> Result<Vec<(String, std::fs::Metadata)>, SeamError> {
        let listed = self.git(
            &[
                "ls-files",
                "-z",
                "--others",
                "--modified",
                "--exclude-standard",
            ],
            None,
        )?;
        let mut big = Vec::new();
        for rel in listed.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let rel = String::from_utf8_lossy(rel).into_owned();
            if let Ok(meta) = std::fs::symlink_metadata(self.top.join(&rel))
                && meta.is_file()
                && meta.len() > CAP
                && !big.iter().any(|(r, _)| r == &rel)
            {
                big.push((rel, meta));
            }
        }
        Ok(big)
    }
}

impl Snapshots for Shadow {
    fn take(&self) -> Result<String, SeamError> {
        let big = self.over_cap()?;
        let mut args: Vec<String> = vec!["add".into(), "-A".into(), "--".into(), ".".into()];
        args.extend(
            big.iter()
                .map(|(rel, _)| format!(":(exclude,literal){rel}")),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Err(e) = self.git(&args, None) {
            // An index copied from the project that this git cannot use: start again without.
            let index = self.git_dir.join("index");
            if !index.exists() {
                return Err(e);
            }
            std::fs::remove_file(&index).map_err(|e| self.failed(e))?;
            self.git(&args, None)?;
        }
        for (rel, meta) in &big {
            let when = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            let stub = format!("{STUB}{} bytes, modified {when}\n", meta.len());
            let sha = self.git(&["hash-object", "-w", "--stdin"], Some(stub.as_bytes()))?;
            let sha = String::from_utf8_lossy(&sha).trim().to_owned();
            self.git(
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{sha},{rel}"),
                ],
                None,
            )?;
        }
        let tree = self.git(&["write-tree"], None)?;
        Ok(String::from_utf8_lossy(&tree).trim().to_owned())
    }

    fn changed(&self, from: &str, to: &str) -> Result<Vec<String>, SeamError> {
        let out = self.git(
            &[
                "diff-tree",
                "-r",
                "-z",
                "--name-only",
                "--no-renames",
                from,
                to,
            ],
            None,
        )?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|r| !r.is_empty())
            .map(|r| {
                self.top
                    .join(String::from_utf8_lossy(r).as_ref())
                    .display()
                    .to_string()
            })
            .collect())
    }

    fn read(&self, snapshot: &str, path: &str) -> Result<Option<Vec<u8>>, SeamError> {
        let Some(rel) = self.rel(path) else {
            return Ok(None);
        };
        let listed = self.git(&["ls-tree", "-z", snapshot, "--", rel], None)?;
        let listed = String::from_utf8_lossy(&listed);
        // "<mode> <type> <sha>\t<path>"
        let Some((head, _)) = listed.split_once('\t') else {
            return Ok(None);
        };
        let mut parts = head.split(' ');
        let (mode, sha) = (parts.next().unwrap_or(""), parts.nth(1).unwrap_or(""));
        if mode == "120000" {
            return Err(SeamError::file(path, "a symbolic link: not kept"));
        }
        if mode == "160000" {
            return Err(SeamError::file(path, "a submodule: not kept"));
        }
        let bytes = self.git(&["cat-file", "blob", sha], None)?;
        if bytes.starts_with(STUB.as_bytes()) {
            return Err(SeamError::file(
                path,
                format!("over the snapshots' {} MiB cap: not kept", CAP >> 20),
            ));
        }
        Ok(Some(bytes))
    }
}
