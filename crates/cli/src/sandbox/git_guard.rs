//! The workspace's repository kept out of a sandboxed command's reach where it matters: its
//! `.git/hooks` and `.git/config` (and its submodules') are read-only to the command, so that it
//! cannot plant a hook or a `core.fsmonitor`/`core.hooksPath`/`core.sshCommand` that the person's
//! own `git` would run later, outside the sandbox. Landlock grants and never denies (a writable
//! workspace makes everything under it writable), so the command gets a mount namespace of its
//! own in which those paths are bound read-only, and `.git` itself is a mount point (which cannot
//! be renamed or removed: no swapping in a fresh `.git`). The rest of `.git` stays writable:
//! `git add` and `git commit` work in the sandbox. llembas not being root, the namespace is made
//! in a user namespace of the command's own, where it keeps its own ids. Where the system allows
//! no such namespace, commands run without this guard and the session says so once.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::mount::MountFlags;

/// How deep submodules' repositories are looked for under `.git/modules`.
const MODULE_DEPTH: usize = 4;

/// One bind mount of the guard: a path bound on itself, read-only or not, keeping the flags
/// of the mount it is on (a user namespace may not drop them).
#[derive(Debug)]
struct Bind {
    path: CString,
    read_only: bool,
    keep: MountFlags,
}

/// The mounts that guard a workspace's repositories, made before a command starts and put in
/// place in its process between fork and exec (no allocation there).
#[derive(Debug)]
pub struct GitGuard {
    /// `uid_map` and `gid_map` lines of the command's own user namespace (llembas is not root).
    user: Option<(Vec<u8>, Vec<u8>)>,
    binds: Vec<Bind>,
}

/// The repositories of `.git` and of its submodules (`.git/modules/…`, each with a `HEAD`).
fn git_dirs(git: &Path) -> Vec<PathBuf> {
    fn modules(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir.join("modules")) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let real_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            if !real_dir {
                continue;
            }
            if path.join("HEAD").is_file() {
                out.push(path.clone());
            }
            if depth > 0 {
                modules(&path, depth - 1, out);
            }
        }
    }
    let mut out = vec![git.to_path_buf()];
    modules(git, MODULE_DEPTH, &mut out);
    out
}

fn bind(path: &Path, read_only: bool) -> Option<Bind> {
    let kept = MountFlags::NOSUID
        | MountFlags::NODEV
        | MountFlags::NOEXEC
        | MountFlags::NOATIME
        | MountFlags::NODIRATIME
        | MountFlags::RELATIME;
    // The statvfs flags share the mount flags' bits.
    let flags = rustix::fs::statvfs(path).ok()?.f_flag.bits();
    Some(Bind {
        path: CString::new(path.as_os_str().as_bytes()).ok()?,
        read_only,
        keep: MountFlags::from_bits_truncate(u32::try_from(flags).unwrap_or(0) & kept.bits()),
    })
}

impl GitGuard {
    /// The guard of `workspace`'s repository; `None` when it has no `.git` directory.
    pub fn plan(workspace: &Path) -> Option<GitGuard> {
        let git = workspace.join(".git");
        if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            return None;
        }
        let mut binds = Vec::new();
        for dir in git_dirs(&git) {
            binds.extend(bind(&dir, false));
            let hooks = dir.join("hooks");
            // A repository without hooks gets an empty directory, or a command could make one.
            let _ = std::fs::create_dir(&hooks);
            for guarded in [hooks, dir.join("config")] {
                if guarded.exists() {
                    binds.extend(bind(&guarded, true));
                }
            }
        }
        Some(GitGuard::with_binds(binds))
    }

    fn with_binds(binds: Vec<Bind>) -> GitGuard {
        let user = (!rustix::process::geteuid().is_root()).then(|| {
            let uid = rustix::process::getuid().as_raw();
            let gid = rustix::process::getgid().as_raw();
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        GitGuard { user, binds }
    }

    /// Puts the mounts in place in the calling process: call it in the command's process
    /// between fork and exec, before Landlock (which forbids mounting). Only system calls.
    pub fn apply(&self) -> std::io::Result<()> {
        use rustix::mount::{MountPropagationFlags, mount_bind, mount_change, mount_remount};
        use rustix::thread::UnshareFlags;
        match &self.user {
            Some((uid_map, gid_map)) => {
                unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNS)?;
                write_proc(c"/proc/self/setgroups", b"deny")?;
                write_proc(c"/proc/self/uid_map", uid_map)?;
                write_proc(c"/proc/self/gid_map", gid_map)?;
            }
            None => unshare(UnshareFlags::NEWNS)?,
        }
        mount_change(
            c"/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )?;
        for b in &self.binds {
            mount_bind(b.path.as_c_str(), b.path.as_c_str())?;
            if b.read_only {
                mount_remount(
                    b.path.as_c_str(),
                    MountFlags::BIND | MountFlags::RDONLY | b.keep,
                    c"",
                )?;
            }
        }
        Ok(())
    }
}

fn write_proc(path: &std::ffi::CStr, text: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags, open};
    let fd = open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::write(&fd, text)?;
    Ok(())
}

/// Whether this system lets a command get the guard's namespaces: tried once, on a directory
/// of its own bound read-only for `true`.
pub fn works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("llembas-guard-{}", std::process::id()));
        let Ok(dir) = std::fs::create_dir_all(&dir).and_then(|()| dir.canonicalize()) else {
            return false;
        };
        let guard = bind(&dir, true).map(|b| GitGuard::with_binds(vec![b]));
        let ok = guard.is_some_and(|guard| {
            let mut cmd = std::process::Command::new("true");
            cmd.stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            super::in_child(&mut cmd, move || guard.apply());
            cmd.status().is_ok_and(|s| s.success())
        });
        let _ = std::fs::remove_dir(&dir);
        ok
    })
}

/// `unshare(2)` of namespaces only.
#[allow(unsafe_code)]
fn unshare(flags: rustix::thread::UnshareFlags) -> std::io::Result<()> {
    // SAFETY: called in a command's process between fork and exec, which has one thread; only
    // namespace flags are given, not CLONE_FILES (whose sharing the unsafety is about).
    unsafe { rustix::thread::unshare_unsafe(flags) }?;
    Ok(())
}
