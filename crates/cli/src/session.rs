//! Putting a session together from the settings: the model link (asking the server which model
//! it serves when none is named), the permission state, the working directory's file system and
//! the session's place in the store.

use anyhow::{Context as _, Result, anyhow, bail};
use harness_loop::transcript::Entry;
use harness_model::{
    CancellationToken, Catalogue, Endpoint, ModelClient, ModelInfo, ModelOverrides,
};

use crate::driver::{DriverSetup, read_transcript};
use crate::exec::Exec;
use crate::perm::{SessionPermissions, engine};
use crate::settings::{ModelSettings, Settings};
use crate::store::Store;

/// A session ready to drive, and the saved events to continue from.
pub struct SessionParts {
    /// What the driver is made from.
    pub setup: DriverSetup,
    /// A resumed session's events.
    pub resume: Option<Vec<Entry>>,
}

/// The model link for the settings; a model not named is asked of the server.
pub async fn model_client(m: &ModelSettings) -> Result<(ModelClient, String)> {
    let mut endpoint = Endpoint::new(m.base_url.clone());
    endpoint.api_key = m.api_key.clone();
    if let Some(server) = &m.server {
        endpoint.server = server.clone();
    }
    let overrides = ModelOverrides {
        context: m.context,
        output: m.output,
        capacity: m.capacity,
        tools: m.tools,
        ..ModelOverrides::default()
    };
    let catalogue = Catalogue::embedded()?;
    let name = match &m.model {
        Some(name) => name.clone(),
        None => {
            let probe = ModelClient::new(
                endpoint.clone(),
                ModelInfo::resolve(catalogue, "", &overrides),
            )?;
            let listed = probe
                .list_models(&CancellationToken::new())
                .await
                .map_err(|e| {
                    anyhow!(
                        "cannot ask {} which model it serves ({e}): pass --model or set OPENAI_MODEL",
                        m.base_url
                    )
                })?;
            match listed.as_slice() {
                [one] => one.clone(),
                [] => bail!(
                    "{} lists no model: pass --model or set OPENAI_MODEL",
                    m.base_url
                ),
                many => bail!(
                    "{} serves {} models: pass --model with one of {}",
                    m.base_url,
                    many.len(),
                    many.join(", ")
                ),
            }
        }
    };
    let info = ModelInfo::resolve(catalogue, &name, &overrides);
    Ok((ModelClient::new(endpoint, info)?, name))
}

/// Builds a session (new, or resumed with `resume`: empty for the newest here, else an id).
pub async fn build(settings: &Settings, resume: Option<&str>) -> Result<SessionParts> {
    let m = settings.model.as_ref().map_err(|line| anyhow!("{line}"))?;
    let (client, name) = model_client(m).await?;
    let root = std::fs::canonicalize(&settings.cwd)
        .with_context(|| format!("cannot resolve {}", settings.cwd.display()))?;
    let mut exec = Exec::open(&root)?;
    let project = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    exec.library = Some(crate::library::Library::new(&settings.dirs.data, &project));
    exec.memory = Some(settings.dirs.data.join("memory.json"));
    exec.user_skills = Some(settings.dirs.data.join("skills"));
    let perms = SessionPermissions::new(
        engine()?,
        settings.mode,
        &root.display().to_string(),
        settings.rules.clone(),
    );
    let store = Store::new(settings.dirs.sessions());
    let (meta, resume) = match resume {
        None => (store.create(&root, &name)?, None),
        Some(id) => {
            let meta = store.find(id, &root)?;
            let entries = read_transcript(&store.transcript(&meta.id))?;
            (meta, Some(entries))
        }
    };
    Ok(SessionParts {
        setup: DriverSetup {
            client,
            model_name: name,
            perms,
            exec: std::sync::Arc::new(exec),
            personality: settings.personality.clone(),
            store,
            meta,
            agent: None,
        },
        resume,
    })
}
