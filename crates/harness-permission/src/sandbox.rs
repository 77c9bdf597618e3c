//! The OS sandbox's policy (`spec/permission/sandbox.json`), as data for a front end to enforce:
//! which roots a sandboxed command may write under, which paths it may not read (the protected
//! paths of `hardline.json` whose read is not `allow`), and whether it may use the network. The
//! front end applies it with the operating system's own mechanism (Landlock on Linux); nothing
//! here touches the system.

use std::collections::BTreeSet;

use harness_spec::Spec;
use serde::Deserialize;

use crate::error::{Error, Result};

/// `sandbox.json` `texts`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SandboxTexts {
    /// Added to the result of a sandboxed command that failed with a permission error.
    pub refused_note: String,
    /// The warning when a setting turned the sandbox off.
    pub off: String,
    /// The notice when the kernel cannot sandbox.
    pub unavailable: String,
    /// The notice when the system lets no command have a mount namespace of its own, so that
    /// the repository's hooks and config stay writable to sandboxed commands.
    pub git_unguarded: String,
}

#[derive(Debug, Deserialize)]
struct RawSandbox {
    enabled: bool,
    network: bool,
    writable: Vec<String>,
    texts: SandboxTexts,
}

#[derive(Debug, Deserialize)]
struct RawProtected {
    paths: Vec<String>,
    #[serde(default)]
    read: Option<String>,
}

/// The sandbox as the spec gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Whether commands run sandboxed by default.
    pub enabled: bool,
    /// Whether sandboxed commands may use the network by default.
    pub network: bool,
    /// The writable roots, unexpanded (`{workspace}`, `{tmp}`, `~/…`, absolute).
    pub writable: Vec<String>,
    /// The protected paths that may not be read, unexpanded, literal ones only.
    pub unreadable: Vec<String>,
    /// Its texts.
    pub texts: SandboxTexts,
}

/// Where a session is: the places the spec's paths are filled with.
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    /// The workspace (absolute).
    pub workspace: &'a str,
    /// The person's home (absolute).
    pub home: &'a str,
    /// The system's temporary directory (absolute).
    pub tmp: &'a str,
}

/// What one command is confined to, with absolute paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// Roots it may write (and read) under.
    pub writable: Vec<String>,
    /// Paths it may not read (none inside a writable root).
    pub unreadable: Vec<String>,
    /// Whether it may open network connections.
    pub network: bool,
}

fn data(message: impl Into<String>) -> Error {
    Error::Data {
        file: "sandbox.json",
        message: message.into(),
    }
}

/// Whether `path` is `root` or lies under it (whole components).
fn under(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    root.is_empty()
        || path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Sandbox {
    /// The sandbox of `spec` (`permission/sandbox.json`, and `hardline.json`'s protected paths).
    pub fn from_spec(spec: &Spec) -> Result<Sandbox> {
        let raw: RawSandbox = serde_json::from_value(
            spec.permission_table("sandbox")
                .cloned()
                .ok_or_else(|| data("the file is missing"))?,
        )
        .map_err(|e| data(e.to_string()))?;
        let protected: Vec<RawProtected> = spec
            .permission_table("hardline")
            .and_then(|h| h.get("protected_paths"))
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| Error::Data {
                file: "hardline.json",
                message: format!("protected_paths: {e}"),
            })?
            .unwrap_or_default();
        let mut unreadable = Vec::new();
        for p in protected
            .iter()
            .filter(|p| p.read.as_deref().is_some_and(|r| r != "allow"))
        {
            for path in &p.paths {
                let literal = path.strip_suffix("/**").unwrap_or(path);
                let pattern = literal
                    .replace("{workspace}", "")
                    .contains(['*', '?', '[', '{']);
                if !pattern && !unreadable.iter().any(|u| u == literal) {
                    unreadable.push(literal.to_owned());
                }
            }
        }
        Ok(Sandbox {
            enabled: raw.enabled,
            network: raw.network,
            writable: raw.writable,
            unreadable,
            texts: raw.texts,
        })
    }

    /// The confinement of a command in `places`; `network` overrides the spec's default.
    pub fn confinement(&self, places: Places<'_>, network: Option<bool>) -> Confinement {
        let fill = |p: &str| -> String {
            if let Some(rest) = p.strip_prefix("~/") {
                format!("{}/{rest}", places.home.trim_end_matches('/'))
            } else {
                p.replace("{workspace}", places.workspace)
                    .replace("{tmp}", places.tmp)
            }
        };
        let writable: Vec<String> = self
            .writable
            .iter()
            .map(|p| fill(p))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let unreadable = self
            .unreadable
            .iter()
            .map(|p| fill(p))
            .filter(|p| !writable.iter().any(|w| under(p, w)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        Confinement {
            writable,
            unreadable,
            network: network.unwrap_or(self.network),
        }
    }
}
