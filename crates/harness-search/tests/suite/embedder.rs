//! The embedder against reference vectors (`tests/fixture.json`, made by `tests/fixture.py`),
//! and the tokenizer's built-in truncation and padding turned off.

use serde_json::Value;

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn vectors_match_the_reference_vectors_embedder() {
    let fixture: Value = serde_json::from_str(include_str!("../fixture.json")).unwrap();
    let e = super::embedder();
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() >= 5);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want: Vec<f32> = case["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_f64().unwrap() as f32)
            .collect();
        let got = e.embed(text).unwrap();
        assert_eq!(got.len(), 384, "{text:?}");
        let c = cosine(&got, &want);
        assert!(c >= 0.999, "cosine {c} for {text:?}");
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm} for {text:?}");
    }
    // Meaning, not words: the file-reading sentences are nearer each other than the weather.
    let v: Vec<Vec<f32>> = cases
        .iter()
        .map(|c| e.embed(c["text"].as_str().unwrap()).unwrap())
        .collect();
    assert!(cosine(&v[2], &v[3]) > cosine(&v[2], &v[4]) + 0.3);
}

#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn texts_are_neither_cut_nor_padded_at_128_tokens_embedder() {
    let e = super::embedder();
    // tokenizer.json carries truncation at 128 and fixed padding to 128: both must be off.
    assert_eq!(e.counter().count("hello world").unwrap(), 2);
    let long = "the quick brown fox jumps over the lazy dog ".repeat(40); // 360 tokens
    assert_eq!(e.counter().count(&long).unwrap(), 360);
    // A text past 128 tokens is embedded whole: its tail changes the vector.
    let head = "the quick brown fox jumps over the lazy dog ".repeat(15);
    let tail = format!("{head} {}", "sqlite database migrations ".repeat(30));
    let (a, b) = (e.embed(&head).unwrap(), e.embed(&tail).unwrap());
    assert!(cosine(&a, &b) < 0.99, "{}", cosine(&a, &b));
    // 510 tokens fit the model's 512 positions, 511 are refused (the index then splits).
    let fits = "word ".repeat(e.max_tokens());
    assert!(e.embed(&fits).is_ok());
    let over = "word ".repeat(e.max_tokens() + 1);
    assert!(e.embed(&over).is_err());
    // A query past the model's length is cut rather than refused.
    assert_eq!(e.embed_query(&over).unwrap().len(), 384);
}

/// Bytes this process has read so far (`rchar` of /proc/self/io: every read, files and /proc).
fn bytes_read() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The probe [`a_query_is_embedded_without_reading_files_embedder`] runs in a process of its
/// own: prints the bytes read while embedding five queries (a no-op unless asked).
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn probe_reads_while_embedding_embedder() {
    if std::env::var_os("LLEMBAS_READ_PROBE").is_none() {
        return;
    }
    let e = super::embedder();
    e.embed_query("warm up").unwrap();
    let before = bytes_read();
    for q in [
        "parse command line flags",
        "a hash map",
        "CBOR with serde",
        "async IO",
        "x",
    ] {
        e.embed_query(q).unwrap();
    }
    let after = bytes_read();
    println!("probe read {} bytes", after - before);
}

/// Embedding reads no file: candle works out the thread count of every matrix product from
/// /proc/cpuinfo unless `RAYON_NUM_THREADS` is set (`harness_search::embedder::THREADS_VAR`,
/// which binaries set and `cargo xtask test` passes), ≈20 of a query's 39 ms. Counted in
/// bytes read, in a process of its own (other tests read files meanwhile), not timed.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn a_query_is_embedded_without_reading_files_embedder() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "suite::embedder::probe_reads_while_embedding_embedder",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LLEMBAS_READ_PROBE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let read: u64 = text
        .lines()
        .find_map(|l| l.split_once("probe read ").map(|(_, r)| r))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no probe figure in {text}"))
        .parse()
        .unwrap();
    assert!(
        read < 16 * 1024,
        "embedding five queries read {read} bytes: is {} unset? (cargo xtask test sets it)",
        harness_search::embedder::THREADS_VAR
    );
}
