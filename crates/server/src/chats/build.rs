//! What a chat's session is built from (its model link, its world, its store): a chat made with
//! its first session, its model changed, and its live session, resumed from its transcript when
//! it is not running here.

use std::sync::Arc;

use harness_agent::{SessionBuilder, Spawned};
use harness_core::protocol::{Mode, SessionKind};
use harness_spec::Project;

use super::Live;
use super::drop_idle_later;
use super::live::{current, made_of};
use super::pump::drive;
use super::rows::{ChatRow, chat_row};
use crate::App;
use crate::auth::User;
use crate::db::now;
use crate::error::{Error, Result};
use crate::store::{SqlStore, find_meta, load_entries};
use crate::world::{ChatWorld, grants_text, user_grants, user_view};

/// The model endpoint chats use, configured as the CLI's ([`harness_model::settings`]).
pub(super) fn model_settings(app: &App) -> Result<&harness_model::settings::ModelSettings> {
    app.model.as_ref().ok_or_else(|| {
        Error::Model(format!(
            "{} the file --config names",
            harness_model::settings::NO_MODEL
        ))
    })
}

/// The model link of `model`, one for every chat of it in this process: one HTTP client (its
/// connections and root certificates loaded once), not one a chat.
pub(super) fn model_link(app: &App, model: &str) -> Result<Arc<harness_model::ModelClient>> {
    let mut links = app
        .links
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(l) = links.get(model) {
        return Ok(l.clone());
    }
    let link = Arc::new(
        model_settings(app)?
            .link(model)
            .map_err(|e| Error::Model(e.to_string()))?,
    );
    crate::slots::fix(app, link.as_ref());
    links.insert(model.to_owned(), link.clone());
    Ok(link)
}

/// What a session of the chat is built from, for a new chat or one resumed. `page`: a page of
/// the chat is open (the session holds `display` and `page`: `show` and `python` are offered).
pub(super) async fn builder(
    app: &Arc<App>,
    user: &User,
    mode: Mode,
    model: &str,
    page: crate::python::PageLink,
    narrower: &[(String, harness_fs::Level)],
) -> Result<SessionBuilder> {
    let world = chat_world(app, user, page, narrower).await?;
    let world = crate::mcp::with_servers(app, user, Arc::new(world)).await?;
    let link = model_link(app, model)?;
    Ok(SessionBuilder::new(link, world)
        .store(Arc::new(SqlStore::new(
            app.pool.clone(),
            app.transcripts.clone(),
            user.id,
        )))
        .project(Project::Llembas)
        .kind(SessionKind::Chat)
        .mode(mode)
        .personality(crate::settings::personality(&app.pool, user.id).await?)
        .capacity(app.capacity.clone())
        .product_version(env!("CARGO_PKG_VERSION")))
}

/// The world a chat of `user` works in: their view made narrower by the chat's grants, the file
/// tools, memory and skills, search, and the tools of its page.
pub async fn chat_world(
    app: &Arc<App>,
    user: &User,
    page: crate::python::PageLink,
    narrower: &[(String, harness_fs::Level)],
) -> Result<crate::python::PageWorld> {
    let view = user_view(&app.pool, &app.backend, user.id, &user.username).await?;
    let view = crate::world::narrowed(view, narrower);
    let granted = user_grants(&app.pool, user.id, &user.username).await?;
    let grants = grants_text(
        &view,
        &crate::world::effective_grants(&view, &granted, narrower),
    );
    let forge = crate::verbs::ChatForge::new(
        crate::mounts::stored(&app.pool).await?,
        app.tree.clone(),
        &user.username,
        page.chat_cell(),
        app.pool.clone(),
    );
    let world = ChatWorld::new(
        view,
        grants,
        crate::world::memory_path(&app.data, user.id),
        app.data.join("skills").join(user.id.to_string()),
    )
    .with_search(app.search.clone())
    .with_forge(forge);
    Ok(crate::python::PageWorld::new(world, page))
}

/// The chat's live session, resumed from its transcript when it is not running here. An idle
/// session built when a page of the chat was open and now none is (or the other way round) is
/// built again, so what it offers follows what holds (`display`, `page`).
pub(super) async fn live(app: &Arc<App>, user: &User, chat: &ChatRow) -> Result<Arc<Live>> {
    let page = app.pages.attached(&chat.id);
    let made = made_of(&chat.model, chat.personality.as_deref());
    if let Some(l) = app.chats.get(&chat.id)
        && current(&l.run).is_none()
        && ran_elsewhere(app, &chat.id, l.built).await?
    {
        // Another process ran the chat since this idle session was built: its history is behind.
        app.chats.remove(&chat.id, &l);
    }
    if let Some(l) = app.chats.get(&chat.id) {
        if (l.page == page && l.made == made) || current(&l.run).is_some() {
            return Ok(l);
        }
        // Dropping the last handle of its channel ends the idle session.
        app.chats.remove(&chat.id, &l);
    }
    let meta = find_meta(&app.pool, &app.transcripts, user.id, &chat.id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no chat {}", chat.id)))?;
    let entries = load_entries(&app.pool, &app.transcripts, user.id, &chat.id).await?;
    let mode = chat.mode.parse::<Mode>().unwrap_or(Mode::Manual);
    let link = crate::python::PageLink::new(app, user.id, Some(&chat.id), page);
    let narrower = crate::world::chat_grants(&app.pool, &chat.id).await?;
    let built = spawn(
        builder(app, user, mode, &chat.model, link, &narrower)
            .await?
            .resume(meta, entries),
        page,
    )?;
    Ok(drive(app, user.id, &chat.id, built, page, made))
}

/// Whether another process of the database began a run of `chat` since `since` (seconds; a run
/// begun in the same second counts, so a session is rather built again than left behind).
async fn ran_elsewhere(app: &App, chat: &str, since: i64) -> Result<bool> {
    if !app.hub.shared() {
        return Ok(false);
    }
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM runs WHERE chat_id = $1 AND created >= $2 AND owner IS NOT NULL AND owner != $3",
    )
    .bind(chat)
    .bind(since)
    .bind(&app.instance)
    .fetch_one(&app.pool)
    .await?;
    Ok(n > 0)
}

/// Starts a chat's session: its front end answers `question`s (the page, whenever one opens);
/// `page`: it has the page's viewer (`display`).
pub(super) fn spawn(builder: SessionBuilder, page: bool) -> Result<Spawned> {
    Ok(builder
        .answers_questions(true)
        .holds_display(page)
        .spawn()?)
}

/// Creates a chat for `user`; answers its id.
pub async fn create(
    app: &Arc<App>,
    user: &User,
    mode: Mode,
    model: Option<&str>,
    narrower: &[(String, harness_fs::Level)],
) -> Result<String> {
    app.refuse_when_stopping()?;
    let configured = model_settings(app)?
        .model_id(&harness_model::CancellationToken::new())
        .await
        .map_err(|e| Error::Model(e.to_string()))?;
    let chosen = crate::settings::model_for(&app.pool, model, &configured).await?;
    // No page shows a chat before it exists.
    let link = crate::python::PageLink::new(app, user.id, None, false);
    let built = spawn(
        builder(app, user, mode, &chosen, link.clone(), narrower).await?,
        false,
    )?;
    let id = built.session.id().to_owned();
    link.set_chat(&id);
    sqlx::query(
        "INSERT INTO chats (id, user_id, mode, model, created) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&id)
    .bind(user.id)
    .bind(mode.as_str())
    .bind(&chosen)
    .bind(now())
    .execute(&app.pool)
    .await?;
    for (path, level) in narrower {
        sqlx::query("INSERT INTO chat_grants (chat_id, path, level) VALUES ($1, $2, $3)")
            .bind(&id)
            .bind(path)
            .bind(level.as_str())
            .execute(&app.pool)
            .await?;
    }
    let made = made_of(
        &chosen,
        crate::settings::personality(&app.pool, user.id)
            .await?
            .as_deref(),
    );
    app.hub.new_chat(&id);
    drive(app, user.id, &id, built, false, made);
    // Kept for its first message a while; then built again when it is needed.
    drop_idle_later(app, &id);
    Ok(id)
}

/// Changes the model of the user's chat `id` (one the server lets users use); refused while a
/// run goes on. Its idle session is built again for the next message ([`super::Live::made`]).
pub async fn set_model(app: &Arc<App>, user: &User, id: &str, model: &str) -> Result<()> {
    let row = chat_row(&app.pool, user, id).await?;
    if let Some(run) = row.running {
        return Err(Error::Conflict(format!(
            "the chat {id} is busy with run {run}: change its model after its end"
        )));
    }
    let configured = model_settings(app)?
        .model_id(&harness_model::CancellationToken::new())
        .await
        .map_err(|e| Error::Model(e.to_string()))?;
    let chosen = crate::settings::model_for(&app.pool, Some(model), &configured).await?;
    sqlx::query("UPDATE chats SET model = $1 WHERE id = $2 AND user_id = $3")
        .bind(&chosen)
        .bind(id)
        .bind(user.id)
        .execute(&app.pool)
        .await?;
    Ok(())
}
