//! `llembas-server`: parses its arguments and runs the server.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    harness_search::embedder::set_threads_var(); // before any thread: candle's thread count
    let args = llembas_server::Args::parse();
    match llembas_server::main_blocking(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("llembas-server: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}
