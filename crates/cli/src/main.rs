//! The `llembas` binary: parse the command line and hand it to the library.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    harness_search::embedder::set_threads_var(); // before any thread: candle's thread count
    let args = llembas_cli::args::Args::parse();
    llembas_cli::run(args).unwrap_or_else(|e| llembas_cli::report(&e))
}
