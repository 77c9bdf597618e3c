//! PostgreSQL: Debian's server binaries started by the tests on a temporary data directory and a
//! loopback port (as the `postgres` account when the tests run as root: PostgreSQL refuses root),
//! one server for the test binary, a fresh database a test; a watcher stops it by its PID and
//! removes its directory when the test binary ends. On it: the chat suite's flows (through
//! [`super::chats`]), both migration trees giving one schema, two processes racing a fresh
//! database's migrations, and two server processes serving one user: a run started through
//! one, streamed, answered and stopped through the other, its question answered through the
//! other (once), a `show` settled when its page went refused through the other, and taken over
//! as interrupted when its process dies; a stream of one process ended by a sign-out through the
//! other.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use harness_test_support::ScriptedServer;
use serde_json::json;
use sqlx::Connection as _;

use super::process::{Process, add_user_on};
use super::{Client, last_tool_result, run_end, text, tool_call};

/// The test binary's PostgreSQL server.
pub struct Postgres {
    port: u16,
    /// The server and its watcher: the watcher reaps the server once this test binary ends.
    _processes: [std::sync::Mutex<std::process::Child>; 2],
}

/// The directory of the newest PostgreSQL server binaries Debian installed.
fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "no PostgreSQL server binaries under /usr/lib/postgresql: install them with \
             `apt-get install postgresql` (.ci/run does)"
        )
    })
}

/// The account PostgreSQL runs as: ours, or `postgres` (else `nobody`) when we are root.
fn account() -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt as _;
    // /proc/self belongs to the effective user.
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    for name in ["postgres", "nobody"] {
        for line in passwd.lines() {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() > 3 && f[0] == name {
                return Some((f[2].parse().unwrap(), f[3].parse().unwrap()));
            }
        }
    }
    panic!(
        "the tests run as root and there is no `postgres` or `nobody` account to run PostgreSQL as"
    );
}

/// `cmd` run as `who` (the standard library drops root's other groups with it).
fn as_account(mut cmd: Command, who: Option<(u32, u32)>) -> Command {
    if let Some((uid, gid)) = who {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn chown_tree(path: &Path, who: Option<(u32, u32)>) {
    if let Some((uid, gid)) = who {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

impl Postgres {
    /// The test binary's server, started at the first call.
    pub fn get() -> &'static Postgres {
        static PG: OnceLock<Postgres> = OnceLock::new();
        PG.get_or_init(Postgres::start)
    }

    fn start() -> Postgres {
        let bin = bin_dir();
        let who = account();
        let dir = tempfile::Builder::new()
            .prefix("llembas-pg-")
            .tempdir()
            .unwrap()
            .keep();
        let data = dir.join("data");
        let sock = dir.join("sock");
        std::fs::create_dir_all(&sock).unwrap();
        chown_tree(&dir, who);
        chown_tree(&sock, who);
        let out = as_account(Command::new(bin.join("initdb")), who)
            .args(["-D", data.to_str().unwrap()])
            .args(["-U", "llembas", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = as_account(Command::new(bin.join("postgres")), who)
            .args(["-D", data.to_str().unwrap(), "-p", &port.to_string()])
            .args(["-k", sock.to_str().unwrap()])
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
            .args(["-c", "max_connections=300", "-c", "synchronous_commit=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("postgres.log")).unwrap())
            .spawn()
            .unwrap();
        // Stopped by its PID once this test binary ends, and its directory removed.
        let watch = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; kill -INT {pg}; \
             while kill -0 {pg} 2>/dev/null; do sleep 0.2; done; rm -rf '{dir}'",
            me = std::process::id(),
            pg = child.id(),
            dir = dir.display(),
        );
        let watcher = Command::new("sh")
            .args(["-c", &watch])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let since = Instant::now();
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q"])
                .status()
                .unwrap();
            if ready.success() {
                break;
            }
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "PostgreSQL did not start within a minute: {}",
                std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Postgres {
            port,
            _processes: [std::sync::Mutex::new(child), std::sync::Mutex::new(watcher)],
        }
    }

    /// A fresh database named `name`: its URL.
    pub async fn database(&self, name: &str) -> String {
        let admin = format!("postgres://llembas@127.0.0.1:{}/postgres", self.port);
        let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS \"{name}\""
        )))
        .execute(&mut conn)
        .await
        .unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut conn)
            .await
            .unwrap();
        format!("postgres://llembas@127.0.0.1:{}/{name}", self.port)
    }
}

/// The tables and their columns a database holds (the migrator's own table left out).
async fn schema(url: &str) -> BTreeMap<String, Vec<String>> {
    let pool = llembas_server::db::open(url).await.unwrap();
    let rows: Vec<(String, String)> = match llembas_server::db::Backend::of(&pool) {
        llembas_server::db::Backend::Postgres => sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns WHERE table_schema = 'public'",
        )
        .fetch_all(&pool)
        .await
        .unwrap(),
        llembas_server::db::Backend::Sqlite => sqlx::query_as(
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
        )
        .fetch_all(&pool)
        .await
        .unwrap(),
    };
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (table, column) in rows {
        if table != "_sqlx_migrations" {
            tables.entry(table).or_default().push(column);
        }
    }
    for columns in tables.values_mut() {
        columns.sort();
    }
    tables
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_migration_trees_reach_one_schema() {
    let dir = tempfile::tempdir().unwrap();
    let lite = schema(&llembas_server::db::sqlite_url(&dir.path().join("a.db"))).await;
    let pg = schema(&Postgres::get().database("schema").await).await;
    assert!(
        lite.contains_key("events") && lite.contains_key("runs"),
        "{lite:?}"
    );
    assert_eq!(lite, pg);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_racing_a_fresh_databases_migrations_both_start() {
    let url = Postgres::get().database("race").await;
    let opens: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { llembas_server::db::open(&url).await.map(|_| ()) })
        })
        .collect();
    for o in opens {
        o.await.unwrap().unwrap();
    }
    let pool = llembas_server::db::open(&url).await.unwrap();
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .unwrap()
        .count();
    assert_eq!(n, i64::try_from(on_disk).unwrap(), "each migration once");
}

/// Two server processes on one database and one data directory.
/// Two server processes on one fresh database and one data directory (leases of 2 s), with
/// alice signed in on each.
struct Pair {
    a: Process,
    b: Process,
    on_a: Client,
    on_b: Client,
    dir: tempfile::TempDir,
}

/// [`Pair`] on the fresh database `name` against `model`; `others` (name, password) are made
/// users beside alice.
async fn pair(name: &str, model: &ScriptedServer, others: &[(&str, &str)]) -> Pair {
    let url = Postgres::get().database(name).await;
    let dir = tempfile::tempdir().unwrap();
    for (user, password) in [("alice", "alice-password")].iter().chain(others) {
        add_user_on(dir.path(), &["--database-url", &url], user, password);
    }
    let args = ["--database-url", url.as_str(), "--run-lease", "2"];
    let a = Process::start_with(dir.path(), &model.base_url(), &args);
    let b = Process::start_with(dir.path(), &model.base_url(), &args);
    let on_a = a.login("alice", "alice-password").await;
    let on_b = b.login("alice", "alice-password").await;
    Pair {
        a,
        b,
        on_a,
        on_b,
        dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_serve_one_user_a_run_of_one_followed_answered_and_stopped_through_the_other()
 {
    let model = ScriptedServer::start(vec![
        tool_call(
            "c1",
            "write",
            json!({"path": "from-a.md", "content": "written by process a\n"}),
        ),
        text(&["Wrote ", "it."]),
        text(&["Still ", "going"]).stalling(),
    ])
    .await
    .unwrap();
    let Pair {
        mut on_a,
        mut on_b,
        dir,
        a: _a,
        b: _b,
    } = pair("pair", &model, &[]).await;

    // The stream is B's; the chat and its run are A's.
    let mut stream = on_b.events(None).await;
    let chat = on_a.chat().await;
    let run = on_a.say(&chat, "write from-a.md").await;
    let asked = stream.until(|e| e.kind() == "tool_call_asked").await;
    let approval = asked.last().unwrap().data["event"]["approval"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, body) = on_b
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"answer": "yes"}),
        )
        .await;
    assert_eq!(status, 200, "answered through B: {body}");
    let seen = stream.until(run_end(&run)).await;
    assert_eq!(seen.last().unwrap().data["event"]["status"], "finished");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("files/home/alice/from-a.md")).unwrap(),
        "written by process a\n"
    );
    // Every event of the chat reached B's stream once, in order.
    let (_, got) = on_b.get(&format!("/api/chats/{chat}")).await;
    let stored: Vec<i64> = got["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    let streamed: Vec<i64> = asked.iter().chain(&seen).map(|e| e.id).collect();
    assert_eq!(streamed, stored);

    // A second run, through B this time (the chat's session is built again there), stalls;
    // stopped through A.
    let run2 = on_b.say(&chat, "go on").await;
    stream.until(|e| e.kind() == "text_delta").await;
    let (status, _) = on_a
        .post(
            &format!("/api/chats/{chat}/messages"),
            json!({"text": "more"}),
        )
        .await;
    assert_eq!(
        status, 409,
        "one running run a chat, whichever process is asked"
    );
    let (status, body) = on_a
        .post(&format!("/api/runs/{run2}/stop"), json!({}))
        .await;
    assert_eq!(status, 202, "{body}");
    let end = stream.until(run_end(&run2)).await;
    assert_eq!(end.last().unwrap().data["event"]["status"], "stopped");
    let (_, got) = on_a.get(&format!("/api/chats/{chat}")).await;
    let kinds: Vec<&str> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "turn_started").count(),
        2,
        "one transcript with both turns: {kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_of_a_run_of_one_process_is_answered_once_through_the_other() {
    let model = ScriptedServer::start(vec![
        tool_call(
            "q1",
            "question",
            json!({"question": "Which colour?", "options": ["red", "green"]}),
        ),
        text(&["Green ", "it is."]),
    ])
    .await
    .unwrap();
    let p = pair("asks", &model, &[("bob", "bob-password")]).await;
    let mut bob_on_b = p.b.login("bob", "bob-password").await;
    let (mut on_a, mut on_b) = (p.on_a, p.on_b);

    // The page is B's; the chat's run is A's.
    let mut stream = on_b.events(None).await;
    let chat = on_a.chat().await;
    let run = on_a.say(&chat, "pick a colour").await;
    let asked = stream.until(|e| e.kind() == "question").await;
    let ask = asked.last().unwrap().data["event"]["ask"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = |answer: &str| json!({ "answer": answer });
    let (status, body) = bob_on_b
        .post(&format!("/api/questions/{ask}"), answer("red"))
        .await;
    assert_eq!(status, 404, "no question of bob's: {body}");
    let (status, body) = on_b
        .post(&format!("/api/questions/{ask}"), answer("green"))
        .await;
    assert_eq!(status, 200, "answered through B: {body}");
    // The first answer counts, whichever process the second reaches.
    for client in [&mut on_a, &mut on_b] {
        let (status, body) = client
            .post(&format!("/api/questions/{ask}"), answer("red"))
            .await;
        assert_eq!(status, 404, "answered already: {body}");
    }
    let seen = stream.until(run_end(&run)).await;
    assert_eq!(seen.last().unwrap().data["event"]["status"], "finished");
    let said = last_tool_result(&model.bodies()[1]);
    assert!(said.contains("green") && !said.contains("red"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_show_answered_when_its_page_went_is_refused_through_the_other_process() {
    let model = ScriptedServer::start(vec![
        tool_call("s1", "show", json!({"path": "notes.md"})),
        text(&["Still ", "going"]).stalling(),
    ])
    .await
    .unwrap();
    let Pair {
        mut on_a,
        mut on_b,
        dir,
        a: _a,
        b: _b,
    } = pair("settled", &model, &[]).await;
    std::fs::write(dir.path().join("files/home/alice/notes.md"), "# Notes\n").unwrap();

    // A page of the chat is open on A, which runs it (so `show` is offered); B streams too.
    let mut stream = on_b.events(None).await;
    let chat = on_a.chat().await;
    let page = super::pages::page_stream(&on_a, &chat).await;
    let run = on_a.say(&chat, "show me my notes").await;
    let shown = stream.until(|e| e.kind() == "show").await;
    let show = &shown.last().unwrap().data["event"];
    let (ask, call) = (show["ask"].as_str().unwrap(), show["call_id"].clone());
    // The page goes: the call answers that the viewer is gone, and its ask is settled for
    // every process before the run goes on.
    drop(page);
    stream
        .until(|e| e.kind() == "tool_call_finished" && e.data["event"]["result"]["call_id"] == call)
        .await;
    let (status, body) = on_b
        .post(&format!("/api/shows/{ask}"), json!({"opened": true}))
        .await;
    assert_eq!(status, 404, "answered already, for want of a page: {body}");
    let (status, body) = on_b.post(&format!("/api/runs/{run}/stop"), json!({})).await;
    assert_eq!(status, 202, "{body}");
    let end = stream.until(run_end(&run)).await;
    assert_eq!(end.last().unwrap().data["event"]["status"], "stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_process_dies_is_taken_over_as_interrupted_by_the_other() {
    let model = ScriptedServer::start(vec![text(&["Never ", "ends"]).stalling()])
        .await
        .unwrap();
    let Pair {
        a,
        b: _b,
        mut on_a,
        mut on_b,
        dir: _dir,
    } = pair("takeover", &model, &[]).await;
    let mut stream = on_b.events(None).await;
    let chat = on_a.chat().await;
    let run = on_a.say(&chat, "talk").await;
    stream.until(|e| e.kind() == "text_delta").await;
    a.kill();
    // B takes it over once A's lease (2 s) has run out.
    let end = stream.until(run_end(&run)).await;
    assert_eq!(end.last().unwrap().data["event"]["status"], "interrupted");
    let (_, got) = on_b.get(&format!("/api/chats/{chat}")).await;
    assert_eq!(got["running"], json!(null));
    let kinds: Vec<&str> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.last(),
        Some(&"turn_ended"),
        "the cut turn closed: {kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_one_process_ends_when_its_session_is_signed_out_through_the_other() {
    let model = ScriptedServer::start(vec![]).await.unwrap();
    let Pair {
        a: _a,
        b: _b,
        on_a,
        on_b,
        dir: _dir,
    } = pair("revoked", &model, &[]).await;
    let mut stream = on_b.events(None).await;
    let mut kept = on_a.events(None).await;
    // B's session, signed out through A.
    let mut through_a = on_b.clone();
    through_a.base = on_a.base.clone();
    let (status, _) = through_a.post("/api/auth/logout", json!({})).await;
    assert_eq!(status, 200);
    stream.ends().await;
    // A's own session still streams.
    let mut on_a = on_a;
    let chat = on_a.chat().await;
    model.push(text(&["fine"]));
    let run = on_a.say(&chat, "still there?").await;
    kept.until(run_end(&run)).await;
}
