//! `cargo run -p xtask -- tables [--check]`: writes (or, with `--check`, compares) the error-code
//! and event-kind tables of every binding from the core's one table ([`ErrorCode::ALL`] with
//! [`ErrorCode::description`], [`EventKind::TABLE`]), and the error classes of Python, Node and
//! .NET ([`errors`]). The C header gets the codes through cbindgen from the generated
//! `ffi-c/src/codes.rs`.
//!
//! `cargo run -p xtask -- circles [--report-only] CRATE_DIR...`: prints the import circles
//! between the modules of each crate and fails on any (see [`circles`] for what it counts).
//!
//! `cargo run -p xtask -- pinvoke`: checks the .NET wrapper's P/Invoke declarations and struct
//! layouts against the committed C header (see [`pinvoke`]).

mod circles;
mod errors;
mod pinvoke;
mod text;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sentinel_recovery::{ErrorCode, EventKind};
use text::{capitalized, pascal, upper, HEADER};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    match args.first().map(String::as_str) {
        Some("tables") => tables(check),
        Some("circles") => circles::run(&root(), &args[1..]),
        Some("pinvoke") => pinvoke::run(&root()),
        _ => {
            eprintln!(
                "usage: cargo run -p xtask -- tables [--check] | circles [--report-only] CRATE_DIR... | pinvoke"
            );
            ExitCode::from(2)
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tables(check: bool) -> ExitCode {
    let files = [
        ("ffi-c/src/codes.rs", rust_c()),
        (
            "bindings-python/python/sentinel_recovery/_tables.py",
            python(),
        ),
        (
            "bindings-python/python/sentinel_recovery/_error_classes.py",
            errors::python(),
        ),
        ("bindings-node/tables.js", node_js()),
        ("bindings-node/tables.d.ts", node_dts()),
        ("bindings-node/errors.js", errors::node_js()),
        ("bindings-node/errors.mjs", errors::node_mjs()),
        ("bindings-node/errors.d.ts", errors::node_dts()),
        ("bindings-dotnet/src/Tables.g.cs", dotnet()),
        ("bindings-dotnet/src/Errors.g.cs", errors::dotnet()),
        ("bindings-uniffi/src/codes.rs", uniffi_rust()),
        (
            "bindings-uniffi/jvm/src/main/kotlin/sentinelrecovery/Tables.kt",
            kotlin(),
        ),
    ];
    let mut stale = Vec::new();
    for (path, text) in files {
        let full = root().join(path);
        let current = std::fs::read_to_string(&full).unwrap_or_default();
        if current == text {
            continue;
        }
        if check {
            stale.push(path);
        } else if let Err(e) = std::fs::write(&full, text) {
            eprintln!("xtask: cannot write {path}: {e}");
            return ExitCode::FAILURE;
        } else {
            println!("xtask: wrote {path}");
        }
    }
    if stale.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "xtask: generated tables differ from the core's: {}\n  run: cargo run -p xtask -- tables",
            stale.join(", ")
        );
        ExitCode::FAILURE
    }
}

fn codes() -> Vec<(i32, &'static str, &'static str)> {
    ErrorCode::ALL
        .iter()
        .map(|c| (c.as_i32(), c.as_str(), c.description()))
        .collect()
}

/// Codes of the C ABI alone (the .NET wrapper sees them through it): value, name, description.
const C_ONLY: [(i32, &str, &str); 2] = ErrorCode::C_ABI_ONLY;

fn kinds() -> Vec<(i32, &'static str, &'static str)> {
    EventKind::TABLE
        .iter()
        .enumerate()
        .map(|(i, (name, what))| (i as i32 + 1, *name, *what))
        .collect()
}

fn rust_c() -> String {
    let mut out = format!("//! {HEADER}\n\nuse std::ffi::{{c_int, CStr}};\n\n");
    for (n, name, what) in codes() {
        out += &format!(
            "/// {}.\npub const SR_ERR_{}: c_int = {n};\n",
            capitalized(what),
            upper(name)
        );
    }
    for (n, name, what) in C_ONLY {
        out += &format!(
            "/// {}.\npub const SR_ERR_{}: c_int = {n};\n",
            capitalized(what),
            upper(name)
        );
    }
    for (n, name, what) in kinds() {
        out += &format!(
            "/// {}.\npub const SR_EVENT_{}: c_int = {n};\n",
            capitalized(what),
            upper(name)
        );
    }
    out += "\n/// The name and description of an error code.\npub(crate) fn code_texts_of(code: c_int) -> Option<(&'static CStr, &'static CStr)> {\n    match code {\n";
    for (_, name, what) in codes() {
        out += &format!(
            "        SR_ERR_{} => Some((c\"{name}\", c\"{what}\")),\n",
            upper(name)
        );
    }
    for (_, name, what) in C_ONLY {
        out += &format!(
            "        SR_ERR_{} => Some((c\"{name}\", c\"{}\")),\n",
            upper(name),
            what.trim_start_matches("C ABI only: ")
        );
    }
    out += "        _ => None,\n    }\n}\n";
    out
}

fn python() -> String {
    let mut out = format!("# {HEADER}\n\"\"\"The core's error codes and event kinds: (name, value, description).\"\"\"\n\nERROR_CODES = (\n");
    for (n, name, what) in codes() {
        out += &format!("    (\"{name}\", {n}, \"{what}\"),\n");
    }
    out += ")\n\nEVENT_KINDS = (\n";
    for (n, name, what) in kinds() {
        out += &format!("    (\"{name}\", {n}, \"{what}\"),\n");
    }
    out += ")\n";
    out
}

fn node_js() -> String {
    let mut out = format!("// {HEADER}\n'use strict'\n\n/** The core's error codes: name -> [value, description]. */\nconst ERROR_CODES = Object.freeze({{\n");
    for (n, name, what) in codes() {
        out += &format!("  {name}: [{n}, '{}'],\n", what.replace('\'', "\\'"));
    }
    out += "})\n\n/** The core's event kinds: name -> [value, description]. */\nconst EVENT_KINDS = Object.freeze({\n";
    for (n, name, what) in kinds() {
        out += &format!("  {name}: [{n}, '{}'],\n", what.replace('\'', "\\'"));
    }
    out += "})\n\nmodule.exports = { ERROR_CODES, EVENT_KINDS }\n";
    out
}

fn node_dts() -> String {
    let union = |items: Vec<(i32, &str, &str)>| {
        items
            .iter()
            .map(|(_, n, _)| format!("\n  | '{n}'"))
            .collect::<String>()
    };
    format!(
        "// {HEADER}\n\n/** A stable error code shared by every language. */\nexport type ErrorCode ={}\n\n/** An event kind shared by every language. */\nexport type EventKindName ={}\n\nexport declare const ERROR_CODES: Readonly<Record<ErrorCode, [number, string]>>\nexport declare const EVENT_KINDS: Readonly<Record<EventKindName, [number, string]>>\n",
        union(codes()),
        union(kinds())
    )
}

fn dotnet() -> String {
    let all_codes: Vec<(i32, &str, &str)> = codes().into_iter().chain(C_ONLY).collect();
    let members = |items: &[(i32, &str, &str)]| {
        items
            .iter()
            .map(|(n, name, what)| {
                format!(
                    "        /// <summary><c>{name}</c>: {what}.</summary>\n        {} = {n},\n",
                    pascal(name)
                )
            })
            .collect::<String>()
    };
    let names = |ty: &str, items: &[(i32, &str, &str)]| {
        items
            .iter()
            .map(|(_, name, _)| {
                format!(
                    "                case {ty}.{}: return \"{name}\";\n",
                    pascal(name)
                )
            })
            .collect::<String>()
    };
    format!(
        "// {HEADER}\nnamespace SentinelRecovery\n{{\n    /// <summary>The stable error codes shared by every language binding (the C ABI's\n    /// <c>SR_ERR_*</c> values).</summary>\n    public enum ErrorCode\n    {{\n{}    }}\n\n    /// <summary>Kinds of topology events (the same names in every language; the C ABI's\n    /// <c>SR_EVENT_*</c> values).</summary>\n    public enum EventKind\n    {{\n        /// <summary>A kind newer than this wrapper; <see cref=\"TopologyEventArgs.KindName\"/> and\n        /// <see cref=\"TopologyEventArgs.Json\"/> still describe it.</summary>\n        Other = 0,\n{}    }}\n\n    internal static class CodeNames\n    {{\n        internal static string Of(ErrorCode code)\n        {{\n            switch (code)\n            {{\n{}                default: return \"unknown\";\n            }}\n        }}\n\n        internal static string Of(EventKind kind)\n        {{\n            switch (kind)\n            {{\n{}                default: return \"other\";\n            }}\n        }}\n    }}\n}}\n",
        members(&all_codes),
        members(&kinds()),
        names("ErrorCode", &all_codes),
        names("EventKind", &kinds())
    )
}

/// The uniffi error enum: one variant per code, so each generated language has one exception
/// class per code under one base class.
fn uniffi_rust() -> String {
    let mut out = format!(
        "//! {HEADER}\n\nuse sentinel_recovery::ErrorCode;\n\n/// An error with one of the shared codes: one variant (one exception class) per code, each\n/// carrying the code's shared name, the message and, for a server error, its first word.\n#[derive(Clone, Debug, PartialEq, Eq, uniffi::Error)]\npub enum SentinelError {{\n"
    );
    for (_, name, what) in codes() {
        out += &format!(
            "    /// `{name}`: {what}.\n    {} {{\n        /// The shared code name.\n        code: String,\n        /// What went wrong (never a secret).\n        detail: String,\n        /// For a server error, its first word (`ERR`, `WRONGTYPE`, ...).\n        server_code: Option<String>,\n    }},\n",
            pascal(name)
        );
    }
    out += "}\n\nimpl SentinelError {\n    /// The variant of `code` (`Internal` for a code newer than this table).\n    pub(crate) fn of(code: ErrorCode, detail: String, server_code: Option<String>) -> Self {\n        let name = code.as_str().to_string();\n        match code {\n";
    for (_, name, _) in codes() {
        let variant = pascal(name);
        out += &format!(
            "            ErrorCode::{variant} => SentinelError::{variant} {{\n                code: name,\n                detail,\n                server_code,\n            }},\n"
        );
    }
    out += "            _ => SentinelError::Internal {\n                code: name,\n                detail,\n                server_code,\n            },\n        }\n    }\n\n    /// The shared code name and the message.\n    pub(crate) fn parts(&self) -> (&str, &str) {\n        match self {\n";
    let all = codes();
    for (i, (_, name, _)) in all.iter().enumerate() {
        let bar = if i == 0 { "" } else { "| " };
        let arm = if i + 1 == all.len() {
            " => (code, detail),"
        } else {
            ""
        };
        out += &format!(
            "            {bar}SentinelError::{} {{ code, detail, .. }}{arm}\n",
            pascal(name)
        );
    }
    out += "        }\n    }\n}\n";
    out
}

/// The JVM layer's tables: the code of each exception class (a `when` over the generated sealed
/// class, so a code missing on either side fails to compile) and the names in C order.
fn kotlin() -> String {
    let mut out = format!("// {HEADER}\npackage sentinelrecovery\n\nimport sentinelrecovery.uniffi.SentinelException\n\n/** The shared code name of this error (`no_healthy_primary`, ...). */\nval SentinelException.errorCode: String\n    get() = when (this) {{\n");
    for (_, name, _) in codes() {
        out += &format!("        is SentinelException.{} -> code\n", pascal(name));
    }
    out += "    }\n\n/** The shared error codes: name to description, in the C ABI's order. */\nval ERROR_CODES: Map<String, String> = linkedMapOf(\n";
    for (_, name, what) in codes() {
        out += &format!("    \"{name}\" to \"{what}\",\n");
    }
    out += ")\n\n/** The shared event kinds: name to description, in the C ABI's order. */\nval EVENT_KINDS: Map<String, String> = linkedMapOf(\n";
    for (_, name, what) in kinds() {
        out += &format!("    \"{name}\" to \"{what}\",\n");
    }
    out += ")\n";
    out
}
