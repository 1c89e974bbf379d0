//! `sr-soak`: the chaos soak of sentinel-recovery (issue 15).
//!
//! - `sr-soak run --minutes N [--seed S] --out DIR [--python PY --node NODE --c-writer BIN]`:
//!   1 primary + 2 replicas + 3 sentinels on loopback, each data node behind a fault proxy;
//!   writers in Rust, Python, Node and C (the latter three when their program is given); a
//!   seeded random schedule of faults; then the checker. Exit 0 only if every check passed.
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
                "usage: sr-soak run --minutes N [--seed S] --out DIR [--python PY] [--node NODE] [--c-writer BIN]\n       sr-soak check DIR\n       sr-soak writer URL ID LOG STOPFILE READS"
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
    Ok(driver::Options {
        minutes: minutes.ok_or("--minutes is required")?,
        seed,
        out: out.ok_or("--out is required")?,
        writers,
    })
}
