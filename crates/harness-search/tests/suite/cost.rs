//! What a search costs does not grow with the index: the vectors are one matrix scanned in
//! place, the words' postings say which pieces to score, each ranking keeps only the
//! candidates it gives the fusion, and the buffers of one search serve the next. Measured in
//! bytes allocated by the searching thread (not in time): a search over 10 times the pieces
//! allocates no more.

use harness_search::{Index, MemoryStore, Params, Ranking, Store as _, StoredFile, StoredPiece};

use super::alloc::allocated;

const DIM: usize = 16;

fn vector(seed: usize) -> Vec<f32> {
    let v: Vec<f32> = (0..DIM)
        .map(|i| ((seed * 31 + i * 7) % 17) as f32 - 8.0)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.into_iter().map(|x| x / norm).collect()
}

/// An index of `files` files of 10 pieces each, every piece holding the word "alpha".
fn index(files: usize) -> Index<MemoryStore> {
    let mut store = MemoryStore::new();
    for f in 0..files {
        let pieces = (0..10)
            .map(|i| StoredPiece {
                hash: format!("{f}-{i}"),
                start_line: i * 10 + 1,
                end_line: i * 10 + 10,
                text: format!("alpha beta gamma{} delta{f}", i % 3),
                vector: Some(vector(f * 10 + i)),
            })
            .collect();
        store
            .put(&StoredFile {
                path: format!("dir{}/file{f}.md", f % 7),
                hash: f.to_string(),
                by_tokens: true,
                pieces,
            })
            .unwrap();
    }
    Index::open(store, None, Params::embedded().unwrap()).unwrap()
}

/// Bytes the search allocates (the second search: the first sizes the reused buffers).
fn cost(index: &Index<MemoryStore>, ranking: Ranking) -> usize {
    let q = vector(3);
    let see = |p: &str| !p.starts_with("dir3/");
    let first = index.search_with("alpha gamma1", Some(&q), 10, ranking, &see);
    assert_eq!(first.hits.len(), 10);
    let before = allocated();
    let answer = index.search_with("alpha gamma1", Some(&q), 10, ranking, &see);
    let bytes = allocated() - before;
    assert_eq!(answer, first);
    bytes
}

#[test]
fn a_search_allocates_no_more_over_ten_times_the_pieces() {
    let (small, big) = (index(50), index(500));
    assert_eq!(big.piece_count(), 5000);
    for ranking in [Ranking::Words, Ranking::Vectors, Ranking::Combined] {
        let (s, b) = (cost(&small, ranking), cost(&big, ranking));
        assert!(
            b <= s + 512,
            "{ranking:?}: {s} bytes over 500 pieces, {b} over 5000"
        );
    }
}

#[test]
fn words_alone_over_the_old_path_allocate_no_more_over_ten_times_the_pieces() {
    // The same through `search` (no vector: words alone).
    let (small, big) = (index(50), index(500));
    let see = |p: &str| !p.starts_with("dir3/");
    let measure = |index: &Index<MemoryStore>| {
        index.search("alpha", 10, Ranking::Words, &see).unwrap();
        let before = allocated();
        let a = index.search("alpha", 10, Ranking::Words, &see).unwrap();
        let bytes = allocated() - before;
        assert_eq!(a.hits.len(), 10);
        bytes
    };
    let (s, b) = (measure(&small), measure(&big));
    assert!(b <= s + 512, "{s} bytes over 500 pieces, {b} over 5000");
}
