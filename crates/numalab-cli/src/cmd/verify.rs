//! `numalab verify --pid PID`: where a running process's memory and threads are;
//! `numalab verify --ranks DIR`: where every rank of an MPI job was, from the
//! `run --per-rank --verify-json DIR/rank-{rank}.json` each rank wrote;
//! `numalab verify --slurm-job JOB`: where Slurm put a running job's tasks,
//! judged against their `--cpu-bind` and `--mem-bind` (one helper task on
//! each of the job's nodes, `--slurm-node`, reads that node's tasks).

use crate::args::{parsed, whole};
use crate::output::out;
use crate::output::{load_machine, outln, print_result, CliError, CliResult};
use numalab::cluster::ranks::{check, RankRecord};
use numalab::cluster::tasks::{
    helper_step_args, judge, node_records, notes, parse_listpids, parse_show_job, JobInfo, JobSpec,
    TaskRecord,
};
use numalab::placement::ProcessPlacement;
use numalab_report::views::verify::{ranks_text, render, slurm_text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// The process to inspect (a positive process id).
    #[arg(long, value_name = "PID", allow_hyphen_values = true, value_parser = parsed(process_id), required_unless_present_any = ["ranks", "slurm_job", "slurm_node"])]
    pid: Option<i32>,
    /// Gather an MPI job's ranks: the JSON files `numalab run --per-rank --verify-json` wrote
    /// into DIR (one per rank); exit 3 when ranks overlap, stray or miss.
    #[arg(long, value_name = "DIR", conflicts_with = "pid")]
    ranks: Option<PathBuf>,
    /// Where Slurm put a running job's tasks (JOB or JOB.STEP; with no value, the job this runs
    /// in), judged against each task's --cpu-bind and --mem-bind; exit 3 when a task breaks
    /// its binding or a node does not answer.
    #[arg(long, value_name = "JOB[.STEP]", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["pid", "ranks"])]
    slurm_job: Option<String>,
    /// (Run by --slurm-job on each node of the job: prints that node's tasks.)
    #[arg(long, hide = true, value_name = "JOB", conflicts_with_all = ["pid", "ranks", "slurm_job"])]
    slurm_node: Option<String>,
    /// (With --slurm-node: a step left out, the one `--slurm-job` itself runs in.)
    #[arg(long, hide = true, value_name = "STEP", requires = "slurm_node")]
    skip_step: Option<String>,
    /// With --slurm-job: the srun to use.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "srun",
        requires = "slurm_job"
    )]
    srun: PathBuf,
    /// With --slurm-job: seconds to wait for the nodes' answers (1 to 3600).
    #[arg(long, value_name = "SECONDS", default_value = "120", requires = "slurm_job", value_parser = whole(1, 3600))]
    timeout: usize,
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
    if let Some(job) = &a.slurm_node {
        return slurm_node(job, a.skip_step.as_deref());
    }
    if let Some(job) = &a.slurm_job {
        return slurm_job(job, &a);
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
        match serde_json::from_str::<Value>(&text).ok().as_ref().and_then(RankRecord::from_verify_json) {
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

/// `--slurm-node JOB`, on one node of the job: its tasks as lines
/// `numalab-node HOST`, `numalab-task JSON`, `numalab-error TEXT`, each
/// written whole (srun interleaves the nodes' output line by line).
fn slurm_node(job: &str, skip: Option<&str>) -> CliResult {
    let spec = JobSpec::parse(job).map_err(CliError::usage)?;
    let host = std::env::var("SLURMD_NODENAME")
        .ok()
        .or_else(numalab::cluster::host_name)
        .unwrap_or_else(|| "?".into());
    outln!("numalab-node {host}")?;
    let listed = match Command::new("scontrol")
        .args(["listpids", &spec.job])
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => parse_listpids(&String::from_utf8_lossy(&o.stdout)),
        Ok(o) => {
            let why = String::from_utf8_lossy(&o.stderr);
            outln!(
                "numalab-error {host}: scontrol listpids {}: {}",
                spec.job,
                why.lines().last().unwrap_or("failed").trim()
            )?;
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => {
            outln!("numalab-error {host}: cannot run scontrol: {e}")?;
            return Ok(ExitCode::FAILURE);
        }
    };
    let m = load_machine(None)?;
    let own_step = std::env::var("SLURM_STEP_ID").ok();
    let (mut records, errors) = node_records(&m, &host, &listed, own_step.as_deref());
    records.retain(|r| Some(r.step.as_str()) != skip);
    for r in &records {
        let line = serde_json::to_string(r)
            .map_err(|e| CliError::failed(format!("a task's record: {e}")))?;
        outln!("numalab-task {line}")?;
    }
    for e in &errors {
        outln!("numalab-error {e}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The most bytes of the helper step's output read.
const MAX_STEP_OUTPUT: usize = 256 << 20;

/// Runs `cmd` to its end or `timeout`, its stdout kept (at most
/// [`MAX_STEP_OUTPUT`]) and its stderr's last lines; SIGTERM then SIGKILL
/// past the timeout. `Ok((stdout, stderr, None))` when it timed out.
fn run_bounded(
    mut cmd: Command,
    timeout: Duration,
) -> std::io::Result<(String, String, Option<i32>, bool)> {
    use std::io::Read;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r
                .by_ref()
                .take(MAX_STEP_OUTPUT as u64)
                .read_to_end(&mut buf);
            // Drain the rest so the child never blocks on a full pipe.
            let _ = std::io::copy(&mut r, &mut std::io::sink());
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = read_all(Box::new(child.stdout.take().expect("piped")));
    let err = read_all(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if Instant::now() >= deadline && !timed_out {
            timed_out = true;
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        if Instant::now() >= deadline + Duration::from_secs(10) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    Ok((out, err, status.code(), timed_out))
}

#[derive(serde::Serialize)]
struct SlurmReport {
    job: String,
    step: Option<String>,
    nodelist: String,
    tasks: Vec<TaskRecord>,
    problems: Vec<String>,
    notes: Vec<String>,
}

/// The job `--slurm-job` names, or with no value the one this runs in.
fn job_spec(given: &str) -> Result<JobSpec, CliError> {
    if given.is_empty() {
        let id = std::env::var("SLURM_JOB_ID").map_err(|_| {
            CliError::usage(
                "--slurm-job without a job id verifies the job it runs in, and SLURM_JOB_ID is not set: give one, e.g. --slurm-job 1234",
            )
        })?;
        JobSpec::parse(&id).map_err(|e| CliError::usage(format!("SLURM_JOB_ID: {e}")))
    } else {
        JobSpec::parse(given).map_err(|e| CliError::usage(format!("--slurm-job: {e}")))
    }
}

/// `scontrol show job`'s word on the job: running, on which nodes.
fn running_job(spec: &JobSpec) -> Result<JobInfo, CliError> {
    let show = Command::new("scontrol")
        .args(["show", "job", "-o", &spec.job])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            CliError::failed(format!(
                "cannot run scontrol ({e}): numalab verify --slurm-job runs where Slurm's commands do (install slurm-client)"
            ))
        })?;
    if !show.status.success() {
        let why = String::from_utf8_lossy(&show.stderr);
        return Err(CliError::usage(format!(
            "--slurm-job {}: {}",
            spec.job,
            why.lines()
                .last()
                .unwrap_or("scontrol show job failed")
                .trim()
        )));
    }
    let info = parse_show_job(&String::from_utf8_lossy(&show.stdout))
        .map_err(|e| CliError::failed(format!("--slurm-job {}: {e}", spec.job)))?;
    if info.state != "RUNNING" || info.nodes.is_empty() {
        return Err(CliError::usage(format!(
            "--slurm-job {}: the job is {}: only a running job's tasks can be verified",
            spec.job, info.state
        )));
    }
    Ok(info)
}

/// The helper step's srun, described by its arguments alone: inside a
/// step, srun would read the step's own sizes and bindings
/// (SLURM_NNODES=1: "Only allocated 1 nodes asked for 2"). Run from inside
/// the job, its own step is not one of the job's tasks to judge.
fn helper_command(srun: &Path, spec: &JobSpec, info: &JobInfo) -> Result<Command, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("where is numalab itself: {e}")))?;
    let mut cmd = Command::new(srun);
    cmd.args(helper_step_args(&spec.job, info, &exe));
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("SLURM_") && k != "SLURM_CONF" {
            cmd.env_remove(k.as_ref());
        }
    }
    let here = std::env::var("SLURM_JOB_ID").ok();
    if let (Some(j), Some(st)) = (here, std::env::var("SLURM_STEP_ID").ok()) {
        if j == spec.job {
            cmd.args(["--skip-step", &st]);
        }
    }
    Ok(cmd)
}

/// The nodes' lines: the hosts that answered, their tasks, and what could
/// not be read.
fn read_answers(out: &str) -> (Vec<String>, Vec<TaskRecord>, Vec<String>) {
    let mut answered = Vec::new();
    let mut tasks = Vec::new();
    let mut problems = Vec::new();
    for line in out.lines() {
        if let Some(h) = line.strip_prefix("numalab-node ") {
            answered.push(h.trim().to_string());
        } else if let Some(j) = line.strip_prefix("numalab-task ") {
            match serde_json::from_str::<TaskRecord>(j) {
                Ok(r) => tasks.push(r),
                Err(e) => problems.push(format!("a node's record does not read: {e}")),
            }
        } else if let Some(e) = line.strip_prefix("numalab-error ") {
            problems.push(format!("could not read: {e}"));
        }
    }
    (answered, tasks, problems)
}

/// Why a node gave no answer, from how the helper step ended.
fn no_answer(timed_out: bool, timeout: usize, code: Option<i32>, stderr: &str) -> String {
    if timed_out {
        return format!("no answer within {timeout} s (--timeout)");
    }
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    match (code, last) {
        (Some(0), _) => "no answer".to_string(),
        (c, Some(l)) => format!(
            "no answer (srun exited with status {}: {})",
            c.unwrap_or(-1),
            l.trim()
        ),
        (c, None) => format!("no answer (srun exited with status {})", c.unwrap_or(-1)),
    }
}

/// `--slurm-job JOB[.STEP]`: the helper step on every node of the job,
/// their records gathered and judged.
fn slurm_job(given: &str, a: &Args) -> CliResult {
    let spec = job_spec(given)?;
    let info = running_job(&spec)?;
    let cmd = helper_command(&a.srun, &spec, &info)?;
    let (out, err, code, timed_out) = run_bounded(cmd, Duration::from_secs(a.timeout as u64))
        .map_err(|e| CliError::failed(format!("cannot run {}: {e}", a.srun.display())))?;
    let (answered, mut tasks, mut problems) = read_answers(&out);
    let why = no_answer(timed_out, a.timeout, code, &err);
    for n in info.nodes.iter().filter(|n| !answered.contains(n)) {
        problems.push(format!("{n}: {why}"));
    }
    if let Some(step) = &spec.step {
        tasks.retain(|t| &t.step == step);
    }
    tasks.sort_by(|x, y| {
        (step_order(&x.step), x.task, &x.host, x.pid).cmp(&(
            step_order(&y.step),
            y.task,
            &y.host,
            y.pid,
        ))
    });
    problems.extend(judge(&tasks));
    let report = SlurmReport {
        job: spec.job.clone(),
        step: spec.step.clone(),
        nodelist: info.nodelist.clone(),
        notes: notes(&tasks),
        tasks,
        problems,
    };
    if a.json {
        print_result("verify", &report)?;
    } else {
        let r = &report;
        let t = slurm_text(
            &r.job,
            r.step.as_deref(),
            &r.nodelist,
            &r.tasks,
            &r.problems,
            &r.notes,
        );
        out!("{t}")?;
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

/// Numbered steps in order, then `batch`, `extern`.
fn step_order(s: &str) -> (u8, u64) {
    s.parse().map_or((1, 0), |n| (0, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_lines_and_why_a_node_is_silent() {
        let out = "numalab-node a\nnumalab-task {bad\nnumalab-error a: task pid 7: gone\nstray\nnumalab-node b\n";
        let (answered, tasks, problems) = read_answers(out);
        assert_eq!(answered, ["a", "b"]);
        assert!(tasks.is_empty());
        assert_eq!(problems.len(), 2);
        assert!(
            problems[0].starts_with("a node's record does not read: "),
            "{problems:?}"
        );
        assert_eq!(problems[1], "could not read: a: task pid 7: gone");
        assert_eq!(
            no_answer(false, 120, Some(1), "srun: error: x\nsrun: error: Unable to contact slurm controller\n\n"),
            "no answer (srun exited with status 1: srun: error: Unable to contact slurm controller)"
        );
        assert_eq!(
            no_answer(true, 5, None, ""),
            "no answer within 5 s (--timeout)"
        );
        assert_eq!(no_answer(false, 5, Some(0), "x"), "no answer");
    }
}
