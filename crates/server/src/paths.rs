//! The `?path=` of the file routes (`/api/files`, `/api/files/content`, `/api/files/raw`,
//! `/api/view`, `/show`) and the paths of `/api/files/move`:
//! every name in it checked and the path taken in Unicode NFC ([`harness_fs::checked_input`]),
//! so the composed and decomposed spellings of a name are one file.

use harness_fs::View;
use serde::Deserialize;

use crate::error::{Error, Result};

/// The query.
#[derive(Deserialize)]
pub struct PathQuery {
    #[serde(default)]
    path: Option<String>,
}

/// A path given, checked.
pub struct Given {
    nfc: String,
    raw: String,
}

impl PathQuery {
    /// A path given elsewhere than in the query (a JSON body's), to be checked the same way.
    pub fn of(path: String) -> PathQuery {
        PathQuery { path: Some(path) }
    }

    /// The path given (`None` when missing or empty), each name checked: 400 for a name over
    /// 255 bytes, with a text-direction control, or not portable.
    pub fn checked(self) -> Result<Option<Given>> {
        self.path
            .filter(|p| !p.is_empty())
            .map(|raw| {
                Ok(Given {
                    nfc: harness_fs::checked_input(&raw)?,
                    raw,
                })
            })
            .transpose()
    }

    /// The path, required.
    pub fn required(self) -> Result<Given> {
        self.checked()?
            .ok_or_else(|| Error::BadRequest("give the file's path: ?path=/home/NAME/FILE".into()))
    }
}

impl Given {
    /// The spelling to act on in `view`: the NFC one, unless nothing is there while the path as
    /// given names an entry (one put in the tree under a decomposed name by other means) — then
    /// that, so such a file is still reached and not doubled by a write.
    pub fn on(&self, view: &View) -> String {
        if self.raw != self.nfc
            && view.stat(&view.resolve(&self.nfc)).is_err()
            && view.stat(&view.resolve(&self.raw)).is_ok()
        {
            return self.raw.clone();
        }
        self.nfc.clone()
    }
}
