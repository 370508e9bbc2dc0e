//! The placement options of the commands that launch a program (`run`,
//! `profile`): CPUs and a memory policy, numactl's names as aliases.

use crate::args::{choice, cpuless_hint};
use crate::output::CliError;
use numalab::placement::{LaunchPlan, ListMeaning, MemoryPolicy, ResourceSet};
use numalab::Machine;

#[derive(clap::Args)]
pub struct LaunchArgs {
    /// CPUs the command may run on (set grammar: 0-3, node:1, package:0, l3:0, ...).
    #[arg(long, value_name = "SET")]
    cpus: Option<String>,
    /// Memory policy of the command (see `numalab place --help`).
    #[arg(long = "mem", value_name = "POLICY")]
    mem: Option<String>,
    /// numactl alias: allocate only on NODES (bind:NODES).
    #[arg(short = 'm', long, value_name = "NODES")]
    membind: Option<String>,
    /// numactl alias: interleave over NODES (interleave:NODES).
    #[arg(short = 'i', long, value_name = "NODES")]
    interleave: Option<String>,
    /// numactl alias: prefer NODE (preferred:NODE).
    #[arg(short = 'p', long, value_name = "NODE")]
    preferred: Option<String>,
    /// numactl alias: run on the CPUs of NODES.
    #[arg(short = 'N', long, value_name = "NODES")]
    cpunodebind: Option<String>,
    /// numactl alias: run on these CPUs.
    #[arg(short = 'C', long, value_name = "CPUS")]
    physcpubind: Option<String>,
    /// numactl alias: allocate on the node of the CPU that asks (local).
    #[arg(short = 'l', long)]
    localalloc: bool,
    /// Weighted interleave by the kernel only (emulation needs a buffer, see `place`).
    #[arg(long, value_name = "IMPL", default_value = "auto", value_parser = choice(&["auto", "kernel"], kernel_weights))]
    weighted_impl: KernelWeights,
}

/// The plan the options ask for: one CPU placement, one memory policy.
pub fn plan(m: &Machine, a: &LaunchArgs) -> Result<LaunchPlan, CliError> {
    // CPUs: one of --cpus, --cpunodebind, --physcpubind.
    let cpu_opts: Vec<(&str, &String, ListMeaning)> = [
        ("--cpus", a.cpus.as_ref(), ListMeaning::Cpus),
        ("--cpunodebind", a.cpunodebind.as_ref(), ListMeaning::Nodes),
        ("--physcpubind", a.physcpubind.as_ref(), ListMeaning::Cpus),
    ]
    .into_iter()
    .filter_map(|(n, v, k)| v.map(|v| (n, v, k)))
    .collect();
    if cpu_opts.len() > 1 {
        return Err(CliError::usage(format!(
            "give one CPU placement, not {}",
            cpu_opts
                .iter()
                .map(|o| o.0)
                .collect::<Vec<_>>()
                .join(" and ")
        )));
    }
    let cpus = match cpu_opts.first() {
        None => None,
        Some((name, text, meaning)) => {
            let s = ResourceSet::parse(m, text, *meaning)
                .map_err(|e| CliError::usage(format!("{name}: {e}")))?;
            if s.cpus.is_empty() {
                return Err(CliError::usage(format!(
                    "{name} '{text}' holds no CPU{}; nodes with CPUs: {}",
                    cpuless_hint(m, &s),
                    m.cpu_nodes()
                )));
            }
            Some(s.cpus)
        }
    };
    // Memory: one of --mem, -m, -i, -p, -l.
    let mut mems: Vec<(&str, String)> = Vec::new();
    if let Some(p) = &a.mem {
        mems.push(("--mem", p.clone()));
    }
    if let Some(n) = &a.membind {
        mems.push(("--membind", format!("bind:{n}")));
    }
    if let Some(n) = &a.interleave {
        mems.push(("--interleave", format!("interleave:{n}")));
    }
    if let Some(n) = &a.preferred {
        mems.push(("--preferred", format!("preferred:{n}")));
    }
    if a.localalloc {
        mems.push(("--localalloc", "local".into()));
    }
    if mems.len() > 1 {
        return Err(CliError::usage(format!(
            "give one memory policy, not {}",
            mems.iter().map(|o| o.0).collect::<Vec<_>>().join(" and ")
        )));
    }
    let policy = match mems.first() {
        None => MemoryPolicy::FirstTouch,
        Some((name, text)) => {
            MemoryPolicy::parse(m, text).map_err(|e| CliError::usage(format!("{name}: {e}")))?
        }
    };
    // A whole process has no buffer to emulate weighted interleave on.
    // `--weighted-impl` only refuses what a whole process cannot have: the
    // launch always uses the kernel's weighted interleave.
    let KernelWeights = a.weighted_impl;
    Ok(LaunchPlan::new(m, cpus, policy)?)
}

/// What `--weighted-impl` may be for a whole process: the kernel's weighted
/// interleave (emulation places a known buffer chunk by chunk).
#[derive(Clone)]
struct KernelWeights;

fn kernel_weights(t: &str) -> Result<KernelWeights, String> {
    match t {
        "auto" | "kernel" => Ok(KernelWeights),
        other => Err(format!(
            "'{other}' is not possible for run (emulation needs a buffer, see numalab place); valid: auto, kernel"
        )),
    }
}
