//! Typed views of the records whose fields do not mean what their names
//! say: each is made from a [`Record`] of its kind and back, so that the
//! library writes and the engine reads the same field for the same thing.
//! (Kinds whose fields mean what they say — a Sample's `addr`, `cpu` and
//! `node` — are read from [`Record`] directly.)

use crate::record::{Kind, Record, PIN_SKIPPED, START_GO, START_PMU, START_REFINING};

/// The library started ([`Kind::Start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub pid: u32,
    pub page_size: u64,
    /// Allocations of at least this many bytes are tracked one by one.
    pub min_bytes: u64,
    /// Pages armed a second, fixed; `None`: the rate adapts (the Cost
    /// records say it).
    pub fixed_rate: Option<u32>,
    /// The sampling window in ms; `None`: the whole run.
    pub window_ms: Option<u32>,
    /// Refinement is on: half the pages are armed region by region.
    pub refining: bool,
    /// A memory-sampling PMU samples: no page is armed.
    pub pmu: bool,
    /// The program runs Go's runtime: no page is armed.
    pub go_runtime: bool,
    pub time_ns: u64,
}

impl Start {
    pub fn from_record(r: &Record) -> Option<Start> {
        (r.kind == Kind::Start).then(|| Start {
            pid: r.tid,
            page_size: r.size,
            min_bytes: r.addr,
            fixed_rate: (r.node > 0).then_some(r.node as u32),
            window_ms: (r.cpu != u32::MAX).then_some(r.cpu),
            refining: r.flags & START_REFINING != 0,
            pmu: r.flags & START_PMU != 0,
            go_runtime: r.flags & START_GO != 0,
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        let bit = |on: bool, b: u32| if on { b } else { 0 };
        Record {
            kind: Kind::Start,
            tid: self.pid,
            cpu: self.window_ms.map_or(u32::MAX, |w| w.min(u32::MAX - 1)),
            node: self.fixed_rate.map_or(0, |r| r.min(i32::MAX as u32) as i32),
            flags: bit(self.refining, START_REFINING)
                | bit(self.pmu, START_PMU)
                | bit(self.go_runtime, START_GO),
            aux: 0,
            addr: self.min_bytes,
            size: self.page_size,
            time_ns: self.time_ns,
        }
    }
}

/// System calls with a buffer the library can see in the kernel at once
/// (its table of busy buffers): past them, while one lasts, it arms no
/// page, and [`Totals::busy_table_full`] counts the calls.
pub const BUSY_TABLE_SLOTS: usize = 4096;

/// The library's totals at exit ([`Kind::Totals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub tid: u32,
    pub pages_armed: u64,
    pub samples: u64,
    /// Records lost to a full queue.
    pub lost_records: u32,
    /// Samples of threads outside `--threads`, left out.
    pub other_thread_samples: u32,
    /// Times the program closed or took over the records' file.
    pub channel_reopened: u32,
    /// System calls that found the library's table of busy buffers full
    /// (more calls blocked in the kernel at once than it holds): while one
    /// lasted, no page was armed. `None`: a library from before it said.
    pub busy_table_full: Option<u32>,
    pub time_ns: u64,
}

impl Totals {
    pub fn from_record(r: &Record) -> Option<Totals> {
        (r.kind == Kind::Totals).then(|| Totals {
            tid: r.tid,
            pages_armed: r.addr,
            samples: r.size,
            lost_records: r.node.max(0) as u32,
            other_thread_samples: r.flags,
            channel_reopened: r.aux,
            busy_table_full: (r.cpu != u32::MAX).then_some(r.cpu),
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::Totals,
            tid: self.tid,
            cpu: self
                .busy_table_full
                .map_or(u32::MAX, |n| n.min(u32::MAX - 1)),
            node: self.lost_records.min(i32::MAX as u32) as i32,
            flags: self.other_thread_samples,
            aux: self.channel_reopened,
            addr: self.pages_armed,
            size: self.samples,
            time_ns: self.time_ns,
        }
    }
}

/// What sampling cost so far ([`Kind::Cost`], every second and at exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub tid: u32,
    /// ns spent on sampling.
    pub spent_ns: u64,
    /// ns of the program's own CPU time.
    pub program_ns: u64,
    /// The rate now, pages armed a second.
    pub rate: u32,
    /// The kernel's ns per sampled fault, as measured at start.
    pub kernel_ns_per_fault: u32,
    /// The target share of the program's CPU time in millionths; `None`:
    /// a fixed rate.
    pub target_ppm: Option<u32>,
    /// How many threads ran in step, in thousandths (see the library's
    /// `cost::in_step`): the controller kept the cost to the target over
    /// it. `None`: a library before it was measured (0 in the record).
    pub in_step_milli: Option<u32>,
    pub time_ns: u64,
}

impl Cost {
    pub fn from_record(r: &Record) -> Option<Cost> {
        (r.kind == Kind::Cost).then(|| Cost {
            tid: r.tid,
            spent_ns: r.addr,
            program_ns: r.size,
            rate: r.node.max(0) as u32,
            kernel_ns_per_fault: r.flags,
            target_ppm: (r.cpu != u32::MAX).then_some(r.cpu),
            in_step_milli: (r.aux != 0).then_some(r.aux),
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::Cost,
            tid: self.tid,
            cpu: self.target_ppm.map_or(u32::MAX, |t| t.min(u32::MAX - 1)),
            node: self.rate.min(i32::MAX as u32) as i32,
            flags: self.kernel_ns_per_fault,
            aux: self.in_step_milli.unwrap_or(0),
            addr: self.spent_ns,
            size: self.program_ns,
            time_ns: self.time_ns,
        }
    }
}

/// One frame of an allocation's call stack ([`Kind::Frame`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub tid: u32,
    /// The allocation's key: its address, or a small allocation's key
    /// (with [`crate::record::KEY_BIT_SMALL`]).
    pub key: u64,
    /// 0: the caller of malloc.
    pub depth: u64,
    /// The frame's return address.
    pub pc: u64,
}

impl Frame {
    pub fn from_record(r: &Record) -> Option<Frame> {
        (r.kind == Kind::Frame).then_some(Frame {
            tid: r.tid,
            key: r.addr,
            depth: r.size,
            pc: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::Frame,
            tid: self.tid,
            cpu: u32::MAX,
            node: -1,
            flags: 0,
            aux: 0,
            addr: self.key,
            size: self.depth,
            time_ns: self.pc,
        }
    }
}

/// A sampled allocation below the tracking threshold
/// ([`Kind::SmallAlloc`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmallAlloc {
    pub tid: u32,
    pub addr: u64,
    pub size: u64,
    /// Its page's node; -1: not present.
    pub node: i32,
    /// As an Alloc's ([`crate::record::ALLOC_MMAP`]).
    pub flags: u32,
    /// The sampling mean in bytes (one draw per this many bytes
    /// allocated), kept to the KiB.
    pub mean_bytes: u64,
    /// The key of its Frame records.
    pub key: u64,
}

impl SmallAlloc {
    pub fn from_record(r: &Record) -> Option<SmallAlloc> {
        (r.kind == Kind::SmallAlloc).then(|| SmallAlloc {
            tid: r.tid,
            addr: r.addr,
            size: r.size,
            node: r.node,
            flags: r.flags,
            mean_bytes: r.cpu as u64 * 1024,
            key: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::SmallAlloc,
            tid: self.tid,
            cpu: (self.mean_bytes >> 10).min(u32::MAX as u64) as u32,
            node: self.node,
            flags: self.flags,
            aux: 0,
            addr: self.addr,
            size: self.size,
            time_ns: self.key,
        }
    }
}

/// PMU sampling's end ([`Kind::Pmu`], at exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmuEnd {
    /// Threads on which the kernel refused the event.
    pub refused_threads: u32,
    /// The first refusal's errno (0: none).
    pub first_errno: i32,
    /// Threads past the library's table, not sampled.
    pub untracked_threads: u32,
    /// Samples the kernel dropped (a ring was full).
    pub lost_samples: u64,
    /// Samples outside every tracked region.
    pub outside_samples: u64,
    pub time_ns: u64,
}

impl PmuEnd {
    pub fn from_record(r: &Record) -> Option<PmuEnd> {
        (r.kind == Kind::Pmu).then_some(PmuEnd {
            refused_threads: r.tid,
            first_errno: r.node,
            untracked_threads: r.cpu,
            lost_samples: r.addr,
            outside_samples: r.size,
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::Pmu,
            tid: self.refused_threads,
            cpu: self.untracked_threads,
            node: self.first_errno,
            flags: 0,
            aux: 0,
            addr: self.lost_samples,
            size: self.outside_samples,
            time_ns: self.time_ns,
        }
    }
}

/// A plan's end in one process ([`Kind::PlanEnd`], at exit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanEnd {
    pub tid: u32,
    /// The program's own `mbind` calls skipped on planned regions.
    pub program_mbinds_skipped: u64,
    /// The plan's `mbind` calls the kernel refused.
    pub refused: u64,
    /// The first refusal's errno.
    pub first_errno: i32,
    /// Ranges interleaved page by page past the stripe budget.
    pub stripes_folded: u32,
    /// Small allocations selected that went to the heap (their pool was
    /// full); `None`: not counted.
    pub small_spilled: Option<u32>,
    /// Times the program closed or took the records' descriptor.
    pub channel_reopened: u32,
    pub time_ns: u64,
}

impl PlanEnd {
    pub fn from_record(r: &Record) -> Option<PlanEnd> {
        (r.kind == Kind::PlanEnd).then_some(PlanEnd {
            tid: r.tid,
            program_mbinds_skipped: r.addr,
            refused: r.size,
            first_errno: r.node,
            stripes_folded: r.flags,
            small_spilled: (r.cpu != u32::MAX).then_some(r.cpu),
            channel_reopened: r.aux,
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::PlanEnd,
            tid: self.tid,
            cpu: self.small_spilled.map_or(u32::MAX, |s| s.min(u32::MAX - 1)),
            node: self.first_errno,
            flags: self.stripes_folded,
            aux: self.channel_reopened,
            addr: self.program_mbinds_skipped,
            size: self.refused,
            time_ns: self.time_ns,
        }
    }
}

/// A thread placed by `numalab run --pin` ([`Kind::Pinned`], as it
/// started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    /// The process (each process pins its own threads).
    pub pid: u32,
    pub tid: u32,
    /// 0 the main thread, then in creation order.
    pub ordinal: u32,
    /// The CPU it was pinned to; `None`: `--skip` left it alone.
    pub cpu: Option<u32>,
    /// The errno of `sched_setaffinity` (0: done).
    pub errno: i32,
    /// The CPU it ran on right after; `None`: not known.
    pub ran_on: Option<u32>,
    pub time_ns: u64,
}

impl Pinned {
    pub fn from_record(r: &Record) -> Option<Pinned> {
        (r.kind == Kind::Pinned).then_some(Pinned {
            pid: r.aux,
            tid: r.tid,
            ordinal: r.node.max(0) as u32,
            cpu: (r.flags & PIN_SKIPPED == 0 && r.cpu != u32::MAX).then_some(r.cpu),
            errno: r.addr.min(i32::MAX as u64) as i32,
            ran_on: u32::try_from(r.size).ok().filter(|c| *c != u32::MAX),
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::Pinned,
            tid: self.tid,
            cpu: self.cpu.unwrap_or(u32::MAX),
            node: self.ordinal.min(i32::MAX as u32) as i32,
            flags: if self.cpu.is_none() { PIN_SKIPPED } else { 0 },
            aux: self.pid,
            addr: self.errno.max(0) as u64,
            size: self.ran_on.map_or(u64::MAX, u64::from),
            time_ns: self.time_ns,
        }
    }
}

/// The word counter's totals ([`Kind::WordTotals`], at exit, or when it
/// cannot start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WordTotals {
    pub tid: u32,
    /// Windows watched.
    pub windows: u64,
    /// Slot-windows (cells) among them.
    pub cells: u64,
    /// Threads watched.
    pub threads: u32,
    /// Threads whose watch was lost (descriptors closed or refused).
    pub threads_lost: u32,
    /// Minus the errno when the counter is unavailable (0: it ran).
    pub unavailable: i32,
    /// ns one counted access costs (measured at start).
    pub ns_per_access: u32,
    /// ns the windows' turns took.
    pub turns_ns: u64,
}

impl WordTotals {
    pub fn from_record(r: &Record) -> Option<WordTotals> {
        (r.kind == Kind::WordTotals).then_some(WordTotals {
            tid: r.tid,
            windows: r.addr,
            cells: r.size,
            threads: r.cpu,
            threads_lost: r.flags,
            unavailable: r.node,
            ns_per_access: r.aux,
            turns_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::WordTotals,
            tid: self.tid,
            cpu: self.threads,
            node: self.unavailable,
            flags: self.threads_lost,
            aux: self.ns_per_access,
            addr: self.windows,
            size: self.cells,
            time_ns: self.turns_ns,
        }
    }
}

/// What watching threads pay more for one kind of event while their
/// watchpoints are on ([`Kind::WordSwitches`], [`Kind::WordFaults`]): on a
/// virtual machine a thread whose debug registers are armed pays several
/// µs more a context switch (measured 1.4–10 µs here, against 12 µs a
/// counted access), which a program that blocks often (a barrier, a
/// lock, a server's wait) pays thousands of times a second, and about 1
/// µs more a page fault (1.6 µs a fault unarmed, 2.6 µs armed, on this
/// host's VM), which a program that touches new memory pays once a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WordSurcharge {
    /// Which events: [`Kind::WordSwitches`] or [`Kind::WordFaults`].
    pub events_are: Kind,
    pub tid: u32,
    /// ns an event costs more while the watchpoints are on (0 where
    /// `measured` is false, or where nothing more was measurable).
    pub ns_each: u32,
    /// What an event took in a skipped window, where the cost was measured
    /// against those (a switch's system time; 0: not measured so). The
    /// record's `cpu` field.
    pub unwatched_ns_each: u32,
    /// Whether that cost was measured (the library measures it once the
    /// watched events are many; the record's flag bit 0).
    pub measured: bool,
    /// Events of threads while their windows watched.
    pub events: u64,
    /// ns charged for them.
    pub charged_ns: u64,
    pub time_ns: u64,
}

impl WordSurcharge {
    pub fn from_record(r: &Record) -> Option<WordSurcharge> {
        matches!(r.kind, Kind::WordSwitches | Kind::WordFaults).then_some(WordSurcharge {
            events_are: r.kind,
            tid: r.tid,
            ns_each: r.aux,
            unwatched_ns_each: r.cpu,
            // Records before the flag: a cost above 0 was measured.
            measured: r.flags & 1 != 0 || r.aux > 0,
            events: r.addr,
            charged_ns: r.size,
            time_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: self.events_are,
            tid: self.tid,
            cpu: self.unwatched_ns_each,
            node: 0,
            flags: u32::from(self.measured),
            aux: self.ns_each,
            addr: self.events,
            size: self.charged_ns,
            time_ns: self.time_ns,
        }
    }
}

/// The sums of one side of the comparison the switch price comes from
/// ([`Kind::SwitchWindows`]): the windows, watched or skipped, whose
/// thread blocked often in them, with their switches, system time and
/// CPU time. The price is the watched side's system time per switch less
/// the skipped side's; these say how much evidence it rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchWindows {
    pub tid: u32,
    pub watched: bool,
    pub windows: u32,
    pub switches: u64,
    /// System time in ns; a watched side's is net of what is charged
    /// apart (its counted accesses' traps, its faults' surcharge), so it
    /// may be below 0.
    pub sys_ns: i64,
    pub cpu_ns: u64,
}

impl SwitchWindows {
    pub fn from_record(r: &Record) -> Option<SwitchWindows> {
        (r.kind == Kind::SwitchWindows).then_some(SwitchWindows {
            tid: r.tid,
            watched: r.flags & 1 != 0,
            windows: r.aux,
            switches: r.addr,
            sys_ns: r.size as i64,
            cpu_ns: r.time_ns,
        })
    }

    pub fn to_record(&self) -> Record {
        Record {
            kind: Kind::SwitchWindows,
            tid: self.tid,
            cpu: u32::MAX,
            node: 0,
            flags: u32::from(self.watched),
            aux: self.windows,
            addr: self.switches,
            size: self.sys_ns as u64,
            time_ns: self.cpu_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::KEY_BIT_SMALL;

    #[test]
    fn typed_views_round_trip_through_the_wire_format() {
        let start = Start {
            pid: 4242,
            page_size: 4096,
            min_bytes: 65536,
            fixed_rate: None,
            window_ms: Some(1500),
            refining: false,
            pmu: true,
            go_runtime: true,
            time_ns: 7,
        };
        let r = start.to_record();
        assert_eq!((r.node, r.cpu, r.flags), (0, 1500, START_PMU | START_GO));
        let back = Record::decode(&r.encode()).unwrap();
        assert_eq!(Start::from_record(&back), Some(start));
        let fixed = Start {
            fixed_rate: Some(20_000),
            window_ms: None,
            refining: true,
            pmu: false,
            go_runtime: false,
            ..start
        };
        let r = fixed.to_record();
        assert_eq!((r.node, r.cpu, r.flags), (20_000, u32::MAX, START_REFINING));
        assert_eq!(Start::from_record(&r), Some(fixed));

        let totals = Totals {
            tid: 1,
            pages_armed: 900,
            samples: 812,
            lost_records: 3,
            other_thread_samples: 4,
            channel_reopened: 2,
            busy_table_full: Some(5),
            time_ns: 9,
        };
        assert_eq!(Totals::from_record(&totals.to_record()), Some(totals));
        // An older library's record (cpu u32::MAX) says nothing of the
        // busy table; a count never reads as that.
        let old = Totals {
            busy_table_full: None,
            ..totals
        };
        assert_eq!(old.to_record().cpu, u32::MAX);
        assert_eq!(Totals::from_record(&old.to_record()), Some(old));
        let most = Totals {
            busy_table_full: Some(u32::MAX),
            ..totals
        };
        assert_eq!(
            Totals::from_record(&most.to_record())
                .unwrap()
                .busy_table_full,
            Some(u32::MAX - 1)
        );
        let cost = Cost {
            tid: 1,
            spent_ns: 3_000_000,
            program_ns: 200_000_000,
            rate: 500,
            kernel_ns_per_fault: 900,
            target_ppm: Some(10_000),
            in_step_milli: Some(1894),
            time_ns: 11,
        };
        assert_eq!(Cost::from_record(&cost.to_record()), Some(cost));
        // A fixed rate; a library that did not count threads in step.
        let older = Cost {
            target_ppm: None,
            in_step_milli: None,
            ..cost
        };
        assert_eq!(Cost::from_record(&older.to_record()), Some(older));
        let frame = Frame {
            tid: 5,
            key: KEY_BIT_SMALL | 17,
            depth: 2,
            pc: 0x40_1000,
        };
        assert_eq!(Frame::from_record(&frame.to_record()), Some(frame));
        let small = SmallAlloc {
            tid: 5,
            addr: 0x7f00_0000_1000,
            size: 48,
            node: -1,
            flags: 0,
            mean_bytes: 512 * 1024,
            key: KEY_BIT_SMALL | 17,
        };
        let r = small.to_record();
        assert_eq!(r.cpu, 512, "the mean travels in KiB");
        assert_eq!(SmallAlloc::from_record(&r), Some(small));
    }

    #[test]
    fn the_end_records_round_trip() {
        let pmu = PmuEnd {
            refused_threads: 2,
            first_errno: 13,
            untracked_threads: 1,
            lost_samples: 5,
            outside_samples: 3,
            time_ns: 9,
        };
        assert_eq!(PmuEnd::from_record(&pmu.to_record()), Some(pmu));
        let plan = PlanEnd {
            tid: 7,
            program_mbinds_skipped: 4,
            refused: 1,
            first_errno: 22,
            stripes_folded: 6,
            small_spilled: Some(3),
            channel_reopened: 2,
            time_ns: 11,
        };
        assert_eq!(PlanEnd::from_record(&plan.to_record()), Some(plan));
        let pinned = Pinned {
            pid: 40,
            tid: 41,
            ordinal: 3,
            cpu: Some(6),
            errno: 0,
            ran_on: Some(6),
            time_ns: 12,
        };
        let back = Record::decode(&pinned.to_record().encode()).unwrap();
        assert_eq!(Pinned::from_record(&back), Some(pinned));
        for kind in [Kind::WordSwitches, Kind::WordFaults] {
            let surcharge = WordSurcharge {
                events_are: kind,
                tid: 7,
                ns_each: 8_400,
                unwatched_ns_each: 17_000,
                measured: true,
                events: 120_000,
                charged_ns: 1_008_000_000,
                time_ns: 99,
            };
            let back = Record::decode(&surcharge.to_record().encode()).unwrap();
            assert_eq!(back.kind, kind);
            assert_eq!(WordSurcharge::from_record(&back), Some(surcharge));
            // Measured as nothing, and not measured (too few events).
            for measured in [true, false] {
                let nothing = WordSurcharge {
                    ns_each: 0,
                    measured,
                    charged_ns: 0,
                    ..surcharge
                };
                let back = Record::decode(&nothing.to_record().encode()).unwrap();
                assert_eq!(WordSurcharge::from_record(&back), Some(nothing));
            }
        }
        assert_eq!(WordSurcharge::from_record(&pinned.to_record()), None);
        for (watched, sys_ns) in [(true, -2_500_000), (false, 40_000_000)] {
            let sums = SwitchWindows {
                tid: 7,
                watched,
                windows: 9,
                switches: 3_100,
                sys_ns,
                cpu_ns: 36_000_000,
            };
            let back = Record::decode(&sums.to_record().encode()).unwrap();
            assert_eq!(back.kind, Kind::SwitchWindows);
            assert_eq!(SwitchWindows::from_record(&back), Some(sums));
        }
        assert_eq!(SwitchWindows::from_record(&pinned.to_record()), None);
        let skipped = Pinned {
            cpu: None,
            errno: 22,
            ran_on: None,
            ..pinned
        };
        let r = skipped.to_record();
        assert_eq!(
            (r.cpu, r.flags, r.addr, r.size),
            (u32::MAX, PIN_SKIPPED, 22, u64::MAX)
        );
        assert_eq!(Pinned::from_record(&r), Some(skipped));
        let unknown = PlanEnd {
            small_spilled: None,
            ..plan
        };
        assert_eq!(unknown.to_record().cpu, u32::MAX);
        assert_eq!(PlanEnd::from_record(&unknown.to_record()), Some(unknown));
        let words = WordTotals {
            tid: 7,
            windows: 400,
            cells: 1600,
            threads: 8,
            threads_lost: 1,
            unavailable: -19,
            ns_per_access: 2500,
            turns_ns: 3_000_000,
        };
        let r = Record::decode(&words.to_record().encode()).unwrap();
        assert_eq!(WordTotals::from_record(&r), Some(words));
    }

    #[test]
    fn a_view_of_another_kind_is_none() {
        let frame = Frame {
            tid: 5,
            key: 1,
            depth: 0,
            pc: 2,
        }
        .to_record();
        assert_eq!(Start::from_record(&frame), None);
        assert_eq!(Totals::from_record(&frame), None);
        assert_eq!(Cost::from_record(&frame), None);
        assert_eq!(SmallAlloc::from_record(&frame), None);
        assert_eq!(PmuEnd::from_record(&frame), None);
        assert_eq!(PlanEnd::from_record(&frame), None);
        assert_eq!(WordTotals::from_record(&frame), None);
        assert_eq!(Pinned::from_record(&frame), None);
        assert!(Frame::from_record(&frame).is_some());
    }
}
