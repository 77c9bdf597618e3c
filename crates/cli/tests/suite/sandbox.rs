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

/// A probe run as a sandboxed command: each attempt prints `NAME: ok …` or `NAME: refused
/// ERROR`. Its arguments: a Unix socket's path, a UDP port and a TCP port on loopback, the pid
/// of a process of the person's, and a file that will name the terminal llembas runs in.
const PROBE: &str = r#"
import fcntl, os, socket, sys, termios, time
unix_path, udp_port, tcp_port, victim, pty_file = sys.argv[1:6]
def probe(name, attempt):
    try:
        print(f"{name}: ok {attempt()}")
    except OSError as e:
        print(f"{name}: refused {e.strerror}")
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(unix_path)
    s.sendall(b"new-window -d 'touch ESCAPED'\n")
def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0llembas-test-abstract")
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"out", ("127.0.0.1", int(udp_port)))
def tcp():
    socket.create_connection(("127.0.0.1", int(tcp_port)), timeout=5).close()
def pair():
    a, b = socket.socketpair()
    a.sendall(b"x")
    return b.recv(1)
def tty():
    os.open("/dev/tty", os.O_RDWR)
def tiocsti():
    for _ in range(200):
        if os.path.exists(pty_file) and open(pty_file).read().strip():
            break
        time.sleep(0.05)
    fd = os.open(open(pty_file).read().strip(), os.O_RDWR | os.O_NOCTTY)
    for c in "touch INJECTED\n":
        fcntl.ioctl(fd, termios.TIOCSTI, c.encode())
def kill():
    os.kill(int(victim), 9)
for name, attempt in [("unix", unix), ("abstract", abstract), ("udp", udp), ("tcp", tcp),
                      ("pair", pair), ("tty", tty), ("tiocsti", tiocsti), ("kill", kill)]:
    probe(name, attempt)
print("key:", os.environ.get("OPENAI_API_KEY", "absent"), os.environ.get("OTHER_KEY", "absent"))
"#;

/// The probe's result line for `name`.
fn probe_line<'a>(result: &'a str, name: &str) -> &'a str {
    result
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} line in {result}"))
}

/// What the sandbox holds beyond the file system: a command cannot drive a service of the
/// person's over a Unix socket (tmux ran a planted command that way), push keys into the
/// terminal llembas reads, signal the person's other processes, send a datagram with the
/// network off, or read the model's key from its environment. A pair of connected sockets and
/// loopback TCP (here refused: the network is off) are what a command may still use.
fn sandbox_probe(network: bool) -> (Vec<String>, bool, bool) {
    use std::os::unix::net::{UnixListener, UnixStream};
    let sb = Sandbox::new();
    if network {
        std::fs::write(sb.home.path().join("config.toml"), "").unwrap();
    } else {
        std::fs::write(
            sb.home.path().join("config.toml"),
            "[sandbox]\nnetwork = false\n",
        )
        .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("service.sock");
    let service = UnixListener::bind(&sock).unwrap();
    service.set_nonblocking(true).unwrap();
    let abstract_name =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            b"llembas-test-abstract",
        )
        .unwrap();
    let abstract_service = UnixListener::bind_addr(&abstract_name).ok();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut victim = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pty_file = dir.path().join("pty");
    sb.write("probe.py", PROBE);
    let command = format!(
        "python3 probe.py {} {} {} {} {}",
        sock.display(),
        udp.local_addr().unwrap().port(),
        tcp.local_addr().unwrap().port(),
        victim.id(),
        pty_file.display()
    );
    // The scripted server answers on the runtime's own threads while this one waits.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ScriptedServer::start(vec![
            tool_call("c1", "bash", json!({"command": command})),
            text(&["Done."]),
        ]))
        .unwrap();
    // Run in a terminal of its own, as a person would: the terminal is llembas's controlling
    // terminal, which its commands must not reach.
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["--mode", "auto", "-p", "go"])
        .current_dir(sb.project.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sb.home.path())
        .env("LLEMBAS_HOME", sb.home.path())
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .env("OPENAI_BASE_URL", server.base_url())
        .env("OPENAI_MODEL", "scripted")
        .env("OPENAI_API_KEY", "sk-test-SECRET")
        .env("OTHER_KEY", "person's own");
    let mut session = expectrl::Session::spawn(cmd).unwrap();
    session.set_expect_timeout(Some(std::time::Duration::from_secs(60)));
    let pid = session.get_process().pid();
    let pty = std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap();
    std::fs::write(&pty_file, pty.display().to_string()).unwrap();
    let screen = expectrl::Expect::expect(&mut session, expectrl::Eof)
        .map(|c| String::from_utf8_lossy(c.before()).into_owned())
        .unwrap_or_default();
    let bodies = server.bodies();
    assert!(bodies.len() >= 2, "{screen}");
    let results = tool_results(bodies.last().unwrap());
    let reached = service.accept().is_ok()
        || abstract_service.is_some_and(|s| {
            s.set_nonblocking(true).unwrap();
            s.accept().is_ok()
        });
    let mut buf = [0u8; 16];
    let datagram = udp.recv_from(&mut buf).is_ok();
    let killed = victim.try_wait().unwrap().is_some();
    let _ = victim.kill();
    let _ = victim.wait();
    drop(UnixStream::connect(&sock));
    assert!(!sb.root().join("ESCAPED").exists());
    assert!(!sb.root().join("INJECTED").exists());
    assert!(
        !killed,
        "a sandboxed command killed a process of the person's: {results:?}"
    );
    (results, reached, datagram)
}

#[test]
fn a_command_reaches_no_service_terminal_or_process_outside_with_the_network_off() {
    if !llembas_cli::process::landlock_works() {
        return;
    }
    let (results, reached, datagram) = sandbox_probe(false);
    let r = &results[0];
    assert!(!reached, "a Unix-socket service was reached: {r}");
    assert!(!datagram, "a datagram left with the network off: {r}");
    for name in ["unix", "abstract", "udp", "tcp", "tiocsti", "kill"] {
        assert!(
            probe_line(r, name).contains(": refused "),
            "{name} was not refused: {r}"
        );
    }
    assert_eq!(
        probe_line(r, "unix"),
        "unix: refused Operation not permitted"
    );
    assert_eq!(probe_line(r, "udp"), "udp: refused Operation not permitted");
    assert_eq!(
        probe_line(r, "tiocsti"),
        "tiocsti: refused Operation not permitted"
    );
    assert_eq!(
        probe_line(r, "tty"),
        "tty: refused No such device or address"
    );
    assert_eq!(probe_line(r, "pair"), "pair: ok b'x'");
    assert_eq!(probe_line(r, "key"), "key: absent person's own");
}

#[test]
fn with_the_network_on_tcp_goes_out_and_unix_sockets_still_do_not() {
    if !llembas_cli::process::landlock_works() {
        return;
    }
    let (results, reached, datagram) = sandbox_probe(true);
    let r = &results[0];
    assert!(!reached, "a Unix-socket service was reached: {r}");
    assert!(datagram, "no datagram left with the network on: {r}");
    assert!(probe_line(r, "tcp").starts_with("tcp: ok"), "{r}");
    assert!(probe_line(r, "udp").starts_with("udp: ok"), "{r}");
    assert_eq!(
        probe_line(r, "unix"),
        "unix: refused Operation not permitted"
    );
    assert_eq!(
        probe_line(r, "kill"),
        "kill: refused Operation not permitted"
    );
    assert_eq!(probe_line(r, "key"), "key: absent person's own");
}

/// In a repository, a sandboxed command cannot plant a hook, change `.git/config` (a
/// `core.hooksPath` or `core.fsmonitor` the person's own git would run) or swap `.git` for one
/// of its own; `git add` and `git commit` still work in the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_plant_git_hooks_or_config() {
    let sb = Sandbox::new();
    let git = |args: &[&str]| {
        let s = std::process::Command::new("git")
            .args(args)
            .current_dir(sb.project.path())
            .env("HOME", sb.home.path())
            .status()
            .unwrap();
        assert!(s.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    let config = std::fs::read_to_string(sb.project.path().join(".git/config")).unwrap();
    sb.write("a.txt", "a\n");
    sb.write(
        "hook.sh",
        "echo 'touch HOOKED' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo hook=$?\n",
    );
    sb.write(
        "config.sh",
        "printf '[core]\\n\\thooksPath = /tmp/evil\\n' >> .git/config; echo config=$?\n",
    );
    sb.write(
        "swap.sh",
        "mv .git .git-old; echo moved=$?; rm -rf .git/hooks; echo removed=$?\n",
    );
    let server = ScriptedServer::start(vec![
        // Scripts, as a model would write them: the floor cannot see what they do.
        tool_call("c1", "bash", json!({"command": "sh hook.sh"})),
        tool_call("c2", "bash", json!({"command": "sh config.sh"})),
        tool_call("c3", "bash", json!({"command": "sh swap.sh"})),
        tool_call(
            "c4",
            "bash",
            json!({"command": "git add a.txt && git -c user.name=a -c user.email=a@b commit -qm one && echo committed"}),
        ),
        text(&["Done."]),
    ])
    .await
    .unwrap();
    let run = sb
        .run(&server.base_url(), &["--mode", "auto", "-p", "go"], "")
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    if !llembas_cli::process::landlock_works() {
        return;
    }
    if run.stderr.contains("no command have a mount namespace") {
        // This system allows no mount namespace: said once, and nothing else to check. Root can
        // always make one, so there the guard must hold.
        assert!(!rustix::process::geteuid().is_root(), "{run:?}");
        return;
    }
    let bodies = server.bodies();
    let results = tool_results(bodies.last().unwrap());
    assert!(
        results[0].contains("Read-only file system"),
        "{}",
        results[0]
    );
    assert!(!sb.project.path().join(".git/hooks/pre-commit").exists());
    assert!(
        results[1].contains("Read-only file system"),
        "{}",
        results[1]
    );
    assert!(!results[1].contains("config=0"), "{}", results[1]);
    assert_eq!(
        std::fs::read_to_string(sb.project.path().join(".git/config")).unwrap(),
        config
    );
    assert!(!results[2].contains("moved=0"), "{}", results[2]);
    assert!(sb.project.path().join(".git/hooks").is_dir());
    assert!(!sb.project.path().join(".git-old").exists());
    assert!(results[3].contains("committed"), "{}", results[3]);
    assert!(!sb.project.path().join("HOOKED").exists());
}
