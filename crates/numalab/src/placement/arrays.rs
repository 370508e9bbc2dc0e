//! Per-array placement: one memory policy for each array of a multi-array
//! kernel (`--mem a=bind:0,b=bind:1,c=interleave:all`), and per-thread,
//! per-array plans read from a file (`--placement FILE`).
//!
//! Arrays are named as the placement distribution model names a kernel's
//! data quantities: the arrays a kernel reads come first, the one it writes
//! last (copy `b = a`, scale `b = s·a`, add `c = a + b`, triad
//! `c = a + s·b`); a one-array kernel has the array `a`.

use super::MemoryPolicy;
use crate::Machine;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;

/// Most entries a placement file may hold (one per thread).
pub const MAX_PLACEMENT_ENTRIES: usize = 8192;

/// Most arrays a kernel has.
const MAX_ARRAYS: usize = 8;

/// The memory policy of each array of a kernel: `default` for every array
/// not named in `arrays`.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrayPolicies {
    pub default: MemoryPolicy,
    /// Named arrays' own policies, by array name.
    pub arrays: BTreeMap<String, MemoryPolicy>,
}

impl From<MemoryPolicy> for ArrayPolicies {
    fn from(default: MemoryPolicy) -> Self {
        Self {
            default,
            arrays: BTreeMap::new(),
        }
    }
}

impl ArrayPolicies {
    /// `POLICY` (every array) or `NAME=POLICY,NAME=POLICY,...` (arrays not
    /// named get `default`). A policy may itself hold commas
    /// (`bind:0,1`): a new array starts only at a comma followed by a
    /// lowercase letter and `=`.
    pub fn parse(m: &Machine, text: &str, default: &MemoryPolicy) -> Result<Self, String> {
        let text = text.trim();
        let starts = array_starts(text);
        if starts.first() != Some(&0) {
            return MemoryPolicy::parse(m, text).map(Self::from);
        }
        let mut arrays = BTreeMap::new();
        for (i, &at) in starts.iter().enumerate() {
            let end = starts.get(i + 1).map_or(text.len(), |&next| next - 1);
            let (name, policy) = text[at..end]
                .split_once('=')
                .expect("array_starts found NAME=");
            if policy.trim().is_empty() {
                return Err(format!(
                    "array '{name}' has no policy; write {name}=POLICY, e.g. {name}=bind:0"
                ));
            }
            let p = MemoryPolicy::parse(m, policy).map_err(|e| format!("array '{name}': {e}"))?;
            if arrays.insert(name.to_string(), p).is_some() {
                return Err(format!("array '{name}' is given twice"));
            }
        }
        Ok(Self {
            default: default.clone(),
            arrays,
        })
    }

    /// The policy of the array called `name`.
    pub fn of(&self, name: &str) -> &MemoryPolicy {
        self.arrays.get(name).unwrap_or(&self.default)
    }

    /// Whether every array gets the same policy.
    pub fn is_uniform(&self) -> bool {
        self.arrays.values().all(|p| *p == self.default)
    }

    /// Refuses names that are not arrays of `kernel`, whose arrays are `names`.
    pub fn check_names(&self, kernel: &str, names: &[&str]) -> Result<(), String> {
        for n in self.arrays.keys() {
            if !names.contains(&n.as_str()) {
                let mut valid = names.to_vec();
                valid.sort_unstable();
                return Err(format!(
                    "kernel {kernel} has no array '{n}' (its arrays: {})",
                    valid.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// `bind:0` or `a=bind:0, b=bind:1, default first-touch`.
impl fmt::Display for ArrayPolicies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.arrays.is_empty() {
            return write!(f, "{}", self.default);
        }
        let named: Vec<String> = self
            .arrays
            .iter()
            .map(|(n, p)| format!("{n}={p}"))
            .collect();
        write!(f, "{}", named.join(" "))
    }
}

/// Byte offsets where a `NAME=` begins: at the start or after a comma, a
/// single lowercase letter followed by `=`.
fn array_starts(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let at = |i: usize| b.len() > i + 1 && b[i].is_ascii_lowercase() && b[i + 1] == b'=';
    let mut out = Vec::new();
    if at(0) {
        out.push(0);
    }
    for (i, &c) in b.iter().enumerate() {
        if c == b',' && at(i + 1) {
            out.push(i + 1);
        }
    }
    out
}

/// One thread of a placement file: its CPU and its arrays' policies.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadArrays {
    pub cpu: u32,
    pub arrays: ArrayPolicies,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    cpu: u32,
    #[serde(default)]
    arrays: BTreeMap<String, String>,
}

/// Reads a placement file: a JSON list of `{"cpu": N, "arrays": {"a":
/// POLICY, ...}}`, one entry per thread. Arrays an entry does not name get
/// `default`. CPUs must be allowed and distinct; names must be arrays of
/// `kernel`.
pub fn parse_placement_file(
    m: &Machine,
    text: &str,
    kernel: &str,
    names: &[&str],
    default: &MemoryPolicy,
) -> Result<Vec<ThreadArrays>, String> {
    let entries: Vec<Entry> = serde_json::from_str(text).map_err(|e| {
        format!("not a list of {{\"cpu\": N, \"arrays\": {{\"a\": POLICY, ...}}}}: {e}")
    })?;
    if entries.is_empty() || entries.len() > MAX_PLACEMENT_ENTRIES {
        return Err(format!(
            "{} entries (valid: 1 to {MAX_PLACEMENT_ENTRIES}, one per thread)",
            entries.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let which = format!("entry {i} (cpu {})", e.cpu);
        if !m.allowed_cpus.contains(e.cpu) {
            return Err(format!(
                "{which}: CPU {} is not allowed here (allowed: {})",
                e.cpu, m.allowed_cpus
            ));
        }
        if !seen.insert(e.cpu) {
            return Err(format!("{which}: CPU {} has two entries", e.cpu));
        }
        if e.arrays.len() > MAX_ARRAYS {
            return Err(format!(
                "{which}: {} arrays (at most {MAX_ARRAYS})",
                e.arrays.len()
            ));
        }
        let mut arrays = BTreeMap::new();
        for (name, policy) in e.arrays {
            let p = MemoryPolicy::parse(m, &policy)
                .map_err(|err| format!("{which}: array '{name}': {err}"))?;
            arrays.insert(name, p);
        }
        let a = ArrayPolicies {
            default: default.clone(),
            arrays,
        };
        a.check_names(kernel, names)
            .map_err(|err| format!("{which}: {err}"))?;
        out.push(ThreadArrays {
            cpu: e.cpu,
            arrays: a,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quartet() -> Machine {
        crate::machine::fixture("qemu-quartet-4n2c-ring.xml")
    }

    fn bind(n: u32) -> MemoryPolicy {
        MemoryPolicy::Bind {
            nodes: crate::IdSet::single(n),
        }
    }

    #[test]
    fn one_policy_means_every_array() {
        let m = quartet();
        let a = ArrayPolicies::parse(&m, "bind:0,1", &MemoryPolicy::FirstTouch).unwrap();
        assert!(a.arrays.is_empty());
        assert_eq!(a.of("c").to_string(), "bind:0-1");
        assert!(a.is_uniform());
    }

    #[test]
    fn named_arrays_split_at_their_names_not_inside_policies() {
        let m = quartet();
        let a = ArrayPolicies::parse(
            &m,
            "a=bind:0,b=interleave:1,3,c=weighted:0=3,2=1",
            &MemoryPolicy::Local,
        )
        .unwrap();
        assert_eq!(a.of("a"), &bind(0));
        assert_eq!(a.of("b").to_string(), "interleave:1,3");
        assert_eq!(a.of("c").to_string(), "weighted:0=3,2=1");
        assert_eq!(a.of("d"), &MemoryPolicy::Local);
        assert!(!a.is_uniform());
        assert_eq!(
            a.to_string(),
            "a=bind:0 b=interleave:1,3 c=weighted:0=3,2=1"
        );
        assert_eq!(
            a.check_names("copy", &["a", "b"]).unwrap_err(),
            "kernel copy has no array 'c' (its arrays: a, b)"
        );
    }

    #[test]
    fn bad_array_lists_name_the_array() {
        let m = quartet();
        let d = MemoryPolicy::FirstTouch;
        assert_eq!(
            ArrayPolicies::parse(&m, "a=bind:0,a=bind:1", &d).unwrap_err(),
            "array 'a' is given twice"
        );
        assert!(ArrayPolicies::parse(&m, "a=,b=bind:1", &d)
            .unwrap_err()
            .starts_with("array 'a' has no policy"));
        assert!(ArrayPolicies::parse(&m, "b=bind:9", &d)
            .unwrap_err()
            .starts_with("array 'b': "));
    }

    #[test]
    fn placement_files_give_each_thread_its_arrays() {
        let m = quartet();
        let names = ["a", "b", "c"];
        let d = MemoryPolicy::FirstTouch;
        let t = parse_placement_file(
            &m,
            r#"[{"cpu": 0, "arrays": {"a": "bind:1", "c": "bind:3"}}, {"cpu": 2}]"#,
            "triad",
            &names,
            &d,
        )
        .unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].cpu, t[0].arrays.of("a")), (0, &bind(1)));
        assert_eq!(t[0].arrays.of("b"), &d);
        assert_eq!(t[0].arrays.of("c"), &bind(3));
        assert_eq!(t[1].arrays.of("a"), &d);
        let err = |text: &str| parse_placement_file(&m, text, "triad", &names, &d).unwrap_err();
        assert_eq!(err("[]"), "0 entries (valid: 1 to 8192, one per thread)");
        assert_eq!(
            err(r#"[{"cpu": 0}, {"cpu": 0}]"#),
            "entry 1 (cpu 0): CPU 0 has two entries"
        );
        assert!(err(r#"[{"cpu": 99}]"#).starts_with("entry 0 (cpu 99): CPU 99 is not allowed"));
        assert_eq!(
            err(r#"[{"cpu": 1, "arrays": {"d": "bind:0"}}]"#),
            "entry 0 (cpu 1): kernel triad has no array 'd' (its arrays: a, b, c)"
        );
        assert!(err(r#"[{"cpu": 1, "mem": "bind:0"}]"#).contains("unknown field `mem`"));
    }
}
