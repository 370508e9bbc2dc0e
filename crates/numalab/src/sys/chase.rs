//! Dependent-load pointer chase for latency.
//!
//! The buffer is cut into elements (one 64-byte cache line; for
//! [`ChasePattern::Stride`] one stride) and the first 8 bytes of each element
//! hold the address of the next element to visit. Following the pointers is
//! a chain of dependent loads: each load's address is the previous load's
//! value, so the time per step is the latency of one access.
//!
//! With `chains = N` the elements visited are split into N disjoint cycles,
//! followed together in one loop: N independent dependent chains measure
//! memory-level parallelism (the time per step then covers N accesses).

use crate::random::SplitMix64;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// Line (element) size of the random and page patterns.
pub const LINE: usize = 64;
/// Base page size used by [`ChasePattern::Page`] groups.
pub const PAGE: usize = 4096;
/// Most chains [`Chase::build`] accepts.
pub const MAX_CHAINS: usize = 64;
/// Largest page group of `page:N`: 262144 pages, 1 GiB, the largest huge
/// page; a larger group is a random chase by another name.
pub const MAX_PAGES_PER_GROUP: usize = 1 << 18;
/// Largest stride of `stride:N`: 1 GiB, as large as a group may be.
pub const MAX_STRIDE: usize = 1 << 30;

/// Order in which the chase visits the buffer's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChasePattern {
    /// One random cycle over all lines of the buffer (TLB misses included).
    Random,
    /// Groups of `pages_per_group` 4 KiB pages in random order, the lines of
    /// each group in random order ("pseudo-random": TLB misses are rare).
    Page { pages_per_group: usize },
    /// Sequential elements `bytes` apart, wrapping (prefetch friendly).
    Stride { bytes: usize },
}

impl ChasePattern {
    /// Parses "random", "page" (1 page per group), "page:N" (N pages per
    /// group, 1 to [`MAX_PAGES_PER_GROUP`]), "stride" (64 bytes) or
    /// "stride:N" (N bytes, a multiple of 8 from 8 to [`MAX_STRIDE`]).
    pub fn parse(s: &str) -> Result<Self, String> {
        let shown = crate::text::format::excerpt(s, 40);
        let bad = || format!("unknown pattern '{shown}'; valid: random, page, stride");
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |default: usize, max: usize, multiple: usize, what: &str| {
            let Some(a) = arg else {
                return Ok(default);
            };
            a.parse::<usize>()
                .ok()
                .filter(|&v| (1..=max).contains(&v) && v % multiple == 0)
                .ok_or_else(|| format!("pattern '{shown}': N must be {what}"))
        };
        match name {
            "random" if arg.is_none() => Ok(Self::Random),
            "page" => Ok(Self::Page {
                pages_per_group: num(
                    1,
                    MAX_PAGES_PER_GROUP,
                    1,
                    "a whole number of pages per group from 1 to 262144",
                )?,
            }),
            "stride" => Ok(Self::Stride {
                bytes: num(
                    64,
                    MAX_STRIDE,
                    8,
                    "a number of bytes, a multiple of 8 from 8 to 1073741824",
                )?,
            }),
            _ => Err(bad()),
        }
    }

    /// "random", "page", "page:N" (N > 1), "stride" (64 B) or "stride:N":
    /// the form [`ChasePattern::parse`] reads back.
    pub fn name(&self) -> String {
        match *self {
            Self::Random => "random".into(),
            Self::Page { pages_per_group: 1 } => "page".into(),
            Self::Page { pages_per_group } => format!("page:{pages_per_group}"),
            Self::Stride { bytes: 64 } => "stride".into(),
            Self::Stride { bytes } => format!("stride:{bytes}"),
        }
    }
}

impl fmt::Display for ChasePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The result of [`Chase::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChaseRun {
    /// Wall time of the dependent-load loop alone.
    pub elapsed: Duration,
    /// Steps taken (each advanced every chain once).
    pub steps: u64,
    /// Sum of the chains' final pointers: `std::hint::black_box` it.
    pub sum: usize,
}

impl ChaseRun {
    /// Nanoseconds per step (per access of one chain).
    pub fn ns_per_step(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e9 / self.steps.max(1) as f64
    }
}

/// A pointer chase laid out in a caller's buffer, which it borrows for as
/// long as it lives: nothing else can free or write the buffer while
/// `run`, `verify_cycle` and `walk` follow the links in it.
#[derive(Debug)]
pub struct Chase<'a> {
    /// The borrow of the buffer the links are written in.
    memory: PhantomData<&'a mut [u8]>,
    /// The buffer as given to `build`.
    buf: *mut u8,
    /// First element (`buf` rounded up to the element alignment).
    base: usize,
    /// Element size in bytes.
    elem: usize,
    /// Elements that fit in the buffer (some may be unused).
    elements: usize,
    pattern: ChasePattern,
    /// Address of the first element of each chain.
    heads: Vec<usize>,
    /// Where each chain stopped: the next `run` goes on from there, as a
    /// standard chase that is sampled would, instead of replaying the same
    /// first lines (which a short chase could find still cached).
    at: Vec<usize>,
    per_chain: usize,
}

/// An element index (u32 halves the memory and cache misses when it fits).
trait Idx: Copy + Eq {
    /// "No element": marks the elements no chain visits.
    const NONE: Self;
    fn from(i: usize) -> Self;
    fn get(self) -> usize;
}

impl Idx for u32 {
    const NONE: Self = u32::MAX;
    fn from(i: usize) -> Self {
        i as u32
    }
    fn get(self) -> usize {
        self as usize
    }
}

impl Idx for usize {
    const NONE: Self = usize::MAX;
    fn from(i: usize) -> Self {
        i
    }
    fn get(self) -> usize {
        self
    }
}

/// A temporary array of `n` copies of `fill`; when large, backed by
/// transparent huge pages (asked for before the first touch), which saves
/// most page faults and TLB misses of the random accesses that follow.
fn scratch<T: Copy>(n: usize, fill: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    let bytes = n * std::mem::size_of::<T>();
    #[cfg(target_os = "linux")]
    if bytes >= 4 << 20 {
        let p = v.as_mut_ptr() as usize;
        let lo = p.next_multiple_of(PAGE);
        let hi = (p + bytes) & !(PAGE - 1);
        if hi > lo {
            // SAFETY: advice on pages of our own, still untouched, allocation;
            // failure (THP disabled) only loses the speed-up.
            unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
        }
    }
    let _ = bytes;
    v.resize(n, fill);
    v
}

/// A uniformly random order of `0..n`, cache friendly for large n: every
/// element goes to a uniformly random bucket (sequential appends to a few
/// hundred streams), then each bucket, small enough for L2, is shuffled.
/// Independent uniform buckets plus uniform shuffles inside them give a
/// uniform permutation (Sanders' scatter-shuffle), without the cache and TLB
/// miss per swap of a Fisher-Yates over a large array.
fn random_order<T: Idx>(n: usize, rng: &mut SplitMix64) -> Vec<T> {
    const BUCKET: usize = 1 << 15;
    let buckets = n.div_ceil(BUCKET);
    if buckets <= 1 {
        let mut v: Vec<T> = (0..n).map(T::from).collect();
        rng.shuffle(&mut v);
        return v;
    }
    // Draw the buckets twice from the same stream: once to count, once to place.
    let replay = rng.clone();
    let mut start = vec![0usize; buckets + 1];
    for _ in 0..n {
        start[rng.below(buckets) + 1] += 1;
    }
    for b in 0..buckets {
        start[b + 1] += start[b];
    }
    let mut fill = start.clone();
    let mut out: Vec<T> = scratch(n, T::NONE);
    let mut r = replay;
    for e in 0..n {
        let b = r.below(buckets);
        out[fill[b]] = T::from(e);
        fill[b] += 1;
    }
    for b in 0..buckets {
        rng.shuffle(&mut out[start[b]..start[b + 1]]);
    }
    out
}

/// Builds the successor table of the chains from the visit order of the
/// elements: position p of the order goes to chain p / per; each chain's
/// last element points back to its first; elements past `total` stay NONE.
struct Linker<T> {
    succ: Vec<T>,
    per: usize,
    total: usize,
    pos: usize,
    /// Position inside the current chain.
    k: usize,
    prev: usize,
    /// First element of each chain.
    heads: Vec<usize>,
}

impl<T: Idx> Linker<T> {
    fn new(elements: usize, per: usize, chains: usize) -> Self {
        Linker {
            succ: scratch(elements, T::NONE),
            per,
            total: per * chains,
            pos: 0,
            k: 0,
            prev: 0,
            heads: Vec::with_capacity(chains),
        }
    }

    #[inline(always)]
    fn push(&mut self, e: usize) {
        if self.pos >= self.total {
            return;
        }
        if self.k == 0 {
            self.heads.push(e);
        } else {
            self.succ[self.prev] = T::from(e);
        }
        self.k += 1;
        if self.k == self.per {
            self.succ[e] = T::from(self.heads[self.heads.len() - 1]);
            self.k = 0;
        }
        self.prev = e;
        self.pos += 1;
    }
}

/// Geometry of the elements of a chase.
struct Geometry {
    base: usize,
    elem: usize,
    elements: usize,
    per: usize,
    chains: usize,
}

/// Successor table and chain heads (element indexes) of a random or page
/// chase.
fn successors<T: Idx>(
    g: &Geometry,
    pattern: ChasePattern,
    rng: &mut SplitMix64,
) -> (Vec<T>, Vec<usize>) {
    let mut link = Linker::<T>::new(g.elements, g.per, g.chains);
    match pattern {
        ChasePattern::Random => {
            // A random order closed into a ring is a uniformly random cyclic
            // permutation, as Sattolo's algorithm would give.
            let order = random_order::<T>(g.elements, rng);
            for (p, e) in order.iter().enumerate() {
                if let Some(ahead) = order.get(p + 16) {
                    // The successor table is written at random: overlap the misses.
                    let at = link.succ.as_ptr().wrapping_add(ahead.get());
                    crate::sys::kernels::prefetch(at as *const u8);
                }
                link.push(e.get());
            }
        }
        ChasePattern::Page { pages_per_group } => {
            // Groups are aligned to pages of the address space, so a group is
            // exactly `pages_per_group` real pages.
            let gbytes = pages_per_group * PAGE;
            let gbase = g.base & !(PAGE - 1);
            let end = g.base + g.elements * LINE;
            let groups = (end - gbase).div_ceil(gbytes);
            let at = |k: usize| gbase.saturating_add(k.saturating_mul(gbytes));
            let mut lines: Vec<usize> = Vec::with_capacity((gbytes / LINE).min(g.elements));
            for k in random_order::<T>(groups, rng) {
                let lo = at(k.get()).max(g.base);
                let hi = at(k.get() + 1).min(end);
                let first = (lo - g.base) / LINE;
                lines.clear();
                lines.extend(first..first + (hi - lo) / LINE);
                rng.shuffle(&mut lines);
                for &l in &lines {
                    link.push(l);
                }
            }
        }
        ChasePattern::Stride { .. } => unreachable!("stride chases need no table"),
    }
    (link.succ, link.heads)
}

/// Writes the pointers of a successor table into the buffer, in address
/// order (sequential writes, unlike following the visit order).
fn write_links<T: Idx>(g: &Geometry, succ: &[T]) {
    for (e, &s) in succ.iter().enumerate() {
        if s != T::NONE {
            // SAFETY: e < elements: an 8-byte aligned element inside the
            // buffer, which the caller of `build` lets the chase write.
            unsafe { ((g.base + e * g.elem) as *mut usize).write(g.base + s.get() * g.elem) };
        }
    }
}

/// Writes a stride chase: chain k is elements [k*per, (k+1)*per) in order.
fn write_stride(g: &Geometry) -> Vec<usize> {
    let mut heads = Vec::with_capacity(g.chains);
    for c in 0..g.chains {
        let first = c * g.per;
        heads.push(first);
        let addr = |e: usize| g.base + e * g.elem;
        for e in first..first + g.per - 1 {
            // SAFETY: as in `write_links`.
            unsafe { (addr(e) as *mut usize).write(addr(e + 1)) };
        }
        // SAFETY: as above.
        unsafe { (addr(first + g.per - 1) as *mut usize).write(addr(first)) };
    }
    heads
}

impl<'a> Chase<'a> {
    /// Lays out a chase in `memory` (overwriting the first 8 bytes of every
    /// element), with `chains` disjoint cycles of equal length and the PRNG
    /// seeded with `seed`. Elements left over when the element count is not
    /// a multiple of `chains` are not visited.
    ///
    /// Errors: `chains` 0 or more than 64, a page group of 0 pages, a stride
    /// not a positive multiple of 8 or larger than the buffer, or fewer than
    /// 2 elements per chain.
    pub fn build(
        memory: &'a mut [u8],
        pattern: ChasePattern,
        chains: usize,
        seed: u64,
    ) -> Result<Chase<'a>, String> {
        if chains == 0 || chains > MAX_CHAINS {
            return Err(format!("chains must be 1 to {MAX_CHAINS}, not {chains}"));
        }
        let (buf, len) = (memory.as_mut_ptr(), memory.len());
        let elem = match pattern {
            ChasePattern::Random => LINE,
            ChasePattern::Page { pages_per_group } => {
                if pages_per_group == 0 {
                    return Err("page pattern: a group needs at least 1 page".into());
                }
                if pages_per_group.checked_mul(PAGE).is_none() {
                    return Err(format!(
                        "page pattern: {pages_per_group} pages per group is too many"
                    ));
                }
                LINE
            }
            ChasePattern::Stride { bytes } => {
                if bytes == 0 || bytes % 8 != 0 {
                    return Err(format!(
                        "stride must be a positive multiple of 8 bytes, not {bytes}"
                    ));
                }
                if bytes > len {
                    return Err(format!(
                        "stride of {bytes} bytes is larger than the {len}-byte buffer"
                    ));
                }
                bytes
            }
        };
        // Lines start on 64-byte boundaries; stride elements on 8-byte ones.
        let align = if elem % LINE == 0 { LINE } else { 8 };
        let start = buf as usize;
        let base = start.next_multiple_of(align);
        let usable = len.saturating_sub(base - start);
        let elements = usable / elem;
        let unit = if elem == LINE { "lines" } else { "elements" };
        if elements < 2 * chains {
            return Err(format!(
                "a {len}-byte buffer holds {elements} {unit} of {elem} bytes; \
                 {chains} chain(s) need at least {}",
                2 * chains
            ));
        }
        let g = Geometry {
            base,
            elem,
            elements,
            per: elements / chains,
            chains,
        };
        let mut rng = SplitMix64::new(seed);
        let heads = match pattern {
            ChasePattern::Stride { .. } => write_stride(&g),
            _ if elements < u32::MAX as usize => {
                let (succ, heads) = successors::<u32>(&g, pattern, &mut rng);
                write_links(&g, &succ);
                heads
            }
            _ => {
                let (succ, heads) = successors::<usize>(&g, pattern, &mut rng);
                write_links(&g, &succ);
                heads
            }
        };
        debug_assert_eq!(heads.len(), chains);
        Ok(Chase {
            memory: PhantomData,
            buf,
            base,
            elem,
            elements,
            pattern,
            at: Vec::new(),
            heads: heads.into_iter().map(|e| base + e * elem).collect(),
            per_chain: g.per,
        })
    }

    /// Number of independent chains.
    pub fn chains(&self) -> usize {
        self.heads.len()
    }

    /// Elements (lines, or strides for the stride pattern) in each chain.
    pub fn lines_per_chain(&self) -> usize {
        self.per_chain
    }

    /// Element size in bytes: 64, or the stride.
    pub fn element_bytes(&self) -> usize {
        self.elem
    }

    pub fn pattern(&self) -> ChasePattern {
        self.pattern
    }

    /// Follows every chain `steps` times from where the previous `run` left
    /// it (from its first element the first time, or after [`Chase::rewind`])
    /// and times it.
    pub fn run(&mut self, steps: u64) -> ChaseRun {
        if self.at.len() != self.heads.len() {
            self.at = self.heads.clone();
        }
        let at = std::hint::black_box(&mut self.at[..]);
        macro_rules! fixed {
            ($($n:literal)*) => {
                match at.len() {
                    $($n => time(|| run_fixed::<$n>(at, steps)),)*
                    _ => time(|| run_any(at, steps)),
                }
            };
        }
        let (elapsed, sum) = fixed!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
        ChaseRun {
            elapsed,
            steps,
            sum,
        }
    }

    /// Puts every chain back on its first element.
    pub fn rewind(&mut self) {
        self.at.clear();
    }

    /// Walks each chain and checks that it visits only elements of the
    /// buffer, exactly `lines_per_chain` of them, each once (also across
    /// chains), and returns to its first element.
    pub fn verify_cycle(&self) -> bool {
        let mut seen = vec![0u64; self.elements.div_ceil(64)];
        let end = self.base + self.elements * self.elem;
        for &head in &self.heads {
            let mut p = head;
            let mut count = 0;
            loop {
                if p < self.base || p >= end || !(p - self.base).is_multiple_of(self.elem) {
                    return false;
                }
                let i = (p - self.base) / self.elem;
                if seen[i / 64] & (1 << (i % 64)) != 0 {
                    return false;
                }
                seen[i / 64] |= 1 << (i % 64);
                count += 1;
                // SAFETY: p is an element of the buffer (checked above).
                p = unsafe { (p as *const usize).read() };
                if p == head {
                    break;
                }
                if count >= self.per_chain {
                    return false;
                }
            }
            if count != self.per_chain {
                return false;
            }
        }
        true
    }

    /// Byte offsets (from the `buf` given to `build`) of the first
    /// `max_steps` elements chain `chain` visits, starting with its first.
    /// Offsets outside the buffer end the walk (a broken chase).
    ///
    /// # Panics
    /// If `chain >= self.chains()`.
    pub fn walk(&self, chain: usize, max_steps: usize) -> Vec<usize> {
        let start = self.buf as usize;
        let end = self.base + self.elements * self.elem;
        let mut p = self.heads[chain];
        let mut out = Vec::with_capacity(max_steps.min(self.per_chain + 1));
        for _ in 0..max_steps {
            if p < self.base || p >= end || !p.is_multiple_of(8) {
                break;
            }
            out.push(p - start);
            // SAFETY: p is an aligned address inside the buffer.
            p = unsafe { (p as *const usize).read() };
        }
        out
    }
}

/// Times `f` (compiler fences keep the loop between the clock reads).
#[inline(always)]
fn time(f: impl FnOnce() -> usize) -> (Duration, usize) {
    use std::sync::atomic::{compiler_fence, Ordering};
    let t0 = Instant::now();
    compiler_fence(Ordering::SeqCst);
    let sum = f();
    compiler_fence(Ordering::SeqCst);
    let elapsed = t0.elapsed();
    (elapsed, std::hint::black_box(sum))
}

/// One step of N chains: N independent dependent loads.
#[inline(always)]
fn step<const N: usize>(p: &mut [usize; N]) {
    for x in p.iter_mut() {
        // SAFETY: every pointer of a built chase points at an element of its
        // buffer, whose first 8 bytes hold the next element's address.
        // Volatile: the load can be neither removed nor vectorized.
        *x = unsafe { core::ptr::read_volatile(*x as *const usize) };
    }
}

/// The chase for a fixed number of chains: pointers stay in registers.
#[inline(never)]
fn run_fixed<const N: usize>(at: &mut [usize], steps: u64) -> usize {
    let mut p: [usize; N] = (&*at).try_into().expect("chain count");
    let mut left = steps;
    while left >= 8 {
        step(&mut p);
        step(&mut p);
        step(&mut p);
        step(&mut p);
        step(&mut p);
        step(&mut p);
        step(&mut p);
        step(&mut p);
        left -= 8;
    }
    while left > 0 {
        step(&mut p);
        left -= 1;
    }
    at.copy_from_slice(&p);
    p.iter().fold(0usize, |a, &x| a.wrapping_add(x))
}

/// The chase for any number of chains (pointers in memory: for many chains,
/// where throughput, not single-load latency, is measured).
#[inline(never)]
fn run_any(p: &mut [usize], steps: u64) -> usize {
    for _ in 0..steps {
        for x in p.iter_mut() {
            // SAFETY: as in `step`.
            *x = unsafe { core::ptr::read_volatile(*x as *const usize) };
        }
    }
    p.iter().fold(0usize, |a, &x| a.wrapping_add(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zeroed, page-aligned buffer.
    struct Buf {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    }

    impl Buf {
        fn new(len: usize) -> Self {
            let layout = std::alloc::Layout::from_size_align(len, PAGE).unwrap();
            // SAFETY: non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!ptr.is_null());
            Buf { ptr, layout }
        }

        /// The whole buffer, borrowed.
        fn bytes(&mut self) -> &mut [u8] {
            // SAFETY: `ptr` is a live allocation of `layout.size()` bytes,
            // borrowed mutably through `self`.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
        }
    }

    impl Drop for Buf {
        fn drop(&mut self) {
            // SAFETY: allocated with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) }
        }
    }

    #[test]
    fn bucket_shuffle_is_a_well_mixed_permutation() {
        let n = 300_001; // 10 buckets
        let order = random_order::<u32>(n, &mut SplitMix64::new(9));
        let mut seen = vec![false; n];
        for &e in &order {
            assert!(!std::mem::replace(&mut seen[e as usize], true));
        }
        assert!(seen.iter().all(|&s| s));
        // Position and element are uncorrelated, and every tenth of the
        // positions holds elements from every tenth of the range.
        let (nf, mean) = (n as f64, (n as f64 - 1.0) / 2.0);
        let cov: f64 = order
            .iter()
            .enumerate()
            .map(|(p, &e)| (p as f64 - mean) * (e as f64 - mean))
            .sum::<f64>()
            / nf;
        let var = (nf * nf - 1.0) / 12.0;
        assert!((cov / var).abs() < 0.01, "correlation {}", cov / var);
        for chunk in order.chunks_exact(n / 10) {
            let mut tenths = [0usize; 10];
            for &e in chunk {
                tenths[(e as usize * 10 / n).min(9)] += 1;
            }
            let expect = chunk.len() as f64 / 10.0;
            assert!(
                tenths
                    .iter()
                    .all(|&t| (t as f64 - expect).abs() < 0.05 * expect),
                "{tenths:?}"
            );
        }
        // Small orders (one bucket) are plain Fisher-Yates permutations.
        let mut small = random_order::<usize>(1000, &mut SplitMix64::new(1));
        small.sort();
        assert_eq!(small, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn chase_orders_are_pinned() {
        // The orders of a seed must never change: results taken with one
        // version compare with results taken with the next.
        let mut b = Buf::new(4 << 20);
        let mut lines = |pattern, len: usize, chains, seed| {
            let c = Chase::build(&mut b.bytes()[..len], pattern, chains, seed).unwrap();
            c.walk(0, 8).iter().map(|o| o / LINE).collect::<Vec<_>>()
        };
        // One bucket (Fisher-Yates), two buckets (scatter-shuffle), pages.
        assert_eq!(
            lines(ChasePattern::Random, 1 << 20, 1, 0x5eed_1234),
            [8928, 4570, 11991, 8747, 8439, 10428, 8000, 2710]
        );
        assert_eq!(
            lines(ChasePattern::Random, 4 << 20, 1, 7),
            [2611, 44947, 53435, 14113, 14253, 27259, 55790, 28786]
        );
        assert_eq!(
            lines(ChasePattern::Page { pages_per_group: 2 }, 1 << 20, 2, 9),
            [14865, 14913, 14867, 14910, 14859, 14974, 14930, 14931]
        );
        let order = random_order::<u32>(100_000, &mut SplitMix64::new(3));
        assert_eq!(
            order[..8],
            [73117, 77114, 74876, 15643, 75439, 68706, 77171, 78027]
        );
    }

    #[test]
    fn parse_patterns() {
        assert_eq!(ChasePattern::parse("random"), Ok(ChasePattern::Random));
        assert_eq!(
            ChasePattern::parse("page"),
            Ok(ChasePattern::Page { pages_per_group: 1 })
        );
        assert_eq!(
            ChasePattern::parse("page:4"),
            Ok(ChasePattern::Page { pages_per_group: 4 })
        );
        assert_eq!(
            ChasePattern::parse("stride"),
            Ok(ChasePattern::Stride { bytes: 64 })
        );
        assert_eq!(
            ChasePattern::parse("stride:128"),
            Ok(ChasePattern::Stride { bytes: 128 })
        );
        assert_eq!(
            ChasePattern::parse("zigzag").unwrap_err(),
            "unknown pattern 'zigzag'; valid: random, page, stride"
        );
        assert!(ChasePattern::parse("page:0").is_err());
        for bad in [
            "stride:4",
            "stride:12",
            "stride:2147483648",
            "page:262145",
            "page:-1",
        ] {
            let e = ChasePattern::parse(bad).unwrap_err();
            assert!(e.contains("N must be"), "{bad}: {e}");
        }
        assert_eq!(
            ChasePattern::parse("stride:8"),
            Ok(ChasePattern::Stride { bytes: 8 })
        );
        for p in ["random", "page", "page:3", "stride", "stride:256"] {
            assert_eq!(ChasePattern::parse(p).unwrap().name(), p);
        }
    }

    #[test]
    fn unaligned_buffer_and_leftovers() {
        let mut b = Buf::new(64 * 1024);
        // Start 8 bytes in: lines start at the next 64-byte boundary.
        let mut c = Chase::build(&mut b.bytes()[8..], ChasePattern::Random, 3, 1).unwrap();
        assert_eq!(c.lines_per_chain(), 1023 / 3);
        assert!(c.verify_cycle());
        assert!(c.walk(0, 10).iter().all(|o| (o + 8) % 64 == 0));
        let r = c.run(1000);
        assert_eq!(r.steps, 1000);
    }

    #[test]
    fn fixed_and_dynamic_chain_counts_agree() {
        let mut b = Buf::new(1 << 20);
        let mut c = Chase::build(b.bytes(), ChasePattern::Random, 17, 5).unwrap();
        assert!(c.verify_cycle());
        // After lines_per_chain steps every chain is back at its head.
        let heads: usize = c.heads.iter().fold(0, |a, &x| a.wrapping_add(x));
        assert_eq!(c.run(c.lines_per_chain() as u64).sum, heads);
        let mut c = Chase::build(b.bytes(), ChasePattern::Random, 4, 5).unwrap();
        let heads: usize = c.heads.iter().fold(0, |a, &x| a.wrapping_add(x));
        assert_eq!(c.run(3 * c.lines_per_chain() as u64).sum, heads);
    }

    #[test]
    fn runs_continue_where_the_last_one_stopped() {
        let mut b = Buf::new(1 << 20);
        let base = b.ptr as usize;
        let mut c = Chase::build(b.bytes(), ChasePattern::Random, 3, 9).unwrap();
        let per = c.lines_per_chain() as u64;
        let offset = |c: &Chase, k: usize, n: usize| c.walk(k, n + 1)[n] + base;
        // 10 + 15 steps end where 25 steps from the heads end, not at step 15.
        c.run(10);
        let sum = c.run(15).sum;
        let want: usize = (0..3).fold(0, |a, k| a.wrapping_add(offset(&c, k, 25)));
        assert_eq!(sum, want);
        assert_ne!(offset(&c, 0, 25), offset(&c, 0, 15));
        // Going round the rest of the lap brings every chain home.
        let heads: usize = c.heads.iter().fold(0, |a, &x| a.wrapping_add(x));
        assert_eq!(c.run(per - 25).sum, heads);
        c.run(7);
        c.rewind();
        let first: usize = (0..3).fold(0, |a, k| a.wrapping_add(offset(&c, k, 1)));
        assert_eq!(c.run(1).sum, first);
    }
}
