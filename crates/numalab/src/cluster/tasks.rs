//! Where Slurm put a job's tasks, judged against the binding each task was
//! given: `numalab verify --slurm-job`. On each node of the job a helper
//! step lists the job's processes (`scontrol listpids`, which asks that
//! node's slurmd), reads each task's binding from the variables Slurm set
//! in it (`SLURM_CPU_BIND_TYPE`/`_LIST`, `SLURM_MEM_BIND_TYPE`/`_LIST`: what
//! `--cpu-bind` and `--mem-bind` became on that node) and its placement
//! from /proc; the front gathers the nodes' records and judges them.

use crate::placement::ProcessPlacement;
use crate::{IdSet, Machine};
use std::collections::BTreeMap;

/// The most processes one node's listing is read for.
pub const MAX_LISTED: usize = 100_000;

/// One line of `scontrol listpids`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedPid {
    pub pid: i32,
    pub job: String,
    /// A number, or `batch`, `extern`.
    pub step: String,
    /// The task's rank on the node and in the step; `None` for a process a
    /// task started (Slurm prints `-`).
    pub local: Option<u32>,
    pub global: Option<u32>,
}

/// `scontrol listpids` output (a header, then `PID JOBID STEPID LOCALID
/// GLOBALID`); lines that do not read are skipped. At most [`MAX_LISTED`].
pub fn parse_listpids(text: &str) -> Vec<ListedPid> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 5 {
                return None;
            }
            Some(ListedPid {
                pid: f[0].parse().ok().filter(|p| *p > 0)?,
                job: f[1].to_string(),
                step: f[2].to_string(),
                local: f[3].parse().ok(),
                global: f[4].parse().ok(),
            })
        })
        .take(MAX_LISTED)
        .collect()
}

/// A hex mask as Slurm writes it (`0x3`, `3`, `0xF0`): the ids of its set
/// bits. At most 8192 bits.
fn hex_mask(t: &str) -> Result<IdSet, String> {
    let digits = t.trim();
    let digits = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
        .unwrap_or(digits);
    if digits.is_empty() || digits.len() > 2048 {
        return Err(format!("'{t}' is not a hex mask"));
    }
    let mut set = IdSet::new();
    for (i, c) in digits.chars().rev().enumerate() {
        let v = c
            .to_digit(16)
            .ok_or_else(|| format!("'{t}' is not a hex mask"))?;
        for b in 0..4 {
            if v & (1 << b) != 0 {
                set.insert((i * 4 + b) as u32);
            }
        }
    }
    Ok(set)
}

fn decimal_list(kind: &str, list: &str) -> Result<Vec<u32>, String> {
    list.split(',')
        .map(|x| {
            x.trim()
                .parse()
                .map_err(|_| format!("{kind}{list}: '{x}' is not a number"))
        })
        .collect()
}

fn mask_list(kind: &str, list: &str) -> Result<Vec<IdSet>, String> {
    list.split(',')
        .map(|x| hex_mask(x).map_err(|e| format!("{kind}{list}: {e}")))
        .collect()
}

/// What `--cpu-bind` became for a step on one node.
#[derive(Debug, Clone, PartialEq)]
pub enum CpuBind {
    /// `none`, or not set: the task may run on every CPU the job has there.
    None,
    /// `mask_cpu:` (also what `cores`, `threads` and `sockets` become): task
    /// `i` gets mask `i mod n`.
    Mask(Vec<IdSet>),
    /// `map_cpu:`: task `i` gets CPU `i mod n`.
    Map(Vec<u32>),
    /// `rank`: task `i` gets the `i`-th CPU.
    Rank,
    /// `mask_ldom:`, `map_ldom:`: the CPUs of NUMA nodes.
    Ldom(Vec<IdSet>),
    /// `rank_ldom`: task `i` gets the CPUs of the `i`-th NUMA node.
    RankLdom,
}

impl CpuBind {
    /// From `SLURM_CPU_BIND_TYPE` and `SLURM_CPU_BIND_LIST`.
    pub fn from_env(kind: &str, list: &str) -> Result<CpuBind, String> {
        let kind = kind.trim();
        Ok(match kind {
            "" | "none" => CpuBind::None,
            "mask_cpu:" => CpuBind::Mask(mask_list(kind, list)?),
            "map_cpu:" => CpuBind::Map(decimal_list(kind, list)?),
            "rank" => CpuBind::Rank,
            "mask_ldom:" => CpuBind::Ldom(mask_list(kind, list)?),
            "map_ldom:" => CpuBind::Ldom(
                decimal_list(kind, list)?
                    .into_iter()
                    .map(IdSet::single)
                    .collect(),
            ),
            "rank_ldom" => CpuBind::RankLdom,
            other => return Err(format!("SLURM_CPU_BIND_TYPE '{other}' is not one numalab reads (none, mask_cpu:, map_cpu:, rank, mask_ldom:, map_ldom:, rank_ldom)")),
        })
    }

    /// The CPUs local task `i` is bound to on machine `m`; `None` unbound.
    pub fn expected(&self, m: &Machine, i: u32) -> Option<IdSet> {
        let i = i as usize;
        let node_cpus = |nodes: &IdSet| -> IdSet {
            nodes
                .iter()
                .filter_map(|n| m.node(n))
                .fold(IdSet::new(), |a, n| a.union(&n.cpus))
        };
        match self {
            CpuBind::None => None,
            CpuBind::Mask(v) if !v.is_empty() => Some(v[i % v.len()].clone()),
            CpuBind::Map(v) if !v.is_empty() => Some(IdSet::single(v[i % v.len()])),
            CpuBind::Ldom(v) if !v.is_empty() => Some(node_cpus(&v[i % v.len()])),
            CpuBind::Rank => {
                let all = &m.allowed_cpus;
                all.iter().nth(i % all.len().max(1)).map(IdSet::single)
            }
            CpuBind::RankLdom => {
                let nodes = m.cpu_nodes();
                let n = nodes.iter().nth(i % nodes.len().max(1));
                n.map(|n| node_cpus(&IdSet::single(n)))
            }
            _ => None,
        }
    }
}

/// What `--mem-bind` became for a step on one node.
#[derive(Debug, Clone, PartialEq)]
pub enum MemBind {
    /// `none`, or not set: first touch decides.
    None,
    /// `local`: the NUMA nodes of the task's CPUs.
    Local,
    /// `map_mem:`, `mask_mem:`: task `i` gets entry `i mod n`.
    Nodes(Vec<IdSet>),
    /// `rank`: task `i` gets the `i`-th NUMA node.
    Rank,
}

impl MemBind {
    /// From `SLURM_MEM_BIND_TYPE` and `SLURM_MEM_BIND_LIST`.
    pub fn from_env(kind: &str, list: &str) -> Result<MemBind, String> {
        let kind = kind.trim();
        Ok(match kind {
            "" | "none" => MemBind::None,
            "local" => MemBind::Local,
            "map_mem:" => MemBind::Nodes(
                decimal_list(kind, list)?
                    .into_iter()
                    .map(IdSet::single)
                    .collect(),
            ),
            "mask_mem:" => MemBind::Nodes(mask_list(kind, list)?),
            "rank" => MemBind::Rank,
            other => return Err(format!("SLURM_MEM_BIND_TYPE '{other}' is not one numalab reads (none, local, map_mem:, mask_mem:, rank)")),
        })
    }

    /// The memory nodes local task `i` is bound to, its CPUs being `cpus`;
    /// `None` unbound.
    pub fn expected(&self, m: &Machine, i: u32, cpus: &IdSet) -> Option<IdSet> {
        match self {
            MemBind::None => None,
            MemBind::Local => Some(cpus.iter().filter_map(|c| m.node_of_cpu(c)).collect()),
            MemBind::Nodes(v) if !v.is_empty() => Some(v[i as usize % v.len()].clone()),
            MemBind::Rank => {
                let nodes = m.memory_nodes();
                let n = nodes.iter().nth(i as usize % nodes.len().max(1));
                n.map(IdSet::single)
            }
            MemBind::Nodes(_) => None,
        }
    }
}

/// A binding that could not be read (the task wrote over its environment).
pub const UNKNOWN: &str = "unknown";

/// One task of a job as its node saw it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskRecord {
    pub job: String,
    pub step: String,
    /// Its rank in the step (`SLURM_PROCID`).
    pub task: Option<u32>,
    /// Its rank on the node (`SLURM_LOCALID`).
    pub local: Option<u32>,
    pub host: String,
    pub pid: i32,
    pub program: String,
    /// `--cpu-bind` and `--mem-bind` as Slurm set them in the task
    /// (`map_cpu:0,1`, `local`, `none`).
    pub cpu_bind: String,
    pub mem_bind: String,
    /// The step's task count (`SLURM_STEP_NUM_TASKS`), where set.
    pub step_tasks: Option<u32>,
    /// Where the task and the processes it started may run (their
    /// threads' allowed CPUs, together).
    pub cpus: IdSet,
    /// What its binding gives it; `None` unbound.
    pub bound_cpus: Option<IdSet>,
    pub bound_nodes: Option<IdSet>,
    /// The CPUs their threads were last seen on.
    pub seen_cpus: IdSet,
    /// Bytes of their own memory (anon, heap, stack) by node.
    pub private_bytes_by_node: BTreeMap<u32, u64>,
    /// The task's memory policy as numa_maps shows it (`bind:0`).
    pub policy: Option<String>,
    /// Processes the task started (folded into the figures above).
    pub children: Vec<i32>,
}

/// The `SLURM_*` variables of a process (/proc/PID/environ), by name.
fn slurm_environ(pid: i32) -> Result<BTreeMap<String, String>, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .map_err(|e| format!("/proc/{pid}/environ: {e}"))?;
    Ok(raw
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = std::str::from_utf8(kv).ok()?;
            let (k, v) = kv.split_once('=')?;
            k.starts_with("SLURM")
                .then(|| (k.to_string(), v.to_string()))
        })
        .collect())
}

/// The parent of `pid` (/proc/PID/stat, after the command's closing paren).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The task of the same step that started `pid` (following parents, at
/// most 64 steps), among `tasks`.
fn owning_task(pid: i32, tasks: &BTreeMap<i32, usize>) -> Option<usize> {
    let mut p = pid;
    for _ in 0..64 {
        p = parent(p)?;
        if let Some(i) = tasks.get(&p) {
            return Some(*i);
        }
        if p <= 1 {
            return None;
        }
    }
    None
}

fn fold(r: &mut TaskRecord, p: &ProcessPlacement) {
    for t in &p.threads {
        r.cpus = r.cpus.union(&t.cpus_allowed);
        if let Some(c) = t.last_cpu {
            r.seen_cpus.insert(c);
        }
    }
    for (n, b) in &p.private_bytes_by_node {
        *r.private_bytes_by_node.entry(*n).or_insert(0) += b;
    }
}

/// This node's records of the job's tasks from a `scontrol listpids`
/// listing, leaving out the step `skip_step` (the helper's own). Processes
/// that exited while being read are left out; a task's children are folded
/// into it. Errors: one line each, for processes that could not be read.
pub fn node_records(
    m: &Machine,
    host: &str,
    listed: &[ListedPid],
    skip_step: Option<&str>,
) -> (Vec<TaskRecord>, Vec<String>) {
    let mut records: Vec<TaskRecord> = Vec::new();
    let mut errors = Vec::new();
    let mut task_index: BTreeMap<i32, usize> = BTreeMap::new();
    let mine = |l: &&ListedPid| Some(l.step.as_str()) != skip_step;
    for l in listed.iter().filter(mine).filter(|l| l.local.is_some()) {
        let (env, placement) = match (slurm_environ(l.pid), ProcessPlacement::read(l.pid)) {
            (Ok(e), Ok(p)) => (e, p),
            (Err(e), _) => {
                errors.push(format!("{host}: task pid {}: {e}", l.pid));
                continue;
            }
            (_, Err(e)) => {
                errors.push(format!("{host}: task pid {}: {e}", l.pid));
                continue;
            }
        };
        let get = |k: &str| env.get(k).map(String::as_str).unwrap_or("");
        let local = l.local.unwrap_or(0);
        // slurmstepd sets SLURM_JOB_ID in every task; a task without it has
        // written over its environment (redis-server does, for its process
        // title), and its binding cannot be read there.
        let readable = env.contains_key("SLURM_JOB_ID");
        let cpu_bind = if readable {
            CpuBind::from_env(get("SLURM_CPU_BIND_TYPE"), get("SLURM_CPU_BIND_LIST"))
        } else {
            Ok(CpuBind::None)
        };
        let mem_bind = if readable {
            MemBind::from_env(get("SLURM_MEM_BIND_TYPE"), get("SLURM_MEM_BIND_LIST"))
        } else {
            Ok(MemBind::None)
        };
        let said = |kind: &str, list: &str| {
            if readable {
                spelled(get(kind), get(list))
            } else {
                UNKNOWN.to_string()
            }
        };
        let (bound_cpus, bind_error) = match &cpu_bind {
            Ok(b) => (b.expected(m, local), None),
            Err(e) => (None, Some(e.clone())),
        };
        let mut r = TaskRecord {
            job: l.job.clone(),
            step: l.step.clone(),
            task: l.global,
            local: l.local,
            host: host.to_string(),
            pid: l.pid,
            program: placement.program.clone(),
            cpu_bind: said("SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST"),
            mem_bind: said("SLURM_MEM_BIND_TYPE", "SLURM_MEM_BIND_LIST"),
            step_tasks: get("SLURM_STEP_NUM_TASKS").parse().ok(),
            cpus: IdSet::new(),
            bound_cpus,
            bound_nodes: None,
            seen_cpus: IdSet::new(),
            private_bytes_by_node: BTreeMap::new(),
            policy: placement.process_policy.clone(),
            children: Vec::new(),
        };
        fold(&mut r, &placement);
        let cpus_for_mem = r.bound_cpus.clone().unwrap_or_else(|| r.cpus.clone());
        match &mem_bind {
            Ok(b) => r.bound_nodes = b.expected(m, local, &cpus_for_mem),
            Err(e) => errors.push(format!("{host}: task pid {}: {e}", l.pid)),
        }
        if let Some(e) = bind_error {
            errors.push(format!("{host}: task pid {}: {e}", l.pid));
        }
        task_index.insert(l.pid, records.len());
        records.push(r);
    }
    for l in listed.iter().filter(mine).filter(|l| l.local.is_none()) {
        let Some(i) = owning_task(l.pid, &task_index) else {
            continue;
        };
        if let Ok(p) = ProcessPlacement::read(l.pid) {
            fold(&mut records[i], &p);
            records[i].children.push(l.pid);
        }
    }
    (records, errors)
}

/// A binding as the user spells it: `map_cpu:0,1`, `local`, `none`.
fn spelled(kind: &str, list: &str) -> String {
    match kind.trim() {
        "" => "none".to_string(),
        k if k.ends_with(':') => format!("{k}{list}"),
        k => k.to_string(),
    }
}

/// `JOB` or `JOB.STEP` as `verify --slurm-job` takes it (`1234`,
/// `1234_7` for an array task, `1234.0`, `1234.batch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub job: String,
    pub step: Option<String>,
}

impl JobSpec {
    pub fn parse(t: &str) -> Result<JobSpec, String> {
        let t = t.trim();
        let (job, step) = match t.split_once('.') {
            Some((j, s)) => (j, Some(s)),
            None => (t, None),
        };
        let job_ok = !job.is_empty()
            && job.len() <= 32
            && job.starts_with(|c: char| c.is_ascii_digit())
            && job.chars().all(|c| c.is_ascii_digit() || c == '_');
        let step_ok = step.is_none_or(|s| {
            !s.is_empty()
                && s.len() <= 16
                && (s.chars().all(|c| c.is_ascii_digit()) || s == "batch" || s == "extern")
        });
        if job_ok && step_ok {
            Ok(JobSpec {
                job: job.to_string(),
                step: step.map(str::to_string),
            })
        } else {
            Err(format!(
                "'{}' is not a Slurm job: give a job id (1234, 1234_7 for an array task), optionally with a step (1234.0, 1234.batch)",
                t.chars().take(40).collect::<String>()
            ))
        }
    }
}

/// What `scontrol show job -o JOB` says that verifying needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub state: String,
    /// Slurm's host list (`nlnode[1-2]`) and its names.
    pub nodelist: String,
    pub nodes: Vec<String>,
}

/// Reads `scontrol show job -o` (one line of `Key=Value` fields).
pub fn parse_show_job(text: &str) -> Result<JobInfo, String> {
    let field = |k: &str| -> Option<&str> {
        text.split_whitespace()
            .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
    };
    let state = field("JobState").ok_or("scontrol show job printed no JobState")?;
    let nodelist = field("NodeList").ok_or("scontrol show job printed no NodeList")?;
    let nodes = if nodelist == "(null)" || nodelist.is_empty() {
        Vec::new()
    } else {
        super::hostlist::expand(nodelist).map_err(|e| format!("NodeList={nodelist}: {e}"))?
    };
    Ok(JobInfo {
        state: state.to_string(),
        nodelist: nodelist.to_string(),
        nodes,
    })
}

/// The `srun` arguments of the helper step: one task on every node of the
/// running job, beside its steps (`--overlap`), unbound, each running
/// `numalab verify --slurm-node JOB` there.
pub fn helper_step_args(
    job: &str,
    info: &JobInfo,
    numalab: &std::path::Path,
) -> Vec<std::ffi::OsString> {
    let n = info.nodes.len();
    let mut a: Vec<std::ffi::OsString> = vec![
        format!("--jobid={job}").into(),
        "--overlap".into(),
        format!("--nodes={n}").into(),
        format!("--ntasks={n}").into(),
        "--ntasks-per-node=1".into(),
        format!("--nodelist={}", info.nodelist).into(),
        "--cpu-bind=none".into(),
        "--mem-bind=none".into(),
        "--kill-on-bad-exit=0".into(),
        "--job-name=numalab-verify".into(),
    ];
    a.push(numalab.as_os_str().to_owned());
    a.extend(["verify".into(), "--slurm-node".into(), job.into()]);
    a
}

/// How a task is named in a finding: `task 3 (step 0, nlnode2, local 1)`.
pub fn task_name(r: &TaskRecord) -> String {
    let task = r
        .task
        .map_or_else(|| format!("pid {}", r.pid), |t| format!("task {t}"));
    let local = r.local.map(|l| format!(", local {l}")).unwrap_or_default();
    format!("{task} (step {}, {}{local})", r.step, r.host)
}

/// What a job's tasks break, one sentence each: tasks that may run on CPUs
/// outside their binding, threads seen outside it, memory off the bound
/// nodes (above 1% of the task's), steps whose tasks were not all found.
pub fn judge(records: &[TaskRecord]) -> Vec<String> {
    let mut bad = Vec::new();
    for r in records {
        if let Some(b) = &r.bound_cpus {
            let outside = r.cpus.difference(b);
            if !outside.is_empty() {
                bad.push(format!(
                    "{}: may run on CPUs {}, outside CPUs {} that --cpu-bind={} gives it",
                    task_name(r),
                    outside,
                    b,
                    r.cpu_bind
                ));
            }
        }
        let stray = r.seen_cpus.difference(&r.cpus);
        if !stray.is_empty() {
            bad.push(format!(
                "{}: threads ran on CPUs {stray}, outside the CPUs it may use ({})",
                task_name(r),
                r.cpus
            ));
        }
        if let Some(nodes) = &r.bound_nodes {
            let total: u64 = r.private_bytes_by_node.values().sum();
            let off: BTreeMap<u32, u64> = r
                .private_bytes_by_node
                .iter()
                .filter(|(n, b)| !nodes.contains(**n) && **b > 0)
                .map(|(n, b)| (*n, *b))
                .collect();
            let off_total: u64 = off.values().sum();
            if total > 0 && off_total * 100 > total {
                let where_: IdSet = off.keys().copied().collect();
                bad.push(format!(
                    "{}: {:.0}% of its memory is on node {where_}, outside node {nodes} that --mem-bind={} gives it",
                    task_name(r),
                    100.0 * off_total as f64 / total as f64,
                    r.mem_bind
                ));
            }
        }
    }
    // Steps whose tasks did not all turn up.
    let mut steps: BTreeMap<&str, (Option<u32>, IdSet)> = BTreeMap::new();
    for r in records {
        let e = steps.entry(r.step.as_str()).or_default();
        e.0 = e.0.or(r.step_tasks);
        if let Some(t) = r.task {
            e.1.insert(t);
        }
    }
    for (step, (n, seen)) in steps {
        if let Some(n) = n.filter(|n| *n > 0) {
            let missing: IdSet = (0..n).filter(|t| !seen.contains(*t)).collect();
            if !missing.is_empty() {
                bad.push(format!(
                    "step {step}: tasks {missing} of its {n} were not found on any node"
                ));
            }
        }
    }
    bad
}

/// Things worth knowing that break no binding: tasks left unbound, tasks of
/// one step sharing CPUs on a node.
pub fn notes(records: &[TaskRecord]) -> Vec<String> {
    let mut out = Vec::new();
    let tasks_where = |f: &dyn Fn(&TaskRecord) -> bool| -> Vec<String> {
        records
            .iter()
            .filter(|r| r.task.is_some() && f(r))
            .map(|r| r.task.unwrap_or(0).to_string())
            .collect()
    };
    let unbound = tasks_where(&|r| r.bound_cpus.is_none() && r.cpu_bind != UNKNOWN);
    if !unbound.is_empty() {
        out.push(format!(
            "tasks {} have no CPU binding (--cpu-bind=none): the kernel may move them",
            unbound.join(", ")
        ));
    }
    let unknown = tasks_where(&|r| r.cpu_bind == UNKNOWN);
    if !unknown.is_empty() {
        out.push(format!(
            "tasks {}: their binding cannot be read, the program wrote over its environment (where Slurm sets SLURM_CPU_BIND; redis-server does so for its process title): shown where they may run, not judged against --cpu-bind or --mem-bind",
            unknown.join(", ")
        ));
    }
    for (i, a) in records.iter().enumerate() {
        for b in &records[i + 1..] {
            if a.host == b.host && a.step == b.step && a.cpus.intersects(&b.cpus) {
                out.push(format!(
                    "{} and {} share CPUs {}",
                    task_name(a),
                    task_name(b),
                    a.cpus.intersection(&b.cpus)
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpids_lines_read_with_tasks_and_their_children() {
        let t = "PID      JOBID    STEPID   LOCALID GLOBALID\n\
                 32253    1        0        0       2       \n\
                 32304    1        1        -       -       \n\
                 77       1        batch    0       0\n\
                 garbage\n";
        let l = parse_listpids(t);
        assert_eq!(l.len(), 3);
        assert_eq!(
            l[0],
            ListedPid {
                pid: 32253,
                job: "1".into(),
                step: "0".into(),
                local: Some(0),
                global: Some(2)
            }
        );
        assert_eq!((l[1].local, l[1].global), (None, None));
        assert_eq!(l[2].step, "batch");
    }

    #[test]
    fn job_specs_and_scontrol_show_job_read() {
        assert_eq!(
            JobSpec::parse("1234.0").unwrap(),
            JobSpec {
                job: "1234".into(),
                step: Some("0".into())
            }
        );
        assert_eq!(JobSpec::parse("12_3").unwrap().step, None);
        assert_eq!(
            JobSpec::parse("9.batch").unwrap().step.as_deref(),
            Some("batch")
        );
        for bad in [
            "",
            "x1",
            "1.",
            "1.x",
            "1;rm",
            "12345678901234567890123456789012345",
        ] {
            let e = JobSpec::parse(bad).unwrap_err();
            assert!(
                e.contains("is not a Slurm job: give a job id"),
                "{bad}: {e}"
            );
        }
        let show = "JobId=1 JobName=vt UserId=root(0) JobState=RUNNING Reason=None NodeList=nlnode[1-2] BatchHost=nlnode1 NumNodes=2   Nodes=nlnode[1-2] CPU_IDs=0-1 Mem=2000";
        let j = parse_show_job(show).unwrap();
        assert_eq!(j.state, "RUNNING");
        assert_eq!(j.nodes, vec!["nlnode1".to_string(), "nlnode2".to_string()]);
        let a = helper_step_args("1", &j, std::path::Path::new("/x/numalab"));
        let a: Vec<String> = a.iter().map(|x| x.to_string_lossy().into_owned()).collect();
        assert_eq!(a[0..3], ["--jobid=1", "--overlap", "--nodes=2"]);
        assert_eq!(
            a[a.len() - 4..],
            ["/x/numalab", "verify", "--slurm-node", "1"]
        );
        assert!(parse_show_job("JobId=1 NodeList=x")
            .unwrap_err()
            .contains("no JobState"));
    }

    #[test]
    fn bindings_read_as_slurm_writes_them() {
        assert_eq!(
            CpuBind::from_env("mask_cpu:", "0x1,0x2").unwrap(),
            CpuBind::Mask(vec![IdSet::single(0), IdSet::single(1)])
        );
        assert_eq!(
            CpuBind::from_env("mask_cpu:", "3,F0").unwrap(),
            CpuBind::Mask(vec![
                IdSet::parse_list("0-1").unwrap(),
                IdSet::parse_list("4-7").unwrap()
            ])
        );
        assert_eq!(
            CpuBind::from_env("map_cpu:", "0,1").unwrap(),
            CpuBind::Map(vec![0, 1])
        );
        assert_eq!(CpuBind::from_env("", "").unwrap(), CpuBind::None);
        let e = CpuBind::from_env("map_cpu:", "0,x").unwrap_err();
        assert!(e.contains("'x' is not a number"), "{e}");
        let e = CpuBind::from_env("weird", "").unwrap_err();
        assert!(e.contains("none, mask_cpu:, map_cpu:"), "{e}");
        assert_eq!(
            MemBind::from_env("map_mem:", "1,0").unwrap(),
            MemBind::Nodes(vec![IdSet::single(1), IdSet::single(0)])
        );
        assert_eq!(MemBind::from_env("local", "").unwrap(), MemBind::Local);
        assert_eq!(spelled("map_cpu:", "0,1"), "map_cpu:0,1");
        assert_eq!(spelled("", ""), "none");
        assert_eq!(spelled("local", ""), "local");
    }

    #[test]
    fn expected_sets_on_a_four_node_machine() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml");
        let m = Machine::from_xml_file(&p).unwrap();
        // Quartet: 4 nodes x 2 CPUs, CPUs 2n and 2n+1 on node n.
        let map = CpuBind::Map(vec![0, 2, 4, 6]);
        assert_eq!(map.expected(&m, 5), Some(IdSet::single(2)));
        let ldom = CpuBind::Ldom(vec![IdSet::single(3)]);
        assert_eq!(
            ldom.expected(&m, 1),
            Some(IdSet::parse_list("6-7").unwrap())
        );
        assert_eq!(
            CpuBind::RankLdom.expected(&m, 2),
            Some(IdSet::parse_list("4-5").unwrap())
        );
        assert_eq!(CpuBind::None.expected(&m, 0), None);
        let cpus = IdSet::parse_list("2,5").unwrap();
        assert_eq!(
            MemBind::Local.expected(&m, 0, &cpus),
            Some(IdSet::parse_list("1-2").unwrap())
        );
        assert_eq!(MemBind::Rank.expected(&m, 3, &cpus), Some(IdSet::single(3)));
    }

    fn rec(
        task: u32,
        host: &str,
        bound: Option<&str>,
        cpus: &str,
        mem: &[(u32, u64)],
    ) -> TaskRecord {
        TaskRecord {
            job: "7".into(),
            step: "0".into(),
            task: Some(task),
            local: Some(task % 2),
            host: host.into(),
            pid: 100 + task as i32,
            program: "app".into(),
            cpu_bind: "map_cpu:0,2".into(),
            mem_bind: "local".into(),
            step_tasks: Some(4),
            cpus: IdSet::parse_list(cpus).unwrap(),
            bound_cpus: bound.map(|b| IdSet::parse_list(b).unwrap()),
            bound_nodes: bound.map(|_| IdSet::single(task % 2)),
            seen_cpus: IdSet::parse_list(cpus).unwrap(),
            private_bytes_by_node: mem.iter().copied().collect(),
            policy: None,
            children: vec![],
        }
    }

    #[test]
    fn a_task_off_its_binding_or_its_node_and_a_missing_task_are_named() {
        let good = vec![
            rec(0, "a", Some("0"), "0", &[(0, 1 << 20)]),
            rec(1, "a", Some("2"), "2", &[(1, 1 << 20)]),
            rec(2, "b", Some("0"), "0", &[(0, 1 << 20)]),
            rec(3, "b", Some("2"), "2", &[(1, 1 << 20), (0, 1 << 10)]),
        ];
        assert_eq!(judge(&good), Vec::<String>::new());
        let mut bad = good.clone();
        bad[1].cpus = IdSet::parse_list("0-3").unwrap();
        bad[3].private_bytes_by_node = [(0u32, 3u64 << 20), (1, 1 << 20)].into();
        bad.remove(2);
        let j = judge(&bad);
        assert_eq!(
            j,
            vec![
                "task 1 (step 0, a, local 1): may run on CPUs 0-1,3, outside CPUs 2 that --cpu-bind=map_cpu:0,2 gives it".to_string(),
                "task 3 (step 0, b, local 1): 75% of its memory is on node 0, outside node 1 that --mem-bind=local gives it".to_string(),
                "step 0: tasks 2 of its 4 were not found on any node".to_string(),
            ]
        );
        let mut unbound = good;
        unbound[0].bound_cpus = None;
        unbound[0].cpus = IdSet::parse_list("0-3").unwrap();
        let n = notes(&unbound);
        assert_eq!(
            n[0],
            "tasks 0 have no CPU binding (--cpu-bind=none): the kernel may move them"
        );
        assert_eq!(
            n[1],
            "task 0 (step 0, a, local 0) and task 1 (step 0, a, local 1) share CPUs 2"
        );
    }
}
