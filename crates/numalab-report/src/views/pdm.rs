//! The text `numalab pdm` prints: the model's workload and graph, one row
//! per contention class (range, count or draws, share with its interval
//! when sampled, examples), then the totals.

use numalab::experiments::pdm::{PdmResult, Total};

/// The command's text: one row per class, then the totals.
pub fn text(r: &PdmResult) -> String {
    let mut s = String::new();
    let qs = r
        .quantities
        .iter()
        .map(|q| format!("{}:{}×{}", q.name, q.direction.short(), q.weight))
        .collect::<Vec<_>>()
        .join(" ");
    let who = match r.thread_placement.as_str() {
        "one-per-node" => format!("{} thread(s), one per CPU node in every order", r.threads),
        "any" => format!("{} thread(s), each on any CPU node", r.threads),
        _ => format!(
            "{} thread(s) on nodes {}",
            r.threads,
            r.thread_nodes
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    let links = r
        .links
        .iter()
        .map(|l| format!("{}-{}", l[0], l[1]))
        .collect::<Vec<_>>()
        .join(",");
    s +=
        &format!(
        "placement distribution model: {} ({qs}); {who}\n{} nodes, {} CPU nodes, links {} ({})\n\n",
        r.workload,
        r.nodes.len(),
        r.cpu_nodes.len(),
        if links.is_empty() { "none".into() } else { links },
        if r.links_given { "given" } else { "inferred" },
    );
    let ranges: Vec<String> = r
        .classes
        .iter()
        .map(|c| format!("[{}, {})", trim(c.low), trim(c.high)))
        .collect();
    let counts: Vec<String> = r.classes.iter().map(|c| c.count.to_string()).collect();
    let shares: Vec<String> = r
        .classes
        .iter()
        .map(|c| match c.interval {
            Some([lo, hi]) => format!(
                "{:.2}% (95%: {:.2}–{:.2})",
                c.share * 100.0,
                lo * 100.0,
                hi * 100.0
            ),
            // Rare classes of big machines would round to nothing.
            None if c.share > 0.0 && c.share < 1e-6 => format!("{:.2e}%", c.share * 100.0),
            None => format!("{:.4}%", c.share * 100.0),
        })
        .collect();
    let wr = ranges
        .iter()
        .map(|x| x.chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    let wc = counts.iter().map(|x| x.len()).max().unwrap_or(0).max(5);
    let ws = shares
        .iter()
        .map(|x| x.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let count_head = if r.exact { "count" } else { "drawn" };
    s += &format!(
        "{:<wr$}  {:>wc$}  {:>ws$}  examples\n",
        "contention", count_head, "share"
    );
    for (i, c) in r.classes.iter().enumerate() {
        s += &format!(
            "{:<wr$}  {:>wc$}  {:>ws$}  {}\n",
            ranges[i],
            counts[i],
            shares[i],
            c.examples.first().map_or("", String::as_str)
        );
        for e in c.examples.iter().skip(1) {
            s += &format!("{:<wr$}  {:>wc$}  {:>ws$}  {e}\n", "", "", "");
        }
    }
    let total = match r.total_placements {
        Total::Exact(n) => n.to_string(),
        Total::Approximate(Some(x)) => format!("about {x:.3e}"),
        Total::Approximate(None) => format!("about 10^{:.2}", r.total_placements_log10),
    };
    s += &format!("\ntotal: {total} placements, ");
    if r.exact {
        s += "counted exactly\n";
    } else {
        s += &format!(
            "not exact: {} random placements (seed {}), shares with 95% intervals\n",
            r.samples.unwrap_or(0),
            r.seed.unwrap_or(0)
        );
    }
    for n in &r.notes {
        s += &format!("note: {n}\n");
    }
    s
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The text of `pdm --measure`: GB/s per contention class, then the trend.
pub fn measured_text(r: &numalab::experiments::pdm::measure::PdmMeasurement) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nmeasured: {} random placements per class, kernel {}, {} per array, threads pinned to a CPU of their node, arrays bound to theirs",
        r.per_class,
        r.kernel.name(),
        numalab::text::format::bytes(r.buffer_bytes)
    );
    let _ = writeln!(
        s,
        "  {:<12} {:>8} {:>12} {:>10} {:>10}  verified",
        "class", "runs", "median GB/s", "min", "max"
    );
    let g = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for c in &r.classes {
        let _ = writeln!(
            s,
            "  {:<12} {:>8} {:>12} {:>10} {:>10}  {}/{}",
            format!("[{}, {})", trim(c.low), trim(c.high)),
            format!("{}/{}", c.placements.len(), c.wanted),
            g(c.median_gbps),
            g(c.min_gbps),
            g(c.max_gbps),
            c.verified,
            c.placements.len()
        );
    }
    let t = &r.trend;
    let _ = writeln!(
        s,
        "bandwidth falls as contention rises: {} ({})\n  rule: {}",
        t.verdict, t.reason, t.rule
    );
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

// ---------------------------------------------------------------------
// The report part `pdm`.

use crate::claims::{Basis, Claim, ClaimKind};
use crate::csv::{opt, Table};
use crate::html::Section;
use crate::model::Mode;
use crate::model::{PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::plan::PlanEnv;
use crate::summary::SummaryBuilder;
use numalab::experiments::pdm::measure::{measure_classes, MeasureRequest, PdmMeasurement};
use numalab::experiments::pdm::{kernel_quantities, run_pdm, PdmRequest, ThreadPlacement};
use numalab::machine::Machine;
use numalab::measure::kernels::BandwidthKernel;
use numalab::placement::PlacementError;
use serde::{Deserialize, Serialize};

/// The report part: the class shares of copy and triad with one thread
/// per CPU node, and with `--full` on a live machine of several memory
/// nodes, the triad's classes measured.
pub struct PdmPart;

/// The workloads the part counts, as the study did.
const WORKLOADS: [&str; 2] = ["copy", "triad"];

/// Most placements per class the part measures (the study's 20).
const PART_PER_CLASS: usize = 20;

const MIB: f64 = (1u64 << 20) as f64;

/// Seconds of one measured placement, at least.
const MIN_PLACEMENT_S: f64 = 0.05;

/// The counted classes of one workload, as the report keeps them: counts
/// as decimal strings (they exceed 64 bits on big machines).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PdmCounted {
    pub workload: String,
    pub threads: usize,
    /// The exact number of placements, or its approximation, in decimal.
    pub total_placements: String,
    pub total_placements_log10: f64,
    pub exact: bool,
    pub classes: Vec<CountedClass>,
    /// Why the count was sampled (the time it was given ran out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One class of [`PdmCounted`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountedClass {
    pub low: f64,
    pub high: f64,
    /// Placements (exact) or draws in the class, in decimal.
    pub count: String,
    pub share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
    pub examples: Vec<String>,
}

/// The part's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PdmPartResult {
    pub workloads: Vec<PdmCounted>,
    /// The triad's classes measured (`--full`, live, several memory nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<PdmMeasurement>,
    /// Why the classes were not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

/// The least time a count is given, seconds, however late the part runs.
const MIN_COUNT_S: f64 = 0.05;

/// The request counting `kernel` with one thread per CPU node.
fn part_request(kernel: &str) -> PdmRequest {
    PdmRequest {
        workload: kernel.to_string(),
        quantities: kernel_quantities(kernel).expect("a STREAM kernel"),
        threads: ThreadPlacement::OnePerNode,
        links: None,
        class_width: 1.0,
        samples: None,
        seed: 1,
        time_limit: None,
    }
}

/// How a measured placement is run: bytes per array, seconds of its
/// measurement, and its fixed cost (placing every thread's arrays and
/// starting the threads).
#[derive(Debug, Clone, Copy)]
struct PlacementRun {
    bytes: usize,
    measure_s: f64,
    fixed_s: f64,
}

/// What the part does within `budget`: count both workloads, and whether
/// (and why not) it measures, and how each measured placement runs.
fn work(env: &PlanEnv, budget: f64) -> (Option<PlacementRun>, Option<String>, PartPlan) {
    let c = env.costs;
    let nodes = env.m.nodes.len();
    // Counting: the Quartet's triad took 0.3-0.5 s on the 2-vCPU VM,
    // 1.7-3 s on eight nodes (mostly the sampled fallback's 250,000
    // draws), slower machines in proportion; each count is cut to its
    // share of this and sampled past it (`run`), so that fewer draws
    // (wider intervals) keep larger machines within the budget.
    let count_s = WORKLOADS.len() as f64 * c.factor * if nodes <= 4 { 0.6 } else { 1.0 };
    let why_not = if env.mode != Mode::Full {
        Some("measured only with --full (numalab pdm --measure runs it alone)".to_string())
    } else if !env.live {
        Some("a topology file cannot be measured".to_string())
    } else if env.m.nodes.iter().filter(|n| n.memory_bytes > 0).count() < 2 {
        Some("one memory node: every placement is local, a single class".to_string())
    } else {
        None
    };
    // Arrays past the caches, no larger than the report's buffers, and
    // small enough that every thread's three arrays fit on any one memory
    // node (the most contended placements put them all there).
    let threads = env.m.cpu_nodes().len().max(1);
    let memory_nodes: Vec<u32> = env
        .m
        .nodes
        .iter()
        .filter(|n| n.memory_bytes > 0)
        .map(|n| n.os_index)
        .collect();
    let wanted = (2.0 * env.llc()).max(16.0 * MIB).min(env.size as f64) as usize;
    let bytes = env.fit_all(&memory_nodes, 3 * threads, wanted, 0.8);
    let per = why_not.is_none().then(|| PlacementRun {
        bytes,
        measure_s: ((budget - count_s) / 40.0).clamp(MIN_PLACEMENT_S, 0.5),
        fixed_s: c.place(3.0 * (bytes * threads) as f64, threads) + c.threads(threads),
    });
    let plan = PartPlan {
        predicted_s: if per.is_some() {
            budget.max(count_s)
        } else {
            count_s
        },
        measuring_s: if per.is_some() {
            (budget - count_s).max(0.0)
        } else {
            0.0
        },
        work: Work {
            // The counts, and the measured classes as one more.
            measurements: WORKLOADS.len() + usize::from(per.is_some()),
            per_measurement_s: per.map_or(0.0, |p| p.measure_s),
            threads: env.m.cpu_nodes().len(),
            ..Work::default()
        },
        cut: None,
    };
    (per, why_not, plan)
}

/// The counted form of a model result.
fn counted(r: &numalab::experiments::pdm::PdmResult) -> PdmCounted {
    let total = match r.total_placements {
        Total::Exact(n) => n.to_string(),
        Total::Approximate(Some(x)) => format!("{x:.3e}"),
        Total::Approximate(None) => format!("1e{:.1}", r.total_placements_log10),
    };
    PdmCounted {
        workload: r.workload.clone(),
        threads: r.threads,
        total_placements: total,
        total_placements_log10: r.total_placements_log10,
        exact: r.exact,
        notes: r.notes.clone(),
        classes: r
            .classes
            .iter()
            .map(|c| CountedClass {
                low: c.low,
                high: c.high,
                count: c.count.to_string(),
                share: c.share,
                interval: c.interval,
                examples: c.examples.clone(),
            })
            .collect(),
    }
}

impl ReportPart for PdmPart {
    type Result = PdmPartResult;

    fn info(&self) -> PartInfo {
        PartInfo::new(
            "pdm",
            "Placement distribution model",
            "numalab pdm --measure",
            1.0,
        )
    }

    /// Not with one memory node: every placement of the arrays is on it,
    /// one contention class, nothing to compare.
    fn applicable(&self, m: &Machine) -> Result<(), String> {
        super::one_memory_node(m, "every placement of the arrays is on it")
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        work(env, budget).2
    }

    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<PdmPartResult>, PlacementError> {
        let (per, why_not, plan) = work(&ctx.env(), budget);
        let m = ctx.m;
        // The counts keep to the part's share: exactly where that fits,
        // else sampled with intervals (an emulated guest counts the
        // Quartet's triad in 20 s); what one count leaves goes to the next.
        let counting_s = if per.is_some() {
            (plan.predicted_s - plan.measuring_s).max(0.0)
        } else {
            budget.max(plan.predicted_s)
        };
        let started = std::time::Instant::now();
        let mut workloads = Vec::new();
        for (i, w) in WORKLOADS.iter().enumerate() {
            ctx.step(&format!("counting {w}"));
            let left = (counting_s - started.elapsed().as_secs_f64()).max(MIN_COUNT_S);
            let mut req = part_request(w);
            req.time_limit = Some(std::time::Duration::from_secs_f64(
                left / (WORKLOADS.len() - i) as f64,
            ));
            let r = run_pdm(m, &req).map_err(|e| PlacementError::Os(format!("pdm {w}: {e}")))?;
            workloads.push(counted(&r));
        }
        let mut measured = None;
        if let Some(per) = per {
            let triad = &workloads[1];
            let classes = triad.classes.len().max(1);
            // As many per class as fit in what counting left, up to the study's 20.
            let left = budget - plan.fixed_s();
            let k = (left / (classes as f64 * (per.measure_s + per.fixed_s)))
                .floor()
                .clamp(1.0, PART_PER_CLASS as f64) as usize;
            let mr = MeasureRequest {
                kernel: BandwidthKernel::Triad,
                per_class: k,
                buffer_bytes: per.bytes,
                rule: ctx.rule(per.measure_s),
                seed: 1,
            };
            let x = measure_classes(m, &part_request("triad"), &mr, &mut |w| ctx.step(w))
                .map_err(|e| PlacementError::Os(format!("pdm --measure: {e}")))?;
            measured = Some(x);
        }
        let r = PdmPartResult {
            workloads,
            measured,
            not_measured: why_not,
        };
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()))
    }

    fn verified(&self, r: &PdmPartResult) -> bool {
        r.measured
            .as_ref()
            .is_none_or(|x| x.classes.iter().all(|c| c.verified == c.placements.len()))
    }

    fn text(&self, r: &PdmPartResult, _m: &Machine) -> String {
        part_text(r)
    }

    fn tables(&self, r: &PdmPartResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "pdm",
            "Placement distribution model: placements of each workload's arrays (one thread per CPU node) by link contention class",
            &["workload", "low", "high", "placements", "share", "exact", "example"],
        );
        for w in &r.workloads {
            for c in &w.classes {
                t.rows.push(vec![
                    w.workload.clone(),
                    trim(c.low),
                    trim(c.high),
                    c.count.clone(),
                    format!("{:.6}", c.share),
                    w.exact.to_string(),
                    c.examples.first().cloned().unwrap_or_default(),
                ]);
            }
        }
        let mut tables = vec![t];
        if let Some(x) = &r.measured {
            let mut mt = Table::new(
                "pdm-measured",
                "Placement distribution model, measured: triad GB/s of random placements per contention class",
                &["low", "high", "runs", "median_gbps", "min_gbps", "max_gbps", "verified"],
            );
            for c in &x.classes {
                mt.rows.push(vec![
                    trim(c.low),
                    trim(c.high),
                    c.placements.len().to_string(),
                    opt(c.median_gbps, 2),
                    opt(c.min_gbps, 2),
                    opt(c.max_gbps, 2),
                    c.verified.to_string(),
                ]);
            }
            tables.push(mt);
        }
        tables
    }

    fn html(&self, r: &PdmPartResult, s: &mut Section) {
        s.table("pdm", false);
        if r.measured.is_some() {
            s.table("pdm-measured", false);
        }
        if let Some(why) = &r.not_measured {
            s.note(&format!("Classes not measured: {why}."));
        }
    }

    fn summarize(&self, r: &PdmPartResult, s: &mut SummaryBuilder) {
        for (i, w) in r.workloads.iter().enumerate() {
            let Some(least) = w.classes.first() else {
                continue;
            };
            let c = Claim::new(
                ClaimKind::Finding,
                "pdm",
                Basis::Topology,
                format!(
                    "{{share}}% of the placements of {}'s arrays with one thread per CPU node load no link or memory controller beyond the least contention class, [{{low}}, {{high}}).",
                    w.workload
                ),
            )
            .fig(
                "share",
                least.share,
                "%",
                1,
                s.at(&format!("workloads/{i}/classes/0/share")),
            )
            .fig("low", least.low, "", 0, s.at(&format!("workloads/{i}/classes/0/low")))
            .fig("high", least.high, "", 0, s.at(&format!("workloads/{i}/classes/0/high")));
            s.claim(c);
        }
    }
}

/// The part's text: each workload's classes, then the measured classes.
fn part_text(r: &PdmPartResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for w in &r.workloads {
        let _ = writeln!(
            s,
            "{}: {} placements ({}), one thread per CPU node ({} threads)",
            w.workload,
            w.total_placements,
            if w.exact {
                "counted exactly".to_string()
            } else if w.notes.is_empty() {
                "sampled".to_string()
            } else {
                format!("sampled: {}", w.notes.join("; "))
            },
            w.threads
        );
        for c in &w.classes {
            let _ = writeln!(
                s,
                "  [{}, {})  {:>10.4}%  e.g. {}",
                trim(c.low),
                trim(c.high),
                c.share * 100.0,
                c.examples.first().map(String::as_str).unwrap_or("-")
            );
        }
    }
    match (&r.measured, &r.not_measured) {
        (Some(x), _) => s.push_str(&measured_text(x)),
        (None, Some(why)) => {
            let _ = writeln!(s, "classes not measured: {why}");
        }
        (None, None) => {}
    }
    s
}

#[cfg(test)]
mod part_tests {
    use super::*;
    use crate::claims::check_claim;
    use crate::fixture;
    use serde_json::json;

    /// The part's result on the Quartet, counted (as a topology report has it).
    fn quartet() -> (Machine, PdmPartResult) {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let workloads = WORKLOADS
            .iter()
            .map(|w| counted(&run_pdm(&m, &part_request(w)).unwrap()))
            .collect();
        let r = PdmPartResult {
            workloads,
            measured: None,
            not_measured: Some("measured only with --full".into()),
        };
        (m, r)
    }

    #[test]
    fn the_quartet_part_counts_the_studys_cases_and_its_claims_check() {
        let (m, r) = quartet();
        // Copy: 4^8 · 4! placements; triad: 4^12 · 4!.
        assert_eq!(r.workloads[0].total_placements, "1572864");
        assert_eq!(r.workloads[1].total_placements, "402653184");
        assert!(r.workloads.iter().all(|w| w.exact));
        let tables = PdmPart.tables(&r, &m);
        assert_eq!(tables.len(), 1, "not measured: one table");
        let rows = r.workloads.iter().map(|w| w.classes.len()).sum::<usize>();
        assert_eq!(tables[0].rows.len(), rows);
        assert_eq!(tables[0].rows[0][0], "copy");
        // The JSON keeps counts exact as decimal strings and reads back.
        let back: PdmPartResult =
            serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(
            back.workloads[1].classes.len(),
            r.workloads[1].classes.len()
        );
        let mut b = SummaryBuilder::for_tests(&m, "/parts/pdm/result");
        PdmPart.summarize(&r, &mut b);
        let claims = b.claims();
        assert_eq!(claims.len(), 2);
        let doc = json!({"parts": {"pdm": {"result": r}}});
        for c in claims {
            assert_eq!(check_claim(c, &doc), Vec::<String>::new(), "{}", c.text);
        }
        let least = &r.workloads[1].classes[0];
        assert_eq!(
            claims[1].text,
            format!(
                "{:.1}% of the placements of triad's arrays with one thread per CPU node load no link or memory controller beyond the least contention class, [{}, {}).",
                least.share * 100.0,
                trim(least.low),
                trim(least.high)
            )
        );
        let text = part_text(&r);
        assert!(
            text.starts_with(
                "copy: 1572864 placements (counted exactly), one thread per CPU node (4 threads)"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("classes not measured: measured only with --full\n"),
            "{text}"
        );
    }
}
