//! Sampling through a memory-sampling PMU (Intel PEBS `mem-loads`, AMD IBS
//! op), when the engine found one this user may open and named it in
//! `NUMALAB_PROFILE_PMU` (`TYPE:CONFIG:CONFIG1:PRECISE_IP:PERIOD`). Each
//! program thread opens the event on itself as it starts (every
//! PERIOD-th access, user space only, times on CLOCK_MONOTONIC as the
//! records') and maps its ring; the sampler thread each tick turns
//! the data-address samples that fall in tracked regions into Sample
//! records, each with its page's node (one `move_pages` for a tick's
//! samples), read or write from the PMU's data source, and `FLAG_PMU`.
//! No page is then armed: the PMU sees every access, kernel copies
//! included, at a cost of its own (the kernel's interrupt per sample), and
//! first touches are not sampled. When the kernel refuses the event on
//! the first thread, pages are armed after all.
//!
//! Nothing here can run on the machines numalab is tested on (no `cpu`
//! PMU); the same path is tested with a software event that carries data
//! addresses (page faults, `1:2:0:0:1`), and the hardware events' sample
//! decoding on records built by the engine's tests.

use crate::perf::{
    decode_sample, Operation, PerfEventAttr, ATTR_EXCLUDE_HV, ATTR_EXCLUDE_KERNEL,
    ATTR_PRECISE_SHIFT, RECORD_SAMPLE, SAMPLE_TYPE,
};
use crate::record::{Kind, Record, FLAG_ACCESS_UNKNOWN, FLAG_PMU, FLAG_WRITE};
use crate::runtime::state::{config, page_size, SAMPLES};
use crate::runtime::{emit, sys};
use crate::tables;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst,
};
use std::sync::OnceLock;

/// Threads sampled at once, at most; later ones are not sampled (counted).
const CAPACITY: usize = 1024;
/// A slot's thread has ended: close its event once its ring is read.
const ENDED: u32 = 1 << 31;
/// The ring of one thread's samples: data pages (a power of 2), 64 KiB.
const RING_DATA_PAGES: usize = 16;
/// `struct perf_event_mmap_page`: the offsets of the fields read here.
const DATA_HEAD_OFFSET: usize = 1024;
const DATA_TAIL_OFFSET: usize = 1032;
/// `use_clockid` in `perf_event_attr`'s flags.
const ATTR_USE_CLOCKID: u64 = 1 << 25;
const RECORD_LOST: u32 = 2;

/// Program threads to sample (0: a free slot), their ids with [`ENDED`].
#[allow(clippy::declare_interior_mutable_const)]
const FREE: AtomicU32 = AtomicU32::new(0);
static THREADS: [AtomicU32; CAPACITY] = [FREE; CAPACITY];
/// Whether PMU sampling is on (the Start record's flags say so too).
static ON: AtomicBool = AtomicBool::new(false);
/// Threads left unsampled because the table was full.
static UNTRACKED: AtomicU64 = AtomicU64::new(0);
/// Threads the kernel refused the event on, and its first errno.
static REFUSED: AtomicU64 = AtomicU64::new(0);
static FIRST_ERRNO: AtomicI32 = AtomicI32::new(0);
/// Samples the kernel dropped (ring full), from its LOST records.
static LOST: AtomicU64 = AtomicU64::new(0);
/// Samples outside every tracked region.
static OUTSIDE: AtomicU64 = AtomicU64::new(0);

/// The event to sample with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub kind: u32,
    pub config: u64,
    pub config1: u64,
    pub precise_ip: u8,
    pub period: u64,
}

/// Reads `TYPE:CONFIG:CONFIG1:PRECISE_IP:PERIOD` (numbers, decimal or
/// 0x hex); `None` when malformed (then protection faults sample).
pub fn parse(spec: &str) -> Option<Spec> {
    let mut f = spec.trim().split(':').map(|t| {
        let t = t.trim();
        match t.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => t.parse::<u64>().ok(),
        }
    });
    let mut next = || f.next().flatten();
    let s = Spec {
        kind: u32::try_from(next()?).ok()?,
        config: next()?,
        config1: next()?,
        precise_ip: u8::try_from(next()?).ok().filter(|p| *p <= 3)?,
        period: next().filter(|p| *p > 0)?,
    };
    f.next().is_none().then_some(s)
}

/// Turns PMU sampling on when the environment asks for it (at the
/// library's start); whether it is on.
pub fn init() -> bool {
    let spec = config().pmu.as_deref().and_then(parse);
    if let Some(s) = spec {
        let _ = SPEC.set(s);
    }
    ON.store(spec.is_some(), SeqCst);
    spec.is_some()
}

/// Whether samples come from the PMU (no page is armed).
pub fn on() -> bool {
    ON.load(SeqCst)
}

/// The event, kept at the start for the threads to open it.
static SPEC: OnceLock<Spec> = OnceLock::new();
/// Each slot's descriptor and ring (valid once its tid is published).
#[allow(clippy::declare_interior_mutable_const)]
const NO_FD: AtomicI32 = AtomicI32::new(-1);
static FDS: [AtomicI32; CAPACITY] = [NO_FD; CAPACITY];
/// Each slot's event id (`sys::perf_id`): the descriptor is closed only
/// while it is still that event.
#[allow(clippy::declare_interior_mutable_const)]
const NO_ID: AtomicU64 = AtomicU64::new(0);
static IDS: [AtomicU64; CAPACITY] = [NO_ID; CAPACITY];
#[allow(clippy::declare_interior_mutable_const)]
const NO_RING: AtomicUsize = AtomicUsize::new(0);
static RINGS: [AtomicUsize; CAPACITY] = [NO_RING; CAPACITY];
/// A slot claimed, its descriptor and ring not yet stored.
const CLAIMED: u32 = 1 << 30;
/// An event was opened on some thread.
static OPENED: AtomicBool = AtomicBool::new(false);

fn ring_bytes(page_size: usize) -> usize {
    RING_DATA_PAGES * page_size
}

/// A program thread starts (the main thread at the library's start): it
/// opens the event on itself and maps its ring, so that its first
/// accesses are sampled, and publishes them for the sampler; if
/// `--threads` keeps it.
pub fn thread_starts() {
    let Some(s) = SPEC
        .get()
        .filter(|_| on() && crate::select::thread_selected())
    else {
        return;
    };
    let tid = sys::gettid();
    let Some(i) = THREADS
        .iter()
        .position(|t| t.compare_exchange(0, tid | CLAIMED, SeqCst, SeqCst).is_ok())
    else {
        UNTRACKED.fetch_add(1, SeqCst);
        return;
    };
    let attr = PerfEventAttr {
        kind: s.kind,
        size: PerfEventAttr::SIZE,
        config: s.config,
        config1: s.config1,
        sample_period: s.period,
        sample_type: SAMPLE_TYPE,
        flags: ATTR_EXCLUDE_KERNEL
            | ATTR_EXCLUDE_HV
            | ATTR_USE_CLOCKID
            | (s.precise_ip as u64 & 3) << ATTR_PRECISE_SHIFT,
        // No wake-ups: nobody polls, the sampler reads the ring.
        wakeup_events: u32::MAX,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    match sys::perf_event_open(&attr, 0) {
        Ok(fd) => {
            let ps = page_size();
            // SAFETY: a shared mapping of a perf descriptor, one header
            // page and a power-of-two data area, as perf_event_open(2)
            // documents (not a private anonymous one: not tracked).
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    ps + ring_bytes(ps),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                sys::close(fd);
            } else {
                IDS[i].store(sys::perf_id(fd).unwrap_or(0), SeqCst);
                FDS[i].store(fd, SeqCst);
                RINGS[i].store(p as usize, SeqCst);
                OPENED.store(true, SeqCst);
            }
        }
        Err(errno) => {
            if REFUSED.fetch_add(1, SeqCst) == 0 {
                FIRST_ERRNO.store(errno, SeqCst);
            }
        }
    }
    THREADS[i].store(tid, SeqCst);
}

/// A program thread ends: its event is closed once its ring is read.
pub fn thread_ends() {
    if !on() {
        return;
    }
    let tid = sys::gettid();
    for t in THREADS.iter() {
        if t.compare_exchange(tid, tid | ENDED, SeqCst, SeqCst).is_ok() {
            return;
        }
    }
}

/// The sampler thread's side: it reads the rings the threads mapped.
pub struct PmuSampler {
    page_size: usize,
}

impl PmuSampler {
    /// The sampler, when PMU sampling is on.
    pub fn from_env(page_size: usize) -> Option<PmuSampler> {
        on().then_some(PmuSampler { page_size })
    }

    /// Reads every ring, writes the samples out and closes the events of
    /// threads that ended. `stop`: close them all (the sampling window
    /// ended).
    pub fn tick(&mut self, stop: bool) {
        let mut out = Vec::new();
        for (i, thread) in THREADS.iter().enumerate() {
            let v = thread.load(SeqCst);
            if v == 0 || v & CLAIMED != 0 {
                continue;
            }
            self.read(i, &mut out);
            if v & ENDED != 0 || stop {
                self.close(i);
                let _ = thread.compare_exchange(v, 0, SeqCst, SeqCst);
            }
        }
        self.write_out(&out);
        if stop {
            report();
            ON.store(false, SeqCst);
        }
    }

    fn close(&mut self, i: usize) {
        let ring = RINGS[i].swap(0, SeqCst);
        if ring != 0 {
            // SAFETY: the mapping thread_starts made, of that length.
            unsafe {
                libc::munmap(
                    ring as *mut libc::c_void,
                    self.page_size + ring_bytes(self.page_size),
                )
            };
        }
        let fd = FDS[i].swap(-1, SeqCst);
        if fd >= 0 {
            sys::close_event(fd, IDS[i].load(SeqCst));
        }
    }

    /// Whether the kernel refused the event before it was ever opened:
    /// then pages are armed after all (the Pmu record says why).
    pub fn refused(&self) -> bool {
        !OPENED.load(SeqCst) && REFUSED.load(SeqCst) > 0
    }

    /// Reads slot `i`'s ring from its tail to its head into `out`, and
    /// gives the space back to the kernel.
    fn read(&mut self, i: usize, out: &mut Vec<crate::perf::PmuSample>) {
        let ring = RINGS[i].load(SeqCst) as *mut u8;
        if ring.is_null() {
            return;
        }
        let size = ring_bytes(self.page_size);
        // SAFETY: the header page of a live mapping; the fence pairs with
        // the kernel's release of the head.
        let (head, tail) = unsafe {
            let head = std::ptr::read_volatile(ring.add(DATA_HEAD_OFFSET) as *const u64);
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            let tail = std::ptr::read_volatile(ring.add(DATA_TAIL_OFFSET) as *const u64);
            (head, tail)
        };
        // SAFETY: the data area follows the header page, `size` long.
        let data = unsafe { std::slice::from_raw_parts(ring.add(self.page_size), size) };
        for (kind, body) in crate::perf::ring_records(data, tail, head) {
            match kind {
                RECORD_SAMPLE => {
                    if let Some(s) = decode_sample(&body, SAMPLE_TYPE) {
                        out.push(s);
                    }
                }
                // { id, lost }.
                RECORD_LOST if body.len() >= 16 => {
                    let n = u64::from_le_bytes(body[8..16].try_into().unwrap_or([0; 8]));
                    LOST.fetch_add(n, SeqCst);
                }
                _ => {}
            }
        }
        // SAFETY: the tail is ours to write; the fence orders the reads
        // above before the kernel may reuse the space.
        unsafe {
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            std::ptr::write_volatile(ring.add(DATA_TAIL_OFFSET) as *mut u64, head);
        }
    }

    /// Sample records for the samples in tracked regions, each with its
    /// page's node.
    fn write_out(&mut self, samples: &[crate::perf::PmuSample]) {
        const BATCH: usize = 256;
        let ps = self.page_size;
        let kept: Vec<&crate::perf::PmuSample> = samples
            .iter()
            .filter(|s| s.addr != 0 && tables::in_region(s.addr as usize, 1))
            .collect();
        OUTSIDE.fetch_add((samples.len() - kept.len()) as u64, SeqCst);
        for chunk in kept.chunks(BATCH) {
            let mut pages = [std::ptr::null_mut::<libc::c_void>(); BATCH];
            let mut status = [-1i32; BATCH];
            for (p, s) in pages.iter_mut().zip(chunk) {
                *p = (s.addr as usize & !(ps - 1)) as *mut libc::c_void;
            }
            if !sys::query_pages(&pages[..chunk.len()], &mut status[..chunk.len()]) {
                status = [-1; BATCH];
            }
            for (s, node) in chunk.iter().zip(status) {
                let access = match s.source.op {
                    Operation::Load => 0,
                    Operation::Store => FLAG_WRITE,
                    Operation::Other => FLAG_ACCESS_UNKNOWN,
                };
                SAMPLES.fetch_add(1, SeqCst);
                emit(&Record {
                    kind: Kind::Sample,
                    tid: s.tid,
                    cpu: s.cpu,
                    node: node.max(-1),
                    flags: access | FLAG_PMU,
                    addr: s.addr,
                    // The access's latency in cycles, where the PMU says.
                    size: s.weight,
                    time_ns: s.time_ns,
                    aux: 0,
                });
            }
        }
    }
}

/// What limited PMU sampling, in a Pmu record: at the end of the sampling
/// window, or at exit (samples still in the rings then are lost: at most
/// one tick's).
pub fn report() {
    if !on() {
        return;
    }
    emit(
        &numalab_profile_abi::events::PmuEnd {
            refused_threads: REFUSED.load(SeqCst).min(u32::MAX as u64) as u32,
            first_errno: FIRST_ERRNO.load(SeqCst),
            untracked_threads: UNTRACKED.load(SeqCst).min(u32::MAX as u64) as u32,
            lost_samples: LOST.load(SeqCst),
            outside_samples: OUTSIDE.load(SeqCst),
            time_ns: sys::monotonic_ns(),
        }
        .to_record(),
    );
}

// SAFETY: the rings are the sampler thread's alone (the struct lives on
// its stack).
unsafe impl Send for PmuSampler {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_five_numbers() {
        assert_eq!(
            parse("8:0x1cd:3:2:20011"),
            Some(Spec {
                kind: 8,
                config: 0x1cd,
                config1: 3,
                precise_ip: 2,
                period: 20011
            })
        );
        assert_eq!(parse("1:2:0:0:1").map(|s| (s.kind, s.period)), Some((1, 1)));
        for bad in [
            "",
            "1:2:0:0",
            "1:2:0:0:0",
            "1:2:0:4:1",
            "1:2:0:0:1:9",
            "x:2:0:0:1",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
