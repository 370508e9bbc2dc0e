//! Every command's JSON is in one envelope (docs/json.md): `schema_version`,
//! `command`, the result's own fields, `environment`. The commands that
//! printed bare JSON before result schema 1.2 are run here; the measuring
//! commands' own tests assert their envelopes; and a command whose `--help`
//! offers JSON but is in neither list fails this test until it is added.

use crate::common;

use common::{fixture, json, numalab, parse_json, preload_library, scratch};
use serde_json::Value;

/// Commands whose envelope their own host tests assert (`v["command"]`).
const ASSERTED_ELSEWHERE: &[&str] = &[
    "advise",
    "bench",
    "matrix",
    "migrate",
    "model",
    "sizes",
    "scaling",
    "extrapolate",
    "sweep",
    "loaded-latency",
    "c2c",
    "apexmap",
    "pdm",
    "blas",
    "policies",
];

/// Checks the envelope of `v`: the command it names, its schema version
/// (the results' 1.2, or a schema of the result's own), an environment.
fn envelope(v: &Value, command: &str, version: &str) {
    assert_eq!(v["command"], command, "{v}");
    assert_eq!(v["schema_version"], version, "{command}: {v}");
    assert!(v["environment"]["kernel"].is_string(), "{command}: {v}");
    assert!(
        v["environment"]["command_line"].is_array(),
        "{command}: {v}"
    );
}

/// `numalab profile OPTIONS -o DIR/prof -- true`, which must succeed: the
/// folder and the run.
fn profile_true(d: &std::path::Path, options: &[&str]) -> (std::path::PathBuf, common::Ran) {
    let _ = preload_library();
    let pd = d.join("prof");
    let mut args = vec!["profile"];
    args.extend_from_slice(options);
    args.extend(["-o", pd.to_str().unwrap(), "--", "true"]);
    let pr = numalab(&args);
    assert_eq!(pr.rc, 0, "{}", pr.err);
    (pd, pr)
}

/// The JSON file `path`, as numalab wrote it.
fn read(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    parse_json(&text, &path.display().to_string())
}

#[test]
fn the_commands_that_printed_bare_json_print_the_envelope() {
    let q = fixture("qemu-quartet-4n2c-ring.xml");
    let d = scratch("the_commands_that_printed_bare_json_print_the_envelope");
    // A result with a schema of its own keeps its version.
    let t = json(&["topology", "--json", "--topology", &q]);
    envelope(&t, "topology", "1.1");
    assert_eq!(t["nodes"].as_array().unwrap().len(), 4);
    let s = json(&[
        "set",
        "node:1",
        "--threads",
        "2",
        "--json",
        "--topology",
        &q,
    ]);
    envelope(&s, "set", "1.7");
    assert_eq!(s["cpus"], serde_json::json!([2, 3]));
    let p = json(&["place", "--size", "1M", "--json"]);
    envelope(&p, "place", "1.0");
    assert_eq!(p["size_bytes"], 1 << 20);
    let l = json(&["sweep", "--list", "--json", "--topology", &q]);
    envelope(&l, "sweep --list", "1.7");
    assert!(!l["plans"].as_array().unwrap().is_empty(), "{l}");
    let sc = json(&[
        "sweep",
        "--scenarios",
        "all",
        "--list",
        "--json",
        "--topology",
        &q,
    ]);
    envelope(&sc, "sweep --list --scenarios", "1.7");
    let r = json(&["report", "--dry-run", "--json", "--topology", &q]);
    envelope(&r, "report --dry-run", "1.7");
    // verify and run: the process's name is `program` (`command` is the
    // envelope's).
    let v = json(&["verify", "--pid", &std::process::id().to_string(), "--json"]);
    envelope(&v, "verify", "1.7");
    assert_eq!(v["pid"], std::process::id());
    assert!(v["program"].is_string(), "{v}");
    let vj = d.join("verify.json");
    let cj = d.join("counters.json");
    let ran = numalab(&[
        "run",
        "--verify",
        "--verify-json",
        vj.to_str().unwrap(),
        "--counters=task-clock",
        "--counters-json",
        cj.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(ran.rc, 0, "{}", ran.err);
    let vr = read(&vj);
    envelope(&vr, "run --verify", "1.7");
    assert_eq!(vr["program"], "true");
    let cr = read(&cj);
    envelope(&cr, "run --counters", "1.7");
    assert_eq!(cr["events"][0]["name"], "task-clock");
    // compare: two results, and two profiles (its own profile read back
    // from profile --json's envelope, and from profile.json).
    let a = d.join("a.json");
    let b = d.join("b.json");
    for (f, m) in [(&a, 10.0), (&b, 20.0)] {
        let fig = serde_json::json!({"median": m, "best": m, "min": m, "max": m, "spread": 0.01, "rel_ci": 0.01});
        let r = serde_json::json!({"schema_version": "1.2", "command": "sizes",
            "environment": {"kernel": "6.12"}, "read_gbs": fig});
        std::fs::write(f, r.to_string()).unwrap();
    }
    let c = json(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    envelope(&c, "compare", "1.7");
    assert!(!c["rows"].as_array().unwrap().is_empty(), "{c}");
    assert!(c["environment_differences"].is_array(), "{c}");
    let (pd, pr) = profile_true(&d, &["--json"]);
    let at = pr.err.find("{\n").expect("profile --json on stderr");
    let end = pr.err.rfind("\n}").expect("the end of the JSON") + 2;
    let printed = parse_json(&pr.err[at..end], "profile --json");
    envelope(&printed, "profile", "2.9");
    assert_eq!(printed["program"], serde_json::json!(["true"]));
    let enveloped = d.join("enveloped.json");
    std::fs::write(&enveloped, &pr.err[at..end]).unwrap();
    let file = pd.join("profile.json");
    assert!(
        read(&file)["command"].is_null(),
        "profile.json is no envelope"
    );
    let cp = json(&[
        "compare",
        enveloped.to_str().unwrap(),
        file.to_str().unwrap(),
        "--json",
    ]);
    envelope(&cp, "compare", "1.7");
    assert_eq!(cp["command_a"], "true", "{cp}");
}

/// A profile of schema 1 (the program under `command`) is read still.
#[test]
fn a_schema_1_profile_is_read_with_its_command_as_the_program() {
    let d = scratch("a_schema_1_profile_is_read_with_its_command_as_the_program");
    let (pd, _) = profile_true(&d, &[]);
    let mut old = read(&pd.join("profile.json"));
    let o = old.as_object_mut().unwrap();
    let program = o.remove("program").expect("profile.json's program");
    o.insert("command".into(), program);
    o.insert("schema_version".into(), "1.9".into());
    let f = d.join("old.json");
    std::fs::write(&f, old.to_string()).unwrap();
    let c = json(&[
        "compare",
        f.to_str().unwrap(),
        f.to_str().unwrap(),
        "--json",
    ]);
    envelope(&c, "compare", "1.7");
    assert_eq!(c["command_a"], "true", "{c}");
}

/// Every command whose help offers JSON is covered here or by its own test.
#[test]
fn every_command_with_json_is_covered() {
    let commands = common::subcommands(&[]);
    assert!(commands.len() >= 20, "{commands:?}");
    let here = [
        "topology", "set", "place", "sweep", "report", "verify", "run", "compare", "profile",
    ];
    for c in &commands {
        let h = numalab(&[c, "--help"]).out;
        let sub: Vec<String> = if c == "bench" {
            vec![
                numalab(&["bench", "bandwidth", "--help"]).out,
                numalab(&["bench", "latency", "--help"]).out,
            ]
        } else {
            vec![h]
        };
        if sub.iter().any(|h| h.contains("-json")) {
            assert!(
                here.contains(&c.as_str()) || ASSERTED_ELSEWHERE.contains(&c.as_str()),
                "numalab {c} prints JSON, but no test asserts its envelope: add it to tests/host/envelope.rs"
            );
        }
    }
}
