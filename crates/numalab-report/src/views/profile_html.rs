//! `numalab profile`: profile.html, one self-contained page in the report's
//! style (its page frame, styles and charts): the run and its diagnoses, a
//! heatmap of regions by (CPU node → memory node), a page map per hot
//! region, the threads over time, and the refinement's lines and words.

use super::profile::{node_counts, percent, refinement_summary, sampling_line, shown_sites};
use crate::html::{close_page, node_label, open_page, Section};
use crate::svg::{heatmap, lane_chart, Axis, Heatmap, Lane, LaneKey, Scale, Segment, TickFormat};
use numalab::machine::Machine;
use numalab::measure::counters::{CounterReport, Kind};
use numalab::profile::page_map::PageMap;
use numalab::profile::refine::Refinement;
use numalab::profile::{Profile, RegionProfile, ThreadProfile, ThreadSpan, MAPPED_REGIONS};
use numalab::text::escape::xml as esc;
use numalab::text::format::{bytes as format_bytes, plural};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// Regions the heatmap has rows for at most (the most sampled).
pub const HEATMAP_REGIONS: usize = 40;
/// Threads the timeline has rows for at most (the most sampled).
pub const TIMELINE_THREADS: usize = 64;
/// Spans drawn per thread at most: more are merged, neighbours together.
pub const SPANS_DRAWN: usize = 200;
/// Refined lines shown at most (the most contended).
pub const REFINED_LINES: usize = 64;

/// The title of the page.
pub fn page_title(p: &Profile) -> String {
    let program = p.program.first().map_or("(no command)", String::as_str);
    format!("numalab profile: {program}")
}

/// The page, for a profile taken on `m`.
pub fn render_html(p: &Profile, m: &Machine) -> String {
    let mut h = String::with_capacity(1 << 18);
    open_page(&mut h, &page_title(p), env!("CARGO_PKG_VERSION"));
    header(&mut h, p);
    let ranks = ranks(p);
    regions(&mut h, p, m, &ranks);
    page_maps(&mut h, p, m, &ranks);
    threads(&mut h, p, m);
    if let Some(r) = &p.refinement {
        refinement(&mut h, r);
    }
    if let Some(c) = &p.counters {
        counters(&mut h, c);
    }
    let _ = writeln!(
        h,
        "<p class=\"note\">Made by numalab {} (profile schema {}). Every number is in <a href=\"profile.json\">profile.json</a> beside this page.</p>",
        esc(env!("CARGO_PKG_VERSION")),
        esc(&p.schema_version)
    );
    close_page(&mut h);
    h
}

/// The number of each sampled region as the text view numbers them (1 the
/// most sampled), by index in `p.regions`.
fn ranks(p: &Profile) -> BTreeMap<usize, usize> {
    p.regions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.sampled)
        .enumerate()
        .map(|(rank, (i, _))| (i, rank + 1))
        .collect()
}

/// The command, the run's figures, warnings and diagnoses.
fn header(h: &mut String, p: &Profile) {
    let last_sample = p
        .threads
        .iter()
        .flat_map(|t| t.timeline.last())
        .map(|s| s.to_s)
        .fold(0.0, f64::max);
    let window = match p.sampled_for_s {
        Some(d) => format!("the first {d} s"),
        None => "the whole run".into(),
    };
    let cost = p
        .cost
        .as_ref()
        .and_then(super::profile::cost_words)
        .map(|w| w.trim_start_matches("sampling used ").to_string())
        .unwrap_or_else(|| "not measured".into());
    let _ = write!(
        h,
        "<h1>{}</h1>\n<p class=\"meta\" id=\"profile-command\"><code>{}</code> · pid {}</p>\n",
        esc(&page_title(p)),
        esc(&p.program.join(" ")),
        p.pid
    );
    let _ = writeln!(
        h,
        "<section id=\"summary\" class=\"panel\">\n<p class=\"headline\" id=\"summary-headline\">{} samples, {} remote</p>\n<ul id=\"profile-figures\">\n<li>sampled: {} (the last sampled fault {:.2} s after the start)</li>\n<li>sampling cost: {}</li>\n<li>{}</li>",
        p.samples,
        esc(&percent(p.remote_share)),
        esc(&window),
        last_sample,
        esc(&cost),
        esc(&sampling_line(p))
    );
    if p.unattributed > 0 {
        let _ = writeln!(
            h,
            "<li>{} samples outside the tracked allocations</li>",
            p.unattributed
        );
    }
    if let Some(f) = &p.latency_source {
        let _ = writeln!(
            h,
            "<li>latencies measured: the latency matrix of {}</li>",
            esc(f)
        );
    }
    h.push_str("</ul>\n");
    if !p.warnings.is_empty() {
        h.push_str("<div class=\"warn\" id=\"profile-warnings\"><strong>Warnings</strong><ul>\n");
        for w in &p.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></div>\n");
    }
    if !p.diagnoses.is_empty() {
        h.push_str("<h3>Diagnoses</h3>\n<ul id=\"profile-diagnoses\">\n");
        for d in &p.diagnoses {
            let numbers = diagnosis_numbers(d);
            let _ = writeln!(
                h,
                "<li data-kind=\"{}\"><strong>[{}]</strong> {}<br><span class=\"note\">{}</span><br>fix: <code>{}</code></li>",
                esc(&d.kind),
                esc(&d.kind),
                esc(&d.text),
                esc(&numbers),
                esc(&d.fix)
            );
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</section>\n");
}

/// A diagnosis's numbers, as its kind has them.
fn diagnosis_numbers(d: &numalab::profile::diagnose::Diagnosis) -> String {
    let remote = format!(
        "remote {} (95% CI {}–{})",
        percent(Some(d.remote_share)),
        percent(Some(d.remote_ci[0])),
        percent(Some(d.remote_ci[1]))
    );
    match d.kind.as_str() {
        // Watchpoint hits, not page samples.
        "false-sharing" | "shared-write" => {
            format!("{} hits whose CPU is known, {remote}", d.samples)
        }
        _ if d.thread.is_some() => format!(
            "{} samples, {remote}; {} of them of pages on node {}",
            d.samples,
            percent(Some(d.pages_share)),
            d.pages_node
        ),
        _ => format!(
            "{} samples, {remote}; {} of the pages on node {}; accessed from nodes {}",
            d.samples,
            percent(Some(d.pages_share)),
            d.pages_node,
            join(&d.accessing_nodes)
        ),
    }
}

fn join(v: &[u32]) -> String {
    v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// `1. site (heap, 40% remote)`: a region as rows and headings name it.
fn region_name(rank: usize, r: &RegionProfile, site: &str) -> String {
    format!(
        "{rank}. {} ({}, {} remote)",
        site,
        r.kind,
        percent(r.remote_share)
    )
}

/// The heatmap of the most sampled regions' accesses by (CPU node →
/// memory node), each row its region's shares, then every region in a
/// table.
fn regions(h: &mut String, p: &Profile, m: &Machine, ranks: &BTreeMap<usize, usize>) {
    let names = shown_sites(&p.regions);
    h.push_str("<section id=\"sec-regions\">\n<h2>Regions: where their accesses went</h2>\n");
    let sampled: Vec<(usize, &RegionProfile)> = p
        .regions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.sampled && r.samples > 0)
        .collect();
    let shown = &sampled[..sampled.len().min(HEATMAP_REGIONS)];
    let pairs: BTreeSet<(u32, u32)> = shown
        .iter()
        .flat_map(|(_, r)| {
            r.accesses
                .iter()
                .flat_map(|(c, row)| row.keys().map(move |mem| (*c, *mem)))
        })
        .collect();
    let pairs: Vec<(u32, u32)> = pairs.into_iter().collect();
    let values = shown
        .iter()
        .map(|(_, r)| {
            let located: u64 = r.accesses.values().flat_map(|v| v.values()).sum();
            pairs
                .iter()
                .map(|(c, mem)| {
                    let n = r.accesses.get(c).and_then(|row| row.get(mem)).copied();
                    (located > 0).then(|| 100.0 * n.unwrap_or(0) as f64 / located as f64)
                })
                .collect()
        })
        .collect();
    let map = Heatmap {
        rows: shown
            .iter()
            .map(|(i, r)| region_name(ranks[i], r, &names[*i]))
            .collect(),
        cols: pairs.iter().map(|(c, mem)| format!("{c}→{mem}")).collect(),
        values,
        row_title: "region".into(),
        col_title: "CPU node → memory node".into(),
        unit: "%".into(),
        decimals: 0,
        higher_is_better: true,
        scale_note: Some("share of the region's samples".into()),
        row_groups: Vec::new(),
        // A gap where the CPU node changes.
        col_groups: pairs
            .windows(2)
            .enumerate()
            .filter(|(_, w)| w[0].0 != w[1].0)
            .map(|(i, _)| i + 1)
            .collect(),
    };
    let mut s = Section::standalone(h, m);
    s.figure(
        heatmap("fig-profile-heatmap", "Sampled accesses by CPU node → memory node", &map),
        "Each row: a region's samples whose page node was known, by the node of the CPU that accessed and the node of the page (% of the row). Local accesses are the columns n→n.",
    );
    if sampled.len() > shown.len() {
        s.note(&format!(
            "{} more sampled regions, with {} samples in all, are in the table below and in profile.json.",
            sampled.len() - shown.len(),
            sampled[shown.len()..]
                .iter()
                .map(|(_, r)| r.samples)
                .sum::<u64>()
        ));
    }
    if p.regions.is_empty() {
        s.note("No region was tracked.");
    }
    region_table(h, p, ranks);
    h.push_str("</section>\n");
}

/// Every region: sampled ones by their number, then the located ones.
fn region_table(h: &mut String, p: &Profile, ranks: &BTreeMap<usize, usize>) {
    if p.regions.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<details><summary>Every region ({})</summary>\n<div class=\"scroll\"><table id=\"tab-profile-regions\">\n<tr><th>#</th><th class=\"l\">kind</th><th class=\"l\">site</th><th>bytes</th><th>allocations</th><th>samples</th><th>reads</th><th>writes</th><th>remote</th><th>distance ratio</th><th class=\"l\">pages by node</th></tr>\n",
        p.regions.len()
    );
    let names = shown_sites(&p.regions);
    for (i, r) in p.regions.iter().enumerate() {
        let site = match &r.object {
            Some(o) => format!("{} in {o}", names[i]),
            None => names[i].clone(),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            ranks.get(&i).map_or(String::new(), usize::to_string),
            esc(&r.kind),
            esc(&site),
            esc(&format_bytes(r.bytes)),
            r.allocations,
            if r.sampled { r.samples.to_string() } else { "located".into() },
            r.reads,
            r.writes,
            esc(&percent(r.remote_share)),
            r.distance_ratio.map_or("-".into(), |d| format!("{d:.2}")),
            esc(&node_counts(&r.pages_by_node))
        );
    }
    h.push_str("</table></div>\n</details>\n");
}

/// The page map of each of the most sampled regions that has one.
fn page_maps(h: &mut String, p: &Profile, m: &Machine, ranks: &BTreeMap<usize, usize>) {
    let names = shown_sites(&p.regions);
    let mapped: Vec<(usize, &RegionProfile, &PageMap)> = p
        .regions
        .iter()
        .enumerate()
        .filter(|(_, r)| r.sampled && r.samples > 0)
        .filter_map(|(i, r)| r.page_map.as_ref().map(|pm| (i, r, pm)))
        .take(MAPPED_REGIONS)
        .collect();
    h.push_str("<section id=\"sec-page-maps\">\n<h2>Page maps of the hottest regions</h2>\n");
    if mapped.is_empty() {
        h.push_str(
            "<p class=\"missing\" id=\"missing-page-maps\">No sampled region has a page map.</p>\n",
        );
    }
    for (i, r, pm) in mapped {
        let rank = ranks[&i];
        let _ = writeln!(
            h,
            "<div id=\"page-map-{rank}\" class=\"page-map\">\n<h3>{}</h3>",
            esc(&region_name(rank, r, &names[i]))
        );
        let (lanes, keys) = page_lanes(pm, m);
        let x = Axis {
            label: "page (from the allocation's first)".into(),
            scale: Scale::Linear,
            min: Some(0.0),
            max: Some(pm.pages as f64),
            format: TickFormat::Integer,
        };
        let cells = if pm.pages_per_cell == 1 {
            "one cell a page".to_string()
        } else {
            format!("one cell per {} pages", pm.pages_per_cell)
        };
        let which = if r.allocations > 1 {
            format!("its most sampled allocation of {}", r.allocations)
        } else {
            "its allocation".into()
        };
        let mut s = Section::standalone(h, m);
        s.figure(
            lane_chart(
                &format!("fig-page-map-{rank}"),
                &format!("Pages of region {rank}"),
                &x,
                &lanes,
                &keys,
            ),
            &format!(
                "{which} at {:#x}: {} pages of {}, {}, {} samples. Top: the node of the page (of most pages of a cell), as the latest record that placed it says; a gap is a page not present, grey a page no record placed (a partial page at either end, or a region still live when a program that did not exit normally stopped). Bottom: the CPU node whose threads' samples of it were most; empty where none was sampled.",
                pm.address,
                pm.pages,
                format_bytes(p.page_size),
                cells,
                pm.samples
            ),
        );
        h.push_str("</div>\n");
    }
    h.push_str("</section>\n");
}

/// A page map's two lanes (page nodes, accessing nodes) and their legend.
fn page_lanes(pm: &PageMap, m: &Machine) -> (Vec<Lane>, Vec<LaneKey>) {
    let mut nodes = Lane {
        label: "memory node".into(),
        segments: Vec::new(),
    };
    let mut from = Lane {
        label: "accessed most from".into(),
        segments: Vec::new(),
    };
    let mut seen: BTreeSet<u32> = BTreeSet::new();
    let mut unknown = false;
    let mut cell = 0u64;
    // (first page, end, node, samples) of the node lane.
    let mut spans: Vec<(u64, u64, Option<i32>, u64)> = Vec::new();
    for run in &pm.runs {
        let a = (cell * pm.pages_per_cell).min(pm.pages);
        cell += run.cells;
        let b = (cell * pm.pages_per_cell).min(pm.pages);
        let pages = page_range(a, b);
        let samples = samples_suffix(run.samples);
        match run.node {
            Some(n) if n >= 0 => {
                seen.insert(n as u32);
            }
            Some(_) => {}
            None => unknown = true,
        }
        // Runs differ by their accessing node too: side by side on one
        // node they would draw seams, so the node lane joins them.
        match spans.last_mut() {
            Some(s) if s.2 == run.node && s.1 == a => {
                s.1 = b;
                s.3 += run.samples;
            }
            _ if run.node == Some(-1) => {}
            _ => spans.push((a, b, run.node, run.samples)),
        }
        if let Some(c) = run.from {
            seen.insert(c);
            from.segments.push(Segment {
                from: a as f64,
                to: b as f64,
                series: Some(c as usize),
                tooltip: format!("{pages}: accessed most from {}{samples}", node_label(m, c)),
            });
        }
    }
    nodes.segments = spans
        .into_iter()
        .map(|(a, b, node, samples)| Segment {
            from: a as f64,
            to: b as f64,
            series: node.map(|n| n as usize),
            tooltip: format!(
                "{}: {}{}",
                page_range(a, b),
                node.map_or("node unknown".into(), |n| format!(
                    "on {}",
                    node_label(m, n as u32)
                )),
                samples_suffix(samples)
            ),
        })
        .collect();
    let keys = node_keys(m, seen, unknown.then_some("unknown"));
    (vec![nodes, from], keys)
}

/// The legend of node-coloured lanes: one key per node, and a grey one
/// named `unknown` where some stretch has no node.
fn node_keys(
    m: &Machine,
    nodes: impl IntoIterator<Item = u32>,
    unknown: Option<&str>,
) -> Vec<LaneKey> {
    let mut keys: Vec<LaneKey> = nodes
        .into_iter()
        .map(|n| LaneKey {
            label: node_label(m, n),
            series: Some(n as usize),
        })
        .collect();
    if let Some(label) = unknown {
        keys.push(LaneKey {
            label: label.into(),
            series: None,
        });
    }
    keys
}

/// `pages 4–7 (4 pages)`, or `page 4`.
fn page_range(a: u64, b: u64) -> String {
    if b > a + 1 {
        format!("pages {a}–{} ({} pages)", b - 1, b - a)
    } else {
        format!("page {a}")
    }
}

fn samples_suffix(n: u64) -> String {
    if n > 0 {
        format!(", {n} samples")
    } else {
        String::new()
    }
}

/// Every thread's spans on nodes over time (the most sampled threads when
/// there are many).
fn threads(h: &mut String, p: &Profile, m: &Machine) {
    h.push_str("<section id=\"sec-threads\">\n<h2>Threads over time</h2>\n");
    let mut shown: Vec<&ThreadProfile> = p
        .threads
        .iter()
        .filter(|t| !t.timeline.is_empty())
        .collect();
    let all = shown.len();
    if all > TIMELINE_THREADS {
        shown.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.tid.cmp(&b.tid)));
        shown.truncate(TIMELINE_THREADS);
        shown.sort_by_key(|t| t.tid);
    }
    let mut nodes: BTreeSet<u32> = BTreeSet::new();
    let mut unknown = false;
    let lanes: Vec<Lane> = shown
        .iter()
        .map(|t| {
            let label = if t.tid == p.pid {
                format!("thread {} (main)", t.tid)
            } else {
                format!("thread {}", t.tid)
            };
            let segments = merged_spans(&t.timeline)
                .into_iter()
                .map(|(from, to, node, tooltip)| {
                    match node {
                        Some(n) => {
                            nodes.insert(n);
                        }
                        None => unknown = true,
                    }
                    Segment {
                        from,
                        to,
                        series: node.map(|n| n as usize),
                        tooltip: format!("{label}, {tooltip}"),
                    }
                })
                .collect();
            Lane { label, segments }
        })
        .collect();
    let keys = node_keys(m, nodes, unknown.then_some("node unknown"));
    let x = Axis::new("seconds from the start", Scale::Linear, TickFormat::Number);
    let mut s = Section::standalone(h, m);
    s.figure(
        lane_chart("fig-profile-threads", "Where each thread ran", &x, &lanes, &keys),
        "Each row a thread; each bar a stretch of its consecutive sampled faults (accesses and first touches) on CPUs of one node, coloured by that node; its tooltip gives its CPUs, samples and remote samples.",
    );
    if all > shown.len() {
        s.note(&format!(
            "{} threads with fewer samples are left out here (profile.json has them all).",
            all - shown.len()
        ));
    }
    // A thread no sampled fault fell in (one that ran before the first
    // pages were armed, or touched none of them) has no row to draw: say
    // so, so that a missing row is not read as a missing thread.
    let unsampled = p.threads.len() - all;
    if unsampled > 0 {
        s.note(&format!(
            "{} without a sampled fault ha{} no row.",
            plural(unsampled, "thread", "threads"),
            if unsampled == 1 { "s" } else { "ve" }
        ));
    }
    h.push_str("</section>\n");
}

/// A thread's spans as (from, to, node, tooltip), at most [`SPANS_DRAWN`]:
/// neighbours merged when there are more, the node of a merged one the
/// one with the most samples (ties: the first).
fn merged_spans(spans: &[ThreadSpan]) -> Vec<(f64, f64, Option<u32>, String)> {
    let per = spans.len().div_ceil(SPANS_DRAWN).max(1);
    spans
        .chunks(per)
        .map(|group| {
            let first = &group[0];
            let last = &group[group.len() - 1];
            let (samples, remote) = group
                .iter()
                .fold((0, 0), |(s, r), x| (s + x.samples, r + x.remote));
            let mut by_node: BTreeMap<Option<u32>, u64> = BTreeMap::new();
            for x in group {
                *by_node.entry(x.node).or_default() += x.samples;
            }
            // Reversed: of equals, max_by_key keeps the last.
            let node = group
                .iter()
                .rev()
                .map(|x| x.node)
                .max_by_key(|n| by_node[n])
                .unwrap_or(first.node);
            let node_name =
                |n: Option<u32>| n.map_or("node unknown".into(), |n| format!("node {n}"));
            let place = if group.len() == 1 {
                let cpus = first
                    .cpus
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("{} (CPUs {cpus})", node_name(first.node))
            } else {
                format!(
                    "{} spans merged, most samples on {}",
                    group.len(),
                    node_name(node)
                )
            };
            (
                first.from_s,
                last.to_s,
                node,
                format!(
                    "{:.3}–{:.3} s: {place}; {samples} samples, {remote} remote",
                    first.from_s, last.to_s
                ),
            )
        })
        .collect()
}

/// The command's counters (docs/counters.md): each event's total or why
/// it has none, the derived metrics, and the tasks when counted per thread.
fn counters(h: &mut String, c: &CounterReport) {
    h.push_str("<section id=\"sec-counters\">\n<h2>Counters</h2>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">{}</p>",
        esc(super::counters::heading(c).trim_end_matches(':'))
    );
    if let Some(u) = &c.usage {
        let _ = writeln!(h, "<p>{}</p>", esc(&super::counters::usage_split(u)));
    }
    h.push_str("<div class=\"scroll\"><table id=\"tab-profile-counters\">\n<tr><th class=\"l\">event</th><th class=\"l\">kind</th><th>total</th><th class=\"l\">note</th></tr>\n");
    for e in &c.events {
        let kind = match e.kind {
            Kind::Software => "software",
            Kind::Hardware => "hardware",
        };
        let (value, note) = match (e.value, &e.unavailable) {
            (Some(v), _) => {
                let mut notes = Vec::new();
                if let Some(f) = e.scale_factor {
                    notes.push(format!("multiplexed, scaled ×{f:.3}"));
                }
                if e.user_only {
                    notes.push("user space only".into());
                }
                (
                    format!(
                        "{v}{}",
                        if e.unit.is_empty() {
                            String::new()
                        } else {
                            format!(" {}", e.unit)
                        }
                    ),
                    notes.join("; "),
                )
            }
            (None, why) => ("—".into(), why.clone().unwrap_or_else(|| "no value".into())),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{kind}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&e.name),
            esc(&value),
            esc(&note)
        );
    }
    h.push_str("</table></div>\n<div class=\"scroll\"><table id=\"tab-profile-derived\">\n<tr><th class=\"l\">metric</th><th>value</th><th class=\"l\">formula or why not</th></tr>\n");
    for d in &c.derived {
        let (value, note) = match (d.value, &d.unavailable) {
            (Some(v), _) => (format!("{v:.4} {}", d.unit), d.formula.clone()),
            (None, why) => ("—".into(), why.clone().unwrap_or_else(|| "no value".into())),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            esc(&d.name),
            esc(&value),
            esc(&note)
        );
    }
    h.push_str("</table></div>\n");
    if let Some(t) = &c.tasks {
        let columns: Vec<usize> = t
            .tasks
            .first()
            .map(|f| {
                (0..f.events.len())
                    .filter(|&i| t.tasks.iter().any(|k| k.events[i].value.is_some()))
                    .collect()
            })
            .unwrap_or_default();
        let _ = write!(
            h,
            "<details><summary>Per thread ({} tasks)</summary>\n<div class=\"scroll\"><table id=\"tab-profile-tasks\">\n<tr><th>pid</th><th>tid</th><th class=\"l\">name</th>",
            t.tasks.len() as u64 + t.not_listed
        );
        for &i in &columns {
            let _ = write!(h, "<th>{}</th>", esc(&t.tasks[0].events[i].name));
        }
        h.push_str("</tr>\n");
        for k in &t.tasks {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"l\">{}</td>",
                k.pid,
                k.tid,
                esc(&k.name)
            );
            for &i in &columns {
                let cell = k.events[i].value.map_or("—".to_string(), |v| v.to_string());
                let _ = write!(h, "<td>{cell}</td>");
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table></div></details>\n");
    }
    h.push_str("</section>\n");
}

/// The watched lines, each with its words' reads and writes by node.
fn refinement(h: &mut String, r: &Refinement) {
    h.push_str("<section id=\"sec-refinement\">\n<h2>Refinement: watched cache lines</h2>\n");
    if let Some(why) = &r.unavailable {
        let _ = writeln!(
            h,
            "<p class=\"missing\" id=\"missing-refinement\">Not available: {}</p>\n</section>",
            esc(why)
        );
        return;
    }
    let _ = writeln!(h, "<p>{}</p>", esc(&refinement_summary(r)));
    if r.lines.is_empty() {
        h.push_str(
            "<p class=\"note\">No watched word was accessed while watched.</p>\n</section>\n",
        );
        return;
    }
    h.push_str("<div class=\"scroll\"><table id=\"tab-profile-refinement\">\n<tr><th class=\"l\">line / word</th><th class=\"l\">where</th><th>page node</th><th class=\"l\">writes by node</th><th class=\"l\">reads by node</th><th>watched ms</th><th class=\"l\">false sharing</th></tr>\n");
    let by_node = |m: &BTreeMap<u32, u64>| {
        if m.is_empty() {
            "-".to_string()
        } else {
            m.iter()
                .map(|(n, k)| format!("{n}:{k}"))
                .collect::<Vec<_>>()
                .join(" ")
        }
    };
    for l in r.lines.iter().take(REFINED_LINES) {
        let place = match (&l.site, l.offset) {
            (Some(site), Some(o)) => format!("offset {o} of {site}"),
            _ => "-".into(),
        };
        let verdict = if l.false_sharing {
            "yes".to_string()
        } else if !l.shared_words.is_empty() {
            "no (shared writes)".to_string()
        } else {
            "no".to_string()
        };
        let class = if l.false_sharing {
            " class=\"status-bad\""
        } else {
            ""
        };
        let _ = writeln!(
            h,
            "<tr class=\"line\"><td class=\"l\"><code>{:#x}</code></td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">from nodes {}</td><td class=\"l\">accessed from nodes {}</td><td></td><td class=\"l\"><span{class}>{}</span></td></tr>",
            l.address,
            esc(&place),
            l.page_node.map_or("-".into(), |n| n.to_string()),
            join(&l.written_from),
            join(&l.accessed_from),
            verdict
        );
        for w in &l.words {
            let unplaced = if w.unplaced_reads + w.unplaced_writes > 0 {
                format!(
                    " (CPU unknown: writes {}, reads {})",
                    w.unplaced_writes, w.unplaced_reads
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                h,
                "<tr class=\"word\"><td class=\"l\">+{}</td><td></td><td></td><td class=\"l\">{}</td><td class=\"l\">{}{}</td><td>{:.0}</td><td></td></tr>",
                w.offset,
                by_node(&w.writes),
                by_node(&w.reads),
                esc(&unplaced),
                w.watched_ms
            );
        }
    }
    h.push_str("</table></div>\n");
    if r.lines.len() > REFINED_LINES {
        let _ = writeln!(
            h,
            "<p class=\"note\">{} more lines are in profile.json.</p>",
            r.lines.len() - REFINED_LINES
        );
    }
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use numalab::profile::diagnose::Diagnosis;
    use numalab::profile::record::Kind;
    use numalab::profile::refine::{LineProfile, WordProfile};
    use numalab::profile::{build, StaticObject, Symbolizer};

    /// Allocation sites named as a program's debug info would, one of them
    /// hostile.
    struct Names;

    impl Symbolizer for Names {
        fn frame(&self, pc: u64) -> Option<String> {
            match pc {
                0x401000 => Some("fill <script>x</script>.c:12".into()),
                0x402000 => Some("sum prog.c:40".into()),
                _ => None,
            }
        }
        fn static_object(&self, _: u64, _: u64) -> Option<StaticObject> {
            None
        }
    }

    use numalab::profile::test_record as rec;

    /// Two regions on the Quartet (CPUs 0-1 on node 0, 2-3 on node 1): A,
    /// 256 pages on node 1, read three times from node 0 (page 0) and once
    /// from node 1 (page 5); B, read twice locally on node 0.
    fn profile() -> (Profile, Machine) {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let (a, b) = (0x7000_0000u64, 0x7100_0000u64);
        let ms = 1_000_000;
        let mut records = vec![
            rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 0),
            rec(Kind::Alloc, 100, u32::MAX, -1, a, 1 << 20, 1),
            rec(Kind::Frame, 100, u32::MAX, -1, a, 0, 0x401000),
            rec(Kind::Alloc, 100, u32::MAX, -1, b, 64 * 4096, 2),
            rec(Kind::Frame, 100, u32::MAX, -1, b, 0, 0x402000),
        ];
        for t in 1..=3 {
            records.push(rec(Kind::Sample, 101, 0, 1, a + 8, 0, t * 100 * ms));
        }
        records.extend([
            rec(Kind::Sample, 102, 2, 1, a + 5 * 4096, 0, 350 * ms),
            rec(Kind::Sample, 101, 1, 0, b, 0, 400 * ms),
            rec(Kind::Sample, 101, 1, 0, b + 4096, 0, 500 * ms),
            rec(Kind::PageNodes, 100, u32::MAX, 1, a, 256, 600 * ms),
            rec(Kind::PageNodes, 100, u32::MAX, 0, b, 64, 600 * ms),
            // A thread no sampled fault fell in, from its start to its end.
            rec(Kind::Thread, 103, u32::MAX, -1, 0, 2, 520 * ms),
            rec(Kind::ThreadEnd, 103, u32::MAX, -1, 0, 0, 550 * ms),
        ]);
        let mut p = build(&m, vec!["./app".into(), "<b>".into()], &records, &Names);
        p.warnings.push("a <warning> & more".into());
        p.diagnoses.push(Diagnosis {
            kind: "one-node-shared".into(),
            region: Some(0),
            thread: None,
            site: p.regions[0].site.clone(),
            pages_node: 1,
            pages_share: 1.0,
            accessing_nodes: vec![0, 1],
            samples: 40,
            remote_share: 0.75,
            remote_ci: [0.6, 0.86],
            source: "page-fault samples".into(),
            text: "shared from one node".into(),
            fix: "numalab run --interleave 0-1 -- ./app".into(),
        });
        p.refinement = Some(Refinement {
            unavailable: None,
            write_probes: 4,
            word_windows: 2,
            watched_ms: 20.0,
            hits: 30,
            us_per_hit: None,
            hits_cost_ms: None,
            lines: vec![LineProfile {
                address: 0x7000_0040,
                site: Some("fill <script>x</script>.c:12".into()),
                offset: Some(64),
                page_node: Some(1),
                remote_hits: 15,
                placed_hits: 30,
                words: vec![
                    WordProfile {
                        offset: 0,
                        watched_ms: 10.0,
                        writes: BTreeMap::from([(0, 15)]),
                        reads: BTreeMap::new(),
                        unplaced_writes: 0,
                        unplaced_reads: 0,
                        threads: vec![101],
                    },
                    WordProfile {
                        offset: 8,
                        watched_ms: 10.0,
                        writes: BTreeMap::from([(1, 15)]),
                        reads: BTreeMap::new(),
                        unplaced_writes: 0,
                        unplaced_reads: 0,
                        threads: vec![102],
                    },
                ],
                written_from: vec![0, 1],
                accessed_from: vec![0, 1],
                false_sharing: true,
                shared_words: Vec::new(),
            }],
        });
        (p, m)
    }

    /// The part of `h` from the element with id `id` to the next `</section>`
    /// or `</div>`, whichever the element is.
    fn part<'a>(h: &'a str, id: &str, end: &str) -> &'a str {
        let from = h
            .find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no {id}"));
        let to = h[from..].find(end).unwrap() + from;
        &h[from..to]
    }

    #[test]
    fn the_page_shows_each_region_page_map_thread_and_line() {
        let (p, m) = profile();
        let h = render_html(&p, &m);
        assert!(h.starts_with("<!DOCTYPE html>"), "{h}");
        assert!(h.contains("<title>numalab profile: ./app</title>"));
        assert!(h.contains("<code>./app &lt;b&gt;</code> · pid 100"));
        // A: 4 samples, 3 remote; B: 2 local: half of all remote.
        assert!(h.contains(">6 samples, 50% remote</p>"), "{h}");
        assert!(h.contains("<li>a &lt;warning&gt; &amp; more</li>"));
        assert!(h.contains("<li data-kind=\"one-node-shared\"><strong>[one-node-shared]</strong> shared from one node<br><span class=\"note\">40 samples, remote 75% (95% CI 60%–86%); 100% of the pages on node 1; accessed from nodes 0, 1</span><br>fix: <code>numalab run --interleave 0-1 -- ./app</code></li>"), "{h}");
        // Nothing of the hostile site goes through unescaped.
        assert!(!h.contains("<script>") && !h.contains("<b>"));
        assert!(h.contains("fill &lt;script&gt;x&lt;/script&gt;.c:12"));

        // Heatmap: a row per region, a column per (CPU node → memory
        // node) that occurs: 0→0, 0→1, 1→1.
        let regions = part(&h, "sec-regions", "</section>");
        assert_eq!(regions.matches("class=\"hm-cell\"").count(), 6);
        let row_a = "region: 1. fill &lt;script&gt;x&lt;/script&gt;.c:12 (heap, 75% remote)";
        for (col, share) in [("0→0", "0"), ("0→1", "75"), ("1→1", "25")] {
            let tip = format!("<title>{row_a}\nCPU node → memory node: {col}\n{share} %</title>");
            assert!(regions.contains(&tip), "{tip}");
        }
        let tip = "<title>region: 2. sum prog.c:40 (heap, 0% remote)\nCPU node → memory node: 0→0\n100 %</title>";
        assert!(regions.contains(tip), "{regions}");
        assert!(regions.contains("share of the region&#39;s samples"));
        assert_eq!(
            part(&h, "tab-profile-regions", "</table>")
                .matches("<tr><td>")
                .count(),
            2
        );

        // Page maps: both sampled regions, A's 256 pages one cell each, all
        // on node 1 (the count at exit), read from node 0 at page 0 and
        // from node 1 at page 5.
        let pm = p.regions[0].page_map.as_ref().unwrap();
        assert_eq!((pm.pages, pm.pages_per_cell, pm.cells()), (256, 1, 256));
        let map_a = part(&h, "page-map-1", "</div>");
        assert!(map_a.contains(
            "its allocation at 0x70000000: 256 pages of 4 KiB, one cell a page, 4 samples"
        ));
        // The node lane is one stretch (its runs differ only by who
        // accessed them); the accessing lane has pages 0 and 5.
        assert_eq!(
            map_a.matches("class=\"bar segment s1\"").count(),
            2,
            "{map_a}"
        );
        assert_eq!(map_a.matches("class=\"bar segment s0\"").count(), 1);
        assert!(map_a.contains("<title>pages 0–255 (256 pages): on node 1, 4 samples</title>"));
        assert!(map_a.contains("<title>page 0: accessed most from node 0, 3 samples</title>"));
        assert!(map_a.contains("<title>page 5: accessed most from node 1, 1 samples</title>"));
        assert!(part(&h, "page-map-2", "</div>").contains("64 pages of 4 KiB"));
        assert!(!h.contains("page-map-3"));

        // One timeline row per thread that faulted, each on its CPU's node.
        let threads = part(&h, "sec-threads", "</section>");
        assert_eq!(threads.matches("lane-label").count(), 2);
        assert!(!threads.contains(">thread 103</text>"));
        assert!(
            threads.contains("1 thread without a sampled fault has no row."),
            "{threads}"
        );
        assert!(threads.contains(">thread 101</text>") && threads.contains(">thread 102</text>"));
        assert!(threads.contains(
            "<title>thread 102, 0.350–0.350 s: node 1 (CPUs 2); 1 samples, 0 remote</title>"
        ));
        assert!(threads.contains(
            "<title>thread 101, 0.100–0.500 s: node 0 (CPUs 0, 1); 5 samples, 3 remote</title>"
        ));

        // The refined line, flagged, and its two words by node.
        let r = part(&h, "sec-refinement", "</section>");
        assert!(r.contains(
            "<code>0x70000040</code></td><td class=\"l\">offset 64 of fill &lt;script&gt;"
        ));
        assert!(r.contains("<span class=\"status-bad\">yes</span>"));
        assert!(r.contains("<td class=\"l\">+8</td><td></td><td></td><td class=\"l\">1:15</td><td class=\"l\">-</td><td>10</td>"));
        assert!(h.ends_with("</html>\n"));
    }

    #[test]
    fn long_timelines_are_merged_to_a_bounded_number_of_bars() {
        let spans: Vec<ThreadSpan> = (0..450)
            .map(|i| ThreadSpan {
                from_s: i as f64,
                to_s: i as f64 + 0.5,
                node: Some((i % 2) as u32),
                cpus: vec![0],
                samples: 1 + (i % 2) as u64,
                remote: 0,
            })
            .collect();
        let merged = merged_spans(&spans);
        // 450 spans in threes: 150 bars, each from its first to its last.
        assert_eq!(merged.len(), 150);
        assert_eq!((merged[0].0, merged[0].1), (0.0, 2.5));
        // Spans 0, 1, 2 on nodes 0, 1, 0 with 1, 2, 1 samples: a tie,
        // the first with the most (node 0).
        assert_eq!(merged[0].2, Some(0));
        assert!(merged[0]
            .3
            .contains("3 spans merged, most samples on node 0; 4 samples"));
        // Spans 3, 4, 5 on nodes 1, 0, 1: node 1 has 4 samples.
        assert_eq!(merged[1].2, Some(1));
        assert_eq!(merged_spans(&spans[..5]).len(), 5);
    }
}
