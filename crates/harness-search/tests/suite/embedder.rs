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
