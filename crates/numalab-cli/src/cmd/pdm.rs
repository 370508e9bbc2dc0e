//! `numalab pdm`: the placement distribution model, counted (docs/pdm.md).

use crate::args::{budget_each, buffer_size, seconds, size_or_default, whole, MAX_THREADS};
use crate::output::{exit_for, load_machine, out, print_result, CliError, CliResult, Progress};
use numalab::experiments::pdm::measure::{measure_classes, MeasureRequest, PdmReport};
use numalab::experiments::pdm::{self, PdmError, PdmRequest, ThreadPlacement};
use numalab::measure::kernels::BandwidthKernel;
use numalab::measure::stats::StopRule;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// STREAM kernel whose arrays are the quantities: copy, scale (a read, b
    /// written), add, triad (a, b read, c written). Default triad.
    #[arg(long, value_name = "KERNEL", conflicts_with = "quantities")]
    kernel: Option<String>,
    /// Q data quantities per thread instead of a kernel (1 to 8).
    #[arg(long, value_name = "Q", allow_hyphen_values = true, value_parser = whole(1, pdm::MAX_QUANTITIES))]
    quantities: Option<usize>,
    /// Direction of each quantity with --quantities: r, w or both (default all r).
    #[arg(long, value_name = "LIST", requires = "quantities")]
    directions: Option<String>,
    /// Weight of each quantity, above 0, at most 1000, 3 decimals (default 1 each).
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    weights: Option<String>,
    /// One thread per CPU node, in every order (the default).
    #[arg(long, conflicts_with_all = ["threads", "thread_nodes"])]
    one_per_node: bool,
    /// N threads, each on any CPU node.
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = whole(1, MAX_THREADS.min(pdm::MAX_THREADS)), conflicts_with = "thread_nodes")]
    threads: Option<usize>,
    /// The CPU node of each thread, e.g. 0,0,1,3.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    thread_nodes: Option<String>,
    /// Links to use instead of the inferred interconnect graph, e.g. 0-1,1-2,2-3,3-0.
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    links: Option<String>,
    /// Width of a contention class (default 1).
    #[arg(
        long,
        value_name = "W",
        default_value = "1",
        allow_hyphen_values = true
    )]
    class_width: String,
    /// Sample this many random placements instead of counting exactly.
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = whole(1, pdm::MAX_SAMPLES as usize))]
    samples: Option<usize>,
    /// Seed of the random placements when sampling.
    #[arg(long, value_name = "N", default_value = "1", value_parser = whole(0, usize::MAX))]
    seed: usize,
    /// Read this hwloc XML topology file instead of the live machine.
    #[arg(long, value_name = "FILE", conflicts_with = "measure")]
    topology: Option<PathBuf>,
    /// Run K random placements of each class on this machine (1 to 1000; the study ran 20),
    /// with the kernel's arrays bound where the placement puts them; GB/s per class.
    #[arg(long, value_name = "K", num_args = 0..=1, default_missing_value = "20", allow_hyphen_values = true, value_parser = whole(1, pdm::measure::MAX_PER_CLASS), conflicts_with_all = ["quantities", "samples"])]
    measure: Option<usize>,
    /// With --measure: bytes per array, 4K to 128T (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE", requires = "measure", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// With --measure: time budget of the whole command, in seconds (0.001 to 604800, one week): shared equally among its measurements (placements).
    #[arg(long, value_name = "SECONDS", requires = "measure", allow_hyphen_values = true, value_parser = seconds(0.0), conflicts_with = "budget_each")]
    budget: Option<f64>,
    /// With --measure: time budget of each measurement (placement), in seconds (0.001 to 604800, one week; default 0.3).
    #[arg(long, value_name = "SECONDS", requires = "measure", allow_hyphen_values = true, value_parser = seconds(0.0))]
    budget_each: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

impl From<PdmError> for CliError {
    fn from(e: PdmError) -> Self {
        match e {
            PdmError::Invalid(m) => CliError::usage(m),
            PdmError::Failed(m) => CliError::failed(m),
        }
    }
}

pub fn run(a: Args) -> CliResult {
    let (workload, quantities) = match a.quantities {
        Some(q) => {
            let dirs = match &a.directions {
                Some(d) => pdm::parse_directions(d, q)?,
                None => vec![pdm::Direction::Read; q],
            };
            let weights = match &a.weights {
                Some(w) => pdm::parse_weights(w, q)?,
                None => vec![1.0; q],
            };
            (
                format!("{q} quantities"),
                pdm::named_quantities(&dirs, &weights),
            )
        }
        None => {
            let kernel = a.kernel.as_deref().unwrap_or("triad").trim().to_string();
            let mut qs = pdm::kernel_quantities(&kernel)?;
            if let Some(w) = &a.weights {
                let weights = pdm::parse_weights(w, qs.len())?;
                qs.iter_mut().zip(weights).for_each(|(q, w)| q.weight = w);
            }
            (kernel, qs)
        }
    };
    let threads = match (a.threads, &a.thread_nodes) {
        (Some(n), _) => ThreadPlacement::Any(n),
        (None, Some(t)) => ThreadPlacement::Fixed(pdm::parse_thread_nodes(t)?),
        (None, None) => ThreadPlacement::OnePerNode,
    };
    let links = a.links.as_deref().map(pdm::parse_links).transpose()?;
    let req = PdmRequest {
        workload,
        quantities,
        threads,
        links,
        class_width: pdm::parse_class_width(&a.class_width)?,
        samples: a.samples.map(|n| n as u64),
        seed: a.seed as u64,
        time_limit: None,
    };
    let m = load_machine(a.topology.as_deref())?;
    let r = pdm::run_pdm(&m, &req)?;
    let measured = match a.measure {
        None => None,
        Some(k) => {
            let kernel = BandwidthKernel::parse(&req.workload).map_err(CliError::usage)?;
            let rule = StopRule {
                budget: budget_each(a.budget, a.budget_each, 0.3, r.classes.len() * k),
                ..Default::default()
            };
            let mr = MeasureRequest {
                kernel,
                per_class: k,
                buffer_bytes: size_or_default(&m, a.size),
                rule,
                seed: req.seed,
            };
            let progress = Progress::spinner("pdm --measure");
            let x = measure_classes(&m, &req, &mr, &mut |w| progress.step(w))?;
            progress.finish();
            Some(x)
        }
    };
    if a.json {
        print_result(
            "pdm",
            &PdmReport {
                model: &r,
                measured: measured.as_ref(),
            },
        )?;
    } else {
        out!("{}", numalab_report::views::pdm::text(&r))?;
        if let Some(x) = &measured {
            out!("{}", numalab_report::views::pdm::measured_text(x))?;
        }
    }
    match &measured {
        Some(x) if x.classes.iter().any(|c| c.verified < c.placements.len()) => Ok(exit_for(false)),
        _ => Ok(ExitCode::SUCCESS),
    }
}
