//! `numalab place`: allocate a buffer with a memory policy, touch it from a
//! pinned thread, and show where every page landed.

use crate::args::{choice, cpuless_hint, memory_policy, one_cpu, size, THP};
use crate::output::out;
use crate::output::{exit_for, load_machine, print_versioned_result, CliError, CliResult};
use numalab::placement::{
    place_and_check, BufferSpec, ListMeaning, ResourceSet, Thp, WeightedImpl,
};
use numalab_report::views::place::text;

#[derive(clap::Args)]
pub struct Args {
    /// Buffer size, e.g. 64M, 1G (binary units), 1 byte to 128T.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = size(1, "a buffer holds one byte or more"))]
    size: usize,
    /// Memory policy: first-touch, local, bind:NODES, preferred:NODE,
    /// interleave:NODES[@PAGES], weighted:N=W,...[@PAGES], remote[:near|:far].
    #[arg(long = "mem", value_name = "POLICY", default_value = "first-touch")]
    mem: String,
    /// CPU of the thread that first touches every page (default: wherever numalab runs).
    #[arg(long, value_name = "CPU")]
    cpu: Option<String>,
    /// Transparent huge pages for this buffer (default: off for interleave/weighted, system otherwise).
    #[arg(long, value_name = "THP", value_parser = choice(THP, Thp::parse))]
    thp: Option<Thp>,
    /// Back the buffer with hugetlbfs 2 MiB pages (reserved in /proc/sys/vm/nr_hugepages).
    #[arg(long)]
    hugetlb: bool,
    /// Weighted interleave by the kernel (Linux >= 6.9), by exact chunk-wise emulation, or auto.
    #[arg(long, value_name = "IMPL", default_value = "auto", value_parser = choice(&["auto", "kernel", "emulate"], WeightedImpl::parse))]
    weighted_impl: WeightedImpl,
    /// After the prefault, threads pinned to these CPUs each write their slice of the
    /// buffer, as a parallel program's workers would (shows what first touch did).
    #[arg(long, value_name = "CPUS")]
    workers: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let policy = memory_policy(&m, "--mem", &a.mem)?;
    let cpu = a
        .cpu
        .as_deref()
        .map(|c| one_cpu(&m, "--cpu", c))
        .transpose()?;
    let workers: Vec<u32> = match a.workers.as_deref() {
        None => Vec::new(),
        Some(t) => {
            let s = ResourceSet::parse(&m, t, ListMeaning::Cpus).map_err(CliError::usage)?;
            if s.cpus.is_empty() {
                return Err(CliError::usage(format!(
                    "--workers '{t}' holds no CPU{}",
                    cpuless_hint(&m, &s)
                )));
            }
            s.cpus.iter().collect()
        }
    };
    let spec = BufferSpec {
        size: a.size,
        policy,
        thp: a.thp,
        hugetlb: a.hugetlb,
        toucher: cpu,
        weighted: a.weighted_impl,
    };
    let r = place_and_check(&m, &spec, &workers)?;
    if a.json {
        print_versioned_result("place", &r)?;
    } else {
        out!("{}", text(&r))?;
    }
    Ok(exit_for(r.verified))
}
