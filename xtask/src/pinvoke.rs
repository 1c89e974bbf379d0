//! `cargo run -p xtask -- pinvoke`: checks the .NET wrapper's P/Invoke declarations and struct
//! layouts (`bindings-dotnet/src/*.cs`) against the committed C header
//! (`ffi-c/include/sentinel_recovery.h`), so a signature changed on one side only fails `make
//! lint` instead of corrupting memory at run time.
//!
//! What it compares, by ABI class rather than by name (the C# side may say `IntPtr`, `out
//! IntPtr`, a SafeHandle or a typed pointer for the same C pointer):
//! - every `static extern` function: it exists in the header, with as many parameters, each of the
//!   same class, and the same return class;
//! - every `[StructLayout(LayoutKind.Sequential)]` struct named like a C struct: the same number of
//!   fields, each of the same class, in order (so the same offsets).
//!
//! Classes: `word` (pointers, `size_t`, callbacks, `IntPtr`, `UIntPtr`, `out`/`ref`, SafeHandles,
//! delegates, strings, arrays), `i64`, `i32`, `i16`, `i8`, `f64`, `void`, or a struct by value. A
//! C# `bool` parameter without `[MarshalAs(UnmanagedType.U1)]` is marshalled as a 4-byte Win32
//! BOOL, so it is `i32` and does not match C's one-byte `bool`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

/// Exports of ffi-c's `test-hooks` feature: the .NET suite declares them, the committed header
/// (built without the feature) does not have them.
const TEST_HOOKS: &[&str] = &["sr_client_panic_for_test_into"];

/// The offset of the `)` that closes the `(` `text` starts with.
fn closing_paren(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// One function's classes: the return, then each parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    ret: String,
    params: Vec<String>,
}

/// Entry point of the subcommand.
pub fn run(root: &Path) -> ExitCode {
    let header = match std::fs::read_to_string(root.join("ffi-c/include/sentinel_recovery.h")) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("xtask pinvoke: the C header: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut sources = String::new();
    let dir = root.join("bindings-dotnet/src");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for file in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cs"))
    {
        sources.push_str(&std::fs::read_to_string(file).unwrap_or_default());
        sources.push('\n');
    }
    let problems = check(&header, &sources);
    for p in &problems {
        eprintln!("xtask pinvoke: {p}");
    }
    if problems.is_empty() {
        let (functions, structs) = csharp(&sources);
        println!(
            "pinvoke: {} functions and {} structs match the C header",
            functions.len(),
            structs.len()
        );
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Every mismatch between the header and the C# sources, as text.
pub fn check(header: &str, sources: &str) -> Vec<String> {
    let (c_functions, c_structs) = c_header(header);
    let (cs_functions, cs_structs) = csharp(sources);
    let mut problems = Vec::new();
    for (name, cs) in &cs_functions {
        match c_functions.get(name) {
            None if TEST_HOOKS.contains(&name.as_str()) => {}
            None => problems.push(format!("{name}: declared in C# but not in the C header")),
            Some(c) if c != cs => problems.push(format!(
                "{name}: C# {} ({}) but C {} ({})",
                cs.ret,
                cs.params.join(", "),
                c.ret,
                c.params.join(", ")
            )),
            Some(_) => {}
        }
    }
    for (name, cs) in &cs_structs {
        match c_structs.get(name) {
            None => {}
            Some(c) if c != cs => problems.push(format!(
                "struct {name}: C# fields ({}) but C ({})",
                cs.join(", "),
                c.join(", ")
            )),
            Some(_) => {}
        }
    }
    problems
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else {
            let ch = rest.chars().next().expect("not empty");
            out.push(ch);
            rest = &rest[ch.len_utf8()..];
        }
    }
    out
}

/// Splits `type name` (C) into its type, dropping the name.
fn c_type_of(declaration: &str) -> String {
    let d = declaration.trim();
    let name_start = d
        .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    d[..name_start].trim().to_string()
}

fn c_class(ty: &str) -> String {
    let ty = ty.trim();
    if ty.contains('*') || (ty.starts_with("sr_") && ty.ends_with("_cb")) {
        return "word".into();
    }
    let bare = ty.trim_start_matches("const ").trim();
    match bare {
        "" | "void" => "void",
        "size_t" | "uintptr_t" | "intptr_t" => "word",
        "uint64_t" | "int64_t" => "i64",
        "int" | "int32_t" | "uint32_t" => "i32",
        "uint16_t" | "int16_t" => "i16",
        "uint8_t" | "int8_t" | "bool" => "i8",
        "double" => "f64",
        other => return other.trim_start_matches("struct ").to_string(),
    }
    .into()
}

/// The header's functions and structs, by name.
fn c_header(header: &str) -> (BTreeMap<String, Signature>, BTreeMap<String, Vec<String>>) {
    let text = strip_comments(header);
    let mut structs = BTreeMap::new();
    let mut outside = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("typedef struct ") {
        let body = &rest[at + "typedef struct ".len()..];
        let (Some(open), Some(close)) = (body.find('{'), body.find('}')) else {
            break;
        };
        if open > body.find(';').unwrap_or(usize::MAX) {
            // An opaque `typedef struct x x;`.
            outside.push_str(&rest[..at]);
            rest = &body[body.find(';').map_or(body.len(), |i| i + 1)..];
            continue;
        }
        let fields = body[open + 1..close]
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| c_class(&c_type_of(f)))
            .collect();
        structs.insert(body[..open].trim().to_string(), fields);
        outside.push_str(&rest[..at]);
        rest = &body[close..];
        rest = &rest[rest.find(';').map_or(rest.len(), |i| i + 1)..];
    }
    outside.push_str(rest);
    let mut functions = BTreeMap::new();
    for statement in outside.split(';') {
        // Preprocessor lines end with no `;`: they open the statement that follows them.
        let s: String = statement
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ");
        let s = s.trim();
        let s = s.trim_start_matches('}').trim();
        let s = s.strip_prefix("extern \"C\" {").unwrap_or(s).trim();
        if s.starts_with("typedef") {
            continue;
        }
        if let Some(open) = s.find('(') {
            let head = &s[..open];
            let name_start = head
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &head[name_start..];
            if !name.starts_with("sr_") || !s.ends_with(')') {
                continue;
            }
            let ret = c_class(&head[..name_start]);
            let inside = &s[open + 1..s.len() - 1];
            let params = if inside.trim() == "void" || inside.trim().is_empty() {
                Vec::new()
            } else {
                inside.split(',').map(|p| c_class(&c_type_of(p))).collect()
            };
            functions.insert(name.to_string(), Signature { ret, params });
        }
    }
    (functions, structs)
}

/// The C# `static extern` functions and sequential structs, by name.
fn csharp(sources: &str) -> (BTreeMap<String, Signature>, BTreeMap<String, Vec<String>>) {
    let text = strip_comments(sources);
    // A delegate's name follows its return type: `delegate void name(...)`.
    let delegates: BTreeSet<String> = text
        .split("delegate ")
        .skip(1)
        .filter_map(|d| {
            let head = d.split('(').next()?;
            head.split_whitespace().last().map(str::to_string)
        })
        .collect();
    let handles: BTreeSet<String> = text
        .split("class ")
        .skip(1)
        .filter_map(|c| {
            let (name, base) = c.split_once(':')?;
            let base = base.split('{').next()?;
            base.contains("SafeHandle")
                .then(|| name.split_whitespace().next().map(str::to_string))?
        })
        .collect();
    let class = |ty: &str, attrs: &str| -> String {
        let ty = ty.trim();
        if ty.starts_with("out ")
            || ty.starts_with("ref ")
            || ty.ends_with('*')
            || ty.ends_with("[]")
        {
            return "word".into();
        }
        match ty {
            "void" => "void".into(),
            "IntPtr" | "UIntPtr" | "string" => "word".into(),
            "ulong" | "long" => "i64".into(),
            "int" | "uint" => "i32".into(),
            "ushort" | "short" => "i16".into(),
            "byte" | "sbyte" => "i8".into(),
            "double" => "f64".into(),
            "bool" if attrs.contains("UnmanagedType.U1") || attrs.contains("UnmanagedType.I1") => {
                "i8".into()
            }
            "bool" => "i32".into(),
            t if delegates.contains(t) || handles.contains(t) => "word".into(),
            t => t.to_string(),
        }
    };
    let mut functions = BTreeMap::new();
    for piece in text.split("static extern ").skip(1) {
        let Some(open) = piece.find('(') else {
            continue;
        };
        let Some(close) = closing_paren(&piece[open..]) else {
            continue;
        };
        let head: Vec<&str> = piece[..open]
            .split_whitespace()
            .filter(|w| *w != "unsafe")
            .collect();
        let [ret, name] = head[..] else { continue };
        let inside = &piece[open + 1..open + close];
        let params = if inside.trim().is_empty() {
            Vec::new()
        } else {
            inside
                .split(',')
                .map(|p| {
                    let p = p.trim();
                    let (attrs, decl) = match p.rfind(']') {
                        Some(i) => (&p[..=i], p[i + 1..].trim()),
                        None => ("", p),
                    };
                    let ty = decl
                        .rsplit_once(char::is_whitespace)
                        .map_or(decl, |(t, _)| t);
                    class(ty, attrs)
                })
                .collect()
        };
        functions.insert(
            name.to_string(),
            Signature {
                ret: class(ret, ""),
                params,
            },
        );
    }
    let mut structs = BTreeMap::new();
    for piece in text.split("LayoutKind.Sequential").skip(1) {
        let Some(at) = piece.find("struct ") else {
            continue;
        };
        let rest = &piece[at + "struct ".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (Some(open), Some(close)) = (rest.find('{'), rest.find('}')) else {
            continue;
        };
        let fields = rest[open + 1..close]
            .split(';')
            .map(str::trim)
            .filter(|f| f.starts_with("public ") || f.starts_with("internal "))
            .map(|f| {
                let decl = f.split_once(' ').map_or(f, |(_, d)| d).trim();
                let ty = decl
                    .rsplit_once(char::is_whitespace)
                    .map_or(decl, |(t, _)| t);
                class(ty, f)
            })
            .collect();
        structs.insert(name, fields);
    }
    (functions, structs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"
// A comment (with a paren.
typedef void (*sr_reply_cb)(void *user_data, const struct sr_reply_t *reply);
typedef struct sr_address_t {
  // Host.
  const char *host;
  uint16_t port;
  const struct sr_address_t *announced;
} sr_address_t;
int sr_client_execute(struct sr_client_t *client,
                      size_t argc,
                      const char *const *argv,
                      sr_reply_cb callback,
                      void *user_data);
void sr_client_free(struct sr_client_t *client);
int sr_flag(bool on, uint64_t id);
"#;

    #[test]
    fn matching_declarations_pass() {
        let cs = r#"
            internal delegate void ReplyCb(IntPtr userData, IntPtr reply);
            sealed class ClientHandle : SafeHandleZeroOrMinusOneIsInvalid { }
            [StructLayout(LayoutKind.Sequential)]
            internal struct sr_address_t { public IntPtr host; public ushort port; public sr_address_t* announced; }
            [DllImport(Lib)] internal static extern int sr_client_execute(ClientHandle client, UIntPtr argc,
                IntPtr* argv, ReplyCb callback, IntPtr userData);
            [DllImport(Lib)] internal static extern void sr_client_free(IntPtr client);
            [DllImport(Lib)] internal static extern int sr_flag([MarshalAs(UnmanagedType.U1)] bool on, ulong id);
        "#;
        assert_eq!(check(HEADER, cs), Vec::<String>::new());
    }

    #[test]
    fn a_wrong_parameter_a_missing_one_a_win32_bool_and_a_shifted_field_fail() {
        let cs = r#"
            [StructLayout(LayoutKind.Sequential)]
            internal struct sr_address_t { public IntPtr host; public uint port; public IntPtr announced; }
            internal static extern int sr_client_execute(IntPtr client, int argc, IntPtr argv, IntPtr cb, IntPtr ud);
            internal static extern void sr_client_free();
            internal static extern int sr_flag(bool on, ulong id);
            internal static extern int sr_gone(IntPtr x);
        "#;
        let problems = check(HEADER, cs);
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(problems.iter().any(|p| p.starts_with("sr_client_execute:")));
        assert!(problems.iter().any(|p| p.starts_with("sr_client_free:")));
        assert!(problems.iter().any(|p| p.starts_with("sr_flag:")));
        assert!(problems
            .iter()
            .any(|p| p.starts_with("sr_gone: declared in C#")));
        assert!(problems
            .iter()
            .any(|p| p.starts_with("struct sr_address_t:")));
    }
}
