//! One rule for which model server and model a front end talks to (`harness_model::settings`),
//! as the CLI and the web server both use it.

use std::collections::{BTreeMap, HashMap};

use harness_model::CancellationToken;
use harness_model::settings::{
    EndpointConfig, EndpointTable, Env, ModelFlags, ModelSettings, resolve, same_model,
};
use harness_test_support::ScriptedServer;

struct MapEnv(HashMap<&'static str, &'static str>);

impl Env for MapEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| (*v).to_owned())
    }
}

fn env(vars: &[(&'static str, &'static str)]) -> MapEnv {
    MapEnv(vars.iter().copied().collect())
}

fn endpoints() -> BTreeMap<String, EndpointConfig> {
    let mut e = BTreeMap::new();
    e.insert(
        "local".into(),
        EndpointConfig {
            base_url: "http://127.0.0.1:8080/v1/".into(),
            model: Some("qwen".into()),
            server: Some("llama.cpp".into()),
            context: Some(32768),
            deadline: Some(90),
            ..EndpointConfig::default()
        },
    );
    e.insert(
        "cloud".into(),
        EndpointConfig {
            base_url: "https://api.example.com/v1".into(),
            model: Some("gpt-4.1".into()),
            api_key_env: Some("CLOUD_KEY".into()),
            ..EndpointConfig::default()
        },
    );
    e
}

fn flags(endpoint: Option<&str>, model: Option<&str>, base_url: Option<&str>) -> ModelFlags {
    ModelFlags {
        endpoint: endpoint.map(Into::into),
        model: model.map(Into::into),
        base_url: base_url.map(Into::into),
        api_key_env: None,
    }
}

#[test]
fn flags_beat_the_environment_which_beats_the_file() {
    let e = endpoints();
    let table = EndpointTable {
        endpoints: &e,
        default: Some("local"),
        file: "config.toml",
    };
    let from_file = resolve(&flags(None, None, None), &env(&[]), &table)
        .unwrap()
        .unwrap();
    assert_eq!(from_file.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(from_file.model.as_deref(), Some("qwen"));
    assert_eq!(from_file.server.as_deref(), Some("llama.cpp"));
    assert_eq!(from_file.overrides().context, Some(32768));
    // The endpoint's deadline reaches the link; without one the link has the default.
    assert_eq!(
        from_file.link("qwen").unwrap().endpoint().deadline,
        std::time::Duration::from_secs(90)
    );
    assert_eq!(
        ModelSettings::new("http://h:1/v1")
            .link("qwen")
            .unwrap()
            .endpoint()
            .deadline,
        harness_model::DEFAULT_DEADLINE
    );

    let vars = env(&[
        ("OPENAI_BASE_URL", "http://env:1/v1"),
        ("OPENAI_MODEL", "m-env"),
    ]);
    let from_env = resolve(&flags(None, None, None), &vars, &table)
        .unwrap()
        .unwrap();
    assert_eq!(from_env.base_url, "http://env:1/v1");
    assert_eq!(from_env.model.as_deref(), Some("m-env"));

    let from_flags = resolve(
        &flags(None, Some("m-flag"), Some("http://flag:2/v1")),
        &vars,
        &table,
    )
    .unwrap()
    .unwrap();
    assert_eq!(from_flags.base_url, "http://flag:2/v1");
    assert_eq!(from_flags.model.as_deref(), Some("m-flag"));

    // --model naming an endpoint picks that endpoint, its key from its variable.
    let cloud = resolve(
        &flags(None, Some("cloud"), None),
        &env(&[("CLOUD_KEY", "sk-1")]),
        &table,
    )
    .unwrap()
    .unwrap();
    assert_eq!(cloud.base_url, "https://api.example.com/v1");
    assert_eq!(cloud.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(cloud.api_key.as_deref(), Some("sk-1"));
}

#[test]
fn what_cannot_be_settled_is_named() {
    let e = endpoints();
    let table = EndpointTable {
        endpoints: &e,
        default: None,
        file: "/etc/llembas.toml",
    };
    let cases: &[(ModelFlags, EndpointTable<'_>, &str)] = &[
        (
            flags(Some("nope"), None, None),
            table,
            "no endpoint named \"nope\" in /etc/llembas.toml",
        ),
        (
            flags(None, None, None),
            EndpointTable {
                default: Some("gone"),
                ..table
            },
            "/etc/llembas.toml: default_endpoint \"gone\" is not among its endpoints",
        ),
        (
            flags(Some("cloud"), None, None),
            table,
            "the API key variable CLOUD_KEY is not set",
        ),
        (
            flags(None, None, Some("127.0.0.1:8080/v1")),
            table,
            "base URL \"127.0.0.1:8080/v1\" must start with http:// or https://",
        ),
    ];
    for (f, t, text) in cases {
        let e = resolve(f, &env(&[]), t).unwrap_err();
        assert_eq!(e.to_string(), *text);
    }
    // Two endpoints and no default: nothing is picked, and the front end says what to set.
    assert_eq!(
        resolve(&flags(None, None, None), &env(&[]), &table).unwrap(),
        None
    );
}

#[tokio::test]
async fn an_unnamed_model_is_asked_of_the_server() {
    let server = ScriptedServer::start(vec![]).await.unwrap();
    let settings = ModelSettings::new(&server.base_url());
    let cancel = CancellationToken::new();

    server.set_models(&["qwen3-coder"]);
    let (link, name) = settings.connect(&cancel).await.unwrap();
    assert_eq!(name, "qwen3-coder");
    assert_eq!(link.serves("qwen3-coder", &cancel).await, Some(true));
    assert_eq!(link.serves("other", &cancel).await, Some(false));

    server.set_models(&["a", "b"]);
    let e = settings.model_id(&cancel).await.unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{} serves 2 models: pass --model with one of a, b",
            server.base_url()
        )
    );

    server.set_models(&[]);
    let e = settings.model_id(&cancel).await.unwrap_err().to_string();
    assert!(
        e.ends_with("lists no model: pass --model or set OPENAI_MODEL"),
        "{e}"
    );
    // A server that lists none says nothing of a name: the person is taken at their word.
    assert_eq!(link.serves("anything", &cancel).await, None);

    // A named model is not asked for.
    let named = ModelSettings {
        model: Some("smollm2".into()),
        ..settings.clone()
    };
    let before = server.requests().len();
    assert_eq!(named.model_id(&cancel).await.unwrap(), "smollm2");
    assert_eq!(server.requests().len(), before);
}

#[tokio::test]
async fn the_hint_fits_why_the_server_could_not_be_asked() {
    // A server that refuses the key: the hint is about the key, not about naming a model.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refusing = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let body = r#"{"error":{"message":"invalid api key"}}"#;
            let reply = format!(
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        }
    });
    let mut settings = ModelSettings::new(&refusing);
    let cancel = CancellationToken::new();
    let e = settings.model_id(&cancel).await.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("cannot ask {refusing} which model it serves (")),
        "{e}"
    );
    assert!(
        e.ends_with(
            "the API key was refused: check OPENAI_API_KEY (or the variable --api-key-env names)"
        ),
        "{e}"
    );

    let refused = ScriptedServer::start(vec![]).await.unwrap();
    let url = refused.base_url();
    drop(refused);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    settings.base_url = url.clone();
    let e = settings.model_id(&cancel).await.unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("cannot ask {url} which model it serves (")),
        "{e}"
    );
    assert!(
        e.ends_with("is the server running? (OPENAI_BASE_URL or --base-url names it)"),
        "{e}"
    );
}

#[test]
fn an_alias_is_the_same_model() {
    assert!(same_model("x", "x"));
    assert!(!same_model("surely-not-a-model-a", "surely-not-a-model-b"));
}
