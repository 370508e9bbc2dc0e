//! Slurm: the allocation a process runs in, and the job step that runs one
//! `numalab report` on every node of it (`numalab fleet report`).

use super::hostlist;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The job a process runs inside, from the variables Slurm sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub job_id: String,
    pub nodes: Vec<String>,
}

/// The allocation of this process, if it runs in one: `None` outside a job,
/// an error when its node list does not read.
pub fn allocation() -> Option<Result<Allocation, String>> {
    allocation_from(|k| std::env::var(k).ok())
}

/// [`allocation`] from a lookup of the environment (for tests).
pub fn allocation_from(var: impl Fn(&str) -> Option<String>) -> Option<Result<Allocation, String>> {
    let job_id = var("SLURM_JOB_ID").or_else(|| var("SLURM_JOBID"))?;
    let list = var("SLURM_JOB_NODELIST").or_else(|| var("SLURM_NODELIST"));
    Some(match list {
        Some(l) => hostlist::expand(&l)
            .map(|nodes| Allocation { job_id, nodes })
            .map_err(|e| format!("SLURM_JOB_NODELIST: {e}")),
        None => Err(format!(
            "job {job_id} has no SLURM_JOB_NODELIST: run inside the allocation (salloc, sbatch) or give --nodelist"
        )),
    })
}

/// The task-side script of a fleet step: each task writes its node's
/// report into FLEET/nodes/NODE and its output and exit status into
/// FLEET/logs/NODE.log and NODE.exit_status. The shell catches SIGINT and
/// SIGTERM with a handler that does nothing, so that it lives to record
/// the status while numalab report, which gets them too, stops and keeps
/// what it measured. (Not `trap '' ...`: a signal a shell ignores stays
/// ignored in the programs it starts, and the report would run on.)
const NODE_SCRIPT: &str = r#"fleet="$1"; shift
name="${SLURMD_NODENAME:-$(hostname -s)}"
mkdir -p "$fleet/nodes" "$fleet/logs" || exit 1
rm -f "$fleet/logs/$name.exit_status"
trap : INT TERM
"$@" -o "$fleet/nodes/$name" > "$fleet/logs/$name.log" 2>&1
echo $? > "$fleet/logs/$name.exit_status"
"#;

/// One `numalab report` per node of an allocation, as one Slurm job step.
#[derive(Debug, Clone)]
pub struct FleetStep {
    /// The `srun` to run.
    pub srun: PathBuf,
    /// Asks for (or, inside an allocation, uses) this many nodes.
    pub nodes: Option<usize>,
    pub partition: Option<String>,
    /// `srun -w`: exactly these nodes.
    pub nodelist: Option<String>,
    /// The step's time limit, in whole minutes (Slurm's unit).
    pub time_limit_min: Option<u64>,
    /// The fleet directory, on a filesystem every node shares.
    pub fleet_dir: PathBuf,
    /// The numalab binary, at the same path on every node.
    pub numalab: PathBuf,
    /// `numalab report`'s options, without `-o`.
    pub report_args: Vec<String>,
    /// Whether srun runs inside an allocation (a step of it) or asks for
    /// a new job.
    pub in_allocation: bool,
}

impl FleetStep {
    /// The `srun` argument list: one task per node, a node's failure not
    /// ending the others.
    pub fn args(&self) -> Vec<OsString> {
        // Each report pins its own threads to every CPU of its node, so its
        // one task must get them all. Slurm 22.05, seen on the test
        // cluster: within an allocation a step of one task per node gets
        // one CPU unless --whole; a new job with --ntasks-per-node=1 gets
        // one CPU even with --exclusive, while --exclusive with no task
        // count gets whole nodes and one task on each.
        let mut a: Vec<OsString> = vec![
            "--kill-on-bad-exit=0".into(),
            "--job-name=numalab-fleet".into(),
            "--cpu-bind=none".into(),
        ];
        let count = self.nodes.or_else(|| {
            self.nodelist
                .as_deref()
                .and_then(|l| hostlist::expand(l).ok())
                .map(|n| n.len())
        });
        if self.in_allocation {
            a.extend(["--ntasks-per-node=1".into(), "--whole".into()]);
            if let Some(n) = count {
                a.push(format!("--nodes={n}").into());
                a.push(format!("--ntasks={n}").into());
            }
        } else {
            a.push("--exclusive".into());
            if let Some(n) = count {
                a.push(format!("--nodes={n}").into());
            }
        }
        if let Some(p) = &self.partition {
            a.push(format!("--partition={p}").into());
        }
        if let Some(l) = &self.nodelist {
            a.push(format!("--nodelist={l}").into());
        }
        if let Some(t) = self.time_limit_min {
            a.push(format!("--time={t}").into());
        }
        a.extend([
            "sh".into(),
            "-c".into(),
            NODE_SCRIPT.into(),
            "numalab-fleet".into(),
        ]);
        a.push(self.fleet_dir.as_os_str().to_owned());
        a.push(self.numalab.as_os_str().to_owned());
        a.push("report".into());
        a.extend(self.report_args.iter().map(OsString::from));
        a
    }

    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.srun);
        c.args(self.args());
        c
    }
}

/// Where a node's log and exit status are, in a fleet directory.
pub fn node_log(fleet_dir: &Path, node: &str) -> (PathBuf, PathBuf) {
    let logs = fleet_dir.join("logs");
    (
        logs.join(format!("{node}.log")),
        logs.join(format!("{node}.exit_status")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocation_comes_from_slurms_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.to_string())
        };
        assert_eq!(allocation_from(env(&[])), None);
        assert_eq!(
            allocation_from(env(&[
                ("SLURM_JOB_ID", "42"),
                ("SLURM_JOB_NODELIST", "nlnode[1-2]")
            ])),
            Some(Ok(Allocation {
                job_id: "42".into(),
                nodes: vec!["nlnode1".into(), "nlnode2".into()]
            }))
        );
        let e = allocation_from(env(&[("SLURM_JOB_ID", "7")]))
            .unwrap()
            .unwrap_err();
        assert!(e.contains("no SLURM_JOB_NODELIST"), "{e}");
    }

    #[test]
    fn the_step_runs_one_report_per_node_into_the_fleet_directory() {
        let s = FleetStep {
            srun: "srun".into(),
            nodes: None,
            partition: Some("nl".into()),
            nodelist: Some("nlnode[1-2]".into()),
            time_limit_min: Some(5),
            fleet_dir: "/shared/fleet".into(),
            numalab: "/opt/numalab".into(),
            report_args: vec!["--parts".into(), "topology".into()],
            in_allocation: false,
        };
        let a: Vec<String> = s
            .args()
            .iter()
            .map(|x| x.to_string_lossy().into_owned())
            .collect();
        for want in [
            "--kill-on-bad-exit=0",
            "--partition=nl",
            "--nodelist=nlnode[1-2]",
            "--nodes=2",
            "--time=5",
            "--exclusive",
        ] {
            assert!(a.contains(&want.to_string()), "{want} in {a:?}");
        }
        // A new job: no task count (that would give each task one CPU).
        assert!(!a.iter().any(|x| x.starts_with("--ntasks")), "{a:?}");
        let tail = &a[a.len() - 5..];
        assert_eq!(
            tail,
            [
                "/shared/fleet",
                "/opt/numalab",
                "report",
                "--parts",
                "topology"
            ]
        );
        assert_eq!(
            node_log(Path::new("/f"), "n1").1,
            Path::new("/f/logs/n1.exit_status")
        );
    }
}
