//! `numalab profile`: the text of a profile (regions by allocation site,
//! their access matrices and pages, the threads).

use numalab::profile::{Profile, RegionProfile};
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

pub(super) fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{:.0}%", x * 100.0))
}

/// "0→0 120, 0→1 40": sampled accesses by CPU node → memory node.
/// Each region's site as the output shows it: where sampled regions share
/// a site, what tells them apart: the first caller where their stacks
/// differ (`xmalloc util.c:10 via parse_args main.c:80`), else their order
/// and address (`main t.c:42 #2 of 8 at 0x7f…`).
pub(super) fn shown_sites(regions: &[RegionProfile]) -> Vec<String> {
    let mut by_site: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, r) in regions.iter().enumerate().filter(|(_, r)| r.sampled) {
        by_site.entry(r.site.as_str()).or_default().push(i);
    }
    let mut out: Vec<String> = regions.iter().map(|r| r.site.clone()).collect();
    for (site, same) in by_site.into_iter().filter(|(_, v)| v.len() > 1) {
        for (k, &i) in same.iter().enumerate() {
            let stack = &regions[i].stack;
            // The first frame (past the site's own) that some other
            // region of the site does not have at that depth.
            let apart = (1..stack.len()).find(|&d| {
                same.iter()
                    .any(|&j| j != i && regions[j].stack.get(d) != Some(&stack[d]))
            });
            let unique = apart.is_some_and(|d| {
                same.iter()
                    .all(|&j| j == i || regions[j].stack.get(..=d) != stack.get(..=d))
            });
            out[i] = match apart {
                Some(d) if unique => format!("{site} via {}", stack[d]),
                _ => format!(
                    "{site} #{} of {} at {:#x}",
                    k + 1,
                    same.len(),
                    regions[i].first_address
                ),
            };
        }
    }
    out
}

fn matrix(r: &RegionProfile) -> String {
    let cells: Vec<String> = r
        .accesses
        .iter()
        .flat_map(|(c, row)| row.iter().map(move |(m, n)| format!("{c}→{m} {n}")))
        .collect();
    if cells.is_empty() {
        "-".into()
    } else {
        cells.join(", ")
    }
}

fn pages(r: &RegionProfile) -> String {
    if r.pages_by_node.is_empty() {
        return "-".into();
    }
    node_counts(&r.pages_by_node)
}

/// Pages per node as "0:12 1:3 absent:5" (-1 not present, -2 beyond the
/// nodes counted).
pub(super) fn node_counts(pages: &std::collections::BTreeMap<i32, u64>) -> String {
    pages
        .iter()
        .map(|(n, p)| match n {
            -1 => format!("absent:{p}"),
            -2 => format!("beyond:{p}"),
            n => format!("{n}:{p}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// "74% (95% CI 63–82%)".
fn share_with_interval(s: &numalab::profile::estimate::Share) -> String {
    format!(
        "{:.0}% (95% CI {:.0}–{:.0}%)",
        s.share * 100.0,
        s.low * 100.0,
        s.high * 100.0
    )
}

/// A region's (or the program's) word-count estimate: its samples (cells
/// with an access), remote share and access matrix, each with its
/// interval.
fn estimate_line(e: &numalab::profile::estimate::AccessEstimate) -> String {
    let remote = e.remote.as_ref().map_or("-".into(), share_with_interval);
    let cells: Vec<String> = e
        .matrix
        .iter()
        .map(|c| {
            format!(
                "{}→{} {:.0}% ({:.0}–{:.0})",
                c.cpu_node,
                c.memory_node,
                c.share.share * 100.0,
                c.share.low * 100.0,
                c.share.high * 100.0
            )
        })
        .collect();
    format!(
        "accesses (word counts): {} samples, remote {remote}; CPU node→memory node: {}",
        e.cells,
        if cells.is_empty() {
            "-".into()
        } else {
            cells.join(", ")
        }
    )
}

/// The headline share of the program: the word counts' where they ran.
fn program_share_line(p: &Profile) -> String {
    match (&p.estimate, &p.word_counting) {
        (Some(e), _) if e.remote.is_some() => format!(
            "remote {} of its accesses, from word counts ({} samples in {} windows of {} threads)",
            e.remote.as_ref().map_or("-".into(), share_with_interval),
            e.cells,
            p.word_counting.as_ref().map_or(0, |w| w.windows),
            p.word_counting.as_ref().map_or(0, |w| w.threads),
        ),
        (_, Some(w)) if w.unavailable.is_some() => format!(
            "remote {} of its page-fault samples (error not bounded: {})",
            percent(p.remote_share),
            w.unavailable.as_deref().unwrap_or_default()
        ),
        _ => format!(
            "remote {} of its page-fault samples (error not bounded: no access was counted by word)",
            percent(p.remote_share)
        ),
    }
}

/// How the rate was chosen and what sampling cost, as measured.
pub(super) fn sampling_line(p: &Profile) -> String {
    // No page was armed: a rate of pages says nothing.
    let armed_none = if p.go_runtime {
        Some("no page armed (a Go program: its runtime's own system calls would fail on one)")
    } else if p.pmu.as_ref().is_some_and(|u| u.used) {
        Some("no page armed (the PMU's memory samples instead)")
    } else {
        None
    };
    if let Some(why) = armed_none {
        let words = p.word_counting.as_ref().filter(|w| w.unavailable.is_none());
        return match words {
            Some(w) => format!(
                "sampling: {why}; word counts over {} windows of {} threads",
                w.windows, w.threads
            ),
            None => format!("sampling: {why}"),
        };
    }
    let Some(c) = &p.cost else {
        return format!("sampling: {} pages a second (cost not measured)", p.rate);
    };
    let how = match c.target_percent {
        Some(t) => format!(
            "adaptive to {t}% of the program's CPU time{}, {}–{} pages a second (last {})",
            in_step_words(c),
            c.min_rate,
            c.max_rate,
            c.final_rate
        ),
        None => format!("{} pages a second, fixed", c.final_rate),
    };
    let spent = match (cost_words(c), c.us_per_sample) {
        (Some(w), Some(u)) => format!(
            "; {w} ({u:.1} µs a sample, {:.1} µs of it the kernel's fault)",
            c.kernel_us_per_fault
        ),
        (Some(w), None) => format!("; {w}"),
        _ => String::new(),
    };
    let window = p
        .sampled_for_s
        .map_or(String::new(), |d| format!(", for the first {d} s"));
    let armed = armed_words(c).map_or(String::new(), |a| format!("; {a}"));
    format!("sampling: {how}{window}{armed}{spent}")
}

/// What the target was a share of where the program's threads ran in
/// step (a delay of one holds up the others): its CPU time over them,
/// which is its wall time when every busy thread is in step. Empty under
/// 1.05 threads, or from a library that did not measure it.
pub fn in_step_words(c: &numalab::profile::SamplingCost) -> String {
    match c.in_step {
        Some(k) if k >= 1.05 => format!(
            " over its {k:.1} threads in step (busy, and waiting for each other often: a \
             delay of one holds up the others)"
        ),
        _ => String::new(),
    }
}

/// The pages armed a second, as the run got them; with a fixed rate that
/// got under 80% of it, how much of it and why (the rate asked is not
/// what a program with few pages to arm, or a busy machine, gets).
pub fn armed_words(c: &numalab::profile::SamplingCost) -> Option<String> {
    // None armed: the page-fault line and its warning say so and why.
    let armed = c.armed_per_s.filter(|&a| a > 0.0)?;
    let asked = c.final_rate as f64;
    Some(match c.target_percent {
        None if asked > 0.0 && armed < 0.8 * asked => format!(
            "{armed:.0} pages armed a second, {:.0}% of the rate asked (a page is armed again \
             only once its last arming was touched: a program that touches few pages, or a \
             busy machine that delays the sampler's ticks, gets fewer)",
            100.0 * armed / asked
        ),
        _ => format!("{armed:.0} pages armed a second"),
    })
}

/// What sampling cost, by the library's own measure: its CPU time beside
/// the program's own (the process's CPU time less sampling's), as a share
/// of it, or as a multiple when sampling used more than the program (a
/// program that mostly waits: 1338% once read as a share of a whole).
pub fn cost_words(c: &numalab::profile::SamplingCost) -> Option<String> {
    let e = c.estimated_percent?;
    let share = if e <= 100.0 {
        format!("{e:.1}% on top of")
    } else {
        format!("{:.1} times", e / 100.0)
    };
    Some(format!(
        "sampling used {:.1} ms of CPU, {share} the program's own {:.1} ms",
        c.spent_ms, c.program_cpu_ms
    ))
}

/// A region's page snapshots, the first and last three when there are
/// more than six.
fn pages_over_time(r: &RegionProfile) -> String {
    let one = |x: &numalab::profile::PageSnapshot| {
        format!("{:.2} s {}", x.at_s, node_counts(&x.pages_by_node))
    };
    head_and_tail(&r.pages_over_time, 6, (3, 3), "; ", one)
}

/// A thread's spans on nodes, the first and last few when there are many.
fn timeline(spans: &[numalab::profile::ThreadSpan]) -> String {
    let one = |x: &numalab::profile::ThreadSpan| {
        format!(
            "{:.2}–{:.2} s node {}",
            x.from_s,
            x.to_s,
            x.node.map_or("?".into(), |n| n.to_string())
        )
    };
    head_and_tail(spans, 8, (4, 3), ", ", one)
}

/// Every item of `v` when there are at most `all_up_to`, else the first and
/// last few (`ends`) around "… N more …", joined with `sep`.
fn head_and_tail<T>(
    v: &[T],
    all_up_to: usize,
    ends: (usize, usize),
    sep: &str,
    one: impl Fn(&T) -> String,
) -> String {
    if v.len() <= all_up_to {
        return v.iter().map(&one).collect::<Vec<_>>().join(sep);
    }
    let (head, tail) = ends;
    let join = |part: &[T]| part.iter().map(&one).collect::<Vec<_>>().join(sep);
    format!(
        "{}{sep}… {} more …{sep}{}",
        join(&v[..head]),
        v.len() - head - tail,
        join(&v[v.len() - tail..])
    )
}

/// Who touched a region's pages first, and where they went.
fn first_touch_line(f: &numalab::profile::FirstTouches) -> String {
    let nodes = f
        .nodes
        .iter()
        .map(|(n, k)| match n {
            -1 => format!("unknown:{k}"),
            -2 => format!("zero page (read before written):{k}"),
            n => format!("{n}:{k}"),
        })
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "first touches sampled: {} ({} writes) by threads {}; their pages went to node {nodes}",
        f.samples,
        f.writes,
        f.threads
            .iter()
            .map(|(t, n)| format!("{t} ({n})"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Lines shown in the refinement table at most (the JSON has them all).
const REFINED_LINES_SHOWN: usize = 12;

/// What refinement watched and what it cost, in one sentence.
pub(super) fn refinement_summary(r: &numalab::profile::refine::Refinement) -> String {
    let cost = match (r.us_per_hit, r.hits_cost_ms) {
        (Some(us), Some(ms)) => {
            format!(", {us:.1} µs a hit to the accessing thread: about {ms:.0} ms of the program's time")
        }
        _ => String::new(),
    };
    format!(
        "{} windows of two words, {:.0} ms watched in all; {} hits{cost}; {} write probes of the lines' pages",
        r.word_windows, r.watched_ms, r.hits, r.write_probes
    )
}

/// The refinement: watch time and cost, then each line's words by node.
fn refinement(r: &numalab::profile::refine::Refinement) -> String {
    let mut s = String::from("\nrefinement (hardware watchpoints on 8-byte words):\n");
    if let Some(why) = &r.unavailable {
        let _ = writeln!(s, "  not available: {why}");
        return s;
    }
    let _ = writeln!(s, "  {}", refinement_summary(r));
    if r.lines.is_empty() {
        let _ = writeln!(s, "  no watched word was accessed while watched");
    }
    let by_node = |m: &std::collections::BTreeMap<u32, u64>| {
        m.iter()
            .map(|(n, k)| format!("{n}:{k}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    for l in r.lines.iter().take(REFINED_LINES_SHOWN) {
        let verdict = if l.false_sharing {
            "  FALSE SHARING"
        } else if !l.shared_words.is_empty() {
            "  SHARED WRITES"
        } else {
            ""
        };
        let place = match (&l.site, l.offset) {
            (Some(site), Some(o)) => format!(" (offset {o} of {site})"),
            _ => String::new(),
        };
        let page = l.page_node.map_or("page node unknown".to_string(), |n| {
            format!("page on node {n}")
        });
        let _ = writeln!(
            s,
            "  line {:#x}{place}: {page}, written from nodes {:?}, accessed from {:?}{verdict}",
            l.address, l.written_from, l.accessed_from
        );
        for w in &l.words {
            let unplaced = if w.unplaced_reads + w.unplaced_writes > 0 {
                format!(
                    ", CPU unknown: reads {} writes {}",
                    w.unplaced_reads, w.unplaced_writes
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "    +{:<2} writes by node {:<16} reads by node {:<16} ({:.0} ms watched{unplaced})",
                w.offset,
                if w.writes.is_empty() { "-".into() } else { by_node(&w.writes) },
                if w.reads.is_empty() { "-".into() } else { by_node(&w.reads) },
                w.watched_ms
            );
        }
    }
    if r.lines.len() > REFINED_LINES_SHOWN {
        let _ = writeln!(
            s,
            "  ... and {} more lines (profile.json has them all)",
            r.lines.len() - REFINED_LINES_SHOWN
        );
    }
    s
}

/// What `--regions` and `--only-threads` limited the profile to.
fn selection_line(sel: &numalab::profile::Selection) -> String {
    let mut parts = Vec::new();
    if let Some(r) = &sel.regions {
        parts.push(format!(
            "regions {r} ({} static object{} and stacks left out)",
            sel.regions_left_out,
            if sel.regions_left_out == 1 { "" } else { "s" }
        ));
    }
    if let Some(t) = &sel.threads {
        parts.push(format!(
            "threads {t} ({} faults of other threads not recorded)",
            sel.samples_of_other_threads
        ));
    } else if sel.samples_of_other_threads > 0 {
        parts.push(format!(
            "{} faults of unselected threads not recorded",
            sel.samples_of_other_threads
        ));
    }
    if let Some(r) = &sel.refine_regions {
        parts.push(format!("refinement within {r}"));
    }
    format!("selected: {}\n", parts.join("; "))
}

/// Sites of small allocations the text lists (the JSON has them all).
const SMALL_SITES_SHOWN: usize = 10;

/// The text view.
pub fn render(p: &Profile) -> String {
    let mut s = String::new();
    header(&mut s, p);
    sampled_regions(&mut s, p);
    units(&mut s, p);
    small_sites(&mut s, p);
    located_regions(&mut s, p);
    if p.regions.is_empty() {
        let _ = writeln!(s, "  none");
    }
    threads(&mut s, p);
    if let Some(r) = &p.refinement {
        s.push_str(&refinement(r));
    }
    if !p.diagnoses.is_empty() {
        let _ = writeln!(s, "\ndiagnoses:");
        for d in &p.diagnoses {
            let _ = writeln!(s, "  [{}] {}\n    fix: {}", d.kind, d.text, d.fix);
        }
    }
    if let Some(c) = &p.plan_check {
        s.push('\n');
        s.push_str(&super::plan::check_text(c));
    }
    if let Some(c) = &p.counters {
        s.push('\n');
        s.push_str(&super::counters::text(c));
    }
    s
}

/// The command, what the profile could not see, and how it sampled.
fn header(s: &mut String, p: &Profile) {
    // How long the command ran under the profile (not numalab's own start
    // and analysis), to set beside a plain run's time.
    let ran = p
        .ran_for_s
        .map(|t| {
            if t < 1.0 {
                format!(" (ran {:.0} ms)", t * 1e3)
            } else {
                format!(" (ran {t:.2} s)")
            }
        })
        .unwrap_or_default();
    let _ = writeln!(s, "profile of: {}{ran}", p.program.join(" "));
    // First: what the profile could not see changes how to read the rest
    // (a static program has no data at all; a Go program no page-fault
    // samples).
    for w in &p.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    let _ = writeln!(
        s,
        "{}\npage faults: {} samples ({} pages armed; allocations of {} or more tracked)\n{}",
        program_share_line(p),
        p.samples,
        p.pages_armed,
        format_bytes(p.min_bytes),
        sampling_line(p)
    );
    if p.huge_page_samples > 0 {
        let _ = writeln!(
            s,
            "huge pages: {} samples on transparent huge pages, each armed whole so that it stays whole",
            p.huge_page_samples
        );
    }
    if let Some(f) = &p.latency_source {
        let _ = writeln!(s, "latencies measured: the latency matrix of {f}");
    }
    if let Some(sel) = &p.selection {
        s.push_str(&selection_line(sel));
    }
    if let Some(pmu) = &p.pmu {
        let _ = writeln!(
            s,
            "memory-sampling PMU: {}",
            match &pmu.found {
                Some(name) if pmu.used => format!("{name}, used"),
                Some(name) => format!("{name}, not used: {}", pmu.reason),
                None => format!("none ({})", pmu.reason),
            }
        );
    }
    if p.unattributed > 0 {
        let _ = writeln!(
            s,
            "{} samples outside the tracked allocations",
            p.unattributed
        );
    }
}

/// The sampled regions, most sampled first, each with its accesses, pages and threads.
fn sampled_regions(s: &mut String, p: &Profile) {
    let _ = writeln!(s, "\nregions (by allocation site, most sampled first):");
    let names = shown_sites(&p.regions);
    let sampled = p.regions.iter().zip(&names).filter(|(r, _)| r.sampled);
    for (i, (r, name)) in sampled.enumerate() {
        let _ = writeln!(
            s,
            "{:>3}. {} {} in {} allocation{} at {}{}\n     {}\n     page faults: {} samples (reads {}, writes {}{}), remote {}{}, distance ratio {}\n     page-fault samples CPU node→memory node: {}\n     pages by node: {}\n     threads: {}",
            i + 1,
            r.kind,
            format_bytes(r.bytes),
            r.allocations,
            if r.allocations == 1 { "" } else { "s" },
            name,
            match (&r.object, r.kind.as_str()) {
                (Some(f), "file") => format!(", mapping {f}"),
                _ => String::new(),
            },
            r.estimate
                .as_ref()
                .map_or("accesses (word counts): none counted".into(), estimate_line),
            r.samples,
            r.reads,
            r.writes,
            if r.unknown_access > 0 {
                format!(", unknown {}", r.unknown_access)
            } else {
                String::new()
            },
            percent(r.fault_remote_share()),
            if r.samples > 0 { " (not bounded)" } else { "" },
            match (&r.latency_cost, r.distance_ratio) {
                (Some(c), _) => format!(
                    "{:.2}; latency ratio {:.2} (measured: {:.0} ns an access, {:.0} ns were all local{})",
                    r.distance_ratio.unwrap_or(1.0),
                    c.ratio,
                    c.ns_per_access,
                    c.local_ns_per_access,
                    if c.priced < c.placed {
                        format!("; {} of {} samples priced", c.priced, c.placed)
                    } else {
                        String::new()
                    }
                ),
                (None, d) => d.map_or("-".into(), |d| format!("{d:.2}")),
            },
            matrix(r),
            pages(r),
            r.threads
                .iter()
                .map(|(t, n)| format!("{t} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(f) = &r.first_touch {
            let _ = writeln!(s, "     {}", first_touch_line(f));
        }
        if !r.pages_over_time.is_empty() {
            let _ = writeln!(s, "     pages over time: {}", pages_over_time(r));
        }
    }
}

/// "0:5 1:3": counts by node.
fn by_node(counts: &std::collections::BTreeMap<u32, u64>) -> String {
    if counts.is_empty() {
        return "-".into();
    }
    counts
        .iter()
        .map(|(n, k)| format!("{n}:{k}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--granularity`: each selected region's hottest units, with what is
/// exact and what is sampled said first.
fn units(s: &mut String, p: &Profile) {
    let Some(g) = &p.granularity else {
        return;
    };
    let page = format_bytes(p.page_size);
    let _ = writeln!(
        s,
        "\nunits (--granularity {}):\n  exact: samples per unit (counts of the sampled accesses), and watchpoint hits (counts in the watched windows)\n  sampled: shares, remote shares (95% CI clustered by thread, not bounded) and accesses~ (the region's word-count estimate times the unit's share of its samples)\n  below a page ({page}) a unit is sampled only by the first access to its page after arming: a page's samples are split by which unit that access hit, not by how often each is used",
        g.rules.join(" ")
    );
    let names = shown_sites(&p.regions);
    let sampled = p.regions.iter().zip(&names).filter(|(r, _)| r.sampled);
    for (i, (r, name)) in sampled.enumerate() {
        let Some(t) = &r.units else {
            continue;
        };
        let _ = writeln!(
            s,
            "{:>3}. {} {} at {name}: units of {} ({}): {} unit{}, {} sampled, {} samples; hot (*): {} samples or more and the share's 95% CI above {:.3}% ({}): {}",
            i + 1,
            r.kind,
            format_bytes(r.bytes),
            format_bytes(t.unit_bytes),
            t.rule,
            t.units,
            if t.units == 1 { "" } else { "s" },
            t.sampled_units,
            t.samples,
            numalab::profile::granularity::MIN_HOT_SAMPLES,
            t.hot_threshold * 100.0,
            if g.hot_share.is_some() {
                "--hot-share"
            } else {
                "twice an even spread, at most half"
            },
            t.hot_units
        );
        if t.shown.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "       {:<14} {:>9} {:>7} {:>6}  {:<14} {:<10} {:<18} {:>10}  watched hits",
            "offset",
            "bytes",
            "samples",
            "share",
            "from nodes",
            "home",
            "remote (95% CI)",
            "accesses~"
        );
        for u in &t.shown {
            let remote = u.remote.as_ref().map_or("-".into(), |r| {
                format!(
                    "{:.0}% ({:.0}–{:.0}%)",
                    r.share * 100.0,
                    r.low * 100.0,
                    r.high * 100.0
                )
            });
            let watched = u.watched.as_ref().map_or("-".into(), |w| {
                format!("{} words: {} writes, {} reads", w.words, w.writes, w.reads)
            });
            let _ = writeln!(
                s,
                "     {} {:<14} {:>9} {:>7} {:>5.1}%  {:<14} {:<10} {:<18} {:>10}  {watched}",
                if u.hot { '*' } else { ' ' },
                format!("+{:#x}", u.offset),
                format_bytes(u.bytes),
                u.samples,
                u.share * 100.0,
                by_node(&u.from_nodes),
                by_node(&u.home_nodes),
                remote,
                u.estimated_accesses.map_or("-".into(), |a| if a < 1e6 {
                    format!("{a:.0}")
                } else {
                    format!("{a:.3e}")
                }),
            );
        }
        if t.rest_units > 0 {
            let _ = writeln!(
                s,
                "       and {} more sampled unit{} with {} samples",
                t.rest_units,
                if t.rest_units == 1 { "" } else { "s" },
                t.rest_samples
            );
        }
    }
}

/// Small allocations by site, most bytes first (estimated from draws).
fn small_sites(s: &mut String, p: &Profile) {
    let mut small: Vec<_> = p.regions.iter().filter(|r| r.kind == "small").collect();
    if !small.is_empty() {
        small.sort_by_key(|r| std::cmp::Reverse(r.bytes));
        let drawn: u64 = small.iter().map(|r| r.sampled_allocations).sum();
        let _ = writeln!(
            s,
            "\nsmall allocations (below {}, not armed; {drawn} drawn by bytes allocated, totals estimated; most bytes first):",
            format_bytes(p.min_bytes)
        );
        for r in small.iter().take(SMALL_SITES_SHOWN) {
            let _ = writeln!(
                s,
                "  ~{} in ~{} allocation{} at {}: {} drawn, their pages by node {}",
                format_bytes(r.bytes),
                r.allocations,
                if r.allocations == 1 { "" } else { "s" },
                r.site,
                r.sampled_allocations,
                pages(r)
            );
        }
        if small.len() > SMALL_SITES_SHOWN {
            let _ = writeln!(
                s,
                "  and {} more sites (profile.json lists them)",
                small.len() - SMALL_SITES_SHOWN
            );
        }
    }
}

/// Static data and stacks: located, not sampled.
fn located_regions(s: &mut String, p: &Profile) {
    let located: Vec<_> = p
        .regions
        .iter()
        .filter(|r| !r.sampled && r.kind != "small")
        .collect();
    if !located.is_empty() {
        let _ = writeln!(
            s,
            "\nstatic data and stacks (located, not sampled; most pages first):"
        );
        for r in located {
            let what = match (&r.object, r.thread) {
                (Some(o), _) => format!("{} in {o}", r.site),
                (None, _) => r.site.clone(),
            };
            let _ = writeln!(
                s,
                "  {} {} {what}: pages by node {}",
                r.kind,
                format_bytes(r.bytes),
                pages(r)
            );
        }
    }
}

/// The threads, in creation order, with their accesses and CPUs.
fn threads(s: &mut String, p: &Profile) {
    let _ = writeln!(s, "\nthreads (#: in creation order, #0 the main thread):");
    for t in &p.threads {
        let pinned = match t.allowed_cpus {
            Some(1) => "pinned".to_string(),
            Some(n) => format!("may run on {n} CPUs"),
            None => "affinity not recorded".to_string(),
        };
        let moved = match t.migrations {
            Some(1) => "moved once".to_string(),
            Some(n) => format!("moved {n} times"),
            None => format!("CPU changed {} times between samples", t.cpu_changes_seen),
        };
        let _ = writeln!(
            s,
            "  {:>8} {:<4} {:<15}  accesses {:>4}  fault samples {:>6}  first touches {:>5}  CPUs {:?}  nodes {:?}  remote {}  {pinned}, {moved}",
            t.tid,
            t.ordinal.map_or("-".into(), |o| format!("#{o}")),
            t.name.as_deref().unwrap_or("-"),
            t.estimated_share.map_or("-".into(), |s| format!("{:.0}%", s * 100.0)),
            t.samples,
            t.first_touches,
            t.cpus,
            t.nodes,
            percent(t.remote_share)
        );
        if t.timeline.len() > 1 {
            let _ = writeln!(s, "            over time: {}", timeline(&t.timeline));
        }
    }
}

#[cfg(test)]
mod tests {
    /// The cost is sampling's CPU time beside the program's own: a share
    /// of it up to 100%, a multiple beyond (an idle program's 1338% once
    /// read as a share of a whole).
    #[test]
    fn the_cost_is_a_share_of_the_programs_own_time_or_a_multiple() {
        let c = |spent_ms: f64, program_cpu_ms: f64| numalab::profile::SamplingCost {
            target_percent: Some(1.0),
            spent_ms,
            program_cpu_ms,
            estimated_percent: Some(100.0 * spent_ms / program_cpu_ms),
            kernel_us_per_fault: 1.0,
            us_per_sample: None,
            final_rate: 1,
            min_rate: 1,
            max_rate: 1,
            armed_per_s: None,
            in_step: None,
        };
        assert_eq!(
            cost_words(&c(15.0, 1000.0)).unwrap(),
            "sampling used 15.0 ms of CPU, 1.5% on top of the program's own 1000.0 ms"
        );
        assert_eq!(
            cost_words(&c(133.8, 10.0)).unwrap(),
            "sampling used 133.8 ms of CPU, 13.4 times the program's own 10.0 ms"
        );
        let none = numalab::profile::SamplingCost {
            estimated_percent: None,
            ..c(1.0, 0.0)
        };
        assert_eq!(cost_words(&none), None);
    }

    /// The pages armed a second beside the rate: a fixed rate the run got
    /// under 80% of is said to be short, and why.
    #[test]
    fn the_armed_rate_is_said_and_a_short_fixed_rate_explained() {
        let c = |target_percent: Option<f64>, armed: Option<f64>| numalab::profile::SamplingCost {
            target_percent,
            spent_ms: 1.0,
            program_cpu_ms: 100.0,
            estimated_percent: Some(1.0),
            kernel_us_per_fault: 1.0,
            us_per_sample: None,
            final_rate: 20000,
            min_rate: 20000,
            max_rate: 20000,
            armed_per_s: armed,
            in_step: None,
        };
        assert_eq!(
            armed_words(&c(None, Some(9712.4))).unwrap(),
            "9712 pages armed a second, 49% of the rate asked (a page is armed again only once \
             its last arming was touched: a program that touches few pages, or a busy machine \
             that delays the sampler's ticks, gets fewer)"
        );
        assert_eq!(
            armed_words(&c(None, Some(16000.0))).unwrap(),
            "16000 pages armed a second"
        );
        // Adaptive: the rate moved, so no one rate to fall short of.
        assert_eq!(
            armed_words(&c(Some(0.5), Some(300.0))).unwrap(),
            "300 pages armed a second"
        );
        assert_eq!(armed_words(&c(None, None)), None);
        assert_eq!(armed_words(&c(None, Some(0.0))), None);
    }

    /// Threads in step are said beside the target from 1.05 up.
    #[test]
    fn the_target_is_said_over_the_threads_in_step() {
        let c = |in_step: Option<f64>| numalab::profile::SamplingCost {
            target_percent: Some(0.5),
            spent_ms: 1.0,
            program_cpu_ms: 100.0,
            estimated_percent: Some(1.0),
            kernel_us_per_fault: 1.0,
            us_per_sample: None,
            final_rate: 49,
            min_rate: 49,
            max_rate: 500,
            armed_per_s: None,
            in_step,
        };
        assert_eq!(
            in_step_words(&c(Some(1.94))),
            " over its 1.9 threads in step (busy, and waiting for each other often: a delay of \
             one holds up the others)"
        );
        assert_eq!(in_step_words(&c(Some(1.04))), "");
        assert_eq!(in_step_words(&c(None)), "");
    }

    use super::{armed_words, cost_words, head_and_tail, in_step_words, shown_sites};
    use numalab::profile::record::{name_words, Kind, Record};
    use numalab::profile::{build, StaticObject, Symbolizer};

    /// No names: the records alone.
    struct Unnamed;

    impl Symbolizer for Unnamed {
        fn frame(&self, _pc: u64) -> Option<String> {
            None
        }
        fn static_object(&self, _segment: u64, _bias: u64) -> Option<StaticObject> {
            None
        }
    }

    fn rec(kind: Kind, tid: u32, cpu: u32, node: i32, addr: u64, size: u64, t: u64) -> Record {
        Record {
            kind,
            tid,
            cpu,
            node,
            flags: 0,
            aux: 0,
            addr,
            size,
            time_ns: t,
        }
    }

    /// A thread's row carries the name it had last (a program names its
    /// threads after they start).
    /// `--granularity`: what is exact and what is sampled said first, a
    /// row per unit with its samples and nodes, hot units starred, the
    /// rest counted.
    #[test]
    fn units_are_listed_hottest_first_with_what_is_exact_said() {
        use numalab::profile::granularity::{apply, UnitRequest, UnitRule};
        let m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let heap = 0x7000_0000u64;
        let mut records = vec![
            rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1),
            rec(Kind::Alloc, 100, u32::MAX, -1, heap, 1 << 20, 2),
        ];
        // Six reads of page 0 from CPU 2 (node 1), its page on node 0;
        // one of page 3 and one of page 5 from CPU 0.
        for t in 3..9 {
            records.push(rec(Kind::Sample, 101, 2, 0, heap + 8, 0, t));
        }
        records.push(rec(Kind::Sample, 102, 0, 0, heap + 3 * 4096, 0, 9));
        records.push(rec(Kind::Sample, 102, 0, 0, heap + 5 * 4096, 0, 10));
        let mut p =
            numalab::profile::build_with_units(&m, vec!["prog".into()], &records, &Unnamed, true);
        let req = UnitRequest {
            rules: vec![UnitRule::parse("heap=4K").unwrap()],
            shown: 2,
            hot_share: None,
            line_bytes: 64,
        };
        apply(&mut p, &req);
        let text = super::render(&p);
        assert!(
            text.contains("\nunits (--granularity heap=4 KiB):\n  exact: samples per unit"),
            "{text}"
        );
        assert!(
            text.contains(": units of 4 KiB (heap=4 KiB): 256 units, 3 sampled, 8 samples; hot (*): 5 samples or more and the share's 95% CI above 0.781% (twice an even spread, at most half): 1\n"),
            "{text}"
        );
        assert!(
            text.contains("     * +0x0               4 KiB       6  75.0%  1:6            0:6        100% (61–100%)"),
            "{text}"
        );
        assert!(
            text.contains("\n       +0x3000            4 KiB       1  12.5%  0:1  "),
            "{text}"
        );
        assert!(
            text.contains("       and 1 more sampled unit with 1 samples\n"),
            "{text}"
        );
    }

    #[test]
    fn a_threads_row_shows_its_last_name() {
        let m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let heap = 0x7000_0000u64;
        let mut records = vec![
            rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1),
            rec(Kind::Alloc, 100, u32::MAX, -1, heap, 1 << 20, 2),
        ];
        // Three reads from CPU 0 (node 0) of a page on node 1.
        for t in 3..6 {
            records.push(rec(Kind::Sample, 101, 0, 1, heap + 8, 0, t));
        }
        for (name, t) in [("prog", 10), ("reader-1", 11)] {
            let (addr, size) = name_words(name.as_bytes());
            records.push(rec(Kind::ThreadName, 101, u32::MAX, 0, addr, size, t));
        }
        let text = super::render(&build(&m, vec!["prog".into()], &records, &Unnamed));
        assert!(text.contains("      101 -    reader-1 "), "{text}");
    }

    /// A Go program (its Start says no page was armed) that exited without
    /// libc's exit: both warnings open the text, before anything else.
    #[test]
    fn a_go_programs_warnings_come_first() {
        let m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let mut start = rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1);
        start.flags = 4;
        let text = super::render(&build(&m, vec!["prog".into()], &[start], &Unnamed));
        let lines: Vec<&str> = text.lines().take(3).collect();
        assert!(lines[1].starts_with("warning: a Go program"), "{text}");
        assert!(
            lines[2].starts_with("warning: the program exited"),
            "{text}"
        );
    }

    /// Regions of one site are told apart by the caller where their stacks
    /// part, else by order and address; others keep their site.
    #[test]
    fn regions_that_share_a_site_are_told_apart() {
        let region = |site: &str, stack: &[&str], at: u64| {
            let mut r = numalab::profile::located_region("heap", site.into(), 1 << 20, at);
            r.sampled = true;
            r.stack = stack.iter().map(|s| s.to_string()).collect();
            r
        };
        let x = "xmalloc util.c:10";
        let regions = [
            region(x, &[x, "parse main.c:80", "main main.c:5"], 0x1000),
            region(x, &[x, "load main.c:90", "main main.c:6"], 0x2000),
            region("main t.c:42", &["main t.c:42"], 0x3000),
            region("main t.c:42", &["main t.c:42"], 0x4000),
            region("once a.c:1", &["once a.c:1"], 0x5000),
        ];
        assert_eq!(
            shown_sites(&regions),
            [
                "xmalloc util.c:10 via parse main.c:80",
                "xmalloc util.c:10 via load main.c:90",
                "main t.c:42 #1 of 2 at 0x3000",
                "main t.c:42 #2 of 2 at 0x4000",
                "once a.c:1"
            ]
        );
    }

    /// All items up to the limit; past it the ends around the count left out.
    #[test]
    fn long_lists_keep_their_ends() {
        let one = |x: &u32| x.to_string();
        let v: Vec<u32> = (1..=9).collect();
        assert_eq!(
            head_and_tail(&v[..8], 8, (4, 3), ", ", one),
            "1, 2, 3, 4, 5, 6, 7, 8"
        );
        assert_eq!(
            head_and_tail(&v, 8, (4, 3), ", ", one),
            "1, 2, 3, 4, … 2 more …, 7, 8, 9"
        );
        assert_eq!(
            head_and_tail(&v, 6, (3, 3), "; ", one),
            "1; 2; 3; … 3 more …; 7; 8; 9"
        );
    }
}
