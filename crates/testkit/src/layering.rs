//! A crate's module layering, read from its source text.
//!
//! Edges come from the source (comments stripped): every `crate::NAME` and every
//! `crate::{a, b::c, ...}` group gives an edge from the module of the file (a top-level
//! module: `src/NAME.rs` or anything under `src/NAME/`) to `NAME`. `NAME` must be a module
//! declared in `lib.rs`: code imports by module path (`crate::manifest::Manifest`), never
//! through a re-export of the root (`crate::Manifest`), so every edge is visible here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most lines a source file may have.
pub const MAX_LINES: usize = 1_000;

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without comments (`//` to the end of the line, `/* */`); string and char
/// literals are kept as they are, so a `//` inside one does not cut the line.
pub fn strip_comments(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && next == Some('*') {
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
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            out.extend(&c[i..=j]);
            i = j + 1;
            while i < c.len() {
                if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
                    out.extend(&c[i..=i + hashes]);
                    i += hashes + 1;
                    break;
                }
                out.push(c[i]);
                i += 1;
            }
        } else if c[i] == '"' {
            out.push('"');
            i += 1;
            while i < c.len() {
                out.push(c[i]);
                if c[i] == '\\' {
                    if let Some(&e) = c.get(i + 1) {
                        out.push(e);
                    }
                    i += 2;
                    continue;
                }
                i += 1;
                if c[i - 1] == '"' {
                    break;
                }
            }
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\''), else a lifetime ('a).
            let len = if next == Some('\\') {
                (i + 3..c.len().min(i + 12))
                    .find(|&k| c[k] == '\'')
                    .map(|k| k + 1 - i)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            let len = len.unwrap_or(1);
            out.extend(&c[i..i + len]);
            i += len;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The names a `crate::` path starting at `rest` brings in: one name, or the first name of
/// each item of a `{...}` group.
pub fn crate_names(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let rest = rest.trim_start();
    if !rest.starts_with('{') {
        return vec![ident(rest)];
    }
    let mut names = Vec::new();
    let mut depth = 0;
    let mut item = String::new();
    for ch in rest[1..].chars() {
        match ch {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(ident(&item));
                item.clear();
                continue;
            }
            _ => {}
        }
        item.push(ch);
    }
    names.push(ident(&item));
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The top-level module a file belongs to (`lib` for the crate root).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("a file under src/");
    let first = rel
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The modules `lib.rs` declares.
pub fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(|n| n.trim().to_string())
        })
        .collect()
}

/// A crate's module graph.
pub struct Graph {
    /// Top-level module -> the modules it names.
    pub edges: BTreeMap<String, BTreeSet<String>>,
    /// `crate::X` where `X` is not a module: (file, X).
    pub not_modules: Vec<(String, String)>,
}

/// The module graph of the crate whose sources are under `src` (with `lib.rs`, or `main.rs`
/// for a binary crate).
pub fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let root = if src.join("lib.rs").exists() {
        src.join("lib.rs")
    } else {
        src.join("main.rs")
    };
    let lib = strip_comments(&std::fs::read_to_string(&root).expect("lib.rs or main.rs"));
    let modules = declared_modules(&lib);
    let mut g = Graph {
        edges: modules
            .iter()
            .map(|m| (m.clone(), BTreeSet::new()))
            .collect(),
        not_modules: Vec::new(),
    };
    for f in &files {
        let from = module_of(src, f);
        let text = strip_comments(&std::fs::read_to_string(f).expect("a source file"));
        for (at, _) in text.match_indices("crate::") {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            for name in crate_names(&text[at + "crate::".len()..]) {
                if !modules.contains(&name) {
                    let rel = f.strip_prefix(src).unwrap_or(f).display().to_string();
                    g.not_modules.push((rel, name));
                } else if name != from {
                    g.edges.entry(from.clone()).or_default().insert(name);
                }
            }
        }
    }
    g
}

/// A cycle of `edges`, if there is one (as a path whose last node is its first).
pub fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        marks.insert(n.to_string(), Mark::Open);
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match marks.get(m.as_str()).copied().unwrap_or(Mark::New) {
                Mark::Open => {
                    let start = path.iter().position(|p| p == m).unwrap_or(0);
                    let mut cycle = path[start..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(m, edges, marks, path) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        marks.insert(n.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in edges.keys() {
        if marks.get(n.as_str()).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(n, edges, &mut marks, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The module graph of `src`, checked: every `crate::X` names a module and no import cycle
/// exists (panics naming the offence). Prints the edges. Returns the graph.
pub fn check_acyclic(src: &Path) -> Graph {
    let g = graph(src);
    for (from, to) in &g.edges {
        println!(
            "{from} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    assert!(
        g.not_modules.is_empty(),
        "import by module path (crate::manifest::Manifest, not crate::Manifest): {:?}",
        g.not_modules
    );
    if let Some(cycle) = find_cycle(&g.edges) {
        panic!("import cycle between modules: {}", cycle.join(" -> "));
    }
    g
}

/// Every source file under `src` has at most [`MAX_LINES`] lines (panics listing those over).
pub fn check_file_sizes(src: &Path) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let over: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f)
                .expect("a source file")
                .lines()
                .count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(over.is_empty(), "files over {MAX_LINES} lines: {over:?}");
}

/// The crate root under `src` (`lib.rs`) only declares modules (`mod x;`, `pub mod x;`) and
/// re-exports (`pub use ...;`); crate-level attributes (`#![...]`) aside. Panics listing
/// anything else.
pub fn check_root_only_declares(src: &Path) {
    let lib = strip_comments(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let lib: String = lib
        .lines()
        .filter(|l| !l.trim_start().starts_with("#!["))
        .collect::<Vec<_>>()
        .join("\n");
    // Statements end with `;` (a `pub use a::{...};` group spans lines).
    let bad: Vec<String> = lib
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter(|s| {
            !(s.starts_with("pub use ")
                || ((s.starts_with("mod ") || s.starts_with("pub mod ")) && !s.contains('{')))
        })
        .map(str::to_string)
        .collect();
    assert!(bad.is_empty(), "lib.rs defines or imports: {bad:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_see_what_they_should() {
        // Comments go, strings stay.
        assert_eq!(
            strip_comments("a // crate::x\nb /* crate::y */ \"// crate::z\" '\"' c"),
            "a \nb  \"// crate::z\" '\"' c"
        );
        assert_eq!(crate_names("manifest::Manifest;"), vec!["manifest"]);
        assert_eq!(
            crate_names("{a, b::{c, d}, self, e::f}"),
            vec!["a", "b", "e"]
        );
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        edges.entry("a".into()).or_default().insert("b".into());
        edges.entry("b".into()).or_default().insert("c".into());
        assert_eq!(find_cycle(&edges), None);
        edges.entry("c".into()).or_default().insert("a".into());
        assert_eq!(
            find_cycle(&edges),
            Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
        );
    }
}
