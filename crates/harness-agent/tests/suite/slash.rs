//! How a line a person types reads: a prompt, or a slash command; the mode cycle.

use harness_agent::slash::{Line, next_mode, parse_line};
use harness_core::protocol::Mode;
use pretty_assertions::assert_eq;

#[test]
fn slash_commands_read_as_written() {
    assert_eq!(parse_line("  "), Line::Empty);
    assert_eq!(
        parse_line("fix the bug\n"),
        Line::Prompt("fix the bug".into())
    );
    assert_eq!(parse_line("/mode plan"), Line::Mode(Some(Mode::Plan)));
    assert_eq!(
        parse_line("/mode unrestricted"),
        Line::Mode(Some(Mode::Auto))
    );
    assert_eq!(parse_line("/mode"), Line::Mode(None));
    assert_eq!(parse_line("/recall a3f2"), Line::Recall("#a3f2".into()));
    assert_eq!(
        parse_line("/rewind 2"),
        Line::Rewind {
            turn: 2,
            what: None
        }
    );
    assert_eq!(
        parse_line("/rewind 2 code"),
        Line::Rewind {
            turn: 2,
            what: Some(harness_agent::checkpoint::Restore::Code)
        }
    );
    assert!(matches!(parse_line("/rewind 2 files"), Line::Unknown(_)));
    assert_eq!(parse_line("/quit"), Line::Quit);
    assert!(matches!(parse_line("/frob"), Line::Unknown(_)));
    assert!(matches!(parse_line("/mode yolo"), Line::Unknown(_)));
}

#[test]
fn the_mode_cycle_goes_through_every_mode() {
    let mut m = Mode::Manual;
    let mut seen = vec![m];
    for _ in 0..4 {
        m = next_mode(m);
        seen.push(m);
    }
    assert_eq!(
        seen,
        [
            Mode::Manual,
            Mode::Edit,
            Mode::Auto,
            Mode::Plan,
            Mode::Manual
        ]
    );
}
