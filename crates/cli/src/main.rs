//! The `llembas` binary: parse the command line and hand it to the library.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let args = llembas_cli::args::Args::parse();
    llembas_cli::run(args).unwrap_or_else(|e| llembas_cli::report(&e))
}
