//! Successive refinement (`NUMALAB_PROFILE_REFINE=auto`): from pages down
//! to cache lines and 8-byte words.
//!
//! The page samples carry the exact address that faulted, so the sampler
//! learns which cache lines are accessed from which nodes as it writes the
//! records out ([`Refiner::observe`]). Once it has seen some, it watches
//! the most interesting lines' words with hardware watchpoints
//! (`perf_event_open`, `PERF_TYPE_BREAKPOINT`), two words at a time in
//! short windows, on every thread of the program: each hit is counted
//! exactly (the event's count) and placed on a CPU by the event's samples
//! (`PERF_SAMPLE_CPU`). A line whose words are written from two nodes is
//! what `numalab profile` calls false sharing.
//!
//! Why two words a window: x86 has four debug registers a thread and no
//! read-only watchpoint, so each word takes a write watch and an access
//! (read or write) watch; its reads are the difference.
//!
//! A hit costs the accessing thread a debug trap (about 10 µs here), which
//! the library cannot measure from its own thread: the windows are short
//! (20 ms) and their total is bounded (`NUMALAB_PROFILE_REFINE_MS`, 2 s by
//! default), and the engine reports the hits with the cost per hit
//! measured at the first window.

use crate::perf::{PerfEventAttr, ATTR_DISABLED, ATTR_EXCLUDE_HV, ATTR_EXCLUDE_KERNEL};
use crate::record::{Kind, Record, FLAG_WRITE, RECORD_BYTES};
use crate::runtime::state::{config, page_size, START_NS};
use crate::runtime::{emit, sys};

/// How long a window watches its two words.
const WINDOW_NS: u64 = 20_000_000;
/// Refinement starts this long after the library: the page samples need
/// time to find lines.
const START_AFTER_NS: u64 = 500_000_000;
/// The watch time allowed by default (all windows together).
pub const DEFAULT_BUDGET_MS: u64 = 2000;
/// Lines learnt from the samples, at most: about a second of samples at a
/// high rate, so that a hot line's next sample comes before it is evicted
/// (a line of one sample makes way for a new one).
const MAX_LINES: usize = 1024;
/// Windows watched in one sampler tick at most (the pages armed between
/// ticks wait for them).
const WINDOWS_PER_TICK: usize = 4;
/// The best ranked lines, watched every round.
const BEST_LINES: usize = 2;
/// Rounds in which every word of a line is watched, not only those the
/// samples hit: one 20 ms window can fall while the thread that writes a
/// word is not running (CI, in a guest on one host thread: D's second
/// counter, written all the time from node 1, had no hit in its only
/// window, and the line was not found falsely shared).
const EVERY_WORD_ROUNDS: u32 = 3;
/// Threads watched in one window at most (four descriptors each); more
/// threads are taken in turns.
const MAX_THREADS: usize = 64;
/// The ring of samples of one thread's events: data pages (a power of 2).
/// 128 KiB: 4096 samples, more than a 20 ms window can trap at the 5 µs a
/// hit costs at best, so that the counts need no system call.
const RING_DATA_PAGES: usize = 32;
const LINE: u64 = 64;
const WORD: u64 = 8;

const PERF_TYPE_BREAKPOINT: u32 = 5;
const HW_BREAKPOINT_W: u32 = 2;
const HW_BREAKPOINT_RW: u32 = 3;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_CPU: u64 = 1 << 7;
const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;
const PERF_RECORD_SAMPLE: u32 = 9;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// The head of the ring's first page (`struct perf_event_mmap_page`): only
/// the fields read here, at their offsets.
const DATA_HEAD_OFFSET: usize = 1024;
const DATA_TAIL_OFFSET: usize = 1032;

/// Opens a watchpoint on `addr` (8 bytes) for thread `tid`, counting every
/// hit and sampling each one's CPU, in the group led by `group` (-1: it
/// leads one, created disabled). Returns the descriptor or the errno.
///
/// A thread's watchpoints are one group so that they count over exactly
/// the same time: opened one by one, the write watch of a word ran longer
/// than its read-or-write watch whenever the sampler was preempted
/// between the two, and the reads (the difference) came out short (seen:
/// 402 reads for 634 increments on a loaded host).
fn open_watch(tid: u32, addr: u64, bp_type: u32, group: i32) -> Result<i32, i32> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_BREAKPOINT,
        size: PerfEventAttr::SIZE,
        sample_period: 1,
        sample_type: PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_CPU,
        // Enabled at once; user-space accesses only (what a non-root
        // user may watch; the kernel's copies are the busy calls').
        flags: ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV | if group < 0 { ATTR_DISABLED } else { 0 },
        // No wake-ups: nobody polls, the sampler reads the ring.
        wakeup_events: u32::MAX,
        bp_type,
        config1: addr,
        config2: WORD,
        ..Default::default()
    };
    sys::perf_event_open_in(&attr, tid, group)
}

fn ioctl(fd: i32, request: libc::c_ulong, arg: libc::c_ulong) -> i32 {
    // SAFETY: perf ioctls on a perf descriptor; ID's argument is a valid
    // pointer to a u64 (the caller's).
    unsafe { libc::ioctl(fd, request as _, arg) }
}

fn read_count(fd: i32) -> u64 {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into v.
    let n = unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
    if n == 8 {
        v
    } else {
        0
    }
}

/// A cache line the samples saw.
#[derive(Clone, Copy, Default)]
struct Line {
    addr: u64,
    samples: u32,
    remote: u32,
    /// CPU nodes that accessed it, and that wrote it (bit per node < 64).
    nodes: u64,
    writers: u64,
    /// Rounds it was watched in (the least watched go first).
    watched: u32,
    /// Words (bit per 8-byte word) the samples hit: watched first.
    words_seen: u8,
    /// Threads the samples saw on it (0: none), at most 8.
    tids: [u32; 8],
}

impl Line {
    /// `tid` accessed the line (a sample, or a hit in a window): its page's
    /// windows watch it (the first 8 threads).
    fn saw_thread(&mut self, tid: u32) {
        if !self.tids.contains(&tid) {
            if let Some(free) = self.tids.iter_mut().find(|t| **t == 0) {
                *free = tid;
            }
        }
    }

    /// Lines written from two nodes first, then written ones (a written
    /// line is where sharing costs), then those accessed from two nodes,
    /// then by remote and all samples.
    fn rank(&self) -> (u32, u32, u32, u32, u32) {
        (
            (self.writers.count_ones() >= 2) as u32,
            (self.writers != 0) as u32,
            (self.nodes.count_ones() >= 2) as u32,
            self.remote,
            self.samples,
        )
    }
}

/// One thread's events in the window: slots 0, 1 watch the first word
/// (writes, accesses), 2, 3 the second.
struct Watched {
    tid: u32,
    fds: [i32; 4],
    ids: [u64; 4],
    ring: *mut u8,
}

const RING_BYTES_DATA: usize = RING_DATA_PAGES * 4096;

/// One window's words (the second 0 when one word a window), and whether
/// every thread is watched or only those seen on their page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pair {
    words: [u64; 2],
    every_thread: bool,
}

/// The refinement state, owned by the sampler thread.
pub struct Refiner {
    on: bool,
    budget_ns: u64,
    spent_ns: u64,
    cpu_node: Vec<u8>,
    lines: Vec<Line>,
    /// Where each line's address is in `lines`.
    index: std::collections::HashMap<u64, usize>,
    /// The pages of the four best ranked lines of two samples or more,
    /// ranked once a tick (write probes arm them).
    hot: Vec<usize>,
    /// The round's word pairs, and the next to watch.
    round: Vec<Pair>,
    next: usize,
    window: Vec<Watched>,
    window_words: [u64; 2],
    /// When the window's watchpoints were all in.
    window_start: u64,
    /// Where the thread list resumes when there are more than MAX_THREADS.
    thread_turn: usize,
    page_size: usize,
    calibrated: bool,
    /// Whether any watchpoint opened: after one did, a refusal is the
    /// thread's (ended, registers taken), not the machine's.
    opened_any: bool,
    /// A do-nothing event on the sampler thread, open while refining
    /// (see [`hold_perf_enabled`]).
    _keep: Option<i32>,
}

/// Whether the environment asks for refinement: `NUMALAB_PROFILE_REFINE`
/// is `auto` (default off).
pub fn requested() -> bool {
    config().refine
}

/// The sampler's own thread, never watched.
fn own_tid() -> u32 {
    sys::gettid()
}

impl Refiner {
    /// Refinement as the environment asks ([`requested`];
    /// `NUMALAB_PROFILE_REFINE_MS`: the budget).
    pub fn from_env(page_size: usize) -> Refiner {
        let on = requested();
        let budget_ms = config().refine_ms.unwrap_or(DEFAULT_BUDGET_MS);
        Refiner {
            on: on && budget_ms > 0,
            budget_ns: budget_ms.saturating_mul(1_000_000),
            spent_ns: 0,
            cpu_node: if on { sys::cpu_nodes() } else { Vec::new() },
            lines: Vec::new(),
            index: std::collections::HashMap::new(),
            hot: Vec::new(),
            round: Vec::new(),
            next: 0,
            window: Vec::new(),
            window_words: [0; 2],
            window_start: 0,
            thread_turn: 0,
            page_size,
            calibrated: false,
            opened_any: false,
            _keep: if on { hold_perf_enabled() } else { None },
        }
    }

    /// The page of one of the best ranked lines (`pick` chooses), to be
    /// armed again: refinement narrows the sampling to where the
    /// interesting lines are.
    pub fn hot_page(&self, pick: usize) -> Option<usize> {
        (!self.hot.is_empty()).then(|| self.hot[pick % self.hot.len()])
    }

    /// Ranks the lines for [`Refiner::hot_page`].
    fn rank_hot(&mut self) {
        let mut best: Vec<&Line> = self.lines.iter().filter(|l| l.samples >= 2).collect();
        best.sort_by_key(|l| std::cmp::Reverse(l.rank()));
        self.hot = best
            .iter()
            .take(4)
            .map(|l| l.addr as usize & !(self.page_size - 1))
            .collect();
    }

    /// Whether pages are to be armed region by region half the time.
    pub fn wants_small_regions(&self) -> bool {
        self.on
    }

    fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        match self.cpu_node.get(cpu as usize) {
            Some(&n) if n != u8::MAX => Some(n as u32),
            _ => None,
        }
    }

    /// Learns from one record on its way out: a sample's line.
    pub fn observe(&mut self, bytes: &[u8; RECORD_BYTES]) {
        if !self.on {
            return;
        }
        let Some(r) = Record::decode(bytes) else {
            return;
        };
        if r.kind != Kind::Sample {
            return;
        }
        // `--refine FILTER`: lines of the selected regions only.
        if crate::select::refine_limited() && !crate::tables::refinable(r.addr as usize) {
            return;
        }
        let addr = r.addr & !(LINE - 1);
        let cpu_node = self.node_of_cpu(r.cpu);
        let i = match self.index.get(&addr) {
            Some(&i) => i,
            None if self.lines.len() < MAX_LINES => {
                self.lines.push(Line {
                    addr,
                    ..Default::default()
                });
                self.index.insert(addr, self.lines.len() - 1);
                self.lines.len() - 1
            }
            None => {
                // Full: the least interesting line of one sample makes way.
                let Some(i) = (0..self.lines.len())
                    .filter(|&i| self.lines[i].samples <= 1 && self.lines[i].watched == 0)
                    .min_by_key(|&i| self.lines[i].rank())
                else {
                    return;
                };
                self.index.remove(&self.lines[i].addr);
                self.index.insert(addr, i);
                self.lines[i] = Line {
                    addr,
                    ..Default::default()
                };
                i
            }
        };
        let l = &mut self.lines[i];
        l.samples += 1;
        l.words_seen |= 1 << ((r.addr % LINE) / WORD);
        l.saw_thread(r.tid);
        if let Some(n) = cpu_node.filter(|n| *n < 64) {
            l.nodes |= 1 << n;
            if r.flags & FLAG_WRITE != 0 {
                l.writers |= 1 << n;
            }
            if r.node >= 0 && r.node as u32 != n {
                l.remote += 1;
            }
        }
    }

    /// One sampler tick: closes the window that is due, opens the next
    /// while the budget lasts.
    pub fn tick(&mut self, now: u64) {
        if self.on {
            self.rank_hot();
        }
        if !self.on
            || self.spent_ns >= self.budget_ns
            || now < START_NS.load(std::sync::atomic::Ordering::SeqCst) + START_AFTER_NS
        {
            return;
        }
        if !self.calibrated {
            self.calibrated = true;
            calibrate();
        }
        for _ in 0..WINDOWS_PER_TICK {
            if self.spent_ns >= self.budget_ns
                || (self.next >= self.round.len() && !self.new_round())
            {
                return;
            }
            let Pair {
                words,
                every_thread,
            } = self.round[self.next];
            self.next += 1;
            let tids = if every_thread {
                Vec::new()
            } else {
                self.threads_seen_on_page(words[0])
            };
            // The window is watched here, the sampler waiting: whatever
            // else it has to do (arming, slow in an emulator) cannot
            // stretch it.
            self.open_window(words, tids);
            if !self.window.is_empty() {
                sys::sleep_ns(WINDOW_NS);
                self.close_window(sys::monotonic_ns());
            }
        }
    }

    /// The round's word pairs: the words the samples hit on the best
    /// ranked lines (a line found written from two nodes is watched every
    /// round), each of their other words in the line's first
    /// [`EVERY_WORD_ROUNDS`] rounds, and every word of the least watched
    /// other line (every line gets its turn). In those first rounds every
    /// thread is watched, later only those seen on the line's page (by
    /// the samples, or hitting its words in a window): a page's fault
    /// sample goes to whichever thread touches it first once armed, and
    /// a clean clone's guest (one host thread) gave every sample of D's
    /// page to the thread on CPU 0, so its windows never watched the
    /// second writer and the false sharing went unseen.
    fn new_round(&mut self) -> bool {
        if self.lines.is_empty() {
            return false;
        }
        let mut order: Vec<usize> = (0..self.lines.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.lines[i].rank()));
        let rest = order.split_off(BEST_LINES.min(order.len()));
        // A line whose every-word rounds began finishes them, the best
        // ranked first: a clean clone's guest watched D's line once, its
        // second writer not running in that window, and then always
        // newer lines as the least watched, so the line was never found
        // falsely shared.
        let unfinished = rest
            .iter()
            .copied()
            .filter(|&i| (1..EVERY_WORD_ROUNDS).contains(&self.lines[i].watched))
            .max_by_key(|&i| self.lines[i].rank());
        let other = rest
            .iter()
            .copied()
            .filter(|&i| Some(i) != unfinished)
            .min_by_key(|&i| {
                (
                    self.lines[i].watched,
                    std::cmp::Reverse(self.lines[i].rank()),
                )
            });
        self.round.clear();
        for i in order.into_iter().chain(unfinished).chain(other) {
            let l = &mut self.lines[i];
            let all = l.watched < EVERY_WORD_ROUNDS;
            l.watched += 1;
            // The words the samples hit first, then (the first time) the
            // others, in pairs.
            let mut words: Vec<u64> = (0..LINE / WORD)
                .filter(|w| all || l.words_seen & (1 << w) != 0)
                .collect();
            words.sort_by_key(|w| l.words_seen & (1 << w) == 0);
            // One word a window while the word counter holds two of
            // each thread's four registers (`words_per_window`).
            if words_per_window() == 1 {
                for w in words {
                    self.round.push(Pair {
                        words: [l.addr + w * WORD, 0],
                        every_thread: all,
                    });
                }
                continue;
            }
            for pair in words.chunks(2) {
                let second = pair
                    .get(1)
                    .copied()
                    .unwrap_or((pair[0] + 1) % (LINE / WORD));
                self.round.push(Pair {
                    words: [l.addr + pair[0] * WORD, l.addr + second * WORD],
                    every_thread: all,
                });
            }
        }
        self.next = 0;
        !self.round.is_empty()
    }

    /// The threads the samples saw on the page of `addr` (empty: none
    /// known, every thread is watched).
    fn threads_seen_on_page(&self, addr: u64) -> Vec<u32> {
        let page = addr & !(self.page_size as u64 - 1);
        let mut tids: Vec<u32> = self
            .lines
            .iter()
            .filter(|l| l.addr & !(self.page_size as u64 - 1) == page)
            .flat_map(|l| l.tids.into_iter().filter(|t| *t != 0))
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// Watches `words` on the threads `seen` (every thread when empty).
    /// The window starts once every watchpoint is in: installing one in a
    /// running thread waits for its CPU (an interrupt each; about 30 ms
    /// each in an emulated guest), which is not watch time.
    fn open_window(&mut self, words: [u64; 2], seen: Vec<u32>) {
        let me = own_tid();
        let mut tids: Vec<u32> = match std::fs::read_dir("/proc/self/task") {
            Ok(d) => d
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|t| *t != me && (seen.is_empty() || seen.contains(t)))
                .collect(),
            Err(_) => return,
        };
        tids.sort_unstable();
        if tids.len() > MAX_THREADS {
            let turn = self.thread_turn % tids.len();
            tids.rotate_left(turn);
            tids.truncate(MAX_THREADS);
            self.thread_turn = turn + MAX_THREADS;
        }
        let kinds = [HW_BREAKPOINT_W, HW_BREAKPOINT_RW];
        let slots = 2 * words_per_window();
        for tid in tids {
            let mut w = Watched {
                tid,
                fds: [-1; 4],
                ids: [0; 4],
                ring: std::ptr::null_mut(),
            };
            for slot in 0..slots {
                let leader = if slot == 0 { -1 } else { w.fds[0] };
                match open_watch(tid, words[slot / 2], kinds[slot % 2], leader) {
                    Ok(fd) => {
                        w.fds[slot] = fd;
                        w.ids[slot] = sys::perf_id(fd).unwrap_or(0);
                    }
                    Err(e) => {
                        // No watchpoints at all here: say why, once, and stop.
                        if !self.opened_any && !matches!(e, libc::ESRCH | libc::ENOSPC) {
                            self.give_up(e, sys::monotonic_ns());
                            close_all(&w);
                            return;
                        }
                        break;
                    }
                }
            }
            if w.fds[..slots].iter().any(|fd| *fd < 0) || !attach_ring(&mut w, self.page_size) {
                close_all(&w);
                continue;
            }
            self.opened_any = true;
            // The whole group starts at once.
            ioctl(w.fds[0], IOC_ENABLE, 0);
            self.window.push(w);
        }
        self.window_words = words;
        self.window_start = sys::monotonic_ns();
        if self.window.is_empty() {
            // Every thread ended or had its debug registers taken: the
            // window is spent on nothing, so that the loop cannot spin.
            self.spent_ns += WINDOW_NS;
        }
    }

    fn give_up(&mut self, errno: i32, now: u64) {
        self.on = false;
        emit(&Record {
            kind: Kind::Refine,
            tid: 0,
            cpu: 0,
            node: -errno,
            flags: 0,
            addr: 0,
            size: 0,
            time_ns: now,
            aux: 0,
        });
    }

    /// Stops the window's watchpoints, writes what they counted (a Watch
    /// record per word, kind of access and CPU) and a Refine record per
    /// word watched.
    fn close_window(&mut self, now: u64) {
        if self.window.is_empty() {
            return;
        }
        let took = now.saturating_sub(self.window_start);
        self.spent_ns += took;
        let threads = self.window.len() as u32;
        // Every group stops at once, before its counts are read.
        for w in &self.window {
            ioctl(w.fds[0], IOC_DISABLE, 0);
        }
        for w in std::mem::take(&mut self.window) {
            // Every hit is a sample in the ring, read without a system call
            // (each call on a running thread's event interrupts its CPU);
            // a ring that filled up lost some, and the events' counts
            // are read instead, the samples sharing them out by CPU.
            let (cpus, full) = ring_cpus(&w, self.page_size);
            for (slot, by_cpu) in cpus.iter().enumerate() {
                let sampled: u64 = by_cpu.iter().map(|(_, n)| *n).sum();
                let hits = if full && sys::perf_id(w.fds[slot]) == Some(w.ids[slot]) {
                    read_count(w.fds[slot]).max(sampled)
                } else {
                    sampled
                };
                if hits == 0 {
                    continue;
                }
                let addr = self.window_words[slot / 2];
                if let Some(&i) = self.index.get(&(addr & !(LINE - 1))) {
                    self.lines[i].saw_thread(w.tid);
                }
                let flags = if slot % 2 == 0 { FLAG_WRITE } else { 0 };
                if flags == FLAG_WRITE {
                    // What the watch saw ranks the line: a read-modify-write
                    // samples as a read, the watch tells the write.
                    let nodes: Vec<u32> = by_cpu
                        .iter()
                        .filter_map(|(c, _)| self.node_of_cpu(*c))
                        .collect();
                    if let Some(l) = self.lines.iter_mut().find(|l| l.addr == addr & !(LINE - 1)) {
                        for n in nodes.into_iter().filter(|n| *n < 64) {
                            l.writers |= 1 << n;
                            l.nodes |= 1 << n;
                        }
                    }
                }
                let emit = |cpu: u32, n: u64| {
                    emit(&Record {
                        kind: Kind::Watch,
                        tid: w.tid,
                        cpu,
                        node: 0,
                        flags,
                        addr,
                        size: n,
                        time_ns: self.window_start,
                        aux: 0,
                    })
                };
                if sampled == 0 {
                    emit(u32::MAX, hits);
                    continue;
                }
                // The hits by CPU as the samples were (the same numbers
                // unless the ring filled and the count was read).
                let mut left = hits;
                for (k, (cpu, n)) in by_cpu.iter().enumerate() {
                    let share = if k + 1 == by_cpu.len() {
                        left
                    } else {
                        (hits as u128 * *n as u128 / sampled as u128) as u64
                    };
                    left -= share.min(left);
                    if share > 0 {
                        emit(*cpu, share);
                    }
                }
            }
            close_all(&w);
        }
        let page = self.window_words[0] as usize & !(self.page_size - 1);
        let node = match sys::page_state(page, self.page_size) {
            sys::PageState::Present(n) => n,
            sys::PageState::Absent => -1,
        };
        for addr in self.window_words.into_iter().filter(|a| *a != 0) {
            emit(&Record {
                kind: Kind::Refine,
                tid: 0,
                cpu: u32::MAX,
                node,
                flags: threads,
                addr,
                size: took,
                time_ns: self.window_start,
                aux: 0,
            });
        }
    }
}

/// Maps the ring of slot 0 and sends the other slots' samples to it.
fn attach_ring(w: &mut Watched, page_size: usize) -> bool {
    let len = page_size + RING_BYTES_DATA;
    // SAFETY: a shared mapping of a perf descriptor, as perf_event_open(2)
    // documents.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            w.fds[0],
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    w.ring = p as *mut u8;
    for slot in (0..4).filter(|s| w.fds[*s] >= 0) {
        if slot > 0 && ioctl(w.fds[slot], IOC_SET_OUTPUT, w.fds[0] as libc::c_ulong) != 0 {
            return false;
        }
        // Known again: the id the samples carry, and the event's.
        if sys::perf_id(w.fds[slot]) != Some(w.ids[slot]) {
            return false;
        }
    }
    true
}

fn close_all(w: &Watched) {
    if !w.ring.is_null() {
        // SAFETY: the mapping attach_ring made, of that length.
        unsafe { libc::munmap(w.ring as *mut libc::c_void, page_size() + RING_BYTES_DATA) };
    }
    // A number the program took over (it closed ours) stays its own.
    for (fd, id) in w.fds.into_iter().zip(w.ids).filter(|(fd, _)| *fd >= 0) {
        sys::close_event(fd, id);
    }
}

/// The samples in the thread's ring: per slot, (CPU, samples) pairs, and
/// whether the ring came near full (samples may have been lost).
fn ring_cpus(w: &Watched, page_size: usize) -> ([Vec<(u32, u64)>; 4], bool) {
    let mut out: [Vec<(u32, u64)>; 4] = Default::default();
    if w.ring.is_null() {
        return (out, false);
    }
    // SAFETY: the header page of a live mapping. The events still run:
    // what they write after this head is left unread (the fence pairs with
    // the kernel's release of the head).
    let (head, tail) = unsafe {
        let head = std::ptr::read_volatile(w.ring.add(DATA_HEAD_OFFSET) as *const u64);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let tail = std::ptr::read_volatile(w.ring.add(DATA_TAIL_OFFSET) as *const u64);
        (head, tail)
    };
    // SAFETY: the data area follows the header page, RING_BYTES_DATA long.
    let data = unsafe { std::slice::from_raw_parts(w.ring.add(page_size), RING_BYTES_DATA) };
    let byte = |pos: u64| data[(pos % RING_BYTES_DATA as u64) as usize];
    let read = |pos: u64, n: usize| -> u64 {
        let mut v = 0u64;
        for k in (0..n).rev() {
            v = (v << 8) | byte(pos + k as u64) as u64;
        }
        v
    };
    // What the ring still holds: its last RING_BYTES_DATA bytes at most
    // (an overrun ring starts mid-record: only whole records from the tail
    // the kernel kept are read).
    let full = head.saturating_sub(tail) + 256 >= RING_BYTES_DATA as u64;
    let mut pos = tail.max(head.saturating_sub(RING_BYTES_DATA as u64));
    if pos != tail {
        return (out, true);
    }
    while pos + 8 <= head {
        let kind = read(pos, 4) as u32;
        let size = read(pos + 6, 2);
        if size < 8 {
            break;
        }
        if kind == PERF_RECORD_SAMPLE && size >= 32 {
            let id = read(pos + 8, 8);
            let cpu = read(pos + 24, 4) as u32;
            if let Some(slot) = w.ids.iter().position(|i| *i == id) {
                match out[slot].iter_mut().find(|(c, _)| *c == cpu) {
                    Some(e) => e.1 += 1,
                    None => out[slot].push((cpu, 1)),
                }
            }
        }
        pos += size;
    }
    (out, full)
}

/// Words a refinement window watches: two (four debug registers, a write
/// and an access watch each), or one while the word counter holds two
/// registers of every thread ([`crate::words`]).
fn words_per_window() -> usize {
    if crate::words::running() {
        1
    } else {
        2
    }
}

/// Opens a dummy software event on this thread, kept open while
/// refining. The kernel turns its scheduler hooks for perf events on when
/// the first task event opens and off when the last closes, patching its
/// own code each time; every window would do both. Kept on, the code is
/// patched once (an emulated guest, QEMU TCG, was seen to crash on that
/// patching: "Oops: int3" in __schedule).
fn hold_perf_enabled() -> Option<i32> {
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_DUMMY: u64 = 9;
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: PerfEventAttr::SIZE,
        config: PERF_COUNT_SW_DUMMY,
        flags: ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV,
        ..Default::default()
    };
    sys::perf_event_open(&attr, 0).ok()
}

/// What one watchpoint hit costs the accessing thread, measured once on a
/// word of this thread (a Refine record with `cpu` 1: `size` ns a hit).
fn calibrate() {
    let mut word = std::hint::black_box(Box::new(0u64));
    let p: *mut u64 = &mut *word;
    let addr = p as u64;
    let Ok(fd) = open_watch(own_tid(), addr, HW_BREAKPOINT_W, -1) else {
        return;
    };
    ioctl(fd, IOC_ENABLE, 0);
    const HITS: u64 = 64;
    let t0 = sys::monotonic_ns();
    for k in 0..HITS {
        // SAFETY: p points to the boxed word, alive here.
        unsafe { std::ptr::write_volatile(p, k) };
    }
    let took = sys::monotonic_ns().saturating_sub(t0);
    let hits = read_count(fd);
    sys::close(fd);
    if hits == HITS {
        emit(&Record {
            kind: Kind::Refine,
            tid: 0,
            cpu: 1,
            node: 0,
            flags: 0,
            addr: 0,
            size: took / HITS,
            time_ns: sys::monotonic_ns(),
            aux: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refiner with the lines given (address, words the samples hit,
    /// threads they saw), as the samples would leave it.
    fn refiner(lines: &[(u64, u8, &[u32])]) -> Refiner {
        let mut r = Refiner::from_env(4096);
        for (i, (addr, words_seen, tids)) in lines.iter().enumerate() {
            let mut l = Line {
                addr: *addr,
                samples: 3,
                words_seen: *words_seen,
                ..Default::default()
            };
            for t in *tids {
                l.saw_thread(*t);
            }
            r.index.insert(*addr, i);
            r.lines.push(l);
        }
        r
    }

    #[test]
    fn a_lines_first_rounds_watch_every_word_on_every_thread_then_those_seen() {
        // The samples saw word 0 of the line, written by one thread only
        // (the one that leads to each armed page).
        let line = 0x5000_0000;
        let mut r = refiner(&[(line, 0b1, &[223])]);
        for round in 0..EVERY_WORD_ROUNDS {
            assert!(r.new_round());
            let words: Vec<u64> = r.round.iter().flat_map(|p| p.words).collect();
            assert_eq!(words.len(), 8, "round {round}: {:?}", r.round);
            // Word 0 first, then every other word of the line.
            assert_eq!(words[0], line);
            let mut sorted = words.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..8).map(|w| line + w * WORD).collect::<Vec<_>>());
            assert!(r.round.iter().all(|p| p.every_thread), "{:?}", r.round);
        }
        // Then the words the samples hit, on the threads seen there: the
        // sampled thread, and one a window found hitting the line.
        assert!(r.new_round());
        assert_eq!(
            r.round,
            [Pair {
                words: [line, line + WORD],
                every_thread: false
            }]
        );
        r.lines[0].saw_thread(225);
        r.lines[0].saw_thread(223);
        assert_eq!(r.threads_seen_on_page(line), [223, 225]);
    }

    #[test]
    fn a_line_finishes_its_every_word_rounds_behind_better_and_newer_lines() {
        // Two lines ranked above D (written from two nodes), D (written
        // from one, read from two), and ten newer lines no round watched
        // yet, each least watched in its turn.
        let d = 0x6000_0000;
        let mut lines: Vec<(u64, u8, &[u32])> =
            vec![(0x1000, 1, &[]), (0x2000, 1, &[]), (d, 1, &[])];
        lines.extend((0..10).map(|k| (0x10_0000 + k * 0x1000, 1u8, &[][..])));
        let mut r = refiner(&lines);
        for best in 0..2 {
            r.lines[best].writers = 0b11;
        }
        r.lines[2].writers = 0b1;
        r.lines[2].nodes = 0b11;
        let mut d_all = 0;
        for round in 0..EVERY_WORD_ROUNDS + 1 {
            assert!(r.new_round());
            // The best two and at most two more lines a round.
            let lines_in: std::collections::BTreeSet<u64> =
                r.round.iter().map(|p| p.words[0] & !(LINE - 1)).collect();
            assert!(lines_in.len() <= 4, "round {round}: {lines_in:x?}");
            let d_words: Vec<&Pair> = r
                .round
                .iter()
                .filter(|p| p.words[0] & !(LINE - 1) == d)
                .collect();
            if d_words.len() == 4 && d_words.iter().all(|p| p.every_thread) {
                d_all += 1;
            }
        }
        assert_eq!(d_all, EVERY_WORD_ROUNDS, "D's every-word rounds");
    }

    #[test]
    fn a_line_keeps_eight_threads_seen_at_most() {
        let mut l = Line::default();
        for t in 1..=10 {
            l.saw_thread(t);
        }
        l.saw_thread(3);
        assert_eq!(l.tids, [1, 2, 3, 4, 5, 6, 7, 8]);
    }
}
