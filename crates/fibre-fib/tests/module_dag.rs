//! The layering of fibre-fib's modules (the crate documentation states it): every `crate::`
//! path outside comments and unit-test modules is an import edge; the edges must form a DAG,
//! and each module may import only from its own layer and the layers below it. Prints the
//! graph when run with `--nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers, lowest first, as the crate documentation lists them.
const LAYERS: [&[&str]; 3] = [
    &["types", "encap", "ids", "prefix", "flow", "hash", "mphash"],
    &[
        "memo",
        "addr",
        "link",
        "resilient",
        "dst",
        "expiry",
        "route",
        "fibtable",
        "rule",
        "srcsel",
        "ioam",
        "seg6_hmac",
    ],
    &[
        "nexthop",
        "lookup",
        "route4",
        "route6",
        "exception",
        "input",
        "input_batch",
        "get",
        "sync",
        "conf",
        "neigh",
        "local",
        "build",
        "notify",
        "gc",
    ],
];

/// The crate root's own items (`Fib`, `Settings`, ...), as an import names them: the top layer
/// holds `Fib`'s methods, and only it may name them.
const ROOT: &str = "lib";

/// Test-only modules, which may import anything.
const TEST_ONLY: [&str; 2] = ["tests", "expiry_tests"];

fn layer_of(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

/// The source of module `m` (its file and its directory of submodules), without comments and
/// without its `#[cfg(test)] mod tests { .. }` (which the crate keeps at the end of a file).
fn source(src: &Path, m: &str) -> String {
    let mut text = std::fs::read_to_string(src.join(format!("{m}.rs"))).expect("module file");
    if let Ok(dir) = std::fs::read_dir(src.join(m)) {
        let mut subs: Vec<_> = dir.flatten().map(|e| e.path()).collect();
        subs.sort();
        for p in subs {
            text.push('\n');
            text.push_str(&std::fs::read_to_string(p).expect("submodule file"));
        }
    }
    let cut = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    text[..cut]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `text` names through `crate::` paths, grouped imports included.
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let name = |s: &str| -> String {
        let n: String = s
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if modules.contains(&n) {
            n
        } else {
            ROOT.to_string()
        }
    };
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                out.insert(name(item));
            }
        } else {
            out.insert(name(rest));
        }
    }
    out
}

#[test]
fn modules_form_the_documented_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("src")
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            n.strip_suffix(".rs").map(str::to_string)
        })
        .filter(|m| m != ROOT && !TEST_ONLY.contains(&m.as_str()))
        .collect();
    let mut graph = BTreeMap::new();
    for m in &modules {
        let mut deps = imports(&source(&src, m), &modules);
        deps.remove(m);
        println!(
            "{m:10} -> {}",
            deps.iter().cloned().collect::<Vec<_>>().join(" ")
        );
        graph.insert(m.clone(), deps);
    }
    for (m, deps) in &graph {
        let own = layer_of(m).unwrap_or_else(|| panic!("module {m} is in no layer"));
        for d in deps {
            if d == ROOT {
                assert_eq!(
                    own,
                    LAYERS.len() - 1,
                    "{m} (layer {own}) names the crate root"
                );
                continue;
            }
            let theirs = layer_of(d).expect("every import is a module or lib");
            assert!(
                theirs <= own,
                "{m} (layer {own}) imports {d} (layer {theirs})"
            );
            if theirs == own {
                let pos = |x: &str| LAYERS[own].iter().position(|y| *y == x);
                assert!(
                    pos(d) < pos(m),
                    "{m} imports {d}, listed after it in its layer"
                );
            }
        }
    }
}
