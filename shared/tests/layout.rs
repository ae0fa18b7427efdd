//! The shape of the code base, checked so it stays true: the library's dependency rule
//! (`shared/src/lib.rs`), the size limits on files and functions, and the README's file map.
//! Test code (files under `tests/`, `tests.rs` modules, a file's `#[cfg(test)] mod tests`) is
//! left out of the size limits and the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each top-level module of `shared/src` and the modules it may import. Foundations import
/// only each other; the model only foundations; the store the model; use-cases and read
/// models the store; the edge (HTTP, configuration, the Lambda protocol) anything below it.
const RULE: &[(&str, &[&str])] = &[
    ("domain", &[]),
    ("encoding", &["domain"]),
    ("keys", &["domain", "encoding"]),
    ("cursor", &[]),
    ("telemetry", &[]),
    ("model", &["domain", "encoding", "keys"]),
    (
        "store",
        &["cursor", "domain", "encoding", "keys", "model", "telemetry"],
    ),
    (
        "read",
        &["cursor", "domain", "encoding", "keys", "model", "store"],
    ),
    (
        "indexer",
        &["cursor", "domain", "keys", "model", "store", "telemetry"],
    ),
    (
        "ops",
        &["domain", "indexer", "keys", "model", "read", "store"],
    ),
    ("auth", &["domain", "telemetry"]),
    ("authorizer", &["auth", "domain", "telemetry"]),
    ("config", &["cursor", "indexer", "store"]),
    ("usage_keys", &["authorizer", "domain"]),
    (
        "token_trigger",
        &["auth", "config", "domain", "store", "telemetry"],
    ),
    (
        "runtime",
        &["config", "indexer", "model", "store", "telemetry"],
    ),
    (
        "http",
        &[
            "auth",
            "config",
            "cursor",
            "domain",
            "encoding",
            "keys",
            "model",
            "read",
            "store",
            "telemetry",
            "usage_keys",
        ],
    ),
];

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 80;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// Every `.rs` file below `dir`, but test files and build output.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if path.is_dir() {
            if !matches!(name.as_str(), "tests" | "target" | "node_modules")
                && !name.starts_with('.')
            {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// A file's text without its `#[cfg(test)] mod tests` (which closes the file by convention).
fn non_test(text: &str) -> &str {
    let lines: Vec<&str> = text.lines().collect();
    for (i, pair) in lines.windows(2).enumerate() {
        let opens_tests = pair[1].trim_start().starts_with("mod tests")
            || pair[1].trim_start().starts_with("pub(crate) mod tests");
        if pair[0].trim() == "#[cfg(test)]" && opens_tests {
            let at: usize = lines[..i].iter().map(|l| l.len() + 1).sum();
            return &text[..at.min(text.len())];
        }
    }
    text
}

/// The top-level modules a file's code (not its comments) names as `crate::x`.
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&name) {
                out.insert(name);
            }
            rest = after;
        }
    }
    out
}

#[test]
fn the_library_imports_only_down_its_layers() {
    let src = root().join("shared/src");
    let modules: BTreeSet<String> = fs::read_dir(&src)
        .expect("shared/src")
        .flatten()
        .map(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .filter(|m| m != "lib")
        .collect();
    let rule: BTreeMap<&str, &[&str]> = RULE.iter().copied().collect();
    let placed: BTreeSet<String> = rule.keys().map(|m| m.to_string()).collect();
    assert_eq!(
        modules, placed,
        "every top-level module has its place in RULE"
    );
    let mut wrong = Vec::new();
    for module in &modules {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            sources(&dir, &mut files);
        } else {
            files.push(src.join(format!("{module}.rs")));
        }
        for file in files {
            let text = fs::read_to_string(&file).expect("a source file");
            for used in imports(non_test(&text), &modules) {
                if used != *module && !rule[module.as_str()].contains(&used.as_str()) {
                    wrong.push(format!("{} imports {used}", file.display()));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the rule:\n{}",
        wrong.join("\n")
    );
}

/// The rule's scan reads `crate::module` paths: an import it cannot read that way (a grouped
/// `crate::{a, b}`, or a module reached through `super::super`) is refused rather than missed.
#[test]
fn every_import_of_another_module_names_it() {
    let mut files = Vec::new();
    sources(&root().join("shared/src"), &mut files);
    let mut unreadable = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("a source file");
        for line in non_test(&text).lines() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("crate::{") || code.contains("super::super") {
                unreadable.push(format!("{}: {}", file.display(), line.trim()));
            }
        }
    }
    assert!(
        unreadable.is_empty(),
        "imports the rule cannot read:\n{}",
        unreadable.join("\n")
    );
}

/// Functions of `text` longer than `max` lines, from `fn` to the brace that closes it at the
/// same indentation.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let code = line.trim_start();
        let head = [
            "pub ",
            "pub(crate) ",
            "pub(super) ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(code, |c, p| c.strip_prefix(p).unwrap_or(c));
        let head = head.strip_prefix("async ").unwrap_or(head);
        let Some(name) = head.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let close = " ".repeat(indent) + "}";
        let end = lines[i + 1..]
            .iter()
            .position(|l| l.trim_end() == close)
            .map_or(0, |p| p + 1);
        if end + 1 > max {
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            out.push((name, end + 1));
        }
    }
    out
}

#[test]
fn no_source_file_or_function_is_too_long() {
    let mut files = Vec::new();
    for dir in ["shared", "functions", "local", "gridctl", "bench"] {
        sources(&root().join(dir), &mut files);
    }
    let mut found = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("a source file");
        let code = non_test(&text);
        let lines = code.lines().count();
        if lines > MAX_FILE_LINES {
            found.push(format!("{}: {lines} lines", file.display()));
        }
        for (name, n) in long_functions(code, MAX_FN_LINES) {
            found.push(format!("{}: fn {name} is {n} lines", file.display()));
        }
    }
    assert!(found.is_empty(), "over the limits:\n{}", found.join("\n"));
}

/// The paths in the README's file map (the first column of the table under "Where things
/// live").
fn map_paths(readme: &str) -> Vec<String> {
    let section = readme
        .split("## Where things live")
        .nth(1)
        .expect("the README has a section 'Where things live'");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split('`').nth(1).map(str::to_string))
        .collect()
}

#[test]
fn the_readme_file_map_matches_the_tree() {
    let root = root();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let paths = map_paths(&readme);
    let missing: Vec<&String> = paths.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty(),
        "mapped but not in the tree: {missing:?}"
    );
    let mapped: BTreeSet<&str> = paths.iter().map(|p| p.trim_end_matches('/')).collect();
    // Every crate, every top-level module of the library, and every top-level folder.
    let mut wanted = Vec::new();
    for dir in ["functions", "shared/src"] {
        for entry in fs::read_dir(root.join(dir)).expect("a folder").flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name != "lib.rs" {
                wanted.push(format!("{dir}/{name}"));
            }
        }
    }
    for entry in fs::read_dir(&root).expect("the root").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let tracked = !name.starts_with('.') && !matches!(name.as_str(), "target" | "node_modules");
        if entry.path().is_dir() && tracked {
            wanted.push(name);
        }
    }
    let unmapped: Vec<&String> = wanted
        .iter()
        .filter(|w| !mapped.contains(w.as_str()))
        .collect();
    assert!(
        unmapped.is_empty(),
        "in the tree but not in the README's map: {unmapped:?}"
    );
}
