//! Settings: flags, the environment and the config file merged (flags win over the
//! environment, the environment over the config file).

use clap::Parser;
use harness_core::protocol::Mode;
use llembas_cli::args::Args;
use llembas_cli::settings::{Env, resolve};
use std::collections::HashMap;

struct MapEnv(HashMap<&'static str, String>);
impl Env for MapEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

fn setup(config: &str, vars: &[(&'static str, &str)]) -> (tempfile::TempDir, MapEnv) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let mut map: HashMap<&'static str, String> =
        vars.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    map.insert("LLEMBAS_HOME", dir.path().display().to_string());
    (dir, MapEnv(map))
}

fn args(a: &[&str]) -> Args {
    let mut v = vec!["llembas"];
    v.extend_from_slice(a);
    Args::parse_from(v)
}

const CONFIG: &str = r#"
default_endpoint = "local"
mode = "manual"
[endpoints.local]
base_url = "http://127.0.0.1:8080/v1/"
model = "qwen"
[endpoints.cloud]
base_url = "https://api.example.com/v1"
model = "gpt-4.1"
api_key_env = "CLOUD_KEY"
"#;

#[test]
fn flags_beat_env_beat_config() {
    let (_d, env) = setup(CONFIG, &[("OPENAI_BASE_URL", "http://env:1/v1")]);
    let s = resolve(&args(&[]), &env).unwrap();
    let m = s.model.unwrap();
    assert_eq!(m.base_url, "http://env:1/v1");
    assert_eq!(m.model.as_deref(), Some("qwen"));
    assert_eq!(s.mode, Mode::Manual);

    let s = resolve(
        &args(&["--base-url", "http://flag:2/v1", "--mode", "auto"]),
        &env,
    )
    .unwrap();
    assert_eq!(s.model.unwrap().base_url, "http://flag:2/v1");
    assert_eq!(s.mode, Mode::Auto);
}

#[test]
fn named_endpoint_by_model_flag() {
    let (_d, env) = setup(CONFIG, &[("CLOUD_KEY", "sk-1")]);
    let m = resolve(&args(&["--model", "cloud"]), &env)
        .unwrap()
        .model
        .unwrap();
    assert_eq!(m.base_url, "https://api.example.com/v1");
    assert_eq!(m.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(m.api_key.as_deref(), Some("sk-1"));
    let m = resolve(&args(&[]), &env).unwrap().model.unwrap();
    assert_eq!(m.base_url, "http://127.0.0.1:8080/v1");
}

#[test]
fn missing_key_variable_is_named() {
    let (_d, env) = setup(CONFIG, &[]);
    let e = resolve(&args(&["--endpoint", "cloud"]), &env).unwrap_err();
    assert_eq!(e.to_string(), "the API key variable CLOUD_KEY is not set");
}

#[test]
fn nothing_configured_says_what_to_set() {
    let (_d, env) = setup("", &[]);
    let s = resolve(&args(&[]), &env).unwrap();
    let line = s.model.unwrap_err();
    assert!(
        line.starts_with("no model configured: set OPENAI_BASE_URL"),
        "{line}"
    );
    assert_eq!(s.mode, Mode::Edit);
}

#[test]
fn bad_config_names_the_file() {
    let (d, env) = setup("mode = 3\n", &[]);
    let e = resolve(&args(&[]), &env).unwrap_err();
    assert!(
        format!("{e:#}").contains(&d.path().join("config.toml").display().to_string()),
        "{e:#}"
    );
    let (_d, env) = setup("", &[]);
    let e = resolve(&args(&["--mode", "yolo"]), &env).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown mode \"yolo\": use one of manual, edit, auto, plan"
    );
}
