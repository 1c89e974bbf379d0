//! `sentinel-recovery`: the command line of the project.
//!
//! `exec URL -- CMD` runs one command; `watch URL [--json]` prints the topology once discovery has answered, then one line per event
//! as it happens: human-readable by default, one JSON object per line with `--json`;
//! `doctor URL [--json] [--watch SECONDS]` diagnoses the deployment (exit 0, 1 or 2).

mod doctor;
mod exec;
mod watch;

use std::process::ExitCode;

const USAGE: &str = "\
usage: sentinel-recovery <command> [args]

commands:
  watch URL [--json]   print the topology, then every event as it happens (Ctrl-C to stop)
  exec URL -- CMD ...  run one command on the primary and print the reply as redis-cli does
  doctor URL [--json] [--watch SECONDS]
                       diagnose the deployment: exit 0 healthy, 1 warnings, 2 failures
                       (`doctor --help` for details and the JSON schema)
  --version            print the version

URL: redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&...]
Log detail: set RUST_LOG, e.g. RUST_LOG=sentinel_recovery=debug (logs go to stderr).";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("watch") => watch::main(&args[1..]),
        Some("exec") => exec::main(&args[1..]),
        Some("doctor") => return doctor::main(&args[1..]),
        Some("-V" | "--version") => {
            println!("sentinel-recovery {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command '{other}'\n\n{USAGE}")),
        None => Err(USAGE.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sentinel-recovery: {message}");
            ExitCode::from(2)
        }
    }
}
