//! Shell commands as processes: output merged and streamed, a command outliving its timeout,
//! stopped by group, endless output held as head and tail with the rest spilled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use harness_agent::OutputSink;
use llembas_cli::process::{Exit, SpillDir, spawn};

fn collect() -> (OutputSink, Arc<Mutex<String>>) {
    let seen = Arc::new(Mutex::new(String::new()));
    let s = seen.clone();
    (
        Arc::new(move |t: String| s.lock().unwrap().push_str(&t)),
        seen,
    )
}

#[tokio::test]
async fn merges_and_streams_output() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, seen) = collect();
    let r = spawn(
        "echo out; echo err >&2; exit 3",
        dir.path(),
        &SpillDir::default(),
        false,
        Some(sink),
    )
    .unwrap();
    assert_eq!(r.wait().await, Exit::Code(3));
    assert_eq!(r.output(), "out\nerr\n");
    assert_eq!(*seen.lock().unwrap(), "out\nerr\n");
}

#[tokio::test]
async fn outlives_its_timeout_and_stops_by_group() {
    let dir = tempfile::tempdir().unwrap();
    let r = spawn(
        "echo start; sleep 30; echo never",
        dir.path(),
        &SpillDir::default(),
        false,
        None,
    )
    .unwrap();
    assert_eq!(r.wait_for(Duration::from_millis(300)).await, None);
    assert_eq!(r.output(), "start\n");
    let e = r.stop().await;
    assert!(matches!(e, Exit::Signal(_)), "{e:?}");
    assert_eq!(r.output(), "start\n");
}

#[tokio::test]
async fn a_grandchild_holding_the_pipe_does_not_hold_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (sink, seen) = collect();
    let r = spawn(
        "(sleep 5 &); echo spawned",
        dir.path(),
        &SpillDir::default(),
        false,
        Some(sink),
    )
    .unwrap();
    // The shell exits at once; its end is reported a moment later, not when the sleep
    // closes the pipe.
    assert_eq!(
        r.wait_for(Duration::from_secs(3)).await,
        Some(Exit::Code(0))
    );
    assert_eq!(*seen.lock().unwrap(), "spawned\n");
    let pid = rustix::process::Pid::from_raw(i32::try_from(r.pid()).unwrap()).unwrap();
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

#[tokio::test]
async fn endless_output_is_held_as_head_and_tail_with_the_rest_spilled() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("out/1.out");
    let l = harness_agent::output::OutputLimits::embedded().unwrap();
    let (sink, seen) = collect();
    // 8 MB of numbered lines: more than the head and the tail together.
    let r = spawn(
        "seq 1 1000000 | sed 's/$/ xxxxxx/'",
        dir.path(),
        &SpillDir::new(Some(dir.path().join("out"))),
        false,
        Some(sink),
    )
    .unwrap();
    assert_eq!(r.wait().await, Exit::Code(0));
    let all: String = (1..=1_000_000).map(|i| format!("{i} xxxxxx\n")).collect();
    let held = r.output();
    assert!(held.len() < l.head + l.tail * 2 + 200, "{}", held.len());
    assert!(held.starts_with("1 xxxxxx\n2 xxxxxx\n"));
    assert!(held.ends_with("999999 xxxxxx\n1000000 xxxxxx\n"));
    assert!(
        held.contains(&format!(
            "characters of output not kept here (the output is in {})",
            spill.display()
        )),
        "{}",
        &held[l.head..l.head + 200]
    );
    // The spill file has it all.
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), all);
    // The person was shown at most the stream window at a time, the rest folded.
    let shown = seen.lock().unwrap().clone();
    assert!(shown.ends_with("1000000 xxxxxx\n"));
    if shown.len() < all.len() {
        assert!(
            shown.contains(" characters not shown …]"),
            "{}",
            &shown[..200]
        );
    }
    // A watcher's cursor past the head reads on from the tail.
    let (total, since) = r.output_since(all.len() as u64 - 15);
    assert_eq!(
        (total, since.as_str()),
        (all.len() as u64, "1000000 xxxxxx\n")
    );
}
