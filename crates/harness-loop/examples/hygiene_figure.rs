//! Prints the context-hygiene figure: prompt tokens of the scripted 200-step trajectory with
//! hygiene on and off (`cargo run -p harness-loop --example hygiene_figure`).

#![allow(clippy::print_stdout)]

fn main() -> Result<(), harness_loop::Error> {
    let steps = 200;
    let off = harness_loop::trajectory::replay(steps, false)?;
    let on = harness_loop::trajectory::replay(steps, true)?;
    let saved =
        100.0 * (off.prompt_tokens as f64 - on.prompt_tokens as f64) / off.prompt_tokens as f64;
    println!(
        "scripted trajectory: {} model requests, {} tool calls",
        on.steps, on.calls
    );
    println!("prompt tokens, hygiene off: {}", off.prompt_tokens);
    println!("prompt tokens, hygiene on:  {}", on.prompt_tokens);
    println!("fewer with hygiene: {saved:.1} %");
    println!(
        "results reachable by recall: {} of {}",
        on.reachable, on.stored
    );
    Ok(())
}
