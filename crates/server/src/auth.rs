//! Accounts and sign-in: Argon2id passwords, server-side sessions in an `HttpOnly`,
//! `SameSite=Lax` cookie (only the token's SHA-256 is stored; a new token at every sign-in),
//! per-user API tokens sent as `Authorization: Bearer`, the origin check on state-changing
//! requests, and the sign-in and sign-up throttles (by client address, [`crate::throttle`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::db::Db;
use argon2::password_hash::phc::{Output, ParamsString, Salt};
use argon2::{
    Algorithm, Argon2, Block, CustomizedPasswordHasher, Params, PasswordHash, PasswordHasher,
    PasswordVerifier, Version,
};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, header};
use serde::de::DeserializeOwned;

use crate::App;
use crate::db::{now, random_token, token_hash};
use crate::error::{Error, Result};
use crate::throttle::{Rule, Throttle};

/// The sign-in cookie's name.
pub const COOKIE: &str = "llembas_session";

/// How long a sign-in lasts without being used (sliding: every use extends it).
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 24 * 3600);

/// How stale a session's `last_seen` may be before a request moves it (and its idle end) on:
/// not every request writes to the database.
pub const SESSION_TOUCH: Duration = Duration::from_secs(5 * 60);

/// Failed sign-ins one address may make for one account before it must wait.
pub const LOGIN_FAILURES: u32 = 5;

/// Failed sign-ins one address may make, every account together, before it must wait.
pub const ADDRESS_FAILURES: u32 = 30;

/// Sign-ups one address may make before it must wait.
pub const SIGNUPS: u32 = 5;

/// The throttle of one address's failed sign-ins for one account: [`LOGIN_FAILURES`] free, then
/// 15 seconds doubled at each further failure, at most 15 minutes; forgotten after an hour.
pub const PER_ACCOUNT: Rule = Rule {
    free: LOGIN_FAILURES,
    first: Duration::from_secs(15),
    cap: Duration::from_secs(15 * 60),
    forget: Duration::from_secs(3600),
};

/// The throttle of one address's failed sign-ins, every account together.
pub const PER_ADDRESS: Rule = Rule {
    free: ADDRESS_FAILURES,
    ..PER_ACCOUNT
};

/// The throttle of one address's sign-ups: [`SIGNUPS`] free, then a minute doubled at each
/// further one, at most an hour; forgotten after a day.
pub const PER_SIGNUP: Rule = Rule {
    free: SIGNUPS,
    first: Duration::from_secs(60),
    cap: Duration::from_secs(3600),
    forget: Duration::from_secs(24 * 3600),
};

/// An account's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Manages accounts and grants.
    Admin,
    /// Chats.
    User,
    /// Signed up, waits for an admin.
    Pending,
}

impl Role {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::User => "user",
            Role::Pending => "pending",
        }
    }

    /// Parses a stored role.
    pub fn parse(s: &str) -> Result<Role> {
        match s {
            "admin" => Ok(Role::Admin),
            "user" => Ok(Role::User),
            "pending" => Ok(Role::Pending),
            other => Err(Error::Stored(format!("unknown role {other:?}"))),
        }
    }
}

/// A signed-in account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its id.
    pub id: i64,
    /// Its name.
    pub username: String,
    /// Its role.
    pub role: Role,
}

/// Whether `name` can be a username (and so a directory name under `/home`): 1 to 32 of
/// lowercase letters, digits, `-`, `_` and `.`, starting with a letter or digit.
pub fn valid_username(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && harness_fs::is_portable_name(name)
}

/// Argon2 with its working memory kept between hashes: each hash takes 19 MiB, and the C
/// allocator, handed such blocks again and again from the hashing threads, raises its threshold
/// for giving memory back and keeps them (40 sign-ins held 215 MB of RSS for 43 MB of heap).
/// The blocks are kept here instead, one set a hash running at once (at most one per core, see
/// [`hashing`]), and reused.
struct Pooled;

/// The blocks of finished hashes, for the next.
static BLOCKS: std::sync::Mutex<Vec<Vec<Block>>> = std::sync::Mutex::new(Vec::new());

impl Pooled {
    fn hash_into(
        argon: &Argon2<'_>,
        blocks: usize,
        password: &[u8],
        salt: &[u8],
        out: &mut [u8],
    ) -> argon2::Result<()> {
        let taken = BLOCKS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let mut memory = match taken {
            Some(m) if m.len() == blocks => m,
            _ => vec![Block::default(); blocks],
        };
        let done = argon.hash_password_into_with_memory(password, salt, out, &mut memory[..]);
        BLOCKS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(memory);
        done
    }
}

impl CustomizedPasswordHasher<PasswordHash> for Pooled {
    type Params = Params;

    fn hash_password_customized(
        &self,
        password: &[u8],
        salt: &[u8],
        alg_id: Option<&str>,
        version: Option<u32>,
        params: Params,
    ) -> argon2::password_hash::Result<PasswordHash> {
        let algorithm = alg_id
            .map(Algorithm::try_from)
            .transpose()?
            .unwrap_or_default();
        let version = version
            .map(Version::try_from)
            .transpose()?
            .unwrap_or_default();
        let salt = Salt::new(salt)?;
        let len = params.output_len().unwrap_or(Params::DEFAULT_OUTPUT_LEN);
        let mut buffer = [0u8; Output::MAX_LENGTH];
        let out = buffer
            .get_mut(..len)
            .ok_or(argon2::password_hash::Error::OutputSize)?;
        let argon = Argon2::new(algorithm, version, params.clone());
        Self::hash_into(&argon, params.block_count(), password, &salt, out)?;
        Ok(PasswordHash {
            algorithm: algorithm.ident(),
            version: Some(version.into()),
            params: ParamsString::try_from(&params)?,
            salt: Some(salt),
            hash: Some(Output::new(out)?),
        })
    }
}

impl PasswordHasher<PasswordHash> for Pooled {
    fn hash_password_with_salt(
        &self,
        password: &[u8],
        salt: &[u8],
    ) -> argon2::password_hash::Result<PasswordHash> {
        self.hash_password_customized(password, salt, None, None, Params::default())
    }
}

/// Hashes a password with Argon2id (the crate's defaults: m=19456 KiB, t=2, p=1).
pub fn hash_password(password: &str) -> Result<String> {
    Pooled
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| Error::Hash(e.to_string()))
}

/// Runs a password hash or check off the async threads, as many at once as the machine has
/// cores: each takes Argon2's 19 MiB while it runs, so a burst of sign-ins must not take that
/// memory once per request (200 at once held 2.4 GB, kept by the allocator after).
async fn hashing<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    let slots = SLOTS.get_or_init(|| {
        tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(1, usize::from))
    });
    let _slot = slots
        .acquire()
        .await
        .map_err(|e| Error::Hash(e.to_string()))?;
    let now = HASHING.fetch_add(1, Ordering::SeqCst) + 1;
    HASHING_PEAK.fetch_max(now, Ordering::SeqCst);
    let done = tokio::task::spawn_blocking(f).await;
    HASHING.fetch_sub(1, Ordering::SeqCst);
    done.map_err(|e| Error::Hash(e.to_string()))
}

static HASHING: AtomicUsize = AtomicUsize::new(0);
static HASHING_PEAK: AtomicUsize = AtomicUsize::new(0);

/// The most password hashes or checks this process has run at once.
pub fn hashing_peak() -> usize {
    HASHING_PEAK.load(Ordering::SeqCst)
}

fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Pooled.verify_password(password.as_bytes(), &h).is_ok())
}

/// Refuses a password too short to be one.
pub fn check_new_password(password: &str) -> Result<()> {
    if password.chars().count() < 8 {
        return Err(Error::BadRequest(
            "the password is too short: use at least 8 characters".into(),
        ));
    }
    Ok(())
}

/// Whether `password` is the account `user_id`'s (checked off the async threads).
pub async fn password_matches(pool: &Db, user_id: i64, password: &str) -> Result<bool> {
    let stored: Option<String> =
        sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
            .bind(user_id)
            .fetch_optional(pool)
            .await?;
    let Some(hash) = stored else {
        return Ok(false);
    };
    let password = password.to_owned();
    hashing(move || verify_password(&password, &hash)).await
}

/// Gives the account `user_id` the password `password` (checked, then hashed).
pub async fn set_password(pool: &Db, user_id: i64, password: &str) -> Result<()> {
    check_new_password(password)?;
    let password = password.to_owned();
    let hash = hashing(move || hash_password(&password)).await??;
    sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
        .bind(hash)
        .bind(user_id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Sets the account `user_id`'s password anew and ends every way it was signed in: its
/// sessions, its API tokens and its chats' memory tokens.
pub async fn reset_password(pool: &Db, user_id: i64, password: &str) -> Result<()> {
    set_password(pool, user_id, password).await?;
    for sql in [
        "DELETE FROM sessions WHERE user_id = $1",
        "DELETE FROM api_tokens WHERE user_id = $1",
        "DELETE FROM chat_tokens WHERE user_id = $1",
    ] {
        sqlx::query(sql).bind(user_id).execute(pool).await?;
    }
    Ok(())
}

/// Refuses (403) a signed-in user who is not an admin.
pub(crate) fn require_admin(user: &User) -> Result<()> {
    if user.role != Role::Admin {
        return Err(Error::Forbidden("only an admin may do this".into()));
    }
    Ok(())
}

/// The account `id`'s name (404 when there is none).
pub(crate) async fn username_of(pool: &Db, id: i64) -> Result<String> {
    sqlx::query_scalar("SELECT username FROM users WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no user {id}")))
}

/// Creates an account with `role`; the caller gives it its grants.
pub async fn create_user(pool: &Db, username: &str, password: &str, role: Role) -> Result<i64> {
    if !valid_username(username) {
        return Err(Error::BadRequest(format!(
            "{username:?} cannot be a username: use 1 to 32 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit"
        )));
    }
    check_new_password(password)?;
    // Hashed first, so a taken name is refused after the same work as a free one is made.
    let password = password.to_owned();
    let hash = hashing(move || hash_password(&password)).await??;
    let taken: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
        .bind(username)
        .fetch_optional(pool)
        .await?;
    if taken.is_some() {
        return Err(Error::Conflict(format!(
            "the user {username} exists already"
        )));
    }
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO users (username, password_hash, role, created) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(username)
    .bind(hash)
    .bind(role.as_str())
    .bind(now())
    .fetch_one(pool)
    .await?;
    Ok(id)
}

/// The sign-in and sign-up throttles, by client address: a stranger's failures make only the
/// stranger's address wait, never lock the account.
#[derive(Debug)]
pub struct Limiter {
    per_account: Throttle,
    per_address: Throttle,
    signups: Throttle,
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter {
            per_account: Throttle::new(PER_ACCOUNT),
            per_address: Throttle::new(PER_ADDRESS),
            signups: Throttle::new(PER_SIGNUP),
        }
    }
}

/// The client an address counts as: an IPv4 address, or an IPv6 address's /64 (one host or
/// network usually holds a whole /64, so counting its addresses one by one would let it try
/// again from another without end).
fn address_key(ip: Option<IpAddr>) -> String {
    match ip {
        None => "-".to_owned(),
        Some(IpAddr::V4(v4)) => v4.to_string(),
        Some(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

fn account_key(username: &str, ip: Option<IpAddr>) -> String {
    format!("{} {}", address_key(ip), username.to_lowercase())
}

fn too_many(what: &str, wait: Duration) -> Error {
    let retry_after = crate::throttle::seconds(wait);
    Error::TooMany {
        message: format!("too many {what} from this address; try again in {retry_after} seconds"),
        retry_after,
    }
}

impl Limiter {
    /// Refuses a sign-in (or a password check) while this address must wait, for this account
    /// or for all.
    pub fn check(&self, username: &str, ip: Option<IpAddr>) -> Result<()> {
        self.per_account
            .check(&account_key(username, ip))
            .and_then(|()| self.per_address.check(&address_key(ip)))
            .map_err(|wait| too_many("failed sign-ins", wait))
    }

    /// Counts a failed sign-in (or password check).
    pub fn failed(&self, username: &str, ip: Option<IpAddr>) {
        self.per_account.hit(&account_key(username, ip));
        self.per_address.hit(&address_key(ip));
    }

    /// A sign-in from this address succeeded: its failures for this account are forgotten.
    pub fn succeeded(&self, username: &str, ip: Option<IpAddr>) {
        self.per_account.clear(&account_key(username, ip));
    }

    /// Counts a sign-up from this address, refused while the address must wait.
    pub fn signup(&self, ip: Option<IpAddr>) -> Result<()> {
        let key = address_key(ip);
        self.signups
            .check(&key)
            .map_err(|wait| too_many("sign-ups", wait))?;
        self.signups.hit(&key);
        Ok(())
    }
}

/// A PHC string no password matches, verified against when the account does not exist, so a
/// wrong name takes as long as a wrong password.
static DUMMY_HASH: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();

/// Checks a sign-in and opens a session: the new session's token (for the cookie) and the user.
pub async fn login(
    app: &App,
    username: &str,
    password: &str,
    ip: Option<IpAddr>,
    old_token: Option<&str>,
    user_agent: &str,
) -> Result<(String, User)> {
    app.limiter.check(username, ip)?;
    let row: Option<(i64, String, String, String, i64)> = sqlx::query_as(
        "SELECT id, username, password_hash, role, disabled FROM users WHERE username = $1",
    )
    .bind(username)
    .fetch_optional(&app.pool)
    .await?;
    let password = password.to_owned();
    let stored = row.as_ref().map(|r| r.2.clone());
    let ok = hashing(move || match stored {
        Some(hash) => verify_password(&password, &hash),
        None => {
            if let Some(dummy) = DUMMY_HASH.get_or_init(|| hash_password("not a password").ok()) {
                let _ = verify_password(&password, dummy);
            }
            false
        }
    })
    .await?;
    let Some((id, name, _, role, disabled)) = row.filter(|_| ok) else {
        app.limiter.failed(username, ip);
        return Err(Error::Unauthorized("wrong username or password".into()));
    };
    app.limiter.succeeded(username, ip);
    let user = User {
        id,
        username: name,
        role: Role::parse(&role)?,
    };
    refuse_unusable(&user, disabled != 0)?;
    // Rotation: the session the browser held before (if any) ends; a new token is issued.
    if let Some(old) = old_token {
        logout(app, old).await?;
    }
    let token = random_token()?;
    let t = now();
    sqlx::query(
        "INSERT INTO sessions (id, token_hash, user_id, created, last_seen, expires, user_agent) VALUES ($1, $2, $3, $4, $4, $5, $6)",
    )
    .bind(crate::db::random_id()?)
    .bind(token_hash(&token))
    .bind(user.id)
    .bind(t)
    .bind(t + SESSION_IDLE.as_secs() as i64)
    .bind(user_agent.chars().take(200).collect::<String>())
    .execute(&app.pool)
    .await?;
    Ok((token, user))
}

/// Ends the session of `token`; the streams it opened end with it.
pub async fn logout(app: &App, token: &str) -> Result<()> {
    let user: Option<i64> =
        sqlx::query_scalar("DELETE FROM sessions WHERE token_hash = $1 RETURNING user_id")
            .bind(token_hash(token))
            .fetch_optional(&app.pool)
            .await?;
    if let Some(user) = user {
        crate::streams::revoked(app, user).await;
    }
    Ok(())
}

/// How many hex digits of a token's hash name it in lists (the hash of a random token: naming
/// it tells nothing of the token).
const TOKEN_ID_DIGITS: i64 = 16;

/// The user's API tokens: `id` (a prefix of the hash), `label`, `created`; never the token.
pub async fn list_api_tokens(pool: &Db, user: &User) -> Result<Vec<serde_json::Value>> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT substr(token_hash, 1, $2), label, created FROM api_tokens WHERE user_id = $1 ORDER BY created, token_hash",
    )
    .bind(user.id)
    .bind(TOKEN_ID_DIGITS)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, label, created)| serde_json::json!({"id": id, "label": label, "created": created}))
        .collect())
}

/// Revokes the user's API token `id` (as [`list_api_tokens`] names it): at once refused, and
/// the streams it opened end.
pub async fn revoke_api_token(app: &App, user: &User, id: &str) -> Result<()> {
    if i64::try_from(id.len()).ok() != Some(TOKEN_ID_DIGITS) {
        return Err(Error::NotFound(format!("no API token {id}")));
    }
    let done =
        sqlx::query("DELETE FROM api_tokens WHERE user_id = $1 AND substr(token_hash, 1, $2) = $3")
            .bind(user.id)
            .bind(TOKEN_ID_DIGITS)
            .bind(id)
            .execute(&app.pool)
            .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound(format!("no API token {id}")));
    }
    crate::streams::revoked(app, user.id).await;
    Ok(())
}

/// A new API token for `user` (shown once; only its hash is kept).
pub async fn new_api_token(pool: &Db, user: &User, label: &str) -> Result<String> {
    let token = format!("llb_{}", random_token()?);
    sqlx::query(
        "INSERT INTO api_tokens (token_hash, user_id, created, label) VALUES ($1, $2, $3, $4)",
    )
    .bind(token_hash(&token))
    .bind(user.id)
    .bind(now())
    .bind(label)
    .execute(pool)
    .await?;
    Ok(token)
}

/// The `Set-Cookie` value that holds `token` (or, with `None`, clears the cookie).
pub fn cookie(token: Option<&str>, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    match token {
        Some(t) => format!(
            "{COOKIE}={t}; HttpOnly; SameSite=Lax; Path=/; Max-Age={}{secure}",
            SESSION_IDLE.as_secs()
        ),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Lax; Path=/; Max-Age=0{secure}"),
    }
}

/// The sign-in token the request's cookie holds.
pub fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())
        .filter(|v| !v.is_empty())
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
}

/// Cross-site request protection for a state-changing request: a browser's `Sec-Fetch-Site:
/// cross-site`, or an `Origin` whose host is not this server's `Host`, is refused.
pub fn check_origin(method: &Method, headers: &HeaderMap) -> Result<()> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site.eq_ignore_ascii_case("cross-site")
    {
        return Err(Error::Forbidden(
            "cross-site request refused: it was sent by another site".into(),
        ));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'))
        .unwrap_or("");
    if origin_host.is_empty() || !origin_host.eq_ignore_ascii_case(host) {
        return Err(Error::Forbidden(format!(
            "cross-site request refused: origin {origin} is not this server ({host})"
        )));
    }
    Ok(())
}

/// A pending or disabled account is refused, whatever signed it in.
fn refuse_unusable(user: &User, disabled: bool) -> Result<()> {
    if disabled {
        return Err(Error::Forbidden(
            "this account is disabled: ask an admin".into(),
        ));
    }
    if user.role == Role::Pending {
        return Err(Error::Forbidden(
            "this account waits for an admin's approval".into(),
        ));
    }
    Ok(())
}

async fn user_by(pool: &Db, sql: &'static str, hash: &str) -> Result<Option<(User, bool)>> {
    let row: Option<(i64, String, String, i64)> = sqlx::query_as(sql)
        .bind(hash)
        .bind(now())
        .fetch_optional(pool)
        .await?;
    row.map(|(id, username, role, disabled)| {
        Ok((
            User {
                id,
                username,
                role: Role::parse(&role)?,
            },
            disabled != 0,
        ))
    })
    .transpose()
}

/// What a request signed in with: the hash of its session cookie's or its API token's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A sign-in session.
    Session(String),
    /// An API token.
    Token(String),
}

/// The user of an API token's hash (with `$2`, the time, unused).
const BY_TOKEN: &str = "SELECT u.id, u.username, u.role, u.disabled FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.token_hash = $1 AND $2 >= 0";

/// The user of a session's hash, while it lasts.
const BY_SESSION: &str = "SELECT u.id, u.username, u.role, u.disabled FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.expires > $2";

/// Whether `credential` still signs its user in (its session or token is there, the account is
/// neither disabled nor pending), as [`authenticate`] would find.
pub async fn still_signs_in(app: &App, credential: &Credential) -> Result<bool> {
    let found = match credential {
        Credential::Session(hash) => user_by(&app.pool, BY_SESSION, hash).await?,
        Credential::Token(hash) => user_by(&app.pool, BY_TOKEN, hash).await?,
    };
    Ok(found.is_some_and(|(user, disabled)| refuse_unusable(&user, disabled).is_ok()))
}

/// The signed-in user of a request: by its bearer token, else by its session cookie (then a
/// state-changing request must come from this server's own pages).
pub async fn authenticate(app: &App, method: &Method, headers: &HeaderMap) -> Result<User> {
    Ok(authenticate_by(app, method, headers).await?.0)
}

/// [`authenticate`], with what the request signed in with.
pub async fn authenticate_by(
    app: &App,
    method: &Method,
    headers: &HeaderMap,
) -> Result<(User, Credential)> {
    let (user, credential) = if let Some(token) = bearer(headers) {
        let hash = token_hash(&token);
        let user = user_by(&app.pool, BY_TOKEN, &hash)
            .await?
            .ok_or_else(|| Error::Unauthorized("the API token is not valid".into()))?;
        (user, Credential::Token(hash))
    } else if let Some(token) = cookie_token(headers) {
        check_origin(method, headers)?;
        let hash = token_hash(&token);
        let t = now();
        let row: Option<(i64, String, String, i64, i64)> = sqlx::query_as(
            "SELECT u.id, u.username, u.role, u.disabled, s.last_seen FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_hash = $1 AND s.expires > $2",
        )
        .bind(&hash)
        .bind(t)
        .fetch_optional(&app.pool)
        .await?;
        let (id, username, role, disabled, last_seen) =
            row.ok_or_else(|| Error::Unauthorized("not signed in (the session ended)".into()))?;
        if t - last_seen >= SESSION_TOUCH.as_secs() as i64 {
            // A write a request, in the line of the database's writers, only this often: the
            // session's idle end moves on by a few minutes more or less.
            crate::db::execute(
                &app.pool,
                sqlx::query(
                    "UPDATE sessions SET last_seen = $1, expires = $2 WHERE token_hash = $3",
                )
                .bind(t)
                .bind(t + SESSION_IDLE.as_secs() as i64)
                .bind(&hash),
            )
            .await?;
        }
        let user = User {
            id,
            username,
            role: Role::parse(&role)?,
        };
        ((user, disabled != 0), Credential::Session(hash))
    } else {
        return Err(Error::Unauthorized("not signed in".into()));
    };
    refuse_unusable(&user.0, user.1)?;
    Ok((user.0, credential))
}

/// The extractor of the signed-in user.
pub struct Authed(pub User);

/// The extractor of the signed-in user and what it signed in with.
pub struct AuthedBy(pub User, pub Credential);

impl FromRequestParts<Arc<App>> for AuthedBy {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self> {
        let (user, credential) = authenticate_by(app, &parts.method, &parts.headers).await?;
        Ok(AuthedBy(user, credential))
    }
}

impl FromRequestParts<Arc<App>> for Authed {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, app: &Arc<App>) -> Result<Self> {
        authenticate(app, &parts.method, &parts.headers)
            .await
            .map(Authed)
    }
}

/// The largest JSON body a route takes (the API's body limit).
pub const MAX_JSON_BODY: usize = 64 * 1024;

/// A JSON body whose refusals are JSON errors with axum's status (413 past the body limit).
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(e) => Err(Error::Rejected {
                status: e.status(),
                message: e.body_text(),
            }),
        }
    }
}

/// A raw body whose refusals (past the size limit) are JSON errors.
pub struct Raw(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for Raw {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self> {
        match axum::body::Bytes::from_request(req, state).await {
            Ok(b) => Ok(Raw(b)),
            Err(e) => Err(Error::Rejected {
                status: e.status(),
                message: e.body_text(),
            }),
        }
    }
}

impl Raw {
    /// The body as JSON, or `T::default()` when it is empty.
    pub fn json_or_default<T: DeserializeOwned + Default>(&self) -> Result<T> {
        if self.0.iter().all(u8::is_ascii_whitespace) {
            return Ok(T::default());
        }
        serde_json::from_slice(&self.0).map_err(|e| {
            Error::BadRequest(format!("the body is not valid JSON for this route: {e}"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_network_counts_as_one_client() {
        let key = |s: &str| address_key(Some(s.parse().unwrap()));
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"));
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
    }

    #[test]
    fn hashes_are_argon2ids_own_and_reuse_one_set_of_blocks() {
        // A hash made by the crate's own hasher checks here, and one made here checks there.
        let theirs = Argon2::default()
            .hash_password(b"correct horse")
            .unwrap()
            .to_string();
        assert!(verify_password("correct horse", &theirs));
        assert!(!verify_password("wrong horse", &theirs));
        let ours = hash_password("battery staple").unwrap();
        assert!(
            ours.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{ours}"
        );
        let parsed = PasswordHash::new(&ours).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"battery staple", &parsed)
                .is_ok()
        );
        assert!(!verify_password("staple battery", &ours));
        assert!(!verify_password("battery staple", "not a hash"));
        // One after another, the hashes took one set of blocks and left it for the next.
        for _ in 0..3 {
            verify_password("battery staple", &ours);
        }
        let kept = BLOCKS.lock().unwrap();
        assert!(
            !kept.is_empty() && kept.len() <= 2,
            "{} sets kept",
            kept.len()
        );
    }
}
