//! The system text's Environment block as the terminal agent fills it: the platform with its
//! architecture, the shell `bash` runs commands with, and the repository's state.

use harness_test_support::ScriptedServer;

use super::*;

/// The Environment block of the system text the model was sent for a run in `sb`.
async fn environment(sb: &Sandbox) -> String {
    let server = ScriptedServer::start(vec![text(&["Hi."])]).await.unwrap();
    let run = sb.run(&server.base_url(), &["-p", "hi"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let system = messages(&server.bodies()[0])[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let block = &system[system.find("# Environment").unwrap()..];
    let block = block.split("\n# ").next().unwrap_or(block).trim_end();
    let bash = llembas_cli::world::shell_line();
    block
        .replace(&sb.root().display().to_string(), "[project]")
        .replace(&bash, "Shell: [bash]")
        .lines()
        .map(|l| match l.strip_prefix("- Today's date: ") {
            Some(_) => "- Today's date: [date]",
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_says_platform_shell_and_git() {
    let plain = Sandbox::new();
    let outside = environment(&plain).await;
    let repo = Sandbox::new();
    let root = repo.root();
    git(&root, &["init", "-q", "-b", "trunk"]);
    repo.write("a.txt", "alpha\n");
    git(&root, &["add", "a.txt"]);
    git(&root, &["commit", "-q", "-m", "first"]);
    let clean = environment(&repo).await;
    repo.write("a.txt", "beta\n");
    let changed = environment(&repo).await;
    assert!(
        llembas_cli::world::shell_line().starts_with("Shell: /"),
        "{}",
        llembas_cli::world::shell_line()
    );
    insta::assert_snapshot!(format!(
        "{outside}\n\n--- in a repository, clean:\n{clean}\n\n--- changed:\n{changed}"
    ));
}

#[test]
fn git_status_line_reads_porcelain() {
    let cases = [
        ("## main...origin/main\n", "Git: branch main, clean"),
        (
            "## main\n M a.txt\n?? b.txt\n",
            "Git: branch main, 2 uncommitted changes",
        ),
        (
            "## feature/x...origin/feature/x [ahead 1]\n M a\n",
            "Git: branch feature/x, 1 uncommitted change",
        ),
        (
            "## No commits yet on main\n?? a.txt\n",
            "Git: branch main (no commits yet), 1 uncommitted change",
        ),
        ("## HEAD (no branch)\n", "Git: detached HEAD, clean"),
    ];
    for (status, line) in cases {
        assert_eq!(
            llembas_cli::world::git_status_line(status),
            line,
            "{status:?}"
        );
    }
}
