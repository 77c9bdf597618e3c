//! The one door to the disk (`write_atomic`) and a memory file's guarded update.

use std::os::unix::fs::PermissionsExt as _;

use harness_fs::memory::{MemoryFile, Target};
use harness_fs::{Error, write_atomic};
use serde_json::json;

#[test]
fn a_write_replaces_the_file_whole_keeping_its_mode_and_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.json");
    std::fs::write(&path, "old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    write_atomic(&path, b"new").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["meta.json".to_string()]);
}

#[test]
fn a_write_through_a_link_replaces_its_target_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    let link = dir.path().join("link.json");
    std::fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    write_atomic(&link, b"new").unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
}

#[test]
fn a_write_into_a_missing_directory_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nowhere").join("f.json");
    let e = write_atomic(&path, b"x").unwrap_err();
    assert!(e.to_string().contains("nowhere"), "{e}");
}

#[test]
fn an_update_is_refused_when_the_file_changed_between_its_read_and_its_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory").join("1.json");
    let file = MemoryFile::new(&path);
    file.update(|m| m.apply(&json!({"action": "add", "text": "first"})))
        .unwrap();
    // Another writer (the memory API) changes the file while this change is being made.
    let other = MemoryFile::new(&path);
    let got = file.update(|m| {
        let (mut theirs, _) = other.read()?;
        theirs.apply(&json!({"action": "add", "text": "theirs"}))?;
        std::fs::write(&path, theirs.to_json()).unwrap();
        m.apply(&json!({"action": "add", "text": "mine"}))
    });
    assert!(matches!(got, Err(Error::MemoryChanged { .. })), "{got:?}");
    let (now, _) = file.read().unwrap();
    let texts: Vec<&str> = now
        .entries(Target::Memory)
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts, vec!["first", "theirs"]);
}

#[test]
fn a_refused_change_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.json");
    let file = MemoryFile::new(&path);
    let got = file.update(|m| m.apply(&json!({"action": "remove", "id": "m9"})));
    assert!(got.is_err());
    assert!(!path.exists());
}
