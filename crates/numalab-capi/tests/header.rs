//! include/numalab.h is what cbindgen 0.29.4 (crates.io, pinned) makes of
//! this crate today: a header that drifted from the code fails here.
//! scripts/install-deps.sh --test installs it (`cargo install`);
//! `NUMALAB_BLESS=1 cargo test -p numalab-capi --test header` writes the
//! fresh header.

use std::path::PathBuf;
use std::process::Command;

/// The cbindgen this header is generated with.
const CBINDGEN_VERSION: &str = "0.29.4";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `$CBINDGEN`, else ~/.cargo/bin/cbindgen (where install-deps.sh's
/// `cargo install` puts it), else `cbindgen` on the PATH.
fn cbindgen() -> PathBuf {
    if let Some(p) = std::env::var_os("CBINDGEN") {
        return p.into();
    }
    if let Some(home) = std::env::var_os("HOME") {
        let installed = PathBuf::from(home).join(".cargo/bin/cbindgen");
        if installed.is_file() {
            return installed;
        }
    }
    "cbindgen".into()
}

fn generate() -> String {
    let bin = cbindgen();
    let v = Command::new(&bin).arg("--version").output().unwrap_or_else(|e| {
        panic!(
            "cannot run {} ({e}): scripts/install-deps.sh --test installs cbindgen {CBINDGEN_VERSION}",
            bin.display()
        )
    });
    let version = String::from_utf8_lossy(&v.stdout);
    assert!(
        version.trim() == format!("cbindgen {CBINDGEN_VERSION}"),
        "{} is '{}', the header is made with cbindgen {CBINDGEN_VERSION}: scripts/install-deps.sh --test installs it",
        bin.display(),
        version.trim()
    );
    // The crate root as one source file: cbindgen follows its `mod`
    // declarations without asking cargo.
    let out = Command::new(&bin)
        .arg("--config")
        .arg(crate_dir().join("cbindgen.toml"))
        .arg("--quiet")
        .arg(crate_dir().join("src/lib.rs"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cbindgen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the header is UTF-8")
}

#[test]
fn the_checked_in_header_is_what_cbindgen_generates() {
    let fresh = generate();
    let path = crate_dir().join("include/numalab.h");
    if std::env::var_os("NUMALAB_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in != fresh {
        let first = checked_in
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(checked_in.lines().count().min(fresh.lines().count()));
        panic!(
            "{} is stale from line {}: regenerate it with NUMALAB_BLESS=1 cargo test -p numalab-capi --test header\nchecked in: {:?}\nfresh:      {:?}",
            path.display(),
            first + 1,
            checked_in.lines().nth(first),
            fresh.lines().nth(first)
        );
    }
}

/// The files holding exported functions.
const API_FILES: &[&str] = &[
    "lib.rs",
    "machine.rs",
    "sets.rs",
    "memory.rs",
    "threads.rs",
    "verify.rs",
    "results.rs",
];

#[test]
fn every_exported_function_is_guarded_and_documented() {
    // Each `extern "C" fn` runs its body through `guard` (no panic
    // crosses into C), except the three that return static or
    // thread-local strings and cannot fail.
    let unguarded = [
        "numalab_last_error",
        "numalab_status_name",
        "numalab_version",
    ];
    let header = std::fs::read_to_string(crate_dir().join("include/numalab.h")).unwrap();
    let lines: Vec<&str> = header.lines().collect();
    let mut functions = 0;
    for f in API_FILES {
        let text = std::fs::read_to_string(crate_dir().join("src").join(f)).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("extern \"C\" fn ") {
            let after = &rest[at + "extern \"C\" fn ".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let body_start = after.find('{').unwrap();
            let body = &after[body_start..];
            let first = body.lines().nth(1).unwrap_or("").trim();
            if !unguarded.contains(&name.as_str()) {
                assert!(
                    first.starts_with(&format!("guard(\"{name}\"")),
                    "{f}: {name} does not start with guard(\"{name}\", ...): {first}"
                );
            }
            // Documented in the header: a doc comment right above its
            // declaration (the line outside comments that names it).
            let decl = lines
                .iter()
                .position(|l| {
                    let t = l.trim_start();
                    !t.starts_with('*')
                        && !t.starts_with('/')
                        && (l.contains(&format!(" {name}(")) || l.contains(&format!("*{name}(")))
                })
                .unwrap_or_else(|| panic!("{name} missing from numalab.h"));
            assert!(
                decl > 0 && lines[decl - 1].trim_end().ends_with("*/"),
                "{name} has no documentation in numalab.h"
            );
            functions += 1;
            rest = &after[body_start..];
        }
    }
    assert!(functions > 60, "only {functions} exported functions found");
}
