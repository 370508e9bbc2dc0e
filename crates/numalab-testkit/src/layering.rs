//! A crate's module layering, checked from its sources: each top-level
//! module (a file or a folder of `src/`) may use only the modules listed
//! before it. The report and preload crates state their layers this way
//! (their `layering` tests); one checker, so that both read `use` lines
//! alike.

use std::collections::BTreeMap;
use std::path::Path;

/// The crate's modules this source uses (`crate::NAME`, and `super::NAME`
/// in a top-level file), outside comments and its test module.
fn uses(text: &str, top_level: bool) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut prefixes = vec!["crate::"];
        if top_level {
            prefixes.push("super::");
        }
        for p in prefixes {
            for (i, _) in line.match_indices(p) {
                let rest = &line[i + p.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
        }
        // `use crate::{a, b}`: every name in the braces.
        if let Some(i) = line.find("crate::{") {
            let inner = line[i + 8..].split('}').next().unwrap_or("");
            out.extend(
                inner
                    .split(',')
                    .map(|s| s.trim().split("::").next().unwrap_or("").to_string()),
            );
        }
    }
    out
}

fn sources(dir: &Path, root: &Path, out: &mut BTreeMap<String, Vec<(String, bool)>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).unwrap();
            let top = rel
                .iter()
                .next()
                .unwrap()
                .to_string_lossy()
                .replace(".rs", "");
            let text = std::fs::read_to_string(&p).unwrap();
            out.entry(top)
                .or_default()
                .push((text, rel.components().count() == 1));
        }
    }
}

/// The upward uses in the crate whose sources are under `src`, its
/// modules in `order` (bottom first): "MODULE uses HIGHER", sorted; or why
/// the modules and `order` disagree (a module missing from it, or gone).
pub fn upward_uses(src: &Path, order: &[&str]) -> Result<Vec<String>, String> {
    let mut files = BTreeMap::new();
    sources(src, src, &mut files);
    files.remove("lib");
    let mut listed: Vec<&str> = files.keys().map(String::as_str).collect();
    let mut sorted = order.to_vec();
    listed.sort_unstable();
    sorted.sort_unstable();
    if listed != sorted {
        return Err(format!(
            "the modules {listed:?} are not the layers {sorted:?}: a module is missing from the order (or gone)"
        ));
    }
    let rank = |m: &str| order.iter().position(|x| *x == m);
    let mut wrong = Vec::new();
    for (module, texts) in &files {
        let own = rank(module).unwrap_or(usize::MAX);
        for (text, top_level) in texts {
            for used in uses(text, *top_level) {
                if rank(&used).is_some_and(|r| r > own) {
                    wrong.push(format!("{module} uses {used}"));
                }
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    Ok(wrong)
}

/// Panics, naming them, unless every module under `src` uses only the
/// layers below it in `order`.
pub fn assert_layered(src: &Path, order: &[&str]) {
    match upward_uses(src, order) {
        Ok(wrong) => assert!(wrong.is_empty(), "upward uses: {wrong:?}"),
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upward_use_is_named_and_comments_and_tests_are_not_uses() {
        let dir = std::env::temp_dir().join(format!("numalab-layering-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("top")).unwrap();
        std::fs::write(dir.join("lib.rs"), "mod low; mod top;").unwrap();
        std::fs::write(
            dir.join("low.rs"),
            "// crate::top in a comment\npub fn f() {}\n#[cfg(test)]\nuse crate::top;",
        )
        .unwrap();
        std::fs::write(dir.join("top/mod.rs"), "use crate::{low, x};").unwrap();
        assert_eq!(upward_uses(&dir, &["low", "top"]), Ok(vec![]));
        std::fs::write(dir.join("low.rs"), "use crate::top::g;").unwrap();
        assert_eq!(
            upward_uses(&dir, &["low", "top"]),
            Ok(vec!["low uses top".to_string()])
        );
        assert!(upward_uses(&dir, &["low"]).unwrap_err().contains("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
