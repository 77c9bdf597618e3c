//! The index kept in one file: what was put comes back (vectors bit for bit), it is written at
//! `flush` only, atomically, and a file that is not an index is an error naming it.

use harness_search::{FileStore, Index, Params, Ranking, Store as _, StoredFile, StoredPiece};

fn file(path: &str, vector: Option<Vec<f32>>) -> StoredFile {
    StoredFile {
        path: path.into(),
        hash: "h".into(),
        by_tokens: true,
        pieces: vec![StoredPiece {
            hash: "p".into(),
            start_line: 3,
            end_line: 9,
            text: "the zeppelin hangar".into(),
            vector,
        }],
    }
}

#[test]
fn a_file_store_round_trips_and_writes_at_flush_only() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("data/search/index.json");
    let mut store = FileStore::open(&path).unwrap();
    assert!(store.load().unwrap().is_empty());
    let v = vec![0.1f32, -2.5e-8, f32::MIN_POSITIVE, 1.0 / 3.0];
    store.put(&file("a.md", Some(v.clone()))).unwrap();
    store.put(&file("b.md", None)).unwrap();
    assert!(!path.exists(), "written before flush");
    store.flush().unwrap();
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["index.json"], "no temporary file is left");
    let again = FileStore::open(&path).unwrap();
    assert_eq!(
        again.load().unwrap(),
        vec![file("a.md", Some(v)), file("b.md", None)]
    );
    // An index over it finds what it holds, and a removal is saved at the next flush.
    let mut index = Index::open(again, None, Params::embedded().unwrap()).unwrap();
    let hits = index
        .search("zeppelin", 5, Ranking::Words, &|_| true)
        .unwrap()
        .hits;
    assert_eq!(hits.len(), 2);
    assert_eq!((hits[0].start_line, hits[0].end_line), (3, 9));
    index.remove("a.md").unwrap();
    index.flush().unwrap();
    assert_eq!(
        FileStore::open(&path).unwrap().paths().collect::<Vec<_>>(),
        vec!["b.md"]
    );
}

#[test]
fn a_file_that_is_not_an_index_is_an_error_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("index.json");
    std::fs::write(&path, "{\"format\": 1, \"files\": 7}").unwrap();
    let text = FileStore::open(&path).unwrap_err().to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("not an index"), "{text}");
}
