//! `sr-soak`: the chaos soak of sentinel-recovery (issue 15).
//!
//! - `sr-soak run --minutes N [--seed S] --out DIR [--python PY --node NODE --c-writer BIN]
//!   [--net auto|on|off] [--url-extra K=V[,K=V...]]`: 1 primary + 2 replicas + 3 sentinels, each
//!   data node behind a fault proxy; writers in Rust, Python, Node and C (the latter three when
//!   their program is given); a seeded random schedule of faults; then the checker. Exit 0 only
//!   if every check passed.
//!
//!   `--net` (default `auto`: on when running as root with `ip`, as CI does): every node and
//!   every writer on its own host of a netns LAN, and the schedule also draws partitions A, B
//!   and C of issue 28. Auto rather than opt-in so that `make test`'s soak on CI exercises the
//!   fault that loses the most acknowledged writes with Sentinel; without root the soak runs on
//!   loopback only (a seed's loopback schedule draws no partition). `--url-extra` appends query
//!   keys to every writer's URL, e.g. `wait_replicas=2` for durable acknowledgements, which the
//!   checker then holds to 0 acknowledged writes lost.
//! - `sr-soak check DIR`: the checker alone, on a directory a run left.
//! - `sr-soak writer URL ID LOG STOPFILE READS`: the Rust writer process.

mod check;
mod cluster;
mod driver;
mod faults;
mod jsonl;
mod procs;
mod record;
mod rng;
mod svg;
mod writer;

use std::path::PathBuf;

use procs::WriterSpec;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("writer") => writer::main(&args[1..]),
        Some("check") if args.len() == 2 => report(check::check_dir(&PathBuf::from(&args[1]))),
        Some("run") => match parse_run(&args[1..]) {
            Ok(opts) => report(driver::run(opts)),
            Err(e) => {
                eprintln!("sr-soak run: {e}");
                2
            }
        },
        _ => {
            eprintln!(
                "usage: sr-soak run --minutes N [--seed S] --out DIR [--python PY] [--node NODE] [--c-writer BIN] [--net auto|on|off] [--url-extra K=V[,K=V...]]\n       sr-soak check DIR\n       sr-soak writer URL ID LOG STOPFILE READS"
            );
            2
        }
    };
    std::process::exit(code);
}

fn report(r: Result<i32, String>) -> i32 {
    r.unwrap_or_else(|e| {
        eprintln!("sr-soak: {e}");
        2
    })
}

fn parse_run(args: &[String]) -> Result<driver::Options, String> {
    let mut minutes = None;
    let mut seed = None;
    let mut out = None;
    let (mut python, mut node, mut c) = (None, None, None);
    let mut net = "auto".to_string();
    let mut url_extra = Vec::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .clone();
        match flag.as_str() {
            "--minutes" => {
                minutes =
                    Some(value.parse::<f64>().map_err(|_| {
                        format!("--minutes must be a number of minutes, not '{value}'")
                    })?)
            }
            "--seed" if !value.is_empty() => {
                seed =
                    Some(value.parse::<u64>().map_err(|_| {
                        format!("--seed must be an unsigned integer, not '{value}'")
                    })?)
            }
            "--seed" => {}
            "--out" => out = Some(PathBuf::from(value)),
            "--python" => python = Some(value),
            "--node" => node = Some(value),
            "--c-writer" => c = Some(value),
            "--net" => net = value,
            "--url-extra" => url_extra.extend(parse_url_extra(&value)?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    let here = std::env::current_exe().map_err(|e| e.to_string())?;
    let soak_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("soak");
    let spec = |id: &str, lang: &str, read_from: &str, program: Vec<String>| WriterSpec {
        id: id.into(),
        lang: lang.into(),
        read_from: read_from.into(),
        program,
    };
    let mut writers = vec![spec(
        "rust-1",
        "rust",
        "primary",
        vec![here.display().to_string(), "writer".into()],
    )];
    if let Some(py) = python {
        let script = soak_dir.join("writer.py").display().to_string();
        writers.push(spec("py-1", "python", "prefer-replica", vec![py, script]));
    }
    if let Some(node) = node {
        let script = soak_dir.join("writer.js").display().to_string();
        writers.push(spec("node-1", "node", "prefer-replica", vec![node, script]));
    }
    if let Some(c) = c {
        writers.push(spec("c-1", "c", "primary", vec![c]));
    }
    let seed = seed.unwrap_or_else(|| jsonl::now_ms() % 1_000_000);
    let net = match (
        net.as_str(),
        sentinel_recovery_testkit::net::netns_available(),
    ) {
        ("on", Err(why)) => return Err(format!("--net on: {why}")),
        ("on", Ok(())) => true,
        ("off", _) => false,
        ("auto", Ok(())) => true,
        ("auto", Err(why)) => {
            println!("sr-soak: on loopback, without partitions: {why}");
            false
        }
        (other, _) => return Err(format!("--net must be auto, on or off, not '{other}'")),
    };
    Ok(driver::Options {
        minutes: minutes.ok_or("--minutes is required")?,
        seed,
        out: out.ok_or("--out is required")?,
        writers,
        net,
        url_extra,
    })
}

/// `K=V` pairs separated by `,` or `&` (an empty value adds none, so a Makefile can always pass
/// the option).
fn parse_url_extra(value: &str) -> Result<Vec<(String, String)>, String> {
    value
        .split([',', '&'])
        .filter(|p| !p.trim().is_empty())
        .map(|p| match p.trim().split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("--url-extra wants K=V pairs, not '{p}'")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_url_extra;

    #[test]
    fn url_extra_pairs() {
        let pairs = parse_url_extra("wait_replicas=2, wait_timeout_ms=500&x=").unwrap();
        let want = [
            ("wait_replicas", "2"),
            ("wait_timeout_ms", "500"),
            ("x", ""),
        ];
        assert_eq!(
            pairs,
            want.map(|(k, v)| (k.to_string(), v.to_string())).to_vec()
        );
        assert!(parse_url_extra("").unwrap().is_empty());
        assert!(parse_url_extra("wait_replicas").is_err());
    }
}
