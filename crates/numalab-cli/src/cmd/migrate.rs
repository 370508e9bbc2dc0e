//! `numalab migrate`: how fast pages move between memory nodes, by
//! `move_pages`, `mbind(MPOL_MF_MOVE)` and `migrate_pages`.

use crate::args::{choice, size, whole};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::migrate::{
    pairs_for, run_migrate, Method, MigrateRequest, Selection, DEFAULT_SIZE, MAX_REPS, MAX_SIZE,
};
use numalab::text::format::bytes as format_bytes;
use numalab_report::views::migrate::text;

#[derive(clap::Args)]
#[command(
    after_help = "A buffer is bound to --from and first-touched there, its pages counted with the kernel, then moved to --to --reps times (timed, verified page by page) and back (untimed). migrate_pages moves a whole process's pages, so it runs in a forked child that holds nothing else on the source node. A machine with one memory node has nowhere to move pages: exit code 1. See docs/migrate.md."
)]
pub struct Args {
    /// Buffer size, 4K to 4G (default 64M).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = size(4096, "one page"))]
    size: Option<usize>,
    /// Source memory node (with --to; default: the first node with CPUs).
    #[arg(long, value_name = "NODE", allow_hyphen_values = true, value_parser = whole(0, u16::MAX as usize), requires = "to")]
    from: Option<usize>,
    /// Destination memory node (with --from; default: the next memory node).
    #[arg(long, value_name = "NODE", allow_hyphen_values = true, value_parser = whole(0, u16::MAX as usize), requires = "from")]
    to: Option<usize>,
    /// Every ordered pair of memory nodes (CPU-less ones included): a GB/s matrix per method.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    matrix: bool,
    /// Transparent huge pages for the buffer: on (MADV_HUGEPAGE) or off (4 KiB pages).
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = choice(&["on", "off"], HugePages::parse))]
    thp: HugePages,
    /// Kernel interface: move_pages, mbind, migrate_pages or all.
    #[arg(long, value_name = "METHOD", default_value = "all", value_parser = choice(&["move_pages", "mbind", "migrate_pages", "all"], Methods::parse))]
    method: Methods,
    /// Timed moves per pair and method, 1 to 100.
    #[arg(long, value_name = "K", default_value = "5", allow_hyphen_values = true, value_parser = whole(1, MAX_REPS))]
    reps: usize,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// The methods of `--method`: one, or all of them.
#[derive(Clone)]
struct Methods(Vec<Method>);

impl Methods {
    fn parse(t: &str) -> Result<Self, String> {
        Method::parse_list(t).map(Methods)
    }
}

/// `--thp on|off` (a newtype: clap takes a plain bool for a flag).
#[derive(Clone, Copy)]
struct HugePages(bool);

impl HugePages {
    fn parse(t: &str) -> Result<Self, String> {
        match t {
            "on" => Ok(HugePages(true)),
            "off" => Ok(HugePages(false)),
            _ => Err(format!(
                "unknown THP choice '{}'; valid: on, off",
                numalab::text::format::excerpt(t, 40)
            )),
        }
    }
}

pub fn run(a: Args) -> CliResult {
    let size = a.size.unwrap_or(DEFAULT_SIZE as usize);
    if size as u64 > MAX_SIZE {
        return Err(CliError::usage(format!(
            "--size {} is too large: at most {}",
            format_bytes(size as u64),
            format_bytes(MAX_SIZE)
        )));
    }
    let selection = match (a.from, a.to) {
        (Some(from), Some(to)) => Selection::Pair {
            from: from as u32,
            to: to as u32,
        },
        _ if a.matrix => Selection::Matrix,
        _ => Selection::Default,
    };
    let m = load_machine(None)?;
    let pairs = pairs_for(&m, selection)?;
    let req = MigrateRequest {
        size,
        selection,
        thp: a.thp.0,
        methods: a.method.0,
        reps: a.reps,
    };
    let progress = Progress::bar((pairs.len() * req.methods.len()) as u64, "migrate");
    let r = run_migrate(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.json {
        print_result("migrate", &r)?;
    } else {
        out!("{}", text(&r))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verified))
}
