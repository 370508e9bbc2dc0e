//! `perf_event_open(2)`'s data: the attribute structure (the libc crate has
//! no definition) and the reading of data-address samples (the
//! `PERF_RECORD_SAMPLE` fields, the `data_src` word, the ring buffer). The
//! call itself is a system call, so each side makes it in its own `sys`
//! module (the engine's `numalab::sys::perf`, the library's `sys`); both
//! fill this structure, and both decode the samples with these functions.

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes).
/// `config1` is `bp_addr` for a breakpoint, `config2` its `bp_len`.
#[repr(C)]
#[derive(Default)]
pub struct PerfEventAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved: u16,
}

impl PerfEventAttr {
    /// The structure's size, as `size` must say.
    pub const SIZE: u32 = std::mem::size_of::<PerfEventAttr>() as u32;
}

/// `flags` bits of [`PerfEventAttr`].
pub const ATTR_DISABLED: u64 = 1;
pub const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
pub const ATTR_EXCLUDE_HV: u64 = 1 << 6;
/// `precise_ip` (two bits) starts here.
pub const ATTR_PRECISE_SHIFT: u32 = 15;

/// `perf_event_open`'s flag: the descriptor closes on exec.
pub const PERF_FLAG_FD_CLOEXEC: u64 = 8;

/// `perf_event_attr.sample_type` bits read by [`decode_sample`].
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_ADDR: u64 = 1 << 3;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_PERIOD: u64 = 1 << 8;
pub const SAMPLE_WEIGHT: u64 = 1 << 14;
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const SAMPLE_PHYS_ADDR: u64 = 1 << 19;
/// What a data-address sample asks for, and all [`decode_sample`] reads.
pub const SAMPLE_TYPE: u64 = SAMPLE_IDENTIFIER
    | SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_WEIGHT
    | SAMPLE_DATA_SRC;
pub const RECORD_SAMPLE: u32 = 9;

/// One data-address sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PmuSample {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub addr: u64,
    pub cpu: u32,
    pub period: u64,
    /// The access's latency in cycles (PEBS) where the PMU gives one.
    pub weight: u64,
    pub source: DataSource,
}

/// The body of a `PERF_RECORD_SAMPLE` (after its 8-byte header) of an
/// event opened with `sample_type`; `None` when it asks for fields this
/// does not read, or the body is short.
pub fn decode_sample(body: &[u8], sample_type: u64) -> Option<PmuSample> {
    if sample_type & !(SAMPLE_TYPE | SAMPLE_PHYS_ADDR) != 0 {
        return None;
    }
    let mut at = 0usize;
    let mut next = || -> Option<u64> {
        let b = body.get(at..at + 8)?;
        at += 8;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    };
    let mut take = |bit: u64| -> Option<u64> {
        if sample_type & bit != 0 {
            next()
        } else {
            Some(0)
        }
    };
    // The fields in the order the kernel writes them.
    let _id = take(SAMPLE_IDENTIFIER)?;
    let ip = take(SAMPLE_IP)?;
    let pid_tid = take(SAMPLE_TID)?;
    let time_ns = take(SAMPLE_TIME)?;
    let addr = take(SAMPLE_ADDR)?;
    let cpu = take(SAMPLE_CPU)?;
    let period = take(SAMPLE_PERIOD)?;
    let weight = take(SAMPLE_WEIGHT)?;
    let data_src = take(SAMPLE_DATA_SRC)?;
    let _phys = take(SAMPLE_PHYS_ADDR)?;
    Some(PmuSample {
        ip,
        pid: pid_tid as u32,
        tid: (pid_tid >> 32) as u32,
        time_ns,
        addr,
        cpu: cpu as u32,
        period,
        weight,
        source: DataSource::decode(data_src),
    })
}

/// Whether the access loaded or stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Load,
    Store,
    /// Prefetch, execute, or not available.
    Other,
}

/// Where the data came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    L1,
    /// A line fill buffer: a miss already on its way.
    FillBuffer,
    L2,
    L3,
    /// Memory of this node.
    LocalRam,
    /// Memory of another node, `hops` away where the PMU says (1 or 2).
    RemoteRam {
        hops: Option<u8>,
    },
    /// Another node's cache.
    RemoteCache {
        hops: Option<u8>,
    },
    Io,
    Uncached,
    Unknown,
}

/// The `data_src` word of a sample (`union perf_mem_data_src`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSource {
    pub op: Operation,
    pub level: Level,
}

impl DataSource {
    /// Reads the word: the newer `mem_lvl_num` / `mem_remote` /
    /// `mem_hops` fields first, the older `mem_lvl` bits where those say
    /// nothing.
    pub fn decode(w: u64) -> DataSource {
        let op = w & 0x1f;
        let op = if op & 0x2 != 0 {
            Operation::Load
        } else if op & 0x4 != 0 {
            Operation::Store
        } else {
            Operation::Other
        };
        let lvl = (w >> 5) & 0x3fff;
        let lvl_num = (w >> 33) & 0xf;
        let remote = (w >> 37) & 1 == 1;
        let hops = match (w >> 43) & 0x7 {
            // 0: the same core (or not given); 1: another core of the
            // node; 2: another node; 3: another board.
            2 => Some(1),
            3 => Some(2),
            _ => None,
        };
        let level = match lvl_num {
            0x1 if !remote => Level::L1,
            0x2 if !remote => Level::L2,
            0x3 if !remote => Level::L3,
            0xc => Level::FillBuffer,
            0xd if remote => Level::RemoteRam { hops },
            0xd => Level::LocalRam,
            0x1..=0x4 | 0xb if remote => Level::RemoteCache { hops },
            _ => Self::old_level(lvl),
        };
        DataSource { op, level }
    }

    /// The `mem_lvl` bits (before Linux 4.14's `mem_lvl_num`).
    fn old_level(lvl: u64) -> Level {
        const L1: u64 = 0x08;
        const LFB: u64 = 0x10;
        const L2: u64 = 0x20;
        const L3: u64 = 0x40;
        const LOC_RAM: u64 = 0x80;
        const REM_RAM1: u64 = 0x100;
        const REM_RAM2: u64 = 0x200;
        const REM_CCE1: u64 = 0x400;
        const REM_CCE2: u64 = 0x800;
        const IO: u64 = 0x1000;
        const UNC: u64 = 0x2000;
        if lvl & REM_RAM1 != 0 {
            Level::RemoteRam { hops: Some(1) }
        } else if lvl & REM_RAM2 != 0 {
            Level::RemoteRam { hops: Some(2) }
        } else if lvl & REM_CCE1 != 0 {
            Level::RemoteCache { hops: Some(1) }
        } else if lvl & REM_CCE2 != 0 {
            Level::RemoteCache { hops: Some(2) }
        } else if lvl & LOC_RAM != 0 {
            Level::LocalRam
        } else if lvl & L3 != 0 {
            Level::L3
        } else if lvl & L2 != 0 {
            Level::L2
        } else if lvl & LFB != 0 {
            Level::FillBuffer
        } else if lvl & L1 != 0 {
            Level::L1
        } else if lvl & IO != 0 {
            Level::Io
        } else if lvl & UNC != 0 {
            Level::Uncached
        } else {
            Level::Unknown
        }
    }

    /// Whether the data came from another node (memory or cache); `None`
    /// when the PMU does not say where it came from.
    pub fn remote(&self) -> Option<bool> {
        match self.level {
            Level::RemoteRam { .. } | Level::RemoteCache { .. } => Some(true),
            Level::Unknown => None,
            _ => Some(false),
        }
    }
}

/// The records between `tail` and `head` of a ring's data area (`data`,
/// a power of two in size, as the kernel maps it), each as (type, body),
/// a record that wraps round the end joined. Stops at a malformed header.
pub fn ring_records(data: &[u8], tail: u64, head: u64) -> Vec<(u32, Vec<u8>)> {
    let size = data.len() as u64;
    let mut out = Vec::new();
    if size == 0 || !size.is_power_of_two() || head < tail || head - tail > size {
        return out;
    }
    let byte = |at: u64| data[(at % size) as usize];
    let bytes = |at: u64, n: u64| (0..n).map(|i| byte(at + i)).collect::<Vec<u8>>();
    let mut at = tail;
    while at + 8 <= head {
        let h = bytes(at, 8);
        let kind = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let len = u16::from_le_bytes([h[6], h[7]]) as u64;
        if len < 8 || at + len > head {
            break;
        }
        out.push((kind, bytes(at + 8, len - 8)));
        at += len;
    }
    out
}
