//! Model metadata: the spec's catalogue (`spec/models/catalogue.json`) with per-endpoint
//! overrides, and how much output fits.

use std::sync::OnceLock;

use harness_spec::Spec;
use serde::Deserialize;

use crate::classify::{ErrorClass, ModelError};
use crate::error::{Error, Result};
use crate::quirks::RequestRules;

/// One model of the catalogue (the spec's typed form).
pub type CatalogueModel = harness_spec::Model;

/// The catalogue of known models.
#[derive(Debug, Clone)]
pub struct Catalogue {
    models: Vec<CatalogueModel>,
}

impl Catalogue {
    /// Reads the catalogue of a spec.
    pub fn from_spec(spec: &Spec) -> Result<Catalogue> {
        Ok(Catalogue {
            models: spec.models().to_vec(),
        })
    }

    /// The catalogue of the embedded spec, read once.
    pub fn embedded() -> Result<&'static Catalogue> {
        static CATALOGUE: OnceLock<std::result::Result<Catalogue, String>> = OnceLock::new();
        CATALOGUE
            .get_or_init(|| Catalogue::from_spec(Spec::embedded()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|message| Error::Spec {
                file: "models/catalogue.json".into(),
                message: message.clone(),
            })
    }

    /// Every model.
    pub fn models(&self) -> &[CatalogueModel] {
        &self.models
    }

    /// Finds a model by the name a server knows it by: its id or an alias, exactly, then without
    /// case, then the part after a `provider/` prefix, then without an Ollama-style `:tag`.
    pub fn find(&self, name: &str) -> Option<&CatalogueModel> {
        let exact = |n: &str| {
            self.models
                .iter()
                .find(|m| m.id == n || m.aliases.iter().any(|a| a == n))
        };
        let loose = |n: &str| {
            self.models.iter().find(|m| {
                m.id.eq_ignore_ascii_case(n) || m.aliases.iter().any(|a| a.eq_ignore_ascii_case(n))
            })
        };
        let tail = name.rsplit('/').next().unwrap_or(name);
        let untagged = tail.split(':').next().unwrap_or(tail);
        exact(name)
            .or_else(|| loose(name))
            .or_else(|| loose(tail))
            .or_else(|| loose(untagged))
    }
}

/// What an endpoint's configuration says about its model; each set field wins over the
/// catalogue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ModelOverrides {
    /// The window the server really runs (llama.cpp `-c`, Ollama `num_ctx`).
    pub context: Option<u64>,
    /// The output limit.
    pub output: Option<u64>,
    /// The efforts taken.
    pub efforts: Option<Vec<String>>,
    /// Whether it takes images.
    pub vision: Option<bool>,
    /// Whether it calls tools.
    pub tools: Option<bool>,
    /// Requests at once.
    pub capacity: Option<u32>,
}

/// What the harness knows about the model it talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The name sent as `model`.
    pub name: String,
    /// The catalogue entry's id, when the model is known.
    pub catalogue_id: Option<String>,
    /// The context window, when known.
    pub context: Option<u64>,
    /// A cap on the prompt, when known.
    pub input: Option<u64>,
    /// The output limit, when known.
    pub output: Option<u64>,
    /// The efforts taken ([] = none).
    pub efforts: Vec<String>,
    /// The effort used when none is asked for.
    pub default_effort: Option<String>,
    /// Whether it takes images.
    pub vision: bool,
    /// Whether it calls tools (unknown models are assumed to). When false, requests carry no
    /// `tools` nor `tool_choice`, whatever the caller offers, and the history's calls and results
    /// go as plain text (quirk `model-without-tools`).
    pub tools: bool,
    /// Requests at once (None: no limit known).
    pub capacity: Option<u32>,
}

impl ModelInfo {
    /// Why images are not sent to this model (`None`: it reads them): the start of what the
    /// person is told, whether the images are left out or the message refused.
    pub fn unread_images(&self) -> Option<String> {
        (!self.vision).then(|| format!("{} does not read images (its metadata says so)", self.name))
    }

    /// The metadata of `name`: the catalogue's facts if it is known, then the overrides.
    pub fn resolve(catalogue: &Catalogue, name: &str, overrides: &ModelOverrides) -> ModelInfo {
        let known = catalogue.find(name);
        ModelInfo {
            name: name.to_string(),
            catalogue_id: known.map(|m| m.id.clone()),
            context: overrides.context.or(known.map(|m| m.context)),
            input: known.and_then(|m| m.input),
            output: overrides.output.or(known.map(|m| m.output)),
            efforts: overrides
                .efforts
                .clone()
                .or(known.map(|m| m.efforts.clone()))
                .unwrap_or_default(),
            default_effort: known.and_then(|m| m.default_effort.clone()),
            vision: overrides
                .vision
                .or(known.map(|m| m.vision))
                .unwrap_or(false),
            tools: overrides.tools.or(known.map(|m| m.tools)).unwrap_or(true),
            capacity: overrides.capacity.or(known.and_then(|m| m.capacity)),
        }
    }

    /// Checks an asked effort against the model's efforts: an effort the model does not take is
    /// a configuration error naming the ones it does.
    pub fn check_effort(&self, effort: &str) -> Result<()> {
        if self.efforts.iter().any(|e| e == effort) {
            return Ok(());
        }
        if self.efforts.is_empty() {
            return Err(Error::Config(format!(
                "model {} takes no reasoning effort, but effort {effort:?} was asked for",
                self.name
            )));
        }
        Err(Error::Config(format!(
            "model {} takes the efforts {}, not {effort:?}",
            self.name,
            self.efforts.join(", ")
        )))
    }

    /// The `max_tokens` to send (quirk `max-tokens-counts-against-context`): the asked value or
    /// the output limit, no more than the output limit, and no more than what is left of the
    /// window after the estimated prompt and the margin. A prompt that leaves less than the
    /// minimum is a context overflow found before sending.
    pub fn clamp_max_tokens(
        &self,
        asked: Option<u64>,
        prompt_estimate: u64,
        rules: &RequestRules,
    ) -> Result<Option<u64>> {
        let mut limit = match (asked, self.output) {
            (Some(a), Some(o)) => Some(a.min(o)),
            (a, o) => a.or(o),
        };
        let overflow = |why: String| {
            Error::ContextOverflow(ModelError {
                class: ErrorClass::ContextOverflow,
                status: None,
                message: why,
                retry_after: None,
                loading: false,
                retryable: false,
            })
        };
        if let Some(input) = self.input
            && prompt_estimate > input
        {
            return Err(overflow(format!(
                "the prompt is about {prompt_estimate} tokens, more than the {input} model {} takes",
                self.name
            )));
        }
        if let Some(window) = self.context {
            let room = window.saturating_sub(prompt_estimate + rules.margin_tokens);
            if room < rules.min_output_tokens {
                return Err(overflow(format!(
                    "the prompt is about {prompt_estimate} tokens and leaves no room for an answer in the {window}-token window of model {}",
                    self.name
                )));
            }
            limit = Some(limit.map_or(room, |l| l.min(room)));
        }
        Ok(limit)
    }
}
