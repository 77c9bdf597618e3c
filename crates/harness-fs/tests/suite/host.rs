//! The host backend on real directories: the lock, close, atomic writes, the trash.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use harness_fs::backend::{Backend, Expect, HostBackend, HostOptions};
use harness_fs::{Access, Error, Level, VPath, View};

fn opts(dir: &tempfile::TempDir) -> HostOptions {
    HostOptions {
        lock_dir: Some(dir.path().join("locks")),
        ..HostOptions::default()
    }
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("inner/deeper")).unwrap();
    (dir, root)
}

#[test]
fn one_writer_per_root_same_inside_and_containing() {
    let (dir, root) = setup();
    let locks = tempfile::tempdir().unwrap();
    let opts = |_: &tempfile::TempDir| HostOptions {
        lock_dir: Some(locks.path().to_path_buf()),
        ..HostOptions::default()
    };
    let first = HostBackend::open(&root, opts(&dir)).unwrap();
    for other in [
        root.clone(),
        root.join("inner"),
        root.join("inner/deeper"),
        dir.path().to_path_buf(),
    ] {
        match HostBackend::open(&other, opts(&dir)) {
            Err(Error::RootInUse(_)) => {}
            other => panic!("expected RootInUse, got {other:?}"),
        }
    }
    // A sibling is not related.
    let sibling = dir.path().join("sibling");
    std::fs::create_dir_all(&sibling).unwrap();
    let b = HostBackend::open(&sibling, opts(&dir)).unwrap();
    b.close();
    first.close();
    first.close();
    // Released: it opens again.
    let again = HostBackend::open(&root, opts(&dir)).unwrap();
    again.close();
}

#[test]
fn the_lock_holds_against_a_stale_entry_and_is_taken_over() {
    let (dir, root) = setup();
    // A lock file left by a process that is gone (not locked): a new open takes over.
    let locks = dir.path().join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    std::fs::write(
        locks.join("stale.root"),
        root.canonicalize().unwrap().to_str().unwrap(),
    )
    .unwrap();
    let b = HostBackend::open(&root, opts(&dir)).unwrap();
    b.close();
}

#[test]
fn close_refuses_later_operations_and_is_idempotent() {
    let (dir, root) = setup();
    let b = HostBackend::open(&root, opts(&dir)).unwrap();
    b.close();
    b.close();
    assert_eq!(b.stat(&VPath::parse("/inner")), Err(Error::Closed));
    assert_eq!(b.read(&VPath::parse("/x")), Err(Error::Closed));
}

#[test]
fn a_write_keeps_permissions_and_leaves_no_temporary_file() {
    let (dir, root) = setup();
    std::fs::write(root.join("script.sh"), "echo hi\n").unwrap();
    std::fs::set_permissions(
        root.join("script.sh"),
        std::fs::Permissions::from_mode(0o751),
    )
    .unwrap();
    let b = HostBackend::open(&root, opts(&dir)).unwrap();
    b.write(&VPath::parse("/script.sh"), b"echo bye\n", &Expect::Any)
        .unwrap();
    let meta = std::fs::metadata(root.join("script.sh")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o751);
    assert_eq!(
        std::fs::read_to_string(root.join("script.sh")).unwrap(),
        "echo bye\n"
    );
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".llembas-tmp-")),
        "{names:?}"
    );
}

#[test]
fn a_create_never_replaces_a_file_that_appeared() {
    let (dir, root) = setup();
    let b = HostBackend::open(&root, opts(&dir)).unwrap();
    std::fs::write(root.join("late.txt"), "theirs\n").unwrap();
    assert_eq!(
        b.write(&VPath::parse("/late.txt"), b"mine\n", &Expect::Absent),
        Err(Error::AlreadyExists(VPath::parse("/late.txt")))
    );
    assert_eq!(
        std::fs::read_to_string(root.join("late.txt")).unwrap(),
        "theirs\n"
    );
}

#[test]
fn a_versioned_write_refuses_a_changed_file() {
    let (dir, root) = setup();
    std::fs::write(root.join("a.txt"), "one\n").unwrap();
    let b = HostBackend::open(&root, opts(&dir)).unwrap();
    let v = harness_fs::content_hash(b"one\n");
    std::fs::write(root.join("a.txt"), "two\n").unwrap();
    assert_eq!(
        b.write(&VPath::parse("/a.txt"), b"three\n", &Expect::Version(v)),
        Err(Error::Stale(VPath::parse("/a.txt")))
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn a_directory_swapped_for_a_link_is_not_followed() {
    let (dir, root) = setup();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("s.txt"), "secret\n").unwrap();
    std::fs::write(root.join("inner/s.txt"), "inner\n").unwrap();
    let b = HostBackend::open(&root, opts(&dir)).unwrap();
    assert_eq!(b.read(&VPath::parse("/inner/s.txt")).unwrap(), b"inner\n");
    // Swap the directory for a link out.
    std::fs::rename(root.join("inner"), dir.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("inner")).unwrap();
    assert_eq!(
        b.read(&VPath::parse("/inner/s.txt")),
        Err(Error::NotFound(VPath::parse("/inner/s.txt")))
    );
    assert_eq!(
        b.write(&VPath::parse("/inner/new.txt"), b"x", &Expect::Any),
        Err(Error::NotFound(VPath::parse("/inner/new.txt")))
    );
    assert!(!outside.join("new.txt").exists());
}

#[test]
fn rm_goes_to_a_trash_the_session_restores_from() {
    let (dir, root) = setup();
    std::fs::write(root.join("inner/a.txt"), "keep me\n").unwrap();
    let b: Arc<dyn Backend> = Arc::new(HostBackend::open(&root, opts(&dir)).unwrap());
    let view = View::new(b.clone(), Access::new().grant("/", Level::Stage));
    let id = view.rm("/inner").unwrap();
    assert!(!root.join("inner").exists());
    assert_eq!(view.list("/").unwrap().lines(), Vec::<String>::new());
    assert_eq!(view.restore(&id).unwrap(), VPath::parse("/inner"));
    assert_eq!(
        std::fs::read_to_string(root.join("inner/a.txt")).unwrap(),
        "keep me\n"
    );
    assert_eq!(view.restore(&id), Err(Error::NotInTrash(id.clone())));
}

#[test]
fn a_trashed_directory_is_purged_for_good_and_only_where_the_view_may_change() {
    let (dir, root) = setup();
    std::fs::create_dir_all(root.join("inner/deep/er")).unwrap();
    std::fs::write(root.join("inner/deep/er/a.txt"), "a\n").unwrap();
    std::fs::write(root.join("inner/b.txt"), "b\n").unwrap();
    let b: Arc<dyn Backend> = Arc::new(HostBackend::open(&root, opts(&dir)).unwrap());
    let view = View::new(b.clone(), Access::new().grant("/", Level::Stage));
    let id = view.rm("/inner").unwrap();
    let reader = View::new(b.clone(), Access::new().grant("/", Level::Ro));
    assert_eq!(reader.trash_list().unwrap(), vec![]);
    assert_eq!(reader.purge(&id), Err(Error::NotInTrash(id.clone())));
    assert_eq!(view.trash_list().unwrap().len(), 1);
    view.purge(&id).unwrap();
    assert_eq!(view.trash_list().unwrap(), vec![]);
    assert_eq!(view.restore(&id), Err(Error::NotInTrash(id.clone())));
    assert_eq!(view.purge(&id), Err(Error::NotInTrash(id.clone())));
    let trash = root.join(".llembas-trash");
    assert_eq!(std::fs::read_dir(&trash).unwrap().count(), 0, "{trash:?}");
}

#[test]
fn mv_renames_and_refuses_a_taken_name() {
    let (dir, root) = setup();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    std::fs::write(root.join("b.txt"), "b\n").unwrap();
    let b: Arc<dyn Backend> = Arc::new(HostBackend::open(&root, opts(&dir)).unwrap());
    let view = View::new(b, Access::new().grant("/", Level::Stage));
    assert_eq!(
        view.mv("/a.txt", "/b.txt"),
        Err(Error::AlreadyExists(VPath::parse("/b.txt")))
    );
    assert_eq!(
        view.mv("/a.txt", "/inner/c.txt").unwrap(),
        VPath::parse("/inner/c.txt")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("inner/c.txt")).unwrap(),
        "a\n"
    );
}

#[test]
fn mutations_from_many_threads_all_land() {
    let (dir, root) = setup();
    let b: Arc<dyn Backend> = Arc::new(HostBackend::open(&root, opts(&dir)).unwrap());
    std::thread::scope(|s| {
        for t in 0..4 {
            let b = b.clone();
            s.spawn(move || {
                for i in 0..25 {
                    b.write(
                        &VPath::parse(&format!("/inner/t{t}-{i}.txt")),
                        b"x\n",
                        &Expect::Absent,
                    )
                    .unwrap();
                }
            });
        }
    });
    assert_eq!(b.list(&VPath::parse("/inner")).unwrap().entries.len(), 101);
}

/// Run by [`another_process_is_refused`] in a child process: opens the root it is given and
/// says what came of it.
#[test]
#[allow(
    clippy::print_stdout,
    reason = "the child's answer, read by its parent test"
)]
fn child_opens_root() {
    let (Ok(root), Ok(locks)) = (
        std::env::var("HARNESS_FS_CHILD_ROOT"),
        std::env::var("HARNESS_FS_CHILD_LOCKS"),
    ) else {
        return;
    };
    let opts = HostOptions {
        lock_dir: Some(locks.into()),
        ..HostOptions::default()
    };
    match HostBackend::open(&root, opts) {
        Err(Error::RootInUse(_)) => println!("child: in use"),
        Ok(b) => {
            b.close();
            println!("child: opened");
        }
        Err(e) => println!("child: {e}"),
    }
}

#[test]
fn another_process_is_refused() {
    let (dir, root) = setup();
    let locks = dir.path().join("locks");
    let child = |path: &std::path::Path| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "suite::host::child_opens_root",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("HARNESS_FS_CHILD_ROOT", path)
            .env("HARNESS_FS_CHILD_LOCKS", &locks)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let held = HostBackend::open(root.join("inner"), opts(&dir)).unwrap();
    assert!(child(&root).contains("child: in use"), "containing root");
    assert!(
        child(&root.join("inner/deeper")).contains("child: in use"),
        "root inside"
    );
    held.close();
    assert!(child(&root).contains("child: opened"), "after close");
}

#[test]
fn grep_over_a_wide_tree_finds_every_match_in_path_then_line_order() {
    // Many directories and one directory of many files, so
    // the scan's threads share both; a binary file and one that is not UTF-8 are skipped.
    let (dir, root) = setup();
    let mut expected = Vec::new();
    for d in 0..300 {
        let sub = root.join(format!("d{d:03}/inner"));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("a.txt"), format!("hit {d}\nmiss\nhit again\n")).unwrap();
        expected.push((format!("/d{d:03}/inner/a.txt"), 1));
        expected.push((format!("/d{d:03}/inner/a.txt"), 3));
    }
    let flat = root.join("flat");
    std::fs::create_dir_all(&flat).unwrap();
    for f in 0..500 {
        std::fs::write(flat.join(format!("f{f:03}.txt")), "miss\nhit\n").unwrap();
        expected.push((format!("/flat/f{f:03}.txt"), 2));
    }
    std::fs::write(flat.join("bin.dat"), b"hit\n\0").unwrap();
    std::fs::write(flat.join("latin1.txt"), b"hit \xe9\n").unwrap();
    expected.sort_by(|a, b| (VPath::parse(&a.0), a.1).cmp(&(VPath::parse(&b.0), b.1)));
    let backend = HostBackend::open(&root, opts(&dir)).unwrap();
    let view = View::new(Arc::new(backend), Access::new().grant("/", Level::Ro));
    let found = harness_fs::tools::grep(
        &view,
        "/",
        "^hit",
        &harness_fs::tools::GrepOptions {
            limit: Some(usize::MAX),
            ..Default::default()
        },
    )
    .unwrap();
    let got: Vec<(String, u64)> = found
        .matches
        .iter()
        .map(|m| (m.path.to_string(), m.line))
        .collect();
    assert_eq!(got, expected);
    assert!(!found.truncated);
}

/// Runs the test `name` of this binary again as the user `nobody` (65534), with `envs`: root
/// passes every permission check, so a refusal can only be seen as another user.
fn as_nobody(name: &str, envs: &[(&str, &std::path::Path)]) -> String {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env_remove("XDG_RUNTIME_DIR");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{name} as nobody: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_root() -> bool {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(d.path()).unwrap()) == 0
}

fn chown_tree(path: &std::path::Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path(), uid);
        }
    }
}

/// The body of [`a_write_refuses_a_file_the_user_cannot_write`], as a user that is not root.
#[allow(
    clippy::print_stdout,
    reason = "the child's answer, read by its parent test"
)]
fn refuses_a_read_only_file(dir: &std::path::Path) {
    let root = dir.join("root");
    let b = HostBackend::open(
        &root,
        HostOptions {
            lock_dir: Some(dir.join("locks")),
            ..HostOptions::default()
        },
    )
    .unwrap();
    // What the shell's `>` meets on the same file: the file system's own refusal.
    let shell = std::fs::OpenOptions::new()
        .write(true)
        .open(root.join("ro.txt"))
        .unwrap_err();
    assert_eq!(shell.kind(), std::io::ErrorKind::PermissionDenied);
    for expect in [
        Expect::Any,
        Expect::Version(harness_fs::content_hash(b"keep\n")),
    ] {
        let e = b
            .write(&VPath::parse("/ro.txt"), b"gone\n", &expect)
            .unwrap_err();
        assert_eq!(
            e,
            Error::io("/ro.txt", &shell),
            "the refusal names the path with the system's text"
        );
    }
    assert_eq!(
        std::fs::read_to_string(root.join("ro.txt")).unwrap(),
        "keep\n"
    );
    let meta = std::fs::metadata(root.join("ro.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o444);
    // A file the user may write is still written, its mode kept.
    b.write(&VPath::parse("/rw.txt"), b"new\n", &Expect::Any)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("rw.txt")).unwrap(),
        "new\n"
    );
    let meta = std::fs::metadata(root.join("rw.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    b.close();
    println!("child: refused");
}

#[test]
fn a_write_refuses_a_file_the_user_cannot_write() {
    if let Some(dir) = std::env::var_os("HARNESS_FS_NOBODY_DIR") {
        refuses_a_read_only_file(std::path::Path::new(&dir));
        return;
    }
    let (dir, root) = setup();
    std::fs::write(root.join("ro.txt"), "keep\n").unwrap();
    std::fs::set_permissions(root.join("ro.txt"), std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::write(root.join("rw.txt"), "old\n").unwrap();
    std::fs::set_permissions(root.join("rw.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    if is_root() {
        chown_tree(dir.path(), 65534);
        let out = as_nobody(
            "suite::host::a_write_refuses_a_file_the_user_cannot_write",
            &[("HARNESS_FS_NOBODY_DIR", dir.path())],
        );
        assert!(out.contains("child: refused"), "{out}");
    } else {
        refuses_a_read_only_file(dir.path());
    }
}

#[test]
fn the_default_lock_directory_is_the_users_own_and_private() {
    use std::os::unix::fs::MetadataExt;
    let uid = {
        let d = tempfile::tempdir().unwrap();
        std::fs::metadata(d.path()).unwrap().uid()
    };
    let check = |d: &std::path::Path| {
        let m = std::fs::symlink_metadata(d).unwrap();
        assert!(m.is_dir(), "{}", d.display());
        assert_eq!(m.uid(), uid, "{}", d.display());
        assert_eq!(m.mode() & 0o777, 0o700, "{}", d.display());
    };
    // No runtime directory: a per-uid directory in the temporary directory.
    let tmp = tempfile::tempdir().unwrap();
    let d = harness_fs::backend::user_lock_dir(None, tmp.path()).unwrap();
    assert_eq!(d, tmp.path().join(format!("llembas-host-roots-{uid}")));
    check(&d);
    // One left too open by an earlier version is narrowed.
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        harness_fs::backend::user_lock_dir(None, tmp.path()).unwrap(),
        d
    );
    check(&d);
    // A runtime directory of this user.
    let rt = tempfile::tempdir().unwrap();
    let d = harness_fs::backend::user_lock_dir(Some(rt.path()), tmp.path()).unwrap();
    assert_eq!(d, rt.path().join("llembas-host-roots"));
    check(&d);
    // One that is not there (or not usable): the temporary directory's.
    let d = harness_fs::backend::user_lock_dir(Some(&rt.path().join("gone")), tmp.path()).unwrap();
    assert_eq!(d, tmp.path().join(format!("llembas-host-roots-{uid}")));
    // Another user's directory in its place is refused, never shared.
    let other = tempfile::tempdir().unwrap();
    let theirs = other.path().join(format!("llembas-host-roots-{uid}"));
    std::fs::create_dir(&theirs).unwrap();
    if uid == 0 {
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let e = harness_fs::backend::user_lock_dir(None, other.path()).unwrap_err();
        assert!(e.to_string().contains("belongs to user 65534"), "{e}");
    }
}

/// The body of [`two_users_open_roots_with_the_default_lock_directory`] for `nobody`.
#[test]
#[allow(
    clippy::print_stdout,
    reason = "the child's answer, read by its parent test"
)]
fn child_opens_with_the_default_locks() {
    let Some(root) = std::env::var_os("HARNESS_FS_NOBODY_ROOT") else {
        return;
    };
    match HostBackend::open(&root, HostOptions::default()) {
        Ok(b) => {
            b.close();
            println!("child: opened");
        }
        Err(e) => println!("child: {e}"),
    }
}

#[test]
fn two_users_open_roots_with_the_default_lock_directory() {
    if !is_root() {
        return;
    }
    // The first user (root) holds a root with the default locks; another user then opens a
    // root of their own with the default locks too.
    let (dir, root) = setup();
    let mine = HostBackend::open(&root, HostOptions::default()).unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chown_tree(dir.path(), 65534);
    let out = as_nobody(
        "suite::host::child_opens_with_the_default_locks",
        &[("HARNESS_FS_NOBODY_ROOT", &theirs)],
    );
    assert!(out.contains("child: opened"), "{out}");
    mine.close();
}
