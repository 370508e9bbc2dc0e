//! `numalab verify --pid PID`: where a running process's memory and threads are;
//! `numalab verify --ranks DIR`: where every rank of an MPI job was, from the
//! `run --per-rank --verify-json DIR/rank-{rank}.json` each rank wrote.

use crate::args::parsed;
use crate::output::out;
use crate::output::{print_result, CliError, CliResult};
use numalab::cluster::ranks::{check, RankRecord};
use numalab::placement::ProcessPlacement;
use numalab::IdSet;
use numalab_report::views::verify::{ranks_text, render};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The process to inspect (a positive process id).
    #[arg(long, value_name = "PID", allow_hyphen_values = true, value_parser = parsed(process_id), required_unless_present = "ranks")]
    pid: Option<i32>,
    /// Gather an MPI job's ranks: the JSON files `numalab run --per-rank --verify-json` wrote
    /// into DIR (one per rank); exit 3 when ranks overlap, stray or miss.
    #[arg(long, value_name = "DIR", conflicts_with = "pid")]
    ranks: Option<PathBuf>,
    /// List every mapping, also those with no resident page.
    #[arg(long)]
    all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A process id: a positive number.
fn process_id(t: &str) -> Result<i32, String> {
    t.trim()
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("'{t}' is not a process id (a positive number)"))
}

pub fn run(a: Args) -> CliResult {
    if let Some(dir) = &a.ranks {
        return ranks(dir, a.json);
    }
    let pid = a.pid.expect("clap requires --pid without --ranks");
    let p = ProcessPlacement::read(pid)?;
    if a.json {
        print_result("verify", &p)?;
    } else {
        out!("{}", render(&p, a.all))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The most rank files one gathering reads.
const MAX_RANK_FILES: usize = 100_000;

/// One rank's record from its `run --verify-json` file.
fn rank_record(v: &Value) -> Option<RankRecord> {
    let r = v.get("rank")?;
    let set = |x: Option<&Value>| -> IdSet {
        serde_json::from_value(x.cloned().unwrap_or_default()).unwrap_or_default()
    };
    Some(RankRecord {
        rank: r
            .get("rank")
            .and_then(Value::as_u64)
            .or_else(|| r.get("local_rank").and_then(Value::as_u64))? as u32,
        host: r.get("host")?.as_str()?.to_string(),
        cpus: set(r.get("cpus")),
        nodes: set(r.get("nodes")),
        seen_cpus: v
            .get("threads")?
            .as_array()?
            .iter()
            .filter_map(|t| t.get("last_cpu").and_then(Value::as_u64).map(|c| c as u32))
            .collect(),
        private_bytes_by_node: v
            .get("private_bytes_by_node")
            .and_then(Value::as_object)
            .map(|o| {
                o.iter()
                    .filter_map(|(k, b)| Some((k.parse().ok()?, b.as_u64()?)))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

#[derive(serde::Serialize)]
struct RanksReport {
    ranks: Vec<RankRecord>,
    problems: Vec<String>,
    /// Files that are not a rank's record, with why.
    skipped: Vec<String>,
}

fn ranks(dir: &Path, json: bool) -> CliResult {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| CliError::usage(format!("--ranks {}: {e}", dir.display())))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            paths.push(p);
            if paths.len() > MAX_RANK_FILES {
                return Err(CliError::usage(format!(
                    "--ranks {}: more than {MAX_RANK_FILES} JSON files",
                    dir.display()
                )));
            }
        }
    }
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for p in &paths {
        let text = match numalab::input::read_text(p, numalab::input::InputKind::ResultsJson) {
            Ok(t) => t,
            Err(e) => {
                skipped.push(e.to_string());
                continue;
            }
        };
        match serde_json::from_str::<Value>(&text).ok().as_ref().and_then(rank_record) {
            Some(r) => records.push(r),
            None => skipped.push(format!(
                "{}: not a rank's record (numalab run --per-rank --verify --verify-json writes one)",
                p.display()
            )),
        }
    }
    if records.is_empty() {
        return Err(CliError::usage(format!(
            "--ranks {}: no rank's record (run each rank as numalab run --per-rank DOMAIN --verify --verify-json {}/rank-{{rank}}.json -- PROGRAM)",
            dir.display(),
            dir.display()
        )));
    }
    records.sort_by(|a, b| (a.rank, &a.host).cmp(&(b.rank, &b.host)));
    let problems = check(&records);
    let report = RanksReport {
        ranks: records,
        problems,
        skipped,
    };
    if json {
        print_result("verify", &report)?;
    } else {
        let t = ranks_text(&report.ranks, &report.problems, &report.skipped);
        out!("{t}")?;
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
