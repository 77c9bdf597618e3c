//! A session store in memory: for tests and embedders that keep nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use harness_loop::transcript::Entry;

use crate::error::SeamError;
use crate::seams::{Meta, SessionStore};

/// Sessions kept in memory for as long as the store lives.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, (Meta, Vec<Entry>)>>,
    next: Mutex<u64>,
}

impl MemoryStore {
    /// A session's transcript as stored.
    pub fn transcript(&self, id: &str) -> Vec<Entry> {
        self.load(id).unwrap_or_default()
    }
}

impl SessionStore for MemoryStore {
    fn create(&self, place: &str, model: &str) -> Result<Meta, SeamError> {
        let n = {
            let mut next = self.next.lock().map_err(|e| SeamError::store("", e))?;
            *next += 1;
            *next
        };
        let now = crate::time::now();
        let meta = Meta {
            id: format!("mem-{n}"),
            cwd: place.into(),
            created: now,
            updated: now,
            title: String::new(),
            model: model.to_owned(),
            mode: None,
        };
        self.sessions
            .lock()
            .map_err(|e| SeamError::store(&meta.id, e))?
            .insert(meta.id.clone(), (meta.clone(), Vec::new()));
        Ok(meta)
    }

    fn save(&self, meta: &Meta) -> Result<(), SeamError> {
        let mut s = self
            .sessions
            .lock()
            .map_err(|e| SeamError::store(&meta.id, e))?;
        s.entry(meta.id.clone())
            .or_insert_with(|| (meta.clone(), Vec::new()))
            .0 = meta.clone();
        Ok(())
    }

    fn append(&self, id: &str, entries: &[Entry]) -> Result<(), SeamError> {
        let mut s = self.sessions.lock().map_err(|e| SeamError::store(id, e))?;
        match s.get_mut(id) {
            Some((_, log)) => {
                log.extend_from_slice(entries);
                Ok(())
            }
            None => Err(SeamError::NoSession { id: id.to_owned() }),
        }
    }

    fn load(&self, id: &str) -> Result<Vec<Entry>, SeamError> {
        let s = self.sessions.lock().map_err(|e| SeamError::store(id, e))?;
        s.get(id)
            .map(|(_, log)| log.clone())
            .ok_or_else(|| SeamError::NoSession { id: id.to_owned() })
    }

    fn find(&self, id: &str) -> Result<Meta, SeamError> {
        let s = self.sessions.lock().map_err(|e| SeamError::store(id, e))?;
        s.get(id)
            .map(|(m, _)| m.clone())
            .ok_or_else(|| SeamError::NoSession { id: id.to_owned() })
    }
}

/// The session a person names to go on with (`--resume ID`, `/resume ID`) among `list` (newest
/// first): the one whose id is `id` or starts with it — one only —, or with `id` empty the
/// newest of `place`.
pub fn pick<'a>(list: &'a [Meta], id: &str, place: &std::path::Path) -> Result<&'a Meta, String> {
    if id.is_empty() {
        return list
            .iter()
            .find(|m| m.cwd == place)
            .ok_or_else(|| format!("no saved session in {}", place.display()));
    }
    let hits: Vec<&Meta> = list.iter().filter(|m| m.id.starts_with(id)).collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("no saved session with id {id}")),
        many => Err(format!(
            "{} sessions start with {id}: {}",
            many.len(),
            many.iter()
                .map(|m| m.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
