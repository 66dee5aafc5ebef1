#!/usr/bin/env python3
"""Fail when a workspace member declares a dependency its code never names.

cargo-machete's check without installing it: a dependency `foo-bar` counts as used when a
Rust file of the crate says `foo_bar` as a path (`foo_bar::`, `use foo_bar`, `extern crate
foo_bar`, `foo_bar!`). A `[dependencies]` entry must be used by the library or binary code
(`src/`, `build.rs`); one only named by tests, examples or benches belongs in
`[dev-dependencies]`, which may be used anywhere. `ALLOWED` lists dependencies that are
used without being named (with the reason). Exit status 1 lists every finding.

    python3 scripts/unused-deps.py
"""
import glob
import os
import re
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (crate, dependency): why it is there although no code names it.
ALLOWED = {
}


def rust_text(crate_dir, subdirs):
    text = []
    for sub in subdirs:
        p = os.path.join(crate_dir, sub)
        if os.path.isfile(p):
            text.append(open(p).read())
        for f in glob.glob(os.path.join(p, "**", "*.rs"), recursive=True):
            text.append(open(f).read())
    # Comments do not use a crate (a `// the upper half;` is not `half`).
    return re.sub(r"//[^\n]*", "", "\n".join(text))


def named(text, dep):
    ident = re.escape(dep.replace("-", "_"))
    return re.search(rf"(?<![A-Za-z0-9_]){ident}\s*(::|!|;|\s+as\b|\s*\{{)|extern\s+crate\s+{ident}\b"
                     rf"|use\s+{ident}\b", text) is not None


def main():
    ws = tomllib.load(open(os.path.join(ROOT, "Cargo.toml"), "rb"))
    findings = []
    checked = 0
    for member in ws["workspace"]["members"]:
        d = os.path.join(ROOT, member)
        man = tomllib.load(open(os.path.join(d, "Cargo.toml"), "rb"))
        name = man["package"]["name"]
        lib = rust_text(d, ["src", "build.rs"])
        everything = lib + "\n" + rust_text(d, ["tests", "examples", "benches"])
        for dep, spec in man.get("dependencies", {}).items():
            checked += 1
            real = spec.get("package", dep) if isinstance(spec, dict) else dep
            if (name, dep) in ALLOWED or named(lib, dep) or named(lib, real):
                continue
            where = "only tests, examples or benches name it (a dev-dependency)" \
                if named(everything, dep) else "no code names it"
            findings.append(f"{name}: [dependencies] {dep}: {where}")
        for dep in man.get("dev-dependencies", {}):
            checked += 1
            if (name, dep) in ALLOWED or named(everything, dep):
                continue
            findings.append(f"{name}: [dev-dependencies] {dep}: no code names it")
    for f in findings:
        print(f)
    print(f"unused-deps: {checked} dependencies of {len(ws['workspace']['members'])} crates checked, "
          f"{len(findings)} unused")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
