//! `cargo run -p xtask -- circles [--report-only] [--allow-within=MODULE] CRATE...`: prints every
//! import circle between the modules of each named crate (a directory of the workspace, e.g.
//! `core`) and fails when one has any, unless `--report-only`. `--allow-within=MODULE` (repeatable)
//! still prints, but does not fail on, a circle whose modules all lie in MODULE or below it: for a
//! subtree someone is taking apart, so the rest of the crate stays guarded meanwhile.
//!
//! What it counts, so a reader can judge what "no circles" means:
//! - A module is a file under the crate's `src/`: `lib.rs` (or `main.rs`) is the root, `a/mod.rs`
//!   and `a.rs` are `a`, `a/b.rs` is `a::b`. Modules are found by following `mod x;` declarations
//!   from the root; a `mod` declaration is containment, not a dependency by itself.
//! - Module A depends on module B when A's file names a path into B: a `use` item (every leaf of a
//!   `use` tree, globs included) or a path of two or more segments in code, starting with `crate`,
//!   `super`, `self`, a child module's name or a name A imported with `use`. The path is walked to
//!   the deepest module it names; when it goes on with a name that module imports with `use` (a
//!   re-export such as `crate::Error`), the walk follows that import, so a facade that re-exports
//!   does not count as the owner of what it re-exports. A child that names its parent through
//!   `super::` depends on it like any other module does.
//! - Test-only code is left out: an item under `#[cfg(test)]` (an inline `mod tests { use
//!   super::*; ... }`, a `use`, a helper) and a module file declared under `#[cfg(test)]`. It is
//!   compiled into the test binary alone, may reach anything (a child test module's `use super::*`
//!   is how Rust tests are written) and nothing in the product depends on it.
//! - Not resolved: names brought in by a glob (`use a::*` counts as a dependency on `a` and
//!   nothing deeper), macro-generated paths other than `$crate::`, `#[path]` attributes.
//!
//! A circle is a strongly connected component of more than one module; each is printed with the
//! references that close it (file:line).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The dependency graph of one crate: module name → module names it depends on.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Entry point of the subcommand; `args` are what follows `circles`.
pub fn run(root: &Path, args: &[String]) -> ExitCode {
    let report_only = args.iter().any(|a| a == "--report-only");
    let allowed: Vec<&str> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--allow-within="))
        .collect();
    let crates: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if crates.is_empty() {
        eprintln!("usage: cargo run -p xtask -- circles [--report-only] CRATE_DIR...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for name in crates {
        let src = root.join(name).join("src");
        let krate = match Crate::load(&src) {
            Ok(k) => k,
            Err(e) => {
                eprintln!("xtask circles: {name}: {e}");
                failed = true;
                continue;
            }
        };
        let graph = krate.graph();
        let modules = krate.modules.len();
        let mut failing = report(
            name,
            "modules",
            modules,
            &graph,
            &krate.edges,
            &allowed,
            report_only,
            |m| m.to_string(),
        );
        let top = top_level(&graph);
        failing += report(
            name,
            "top-level modules",
            top.len(),
            &top,
            &krate.edges,
            &allowed,
            report_only,
            |m| top_of(m).to_string(),
        );
        failed |= !report_only && failing > 0;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints the circles of `graph` (nodes: `what`, `count` of them) with the references in `edges`
/// that close each (`node_of` maps an edge's module to its node); returns how many circles fail.
#[allow(clippy::too_many_arguments)]
fn report(
    krate: &str,
    what: &str,
    count: usize,
    graph: &Graph,
    edges: &[(String, String, String)],
    allowed: &[&str],
    report_only: bool,
    node_of: impl Fn(&str) -> String,
) -> usize {
    let found = circles(graph);
    if found.is_empty() {
        println!("{krate}: no circles ({count} {what})");
        return 0;
    }
    println!(
        "{krate}: {} circle(s) between {what}{}",
        found.len(),
        if report_only { " (reported only)" } else { "" }
    );
    let mut failing = 0;
    for circle in &found {
        let tolerated = circle.iter().all(|m| within_any(m, allowed));
        failing += usize::from(!tolerated);
        println!(
            "  circle of {}{}: {}",
            circle.len(),
            if tolerated { " (allowed)" } else { "" },
            circle.join(", ")
        );
        let members: BTreeSet<&String> = circle.iter().collect();
        for (from, to, at) in edges {
            let (a, b) = (node_of(from), node_of(to));
            if a != b && members.contains(&a) && members.contains(&b) {
                println!("    {from} -> {to}  ({at})");
            }
        }
    }
    failing
}

/// The top-level module `module` lies in (`crate` for the root).
fn top_of(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// `graph` seen between top-level modules: `a::x -> b::y` becomes `a -> b`. The root is left out
/// (it declares and re-exports every module), and so are references within one top-level module
/// (their circles are the module-level check's). A circle here is one the module-level check
/// cannot see, such as `a::x -> b::y` beside `b::z -> a::w`.
pub fn top_level(graph: &Graph) -> Graph {
    let mut top = Graph::new();
    for (from, tos) in graph {
        let a = top_of(from);
        if a == "crate" {
            continue;
        }
        for to in tos {
            let b = top_of(to);
            if b != a && b != "crate" {
                top.entry(a.to_string()).or_default().insert(b.to_string());
            }
        }
    }
    top
}

/// Whether `module` is one of `prefixes` or lies below one of them.
fn within_any(module: &str, prefixes: &[&str]) -> bool {
    prefixes
        .iter()
        .any(|p| module == *p || module.starts_with(&format!("{p}::")))
}

/// Every strongly connected component of more than one node, each sorted, in a stable order
/// (Tarjan's algorithm; the graphs are a few hundred nodes at most).
pub fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let mut nodes: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    nodes.extend(graph.values().flatten().map(String::as_str));
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Tokens with their line numbers; comments, strings and character literals are dropped.
fn tokenize(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let count_lines = |from: usize, to: usize, line: &mut usize| {
        *line += c[from..to.min(c.len())]
            .iter()
            .filter(|&&x| x == '\n')
            .count();
    };
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let start = i;
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            count_lines(start, i, &mut line);
        } else if ch == '"' || ((ch == 'b' || ch == 'c') && c.get(i + 1) == Some(&'"')) {
            let start = i;
            i += if ch == '"' { 1 } else { 2 };
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            count_lines(start, i, &mut line);
        } else if let Some(end) = raw_string_end(&c, i) {
            count_lines(i, end, &mut line);
            i = end;
        } else if ch == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                // A lifetime or label: its name is no path.
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                if c[i] == '.' && !c.get(i + 1).is_some_and(char::is_ascii_digit) {
                    break;
                }
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// Where a raw (byte) string literal starting at `i` ends, if one starts there.
fn raw_string_end(c: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if c.get(j) == Some(&'b') || c.get(j) == Some(&'c') {
        j += 1;
    }
    if c.get(j) != Some(&'r') || (i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')) {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while c.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if c.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < c.len() {
        if c[j] == '"' && (1..=hashes).all(|k| c.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(c.len())
}

/// One `use` leaf: its path, the name it binds (none for a glob or `as _`).
#[derive(Debug)]
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
    line: usize,
}

/// What one module's file says: its (non-test) child modules, its imports, and the paths it names.
#[derive(Debug, Default)]
struct ModuleFile {
    file: PathBuf,
    children: Vec<String>,
    uses: Vec<UseLeaf>,
    /// Paths in code, with the inline module they sit in (relative to the file's module).
    paths: Vec<(Vec<String>, Vec<String>, usize)>,
}

struct Crate {
    modules: BTreeMap<Vec<String>, ModuleFile>,
    /// (from, to, where) for every first reference from one module into another.
    edges: Vec<(String, String, String)>,
}

fn is_cfg_test(attr: &[(Tok, usize)]) -> bool {
    let idents: Vec<&str> = attr
        .iter()
        .filter_map(|(t, _)| match t {
            Tok::Ident(s) => Some(s.as_str()),
            _ => None,
        })
        .collect();
    idents.first() == Some(&"cfg")
        && idents.contains(&"test")
        && !idents.contains(&"not")
        && !idents.contains(&"any")
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static",
    "struct", "trait", "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn",
    "Self",
];

fn parse_file(file: &Path) -> Result<ModuleFile, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let toks = tokenize(&text);
    let mut m = ModuleFile {
        file: file.to_path_buf(),
        ..Default::default()
    };
    // Inline modules entered: (name, brace depth at which their body closes).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Punct('#') if matches!(toks.get(i + 1), Some((Tok::Punct('['), _))) => {
                let close = matching(&toks, i + 1, '[', ']');
                if is_cfg_test(&toks[i + 2..close]) {
                    i = skip_item(&toks, close + 1);
                } else {
                    i = close + 1;
                }
                continue;
            }
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some((Tok::Ident(name), _)) = toks.get(i + 1) {
                    match toks.get(i + 2) {
                        Some((Tok::Punct(';'), _)) if inline.is_empty() => {
                            m.children.push(name.clone());
                            i += 3;
                            continue;
                        }
                        Some((Tok::Punct('{'), _)) => {
                            inline.push((name.clone(), depth));
                            depth += 1;
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(kw) if kw == "use" => {
                let mut leaves = Vec::new();
                let line = toks[i].1;
                let end = parse_use_tree(&toks, i + 1, &[], &mut leaves, line);
                if inline.is_empty() {
                    m.uses.extend(leaves);
                } else {
                    let ctx: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                    for leaf in leaves {
                        m.paths.push((ctx.clone(), leaf.path, leaf.line));
                    }
                }
                i = end;
                continue;
            }
            Tok::Ident(kw) if kw == "pub" => {
                // A visibility such as `pub(in crate::a)` names a path but depends on nothing.
                if matches!(toks.get(i + 1), Some((Tok::Punct('('), _))) {
                    i = matching(&toks, i + 1, '(', ')') + 1;
                    continue;
                }
            }
            Tok::Ident(first) => {
                let after_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
                let after_dot = i > 0 && toks[i - 1].0 == Tok::Punct('.');
                if !after_sep && !after_dot && !KEYWORDS.contains(&first.as_str()) {
                    let mut path = vec![first.clone()];
                    let mut j = i + 1;
                    while toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep) {
                        match toks.get(j + 1) {
                            Some((Tok::Ident(s), _)) => {
                                path.push(s.clone());
                                j += 2;
                            }
                            _ => break,
                        }
                    }
                    if path.len() >= 2 {
                        let ctx: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                        m.paths.push((ctx, path, toks[i].1));
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(m)
}

/// Index of the token closing the bracket opened at `open`.
fn matching(toks: &[(Tok, usize)], open: usize, o: char, c: char) -> usize {
    let mut depth = 0;
    for (k, (t, _)) in toks.iter().enumerate().skip(open) {
        if *t == Tok::Punct(o) {
            depth += 1;
        } else if *t == Tok::Punct(c) {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    toks.len().saturating_sub(1)
}

/// The index after the item starting at `i` (after its attributes): up to its `;` or the end of
/// its first `{ ... }` body, whichever comes first at its own level.
fn skip_item(toks: &[(Tok, usize)], mut i: usize) -> usize {
    while matches!(toks.get(i), Some((Tok::Punct('#'), _))) {
        i = matching(toks, i + 1, '[', ']') + 1;
    }
    let is_use = matches!(toks.get(i), Some((Tok::Ident(s), _)) if s == "use")
        || matches!(toks.get(i + 1), Some((Tok::Ident(s), _)) if s == "use");
    let mut depth = 0;
    while i < toks.len() {
        match toks[i].0 {
            Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
            Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 && toks[i].0 == Tok::Punct('}') && !is_use {
                    return i + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Parses a `use` tree from `i`, pushing its leaves; returns the index after it.
fn parse_use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    prefix: &[String],
    out: &mut Vec<UseLeaf>,
    line: usize,
) -> usize {
    let mut path = prefix.to_vec();
    if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
        i += 1; // `use ::extern_crate::...`
    }
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::Ident(s)) => {
                if s == "self" && !path.is_empty() {
                    let name = path.last().cloned();
                    i += 1;
                    let (alias, next) = alias(toks, i, name);
                    out.push(UseLeaf {
                        path: path.clone(),
                        name: alias,
                        line,
                    });
                    return next;
                }
                path.push(s.clone());
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                let (alias, next) = alias(toks, i, path.last().cloned());
                out.push(UseLeaf {
                    path,
                    name: alias,
                    line,
                });
                return skip_use_end(toks, next);
            }
            Some(Tok::Punct('*')) => {
                out.push(UseLeaf {
                    path,
                    name: None,
                    line,
                });
                return skip_use_end(toks, i + 1);
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => return skip_use_end(toks, i + 1),
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        _ => i = parse_use_tree(toks, i, &path, out, line),
                    }
                }
            }
            _ => return i,
        }
    }
}

fn alias(toks: &[(Tok, usize)], i: usize, name: Option<String>) -> (Option<String>, usize) {
    if matches!(toks.get(i), Some((Tok::Ident(s), _)) if s == "as") {
        match toks.get(i + 1) {
            Some((Tok::Ident(a), _)) if a != "_" => (Some(a.clone()), i + 2),
            _ => (None, i + 2),
        }
    } else {
        (name, i)
    }
}

/// After a leaf: a `;` ends the item (consumed), a `,` or `}` belongs to the enclosing group.
fn skip_use_end(toks: &[(Tok, usize)], i: usize) -> usize {
    match toks.get(i).map(|t| &t.0) {
        Some(Tok::Punct(';')) => i + 1,
        _ => i,
    }
}

fn display(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

impl Crate {
    fn load(src: &Path) -> Result<Crate, String> {
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(|f| src.join(f))
            .find(|p| p.exists())
            .ok_or_else(|| format!("no lib.rs or main.rs in {}", src.display()))?;
        let mut modules = BTreeMap::new();
        let mut todo = vec![(Vec::<String>::new(), root)];
        while let Some((name, file)) = todo.pop() {
            let parsed = parse_file(&file)?;
            let dir = match file.file_name().and_then(|f| f.to_str()) {
                Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            for child in &parsed.children {
                let flat = dir.join(format!("{child}.rs"));
                let nested = dir.join(child).join("mod.rs");
                let path = if flat.exists() { flat } else { nested };
                if !path.exists() {
                    return Err(format!("module {child} of {} not found", file.display()));
                }
                let mut child_name = name.clone();
                child_name.push(child.clone());
                todo.push((child_name, path));
            }
            modules.insert(name, parsed);
        }
        let mut krate = Crate {
            modules,
            edges: Vec::new(),
        };
        krate.edges = krate.compute_edges(src);
        Ok(krate)
    }

    /// Makes `path`, named in `module` (plus inline modules `ctx`), absolute; `None` when it
    /// leads outside the crate.
    fn absolute(&self, module: &[String], ctx: &[String], path: &[String]) -> Option<Vec<String>> {
        self.absolute_within(module, ctx, path, 0)
    }

    fn absolute_within(
        &self,
        module: &[String],
        ctx: &[String],
        path: &[String],
        hops: usize,
    ) -> Option<Vec<String>> {
        let mut here: Vec<String> = module.iter().chain(ctx).cloned().collect();
        let first = path.first()?;
        match first.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" | "super" => {
                let mut k = 0;
                while k < path.len() && (path[k] == "super" || path[k] == "self") {
                    if path[k] == "super" {
                        here.pop()?;
                    }
                    k += 1;
                }
                here.extend(path[k..].iter().cloned());
                Some(here)
            }
            _ if ctx.is_empty() && hops < 16 => {
                let m = self.modules.get(module)?;
                if m.children.contains(first) {
                    let mut abs = module.to_vec();
                    abs.extend(path.iter().cloned());
                    return Some(abs);
                }
                let leaf = m
                    .uses
                    .iter()
                    .find(|u| u.name.as_deref() == Some(first.as_str()))?;
                let mut abs = self.absolute_within(module, &[], &leaf.path, hops + 1)?;
                abs.extend(path[1..].iter().cloned());
                Some(abs)
            }
            _ => None,
        }
    }

    /// The module an absolute path leads to, following re-exports.
    fn owner(&self, abs: &[String], hops: usize) -> Option<Vec<String>> {
        let mut k = abs.len();
        while !self.modules.contains_key(&abs[..k]) {
            k -= 1;
        }
        let module = abs[..k].to_vec();
        if k < abs.len() && hops < 16 {
            let name = &abs[k];
            if let Some(leaf) = self.modules[&module]
                .uses
                .iter()
                .find(|u| u.name.as_deref() == Some(name.as_str()))
            {
                if let Some(mut next) = self.absolute(&module, &[], &leaf.path) {
                    next.extend(abs[k + 1..].iter().cloned());
                    return self.owner(&next, hops + 1);
                }
            }
        }
        Some(module)
    }

    fn compute_edges(&self, src: &Path) -> Vec<(String, String, String)> {
        let mut seen = BTreeSet::new();
        let mut edges = Vec::new();
        for (name, m) in &self.modules {
            let refs = m
                .uses
                .iter()
                .map(|u| (Vec::new(), u.path.clone(), u.line))
                .chain(m.paths.iter().cloned());
            for (ctx, path, line) in refs {
                let Some(abs) = self.absolute(name, &ctx, &path) else {
                    continue;
                };
                let Some(to) = self.owner(&abs, 0) else {
                    continue;
                };
                if &to == name {
                    continue;
                }
                let (from, to) = (display(name), display(&to));
                if seen.insert((from.clone(), to.clone())) {
                    let file = m
                        .file
                        .strip_prefix(src.parent().unwrap())
                        .unwrap_or(&m.file);
                    let at = format!("{}:{line} `{}`", file.display(), path.join("::"));
                    edges.push((from, to, at));
                }
            }
        }
        edges
    }

    fn graph(&self) -> Graph {
        let mut g: Graph = self
            .modules
            .keys()
            .map(|k| (display(k), BTreeSet::new()))
            .collect();
        for (from, to, _) in &self.edges {
            g.entry(from.clone()).or_default().insert(to.clone());
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
        }
        g
    }

    #[test]
    fn a_circle_between_top_level_modules_is_seen_though_their_files_form_none() {
        let g = graph(&[
            ("node", "sentinel::replies"),
            ("sentinel::discovery", "node"),
            ("sentinel::discovery", "sentinel::replies"),
            ("crate", "node"),
            ("node", "crate"),
        ]);
        assert!(circles(&g).iter().all(|c| c.contains(&"crate".to_string())));
        assert_eq!(circles(&top_level(&g)), vec![vec!["node", "sentinel"]]);
        let fixed = graph(&[
            ("sentinel::discovery", "node"),
            ("sentinel::discovery", "sentinel::replies"),
        ]);
        assert!(circles(&top_level(&fixed)).is_empty());
    }

    #[test]
    fn allowed_subtrees_are_whole_path_segments() {
        assert!(within_any("host", &["host"]));
        assert!(within_any("host::doctor", &["host"]));
        assert!(!within_any("hosts", &["host"]));
        assert!(!within_any("client::host", &["host"]));
    }

    #[test]
    fn a_chain_has_no_circle() {
        let g = graph(&[("a", "b"), ("b", "c"), ("a", "c")]);
        assert!(circles(&g).is_empty());
    }

    #[test]
    fn a_cycle_is_one_circle_and_its_tail_is_left_out() {
        let g = graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "e")]);
        assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn two_separate_cycles_are_two_circles() {
        let g = graph(&[("a", "b"), ("b", "a"), ("x", "y"), ("y", "x"), ("b", "x")]);
        assert_eq!(circles(&g), vec![vec!["a", "b"], vec!["x", "y"]]);
    }

    fn write(dir: &Path, files: &[(&str, &str)]) {
        for (path, text) in files {
            let p = dir.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    fn crate_circles(name: &str, files: &[(&str, &str)]) -> Vec<Vec<String>> {
        let dir = std::env::temp_dir().join(format!("xtask-circles-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write(&dir, files);
        let krate = Crate::load(&dir).unwrap();
        let found = circles(&krate.graph());
        std::fs::remove_dir_all(&dir).unwrap();
        found
    }

    #[test]
    fn a_child_naming_its_parent_that_uses_it_is_a_circle() {
        let found = crate_circles(
            "parent",
            &[
                ("lib.rs", "mod a;\n"),
                ("a/mod.rs", "mod b;\npub struct P;\nfn f() { b::g(); }\n"),
                ("a/b.rs", "pub fn g() { let _ = super::P; }\n"),
            ],
        );
        assert_eq!(found, vec![vec!["a", "a::b"]]);
    }

    #[test]
    fn test_modules_and_reexports_make_no_circle() {
        let found = crate_circles(
            "tests",
            &[
                (
                    "lib.rs",
                    "mod a;\nmod error;\npub use error::Error;\n#[cfg(test)]\nmod tests;\n",
                ),
                (
                    "a.rs",
                    "use crate::Error; // crate::tests::x\nfn f() -> Error { let s = \"crate::tests\"; let _ = s; Error }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::tests::helper;\n}\n",
                ),
                ("error.rs", "pub struct Error;\n"),
                ("tests.rs", "use super::*;\nuse crate::a;\npub fn helper() {}\n"),
            ],
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn use_groups_and_aliases_are_followed() {
        let found = crate_circles(
            "groups",
            &[
                ("lib.rs", "mod a;\nmod b;\n"),
                (
                    "a.rs",
                    "use crate::{b::{self as other, X}};\npub struct Y;\n",
                ),
                ("b.rs", "pub struct X;\nfn f() { let _ = crate::a::Y; }\n"),
            ],
        );
        assert_eq!(found, vec![vec!["a", "b"]]);
    }
}
