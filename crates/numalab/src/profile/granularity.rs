//! `numalab profile --granularity FILTER=SIZE`: a region's accesses unit
//! by unit, a unit being a SIZE-aligned address range (any power of two
//! from the cache line to 2 MiB) inside one of its allocations.
//!
//! What is exact and what is sampled (docs/profile.md, "Units of any
//! size"): a unit's samples are an exact count of the sampled stream (the
//! protection faults, or the PMU's samples, whose addresses are exact); its
//! remote share is a share of those samples, with the interval that
//! clusters them by thread (as a region's page-fault share,
//! `diagnose::evidence`); its accesses are the region's word-count
//! estimate split by the unit's share of the region's samples, an
//! estimate; watchpoint hits (`--refine`) are exact counts within the
//! watched windows. A unit smaller than a page is sampled only by the
//! first access to its page after the page was armed: the split of a
//! page's samples between its units follows which word each arming's
//! first access hit, not how often each is accessed.

use super::filter::RegionFilter;
use super::refine::Refinement;
use super::{Profile, RegionProfile};
use crate::experiments::pdm::wilson;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The largest unit: a transparent huge page on x86_64.
pub const MAX_UNIT: u64 = 2 << 20;
/// The cache line where the machine model names none.
pub const DEFAULT_LINE: u64 = 64;
/// Units listed per region unless `--units` says otherwise (the JSON
/// lists as many).
pub const DEFAULT_SHOWN: usize = 20;
/// The default hot threshold (twice an even spread) at most: in a region
/// of two or three units, a unit clearly above half its samples is hot.
pub const MAX_DEFAULT_HOT: f64 = 0.5;
/// Samples a hot unit has at least: below five, Wilson's interval is too
/// short at its low end (a unit of one sample among 47 would clear twice
/// an even spread over 2048 units, though 47 units of one sample each is
/// what an even spread gives).
pub const MIN_HOT_SAMPLES: u64 = 5;
/// Units listed per region at most.
pub const MAX_SHOWN: usize = 10_000;

/// One `--granularity` rule: the regions it applies to (all when no
/// filter) and their unit's size.
#[derive(Debug, Clone)]
pub struct UnitRule {
    /// The filter as given, and parsed; `None`: every sampled region.
    pub filter: Option<(String, RegionFilter)>,
    pub unit_bytes: u64,
}

impl UnitRule {
    /// `SIZE` (every region) or `FILTER=SIZE` (the regions the filter
    /// selects, in `--regions`' language). The size is checked against
    /// the machine's line by [`UnitRule::check`].
    pub fn parse(text: &str) -> Result<UnitRule, String> {
        let t = text.trim();
        if let Ok(unit_bytes) = crate::text::parse::size(t) {
            return Ok(UnitRule {
                filter: None,
                unit_bytes,
            });
        }
        let Some((filter, size)) = t.rsplit_once('=') else {
            return Err(format!(
                "'{}' is neither SIZE nor FILTER=SIZE (e.g. 4K, heap=64, site:init=2M)",
                crate::text::format::excerpt(t, 40)
            ));
        };
        let unit_bytes = crate::text::parse::size(size)?;
        let parsed = RegionFilter::parse(filter)?;
        Ok(UnitRule {
            filter: Some((filter.trim().to_string(), parsed)),
            unit_bytes,
        })
    }

    /// Whether the unit is a power of two from `line` (the cache line)
    /// to [`MAX_UNIT`]; the error names the valid range.
    pub fn check(&self, line: u64) -> Result<(), String> {
        let b = self.unit_bytes;
        if b.is_power_of_two() && (line..=MAX_UNIT).contains(&b) {
            return Ok(());
        }
        let fmt = crate::text::format::bytes;
        // A size that is no whole number of KiB as its bytes (`3000 B`,
        // not `2.93 KiB`).
        let given = if b.is_multiple_of(1024) {
            fmt(b)
        } else {
            format!("{b} B")
        };
        Err(format!(
            "{given} is not a unit: give a power of two from {} (this machine's cache line) to {} (e.g. {}, 4K, 64K, 2M)",
            fmt(line),
            fmt(MAX_UNIT),
            line
        ))
    }

    /// The rule as given (`heap=4 KiB`, `4 KiB`).
    fn text(&self) -> String {
        let size = crate::text::format::bytes(self.unit_bytes);
        match &self.filter {
            Some((f, _)) => format!("{f}={size}"),
            None => size,
        }
    }
}

/// What `--granularity`, `--units` and `--hot-share` ask.
#[derive(Debug, Clone)]
pub struct UnitRequest {
    /// The rules in the order given: a region takes the first that
    /// selects it.
    pub rules: Vec<UnitRule>,
    /// Units listed per region, hottest first.
    pub shown: usize,
    /// A unit is hot when its share of the region's samples is above
    /// this (the low end of its interval), with [`MIN_HOT_SAMPLES`] or
    /// more; `None`: twice an even spread (at most half).
    pub hot_share: Option<f64>,
    /// The machine's cache line (the smallest unit).
    pub line_bytes: u64,
}

/// One sampled access kept for the units (only with `--granularity`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitSample {
    pub addr: u64,
    /// The allocation it fell in.
    pub alloc_start: u64,
    pub alloc_len: u64,
    pub tid: u32,
    pub cpu_node: Option<u32>,
    /// The page's node as the sampler saw it.
    pub page_node: Option<u32>,
    /// `Some(true)` a write, `Some(false)` a read, `None` unknown.
    pub write: Option<bool>,
}

/// What the replay keeps of a sampled region for its units: its
/// allocations (start, bytes) and its sampled accesses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RegionSamples {
    pub allocations: Vec<(u64, u64)>,
    pub samples: Vec<UnitSample>,
}

/// What `--granularity` asked, in profile.json (`granularity`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Granularity {
    /// The rules as given (`FILTER=SIZE`, or the size alone for every
    /// region), in order: a region takes the first that selects it.
    pub rules: Vec<String>,
    /// The smallest unit allowed: the machine's cache line.
    pub line_bytes: u64,
    /// Units listed per region (the hottest).
    pub shown: usize,
    /// `--hot-share` as a fraction; `None`: twice an even spread over
    /// the region's units.
    pub hot_share: Option<f64>,
    /// Rules that selected no sampled region.
    pub unmatched_rules: Vec<String>,
}

/// One region's units (`units` of a region in profile.json).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnitTable {
    /// The rule that chose the unit.
    pub rule: String,
    pub unit_bytes: u64,
    /// Units its allocations span (partial ones at either end counted).
    pub units: u64,
    /// Units with at least one sample.
    pub sampled_units: u64,
    /// The region's samples: the units' samples sum to it.
    pub samples: u64,
    /// The share of the region's samples above which (the low end of its
    /// 95% interval) a unit is hot.
    pub hot_threshold: f64,
    pub hot_units: u64,
    /// The hottest units, most samples first.
    pub shown: Vec<Unit>,
    /// The units not listed, and their samples.
    pub rest_units: u64,
    pub rest_samples: u64,
}

/// One unit of a region.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Unit {
    /// Its first byte inside the allocation, its offset from the
    /// allocation's start, and its bytes inside the allocation (a unit at
    /// either end of an unaligned allocation is partial).
    pub address: u64,
    pub offset: u64,
    pub bytes: u64,
    /// Samples in it: an exact count of the sampled stream.
    pub samples: u64,
    pub reads: u64,
    pub writes: u64,
    /// Its share of the region's samples, with the 95% Wilson interval.
    pub share: f64,
    pub share_low: f64,
    pub share_high: f64,
    pub hot: bool,
    /// Samples by the CPU node of the accessing thread.
    pub from_nodes: BTreeMap<u32, u64>,
    /// Samples by the node of the page (its home, where the sampler knew
    /// it).
    pub home_nodes: BTreeMap<u32, u64>,
    /// Share of its samples with both nodes known that were remote, with
    /// the interval clustered by thread (not bounded: a sample goes to the
    /// first access after arming).
    pub remote: Option<super::estimate::Share>,
    /// The region's estimated accesses (word counts) times the unit's
    /// share of its samples: an estimate, `None` without word counts.
    pub estimated_accesses: Option<f64>,
    /// Watchpoint hits on its words (`--refine`), exact within the
    /// watched windows; `None`: no word of it was watched.
    pub watched: Option<WatchedHits>,
}

/// Watchpoint hits on the words of one unit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WatchedHits {
    /// Words watched, and for how long in all.
    pub words: u64,
    pub watched_ms: f64,
    /// Hits, placed or not: writes, and reads.
    pub writes: u64,
    pub reads: u64,
}

#[derive(Default)]
struct UnitAcc {
    alloc_start: u64,
    alloc_len: u64,
    samples: u64,
    reads: u64,
    writes: u64,
    from_nodes: BTreeMap<u32, u64>,
    home_nodes: BTreeMap<u32, u64>,
    placed_by_thread: BTreeMap<u32, [u64; 2]>,
}

/// Units of `unit` bytes that `[start, start + len)` touches.
fn units_spanned(start: u64, len: u64, unit: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (start + len).div_ceil(unit) - start / unit
}

/// The units of one region from its kept samples.
pub fn unit_table(
    r: &RegionProfile,
    kept: &RegionSamples,
    rule: &UnitRule,
    req: &UnitRequest,
    refinement: Option<&Refinement>,
) -> UnitTable {
    let unit = rule.unit_bytes.max(1);
    let mut accs: BTreeMap<(u64, u64), UnitAcc> = BTreeMap::new();
    for s in &kept.samples {
        let a = accs.entry((s.alloc_start, s.addr / unit)).or_default();
        a.alloc_start = s.alloc_start;
        a.alloc_len = s.alloc_len;
        a.samples += 1;
        match s.write {
            Some(true) => a.writes += 1,
            Some(false) => a.reads += 1,
            None => {}
        }
        if let Some(c) = s.cpu_node {
            *a.from_nodes.entry(c).or_default() += 1;
        }
        if let Some(n) = s.page_node {
            *a.home_nodes.entry(n).or_default() += 1;
        }
        if let (Some(c), Some(n)) = (s.cpu_node, s.page_node) {
            let t = a.placed_by_thread.entry(s.tid).or_default();
            t[0] += 1;
            t[1] += (c != n) as u64;
        }
    }
    let total = kept.samples.len() as u64;
    let units: u64 = kept
        .allocations
        .iter()
        .map(|&(s, l)| units_spanned(s, l, unit))
        .sum();
    let hot_threshold = req
        .hot_share
        .unwrap_or_else(|| (2.0 / units.max(1) as f64).min(MAX_DEFAULT_HOT));
    let mut list: Vec<Unit> = accs
        .into_iter()
        .map(|((alloc_start, index), a)| {
            let aligned = index * unit;
            let start = aligned.max(alloc_start);
            let end = (aligned + unit).min(alloc_start + a.alloc_len);
            let share = a.samples as f64 / total.max(1) as f64;
            let [share_low, share_high] = wilson(share, total.max(1) as f64);
            let placed: u64 = a.placed_by_thread.values().map(|t| t[0]).sum();
            let remote = (placed > 0).then(|| {
                let k: u64 = a.placed_by_thread.values().map(|t| t[1]).sum();
                let p = k as f64 / placed as f64;
                let [low, high] = super::diagnose::cluster_interval(&a.placed_by_thread, placed, p);
                super::estimate::Share {
                    share: p,
                    low,
                    high,
                }
            });
            Unit {
                address: start,
                offset: start - alloc_start,
                bytes: end.saturating_sub(start),
                samples: a.samples,
                reads: a.reads,
                writes: a.writes,
                share,
                share_low,
                share_high,
                hot: a.samples >= MIN_HOT_SAMPLES && share_low > hot_threshold,
                from_nodes: a.from_nodes,
                home_nodes: a.home_nodes,
                remote,
                estimated_accesses: r
                    .estimate
                    .as_ref()
                    .filter(|e| e.cells > 0)
                    .map(|e| e.accesses * share),
                watched: None,
            }
        })
        .collect();
    list.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.address.cmp(&b.address)));
    let hot_units = list.iter().filter(|u| u.hot).count() as u64;
    let sampled_units = list.len() as u64;
    let rest: Vec<Unit> = list.split_off(list.len().min(req.shown));
    if let Some(refinement) = refinement {
        for u in &mut list {
            u.watched = watched_in(refinement, u.address, u.address + u.bytes);
        }
    }
    UnitTable {
        rule: rule.text(),
        unit_bytes: unit,
        units,
        sampled_units,
        samples: total,
        hot_threshold,
        hot_units,
        shown: list,
        rest_units: rest.len() as u64,
        rest_samples: rest.iter().map(|u| u.samples).sum(),
    }
}

/// The watchpoint hits on words in `[start, end)`.
fn watched_in(r: &Refinement, start: u64, end: u64) -> Option<WatchedHits> {
    let mut w = WatchedHits {
        words: 0,
        watched_ms: 0.0,
        writes: 0,
        reads: 0,
    };
    for line in &r.lines {
        for word in &line.words {
            let at = line.address + word.offset;
            if (start..end).contains(&at) {
                w.words += 1;
                w.watched_ms += word.watched_ms;
                w.writes += word.writes.values().sum::<u64>() + word.unplaced_writes;
                w.reads += word.reads.values().sum::<u64>() + word.unplaced_reads;
            }
        }
    }
    (w.words > 0).then_some(w)
}

/// The units of every sampled region a rule selects, from the samples
/// the replay kept ([`super::build_with_units`]); the kept samples are
/// dropped, and `p.granularity` says what was asked.
pub fn apply(p: &mut Profile, req: &UnitRequest) {
    let mut used = vec![false; req.rules.len()];
    let refinement = p.refinement.clone();
    for r in &mut p.regions {
        let Some(kept) = r.kept_samples.take() else {
            continue;
        };
        if !r.sampled {
            continue;
        }
        let chosen = req.rules.iter().position(|rule| match &rule.filter {
            None => true,
            Some((_, f)) => f.judges(r, &kept.allocations),
        });
        if let Some(i) = chosen {
            used[i] = true;
            r.units = Some(unit_table(
                r,
                &kept,
                &req.rules[i],
                req,
                refinement.as_ref(),
            ));
        }
    }
    for r in &mut p.regions {
        r.kept_samples = None;
    }
    let unmatched_rules: Vec<String> = req
        .rules
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(r, _)| r.text())
        .collect();
    for rule in &unmatched_rules {
        p.warnings.push(format!(
            "--granularity {rule} selected no sampled region: check the filter against the regions' sites"
        ));
    }
    p.granularity = Some(Granularity {
        rules: req.rules.iter().map(UnitRule::text).collect(),
        line_bytes: req.line_bytes,
        shown: req.shown,
        hot_share: req.hot_share,
        unmatched_rules,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;
    use crate::profile::record::{Kind, FLAG_WRITE};
    use crate::profile::refine::{LineProfile, WordProfile};
    use crate::profile::{build_with_units, test_record as rec, StaticObject, Symbolizer};

    struct Fixed;

    impl Symbolizer for Fixed {
        fn frame(&self, pc: u64) -> Option<String> {
            match pc {
                0x401000 => Some("fill prog.c:12 (prog)".into()),
                0x402000 => Some("other prog.c:30 (prog)".into()),
                _ => None,
            }
        }
        fn static_object(&self, _segment: u64, _bias: u64) -> Option<StaticObject> {
            None
        }
    }

    fn request(rules: &[&str], shown: usize) -> UnitRequest {
        UnitRequest {
            rules: rules.iter().map(|t| UnitRule::parse(t).unwrap()).collect(),
            shown,
            hot_share: None,
            line_bytes: 64,
        }
    }

    /// A 4 MiB heap block at 0x7000_0000 (2 MiB aligned) from `fill`, and a
    /// 1 MiB block from `other`; samples at known offsets of the first,
    /// from CPU 0 (node 0) and CPU 2 (node 1), pages on node 0.
    fn records() -> Vec<crate::profile::record::Record> {
        let heap = 0x7000_0000u64;
        let other = 0x8000_0000u64;
        let mut r = vec![
            rec(Kind::Start, 100, u32::MAX, 0, 65536, 4096, 1),
            rec(Kind::Alloc, 100, u32::MAX, -1, heap, 4 << 20, 2),
            rec(Kind::Frame, 100, u32::MAX, -1, heap, 0, 0x401000),
            rec(Kind::Alloc, 100, u32::MAX, -1, other, 1 << 20, 3),
            rec(Kind::Frame, 100, u32::MAX, -1, other, 0, 0x402000),
        ];
        // Offsets and counts: line 0 of page 0 (5 by thread 101 on node 0),
        // line 1 of page 0 (3 by thread 102 on node 1: remote, writes),
        // page 1 (2 at +4096+8), the second 2 MiB (4 at +2M+64).
        let mut t = 10;
        let mut put = |tid: u32, cpu: u32, off: u64, n: usize, flags: u32| {
            for _ in 0..n {
                let mut s = rec(Kind::Sample, tid, cpu, 0, heap + off, 0, t);
                s.flags = flags;
                r.push(s);
                t += 1;
            }
        };
        put(101, 0, 0, 5, 0);
        put(102, 2, 64 + 8, 3, FLAG_WRITE);
        put(101, 0, 4096 + 8, 2, 0);
        put(102, 2, (2 << 20) + 64, 4, 0);
        r.push(rec(Kind::Sample, 101, 0, 0, other + 100, 0, t));
        r
    }

    fn build(req: &UnitRequest) -> Profile {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut p = build_with_units(&m, vec!["prog".into()], &records(), &Fixed, true);
        apply(&mut p, req);
        p
    }

    fn region<'a>(p: &'a Profile, site: &str) -> &'a RegionProfile {
        p.regions.iter().find(|r| r.site.starts_with(site)).unwrap()
    }

    fn rows(t: &UnitTable) -> Vec<(u64, u64, u64)> {
        t.shown
            .iter()
            .map(|u| (u.offset, u.bytes, u.samples))
            .collect()
    }

    #[test]
    fn units_of_a_line_count_each_lines_samples_exactly() {
        let p = build(&request(&["site:fill=64"], 20));
        let r = region(&p, "fill");
        let t = r.units.as_ref().unwrap();
        assert_eq!((t.unit_bytes, t.units, t.samples), (64, 65536, 14));
        assert_eq!(
            rows(t),
            [
                (0, 64, 5),
                ((2 << 20) + 64, 64, 4),
                (64, 64, 3),
                (4096, 64, 2)
            ]
        );
        assert_eq!(t.shown.iter().map(|u| u.samples).sum::<u64>(), r.samples);
        let line1 = &t.shown[2];
        assert_eq!((line1.reads, line1.writes), (0, 3));
        assert_eq!(line1.from_nodes, BTreeMap::from([(1, 3)]));
        assert_eq!(line1.home_nodes, BTreeMap::from([(0, 3)]));
        let remote = line1.remote.unwrap();
        assert_eq!(remote.share, 1.0);
        // One thread, three samples: Wilson's interval at three.
        assert!(
            (remote.low - wilson(1.0, 3.0)[0]).abs() < 1e-12,
            "{remote:?}"
        );
        assert_eq!(t.shown[0].remote.unwrap().share, 0.0);
        // Twice an even spread over 65536 lines: every sampled line's
        // interval clears it, but only line 0 has the five samples a hot
        // unit needs.
        assert_eq!(t.hot_threshold, 2.0 / 65536.0);
        let hot: Vec<bool> = t.shown.iter().map(|u| u.hot).collect();
        assert_eq!(
            (t.hot_units, hot.as_slice()),
            (1, &[true, false, false, false][..])
        );
        // The other region has no rule of its own.
        assert!(region(&p, "other").units.is_none());
        assert_eq!(p.granularity.as_ref().unwrap().rules, ["site:fill=64 B"]);
    }

    #[test]
    fn units_of_a_page_and_of_a_huge_page_merge_their_lines() {
        let p = build(&request(&["4K"], 20));
        let t = region(&p, "fill").units.clone().unwrap();
        assert_eq!(t.units, 1024);
        assert_eq!(
            rows(&t),
            [(0, 4096, 8), ((2 << 20), 4096, 4), (4096, 4096, 2)]
        );
        let page0 = &t.shown[0];
        assert_eq!(page0.from_nodes, BTreeMap::from([(0, 5), (1, 3)]));
        // Two threads, one all local and one all remote: the interval
        // clustered by thread is wider than Wilson's at eight.
        let remote = page0.remote.unwrap();
        assert_eq!(remote.share, 3.0 / 8.0);
        assert!(remote.high - remote.low > wilson(0.375, 8.0)[1] - wilson(0.375, 8.0)[0]);
        // A bare size is every region's.
        let other = region(&p, "other").units.clone().unwrap();
        assert_eq!((other.units, other.samples), (256, 1));

        let p = build(&request(&["heap=2M"], 1));
        let t = region(&p, "fill").units.clone().unwrap();
        assert_eq!(t.units, 2);
        assert_eq!(rows(&t), [(0, 2 << 20, 10)]);
        assert_eq!((t.rest_units, t.rest_samples), (1, 4));
        // Two units: twice an even spread is all the samples, so the
        // threshold is half of them; 10 of 14 is not clear of it (its
        // interval's low end is 0.45).
        assert_eq!((t.hot_threshold, t.hot_units), (0.5, 0));
        assert!(!t.shown[0].hot);
        let mut req = request(&["heap=2M"], 2);
        req.hot_share = Some(0.3);
        let p = build(&req);
        let t = region(&p, "fill").units.clone().unwrap();
        let hot: Vec<(u64, bool)> = t.shown.iter().map(|u| (u.samples, u.hot)).collect();
        assert_eq!(hot, [(10, true), (4, false)]);
        // An unaligned allocation's end units are partial, inside it.
        let o = region(&p, "other").units.clone().unwrap();
        assert_eq!(o.units, 1);
        assert_eq!(
            (o.shown[0].address, o.shown[0].bytes),
            (0x8000_0000, 1 << 20)
        );
    }

    #[test]
    fn the_first_rule_that_selects_a_region_decides_and_unmatched_rules_are_said() {
        let mut req = request(&["site:other=64", "heap=4K", "mmap=2M"], 20);
        req.hot_share = Some(0.5);
        let p = build(&req);
        assert_eq!(region(&p, "other").units.as_ref().unwrap().unit_bytes, 64);
        let t = region(&p, "fill").units.clone().unwrap();
        assert_eq!(t.unit_bytes, 4096);
        // Above half the samples: page 0's 8 of 14 is not clear of it.
        assert_eq!((t.hot_threshold, t.hot_units), (0.5, 0));
        let g = p.granularity.unwrap();
        assert_eq!(g.unmatched_rules, ["mmap=2 MiB"]);
        assert!(p
            .warnings
            .iter()
            .any(|w| w.starts_with("--granularity mmap=2 MiB selected no sampled region")));
    }

    #[test]
    fn watched_words_are_counted_in_their_unit() {
        let mut p = {
            let m = fixture("qemu-quartet-4n2c-ring.xml");
            build_with_units(&m, vec!["prog".into()], &records(), &Fixed, true)
        };
        let word = |offset, w: u64, r: u64| WordProfile {
            offset,
            watched_ms: 20.0,
            writes: BTreeMap::from([(1, w)]),
            reads: BTreeMap::from([(0, r)]),
            unplaced_writes: 1,
            unplaced_reads: 0,
            threads: vec![102],
        };
        p.refinement = Some(Refinement {
            unavailable: None,
            write_probes: 0,
            word_windows: 1,
            watched_ms: 40.0,
            hits: 0,
            us_per_hit: None,
            hits_cost_ms: None,
            lines: vec![LineProfile {
                address: 0x7000_0040,
                site: None,
                offset: Some(64),
                page_node: Some(0),
                remote_hits: 0,
                placed_hits: 0,
                words: vec![word(8, 100, 7), word(16, 5, 0)],
                written_from: vec![1],
                accessed_from: vec![0, 1],
                false_sharing: false,
                shared_words: vec![],
            }],
        });
        apply(&mut p, &request(&["64"], 20));
        let t = region(&p, "fill").units.clone().unwrap();
        let line1 = t.shown.iter().find(|u| u.offset == 64).unwrap();
        assert_eq!(
            line1.watched,
            Some(WatchedHits {
                words: 2,
                watched_ms: 40.0,
                writes: 107,
                reads: 7
            })
        );
        assert!(t
            .shown
            .iter()
            .filter(|u| u.offset != 64)
            .all(|u| u.watched.is_none()));
    }

    #[test]
    fn sizes_are_checked_against_the_line_and_two_mib() {
        let err = |t: &str| UnitRule::parse(t).and_then(|r| r.check(64)).unwrap_err();
        assert_eq!(
            err("3000"),
            "3000 B is not a unit: give a power of two from 64 B (this machine's cache line) to 2 MiB (e.g. 64, 4K, 64K, 2M)"
        );
        assert!(
            err("4M").starts_with("4 MiB is not a unit"),
            "{}",
            err("4M")
        );
        assert!(err("32").starts_with("32 B is not a unit"));
        assert!(
            err("heap=64K=x").contains("'x' is not a size"),
            "{}",
            err("heap=64K=x")
        );
        assert!(err("hep=4K").contains("'hep' is not a region term"));
        let r = UnitRule::parse("size>=1M=4K").unwrap();
        assert_eq!(r.unit_bytes, 4096);
        assert_eq!(r.filter.unwrap().0, "size>=1M");
        assert!(UnitRule::parse("2M").unwrap().check(64).is_ok());
    }
}
