//! The index: words alone without the model, the view after scoring (two users over one tree),
//! lines of pieces, incremental updates.

use harness_search::{Embedder, Index, MemoryStore, Params, Ranking};
use pretty_assertions::assert_eq;

/// A small tree: what each file says.
const TREE: &[(&str, &str)] = &[
    (
        "docs/auth.md",
        "# Sign-in\n\nFailed sign-ins are counted per account.\nAfter five failed attempts the account is locked for ten minutes.\n",
    ),
    (
        "docs/budget.md",
        "# Budget notes\n\nThe quarterly budget for hosting is 400 euros.\nSpending above the budget needs approval.\n",
    ),
    (
        "src/session.rs",
        "/// Signs a user in, checking the password hash.\nfn sign_in(user: &User, password: &str) -> Result<Session> {\n    if !verify(password, &user.hash) { record_failed_attempt(user); }\n    todo!()\n}\n",
    ),
    (
        "notes/travel.md",
        "Paris in spring: the weather is mild, museums are open late on Fridays.\n",
    ),
    (
        "secret/incident.md",
        "Incident: failed sign-in attempts from one address locked the admin account; the password policy changed after it.\nfailed failed sign-in account locked\n",
    ),
];

const HIDDEN: &str = "secret/incident.md";

fn index_of(tree: &[(&str, &str)], embedder: Option<Embedder>) -> Index<MemoryStore> {
    let mut index = Index::open(MemoryStore::new(), embedder, Params::embedded().unwrap()).unwrap();
    for (path, text) in tree {
        index.update(path, text).unwrap();
    }
    index
}

fn paths(answer: &harness_search::Answer) -> Vec<&str> {
    answer.hits.iter().map(|h| h.path.as_str()).collect()
}

fn two_users(embedder: impl Fn() -> Option<Embedder>, ranking: Ranking) {
    let shared = index_of(TREE, embedder());
    let without: Vec<(&str, &str)> = TREE.iter().copied().filter(|(p, _)| *p != HIDDEN).collect();
    let never_had_it = index_of(&without, embedder());
    let alice = |_: &str| true;
    let bob = |p: &str| p != HIDDEN;
    for query in [
        "failed sign-in attempts lock the account",
        "password",
        "what happens after too many wrong passwords",
        "budget",
    ] {
        let a = shared.search(query, 10, ranking, &alice).unwrap();
        let b = shared.search(query, 10, ranking, &bob).unwrap();
        let reference = never_had_it.search(query, 10, ranking, &alice).unwrap();
        assert!(!paths(&b).contains(&HIDDEN), "{query:?}: {:?}", paths(&b));
        // The hidden file changes nothing Bob sees: not the files, not their order, not their
        // scores, compared with a tree that never had it.
        assert_eq!(b, reference, "{query:?}");
        if query.contains("sign-in") {
            // Alice, who may see it, finds it among the first.
            assert!(
                paths(&a)[..2].contains(&HIDDEN),
                "{query:?}: {:?}",
                paths(&a)
            );
        }
    }
}

#[test]
fn a_hidden_file_neither_appears_nor_changes_the_ranks_of_the_visible_ones() {
    two_users(|| None, Ranking::Words);
}

#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn a_hidden_file_neither_appears_nor_changes_the_ranks_combined_embedder() {
    two_users(|| Some(super::embedder()), Ranking::Combined);
    two_users(|| Some(super::embedder()), Ranking::Vectors);
}

#[test]
fn without_the_embedder_search_ranks_by_words_alone_and_says_so() {
    let index = index_of(TREE, None);
    let answer = index
        .search("budget approval", 10, Ranking::Combined, &|_| true)
        .unwrap();
    assert_eq!(answer.ranked_by, Ranking::Words);
    assert!(
        answer.note.as_deref().unwrap_or("").contains("words alone"),
        "{:?}",
        answer.note
    );
    assert_eq!(paths(&answer), vec!["docs/budget.md"]);
    let words = index
        .search("budget approval", 10, Ranking::Words, &|_| true)
        .unwrap();
    assert_eq!(words.note, None);
}

#[test]
fn words_match_across_case_plurals_and_identifiers() {
    let index = index_of(TREE, None);
    // `sign_in` and `record_failed_attempt` are split into their words; "attempts" → "attempt".
    let answer = index
        .search("Attempt", 10, Ranking::Words, &|_| true)
        .unwrap();
    assert!(
        paths(&answer).contains(&"src/session.rs"),
        "{:?}",
        paths(&answer)
    );
    assert!(
        paths(&answer).contains(&"docs/auth.md"),
        "{:?}",
        paths(&answer)
    );
}

#[test]
fn results_name_the_file_and_the_lines_of_the_piece() {
    // Without a tokenizer, the character rule: pieces of at most 2000 characters repeating 200.
    let mut text = String::new();
    for i in 1..=200 {
        text.push_str(&format!("line {i} of filler text about nothing much\n"));
    }
    text.push_str("the zeppelin hangar is at the end\n");
    let mut index = Index::open(MemoryStore::new(), None, Params::embedded().unwrap()).unwrap();
    let update = index.update("long.txt", &text).unwrap();
    assert!(update.pieces > 3, "{update:?}");
    let answer = index
        .search("zeppelin", 10, Ranking::Words, &|_| true)
        .unwrap();
    assert_eq!(answer.hits.len(), 1);
    let hit = &answer.hits[0];
    assert_eq!(hit.path, "long.txt");
    assert_eq!(hit.end_line, 201);
    assert!(hit.start_line > 150 && hit.start_line < 201, "{hit:?}");
    // The piece's lines are the ones its text spans.
    let first = index
        .search("line 1 of filler", 1, Ranking::Words, &|_| true)
        .unwrap();
    assert_eq!(first.hits[0].start_line, 1);
}

#[test]
fn an_unchanged_file_is_not_cut_again_and_a_removed_one_is_gone() {
    let mut index = index_of(TREE, None);
    let again = index.update("docs/budget.md", TREE[1].1).unwrap();
    assert!(again.unchanged);
    let pieces = index.piece_count();
    index
        .update("docs/budget.md", "Nothing about money any more.\n")
        .unwrap();
    assert_eq!(index.piece_count(), pieces);
    assert_eq!(
        index
            .search("budget", 10, Ranking::Words, &|_| true)
            .unwrap()
            .hits,
        vec![]
    );
    assert!(index.remove("docs/auth.md").unwrap());
    assert!(!index.remove("docs/auth.md").unwrap());
    let answer = index
        .search("locked account", 10, Ranking::Words, &|_| true)
        .unwrap();
    assert!(!paths(&answer).contains(&"docs/auth.md"));
    // The store holds what the index holds: reopened over it, the same answers.
    let reopened = Index::open(index.store().clone(), None, Params::embedded().unwrap()).unwrap();
    assert_eq!(
        reopened
            .search("password", 10, Ranking::Words, &|_| true)
            .unwrap(),
        index
            .search("password", 10, Ranking::Words, &|_| true)
            .unwrap()
    );
}

#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn only_changed_pieces_are_embedded_again_embedder() {
    let e = super::embedder();
    // Three pieces' worth of distinct paragraphs (480 tokens a piece, 64 repeated).
    let mut paragraphs: Vec<String> = (0..60)
        .map(|i| format!("Paragraph {i} talks about topic number {i} at some length, with words enough to fill space and more.\n"))
        .collect();
    let text = paragraphs.concat();
    let tokens = e.counter().count(&text).unwrap();
    assert!(tokens > 2 * 480, "{tokens}");
    let mut index = Index::open(MemoryStore::new(), Some(e), Params::embedded().unwrap()).unwrap();
    let first = index.update("long.md", &text).unwrap();
    assert_eq!(first.embedded, first.pieces);
    assert!(first.pieces >= 3, "{first:?}");
    // One word of the first paragraph changed (a token for a token): only the first piece is
    // embedded again, the others keep their vectors.
    paragraphs[0] = paragraphs[0].replace("topic", "sailing");
    let second = index.update("long.md", &paragraphs.concat()).unwrap();
    assert_eq!(second.pieces, first.pieces);
    assert_eq!(second.embedded, 1, "{second:?}");
    assert_eq!(second.reused, second.pieces - 1, "{second:?}");
    let answer = index
        .search("sailing", 1, Ranking::Combined, &|_| true)
        .unwrap();
    assert_eq!(answer.hits[0].start_line, 1);
}

#[test]
fn the_ranking_numbers_are_the_spec_s() {
    let spec = harness_spec::Spec::embedded();
    let r = spec.tool("search").and_then(|t| t.ranking).unwrap();
    let p = Params::from_spec(spec).unwrap();
    assert_eq!(
        (
            p.rrf_k,
            p.bm25_k1,
            p.bm25_b,
            p.word_candidates,
            p.vector_candidates
        ),
        (
            r.rrf_k,
            r.bm25_k1,
            r.bm25_b,
            r.word_candidates,
            r.vector_candidates
        )
    );
    // A spec of other numbers ranks by them: one candidate a side gives one passage.
    let mut files = std::collections::BTreeMap::new();
    for rel in spec.paths() {
        let mut bytes = spec.text(rel).unwrap().as_bytes().to_vec();
        if rel == "tools/search.json" {
            let mut tool: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            tool["ranking"]["word_candidates"] = 1.into();
            tool["ranking"]["rrf_k"] = 5.into();
            bytes = serde_json::to_vec_pretty(&tool).unwrap();
        }
        files.insert(rel.to_string(), bytes);
    }
    let other = harness_spec::Spec::from_files("test".into(), files).unwrap();
    let p = Params::from_spec(&other).unwrap();
    assert_eq!((p.word_candidates, p.rrf_k), (1, 5.0));
    let mut index = Index::open(MemoryStore::new(), None, p).unwrap();
    for (path, text) in TREE {
        index.update(path, text).unwrap();
    }
    // Words alone are not cut to the fusion's candidates.
    let words = index
        .search("failed", 10, Ranking::Words, &|_| true)
        .unwrap();
    assert!(words.hits.len() > 1, "{:?}", paths(&words));
}

/// The pieces of `text` as harness-fs's index_text makes them with the embedder asked piece
/// after piece (the way a file was cut before its pieces were embedded side by side): ranges,
/// vectors (`None` for a single token refused).
fn one_by_one(e: &Embedder, params: &Params, text: &str) -> Vec<(String, Option<Vec<f32>>)> {
    let mut embed = |piece: &str, _tokens: usize| e.embed(piece);
    harness_fs::chunk::index_text(
        e.counter(),
        text,
        params.piece_tokens,
        params.overlap_tokens,
        &mut embed,
    )
    .unwrap()
    .into_iter()
    .map(|ix| (ix.piece.text(text).to_string(), ix.vector))
    .collect()
}

fn assert_same_pieces(
    got: &harness_search::StoredFile,
    want: &[(String, Option<Vec<f32>>)],
    what: &str,
) {
    let texts: Vec<&str> = got.pieces.iter().map(|p| p.text.as_str()).collect();
    let want_texts: Vec<&str> = want.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, want_texts, "{what}");
    for (p, (_, v)) in got.pieces.iter().zip(want) {
        let (a, b) = (p.vector.as_ref().unwrap(), v.as_ref().unwrap());
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(diff < 1e-5, "{what}: a vector differs by {diff}");
    }
}

/// Files cut together ([`harness_search::cut_all`], their new pieces embedded side by side)
/// get the pieces and vectors of the embedder asked piece after piece, refusals included: with
/// pieces of 600 tokens (past the model's 510) every first cut is refused by the tokenizer's
/// count, before any embedding, and split as the embedder's refusal split it.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn files_cut_together_get_the_pieces_and_vectors_of_one_by_one_embedder() {
    let e = super::embedder();
    let long: String = (0..80)
        .map(|i| format!("Line {i} says something about caches, queues and parsers, number {i}.\n"))
        .collect();
    let files = [
        ("long.md", long.as_str()),
        ("auth.md", TREE[0].1),
        ("budget.md", TREE[1].1),
        ("empty.md", ""),
    ];
    for piece_tokens in [480, 600] {
        let params = Params {
            piece_tokens,
            ..Params::embedded().unwrap()
        };
        let known = harness_search::Known::default();
        let jobs: Vec<_> = files.iter().map(|&(p, t)| (&known, p, t)).collect();
        let cuts = harness_search::cut_all(Some(&e), &params, &jobs).unwrap();
        assert_eq!(cuts.len(), files.len());
        for (c, (path, text)) in cuts.iter().zip(files) {
            let want = one_by_one(&e, &params, text);
            assert_same_pieces(c.file(), &want, &format!("{path} at {piece_tokens}"));
        }
        let long_pieces = cuts[0].file().pieces.len();
        if piece_tokens == 600 {
            // Refused and split: more pieces than windows of 600.
            assert!(long_pieces >= 3, "{long_pieces}");
        }
    }
}

/// [`Index::update_all`] leaves the index [`Index::update`] file after file leaves, and says
/// the same of each file (unchanged, pieces, embedded, reused).
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn updating_all_at_once_is_updating_one_after_the_other_embedder() {
    let e = std::sync::Arc::new(super::embedder());
    let params = Params::embedded().unwrap();
    let open = || Index::open_shared(MemoryStore::new(), Some(e.clone()), params.clone()).unwrap();
    let (mut together, mut apart) = (open(), open());
    let changed: Vec<(&str, String)> = TREE
        .iter()
        .map(|&(p, t)| (p, t.replace("account", "profile")))
        .collect();
    for round in [
        TREE.to_vec(),
        // One changed, one as it was, one new.
        vec![
            (TREE[0].0, changed[0].1.as_str()),
            TREE[1],
            ("docs/new.md", "A new page about the budget's approval."),
        ],
    ] {
        let got = together.update_all(&round).unwrap();
        let want: Vec<_> = round
            .iter()
            .map(|(p, t)| apart.update(p, t).unwrap())
            .collect();
        assert_eq!(got, want);
    }
    assert_eq!(together.piece_count(), apart.piece_count());
    for q in ["failed sign-in", "money for hosting", "approval"] {
        assert_eq!(
            together
                .search(q, 10, Ranking::Combined, &|_| true)
                .unwrap(),
            apart.search(q, 10, Ranking::Combined, &|_| true).unwrap(),
            "{q}"
        );
    }
}
