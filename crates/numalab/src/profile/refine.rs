//! Refinement (`numalab profile --refine auto`): the cache lines and
//! 8-byte words the preload library watched with hardware watchpoints
//! (crates/numalab-preload/src/refine.rs), by the node of the CPU that
//! read or wrote them, and the false sharing they show.

use super::record::{Record, FLAG_WRITE};
use crate::machine::Machine;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

const LINE: u64 = 64;

/// What refinement found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Refinement {
    /// Why there is nothing to show, when watchpoints could not be used
    /// ("perf_event_open refused breakpoints: Permission denied (os error
    /// 13)").
    pub unavailable: Option<String>,
    /// Write probes taken: the pages of interesting lines armed against
    /// writes only, to learn who writes them (kept out of the regions'
    /// samples).
    pub write_probes: u64,
    /// Windows of two words watched, and their time together.
    pub word_windows: u64,
    pub watched_ms: f64,
    /// Hits counted, what one costs the accessing thread (measured once),
    /// and so what the hits cost the program.
    pub hits: u64,
    pub us_per_hit: Option<f64>,
    pub hits_cost_ms: Option<f64>,
    /// The lines with hits, most contended first.
    pub lines: Vec<LineProfile>,
}

/// One cache line watched.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LineProfile {
    pub address: u64,
    /// The allocation site of the region holding it, and the line's offset
    /// in that allocation.
    pub site: Option<String>,
    pub offset: Option<u64>,
    /// The memory node of its page, as last seen.
    pub page_node: Option<u32>,
    /// Hits from CPUs of other nodes than the page's, of the hits placed.
    pub remote_hits: u64,
    pub placed_hits: u64,
    /// The words with hits, by offset in the line.
    pub words: Vec<WordProfile>,
    /// CPU nodes that wrote it, and that read or wrote it.
    pub written_from: Vec<u32>,
    pub accessed_from: Vec<u32>,
    /// Written from two or more nodes, to different words: the line
    /// bounces between the nodes though no word is shared.
    pub false_sharing: bool,
    /// Words written from two or more nodes (true sharing).
    pub shared_words: Vec<u64>,
}

/// One 8-byte word of a line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WordProfile {
    /// Offset in the line.
    pub offset: u64,
    /// How long it was watched.
    pub watched_ms: f64,
    /// Hits by CPU node: writes, and reads (every access less the writes).
    pub writes: BTreeMap<u32, u64>,
    pub reads: BTreeMap<u32, u64>,
    /// Hits whose CPU was not sampled (the ring filled), by kind.
    pub unplaced_writes: u64,
    pub unplaced_reads: u64,
    /// Threads with hits.
    pub threads: Vec<u32>,
}

/// One Watch record with the allocation it fell in (site, offset of the
/// word in the allocation), looked up when it was replayed.
pub struct WatchHit {
    pub record: Record,
    pub owner: Option<(String, u64)>,
}

/// The refinement of the Watch and Refine records; `None` when the run did
/// not refine.
pub fn refinement(
    m: &Machine,
    hits: &[WatchHit],
    bookkeeping: &[Record],
    write_probes: u64,
) -> Option<Refinement> {
    if bookkeeping.is_empty() && hits.is_empty() && write_probes == 0 {
        return None;
    }
    let unavailable = bookkeeping.iter().find(|r| r.cpu == 0).map(|r| {
        format!(
            "perf_event_open refused hardware watchpoints: {}",
            std::io::Error::from_raw_os_error(-r.node)
        )
    });
    let us_per_hit = bookkeeping
        .iter()
        .find(|r| r.cpu == 1)
        .map(|r| r.size as f64 / 1e3);
    // Watch time per word, from the bookkeeping of each window.
    let mut watched: BTreeMap<u64, u64> = BTreeMap::new();
    let mut page_node: BTreeMap<u64, u32> = BTreeMap::new();
    let windows: Vec<&Record> = bookkeeping.iter().filter(|r| r.cpu == u32::MAX).collect();
    for r in &windows {
        *watched.entry(r.addr).or_default() += r.size;
        if r.node >= 0 {
            page_node.insert(r.addr & !(LINE - 1), r.node as u32);
        }
    }
    // Per (word, window, thread, CPU): writes and all accesses, so that
    // the reads are the difference within one window.
    let mut counts: BTreeMap<(u64, u64, u32, u32), (u64, u64)> = BTreeMap::new();
    let mut owners: BTreeMap<u64, (String, u64)> = BTreeMap::new();
    let mut total = 0;
    for h in hits {
        let r = &h.record;
        total += r.size;
        let e = counts.entry((r.addr, r.time_ns, r.tid, r.cpu)).or_default();
        if r.flags & FLAG_WRITE != 0 {
            e.0 += r.size;
        } else {
            e.1 += r.size;
        }
        if let Some((site, off)) = &h.owner {
            owners
                .entry(r.addr & !(LINE - 1))
                .or_insert_with(|| (site.clone(), off - (r.addr % LINE)));
        }
    }
    let mut words: BTreeMap<u64, WordProfile> = BTreeMap::new();
    for ((addr, _, tid, cpu), (w, rw)) in counts {
        let word = words.entry(addr).or_insert_with(|| WordProfile {
            offset: addr % LINE,
            watched_ms: watched.get(&addr).copied().unwrap_or(0) as f64 / 1e6,
            writes: BTreeMap::new(),
            reads: BTreeMap::new(),
            unplaced_writes: 0,
            unplaced_reads: 0,
            threads: Vec::new(),
        });
        let reads = rw.saturating_sub(w);
        match (cpu != u32::MAX).then(|| m.node_of_cpu(cpu)).flatten() {
            Some(n) => {
                if w > 0 {
                    *word.writes.entry(n).or_default() += w;
                }
                if reads > 0 {
                    *word.reads.entry(n).or_default() += reads;
                }
            }
            None => {
                word.unplaced_writes += w;
                word.unplaced_reads += reads;
            }
        }
        if !word.threads.contains(&tid) {
            word.threads.push(tid);
        }
    }
    let mut lines: BTreeMap<u64, Vec<WordProfile>> = BTreeMap::new();
    for (addr, w) in words {
        lines.entry(addr & !(LINE - 1)).or_default().push(w);
    }
    let mut lines: Vec<LineProfile> = lines
        .into_iter()
        .map(|(address, words)| {
            line_profile(
                address,
                words,
                owners.get(&address),
                page_node.get(&address).copied(),
            )
        })
        .collect();
    lines.sort_by_key(|l| {
        (
            std::cmp::Reverse(l.false_sharing || !l.shared_words.is_empty()),
            std::cmp::Reverse(l.written_from.len()),
            std::cmp::Reverse(l.accessed_from.len()),
            std::cmp::Reverse(line_hits(l)),
        )
    });
    let watched_ns: u64 = windows.iter().map(|r| r.size).sum::<u64>() / 2;
    Some(Refinement {
        unavailable,
        write_probes,
        word_windows: windows.len() as u64 / 2,
        watched_ms: watched_ns as f64 / 1e6,
        hits: total,
        us_per_hit,
        hits_cost_ms: us_per_hit.map(|us| us * total as f64 / 1e3),
        lines,
    })
}

fn line_hits(l: &LineProfile) -> u64 {
    l.words
        .iter()
        .map(|w| {
            w.writes.values().sum::<u64>()
                + w.reads.values().sum::<u64>()
                + w.unplaced_reads
                + w.unplaced_writes
        })
        .sum()
}

/// A line from its words: who wrote and read it, and whether that is
/// false sharing (nodes writing different words) or true sharing (one
/// word written from several nodes).
fn line_profile(
    address: u64,
    words: Vec<WordProfile>,
    owner: Option<&(String, u64)>,
    page_node: Option<u32>,
) -> LineProfile {
    let mut written: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    let mut accessed: BTreeSet<u32> = BTreeSet::new();
    for w in &words {
        for n in w.writes.keys() {
            written.entry(*n).or_default().insert(w.offset);
        }
        accessed.extend(w.writes.keys().chain(w.reads.keys()));
    }
    let shared_words: Vec<u64> = words
        .iter()
        .filter(|w| w.writes.len() >= 2)
        .map(|w| w.offset)
        .collect();
    // Two writing nodes whose sets of words differ: the line moves
    // between them for words that only one of them writes.
    let sets: Vec<&BTreeSet<u64>> = written.values().collect();
    let false_sharing = sets.len() >= 2 && sets.iter().any(|s| *s != sets[0]);
    let by_node = words
        .iter()
        .flat_map(|w| w.writes.iter().chain(w.reads.iter()));
    let (mut placed_hits, mut remote_hits) = (0, 0);
    for (n, k) in by_node {
        placed_hits += k;
        if page_node.is_some_and(|p| p != *n) {
            remote_hits += k;
        }
    }
    LineProfile {
        address,
        site: owner.map(|o| o.0.clone()),
        offset: owner.map(|o| o.1),
        page_node,
        remote_hits,
        placed_hits,
        words,
        written_from: written.keys().copied().collect(),
        accessed_from: accessed.into_iter().collect(),
        false_sharing,
        shared_words,
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::Kind;
    use super::*;

    fn watch(tid: u32, cpu: u32, addr: u64, write: bool, hits: u64, window: u64) -> WatchHit {
        WatchHit {
            record: Record {
                kind: Kind::Watch,
                tid,
                cpu,
                node: 0,
                flags: if write { FLAG_WRITE } else { 0 },
                addr,
                size: hits,
                time_ns: window,
                aux: 0,
            },
            owner: Some(("main (d.c:12)".into(), addr - 0x1000)),
        }
    }

    fn window(addr: u64, ns: u64, at: u64) -> Record {
        Record {
            kind: Kind::Refine,
            tid: 0,
            cpu: u32::MAX,
            node: 0,
            flags: 8,
            addr,
            size: ns,
            time_ns: at,
            aux: 0,
        }
    }

    /// Two nodes writing two words of one line is false sharing; the reads
    /// are the accesses less the writes, per window and CPU.
    #[test]
    fn two_nodes_writing_two_words_is_false_sharing() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let hits = vec![
            // Word 0: thread 11 on CPU 0 (node 0) writes 100, reads 50.
            watch(11, 0, 0x1000, true, 100, 1),
            watch(11, 0, 0x1000, false, 150, 1),
            // Word 8: thread 12 on CPU 2 (node 1) writes 80, and nothing else.
            watch(12, 2, 0x1008, true, 80, 1),
            watch(12, 2, 0x1008, false, 80, 1),
            // Another line: one word written from both nodes.
            watch(11, 0, 0x2040, true, 5, 2),
            watch(11, 0, 0x2040, false, 5, 2),
            watch(12, 3, 0x2040, true, 7, 2),
            watch(12, 3, 0x2040, false, 9, 2),
        ];
        let book = vec![
            window(0x1000, 20_000_000, 1),
            window(0x1008, 20_000_000, 1),
            window(0x2040, 10_000_000, 2),
            window(0x2048, 10_000_000, 2),
        ];
        let r = refinement(&m, &hits, &book, 0).unwrap();
        assert_eq!(r.unavailable, None);
        assert_eq!(r.word_windows, 2);
        assert_eq!(r.watched_ms, 30.0);
        assert_eq!(r.hits, 436);
        assert_eq!(r.lines.len(), 2);
        let d = &r.lines[0];
        assert_eq!(d.address, 0x1000);
        assert!(d.false_sharing);
        assert!(d.shared_words.is_empty());
        assert_eq!(d.written_from, vec![0, 1]);
        assert_eq!(d.site.as_deref(), Some("main (d.c:12)"));
        assert_eq!(d.offset, Some(0));
        assert_eq!(d.words[0].offset, 0);
        assert_eq!(d.words[0].writes, BTreeMap::from([(0, 100)]));
        assert_eq!(d.words[0].reads, BTreeMap::from([(0, 50)]));
        assert_eq!(d.words[1].offset, 8);
        assert_eq!(d.words[1].writes, BTreeMap::from([(1, 80)]));
        assert!(d.words[1].reads.is_empty());
        assert_eq!(d.words[0].watched_ms, 20.0);
        // Its page is on node 0: node 1's 80 writes are remote.
        assert_eq!(
            (d.page_node, d.remote_hits, d.placed_hits),
            (Some(0), 80, 230)
        );
        let shared = &r.lines[1];
        assert!(!shared.false_sharing);
        assert_eq!(shared.shared_words, vec![0]);
        assert_eq!(shared.words[0].reads, BTreeMap::from([(1, 2)]));
    }

    /// One node writing a line is neither; a refusal is said, with its
    /// reason; hits whose CPU is unknown stay unplaced.
    #[test]
    fn one_writer_node_and_a_refusal() {
        let m = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let hits = vec![
            watch(11, 0, 0x1000, true, 10, 1),
            watch(13, 1, 0x1008, true, 10, 1),
            watch(13, u32::MAX, 0x1008, false, 4, 1),
        ];
        let r = refinement(&m, &hits, &[window(0x1000, 1, 1), window(0x1008, 1, 1)], 0).unwrap();
        assert!(!r.lines[0].false_sharing);
        assert_eq!(r.lines[0].written_from, vec![0]);
        assert_eq!(r.lines[0].words[1].unplaced_reads, 4);
        let refused = Record {
            kind: Kind::Refine,
            tid: 0,
            cpu: 0,
            node: -libc::EACCES,
            flags: 0,
            addr: 0,
            size: 0,
            time_ns: 0,
            aux: 0,
        };
        let r = refinement(&m, &[], &[refused], 0).unwrap();
        assert!(
            r.unavailable
                .as_deref()
                .unwrap()
                .starts_with("perf_event_open refused hardware watchpoints: Permission denied"),
            "{:?}",
            r.unavailable
        );
        assert!(refinement(&m, &[], &[], 0).is_none());
    }
}
