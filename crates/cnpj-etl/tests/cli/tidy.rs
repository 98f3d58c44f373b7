//! The house rules that a reader of the source can check, kept by a test (as rust-analyzer's
//! `tidy` does) over every `.rs` file under `crates/`:
//!
//! - every file opens with a `//!` line saying what it is for;
//! - no circle between the files of one crate: a module file that names another (`use
//!   crate::a::…`, `crate::a::…`, `super::a::…`) depends on it, and these dependencies form no
//!   cycle (the crate root, `lib.rs` or `main.rs`, holds every module and is left out);
//! - no function over [`MAX_LINES`] lines, but those listed in `long-functions.txt` beside this
//!   file, a list that only shrinks: a long function not in it fails, and so does a listed one
//!   that is no longer long. A function's lines run from its `fn` line to its closing brace at
//!   the same indentation (the code is rustfmt'd).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::root;

/// The longest a function may be, in lines, unless it is listed.
const MAX_LINES: usize = 80;

/// The list of the functions allowed to be longer, as `<path> <function>` lines.
const LONG_FUNCTIONS: &str = "crates/cnpj-etl/tests/cli/long-functions.txt";

/// Every `.rs` file under `crates/`, as (path relative to the repository, text), in path order.
fn sources() -> Vec<(String, String)> {
    let root = root();
    let mut out = Vec::new();
    let mut pending = vec![root.join("crates")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() && !name.starts_with('.') && name != "target" {
                pending.push(path);
            } else if name.ends_with(".rs") {
                let relative = path.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
                out.push((relative, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_file_says_what_it_is_for() {
    let missing: Vec<String> =
        sources().into_iter().filter(|(_, text)| !text.starts_with("//!")).map(|(path, _)| path).collect();
    assert!(missing.is_empty(), "these files do not open with a `//!` line saying what they are for:\n{missing:#?}");
}

#[test]
fn no_circle_between_the_files_of_a_crate() {
    let mut circles = Vec::new();
    for (dir, files) in module_dirs(&sources()) {
        let modules: BTreeSet<&str> = files.keys().map(String::as_str).collect();
        let graph: BTreeMap<&str, BTreeSet<&str>> = files
            .iter()
            .map(|(module, text)| {
                let named = named_modules(text).into_iter().filter_map(|m| modules.get(m.as_str()).copied());
                (module.as_str(), named.filter(|m| m != module).collect())
            })
            .collect();
        if let Some(circle) = circle(&graph) {
            circles.push(format!("{dir}: {}", circle.join(" → ")));
        }
    }
    assert!(
        circles.is_empty(),
        "files of a crate that depend on each other in a circle (move what they share to the file that owns \
         it):\n{circles:#?}"
    );
}

#[test]
fn long_functions_are_the_listed_ones() {
    let listed_text = std::fs::read_to_string(root().join(LONG_FUNCTIONS)).unwrap();
    let listed: BTreeSet<(String, String)> = listed_text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (path, name) = l.split_once(' ').unwrap_or_else(|| panic!("{LONG_FUNCTIONS}: not `<path> <fn>`: {l}"));
            (path.to_owned(), name.trim().to_owned())
        })
        .collect();
    let mut long = BTreeSet::new();
    let mut problems = Vec::new();
    for (path, text) in sources() {
        for (name, line, lines) in long_functions(&text) {
            let key = (path.clone(), name);
            if !listed.contains(&key) {
                problems.push(format!(
                    "{path}:{line}: `fn {}` has {lines} lines (over {MAX_LINES}): give its steps names (a row \
                     generator whose length is its list of fields says so in a comment, and is listed in \
                     {LONG_FUNCTIONS})",
                    key.1
                ));
            }
            long.insert(key);
        }
    }
    for (path, name) in listed.difference(&long) {
        problems.push(format!(
            "{path}: `fn {name}` is no longer over {MAX_LINES} lines (or is gone): take it off {LONG_FUNCTIONS}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The module files of each folder that holds a crate root or modules, by folder: the files of
/// `src/`, `tests/<binary>/`, `benches/`, keyed by module name (`checks` for `checks.rs`,
/// `common` for `common/mod.rs`). Crate roots (`lib.rs`, `main.rs`) and build scripts are left
/// out: a root holds every module.
fn module_dirs(sources: &[(String, String)]) -> BTreeMap<String, BTreeMap<String, &str>> {
    let mut out: BTreeMap<String, BTreeMap<String, &str>> = BTreeMap::new();
    for (path, text) in sources {
        let path = Path::new(path);
        let stem = path.file_stem().unwrap().to_string_lossy();
        let (dir, module) = match stem.as_ref() {
            "lib" | "main" | "build" => continue,
            "mod" => {
                let folder = path.parent().unwrap();
                (folder.parent().unwrap(), folder.file_name().unwrap().to_string_lossy().into_owned())
            }
            _ => (path.parent().unwrap(), stem.into_owned()),
        };
        out.entry(dir.to_string_lossy().into_owned()).or_default().insert(module, text.as_str());
    }
    out
}

/// The first names of the paths a file writes from its crate's root: `crate::a::…`,
/// `$crate::a::…`, `crate::{a::…, b}` and `super::a::…` outside inline modules (where `super` is
/// the file itself) give `a` (and `b`). Comments and literals are left out.
fn named_modules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // The indentation of each inline module (`mod tests {`) the line is in.
    let mut inline: Vec<usize> = Vec::new();
    for line in code_only(text).lines() {
        let indent = line.len() - line.trim_start().len();
        let code = line.trim();
        if inline.last() == Some(&indent) && code == "}" {
            inline.pop();
            continue;
        }
        let declared = ["mod ", "pub mod ", "pub(crate) mod "].iter().any(|m| code.starts_with(m));
        if declared && code.ends_with('{') {
            inline.push(indent);
        }
        out.extend(paths_after(code, "crate::"));
        if inline.is_empty() {
            out.extend(paths_after(code, "super::"));
        }
    }
    out
}

/// `text` with its comments and the insides of its string and character literals removed, its
/// lines kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let ident = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    // Skips to `end` (included), keeping the newlines on the way.
    let skip_to = |out: &mut String, from: usize, end: &str| -> usize {
        let end: Vec<char> = end.chars().collect();
        let mut j = from;
        while j < chars.len() && !chars[j..].starts_with(&end) {
            if chars[j] == '\\' && end == ['"'] {
                j += 1;
            }
            if chars.get(j) == Some(&'\n') {
                out.push('\n');
            }
            j += 1;
        }
        j + end.len()
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i = skip_to(&mut out, i + 2, "*/");
        } else if c == 'r'
            && !ident(i.checked_sub(1).and_then(|p| chars.get(p)).filter(|p| **p != 'b'))
            && matches!(next, Some('"' | '#'))
        {
            // A raw string: `r"…"`, `r#"…"#`, `br"…"`.
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push_str("\"\"");
            i = skip_to(&mut out, i + 2 + hashes, &format!("\"{}", "#".repeat(hashes)));
        } else if c == '"' {
            out.push_str("\"\"");
            i = skip_to(&mut out, i + 1, "\"");
        } else if c == '\'' && next == Some('\\') {
            out.push_str("' '");
            i = skip_to(&mut out, i + 3, "'");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The first segment of each path that starts with `prefix` in `code` (a group `{a, b::c}` gives
/// `a` and `b`).
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = code[at + prefix.len()..].trim_start();
        match rest.strip_prefix('{') {
            Some(group) => {
                // The group's items at its own depth; a group cut by the line's end gives what it has.
                let mut depth = 0;
                let mut item_start = true;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if item_start && !c.is_whitespace() => {
                            item_start = false;
                            out.extend(identifier(&group[i..]));
                        }
                        _ => {}
                    }
                }
            }
            None => out.extend(identifier(rest)),
        }
    }
    out
}

/// The identifier `text` starts with, if any.
fn identifier(text: &str) -> Option<String> {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    (end > 0).then(|| text[..end].to_owned())
}

/// A cycle of `graph`, as its nodes from one back to itself, if there is one.
fn circle<'a>(graph: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<Vec<&'a str>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        node: &'a str,
        graph: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        marks: &mut BTreeMap<&'a str, Mark>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| *n == node).unwrap();
                let mut circle = path[from..].to_vec();
                circle.push(node);
                return Some(circle);
            }
            None => {}
        }
        marks.insert(node, Mark::Open);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, marks, path) {
                return Some(circle);
            }
        }
        path.pop();
        marks.insert(node, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph.keys().find_map(|node| visit(node, graph, &mut marks, &mut Vec::new()))
}

/// The functions of `text` over [`MAX_LINES`] lines: (name, line of their `fn`, lines).
fn long_functions(text: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(text);
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some((indent, name)) = fn_line(line) else { continue };
        // The signature ends at the first line that ends with `{` (a body), `;` (a declaration)
        // or `}` (a body on one line).
        let Some(open) = (start..lines.len()).find(|&i| lines[i].trim_end().ends_with(['{', ';', '}'])) else {
            continue;
        };
        let opened = lines[open].trim_end();
        if opened.ends_with(';') || opened.ends_with('}') {
            continue;
        }
        let close = format!("{}}}", &line[..indent]);
        let Some(end) = (open + 1..lines.len()).find(|&i| lines[i].trim_end() == close) else { continue };
        if end - start + 1 > MAX_LINES {
            out.push((name, start + 1, end - start + 1));
        }
    }
    out
}

/// The indentation and name of a line that starts a function (`pub(crate) async fn name(`).
fn fn_line(line: &str) -> Option<(usize, String)> {
    let indent = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    for qualifier in ["pub(crate) ", "pub(super) ", "pub ", "default ", "const ", "async ", "unsafe "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest);
    }
    if let Some(abi) = rest.strip_prefix("extern \"") {
        rest = abi.split_once("\" ")?.1;
    }
    let name = identifier(rest.strip_prefix("fn ")?)?;
    Some((indent, name))
}

/// The checks' own parsers, on the forms they meet.
mod parsers {
    use super::*;

    fn check_paths(code: &str, prefix: &str, expected: &[&str]) {
        assert_eq!(paths_after(code, prefix), expected, "{code}");
    }

    #[test]
    fn paths_name_their_first_segment() {
        check_paths("use crate::report::{Anomaly, BuildReport};", "crate::", &["report"]);
        check_paths("use crate::{LoadError, db};", "crate::", &["LoadError", "db"]);
        check_paths("use crate::{a::{B, C}, d::E};", "crate::", &["a", "d"]);
        check_paths("$(crate::runs::Codec::encode(&self.$field, out);)*", "crate::", &["runs"]);
        check_paths("let x = cnpj_index::crate_like::y; pub(crate) fn f()", "crate::", &[]);
        check_paths("use super::*;", "super::", &[]);
        check_paths("super::super::x", "super::", &["super"]);
    }

    #[test]
    fn super_in_an_inline_module_is_its_own_file() {
        let text = "use super::report;\n\n#[cfg(test)]\nmod tests {\n    use super::page;\n    use crate::guard;\n}\n\
                    fn f() {\n    super::checks::g();\n}\n";
        assert_eq!(named_modules(text), ["report", "guard", "checks"]);
    }

    #[test]
    fn literals_and_comments_name_nothing() {
        let text = "let s = \"crate::a \\\"quoted\\\" \\\n  crate::b\"; // crate::c\nlet r = r#\"crate::d \"e\"\"#; \
                    let q = '\"';\n/* crate::f */ crate::g::h();\n";
        assert_eq!(named_modules(text), ["g"]);
        assert_eq!(code_only(text).lines().count(), text.lines().count());
    }

    #[test]
    fn a_circle_is_found_and_named() {
        let graph = |edges: &[(&'static str, &'static str)]| {
            let mut g: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
            for (a, b) in edges {
                g.entry(a).or_default().insert(b);
                g.entry(b).or_default();
            }
            g
        };
        assert_eq!(circle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
        assert_eq!(circle(&graph(&[("a", "b"), ("b", "c"), ("c", "b")])), Some(vec!["b", "c", "b"]));
    }

    #[test]
    fn a_function_runs_to_its_closing_brace() {
        let body = |n: usize| "        x();\n".repeat(n);
        let text = format!(
            "pub(crate) fn short() {{\n{}}}\n\nimpl A {{\n    async fn long(\n        &self,\n    ) -> u8\n    where\n        \
             T: B,\n    {{\n{}    }}\n\n    fn declared(&self);\n    fn one() {{ 1 }}\n}}\n",
            body(10),
            body(MAX_LINES)
        );
        assert_eq!(long_functions(&text), [("long".to_owned(), 15, MAX_LINES + 7)]);
    }

    #[test]
    fn crate_roots_and_build_scripts_are_no_modules() {
        let sources: Vec<(String, String)> = [
            "crates/a/src/lib.rs",
            "crates/a/src/b.rs",
            "crates/a/build.rs",
            "crates/a/benches/common/mod.rs",
            "crates/a/tests/t/main.rs",
            "crates/a/tests/t/c.rs",
        ]
        .iter()
        .map(|p| (p.to_string(), String::new()))
        .collect();
        let dirs = module_dirs(&sources);
        let names: Vec<(&str, Vec<&str>)> =
            dirs.iter().map(|(d, m)| (d.as_str(), m.keys().map(String::as_str).collect())).collect();
        assert_eq!(
            names,
            [("crates/a/benches", vec!["common"]), ("crates/a/src", vec!["b"]), ("crates/a/tests/t", vec!["c"])]
        );
    }
}
