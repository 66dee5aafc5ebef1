//! The server crate's shape (issue "One request path"): the modules under `src/` import each
//! other without a cycle, code names other modules' items by module path (`crate::wire::doc_id`,
//! not a re-export from the crate root), and no source file is over 1,000 lines.
//!
//! Edges are read from the text: every `crate::NAME` outside comments, and every name at the
//! top of a `use crate::{...}` group. A module is a file or directory directly under `src/`;
//! `lib.rs` (the crate root: `mod` lines, re-exports and `serve`) is not one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text without `//` comments (doc comments included) and string literals' contents
/// left as they are (no `crate::` appears in this crate's strings).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn words_after(s: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find(prefix) {
        let tail = &rest[i + prefix.len()..];
        let w: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !w.is_empty() {
            out.push(w);
        }
        rest = tail;
    }
    out
}

/// `module -> modules it names`, and every file's line count.
fn graph(src: &Path) -> (BTreeMap<String, BTreeSet<String>>, Vec<(PathBuf, usize)>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut sizes = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        sizes.push((f.clone(), text.lines().count()));
        let rel = f.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" {
            continue;
        }
        let c = code(&text);
        let mut names = words_after(&c, "crate::");
        // `use crate::{a, b::c}`: the first word of each item of the group.
        let mut rest = c.as_str();
        while let Some(i) = rest.find("crate::{") {
            let tail = &rest[i + "crate::{".len()..];
            let end = tail.find('}').unwrap_or(tail.len());
            for item in tail[..end].split(',') {
                let w: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !w.is_empty() {
                    names.push(w);
                }
            }
            rest = tail;
        }
        let e = edges.entry(top.clone()).or_default();
        for n in names {
            if n != top {
                e.insert(n);
            }
        }
    }
    (edges, sizes)
}

/// A cycle through `from`, if any (depth-first search).
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let at = path.iter().position(|p| p == n).unwrap_or(0);
                let mut c = path[at..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn modules_form_no_cycle_and_files_stay_under_1000_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (edges, sizes) = graph(&src);
    let modules: BTreeSet<String> = edges.keys().cloned().collect();
    assert!(
        modules.len() >= 20,
        "expected the server's modules, found {modules:?}"
    );
    // Every `crate::X` names a module: no item reached through the crate root.
    for (m, names) in &edges {
        for n in names {
            assert!(
                modules.contains(n),
                "{m} names crate::{n}, which is not a module: import it by its module's path"
            );
        }
    }
    if let Some(c) = cycle(&edges) {
        panic!("import cycle between modules: {}", c.join(" -> "));
    }
    for (f, n) in &sizes {
        assert!(*n <= 1000, "{} has {n} lines (at most 1,000)", f.display());
    }
    // The request path goes one way: routes -> query pipeline -> state -> backend.
    for route in ["native", "es", "reads", "writes"] {
        assert!(edges[route].contains("query"), "{route} should use query");
        for other in ["native", "es", "reads", "writes", "admin", "observe"] {
            assert!(
                other == route || !edges[route].contains(other),
                "route module {route} imports route module {other}"
            );
        }
    }
    assert!(!edges["query"].contains("native") && !edges["query"].contains("es"));
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.entry("a".into()).or_default().insert("b".into());
    e.entry("b".into()).or_default().insert("c".into());
    e.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&e).unwrap(), vec!["a", "b", "c", "a"]);
    e.get_mut("c").unwrap().clear();
    assert!(cycle(&e).is_none());
}
