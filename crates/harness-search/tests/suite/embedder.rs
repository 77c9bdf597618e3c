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
#[allow(
    clippy::print_stdout,
    reason = "the probe's answer, read by its parent test"
)]
fn probe_reads_while_embedding_embedder() {
    if std::env::var_os("LLEMBAS_READ_PROBE").is_none() {
        return;
    }
    if let Some(done) = BEFORE_MAIN_SET.get() {
        println!("probe set before main: {done:?}");
        println!(
            "probe elementwise threads: {:?}",
            std::env::var(harness_search::embedder::ELEMWISE_THREADS_VAR).ok()
        );
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

/// What [`harness_search::embedder::set_threads_var`] did when the probe process called it
/// before `main` (asked by `LLEMBAS_READ_PROBE=main`).
static BEFORE_MAIN_SET: std::sync::OnceLock<harness_search::embedder::ThreadsVar> =
    std::sync::OnceLock::new();

extern "C" fn before_main() {
    if std::env::var_os("LLEMBAS_READ_PROBE").is_some_and(|v| v == "main") {
        let _ = BEFORE_MAIN_SET.set(harness_search::embedder::set_threads_var());
    }
}

/// Runs [`before_main`] where a binary's `main` starts: before any thread (the test harness
/// starts its own in `main`), as `llembas` and `llembas-server` call it.
#[allow(unsafe_code)]
#[used]
#[unsafe(link_section = ".init_array")]
static BEFORE_MAIN: extern "C" fn() = before_main;

/// Runs the probe in a process of its own, `probe` naming how (`LLEMBAS_READ_PROBE`), with
/// `threads` for [`harness_search::embedder::THREADS_VAR`] (`None`: unset); its output.
fn run_probe(probe: &str, threads: Option<&str>) -> String {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "suite::embedder::probe_reads_while_embedding_embedder",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("LLEMBAS_READ_PROBE", probe)
    .env_remove(harness_search::embedder::THREADS_VAR)
    .env_remove(harness_search::embedder::ELEMWISE_THREADS_VAR);
    if let Some(t) = threads {
        cmd.env(harness_search::embedder::THREADS_VAR, t);
    }
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The bytes the probe's output says it read.
fn probe_read(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.split_once("probe read ").map(|(_, r)| r))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no probe figure in {text}"))
        .parse()
        .unwrap()
}

/// The binaries' path: with [`harness_search::embedder::THREADS_VAR`] unset, the function
/// their `main` calls first ([`harness_search::embedder::set_threads_var`], here before the
/// test harness's `main`) sets it, and five queries embedded read no file (without it: ≈690 kB
/// of /proc/cpuinfo). Counted in bytes read, not timed.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn a_query_is_embedded_without_reading_files_once_main_set_the_threads_embedder() {
    let text = run_probe("main", None);
    let want = format!(
        "probe set before main: Set({:?})",
        harness_search::embedder::thread_count()
    );
    assert!(text.contains(&want), "{text}");
    // candle's elementwise pool: its caller does the work itself (no spinning on a busy core).
    assert!(
        text.contains("probe elementwise threads: Some(\"1\")"),
        "{text}"
    );
    let read = probe_read(&text);
    assert!(read < 16 * 1024, "embedding five queries read {read} bytes");
    // Set already, it is kept; with another thread running it is left alone.
    let text = run_probe("main", Some("1"));
    assert!(
        text.contains("probe set before main: Kept(\"1\")"),
        "{text}"
    );
    assert_eq!(
        harness_search::embedder::set_threads_var(),
        match std::env::var(harness_search::embedder::THREADS_VAR) {
            Ok(v) if v.parse::<usize>().is_ok_and(|n| n > 0) =>
                harness_search::embedder::ThreadsVar::Kept(v),
            _ => harness_search::embedder::ThreadsVar::NotAlone,
        }
    );
}

/// Embedding reads no file: candle works out the thread count of every matrix product from
/// /proc/cpuinfo unless `RAYON_NUM_THREADS` is set (`harness_search::embedder::THREADS_VAR`,
/// which binaries set and `cargo xtask test` passes), ≈20 of a query's 39 ms. Counted in
/// bytes read, in a process of its own (other tests read files meanwhile), not timed.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn a_query_is_embedded_without_reading_files_embedder() {
    let threads = harness_search::embedder::thread_count();
    let read = probe_read(&run_probe("1", Some(&threads)));
    assert!(
        read < 16 * 1024,
        "embedding five queries read {read} bytes with {}={threads}",
        harness_search::embedder::THREADS_VAR
    );
}

/// Texts embedded side by side ([`harness_search::Embedder::embed_many`]) get the vectors each
/// gets alone, in their order, a text past the model's length refused in its place.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn texts_embedded_side_by_side_get_the_vectors_of_each_alone_embedder() {
    let e = super::embedder();
    let over = "word ".repeat(e.max_tokens() + 1);
    let texts = [
        "a hash map",
        over.as_str(),
        "parse command line flags",
        "the quick brown fox jumps over the lazy dog",
    ];
    let got = e.embed_many(&texts);
    assert_eq!(got.len(), texts.len());
    assert!(got[1].is_err());
    for (i, t) in texts.iter().enumerate().filter(|&(i, _)| i != 1) {
        let (a, b) = (got[i].as_ref().unwrap(), e.embed(t).unwrap());
        assert!(cosine(a, &b) > 0.99999, "{t:?}");
    }
}

/// A query is embedded on a thread of its own, not on rayon's pool: with every thread of that
/// pool held (pieces being embedded, say), a query is still embedded. Embedding it on the pool
/// (candle's matrix products and softmax hand their work to it) waited for a free thread: here
/// forever. The wait is bounded so a failure ends the test instead of hanging it.
#[test]
#[ignore = "needs the embedder's model files: cargo xtask test installs them"]
fn a_query_is_embedded_while_rayons_pool_is_held_embedder() {
    let e = std::sync::Arc::new(super::embedder());
    let threads = rayon::current_num_threads();
    let started = std::sync::Arc::new(std::sync::Barrier::new(threads + 1));
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = std::sync::Arc::new(std::sync::Mutex::new(held));
    for _ in 0..threads {
        let (started, held) = (started.clone(), held.clone());
        rayon::spawn(move || {
            started.wait();
            // Every thread of the pool waits here until the query is embedded.
            let _ = held.lock().unwrap().recv();
        });
    }
    started.wait();
    let (done, answer) = std::sync::mpsc::channel();
    let query = e.clone();
    std::thread::spawn(move || {
        let _ = done.send(
            query
                .embed_query("parse command line flags")
                .map(|v| v.len()),
        );
    });
    let got = answer.recv_timeout(std::time::Duration::from_secs(300));
    for _ in 0..threads {
        let _ = release.send(());
    }
    assert_eq!(got.unwrap().unwrap(), 384);
}
