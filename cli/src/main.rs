//! `sentinel-recovery`: the command line of the project.
//!
//! `exec URL -- CMD` runs one command; `watch URL [--json]` prints the topology once discovery
//! has answered, then one line per event as it happens (one JSON object per line with
//! `--json`); `proxy URL --listen HOST:PORT` serves any Redis client, fencing and following the
//! primary, and prints `listening ADDRESS` then the same events; `doctor URL [--json] [--watch SECONDS]` diagnoses the deployment (exit 0, 1 or 2).
//! Arguments are parsed in one place, by clap, so every subcommand has the same `--help`,
//! error wording and exit status 2 for a usage error.

mod doctor;
mod exec;
mod proxy;
mod watch;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

const URL_HELP: &str = "\
URL: redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/service[?key=value&...]
Log detail: set RUST_LOG, e.g. RUST_LOG=sentinel_recovery=debug (logs go to stderr).";

/// Finds and follows a Redis or Valkey primary through Sentinel.
#[derive(Parser, Debug)]
#[command(name = "sentinel-recovery", version, after_help = URL_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the topology, then every event as it happens (Ctrl-C to stop)
    Watch(watch::Args),
    /// Run one command on the primary and print the reply as redis-cli does
    Exec(exec::Args),
    /// Diagnose the deployment: exit 0 healthy, 1 warnings, 2 failures
    #[command(long_about = doctor::ABOUT, after_long_help = doctor::SCHEMA)]
    Doctor(doctor::Args),
    /// Serve any Redis client on a local address, fencing and following the primary
    Proxy(proxy::Args),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .init();
    // Usage errors exit 2 (clap's convention, and the doctor's "failure" status).
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Watch(args) => watch::main(args),
        Command::Exec(args) => exec::main(args),
        Command::Proxy(args) => proxy::main(args),
        Command::Doctor(args) => return doctor::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sentinel-recovery: {message}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("sentinel-recovery").chain(args.iter().copied()))
            .map(|c| c.command)
    }

    #[test]
    fn the_parser_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn watch_arguments() {
        let Command::Watch(a) = parse(&["watch", "u", "--json"]).unwrap() else {
            panic!("not watch")
        };
        assert_eq!((a.url.as_str(), a.json), ("u", true));
        assert!(parse(&["watch"]).is_err());
        assert!(parse(&["watch", "u", "v"]).is_err());
        assert!(parse(&["watch", "u", "--colour"]).is_err());
    }

    #[test]
    fn exec_arguments() {
        // With and without `--`; arguments of the command that look like flags stay its own.
        for args in [
            &["exec", "u", "--", "SET", "k", "-1"][..],
            &["exec", "u", "SET", "k", "-1"][..],
        ] {
            let Command::Exec(a) = parse(args).unwrap() else {
                panic!("not exec")
            };
            assert_eq!(a.url, "u");
            assert_eq!(a.command, ["SET", "k", "-1"]);
        }
        assert!(parse(&["exec", "u"]).is_err(), "a command is required");
        assert!(parse(&["exec"]).is_err());
    }

    #[test]
    fn doctor_arguments() {
        let Command::Doctor(a) =
            parse(&["doctor", "redis+sentinel://h/s", "--json", "--watch", "2.5"]).unwrap()
        else {
            panic!("not doctor")
        };
        assert_eq!(a.url, "redis+sentinel://h/s");
        assert!(a.json);
        assert_eq!(a.watch, Some(Duration::from_millis(2500)));
        let Command::Doctor(a) = parse(&["doctor", "--watch=1", "u"]).unwrap() else {
            panic!("not doctor")
        };
        assert_eq!((a.url.as_str(), a.json), ("u", false));
        for bad in [
            &["doctor"][..],
            &["doctor", "u", "--watch"],
            &["doctor", "u", "--watch", "0"],
            &["doctor", "u", "--watch", "x"],
            &["doctor", "u", "--watch", "3601"],
            &["doctor", "u", "v"],
            &["doctor", "u", "--colour"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} accepted");
        }
        let e = parse(&["doctor", "u", "--watch", "x"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes a number of seconds"), "{e}");
        // Out of range: the rule every binding keeps for the doctor's watch.
        let e = parse(&["doctor", "u", "--watch", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("greater than 0 and at most 3600"), "{e}");
    }

    #[test]
    fn unknown_commands_are_refused() {
        let e = parse(&["wach", "u"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidSubcommand);
        assert_eq!(e.exit_code(), 2);
    }
}
