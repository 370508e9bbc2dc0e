//! The records the library writes, one fixed-size binary record per event,
//! so that a signal handler can queue one with no allocation. `numalab
//! profile` reads them back with [`Record::decode`]. The kinds whose fields
//! change meaning have typed views in [`crate::events`]; every flag bit has
//! a named constant here.

/// The size of every record in bytes.
pub const RECORD_BYTES: usize = 48;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Kind {
    /// A sampled access: `addr` faulted on an armed page.
    Sample = 1,
    /// A tracked allocation: `addr`, `size` bytes.
    Alloc = 2,
    /// A tracked allocation was freed (or unmapped): `addr`, `size`.
    Free = 3,
    /// The library started in process `tid` (the pid); `size` is the page
    /// size, `addr` the tracking threshold in bytes, `node` the fixed rate
    /// (0: adaptive, see the Cost records), `cpu` the sampling window in
    /// ms (`u32::MAX`: the whole run), `flags` [`START_REFINING`] (half the
    /// pages are then armed region by region, see refine.rs),
    /// [`START_PMU`] (a memory-sampling PMU samples, no page armed),
    /// [`START_GO`] (the program runs Go's runtime, no page armed: its
    /// system calls bypass libc). Typed: [`crate::events::Start`].
    Start = 4,
    /// Pages armed and samples taken so far (`addr`, `size`), written at
    /// exit; `node` records lost to a full queue, `flags` samples of
    /// threads outside `--threads`, left out, `aux` times the program
    /// closed or took over the records' file (opened again each time),
    /// `cpu` system calls that found the busy table full (u32::MAX: a
    /// library from before it said). Typed: [`crate::events::Totals`].
    Totals = 5,
    /// Pages of the region at `addr` on memory node `node` (`size` pages;
    /// node -1: not present), from `move_pages` when the region is freed
    /// or at exit (`cpu` u32::MAX), or in the sampler's snapshot number
    /// `cpu`, taken at `time_ns`.
    PageNodes = 6,
    /// One frame of the call stack of the allocation at `addr`: `size` is
    /// the frame's depth (0: the caller of malloc), `time_ns` its address.
    Frame = 7,
    /// A sampled thread's start, and its first sample: `size` is how many
    /// CPUs its affinity allows, `addr` the first of them (pinned when
    /// `size` is 1); `node` its ordinal (0 the main thread, then in
    /// creation order; -1 unknown). The later record says it last.
    Thread = 8,
    /// What sampling cost so far (written every second and at exit):
    /// `addr` ns spent on it, `size` ns of the program's own CPU time,
    /// `node` the rate now (pages armed a second), `flags` the kernel's
    /// ns per sampled fault as measured at start, `cpu` the target share
    /// in millionths (`u32::MAX`: a fixed rate).
    Cost = 9,
    /// A writable segment of a loaded ELF object (.data, .bss), written
    /// at exit: `addr`, `size` bytes; `time_ns` is the object's load bias
    /// (its symbols' values are relative to it).
    Static = 10,
    /// Thread `tid`'s stack: `addr`, `size` bytes (written as it starts);
    /// `aux`: its ordinal + 1 (0: unknown), so that a thread no page
    /// sample found still has its number.
    Stack = 11,
    /// `size` pages from `addr` on memory node `node` (-1: not present,
    /// -3: not looked up, the range was too scattered), located at
    /// `time_ns`: the page map of the static segment or stack written
    /// just before.
    PageRun = 12,
    /// A first touch: `addr` faulted on a page that was not present when
    /// the sampler armed it (`tid`, `cpu`, `flags` as for a Sample). The
    /// page's node is in the Touched record that follows.
    FirstTouch = 13,
    /// Where the page at `addr` was put after its first touch: `node`, or
    /// a negative errno (-ENOENT still absent, -EFAULT the zero page: a
    /// read of memory never written).
    Touched = 14,
    /// Thread `tid` ended (or the process exits with it running): `addr`
    /// is how often the kernel moved it between CPUs (`u64::MAX`: the
    /// kernel keeps no such count).
    ThreadEnd = 15,
    /// Watchpoint hits (refinement): `size` hits by thread `tid` on CPU
    /// `cpu` (`u32::MAX`: not known) on the 8-byte word at `addr`, in the
    /// window that started at `time_ns`; `flags` FLAG_WRITE: writes,
    /// else every access (reads and writes).
    Watch = 16,
    /// Refinement's bookkeeping, by `cpu`: `u32::MAX`, the word at `addr`
    /// was watched for `size` ns on `flags` threads from `time_ns`, its
    /// page on node `node` (-1: not present) at the window's end; 1,
    /// one hit costs the accessing thread `size` ns (measured once); 0,
    /// refinement is not available here (`node`: minus the errno of
    /// `perf_event_open`).
    Refine = 17,
    /// PMU sampling's end (`NUMALAB_PROFILE_PMU`): the kernel refused the
    /// event on `tid` threads (`node`: the first refusal's errno), `cpu`
    /// threads were past the library's table, `addr` samples the kernel
    /// dropped (ring full), `size` samples fell outside every tracked
    /// region.
    Pmu = 18,
    /// A sampled allocation below the tracking threshold (see the
    /// library's `small`): `size` bytes at `addr` by thread `tid`, its
    /// page on `node` (-1: not present), `flags` as an Alloc's; `cpu` the
    /// sampling mean in KiB; `time_ns` the key of its Frame records.
    SmallAlloc = 19,
    /// A plan's policy was applied (`numalab run --plan`, see the
    /// library's `plan`): entry `node` to the `size` bytes at `addr`
    /// (page aligned), `flags` of its `mbind` calls refused.
    Planned = 20,
    /// Pages of the planned region at `addr` on node `node` (`size` pages;
    /// -1 not present, -2 beyond the nodes counted), when it is freed or
    /// at exit.
    PlanPages = 21,
    /// The plan's end, at exit: `addr` the program's own `mbind` calls
    /// skipped on planned regions, `size` the plan's `mbind` calls the
    /// kernel refused, `node` the first refusal's errno, `flags` the ranges
    /// interleaved page by page past the stripe budget, `cpu` the small
    /// allocations selected that went to the heap (their pool was full),
    /// `aux` the times the program closed or took the records' descriptor.
    PlanEnd = 22,
    /// Word counts (see the library's `words`): thread `tid` accessed the
    /// 8-byte word at `addr` an estimated `size` times in one window of
    /// its CPU time that ended at `time_ns` on CPU `cpu`, the word's page
    /// on node `node` (-1: not present) at the window's end. `aux` is the
    /// tracked pages the word was drawn from; `flags` carries
    /// [`WORD_CAPPED`], [`WORD_MOVED`], and the slots and duty the weight
    /// needs ([`word_slots`], [`word_duty`]). Every slot of a watched
    /// window is written, with or without an access (`size` 0, `node`
    /// -1): the cells of one window share `tid` and `time_ns`.
    WordCount = 23,
    /// The word counter's totals (at exit, and when it cannot start): `addr`
    /// windows watched, `size` slot-windows (cells) among them, `cpu` the
    /// threads watched, `flags` threads whose watch was lost (their
    /// descriptors closed or refused), `node` minus the errno when the
    /// counter is unavailable (0: it ran), `aux` the ns one counted access
    /// costs (measured at start), `time_ns` the ns its windows' turns took.
    WordTotals = 24,
    /// Process `tid` was forked from process `addr` (written by the child
    /// as it starts). A forked child has no sampler thread: nothing of it
    /// is sampled unless it execs, which starts the library again (a
    /// Start record of the same pid).
    Forked = 25,
    /// Thread `tid`'s name as the kernel has it (`comm`, at most 15
    /// bytes, NUL-padded): bytes 0–7 in `addr`, 8–15 in `size`, little
    /// endian. Written when the sampler saves the memory map and at exit;
    /// the last one read wins (a program names its threads after they
    /// start).
    ThreadName = 26,
    /// Thread `tid`, ordinal `node` (0 the main thread, then in creation
    /// order), as `numalab run --pin` placed it as it started: pinned to
    /// CPU `cpu` (`u32::MAX`: left alone, [`PIN_SKIPPED`] in `flags`),
    /// `addr` the errno of `sched_setaffinity` (0: done), `size` the CPU
    /// it ran on right after (`getcpu`; `u64::MAX`: not known), `aux` the
    /// process id (a child process, or a program that execs another, pins
    /// its own threads from the list's start again).
    Pinned = 27,
    /// What a watching thread's context switches cost (written with the
    /// WordTotals): `aux` the ns a switch costs more while the thread's
    /// watchpoints are on (0: not measured, or nothing measurable; `flags`
    /// bit 0: measured), `addr` the switches of watching threads while
    /// their windows watched, `size` the ns charged for them. Typed:
    /// [`crate::events::WordSurcharge`].
    WordSwitches = 28,
    /// The same for watching threads' page faults (`aux` the ns a fault
    /// costs more, `addr` the faults). Typed:
    /// [`crate::events::WordSurcharge`].
    WordFaults = 29,
    /// What the switch price of WordSwitches rests on (written with it):
    /// the sums of one side's windows that switched often, watched
    /// (`flags` bit 0) or skipped. `aux` the windows, `addr` their
    /// switches, `size` their system time in ns (two's complement: a
    /// watched side's is net of what is charged apart and may be
    /// negative), `time_ns` their CPU time in ns. Typed:
    /// [`crate::events::SwitchWindows`].
    SwitchWindows = 30,
}

/// Set in a Pinned's `flags` when `--skip` left the thread alone (a
/// runtime's helper thread): it keeps the process's CPUs.
pub const PIN_SKIPPED: u32 = 1;

/// A thread name's bytes in a ThreadName record's `addr` and `size`.
pub fn name_words(name: &[u8]) -> (u64, u64) {
    let mut b = [0u8; 16];
    let n = name.len().min(15);
    b[..n].copy_from_slice(&name[..n]);
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(w)
    };
    (word(0), word(8))
}

/// The name a ThreadName record carries.
pub fn name_of(r: &Record) -> String {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&r.addr.to_le_bytes());
    b[8..].copy_from_slice(&r.size.to_le_bytes());
    let end = b.iter().position(|c| *c == 0).unwrap_or(16);
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Set in a WordCount's `flags` when the word was hit so often that its
/// event stopped counting before the window's end (the count is scaled to
/// the whole window by the share of it the event ran).
pub const WORD_CAPPED: u32 = 1;
/// Set in a WordCount's `flags` when the thread's CPU was on another node
/// at the window's end than at its start: the accesses' node is unknown.
pub const WORD_MOVED: u32 = 2;
/// Where a WordCount's `flags` keep the thread's watch slots (1-4) and
/// the window's duty exponent d (a window is watched with probability
/// 2^-d).
const WORD_SLOTS_SHIFT: u32 = 8;
const WORD_DUTY_SHIFT: u32 = 12;

/// A WordCount's `flags` from its bits, slots and duty exponent.
pub fn word_flags(bits: u32, slots: u32, duty: u32) -> u32 {
    bits | (slots.min(15) << WORD_SLOTS_SHIFT) | (duty.min(15) << WORD_DUTY_SHIFT)
}

/// The thread's watch slots when the WordCount was taken.
pub fn word_slots(flags: u32) -> u32 {
    (flags >> WORD_SLOTS_SHIFT) & 15
}

/// The window's duty exponent: it was watched with probability 2^-d.
pub fn word_duty(flags: u32) -> u32 {
    (flags >> WORD_DUTY_SHIFT) & 15
}

/// The high bit of a SmallAlloc's key (`time_ns`, and its Frame records'
/// `addr`): no user-space address has it.
pub const KEY_BIT_SMALL: u64 = 1 << 63;

/// Set in `flags` when the sampled access was a write.
pub const FLAG_WRITE: u32 = 1;
/// Set in `flags` when the access type is unknown (not x86_64).
pub const FLAG_ACCESS_UNKNOWN: u32 = 2;
/// Set in a Sample's `flags` when the page was armed against writes only
/// (refinement's probe of a line's page): it tells who writes there, and
/// is no sample of the page's accesses.
pub const FLAG_WRITE_PROBE: u32 = 4;
/// Set in a Sample's `flags` when its page was armed with the whole
/// transparent huge page around it (protecting one page of a huge page
/// would split it, and the program would run on small pages after).
pub const FLAG_HUGE: u32 = 8;
/// Set in a Sample's `flags` when a memory-sampling PMU took it (its
/// `size`: the access's latency in cycles where the PMU gives one).
pub const FLAG_PMU: u32 = 16;

/// Set in an Alloc's (or SmallAlloc's) `flags` when the allocation is a
/// mapping (`mmap`), not the heap.
pub const ALLOC_MMAP: u32 = 1;
/// Set in an Alloc's `flags` when the mapping maps a file.
pub const ALLOC_FILE: u32 = 2;
/// Set in an Alloc's `flags` when the mapping is shared (file or
/// anonymous).
pub const ALLOC_SHARED: u32 = 4;

/// Set in a Start's `flags` when refinement is on: half the pages are
/// armed region by region.
pub const START_REFINING: u32 = 1;
/// Set in a Start's `flags` when a memory-sampling PMU samples: no page
/// is armed.
pub const START_PMU: u32 = 2;
/// Set in a Start's `flags` when the program runs Go's runtime: no page
/// is armed (its system calls bypass libc).
pub const START_GO: u32 = 4;

/// One event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    /// Thread id (`gettid`).
    pub tid: u32,
    /// CPU the thread ran on when it faulted (`getcpu`), or `u32::MAX`.
    pub cpu: u32,
    /// Memory node of the page (`move_pages`), or -1 when unknown.
    pub node: i32,
    pub flags: u32,
    /// A kind's fourth number (WordCount, WordTotals); 0 elsewhere.
    pub aux: u32,
    pub addr: u64,
    pub size: u64,
    /// CLOCK_MONOTONIC nanoseconds.
    pub time_ns: u64,
}

impl Record {
    /// The record as bytes, little endian.
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..4].copy_from_slice(&(self.kind as u32).to_le_bytes());
        b[4..8].copy_from_slice(&self.tid.to_le_bytes());
        b[8..12].copy_from_slice(&self.cpu.to_le_bytes());
        b[12..16].copy_from_slice(&self.node.to_le_bytes());
        b[16..20].copy_from_slice(&self.flags.to_le_bytes());
        b[20..24].copy_from_slice(&self.aux.to_le_bytes());
        b[24..32].copy_from_slice(&self.addr.to_le_bytes());
        b[32..40].copy_from_slice(&self.size.to_le_bytes());
        b[40..48].copy_from_slice(&self.time_ns.to_le_bytes());
        b
    }

    /// A record from bytes; `None` for an unknown kind.
    pub fn decode(b: &[u8; RECORD_BYTES]) -> Option<Record> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let kind = match u32_at(0) {
            1 => Kind::Sample,
            2 => Kind::Alloc,
            3 => Kind::Free,
            4 => Kind::Start,
            5 => Kind::Totals,
            6 => Kind::PageNodes,
            7 => Kind::Frame,
            8 => Kind::Thread,
            9 => Kind::Cost,
            10 => Kind::Static,
            11 => Kind::Stack,
            12 => Kind::PageRun,
            13 => Kind::FirstTouch,
            14 => Kind::Touched,
            15 => Kind::ThreadEnd,
            16 => Kind::Watch,
            17 => Kind::Refine,
            18 => Kind::Pmu,
            19 => Kind::SmallAlloc,
            20 => Kind::Planned,
            21 => Kind::PlanPages,
            22 => Kind::PlanEnd,
            23 => Kind::WordCount,
            24 => Kind::WordTotals,
            25 => Kind::Forked,
            26 => Kind::ThreadName,
            27 => Kind::Pinned,
            28 => Kind::WordSwitches,
            29 => Kind::WordFaults,
            30 => Kind::SwitchWindows,
            _ => return None,
        };
        Some(Record {
            kind,
            tid: u32_at(4),
            cpu: u32_at(8),
            node: u32_at(12) as i32,
            flags: u32_at(16),
            addr: u64_at(24),
            size: u64_at(32),
            time_ns: u64_at(40),
            aux: u32_at(20),
        })
    }

    /// Every whole record of `bytes`, in order; unknown kinds are skipped.
    pub fn decode_all(bytes: &[u8]) -> Vec<Record> {
        bytes
            .chunks_exact(RECORD_BYTES)
            .filter_map(|c| {
                let mut a = [0u8; RECORD_BYTES];
                a.copy_from_slice(c);
                Record::decode(&a)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_unknown_kinds_are_skipped() {
        let r = Record {
            kind: Kind::Sample,
            tid: 4242,
            cpu: 7,
            node: -1,
            flags: FLAG_WRITE,
            addr: 0x7f00_1234_5000,
            size: 4096,
            time_ns: 123_456_789,
            aux: 77,
        };
        let mut bytes = r.encode().to_vec();
        bytes.extend([9u8; RECORD_BYTES]);
        bytes.extend(r.encode());
        bytes.extend([0u8; 5]);
        assert_eq!(Record::decode_all(&bytes), vec![r, r]);
    }

    #[test]
    fn word_flags_keep_bits_slots_and_duty_apart() {
        let f = word_flags(WORD_CAPPED | WORD_MOVED, 4, 3);
        assert_eq!(f & 3, 3);
        assert_eq!(word_slots(f), 4);
        assert_eq!(word_duty(f), 3);
        assert_eq!(word_slots(word_flags(0, 2, 0)), 2);
        assert_eq!(word_duty(word_flags(WORD_CAPPED, 1, 15)), 15);
    }

    #[test]
    fn flag_bits_of_one_kind_are_distinct() {
        let sample = [
            FLAG_WRITE,
            FLAG_ACCESS_UNKNOWN,
            FLAG_WRITE_PROBE,
            FLAG_HUGE,
            FLAG_PMU,
        ];
        for set in [
            &sample[..],
            &[ALLOC_MMAP, ALLOC_FILE, ALLOC_SHARED],
            &[START_REFINING, START_PMU, START_GO],
        ] {
            let all = set.iter().fold(0, |a, b| a | b);
            assert_eq!(all.count_ones() as usize, set.len(), "{set:?}");
            assert!(set.iter().all(|b| b.count_ones() == 1), "{set:?}");
        }
    }

    #[test]
    fn thread_names_round_trip_and_are_cut_at_15_bytes() {
        let (addr, size) = name_words(b"worker-0123456789");
        let r = Record {
            kind: Kind::ThreadName,
            tid: 1,
            cpu: 0,
            node: 0,
            flags: 0,
            aux: 0,
            addr,
            size,
            time_ns: 0,
        };
        assert_eq!(name_of(&r), "worker-01234567");
        let (addr, size) = name_words(b"main");
        assert_eq!(name_of(&Record { addr, size, ..r }), "main");
    }
}
