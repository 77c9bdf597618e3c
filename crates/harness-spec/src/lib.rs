//! The harness spec — the directory `spec/` at the root of the workspace — embedded into the
//! binary, validated when it is built, and read through a typed, read-only API.
//!
//! This crate owns the spec as data: which files exist, which schema checks each one
//! (`spec/schemas/`), the rules that cross files (every `{{variable}}` declared, names and
//! aliases unique, every `narrow` a subset, `VERSION` SemVer), and the spec's SHA-256 so a
//! product can load a pinned copy and check it. It does no process or network I/O; only
//! [`Spec::from_dir`] reads files.
//!
//! ```
//! let spec = harness_spec::Spec::embedded();
//! assert_eq!(spec.version().to_string(), "3.3.0-draft");
//! let read = spec.tool("read").expect("the read tool");
//! assert_eq!(read.risk, harness_spec::Risk::Read);
//! ```

// A library says nothing on stdout or stderr of its own: it returns what happened.

pub mod conformance;
pub mod loop_config;
pub mod models;
mod tool;
#[allow(missing_docs)]
pub mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use include_dir::{Dir, include_dir};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use conformance::CaseFile;
pub use loop_config::LoopConfig;
pub use models::{Cost, Model};
pub use tool::{
    Block, Confirm, Narrow, Offered, Project, PromptEntry, PromptIndex, Renamed, Requirement, Risk,
    Scope, SearchRanking, Serves, Sessions, Tool, Variable,
};

static EMBEDDED_DIR: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../spec");

/// Everything that can go wrong reading a spec.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file of a spec directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The spec breaks its schemas or cross-file rules; each line names file and pointer.
    #[error("the spec is invalid:\n{}", .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<validate::Problem>),
    /// A file does not exist in the spec.
    #[error("spec/{0} does not exist")]
    Missing(String),
    /// A JSON file does not have the shape a reader asked for.
    #[error("spec/{file} does not have the expected shape: {source}")]
    Shape {
        /// Path relative to `spec/`.
        file: String,
        /// What serde said.
        source: serde_json::Error,
    },
    /// A file breaks a rule that its schema cannot state (e.g. a budget above the backstop).
    #[error("spec/{file}: {message}")]
    Rule {
        /// Path relative to `spec/`.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The spec's hash is not the one a product pinned.
    #[error("the spec at {path} has SHA-256 {actual}, not the pinned {expected}")]
    HashMismatch {
        /// Where the spec was loaded from.
        path: String,
        /// The pinned hash.
        expected: String,
        /// The hash of what was found.
        actual: String,
    },
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A loaded, validated spec.
#[derive(Debug)]
pub struct Spec {
    origin: String,
    files: BTreeMap<String, Vec<u8>>,
    json: BTreeMap<String, Value>,
    version: semver::Version,
    sha256: String,
    tools: Vec<Tool>,
    prompt_index: PromptIndex,
    models: Vec<Model>,
    loop_config: LoopConfig,
}

impl Spec {
    /// The spec embedded at build time. `build.rs` validated exactly these files, so they are
    /// not validated again here (that would cost start-up time for nothing); reading them into
    /// their typed form can still fail only if the build was bypassed, and then it panics naming
    /// the problem.
    #[allow(clippy::panic)]
    pub fn embedded() -> &'static Spec {
        static SPEC: OnceLock<Spec> = OnceLock::new();
        SPEC.get_or_init(|| {
            let mut files = BTreeMap::new();
            collect_embedded(&EMBEDDED_DIR, &mut files);
            match Spec::read_files("embedded spec".into(), files) {
                Ok(spec) => spec,
                Err(e) => panic!("the embedded spec is invalid although build.rs checked it: {e}"),
            }
        })
    }

    /// Loads and validates a spec directory (a pinned copy, or a changed one under test).
    pub fn from_dir(path: impl AsRef<Path>) -> Result<Spec> {
        let root = path.as_ref();
        let mut files = BTreeMap::new();
        collect_dir(root, root, &mut files)?;
        Spec::from_files(root.display().to_string(), files)
    }

    /// Loads a spec directory and checks its SHA-256 against a pinned value.
    pub fn from_dir_pinned(path: impl AsRef<Path>, sha256: &str) -> Result<Spec> {
        let spec = Spec::from_dir(path)?;
        if !spec.sha256.eq_ignore_ascii_case(sha256.trim()) {
            return Err(Error::HashMismatch {
                path: spec.origin.clone(),
                expected: sha256.trim().to_string(),
                actual: spec.sha256.clone(),
            });
        }
        Ok(spec)
    }

    /// Builds a spec from relative path → content, validating it.
    pub fn from_files(origin: String, files: BTreeMap<String, Vec<u8>>) -> Result<Spec> {
        let report = validate::validate(&files);
        if !report.problems.is_empty() {
            return Err(Error::Invalid(report.problems));
        }
        Spec::read_files(origin, files)
    }

    /// Reads files already validated into the typed spec.
    fn read_files(origin: String, files: BTreeMap<String, Vec<u8>>) -> Result<Spec> {
        let mut json = BTreeMap::new();
        for (rel, bytes) in &files {
            if rel.ends_with(".json") {
                let value: Value =
                    serde_json::from_slice(bytes).map_err(|source| Error::Shape {
                        file: rel.clone(),
                        source,
                    })?;
                json.insert(rel.clone(), value);
            }
        }
        let version_text = files
            .get("VERSION")
            .map(|b| String::from_utf8_lossy(b).trim().to_string())
            .ok_or_else(|| Error::Missing("VERSION".into()))?;
        let version = semver::Version::parse(&version_text).map_err(|e| {
            Error::Invalid(vec![validate::Problem {
                file: "VERSION".into(),
                pointer: String::new(),
                message: e.to_string(),
            }])
        })?;
        let mut tools = Vec::new();
        for (rel, value) in &json {
            if rel.starts_with("tools/") && rel.matches('/').count() == 1 {
                let tool: Tool =
                    serde_json::from_value(value.clone()).map_err(|source| Error::Shape {
                        file: rel.clone(),
                        source,
                    })?;
                tools.push(tool);
            }
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let prompt_index = match json.get("prompts/index.json") {
            Some(v) => serde_json::from_value(v.clone()).map_err(|source| Error::Shape {
                file: "prompts/index.json".into(),
                source,
            })?,
            None => PromptIndex::default(),
        };
        let models = match json.get("models/catalogue.json") {
            Some(v) => {
                models::Catalogue::deserialize(v)
                    .map_err(|source| Error::Shape {
                        file: "models/catalogue.json".into(),
                        source,
                    })?
                    .models
            }
            None => Vec::new(),
        };
        let loop_config = match json.get("loop.json") {
            Some(v) => LoopConfig::from_value(v)?,
            None => return Err(Error::Missing("loop.json".into())),
        };
        let sha256 = hash_files(&files);
        Ok(Spec {
            origin,
            files,
            json,
            version,
            sha256,
            tools,
            prompt_index,
            models,
            loop_config,
        })
    }

    /// Where this spec came from (a directory, or "embedded spec").
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The spec's own version (`spec/VERSION`).
    pub fn version(&self) -> &semver::Version {
        &self.version
    }

    /// The SHA-256 of the spec, lowercase hex. It covers every file: for each, in order of its
    /// path relative to `spec/`, the path's bytes, a NUL, the content's length as 8 little-endian
    /// bytes, and the content.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// Every file's path relative to `spec/`, in order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// The text of a file (path relative to `spec/`), if it exists and is UTF-8.
    pub fn text(&self, rel: &str) -> Option<&str> {
        self.files
            .get(rel)
            .and_then(|b| std::str::from_utf8(b).ok())
    }

    /// A JSON file, parsed.
    pub fn json(&self, rel: &str) -> Option<&Value> {
        self.json.get(rel)
    }

    /// A JSON file deserialized into the reader's own type; the error names the file.
    pub fn parse<T: DeserializeOwned>(&self, rel: &str) -> Result<T> {
        let value = self
            .json(rel)
            .ok_or_else(|| Error::Missing(rel.to_string()))?;
        T::deserialize(value).map_err(|source| Error::Shape {
            file: rel.to_string(),
            source,
        })
    }

    /// Every tool, sorted by name.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// One tool by its name (not an alias).
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools
            .binary_search_by(|t| t.name.as_str().cmp(name))
            .ok()
            .and_then(|i| self.tools.get(i))
    }

    /// The tool a project knows by `name`: the tool itself, or the one that lists `name` among
    /// that project's aliases.
    pub fn tool_by_any_name(&self, project: Project, name: &str) -> Option<&Tool> {
        self.tool(name).or_else(|| {
            self.tools
                .iter()
                .find(|t| t.aliases_for(project).iter().any(|a| a == name))
        })
    }

    /// The model catalogue (`models/catalogue.json`), in file order.
    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// How one prompt runs (`loop.json`), typed and checked.
    pub fn loop_config(&self) -> &LoopConfig {
        &self.loop_config
    }

    /// A permission table (`permission/<name>.json`: `hardline`, `arity`, `defaults`, `modes`),
    /// parsed; `harness-permission` reads each into its typed engine.
    pub fn permission_table(&self, name: &str) -> Option<&Value> {
        self.json(&format!("permission/{name}.json"))
    }

    /// `quirks.json`: what real servers do and how the harness copes; `harness-model` reads it
    /// into its typed rules.
    pub fn quirks(&self) -> Option<&Value> {
        self.json("quirks.json")
    }

    /// A prompt text by its path under `prompts/` (e.g. `"modes/plan.md"`).
    pub fn prompt(&self, rel: &str) -> Option<&str> {
        self.text(&format!("prompts/{rel}"))
    }

    /// `prompts/index.json`.
    pub fn prompt_index(&self) -> &PromptIndex {
        &self.prompt_index
    }

    /// The names of the conformance areas (`spec/conformance/<area>.json`), in order.
    pub fn conformance_areas(&self) -> Vec<&str> {
        self.files
            .keys()
            .filter_map(|k| k.strip_prefix("conformance/")?.strip_suffix(".json"))
            .collect()
    }

    /// One conformance area's cases.
    pub fn conformance(&self, area: &str) -> Option<CaseFile> {
        let value = self.json(&format!("conformance/{area}.json"))?;
        CaseFile::from_value(value).ok()
    }
}

fn collect_embedded(dir: &Dir<'static>, out: &mut BTreeMap<String, Vec<u8>>) {
    for file in dir.files() {
        let rel = file.path().to_string_lossy().replace('\\', "/");
        if rel.rsplit('/').next().is_some_and(|n| n.starts_with('.')) {
            continue;
        }
        out.insert(rel, file.contents().to_vec());
    }
    for sub in dir.dirs() {
        collect_embedded(sub, out);
    }
}

fn collect_dir(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<u8>>) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.file_type().map_err(io(&path))?.is_dir() {
            collect_dir(&path, root, out)?;
        } else {
            let rel = path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            out.insert(rel, std::fs::read(&path).map_err(io(&path))?);
        }
    }
    Ok(())
}

fn hash_files(files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut hasher = Sha256::new();
    for (rel, bytes) in files {
        hasher.update(rel.as_bytes());
        hasher.update([0u8]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hex::encode(hasher.finalize())
}
