//! `numalab compare A.json B.json`: two results side by side, per metric
//! the two values, the ratio and whether the difference exceeds the
//! measured spread; or two profiles (`numalab profile`'s profile.json),
//! region by region.

use crate::output::out;
use crate::output::{
    folder_of, print_result, print_warnings, refuse_overwriting_input, CliError, CliResult,
    RESULT_SCHEMA_VERSION,
};
use numalab::input::{read_text, InputKind};
use numalab::profile::{Profile, SCHEMA_VERSION as PROFILE_SCHEMA_VERSION};
use numalab_report::compare::{check_input, compare_summaries, summarize, Summary};
use numalab_report::files::write_atomically;
use numalab_report::views::compare::{render_html, render_text};
use numalab_report::views::profile_compare;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The first result (`--json` output of any measuring command, a report's results.json, or
    /// a profile.json of `numalab profile`).
    a: PathBuf,
    /// The second result.
    b: PathBuf,
    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// With --html: replace FILE even when it is not a page numalab compare wrote.
    #[arg(long, requires = "html")]
    force: bool,
    /// Only the metrics that differ by more than the measured spread.
    #[arg(long)]
    significant: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What a file holds: a profile, parsed straight from its text into
/// [`Profile`], or any other JSON document, as what a comparison of results
/// reads of it (its tree is dropped before the next file is read). Either
/// with why it cannot be compared, said once both files are known to be
/// JSON of one kind.
enum Doc {
    Profile(Result<Box<Profile>, CliError>),
    Other(Result<(), CliError>, Box<Summary>),
}

/// The shape of one top-level field, as far as telling a profile matters.
enum Shape {
    Str(String),
    /// A non-negative integer.
    Count,
    Array,
    Other,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Shape, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, s: &str) -> Result<Shape, E> {
                Ok(Shape::Str(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Shape, E> {
                Ok(Shape::Str(s))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape::Count)
            }
            fn visit_i64<E>(self, n: i64) -> Result<Shape, E> {
                Ok(if n >= 0 { Shape::Count } else { Shape::Other })
            }
            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Shape, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Shape::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Shape, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Shape::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// What tells a profile from a result, read in one pass over a JSON object
/// that skips everything else ([`IgnoredAny`]): no tree of the document is
/// built. A profile is an object whose `regions` is an array, whose
/// `pages_armed` a non-negative integer and whose `schema_version` a string
/// (of a repeated field, the last counts, as in a [`Value`]).
#[derive(Default)]
struct ProfileProbe {
    schema_version: Option<String>,
    pages_armed: bool,
    regions: bool,
    /// `command` is a string: `profile --json`'s output, the profile in
    /// the envelope (a profile.json of schema 1 has the program's
    /// arguments there, an array).
    enveloped: bool,
}

impl ProfileProbe {
    /// The profile's schema version, when the document is a profile.
    fn profile_version(self) -> Option<String> {
        self.schema_version
            .filter(|_| self.pages_armed && self.regions)
    }
}

impl<'de> Deserialize<'de> for ProfileProbe {
    /// Fails on anything but an object (and on text that is not JSON).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ProfileProbe, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProfileProbe;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<ProfileProbe, A::Error> {
                let mut p = ProfileProbe::default();
                while let Some(key) = m.next_key::<String>()? {
                    match key.as_str() {
                        "schema_version" => {
                            p.schema_version = match m.next_value()? {
                                Shape::Str(s) => Some(s),
                                _ => None,
                            }
                        }
                        "command" => p.enveloped = matches!(m.next_value()?, Shape::Str(_)),
                        "pages_armed" => p.pages_armed = matches!(m.next_value()?, Shape::Count),
                        "regions" => p.regions = matches!(m.next_value()?, Shape::Array),
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(p)
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads a JSON file through the engine's bounded reader: a profile into
/// [`Profile`] straight from the text, anything else into a [`Value`],
/// checked as a result and summarized. The text is dropped as soon as it is
/// parsed and the tree once summarized, so the peak is one file's text and
/// tree beside the other's profile or summary, never two trees.
fn read_doc(p: &Path) -> Result<Doc, CliError> {
    let text = read_text(p, InputKind::ResultsJson).map_err(|e| CliError::usage(e.to_string()))?;
    if let Ok(probe) = serde_json::from_str::<ProfileProbe>(&text) {
        let enveloped = probe.enveloped;
        if let Some(version) = probe.profile_version() {
            let profile = profile_of(p, &version, &text, enveloped).map(Box::new);
            return Ok(Doc::Profile(profile));
        }
    }
    // Not an object, not JSON, or an object that is no profile.
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "{} is not JSON ({e}); give the --json output of a numalab command",
            p.display()
        ))
    })?;
    drop(text);
    Ok(Doc::Other(check_result(p, &v), Box::new(summarize(&v))))
}

/// Checks that a result is a numalab result of a schema version this
/// numalab knows.
fn check_result(p: &Path, v: &Value) -> Result<(), CliError> {
    check_input(v, RESULT_SCHEMA_VERSION)
        .map_err(|e| CliError::usage(format!("{} {e}", p.display())))
}

/// A profile of a schema this numalab reads (1.x, whose `program` was
/// called `command`, and 2.x), from its text; its schema version is
/// checked before the text is parsed. An enveloped one (`profile --json`)
/// goes through a tree, without the envelope's `command` and
/// `environment`.
fn profile_of(p: &Path, version: &str, text: &str, enveloped: bool) -> Result<Profile, CliError> {
    let major = |t: &str| t.split('.').next().map(str::to_string);
    let current = major(PROFILE_SCHEMA_VERSION).unwrap_or_default();
    let read = major(version).and_then(|v| v.parse::<u32>().ok());
    if !read.is_some_and(|v| (1..=current.parse().unwrap_or(1)).contains(&v)) {
        return Err(CliError::usage(format!(
            "{} is a profile of schema {version}; this numalab reads schemas 1.x to {current}.x",
            p.display(),
        )));
    }
    let unreadable = |e: serde_json::Error| {
        CliError::usage(format!(
            "{} is not a profile numalab can read ({e})",
            p.display()
        ))
    };
    if !enveloped {
        return serde_json::from_str(text).map_err(unreadable);
    }
    let mut v: Value = serde_json::from_str(text).map_err(unreadable)?;
    if let Some(o) = v.as_object_mut() {
        o.remove("command");
        o.remove("environment");
    }
    serde_json::from_value(v).map_err(unreadable)
}

/// Two profiles, region by region.
fn compare_profiles(
    a: &Args,
    pa: Result<Box<Profile>, CliError>,
    pb: Result<Box<Profile>, CliError>,
) -> CliResult {
    if a.html.is_some() {
        return Err(CliError::usage(
            "--html compares results; two profiles compare as text or --json (each profile's folder has its own profile.html)",
        ));
    }
    let (pa, pb) = (pa?, pb?);
    let mut c = numalab::profile::compare::compare(&pa, &pb);
    if a.significant {
        c.regions.retain(|r| r.remote.changed == Some(true));
    }
    if a.json {
        print_result("compare", &c)?;
    } else {
        let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
        out!("{}", profile_compare::render(&c, &na, &nb))?;
        print_warnings(&c.warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What the first bytes of every page `numalab compare --html` writes hold.
const PAGE_MARK: &str = "<title>numalab compare</title>";

/// Refuses an `--html` file that cannot or must not be written, before
/// anything is read: one of the inputs, a directory, a file in a missing
/// folder, or an existing file that is not a compare page (unless --force).
fn check_html(a: &Args, out: &Path) -> Result<(), CliError> {
    refuse_overwriting_input("--html", out, &[("A", &a.a), ("B", &a.b)])?;
    let shown = out.display();
    if out.is_dir() {
        return Err(CliError::usage(format!(
            "--html {shown} is a directory; give a file name"
        )));
    }
    let folder = folder_of(out);
    if !folder.is_dir() {
        return Err(CliError::usage(format!(
            "--html {shown}: the folder {} does not exist",
            folder.display()
        )));
    }
    if out.exists() && !a.force && !is_compare_page(out) {
        return Err(CliError::usage(format!(
            "--html {shown} exists and is not a page numalab compare wrote: choose another file, or --force to replace it"
        )));
    }
    Ok(())
}

/// Whether `path` begins like a page this command writes. Only a regular
/// file is opened: opening a FIFO to read it would wait for a writer.
fn is_compare_page(path: &Path) -> bool {
    use std::io::Read;
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = Vec::new();
    match std::fs::File::open(path) {
        Ok(f) => {
            // The mark is near the top; a few hundred bytes suffice.
            let _ = f.take(512).read_to_end(&mut head);
        }
        Err(_) => return false,
    }
    String::from_utf8_lossy(&head).contains(PAGE_MARK)
}

pub fn run(a: Args) -> CliResult {
    if let Some(h) = &a.html {
        check_html(&a, h)?;
    }
    let (sa, sb) = match (read_doc(&a.a)?, read_doc(&a.b)?) {
        (Doc::Profile(pa), Doc::Profile(pb)) => return compare_profiles(&a, pa, pb),
        (Doc::Other(ca, sa), Doc::Other(cb, sb)) => {
            ca?;
            cb?;
            (sa, sb)
        }
        (da, _) => {
            let (profile, other) = match da {
                Doc::Profile(_) => (&a.a, &a.b),
                Doc::Other(..) => (&a.b, &a.a),
            };
            return Err(CliError::usage(format!(
                "{} is a profile and {} is not: compare two profiles, or two results",
                profile.display(),
                other.display()
            )));
        }
    };
    let mut c = compare_summaries(&sa, &sb);
    if c.rows.is_empty() {
        return Err(CliError::usage(format!(
            "{} and {} hold no figures to compare (results of measuring commands do)",
            a.a.display(),
            a.b.display()
        )));
    }
    if a.significant {
        c.rows.retain(|r| r.significant == Some(true));
    }
    let (na, nb) = (a.a.display().to_string(), a.b.display().to_string());
    if let Some(h) = &a.html {
        write_atomically(h, render_html(&c, &na, &nb).as_bytes())
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", h.display())))?;
    }
    if a.json {
        print_result("compare", &c)?;
    } else {
        out!("{}", render_text(&c, &na, &nb))?;
        print_warnings(&c.warnings)?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_report::compare::compare;

    /// The rule profiles were told by, on a parsed tree.
    fn is_profile(v: &Value) -> bool {
        v["regions"].is_array() && v["pages_armed"].is_u64() && v["schema_version"].is_string()
    }

    fn probe(text: &str) -> Option<String> {
        serde_json::from_str::<ProfileProbe>(text)
            .ok()
            .and_then(ProfileProbe::profile_version)
    }

    #[test]
    fn the_probe_tells_profiles_as_the_tree_did() {
        for text in [
            r#"{"schema_version": "1.9", "pages_armed": 3, "regions": []}"#,
            r#"{"regions": [{"a": [1, {"b": null}]}], "x": {"y": [1.5, "z"]}, "pages_armed": 0, "schema_version": "2.0"}"#,
            r#"{"schema_version": "1.9", "pages_armed": 3, "regions": {}}"#,
            r#"{"schema_version": "1.9", "pages_armed": -3, "regions": []}"#,
            r#"{"schema_version": "1.9", "pages_armed": 3.0, "regions": []}"#,
            r#"{"schema_version": "1.9", "pages_armed": "3", "regions": []}"#,
            r#"{"schema_version": 1, "pages_armed": 3, "regions": []}"#,
            r#"{"schema_version": "1.9", "regions": []}"#,
            r#"{"schema_version": "1.9", "pages_armed": 3}"#,
            r#"{"schema_version": "1.9", "pages_armed": 3, "regions": [], "regions": 1}"#,
            r#"{"schema_version": "1.9", "pages_armed": 3, "regions": 1, "regions": []}"#,
            r#"{"sch\u0065ma_version": "1.9", "pages_armed": 3, "regions": []}"#,
            r#"{"schema_version": "1.9", "command": "sweep", "sweep": {"runs": []}}"#,
            r#"["1.9", 3, []]"#,
            r#""schema_version""#,
            "null",
            "{}",
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            let p = probe(text);
            assert_eq!(p.is_some(), is_profile(&v), "{text}");
            assert_eq!(
                p.as_deref(),
                v["schema_version"].as_str().filter(|_| is_profile(&v))
            );
        }
        for not_json in [
            "",
            "hello",
            r#"{"schema_version": "1.9", "pages_armed": 3, "regions": [}"#,
        ] {
            assert_eq!(probe(not_json), None, "{not_json}");
        }
    }

    #[test]
    fn a_profile_is_read_into_its_struct_and_compared() {
        let d = std::env::temp_dir().join(format!("numalab-compare-doc-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let profile = |version: &str, samples: u64| {
            serde_json::json!({
                "schema_version": version, "command": ["./app"], "pid": 1, "rate": 0,
                "min_bytes": 65536, "page_size": 4096, "pages_armed": 2, "samples": samples,
                "cost": null, "sampled_for_s": null, "unattributed": 0, "remote_share": null,
                "regions": [{"kind": "heap", "site": "main app.c:10", "sampled": true,
                    "object": null, "thread": null, "stack": ["main app.c:10"],
                    "allocations": 1, "bytes": 1048576, "first_address": 4096,
                    "samples": samples, "reads": samples, "writes": 0, "unknown_access": 0,
                    "accesses": {"0": {"1": samples}}, "remote_share": 1.0,
                    "distance_ratio": null, "pages_by_node": {"1": 256}, "threads": {},
                    "first_touch": null, "pages_over_time": []}],
                "threads": [], "diagnoses": [], "warnings": []
            })
        };
        let write = |name: &str, v: Value| {
            let p = d.join(name);
            std::fs::write(&p, v.to_string()).unwrap();
            p
        };
        let a = write("a.json", profile(PROFILE_SCHEMA_VERSION, 40));
        let b = write("b.json", profile(PROFILE_SCHEMA_VERSION, 60));
        let (Doc::Profile(Ok(pa)), Doc::Profile(Ok(pb))) =
            (read_doc(&a).unwrap(), read_doc(&b).unwrap())
        else {
            panic!("two profiles expected");
        };
        assert_eq!((pa.samples, pb.regions[0].samples), (40, 60));
        let c = numalab::profile::compare::compare(&pa, &pb);
        assert_eq!(c.regions.len(), 1);
        assert_eq!(
            (c.regions[0].samples_a, c.regions[0].samples_b),
            (Some(40), Some(60))
        );
        assert_eq!(c.remote.share_b, Some(1.0));
        // The schema version is checked before the profile is parsed.
        let old = write(
            "old.json",
            serde_json::json!({"schema_version": "0.3", "pages_armed": 0, "regions": 7}),
        );
        let old_probe = write(
            "old-probe.json",
            serde_json::json!({"schema_version": "0.3", "pages_armed": 0, "regions": []}),
        );
        // Not a profile (its regions are no array), and no result either.
        assert!(
            matches!(read_doc(&old), Ok(Doc::Other(Err(e), _)) if e.msg.contains("no command"))
        );
        let Ok(Doc::Profile(Err(e))) = read_doc(&old_probe) else {
            panic!("a profile of an old schema expected");
        };
        assert_eq!(
            e.msg,
            format!(
                "{} is a profile of schema 0.3; this numalab reads schemas 1.x to {}.x",
                old_probe.display(),
                PROFILE_SCHEMA_VERSION.split('.').next().unwrap()
            )
        );
        let broken = write(
            "broken.json",
            serde_json::json!({"schema_version": PROFILE_SCHEMA_VERSION, "pages_armed": 0, "regions": []}),
        );
        let Ok(Doc::Profile(Err(e))) = read_doc(&broken) else {
            panic!("a profile that does not parse expected");
        };
        assert!(
            e.msg
                .contains("is not a profile numalab can read (missing field"),
            "{}",
            e.msg
        );
        let result = write(
            "r.json",
            serde_json::json!({"schema_version": "1.0", "command": "x"}),
        );
        assert!(matches!(read_doc(&result), Ok(Doc::Other(Ok(()), _))));
        std::fs::write(d.join("t.txt"), "hello").unwrap();
        assert!(read_doc(&d.join("t.txt")).is_err_and(|e| e.msg.contains("is not JSON")));
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn the_pages_compare_writes_carry_the_mark() {
        let c = compare(&serde_json::json!({}), &serde_json::json!({}));
        let page = render_html(&c, "a.json", "b.json");
        assert!(page[..512.min(page.len())].contains(PAGE_MARK));
    }
}
