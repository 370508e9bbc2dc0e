//! Running a sweep: the foreground buffers placed once, each case timed with
//! its threads pinned (under its background load when there is one), the
//! cases a budget can pay for, and the checks that make a result trustworthy.

use super::space::{coverage_order, plan, Access, PlannedCase, SweepSpace};
use super::{
    Background, BufferCheckLite, CaseResult, CaseTime, SweepBuffer, SweepProgress, SweepRequest,
    SweepResult, SweepRun, ThreadResult,
};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::kernels::{run_pass, BandwidthKernel, ByteCount};
use crate::measure::pacing::{PacedLoad, PacedReport, PacedSpec, TrafficMix};
use crate::measure::stats::{measure, StopRule};
use crate::placement::{
    pin_current_thread, sys, BufferSpec, MemoryPolicy, PlacedBuffer, PlacementError,
};
use crate::IdSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Per thread of a case: median seconds per pass and the CPUs it was seen on.
type ThreadTimes = Vec<(f64, Vec<u32>)>;

/// Buffers of one thread index, one per memory node.
struct ThreadBuffers {
    by_node: BTreeMap<u32, PlacedBuffer>,
}

fn as_f64(buf: &mut PlacedBuffer) -> &mut [f64] {
    // SAFETY: page-aligned, initialized memory owned by `buf`; any bit pattern is a valid f64.
    let (pre, mid, _) = unsafe { buf.as_mut_slice().align_to_mut::<f64>() };
    debug_assert!(pre.is_empty());
    mid
}

fn check(m: &Machine, node: u32, buf: &PlacedBuffer) -> Result<BufferCheckLite, PlacementError> {
    let h = buf.histogram()?;
    let mut problems = Vec::new();
    if h.untouched_pages > 0 {
        problems.push(format!("{} pages never touched", h.untouched_pages));
    }
    let out = h.pages_outside(&IdSet::single(node));
    if out > 0 {
        problems.push(format!(
            "{out} of {} pages not on node {node}",
            h.pages_total
        ));
    }
    let _ = m;
    Ok(BufferCheckLite {
        pages_by_node: h.pages_by_node.clone(),
        untouched_pages: h.untouched_pages,
        verified: problems.is_empty(),
        problems,
    })
}

/// A CPU to touch buffers bound to `node` from: one of the node's sweep CPUs
/// when it has some (first touch is strict under bind anyway).
fn toucher_for(m: &Machine, node: u32, cpus: &IdSet) -> u32 {
    m.node(node)
        .and_then(|n| n.cpus.intersection(cpus).first())
        .or_else(|| cpus.first())
        .unwrap_or(0)
}

/// Times one case: its threads pinned, started together, each timing its
/// passes; the sample is the slowest thread's seconds per pass.
fn run_case(
    req: &SweepRequest,
    case: &PlannedCase,
    bufs: &mut [ThreadBuffers],
    rule: &StopRule,
) -> Result<(CaseTime, ThreadTimes), PlacementError> {
    let n = case.threads.len();
    let start = Barrier::new(n + 1);
    let done = Barrier::new(n + 1);
    let stop = AtomicBool::new(false);
    let passes = AtomicUsize::new(1);
    let times: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let failed: std::sync::Mutex<Option<PlacementError>> = std::sync::Mutex::new(None);
    let mut slots: Vec<Option<&mut PlacedBuffer>> = Vec::with_capacity(n);
    for (i, b) in bufs.iter_mut().enumerate().take(n) {
        slots.push(b.by_node.get_mut(&case.threads[i].mem));
    }
    let mut per_thread: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut seen: Vec<Vec<u32>> = vec![Vec::new(); n];
    let seen_m = std::sync::Mutex::new(vec![Vec::<u32>::new(); n]);
    let meas = std::thread::scope(|s| {
        for (i, slot) in slots.into_iter().enumerate() {
            let t = case.threads[i];
            let (start, done, stop, passes, times, failed, seen_m) =
                (&start, &done, &stop, &passes, &times, &failed, &seen_m);
            s.spawn(move || {
                let kernel = kernel_of(req, t.access);
                let ok = match (pin_current_thread(t.cpu), slot) {
                    (Ok(()), Some(b)) => Some(b),
                    (Err(e), _) => {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        None
                    }
                    (_, None) => {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(
                            PlacementError::Invalid(format!("no buffer on node {}", t.mem)),
                        );
                        None
                    }
                };
                let mut slice = ok.map(as_f64);
                loop {
                    start.wait();
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let k = passes.load(Ordering::Acquire);
                    let t0 = Instant::now();
                    if let Some(sl) = slice.as_deref_mut() {
                        let mut sink = 0.0;
                        for _ in 0..k {
                            sink += run_pass(kernel, req.isa, &mut [&mut *sl], 1.0);
                        }
                        std::hint::black_box(sink);
                    }
                    times[i].store(
                        (t0.elapsed().as_secs_f64() / k as f64).to_bits(),
                        Ordering::Release,
                    );
                    if let Some(c) = sys::current_cpu() {
                        let mut g = seen_m.lock().unwrap_or_else(|p| p.into_inner());
                        if !g[i].contains(&c) {
                            g[i].push(c);
                        }
                    }
                    done.wait();
                }
            });
        }
        let mut sample = |record: bool| -> f64 {
            start.wait();
            done.wait();
            let ts: Vec<f64> = times
                .iter()
                .map(|t| f64::from_bits(t.load(Ordering::Acquire)))
                .collect();
            if record {
                for (w, t) in ts.iter().enumerate() {
                    per_thread[w].push(*t);
                }
            }
            ts.iter().cloned().fold(0.0, f64::max)
        };
        // Calibrate: samples long enough that barrier skew does not count.
        if req.min_sample_s > 0.0 {
            let one = sample(false).max(1e-7);
            let k = (req.min_sample_s / one).ceil().clamp(1.0, 1e6) as usize;
            passes.store(k, Ordering::Release);
        }
        let meas = if failed.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
            None
        } else {
            Some(measure(rule, || sample(true)))
        };
        stop.store(true, Ordering::Release);
        start.wait();
        meas
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let meas = meas.ok_or_else(|| PlacementError::Os("case did not run".into()))?;
    for (w, v) in per_thread.iter_mut().enumerate() {
        v.drain(..meas.warmup_samples.len().min(v.len()));
        seen[w] = seen_m.lock().unwrap_or_else(|p| p.into_inner())[w].clone();
    }
    let fig = CaseTime::of(&meas.summary);
    let threads = per_thread
        .into_iter()
        .zip(seen)
        .map(|(mut v, s)| {
            v.sort_by(f64::total_cmp);
            (v.get(v.len() / 2).copied().unwrap_or(f64::NAN), s)
        })
        .collect();
    Ok((fig, threads))
}

/// Background CPUs for a case: fixed ones, or a subscription of the CPUs the
/// case leaves free, spread over nodes (one per node in turn).
fn background_cpus(m: &Machine, bg: &Background, case: &PlannedCase, allowed: &IdSet) -> Vec<u32> {
    let busy: IdSet = {
        let mut s = IdSet::new();
        for t in &case.threads {
            s.insert(t.cpu);
        }
        s
    };
    if let Some(c) = &bg.cpus {
        return c.difference(&busy).iter().collect();
    }
    let free = allowed.difference(&busy);
    let order = crate::placement::thread_policy::scatter_order(m, &free);
    let k = bg.subscription.threads(order.len());
    order.into_iter().take(k).collect()
}

/// Runs a sweep. `progress` gets (done, total, label) after every case.
pub fn run_sweep(
    m: &Machine,
    req: &SweepRequest,
    progress: SweepProgress,
) -> Result<SweepResult, PlacementError> {
    let t_start = Instant::now();
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    let space = SweepSpace::new(m, &req.cpus, &req.mem_nodes, &req.accesses)
        .map_err(PlacementError::Invalid)?;
    let plans = plan(&space, req).map_err(PlacementError::Invalid)?;
    let max_threads = req.threads.iter().copied().max().unwrap_or(1);
    let elems = req.buffer_bytes / 8;
    if elems < 64 {
        return Err(PlacementError::Invalid(
            "sweep buffers must be at least 512 bytes".into(),
        ));
    }
    let total_bytes = (req.buffer_bytes as u64) * (max_threads * space.mem_nodes().len()) as u64;
    if total_bytes > crate::placement::usable_free_bytes(m) {
        return Err(PlacementError::Capacity(format!(
            "{max_threads} thread(s) x {} memory node(s) x {} = {} of buffers do not fit in the {} free; use a smaller --size",
            space.mem_nodes().len(),
            crate::placement::format_bytes(req.buffer_bytes as u64),
            crate::placement::format_bytes(total_bytes),
            crate::placement::format_bytes(crate::placement::usable_free_bytes(m))
        )));
    }
    // One buffer per (thread index, memory node), placed and checked once:
    // a case only picks which buffers its threads stream.
    let mut bufs: Vec<ThreadBuffers> = Vec::new();
    let mut buffers = Vec::new();
    for t in 0..max_threads {
        // Thread by thread, so that `bufs` and `buffers` stay in step.
        if cancel::requested() {
            break;
        }
        let mut by_node = BTreeMap::new();
        for &node in space.mem_nodes() {
            let spec = BufferSpec {
                size: req.buffer_bytes,
                policy: MemoryPolicy::Bind {
                    nodes: IdSet::single(node),
                },
                thp: req.thp,
                hugetlb: false,
                toucher: Some(toucher_for(m, node, &req.cpus)),
                weighted: Default::default(),
            };
            let mut b = PlacedBuffer::new(m, &spec)?;
            as_f64(&mut b).fill(1.0);
            let c = check(m, node, &b)?;
            buffers.push(SweepBuffer {
                thread: t,
                node,
                at_start: c.clone(),
                at_end: c,
            });
            by_node.insert(node, b);
        }
        bufs.push(ThreadBuffers { by_node });
    }
    // Cancelled during the set-up: no case may run without its buffers.
    let setup_cut = bufs.len() < max_threads;
    let setup_s = t_start.elapsed().as_secs_f64();

    // How many cases fit the budget, and how long each may take.
    let total_planned: usize =
        plans.iter().map(|p| p.2.len()).sum::<usize>() * req.backgrounds.len();
    let mut rule = req.rule.clone();
    let mut take: Vec<usize> = plans.iter().map(|p| p.2.len()).collect();
    let mut warnings = Vec::new();
    if let Some(b) = req.budget {
        let avail = (b.as_secs_f64() - setup_s).max(0.0);
        // A case costs its budget plus about one calibration and a warm-up
        // sample, and background start-up when there is one.
        let per_case_overhead = 0.06
            + if req.backgrounds.iter().any(|x| x.is_some()) {
                0.1
            } else {
                0.0
            };
        let min_case = 0.1;
        let share = avail / total_planned.max(1) as f64;
        if share >= min_case + per_case_overhead {
            rule.budget = Duration::from_secs_f64(
                (share - per_case_overhead).min(req.rule.budget.as_secs_f64()),
            );
        } else {
            rule.budget = Duration::from_secs_f64(min_case);
            let affordable = (avail / (min_case + per_case_overhead)).floor() as usize;
            // Share what fits over thread counts and backgrounds in
            // proportion to their case counts.
            // Every run covers its hop classes (its cases are ordered so
            // that the first ones do); the rest is shared in proportion.
            let frac = affordable as f64 / total_planned as f64;
            for (t, p) in take.iter_mut().zip(&plans) {
                let classes: BTreeSet<String> = p.2.iter().map(|c| c.hop_class()).collect();
                *t = ((p.2.len() as f64 * frac).floor() as usize)
                    .max(classes.len())
                    .max(1)
                    .min(p.2.len());
            }
            warnings.push(format!(
                "--budget {:.0}s: running {} of {} cases, chosen to cover every hop class first",
                b.as_secs_f64(),
                take.iter().sum::<usize>() * req.backgrounds.len(),
                total_planned
            ));
        }
    }
    let total_to_run: u64 = (take.iter().sum::<usize>() * req.backgrounds.len()) as u64;
    let mut done = 0u64;
    let mut runs = Vec::new();
    let mut all_verified = buffers.iter().all(|b| b.at_start.verified);
    let deadline = req.budget.map(|b| t_start + b);
    let mut case_seconds_sum = 0.0;
    let mut cases_timed = 0usize;
    'runs: for bg in &req.backgrounds {
        for ((threads, total, cases), &k) in plans.iter().zip(&take) {
            if setup_cut || cancel::requested() {
                break 'runs;
            }
            let t_run = Instant::now();
            let order = coverage_order(cases);
            let hop_classes: BTreeSet<String> = cases.iter().map(|c| c.hop_class()).collect();
            let mut results: Vec<CaseResult> = Vec::new();
            for &i in order.iter().take(k) {
                if cancel::requested() {
                    break;
                }
                if let Some(d) = deadline {
                    // Stop when the next case, as long as the cases so far
                    // took on average, would not end in time.
                    let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
                    let expect = if cases_timed > 0 {
                        case_seconds_sum / cases_timed as f64
                    } else {
                        rule.budget.as_secs_f64()
                    };
                    if left < expect && !results.is_empty() {
                        warnings.push(format!(
                            "budget spent: {} of {} planned cases of {threads} thread(s) ran",
                            results.len(),
                            k
                        ));
                        break;
                    }
                }
                let case = &cases[i];
                let t_case = Instant::now();
                let (load, bg_cpus) = match bg {
                    Some(bg) => {
                        let cpus = background_cpus(m, bg, case, &m.allowed_cpus);
                        if cpus.is_empty() {
                            (None, cpus)
                        } else {
                            let spec = PacedSpec {
                                cpus: cpus.clone(),
                                bytes_per_second: Some(bg.bytes_per_second),
                                mix: TrafficMix::Read,
                                buffer_bytes: req.background_bytes,
                                policy: MemoryPolicy::Local,
                                thp: req.thp,
                            };
                            (Some(PacedLoad::start(m, &spec)?), cpus)
                        }
                    }
                    None => (None, Vec::new()),
                };
                let mark = load.as_ref().map(|l| l.mark());
                let outcome = run_case(req, case, &mut bufs, &rule);
                let achieved = match (&load, &mark) {
                    (Some(l), Some(mk)) => l.rates_since(mk),
                    _ => Vec::new(),
                };
                let bg_ok = load
                    .as_ref()
                    .is_none_or(|l| l.workers().iter().all(|w| w.verified));
                let _report: Option<PacedReport> = load.map(|l| l.stop());
                let (fig, per) = outcome?;
                let mut problems = Vec::new();
                let threads_out: Vec<ThreadResult> = case
                    .threads
                    .iter()
                    .zip(per)
                    .map(|(t, (secs, seen))| {
                        let ok = !seen.is_empty() && seen.iter().all(|&c| c == t.cpu);
                        if !ok {
                            problems.push(format!(
                                "thread {} asked for CPU {} ran on {:?}",
                                t.label(),
                                t.cpu,
                                seen
                            ));
                        }
                        ThreadResult {
                            case: *t,
                            label: t.label(),
                            seconds: secs,
                            gbps: bytes_per_pass(kernel_of(req, t.access), req.buffer_bytes).program
                                as f64
                                / secs
                                / 1e9,
                            memory_gbps: bytes_per_pass(kernel_of(req, t.access), req.buffer_bytes)
                                .memory as f64
                                / secs
                                / 1e9,
                            seen_cpus: seen,
                            verified: ok,
                        }
                    })
                    .collect();
                for (ti, t) in case.threads.iter().enumerate() {
                    if let Some(b) = buffers.iter().find(|b| b.thread == ti && b.node == t.mem) {
                        if !b.at_start.verified {
                            problems.push(format!(
                                "buffer of thread {ti} on node {}: {}",
                                t.mem,
                                b.at_start.problems.join("; ")
                            ));
                        }
                    }
                }
                if !bg_ok {
                    problems.push("background placement did not verify".into());
                }
                let verified = problems.is_empty();
                all_verified &= verified;
                results.push(CaseResult {
                    labels: case.threads.iter().map(|t| t.label()).collect(),
                    hop_class: case.hop_class(),
                    sharing: sharing(m, case).into(),
                    class_size: case.class_size,
                    class_key: case.class_key.clone(),
                    seconds: fig,
                    normalized: f64::NAN,
                    threads: threads_out,
                    background_achieved: achieved,
                    background_cpus: bg_cpus,
                    verified,
                    problems,
                });
                done += 1;
                case_seconds_sum += t_case.elapsed().as_secs_f64();
                cases_timed += 1;
                progress(done, total_to_run, &case.label());
            }
            let fastest = results
                .iter()
                .map(|r| r.seconds.median)
                .filter(|x| x.is_finite() && *x > 0.0)
                .fold(f64::INFINITY, f64::min);
            for r in results.iter_mut() {
                r.normalized = r.seconds.median / fastest;
            }
            let run_hops: BTreeSet<&str> = results.iter().map(|r| r.hop_class.as_str()).collect();
            runs.push(SweepRun {
                threads: *threads,
                background: bg.clone(),
                total_cases: *total,
                classes: cases.len() as u64,
                cases_run: results.len() as u64,
                hop_classes: hop_classes.len() as u64,
                hop_classes_run: run_hops.len() as u64,
                elapsed_s: t_run.elapsed().as_secs_f64(),
                cases: results,
            });
        }
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    // Pages can move while a sweep runs (NUMA balancing, migration): check again.
    for b in buffers.iter_mut() {
        if let Some(buf) = bufs[b.thread].by_node.get(&b.node) {
            b.at_end = check(m, b.node, buf)?;
            if b.at_end.pages_by_node != b.at_start.pages_by_node {
                warnings.push(format!(
                    "the buffer of thread {} on node {} moved during the sweep",
                    b.thread, b.node
                ));
                all_verified = false;
            }
        }
    }
    Ok(SweepResult {
        folded: !req.full,
        node_automorphisms: space.automorphism_count() as u64,
        cpus: space.cpu_ids(),
        mem_nodes: space.mem_nodes().to_vec(),
        accesses: req.accesses.clone(),
        read_kernel: req.read_kernel.name().into(),
        write_kernel: req.write_kernel.name().into(),
        buffer_bytes: req.buffer_bytes as u64,
        budget_s: req.budget.map(|b| b.as_secs_f64()),
        runs,
        buffers,
        verified: all_verified,
        warnings,
        elapsed_s: t_start.elapsed().as_secs_f64(),
    })
}

fn kernel_of(req: &SweepRequest, a: Access) -> BandwidthKernel {
    match a {
        Access::Read => req.read_kernel,
        Access::Write => req.write_kernel,
    }
}

/// How the threads of a case share hardware: `cpu` (two on one CPU: they
/// take turns), `core` (SMT siblings), `none`.
fn sharing(m: &Machine, case: &PlannedCase) -> &'static str {
    let cpus: Vec<u32> = case.threads.iter().map(|t| t.cpu).collect();
    for (i, a) in cpus.iter().enumerate() {
        if cpus[i + 1..].contains(a) {
            return "cpu";
        }
    }
    let core_of = |c: u32| m.cores.iter().position(|k| k.cpus.contains(c));
    for (i, a) in cpus.iter().enumerate() {
        if cpus[i + 1..]
            .iter()
            .any(|b| core_of(*a).is_some() && core_of(*a) == core_of(*b))
        {
            return "core";
        }
    }
    "none"
}

/// Bytes one pass of a sweep thread moves.
pub fn bytes_per_pass(kernel: BandwidthKernel, buffer_bytes: usize) -> ByteCount {
    kernel.bytes_per_pass(buffer_bytes / 8)
}
