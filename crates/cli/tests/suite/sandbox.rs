//! Shell commands in the OS sandbox (Landlock): real commands, real refusals. These tests need
//! a kernel with Landlock (this machine kind has it); without it they check that llembas says it
//! runs commands unsandboxed instead.

use harness_test_support::ScriptedServer;
use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_write_only_in_the_workspace_and_never_read_secrets() {
    let sb = Sandbox::new();
    // Outside the workspace, the temporary directory and the home: a decoy the model's script
    // tries to delete and a place it tries to write.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let decoy = outside.path().join("decoy");
    std::fs::create_dir_all(&decoy).unwrap();
    std::fs::write(decoy.join("keep.txt"), "keep\n").unwrap();
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let ssh = sb.home.path().join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_rsa"), "SECRET KEY\n").unwrap();
    sb.write(
        "clean.sh",
        &format!("rm -rf {}\necho cleaned\n", decoy.display()),
    );
    let server = ScriptedServer::start(vec![
        tool_call("c1", "bash", json!({"command": "echo in > inside.txt && cat inside.txt"})),
        tool_call("c2", "bash", json!({"command": "sh clean.sh"})),
        tool_call(
            "c3",
            "bash",
            json!({"command": format!("python3 -c \"open('{}/out.txt', 'w').write('x')\"", outside.path().display())}),
        ),
        tool_call(
            "c4",
            "bash",
            json!({"command": format!("python3 -c \"print(open('{}/id_rsa').read())\"", ssh.display())}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let mut cmd = sb.command(&server.base_url(), &["--mode", "auto", "-p", "go"]);
    cmd.env("TMPDIR", tmp.path());
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    if !llembas_cli::process::landlock_works() {
        assert!(stderr.contains("without the OS sandbox"), "{stderr}");
        return;
    }
    let bodies = server.bodies();
    let results = tool_results(bodies.last().unwrap());
    // Inside the workspace: written and read back.
    assert!(results[0].contains("\nin\nexit code 0"), "{results:?}");
    // The script that deletes a directory outside the workspace left it whole.
    assert_eq!(
        std::fs::read_to_string(decoy.join("keep.txt")).unwrap(),
        "keep\n"
    );
    assert!(results[1].contains("Permission denied"), "{}", results[1]);
    // A write outside fails with the system's own error, and the model is told why.
    assert!(!outside.path().join("out.txt").exists());
    assert!(results[2].contains("PermissionError"), "{}", results[2]);
    assert!(
        results[2].contains("[sandbox] This command ran in llembas's sandbox"),
        "{}",
        results[2]
    );
    // A secret is not read.
    assert!(results[3].contains("Permission denied"), "{}", results[3]);
    assert!(!results[3].contains("SECRET KEY"), "{}", results[3]);
    assert_eq!(sb.read("inside.txt"), "in\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_can_be_turned_off_with_a_warning() {
    let sb = Sandbox::new();
    let server = ScriptedServer::start(vec![text(&["Hi."])]).await.unwrap();
    let mut cmd = sb.command(&server.base_url(), &["-p", "hello"]);
    cmd.env("LLEMBAS_SANDBOX", "off");
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("llembas: the sandbox is off (sandbox = false): shell commands run with all of your rights"),
        "{stderr}"
    );
}
