//! A command's output held in bounded memory.

use harness_agent::output::{HeldOutput, OutputLimits};

#[test]
fn output_past_the_limits_is_held_as_head_and_tail_and_spilled_whole() {
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("1.out");
    let limits = OutputLimits {
        head: 10,
        tail: 10,
        spill: 1_000,
        stream: 8,
    };
    let mut held = HeldOutput::new(limits, Some(spill.clone()));
    let all: String = (0..100).map(|i| format!("{i},")).collect();
    for piece in all.as_bytes().chunks(7) {
        held.push(std::str::from_utf8(piece).unwrap(), true);
    }
    let view = held.view();
    assert!(view.starts_with(&all[..10]), "{view}");
    assert!(view.ends_with(&all[all.len() - 10..]), "{view}");
    assert!(view.len() < 10 + 2 * 10 + 120, "{view}");
    assert!(
        view.contains(&format!("(the output is in {})", spill.display())),
        "{view}"
    );
    assert_eq!(std::fs::read_to_string(&spill).unwrap(), all);
    assert_eq!(held.total, all.len() as u64);
    // What the person is shown waits within its window, the rest folded into a count.
    let shown = held.take_unsent().unwrap();
    assert!(
        shown.starts_with("[… ") && shown.ends_with(&all[all.len() - 8..]),
        "{shown}"
    );
    assert_eq!(held.take_unsent(), None);
    // The note says the lines folded too, and reads back.
    let mut lines = HeldOutput::new(limits, None);
    lines.push(&"x\n".repeat(50), true);
    let shown = lines.take_unsent().unwrap();
    let note = shown.lines().next().unwrap();
    assert_eq!(note, "[… 46 lines, 92 characters not shown …]");
    assert_eq!(harness_agent::output::folded_lines(note), Some(46));
    assert_eq!(harness_agent::output::folded_lines("[… 46 lines]"), None);
    // A watcher past the head reads on from the tail.
    assert_eq!(held.since(all.len() as u64 - 3), &all[all.len() - 3..]);
}
