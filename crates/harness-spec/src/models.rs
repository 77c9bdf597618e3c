//! The model catalogue (`spec/models/catalogue.json`, shaped by `spec/models/schema.json`),
//! typed. `harness-model` looks models up in it and applies per-endpoint overrides.

use serde::{Deserialize, Serialize};

/// A model's price: US dollars per million tokens (models.dev `cost.input`, `cost.output`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million answer tokens (reasoning included).
    pub output: f64,
}

impl Cost {
    /// What `input` prompt tokens and `output` answer tokens cost, in US dollars.
    pub fn of(&self, input: u64, output: u64) -> f64 {
        // Token counts stay far below 2^53: the conversion is exact.
        #[allow(clippy::cast_precision_loss)]
        let (i, o) = (input as f64, output as f64);
        (i * self.input + o * self.output) / 1_000_000.0
    }
}

/// One model of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The maker's id.
    pub id: String,
    /// The name a person reads.
    pub name: String,
    /// Who serves or makes it (`openai`, `anthropic`, `qwen`, ...).
    #[serde(default)]
    pub provider: Option<String>,
    /// The family it belongs to.
    #[serde(default)]
    pub family: Option<String>,
    /// Whether its weights are published.
    #[serde(default)]
    pub open_weights: bool,
    /// Its knowledge cut-off, as the maker states it.
    #[serde(default)]
    pub knowledge: Option<String>,
    /// Whether it is current, deprecated, ...
    #[serde(default)]
    pub status: Option<String>,
    /// The context window (prompt and answer), in tokens.
    pub context: u64,
    /// A cap on the prompt below the window, if the maker has one.
    #[serde(default)]
    pub input: Option<u64>,
    /// The most tokens one answer may have.
    pub output: u64,
    /// The reasoning efforts it takes, weakest first.
    #[serde(default)]
    pub efforts: Vec<String>,
    /// The effort used when none is asked for.
    #[serde(default)]
    pub default_effort: Option<String>,
    /// Whether it reasons.
    #[serde(default)]
    pub reasoning: bool,
    /// Whether it takes images.
    #[serde(default)]
    pub vision: bool,
    /// Whether it calls tools.
    #[serde(default)]
    pub tools: bool,
    /// The maker's list price, where the maker sells it.
    #[serde(default)]
    pub cost: Option<Cost>,
    /// Requests a usual server runs for it at once.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Other names it is served under.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Quirks and facts worth knowing.
    #[serde(default)]
    pub notes: Option<String>,
}

/// The whole catalogue file.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Catalogue {
    pub(crate) models: Vec<Model>,
}
