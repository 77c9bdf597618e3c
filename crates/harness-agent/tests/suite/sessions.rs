//! Which saved session a person names to go on with.

use std::path::Path;

use harness_agent::Meta;
use harness_agent::store::pick;
use pretty_assertions::assert_eq;

fn meta(id: &str, cwd: &str) -> Meta {
    Meta {
        id: id.into(),
        cwd: cwd.into(),
        created: 0,
        updated: 0,
        title: String::new(),
        model: "m".into(),
        mode: None,
    }
}

#[test]
fn an_id_or_its_unique_start_names_a_session() {
    // Newest first, as a store lists them.
    let list = [
        meta("20261129-2100-aaaa", "/p/b"),
        meta("20261129-2059-abcd", "/p/a"),
        meta("20261128-1000-0001", "/p/a"),
    ];
    assert_eq!(
        pick(&list, "", Path::new("/p/a")).unwrap().id,
        "20261129-2059-abcd"
    );
    assert_eq!(
        pick(&list, "", Path::new("/p/b")).unwrap().id,
        "20261129-2100-aaaa"
    );
    assert_eq!(
        pick(&list, "", Path::new("/p/c")).unwrap_err(),
        "no saved session in /p/c"
    );
    // Any directory's session, by id or a start only it has.
    assert_eq!(
        pick(&list, "20261128", Path::new("/p/b")).unwrap().id,
        "20261128-1000-0001"
    );
    assert_eq!(
        pick(&list, "20261129-2100-aaaa", Path::new("/x"))
            .unwrap()
            .id,
        "20261129-2100-aaaa"
    );
    assert_eq!(
        pick(&list, "20261129", Path::new("/p/a")).unwrap_err(),
        "2 sessions start with 20261129: 20261129-2100-aaaa, 20261129-2059-abcd"
    );
    assert_eq!(
        pick(&list, "1999", Path::new("/p/a")).unwrap_err(),
        "no saved session with id 1999"
    );
}

#[test]
fn a_store_names_the_session_it_does_not_hold() {
    use harness_agent::{MemoryStore, SeamError, SessionStore};
    let store = MemoryStore::default();
    let missing = SeamError::NoSession { id: "gone".into() };
    assert_eq!(store.find("gone").unwrap_err(), missing);
    assert_eq!(store.load("gone").unwrap_err(), missing);
    assert_eq!(store.append("gone", &[]).unwrap_err(), missing);
    assert_eq!(missing.to_string(), "no session gone in the store");
}
