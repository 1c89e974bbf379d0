//! The error classes of Python, Node and .NET, generated from the core's table
//! ([`ErrorCode::ALL`] with [`ErrorCode::doc`]): one class per code under each language's base
//! class (hand-written: `_error_base.py`, `error_base.js`, `Errors.cs`), and the map from code to
//! class. What each language does differently (a built-in base class, a name that would clash, a
//! server code) is said here, once per language.

use sentinel_recovery::ErrorCode;

use crate::text::{code_spans, paragraph, pascal, wrap, HEADER};

/// A code of the core's table: its shared name, its doc as one paragraph and the name of its
/// class in Python and Node (`queue_full` -> `QueueFullError`).
struct Code {
    code: ErrorCode,
    name: &'static str,
    doc: String,
    class: String,
}

fn codes() -> Vec<Code> {
    ErrorCode::ALL
        .iter()
        .map(|&code| Code {
            code,
            name: code.as_str(),
            doc: paragraph(code.doc()),
            class: format!("{}Error", pascal(code.as_str())),
        })
        .collect()
}

/// `text` wrapped at `width`, each line after `prefix`.
fn comment(text: &str, width: usize, prefix: &str) -> String {
    wrap(text, width)
        .iter()
        .map(|l| format!("{}\n", format!("{prefix}{l}").trim_end()))
        .collect()
}

/// Python's built-in exception each of these codes also is (`except ValueError` catches a bad
/// option), as written in the generated module (which imports `builtins`).
fn python_builtin(code: ErrorCode) -> Option<&'static str> {
    match code {
        ErrorCode::Config => Some("ValueError"),
        ErrorCode::Timeout => Some("builtins.TimeoutError"),
        ErrorCode::ConnectionLost => Some("builtins.ConnectionError"),
        _ => None,
    }
}

/// `sentinel_recovery/_error_classes.py`.
pub fn python() -> String {
    let all = codes();
    let mut out = format!(
        "# {HEADER}\n\"\"\"The exception class of each error code of the core's table: a subclass of :class:`Error`\n(``_error_base``) and, where Python has a built-in for what it means, of that built-in too.\"\"\"\n\nfrom __future__ import annotations\n\nimport builtins\nfrom typing import Dict, Type\n\nfrom ._error_base import Error\n\n__all__ = [\n"
    );
    for c in &all {
        out += &format!("    \"{}\",\n", c.class);
    }
    out += "]\n";
    for c in &all {
        let builtin = python_builtin(c.code);
        let mut doc = code_spans(&c.doc, |s| format!("``{s}``"));
        if let Some(b) = builtin {
            doc += &format!(
                " Also a built-in ``{}``.",
                b.trim_start_matches("builtins.")
            );
        }
        let lines = wrap(&doc, 92);
        let mut text = String::new();
        for (i, line) in lines.iter().enumerate() {
            let lead = if i == 0 { "    \"\"\"" } else { "    " };
            let end = if i + 1 == lines.len() { "\"\"\"" } else { "" };
            text += &format!("{lead}{line}{end}\n");
        }
        let bases = builtin.map_or("Error".to_string(), |b| format!("Error, {b}"));
        out += &format!(
            "\n\nclass {}({bases}):\n{text}\n    code = \"{}\"\n",
            c.class, c.name
        );
    }
    out += "\n\n#: Every code of the core's table and its class.\nBY_CODE: Dict[str, Type[Error]] = {\n";
    for c in &all {
        out += &format!("    \"{}\": {},\n", c.name, c.class);
    }
    out += "}\n";
    out
}

/// A JSDoc comment at the top level.
fn jsdoc(doc: &str) -> String {
    let lines = wrap(doc, 96);
    if lines.len() == 1 {
        format!("/** {} */\n", lines[0])
    } else {
        format!("/**\n{} */\n", comment(doc, 96, " * "))
    }
}

/// The names `index.js` and `index.mjs` export from `errors.js`.
fn node_exports() -> String {
    let mut out = "  SentinelRecoveryError,\n".to_string();
    for c in codes() {
        out += &format!("  {},\n", c.class);
    }
    out += "  ERROR_CLASSES,\n";
    out
}

/// `bindings-node/errors.js`: the classes and `ERROR_CLASSES`.
pub fn node_js() -> String {
    let all = codes();
    let mut out = format!(
        "// {HEADER}\n'use strict'\n// The error class of each code of the core's table, under error_base.js's SentinelRecoveryError.\n\nconst {{ SentinelRecoveryError }} = require('./error_base.js')\n"
    );
    for c in &all {
        out += &format!(
            "\n{}class {} extends SentinelRecoveryError {{}}\n",
            jsdoc(&c.doc),
            c.class
        );
    }
    out += "\n/** Error class by stable code. */\nconst ERROR_CLASSES = Object.freeze({\n";
    for c in &all {
        out += &format!("  {}: {},\n", c.name, c.class);
    }
    out += &format!("}})\n\nmodule.exports = {{\n{}}}\n", node_exports());
    out
}

/// `bindings-node/errors.mjs`: the same classes as named ESM exports (`index.mjs` re-exports).
pub fn node_mjs() -> String {
    format!(
        "// {HEADER}\n// The classes of errors.js as named exports (the same objects as index.js's).\nimport cjs from './errors.js'\n\nexport const {{\n{}}} = cjs\n",
        node_exports()
    )
}

/// `bindings-node/errors.d.ts`.
pub fn node_dts() -> String {
    let mut out = format!(
        "// {HEADER}\n\nimport type {{ ErrorCode }} from './tables'\nimport {{ SentinelRecoveryError }} from './error_base'\n\nexport {{ SentinelRecoveryError }}\n"
    );
    for c in codes() {
        out += &format!(
            "\n{}export declare class {} extends SentinelRecoveryError {{}}\n",
            jsdoc(&c.doc),
            c.class
        );
    }
    out += "\n/** Error class by stable code. */\nexport declare const ERROR_CLASSES: Readonly<Record<ErrorCode, typeof SentinelRecoveryError>>\n";
    out
}

/// How .NET's class of a code departs from `<Code>Exception`.
struct DotNetClass {
    /// The class name.
    name: String,
    /// A sentence for the class doc.
    note: &'static str,
    /// `sealed` or nothing.
    sealed: bool,
    /// The constructor's server code parameter: none, required, or optional (`= null`).
    server_code: Option<&'static str>,
}

fn dotnet_class(code: ErrorCode) -> DotNetClass {
    let mut class = DotNetClass {
        name: format!("{}Exception", pascal(code.as_str())),
        note: "",
        sealed: false,
        server_code: None,
    };
    match code {
        ErrorCode::Timeout => {
            class.name = "SentinelTimeoutException".into();
            class.note =
                " Named so it does not clash with <see cref=\"System.TimeoutException\"/>.";
        }
        ErrorCode::Closed => class.name = "ClientClosedException".into(),
        ErrorCode::Internal => class.sealed = true,
        ErrorCode::Server => class.server_code = Some("string serverCode"),
        ErrorCode::Auth => class.server_code = Some("string serverCode = null"),
        _ => {}
    }
    class
}

/// "The client ..." -> "the client ...", for after a colon ("TLS ..." stays).
fn decapitalized(text: &str) -> String {
    let word = text.split(' ').next().unwrap_or_default();
    let mut c = word.chars();
    match c.next() {
        Some(first) if c.all(char::is_lowercase) => {
            first.to_lowercase().to_string() + &text[first.len_utf8()..]
        }
        _ => text.to_string(),
    }
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `bindings-dotnet/src/Errors.g.cs`: the exception classes and the factory of
/// `SentinelRecoveryException.Create`.
pub fn dotnet() -> String {
    let all = codes();
    let mut out = format!(
        "// {HEADER}\nnamespace SentinelRecovery\n{{\n    internal static class ErrorClasses\n    {{\n        /// <summary>The exception of <paramref name=\"code\"/>'s class; the base class for a code\n        /// without one (the C ABI's own).</summary>\n        internal static SentinelRecoveryException Create(ErrorCode code, string message, string serverCode)\n        {{\n            switch (code)\n            {{\n"
    );
    for c in &all {
        let class = dotnet_class(c.code);
        let args = if class.server_code.is_some() {
            "message, serverCode"
        } else {
            "message"
        };
        out += &format!(
            "                case ErrorCode.{}: return new {}({args});\n",
            pascal(c.name),
            class.name
        );
    }
    out += "                default: return new SentinelRecoveryException(code, message);\n            }\n        }\n    }\n";
    for c in &all {
        let class = dotnet_class(c.code);
        let variant = pascal(c.name);
        let doc = code_spans(&xml(&decapitalized(&c.doc)), |s| format!("<c>{s}</c>"));
        let summary = format!(
            "<summary><see cref=\"ErrorCode.{variant}\"/>: {doc}{}</summary>",
            class.note
        );
        let sealed = if class.sealed { "sealed " } else { "" };
        let (property, parameter, body) = match class.server_code {
            Some(p) => (
                "        /// <summary>The first word of the server's error reply (<c>\"ERR\"</c>,\n        /// <c>\"WRONGTYPE\"</c>, ...) when the server reported it, or null.</summary>\n        public string ServerCode { get; private set; }\n\n",
                format!(", {p}"),
                " ServerCode = serverCode; ",
            ),
            None => ("", String::new(), " "),
        };
        out += &format!(
            "\n{}    public {sealed}class {} : SentinelRecoveryException\n    {{\n{property}        /// <summary>Creates the error.</summary>\n        public {}(string message{parameter}) : base(ErrorCode.{variant}, message) {{{body}}}\n    }}\n",
            comment(&summary, 96, "    /// "),
            class.name,
            class.name
        );
    }
    out += "}\n";
    out
}
