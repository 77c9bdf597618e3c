//! Prints the context-hygiene figure: prompt tokens of the scripted 200-step trajectory with
//! hygiene on and off, without compaction and with compaction at 80 % of a 128k window
//! (`cargo run -p harness-loop --example hygiene_figure`).

#![allow(clippy::print_stdout, reason = "the figure is the example's output")]

use harness_loop::trajectory::{COMPACT_AT_TOKENS, replay};

fn main() -> Result<(), harness_loop::Error> {
    let steps = 200;
    for (title, compact_at) in [
        ("no compaction", None),
        (
            "compaction past 80 % of 128k tokens",
            Some(COMPACT_AT_TOKENS),
        ),
    ] {
        let off = replay(steps, false, compact_at)?;
        let on = replay(steps, true, compact_at)?;
        let saved =
            100.0 * (off.prompt_tokens as f64 - on.prompt_tokens as f64) / off.prompt_tokens as f64;
        println!(
            "{title}: {} model requests, {} tool calls",
            on.steps, on.calls
        );
        println!(
            "  prompt tokens, hygiene off: {:>11} ({} compactions)",
            off.prompt_tokens, off.compactions
        );
        println!(
            "  prompt tokens, hygiene on:  {:>11} ({} compactions)",
            on.prompt_tokens, on.compactions
        );
        println!("  fewer with hygiene: {saved:.1} %");
        println!(
            "  results reachable by recall: {} of {}",
            on.reachable, on.stored
        );
    }
    Ok(())
}
