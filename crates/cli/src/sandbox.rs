//! The OS sandbox of a session's commands on Linux, made once for a session and put on each
//! command as it starts:
//!
//! - **Landlock** (the file system and TCP): writes only under the writable roots, reads
//!   everywhere but the unreadable paths, TCP `bind`/`connect` refused when the network is off;
//!   where the kernel has ABI 6, signals to processes outside the command and abstract Unix
//!   sockets outside it are refused too (Landlock's scopes).
//! - **seccomp** (what Landlock does not mediate): no Unix-domain socket can be made (Landlock
//!   does not see `connect()` to a pathname socket, so a command could otherwise drive any
//!   service of the person's listening on one — tmux, Docker, an SSH agent, systemd); pairs of
//!   connected stream sockets still can. No Internet socket at all (TCP, UDP, raw) when the
//!   network is off. No `TIOCSTI`/`TIOCLINUX` (pushing keystrokes into a terminal), no io_uring
//!   (whose operations bypass both filters).
//!
//! - **A mount namespace** where the workspace is a repository: its `.git/hooks` and
//!   `.git/config` read-only ([`git_guard`]).
//!
//! Codex's Linux sandbox pairs Landlock with a seccomp filter of network calls in the same way;
//! Claude Code's sandbox refuses the creation of Unix sockets with seccomp under bubblewrap. A
//! command the person approved when asked runs outside all of this.

mod git_guard;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

pub use harness_agent::Exit;

/// The Landlock version asked for (best effort: an older kernel enforces what it knows; the
/// scopes need 6).
const LANDLOCK_ABI: landlock::ABI = landlock::ABI::V6;

/// Whether this kernel enforces Landlock: tried on a thread of its own, which ends.
pub fn landlock_works() -> bool {
    use landlock::{
        AccessFs, Ruleset, RulesetAttr as _, RulesetCreatedAttr as _, RulesetStatus,
        path_beneath_rules,
    };
    std::thread::spawn(|| {
        let read = AccessFs::from_read(LANDLOCK_ABI);
        let status = Ruleset::default()
            .handle_access(read)
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(["/"], read)))
            .and_then(|r| r.restrict_self());
        matches!(status, Ok(s) if s.ruleset != RulesetStatus::NotEnforced)
    })
    .join()
    .unwrap_or(false)
}

/// The paths a command may read, as Landlock rules (it grants, never denies): `/`, opened up
/// along the way to each unreadable path so that everything beside them is granted and they
/// are not; the directories on the way get only listing.
fn read_roots(unreadable: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    fn walk(dir: &Path, denied: &[PathBuf], full: &mut Vec<PathBuf>, list: &mut Vec<PathBuf>) {
        if denied.iter().any(|d| d == dir) {
            return;
        }
        if !denied.iter().any(|d| d.starts_with(dir)) {
            full.push(dir.to_path_buf());
            return;
        }
        list.push(dir.to_path_buf());
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            walk(&e.path(), denied, full, list);
        }
    }
    let denied: Vec<PathBuf> = unreadable
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    let (mut full, mut list) = (Vec::new(), Vec::new());
    walk(Path::new("/"), &denied, &mut full, &mut list);
    (full, list)
}

/// The ioctl requests that push input into a terminal (`TIOCSTI`) or drive the console
/// (`TIOCLINUX`, whose selection paste does the same).
const TERMINAL_INJECTION: [u64; 2] = [0x5412, 0x541C];

/// The system calls of x32 (x86-64's other ABI) carry this bit; the same arch is reported for
/// them, so the filter names their numbers too.
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// The seccomp filter of a command: refuses (`EPERM`) what the module's doc lists.
fn seccomp_filter(network: bool) -> Result<BpfProgram> {
    use libc::{AF_INET, AF_INET6, AF_NETLINK, AF_UNIX, SOCK_DGRAM};
    let arg = |index: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
    };
    // socket(domain, …): refused unless its family is one a command may use.
    let families: &[i32] = if network {
        &[AF_INET, AF_INET6, AF_NETLINK]
    } else {
        &[AF_NETLINK]
    };
    let other_family = families
        .iter()
        .map(|f| arg(0, SeccompCmpOp::Ne, u64::from(f.unsigned_abs())))
        .collect::<Result<Vec<_>, _>>()?;
    let socket = vec![SeccompRule::new(other_family)?];
    // socketpair(domain, type, …): a connected pair of Unix stream sockets only (a datagram one
    // can still send to any named socket).
    let socketpair = vec![
        SeccompRule::new(vec![arg(
            0,
            SeccompCmpOp::Ne,
            AF_UNIX.unsigned_abs().into(),
        )?])?,
        SeccompRule::new(vec![arg(
            1,
            SeccompCmpOp::MaskedEq(0xf),
            SOCK_DGRAM.unsigned_abs().into(),
        )?])?,
    ];
    let ioctl = TERMINAL_INJECTION
        .iter()
        .map(|r| SeccompRule::new(vec![arg(1, SeccompCmpOp::Eq, *r)?]))
        .collect::<Result<Vec<_>, _>>()?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, socket.clone());
    rules.insert(libc::SYS_socketpair, socketpair.clone());
    rules.insert(libc::SYS_ioctl, ioctl.clone());
    for always in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(always, Vec::new());
    }
    #[cfg(target_arch = "x86_64")]
    {
        // x32's own numbers for the same calls (ioctl is 514 there); io_uring shares x86-64's.
        rules.insert(X32 | libc::SYS_socket, socket);
        rules.insert(X32 | libc::SYS_socketpair, socketpair);
        rules.insert(X32 | 514, ioctl);
        for always in [
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
        ] {
            rules.insert(X32 | always, Vec::new());
        }
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .context("no seccomp filter for this architecture")?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )?;
    Ok(filter.try_into()?)
}

/// The sandbox of a session's commands: a Landlock ruleset and a seccomp filter, made once.
pub struct Sandbox {
    ruleset: landlock::RulesetCreated,
    filter: BpfProgram,
    refused_note: String,
    /// The workspace whose repository is guarded, when this system allows the guard.
    guarded: Option<PathBuf>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox").finish_non_exhaustive()
    }
}

/// What one command is put in: made from a [`Sandbox`] before the command starts.
pub struct Confine {
    ruleset: landlock::RulesetCreated,
    filter: BpfProgram,
    git: Option<git_guard::GitGuard>,
}

/// The system-call filter of a command, for the thread that starts it ([`Filter::enter`]).
pub struct Filter(BpfProgram);

/// Runs `f` in the command's process between fork and exec (after what was set before).
#[allow(unsafe_code)]
pub(crate) fn in_child(
    cmd: &mut std::process::Command,
    f: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static,
) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: every closure given here only makes system calls (setsid, unshare, mount, open
    // and write of /proc files, Landlock's): async-signal-safe, no allocation, no lock.
    unsafe {
        cmd.pre_exec(f);
    }
}

impl Sandbox {
    /// The sandbox of `c`, made once for a session working in `workspace`.
    pub fn new(
        c: &harness_permission::sandbox::Confinement,
        workspace: &Path,
        refused_note: &str,
    ) -> Result<Sandbox> {
        use landlock::{
            Access as _, AccessFs, AccessNet, Ruleset, RulesetAttr as _, RulesetCreatedAttr as _,
            Scope, path_beneath_rules,
        };
        let all = AccessFs::from_all(LANDLOCK_ABI);
        let read = AccessFs::from_read(LANDLOCK_ABI);
        let unreadable: Vec<PathBuf> = c.unreadable.iter().map(PathBuf::from).collect();
        let (readable, listable) = read_roots(&unreadable);
        let writable: Vec<PathBuf> = c
            .writable
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        let mut ruleset = Ruleset::default()
            .handle_access(all)?
            .scope(Scope::AbstractUnixSocket | Scope::Signal)?;
        if !c.network {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        let ruleset = ruleset
            .create()?
            .add_rules(path_beneath_rules(&readable, read))?
            .add_rules(path_beneath_rules(&listable, AccessFs::ReadDir))?
            .add_rules(path_beneath_rules(&writable, all))?;
        Ok(Sandbox {
            ruleset,
            filter: seccomp_filter(c.network)?,
            refused_note: refused_note.to_owned(),
            guarded: git_guard::works().then(|| workspace.to_path_buf()),
        })
    }

    /// Whether the workspace's `.git/hooks` and `.git/config` are read-only to commands (this
    /// system lets a command have a mount namespace of its own).
    pub fn guards_git(&self) -> bool {
        self.guarded.is_some()
    }

    /// What the next command is put in.
    pub fn for_command(&self) -> Result<Confine> {
        Ok(Confine {
            ruleset: self
                .ruleset
                .try_clone()
                .context("cannot prepare the sandbox for the command")?,
            filter: self.filter.clone(),
            git: self.guarded.as_deref().and_then(git_guard::GitGuard::plan),
        })
    }

    /// The note for the result of a sandboxed command that failed with a permission error.
    pub fn note_for(&self, output: &str, exit: Exit) -> Option<&str> {
        let refused = output.contains("Permission denied")
            || output.contains("Operation not permitted")
            || output.contains("Read-only file system");
        (exit != Exit::Code(0) && refused).then_some(self.refused_note.as_str())
    }
}

impl Confine {
    /// Puts `cmd` in the sandbox: its process, between fork and exec, gets the repository's
    /// guard and then Landlock (which forbids mounting from then on). What is left is the
    /// system-call filter, for the thread that starts the command.
    pub fn install(self, cmd: &mut std::process::Command) -> Filter {
        let mut ruleset = Some(self.ruleset);
        let git = self.git;
        in_child(cmd, move || {
            if let Some(g) = &git {
                g.apply()?;
            }
            if let Some(r) = ruleset.take() {
                r.restrict_self()
                    .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))?;
            }
            Ok(())
        });
        Filter(self.filter)
    }
}

impl Filter {
    /// Filters the calling thread's system calls, and those of all it starts from now on. Call
    /// it on a thread of its own that ends after starting the command.
    pub fn enter(&self) -> Result<()> {
        seccompiler::apply_filter(&self.0)
            .context("cannot put the command's system calls in the sandbox")?;
        Ok(())
    }
}
