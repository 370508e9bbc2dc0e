//! Boots the multi-node QEMU guest (guest/boot.sh) with a list of named
//! shell steps and parses what each printed; shared by the guest test files.
#![allow(dead_code)] // each test binary uses its own part

pub mod browser;
pub mod report;

use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

#[derive(Debug, Clone)]
pub struct Step {
    pub out: String,
    pub err: String,
    pub rc: i32,
}

pub struct Guest {
    pub steps: HashMap<String, Step>,
    pub console: String,
}

impl Guest {
    pub fn step(&self, name: &str) -> &Step {
        self.steps.get(name).unwrap_or_else(|| {
            panic!(
                "step '{name}' missing from the guest output; console tail:\n{}",
                tail(&self.console, 60)
            )
        })
    }

    /// The step's stdout as JSON, with its exit code checked.
    pub fn json(&self, name: &str, rc: i32) -> Value {
        let s = self.step(name);
        assert_eq!(s.rc, rc, "step {name}: exit code; stderr: {}", s.err);
        serde_json::from_str(&s.out)
            .unwrap_or_else(|e| panic!("step {name}: stdout is not JSON ({e}):\n{}", s.out))
    }
}

/// Runs the numalab binary: (exit code, stdout, stderr).
pub fn numalab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .output()
        .expect("run numalab");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Boots `machine` on `kernel` ("6.12" or "6.1") with `steps` (name, shell
/// command) and parses the output.
pub fn boot(machine: &str, kernel_version: &str, steps: &[(&str, &str)]) -> Guest {
    let root = repo_root();
    let kernel = root.join(match kernel_version {
        "6.12" => "guest/cache/vmlinuz".to_string(),
        v => format!("guest/cache/vmlinuz-{v}"),
    });
    assert!(
        kernel.exists(),
        "{} is missing: run guest/fetch-kernel.sh (the README test command does)",
        kernel.display()
    );
    let mut script = String::from(
        "step() { name=$1; shift; echo \"@@@BEGIN $name\"; \"$@\" >/tmp/o 2>/tmp/e; rc=$?; \
         echo '@@@OUT'; cat /tmp/o; echo '@@@ERR'; cat /tmp/e; echo \"@@@END $name $rc\"; }\n",
    );
    for (name, cmd) in steps {
        script.push_str(&format!(
            "step {name} sh -c '{}'\n",
            cmd.replace('\'', "'\\''")
        ));
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "numalab-guest-test-{machine}-{kernel_version}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let script_path = dir.join("script.sh");
    std::fs::write(&script_path, script).unwrap();
    let out = Command::new("bash")
        .arg(root.join("guest/boot.sh"))
        .args([
            "--machine",
            machine,
            "--kernel",
            kernel_version,
            "--timeout",
            "900",
        ])
        .arg("--file")
        .arg(env!("CARGO_BIN_EXE_numalab"))
        .arg("--script")
        .arg(&script_path)
        .output()
        .expect("run guest/boot.sh");
    let console = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "guest {machine} failed ({}): {}\nconsole tail:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        tail(&console, 80)
    );
    Guest {
        steps: parse_steps(&console),
        console,
    }
}

fn parse_steps(console: &str) -> HashMap<String, Step> {
    let mut steps = HashMap::new();
    let mut cur: Option<(String, String, String, u8)> = None; // name, out, err, section
    for line in console.lines() {
        if let Some(name) = line.strip_prefix("@@@BEGIN ") {
            cur = Some((name.trim().to_string(), String::new(), String::new(), 0));
        } else if line == "@@@OUT" {
            if let Some(c) = cur.as_mut() {
                c.3 = 1;
            }
        } else if line == "@@@ERR" {
            if let Some(c) = cur.as_mut() {
                c.3 = 2;
            }
        } else if let Some(rest) = line.strip_prefix("@@@END ") {
            if let Some((name, out, err, _)) = cur.take() {
                let rc = rest
                    .rsplit(' ')
                    .next()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(-1);
                steps.insert(name, Step { out, err, rc });
            }
        } else if let Some(c) = cur.as_mut() {
            match c.3 {
                1 => {
                    c.1.push_str(line);
                    c.1.push('\n');
                }
                2 => {
                    c.2.push_str(line);
                    c.2.push('\n');
                }
                _ => {}
            }
        }
    }
    steps
}

/// (node, pages) of a `place --json` result, sorted by node.
pub fn nodes_of(v: &Value) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = v["pages_by_node"]
        .as_object()
        .expect("pages_by_node")
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
        .collect();
    out.sort();
    out
}

/// Asserts a one-line `numalab: ...` error containing `needle`, exit code `rc`.
pub fn one_line_error(s: &Step, rc: i32, needle: &str) {
    assert_eq!(s.rc, rc, "stderr: {}", s.err);
    let lines: Vec<&str> = s.err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", s.err);
    assert!(lines[0].starts_with("numalab: "), "{}", lines[0]);
    assert!(lines[0].contains(needle), "'{needle}' in: {}", lines[0]);
}
