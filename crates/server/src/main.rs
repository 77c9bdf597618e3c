//! `llembas-server`: parses its arguments and runs the server.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    harness_search::embedder::set_threads_var(); // before any thread: candle's thread count
    log_to_stderr();
    let args = llembas_server::Args::parse();
    match llembas_server::main_blocking(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr, reason = "why the command failed, said once")]
            {
                eprintln!("llembas-server: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}

/// What the log holds when `RUST_LOG` does not say: the server's own news (one line a request,
/// runs interrupted or taken over) and every crate's warnings and errors.
const DEFAULT_LOG: &str = "warn,llembas_server=info";

/// The server's log (`tracing`) as lines on stderr, filtered by `RUST_LOG`.
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
