//! Loaded latency (`numalab loaded-latency`, report parts
//! `loaded-latency-local` and `loaded-latency-far`): a pointer chase while
//! injector threads load the same memory, idle to saturation, with the knee
//! where queueing starts.

use super::bench::verification_text;
use super::Units;
use crate::claims::Derivation;
use crate::csv::{ids, num, yes, Table};
use crate::html::Section;
use crate::model::Mode;
use crate::model::{largest_fitting, spread, PartPlan, Work, SAMPLE_S};
use crate::part::{Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::plan::PlanEnv;
use crate::plan::{far_node, home_cpu, home_node, needs_home_cpu, no_cpu_node};
use crate::summary::{finding, SummaryBuilder};
use crate::svg::{line_chart, Axis, PointMark, Scale, Series, TickFormat};
use numalab::experiments::loaded_latency::DEFAULT_LADDER;
use numalab::experiments::loaded_latency::{
    default_injectors, measurements, run_loaded_latency, Ladder, LoadedLatencyRequest,
    LoadedLatencyResult, MixCurve,
};
use numalab::machine::Machine;
use numalab::measure::chase::ChasePattern;
use numalab::measure::pacing::TrafficMix;
use numalab::measure::stats::StopRule;
use numalab::placement::{MemoryPolicy, PlacementError, Thp};
use numalab::text::format::{bytes as format_bytes, page_shares};
use numalab::IdSet;
use std::fmt::Write;
use std::time::Duration;

/// A loaded-latency part: the chase on the home node's first CPU, to the
/// home node's memory or to the farthest memory node.
pub struct LoadedLatencyPart {
    far: bool,
}

/// Loaded latency to the home node's own memory.
pub const LOCAL: LoadedLatencyPart = LoadedLatencyPart { far: false };
/// Loaded latency to the farthest memory node (CPU-less nodes count).
pub const FAR: LoadedLatencyPart = LoadedLatencyPart { far: true };

impl LoadedLatencyPart {
    /// `local` or `farthest`: the CSV's target column and the sentences' word.
    fn target_label(&self) -> &'static str {
        if self.far {
            "farthest"
        } else {
            "local"
        }
    }

    /// The memory node the chase and the injectors load.
    fn node(&self, m: &Machine) -> Result<u32, PlacementError> {
        if self.far {
            far_node(m).ok_or_else(|| {
                PlacementError::Invalid("this machine has no remote memory node".into())
            })
        } else {
            home_node(m).ok_or_else(no_cpu_node)
        }
    }
}

impl LoadedLatencyPart {
    /// The request for `budget` seconds and its plan: the mode's mixes with
    /// the full ladder when they fit; else shorter measurements, then fewer
    /// load steps (the lightest and the heaviest kept, at least two), then
    /// fewer mixes (read only at the least).
    fn work(
        &self,
        env: &PlanEnv,
        budget: f64,
    ) -> Result<(LoadedLatencyRequest, PartPlan), PlacementError> {
        let m = env.m;
        let node = self.node(m)?;
        let cpu = home_cpu(m).ok_or_else(no_cpu_node)?;
        let injectors = if env.live {
            default_injectors(m, cpu)
        } else {
            m.allowed_cpus.iter().filter(|&c| c != cpu).collect()
        };
        if injectors.is_empty() {
            return Err(PlacementError::Invalid(
                "no CPU left for injector threads".into(),
            ));
        }
        let all_mixes = mixes_of(env.mode);
        // The chase and every injector buffer are on `node`: together they
        // take at most 60% of its free memory.
        let chase_bytes = env.fit(node, 1, env.size, 0.2);
        let injector_bytes = env.fit(
            node,
            injectors.len(),
            (env.size / injectors.len())
                .max(env.size.min(64 << 20))
                .next_multiple_of(2 << 20),
            0.4,
        );
        let c = env.costs;
        let n_inj = injectors.len();
        let settle = Duration::from_millis(20);
        // Once: the chase buffer and chase, the injectors and their buffers.
        let setup = c.place(chase_bytes as f64, 1)
            + c.chase(chase_bytes as f64, env.llc())
            + c.place(injector_bytes as f64 * n_inj as f64, n_inj)
            + c.threads(n_inj + 1);
        let each = |per: f64| c.measurement(per, SAMPLE_S) + settle.as_secs_f64();
        let full_steps = DEFAULT_LADDER.len();
        // Levels: (mixes, steps) growing: steps 2..=5 with one mix, then
        // every step with more mixes.
        let step_levels = full_steps - 1;
        let levels = step_levels + all_mixes.len() - 1;
        let at = |l: usize| -> (usize, usize) {
            if l < step_levels {
                (1, l + 2)
            } else {
                (l + 2 - step_levels, full_steps)
            }
        };
        // One idle for the run, then per mix its ladder and max.
        let count = |(mixes, steps): (usize, usize)| usize::from(mixes > 0) + mixes * (steps + 1);
        let cost = |l: usize, per: f64| setup + count(at(l)) as f64 * each(per);
        let l = largest_fitting(levels, budget, |l| cost(l, MIN_MEASUREMENT_S));
        let (mixes, steps) = at(l);
        let n = count((mixes, steps));
        let fixed = cost(l, MIN_MEASUREMENT_S) - n as f64 * MIN_MEASUREMENT_S;
        let per = ((budget - fixed) / n as f64).clamp(MIN_MEASUREMENT_S, 2.0);
        let ladder = ladder_of(steps);
        let req = LoadedLatencyRequest {
            cpu,
            policy: MemoryPolicy::Bind {
                nodes: IdSet::single(node),
            },
            pattern: ChasePattern::Random,
            buffer_bytes: chase_bytes,
            thp: Some(Thp::Off),
            injector_cpus: injectors,
            injector_policy: None,
            injector_buffer_bytes: injector_bytes,
            injector_thp: Some(Thp::On),
            mixes: all_mixes[..mixes].to_vec(),
            ladder,
            rule: StopRule {
                budget: Duration::from_secs_f64(per),
                ..crate::part::default_rule()
            },
            settle,
        };
        debug_assert_eq!(measurements(&req), n);
        let plan = PartPlan {
            predicted_s: cost(l, per),
            measuring_s: per * n as f64,
            work: Work {
                measurements: n,
                per_measurement_s: per,
                threads: n_inj + 1,
                buffer_bytes: chase_bytes as u64,
                ..Work::default()
            }
            .count("mixes", "mixes", mixes)
            .count_of("steps", "load steps", steps + 1, full_steps + 1)
            .count("injectors", "injectors", n_inj),
            cut: cut_text(steps, mixes, all_mixes.len()),
        };
        Ok((req, plan))
    }
}

/// The traffic mixes a report of `mode` measures.
fn mixes_of(mode: Mode) -> Vec<TrafficMix> {
    match mode {
        Mode::Quick => vec![TrafficMix::Read],
        Mode::Default => vec![
            TrafficMix::Read,
            TrafficMix::ReadWrite {
                reads: 2,
                writes: 1,
            },
            TrafficMix::WriteNt,
        ],
        Mode::Full => TrafficMix::CLASSIC.to_vec(),
    }
}

/// The default ladder, or `steps` of its steps spread over it.
fn ladder_of(steps: usize) -> Ladder {
    let full_steps = DEFAULT_LADDER.len();
    if steps == full_steps {
        Ladder::Auto
    } else {
        Ladder::Fractions(
            spread(full_steps, steps)
                .into_iter()
                .map(|i| DEFAULT_LADDER[i])
                .collect(),
        )
    }
}

/// What was cut from the full ladder and mixes, when something was.
fn cut_text(steps: usize, mixes: usize, all_mixes: usize) -> Option<String> {
    let full_steps = DEFAULT_LADDER.len();
    let mut cut = Vec::new();
    if steps < full_steps {
        cut.push(format!("{steps} of {full_steps} paced load steps"));
    }
    if mixes < all_mixes {
        cut.push(format!("{mixes} of {all_mixes} traffic mixes"));
    }
    (!cut.is_empty()).then(|| {
        format!(
            "{}: the full ladder would not fit the budget",
            cut.join("; ")
        )
    })
}

impl ReportPart for LoadedLatencyPart {
    type Result = LoadedLatencyResult;

    fn info(&self) -> PartInfo {
        let base = if self.far {
            PartInfo::new(
                "loaded-latency-far",
                "Loaded latency, farthest node",
                "numalab loaded-latency",
                9.0,
            )
        } else {
            PartInfo {
                key_figures: &[
                    "loaded_idle_ns",
                    "loaded_max_ns",
                    "loaded_max_gbps",
                    "loaded_knee_gbps",
                ],
                ..PartInfo::new(
                    "loaded-latency-local",
                    "Loaded latency, local node",
                    "numalab loaded-latency",
                    9.0,
                )
            }
        };
        PartInfo {
            aliases: &["loaded-latency"],
            table_group: Some("loaded-latency"),
            ..base
        }
    }

    fn applicable(&self, m: &Machine) -> Result<(), String> {
        if m.allowed_cpus.len() < 2 {
            return Err(format!(
                "needs one CPU to chase and another to inject traffic; this process may use only CPU {}",
                m.allowed_cpus
            ));
        }
        if self.far && far_node(m).is_none() {
            return Err(
                "one memory node: the farthest node is the local one (see loaded-latency-local)"
                    .into(),
            );
        }
        needs_home_cpu(m)
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        match self.work(env, budget) {
            Ok((_, plan)) => plan,
            // Not applicable here: nothing to plan.
            Err(_) => PartPlan::none(),
        }
    }

    /// Every other usable CPU injects traffic into the same node as the
    /// chase.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<LoadedLatencyResult>, PlacementError> {
        let (req, plan) = self.work(&ctx.env(), budget)?;
        let r = run_loaded_latency(ctx.m, &req, &mut |w| ctx.step(w))?;
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &LoadedLatencyResult) -> bool {
        r.verification.verified
    }

    fn text(&self, r: &LoadedLatencyResult, m: &Machine) -> String {
        text(r, m, Units::Gb)
    }

    fn tables(&self, r: &LoadedLatencyResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "loaded-latency",
            "Loaded latency: chase latency (ns) vs injected bandwidth (GB/s, program and memory bytes)",
            &[
                "target",
                "cpu",
                "mem_nodes",
                "mix",
                "step",
                "injected_gbps",
                "injected_memory_gbps",
                "total_memory_gbps",
                "latency_ns",
                "ci_low_ns",
                "ci_high_ns",
                "vs_idle",
                "knee",
            ],
        );
        for c in &r.mixes {
            for pt in std::iter::once(&c.idle).chain(&c.steps) {
                t.rows.push(vec![
                    self.target_label().into(),
                    r.chase.cpu.to_string(),
                    ids(r
                        .chase
                        .pages_by_node
                        .iter()
                        .filter(|(_, &p)| p > 0)
                        .map(|(&n, _)| n)),
                    c.mix.name(),
                    pt.step.clone(),
                    num(pt.injected_gbps, 3),
                    num(pt.injected_memory_gbps, 3),
                    num(pt.total_memory_gbps, 3),
                    num(pt.latency_ns.median, 2),
                    num(pt.ci_low_ns, 2),
                    num(pt.ci_high_ns, 2),
                    num(pt.vs_idle, 3),
                    yes(pt.knee),
                ]);
            }
        }
        vec![t]
    }

    fn html(&self, r: &LoadedLatencyResult, s: &mut Section) {
        let id = format!("fig-{}", self.info().name);
        html(s, &id, r, self.target_label());
    }

    fn summarize(&self, r: &LoadedLatencyResult, s: &mut SummaryBuilder) {
        summarize(s, r, self.target_label(), !self.far);
    }
}

/// The text `numalab loaded-latency` prints: the setup, then one table per
/// mix with the knee marked.
pub fn text(r: &LoadedLatencyResult, m: &Machine, u: Units) -> String {
    let mut s = String::new();
    let c = &r.chase;
    let node = c.node.map(|n| format!(" (node {n})")).unwrap_or_default();
    let _ = writeln!(
        s,
        "loaded latency: {} chase on CPU {}{node} over {}, memory {} (pages: {})",
        c.pattern,
        c.cpu,
        format_bytes(c.buffer_bytes),
        c.policy,
        page_shares(&c.pages_by_node)
    );
    let i = &r.injectors;
    let cpus: IdSet = i.cpus.iter().copied().collect();
    let nodes: IdSet = i.cpus.iter().filter_map(|c| m.node_of_cpu(*c)).collect();
    let _ = writeln!(
        s,
        "injectors: {} thread{} on CPU {cpus} (node {nodes}), {} each, memory {}{}, {} chunks",
        i.cpus.len(),
        if i.cpus.len() == 1 { "" } else { "s" },
        format_bytes(i.buffer_bytes),
        i.policy,
        if i.policy_from_chase {
            " (the chase buffer's node)"
        } else {
            ""
        },
        format_bytes(i.chunk_bytes)
    );
    let _ = writeln!(
        s,
        "{:.1} s per step budget; knee: {}",
        r.budget_per_step_s, r.knee_rule
    );
    for curve in &r.mixes {
        s.push('\n');
        s.push_str(&curve_text(curve, u));
    }
    s.push('\n');
    s.push_str(&verification_text(&r.verification));
    let _ = writeln!(s, "  ({:.1} s)", r.elapsed_s);
    s
}

fn curve_text(c: &MixCurve, u: Units) -> String {
    let mut s = String::new();
    let l = u.label();
    let _ = writeln!(s, "mix {} ({})", c.mix, c.description);
    let _ = writeln!(
        s,
        "  {:<13} {:>10} {:>10} {:>10}  {:>10}  {:>17}  {:>6}",
        "step", "injected", "(memory)", "total", "latency", "95% CI", "x idle"
    );
    let _ = writeln!(
        s,
        "  {:<13} {:>10} {:>10} {:>10}  {:>10}  {:>17}  {:>6}",
        "", l, l, l, "ns", "ns", ""
    );
    for p in std::iter::once(&c.idle).chain(&c.steps) {
        let _ = writeln!(
            s,
            "  {:<13} {:>10.2} {:>10} {:>10.2}  {:>10.1}  {:>17}  {:>6.2}{}",
            p.step,
            u.convert(p.injected_gbps),
            format!("({:.2})", u.convert(p.injected_memory_gbps)),
            u.convert(p.total_memory_gbps),
            p.latency_ns.median,
            format!("{:.1}-{:.1}", p.ci_low_ns, p.ci_high_ns),
            p.vs_idle,
            if p.knee { "  <- knee" } else { "" }
        );
    }
    match c.knee {
        Some(k) => {
            let p = &c.steps[k];
            if let Some(t) = c.knee_total_gbps {
                let ci = c.knee_total_gbps_ci.map_or(String::new(), |[lo, hi]| {
                    format!(", 95% CI {:.2}-{:.2}", u.convert(lo), u.convert(hi))
                });
                let _ = writeln!(
                    s,
                    "  knee at {:.2} {l} of total memory traffic{ci} (where the latency, interpolated between steps, reaches 1.10 x idle)",
                    u.convert(t)
                );
            }
            let _ = writeln!(
                s,
                "  knee step at {:.2} {l} injected ({:.0}% of the curve's highest, {:.2} {l}): {:.1} ns, {:.2} x idle",
                u.convert(p.injected_gbps),
                100.0 * p.injected_gbps / c.max_injected_gbps.max(1e-12),
                u.convert(c.max_injected_gbps),
                p.latency_ns.median,
                p.vs_idle
            );
        }
        None => {
            let _ = writeln!(
                s,
                "  no knee: latency did not stay clearly above idle up to {:.2} {l} injected (memory not loaded enough to show; add injectors or raise the load)",
                u.convert(c.max_injected_gbps)
            );
        }
    }
    s
}

/// Whether every point of `r` has its total memory bandwidth (reports
/// written before it was kept plot injected program bytes instead).
fn has_totals(r: &LoadedLatencyResult) -> bool {
    r.mixes.iter().all(|c| {
        std::iter::once(&c.idle)
            .chain(&c.steps)
            .all(|p| p.total_memory_gbps.is_finite())
    })
}

fn html(s: &mut Section, id: &str, r: &LoadedLatencyResult, which: &str) {
    // Latency against total memory bandwidth, as MLC plots it.
    let totals = has_totals(r);
    let x = |p: &numalab::experiments::loaded_latency::LoadPoint| {
        if totals {
            p.total_memory_gbps
        } else {
            p.injected_gbps
        }
    };
    let series: Vec<Series> = r
        .mixes
        .iter()
        .map(|c| Series {
            name: format!("{} ({})", c.mix.name(), c.description),
            points: std::iter::once(&c.idle)
                .chain(&c.steps)
                .map(|p| (x(p), p.latency_ns.median))
                .collect(),
            dashed: false,
        })
        .collect();
    let marks: Vec<PointMark> = r
        .mixes
        .iter()
        .filter_map(|c| {
            let (kx, ky) = if totals {
                // Where it lies: 1.10 x the idle latency.
                (c.knee_total_gbps?, 1.1 * c.idle.latency_ns.median)
            } else {
                (c.knee_injected_gbps?, c.knee_latency_ns?)
            };
            Some(PointMark {
                x: kx,
                y: ky,
                label: format!("knee ({})", c.mix.name()),
            })
        })
        .collect();
    let x_axis = if totals {
        "total memory bandwidth (GB/s: the injectors' memory bytes and the chase's lines)"
    } else {
        "injected bandwidth (GB/s, program bytes)"
    };
    // The memory the chase read, from its pages (the chase's own `node` is
    // its CPU's node).
    let node = chase_memory(r);
    s.figure(
        line_chart(
            id,
            &format!(
                "Loaded latency, {which} memory ({node}) from CPU {}",
                r.chase.cpu
            ),
            &Axis::new(x_axis, Scale::Linear, TickFormat::Number),
            &Axis::new("latency (ns per load)", Scale::Linear, TickFormat::Number),
            &series,
            &[],
            &marks,
        ),
        &format!(
            "A pointer chase on CPU {} while {} injector thread{} on CPU{} {} load the same memory at rising rates, from idle to unpaced ({}). The knee is where queueing starts: where the latency reaches 1.10 x idle.",
            r.chase.cpu,
            r.injectors.cpus.len(),
            if r.injectors.cpus.len() == 1 { "" } else { "s" },
            if r.injectors.cpus.len() == 1 { "" } else { "s" },
            r.injectors
                .cpus
                .iter()
                .copied()
                .collect::<numalab::IdSet>(),
            if r.shared_idle {
                "one idle point for all mixes"
            } else {
                "each mix with its own idle point"
            }
        ),
    );
}

fn read_curve(r: &LoadedLatencyResult) -> Option<&MixCurve> {
    r.mixes
        .iter()
        .find(|c| c.mix == numalab::measure::pacing::TrafficMix::Read)
        .or_else(|| r.mixes.first())
}

/// The nodes holding pages of the chase buffer.
fn chase_nodes(r: &LoadedLatencyResult) -> IdSet {
    r.chase
        .pages_by_node
        .iter()
        .filter(|(_, &p)| p > 0)
        .map(|(&n, _)| n)
        .collect()
}

/// The memory node(s) holding a loaded-latency chase buffer, from its
/// page histogram ("node 3", "nodes 0,1").
pub fn chase_memory(r: &LoadedLatencyResult) -> String {
    let nodes = chase_nodes(r);
    match nodes.len() {
        0 => "no node (untouched)".into(),
        1 => format!("node {nodes}"),
        _ => format!("nodes {nodes}"),
    }
}

fn summarize(s: &mut SummaryBuilder, r: &LoadedLatencyResult, which: &str, key: bool) {
    let Some(c) = read_curve(r) else { return };
    let mi = r.mixes.iter().position(|x| std::ptr::eq(x, c)).unwrap_or(0);
    let idle = c.idle.latency_ns.median;
    let top = c
        .steps
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.injected_gbps.total_cmp(&b.1.injected_gbps));
    let Some((ti, top)) = top else { return };
    let mix = format!("mixes/{mi}");
    let step = format!("{mix}/steps/{ti}");
    let idle_d = s.at(&format!("{mix}/idle/latency_ns/median"));
    let top_d = s.at(&format!("{step}/latency_ns/median"));
    let gbps_d = s.at(&format!("{step}/injected_gbps"));
    if key {
        s.set_key("loaded_idle_ns", idle, idle_d.clone());
        s.set_key("loaded_max_ns", top.latency_ns.median, top_d.clone());
        s.set_key("loaded_max_gbps", top.injected_gbps, gbps_d.clone());
    }
    let nodes: Vec<u32> = chase_nodes(r).iter().collect();
    let mut f = finding("loaded-latency", "")
        .fig("cpu", r.chase.cpu as f64, "count", 0, s.at("chase/cpu"))
        .fig("idle", idle, "ns", 0, idle_d)
        .fig("top", top.latency_ns.median, "ns", 0, top_d)
        .fig("gbps", top.injected_gbps, "GB/s", 1, gbps_d)
        .fig(
            "threads",
            r.injectors.cpus.len() as f64,
            "count",
            0,
            Derivation::Count {
                path: s.path("injectors/cpus"),
            },
        )
        .fact("mix", c.mix.name(), s.path(&format!("{mix}/mix")));
    let memory = if nodes.len() == 1 {
        f = f.fig(
            "node",
            nodes[0] as f64,
            "node",
            0,
            Derivation::PageNode {
                path: s.path("chase/pages_by_node"),
            },
        );
        "node {node}".to_string()
    } else {
        chase_memory(r)
    };
    let knee = match (c.knee_total_gbps, c.knee_injected_gbps, c.knee_latency_ns) {
        (Some(t), _, _) => {
            let kd = s.at(&format!("{mix}/knee_total_gbps"));
            if key {
                s.set_key("loaded_knee_gbps", t, kd.clone());
            }
            f = f.fig("kt", t, "GB/s", 1, kd);
            "; the knee, where latency reaches 1.10x idle, is at {kt} GB/s of total memory traffic"
        }
        (None, Some(g), Some(l)) => {
            f = f
                .fig(
                    "kg",
                    g,
                    "GB/s",
                    1,
                    s.at(&format!("{mix}/knee_injected_gbps")),
                )
                .fig("kl", l, "ns", 0, s.at(&format!("{mix}/knee_latency_ns")));
            "; the knee is at {kg} GB/s ({kl} ns)"
        }
        _ => "; no knee: the injectors could not load the memory enough to show one",
    };
    f.template = format!(
        "Under load, the latency of {which} memory ({memory}) from CPU {{cpu}} goes from {{idle}} ns idle to {{top}} ns with {{gbps}} GB/s injected by {{threads}} {} ({{mix}} mix){knee}.",
        if r.injectors.cpus.len() == 1 { "thread" } else { "threads" },
    );
    s.claim(f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A point at `total` GB/s of total memory traffic with latency `ns`
    /// and the 95% interval `[lo, hi]`.
    fn point(step: &str, total: f64, ns: f64, lo: f64, hi: f64) -> serde_json::Value {
        json!({
            "step": step, "load": null, "injected_gbps": total, "injected_memory_gbps": total,
            "total_memory_gbps": total, "per_thread_gbps": [total],
            "latency_ns": {"median": ns, "best": ns, "min": ns, "max": ns, "spread": 0.0,
                           "rel_ci": (hi - lo) / 2.0 / ns},
            "ci_low_ns": lo, "ci_high_ns": hi, "samples": 10, "stop_reason": "converged",
            "wall_latency_ns": ns, "cpu_share": 1.0, "vs_idle": 1.0, "rises": false, "knee": false
        })
    }

    /// The curve's text gives the knee with its 95% interval, in the units
    /// asked; a curve from before the interval was kept gives the knee alone.
    #[test]
    fn the_knee_is_printed_with_its_interval() {
        let mut curve = json!({
            "mix": "read", "description": "reads", "memory_per_program_byte": 1.0,
            "idle": point("idle", 0.5, 100.0, 99.5, 100.5),
            "steps": [point("1", 10.0, 104.0, 103.5, 104.5), point("2", 20.0, 134.0, 133.5, 134.5)],
            "knee": 1, "knee_injected_gbps": 20.0, "knee_latency_ns": 134.0,
            "knee_total_gbps": 12.0, "knee_total_gbps_ci": [11.65, 12.35],
            "max_injected_gbps": 20.0
        });
        let c: MixCurve = serde_json::from_value(curve.clone()).unwrap();
        let t = curve_text(&c, Units::Gb);
        assert!(
            t.contains("knee at 12.00 GB/s of total memory traffic, 95% CI 11.65-12.35 (where"),
            "{t}"
        );
        curve["knee_total_gbps_ci"] = serde_json::Value::Null;
        let c: MixCurve = serde_json::from_value(curve).unwrap();
        let t = curve_text(&c, Units::Gb);
        assert!(
            t.contains("knee at 12.00 GB/s of total memory traffic (where"),
            "{t}"
        );
    }
}
