//! Sessions on disk: the JSONL store's files, a torn tail mended before the next append.

use std::path::Path;

use llembas_cli::store::{Store, format_time, mend_torn_tail};

#[test]
fn times_format_as_utc() {
    assert_eq!(format_time(0), "1970-01-01 00:00");
    assert_eq!(format_time(1_795_900_000), "2026-11-28 21:06");
}

#[test]
fn a_torn_tail_is_cut_aside_before_the_next_append_at_every_byte() {
    use harness_agent::SessionStore;
    use harness_core::protocol::{Origin, TurnEnd};
    use harness_loop::transcript::{Entry, TranscriptWriter};
    let old = vec![
        Entry::TurnStarted {
            turn: 1,
            text: "list it — «ü»".into(),
            origin: Origin::Person,
            images: Vec::new(),
        },
        Entry::Assistant {
            text: "two files\nand more".into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
        },
        Entry::TurnEnded {
            reason: TurnEnd::Finished,
        },
    ];
    let mut w = TranscriptWriter::new(Vec::new());
    w.append_all(&old).unwrap();
    let bytes = w.into_inner();
    let new = Entry::Rewound { turn: 1 };
    let d = tempfile::tempdir().unwrap();
    let store = Store::new(d.path().join("sessions"));
    for cut in 0..=bytes.len() {
        // A session killed mid-append at byte `cut`, then resumed: loaded, and appended to.
        let meta = store.create(Path::new("/p"), "m").unwrap();
        let path = store.transcript(&meta.id);
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let loaded = SessionStore::load(&store, &meta.id).unwrap();
        let n = bytes[..cut].iter().filter(|&&b| b == b'\n').count();
        assert_eq!(loaded, old[..n], "cut at {cut}");
        SessionStore::append(&store, &meta.id, std::slice::from_ref(&new)).unwrap();
        let again = SessionStore::load(&store, &meta.id).unwrap();
        let mut want = old[..n].to_vec();
        want.push(new.clone());
        assert_eq!(again, want, "cut at {cut}");
        let valid = bytes[..cut]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let aside = path.with_file_name("transcript.jsonl.torn-1");
        if valid < cut {
            assert_eq!(
                std::fs::read(&aside).unwrap(),
                &bytes[valid..cut],
                "cut at {cut}"
            );
        } else {
            assert!(!aside.exists(), "cut at {cut}");
        }
        let _ = std::fs::remove_dir_all(store.dir(&meta.id));
    }
}

#[test]
fn a_second_torn_tail_is_kept_beside_the_first() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("transcript.jsonl");
    std::fs::write(&path, "{\"a\":1}\n{\"b\"").unwrap();
    assert_eq!(
        mend_torn_tail(&path).unwrap(),
        Some(d.path().join("transcript.jsonl.torn-1"))
    );
    std::fs::write(&path, "{\"a\":1}\n{\"c").unwrap();
    assert_eq!(
        mend_torn_tail(&path).unwrap(),
        Some(d.path().join("transcript.jsonl.torn-2"))
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
    assert_eq!(
        std::fs::read_to_string(d.path().join("transcript.jsonl.torn-2")).unwrap(),
        "{\"c"
    );
    assert_eq!(mend_torn_tail(&path).unwrap(), None);
    assert_eq!(mend_torn_tail(&d.path().join("none")).unwrap(), None);
}

#[test]
fn create_list_find() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::new(d.path().join("sessions"));
    assert!(store.list(None).unwrap().is_empty());
    let a = store.create(Path::new("/p/a"), "m").unwrap();
    let mut b = store.create(Path::new("/p/b"), "m").unwrap();
    b.updated += 10;
    b.title = "fix it".into();
    store.save(&b).unwrap();
    assert_eq!(
        store.list(Some(Path::new("/p/a"))).unwrap(),
        vec![a.clone()]
    );
    assert_eq!(store.list(None).unwrap()[0], b);
    assert_eq!(store.find("", Path::new("/p/b")).unwrap(), b);
    assert_eq!(store.find(&a.id, Path::new("/x")).unwrap(), a);
    assert!(
        store
            .find("", Path::new("/nowhere"))
            .unwrap_err()
            .to_string()
            .starts_with("no saved session in")
    );
}
