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

use serde::Serialize;
use std::fmt;
use std::time::{Duration, Instant};

/// Line (element) size of the random and page patterns.
pub const LINE: usize = 64;
/// Base page size used by [`ChasePattern::Page`] groups.
pub const PAGE: usize = 4096;
/// Most chains [`Chase::build`] accepts.
pub const MAX_CHAINS: usize = 64;

/// Order in which the chase visits the buffer's elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    /// group), "stride" (64 bytes) or "stride:N" (N bytes).
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("unknown pattern '{s}'; valid: random, page, stride");
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let num = |default: usize| -> Result<usize, String> {
            match arg {
                None => Ok(default),
                Some(a) => a
                    .parse::<usize>()
                    .ok()
                    .filter(|&v| v > 0)
                    .ok_or_else(|| format!("pattern '{s}': '{a}' is not a positive number")),
            }
        };
        match name {
            "random" if arg.is_none() => Ok(Self::Random),
            "page" => Ok(Self::Page {
                pages_per_group: num(1)?,
            }),
            "stride" => Ok(Self::Stride { bytes: num(64)? }),
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

/// A pointer chase laid out in a caller's buffer.
///
/// The chase holds the buffer's address: the buffer must stay allocated, and
/// must not be written by anything else, for as long as the `Chase` is used
/// (`run`, `verify_cycle`, `walk` read it).
#[derive(Debug)]
pub struct Chase {
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
    per_chain: usize,
}

/// splitmix64: a tiny, fast, good-enough PRNG.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is < n / 2^64).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}

/// An index type for the permutation (u32 halves the memory when it fits).
trait Idx: Copy {
    fn from(i: usize) -> Self;
    fn get(self) -> usize;
}

impl Idx for u32 {
    fn from(i: usize) -> Self {
        i as u32
    }
    fn get(self) -> usize {
        self as usize
    }
}

impl Idx for usize {
    fn from(i: usize) -> Self {
        i
    }
    fn get(self) -> usize {
        self
    }
}

/// Fisher-Yates shuffle. For large arrays the random index of each swap is
/// drawn 16 swaps ahead and its line prefetched, so the cache misses of the
/// random accesses overlap (a 16 M-element shuffle is several times faster).
fn shuffle<T>(v: &mut [T], rng: &mut SplitMix64) {
    const AHEAD: usize = 16;
    let n = v.len();
    if n < 4 * AHEAD {
        for i in (1..n).rev() {
            let j = rng.below(i + 1);
            v.swap(i, j);
        }
        return;
    }
    // ring[k % AHEAD] holds the partner of i = n - 1 - k.
    let mut ring = [0usize; AHEAD];
    for (k, r) in ring.iter_mut().enumerate() {
        *r = rng.below(n - k);
    }
    for i in (1..n).rev() {
        let slot = (n - 1 - i) % AHEAD;
        let j = ring[slot];
        if i > AHEAD {
            let ahead = rng.below(i - AHEAD + 1);
            ring[slot] = ahead;
            crate::measure::kernels::prefetch(v.as_ptr().wrapping_add(ahead) as *const u8);
        }
        v.swap(i, j);
    }
}

/// A uniformly random order of `0..n`.
fn random_order<T: Idx>(n: usize, rng: &mut SplitMix64) -> Vec<T> {
    let mut v: Vec<T> = (0..n).map(T::from).collect();
    shuffle(&mut v, rng);
    v
}

/// Writes the links of the chains from the visit order of the elements:
/// position p of the order goes to chain p / per; each chain's last element
/// points back to its first.
struct Linker {
    base: usize,
    elem: usize,
    per: usize,
    total: usize,
    pos: usize,
    /// Position inside the current chain.
    k: usize,
    prev: usize,
    heads: Vec<usize>,
}

impl Linker {
    #[inline(always)]
    fn push(&mut self, index: usize) {
        if self.pos >= self.total {
            return;
        }
        let addr = self.base + index * self.elem;
        if self.k == 0 {
            self.heads.push(addr);
        } else {
            // SAFETY: `prev` is an 8-byte aligned element of the buffer
            // (checked by `build`), which the caller lets the chase write.
            unsafe { (self.prev as *mut usize).write(addr) };
        }
        self.k += 1;
        if self.k == self.per {
            let head = *self.heads.last().expect("chain head");
            // SAFETY: as above.
            unsafe { (addr as *mut usize).write(head) };
            self.k = 0;
        }
        self.prev = addr;
        self.pos += 1;
    }

    /// Hints that the element `index` will be linked soon.
    #[inline(always)]
    fn prefetch(&self, index: usize) {
        crate::measure::kernels::prefetch((self.base + index * self.elem) as *const u8);
    }
}

impl Chase {
    /// Lays out a chase in the `len` bytes at `buf` (overwriting the first
    /// 8 bytes of every element), with `chains` disjoint cycles of equal
    /// length and the PRNG seeded with `seed`. Elements left over when the
    /// element count is not a multiple of `chains` are not visited.
    ///
    /// The buffer must be valid for reads and writes of `len` bytes and stay
    /// so while the `Chase` is used (see [`Chase`]).
    ///
    /// Errors: `chains` 0 or more than 64, a page group of 0 pages, a stride
    /// not a positive multiple of 8 or larger than the buffer, or fewer than
    /// 2 elements per chain.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn build(
        buf: *mut u8,
        len: usize,
        pattern: ChasePattern,
        chains: usize,
        seed: u64,
    ) -> Result<Chase, String> {
        if chains == 0 || chains > MAX_CHAINS {
            return Err(format!("chains must be 1 to {MAX_CHAINS}, not {chains}"));
        }
        if buf.is_null() {
            return Err("the chase buffer is a null pointer".into());
        }
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
        let per = elements / chains;
        let mut link = Linker {
            base,
            elem,
            per,
            total: per * chains,
            pos: 0,
            k: 0,
            prev: 0,
            heads: Vec::with_capacity(chains),
        };
        let mut rng = SplitMix64(seed);
        match pattern {
            ChasePattern::Random => {
                // A random order closed into a ring is a uniformly random
                // cyclic permutation, as Sattolo's algorithm would give.
                fn link_all<T: Idx>(order: &[T], link: &mut Linker) {
                    for (p, i) in order.iter().enumerate() {
                        if let Some(ahead) = order.get(p + 16) {
                            link.prefetch(ahead.get());
                        }
                        link.push(i.get());
                    }
                }
                if elements <= u32::MAX as usize {
                    let t = Instant::now();
                    let o = random_order::<u32>(elements, &mut rng);
                    eprintln!("shuffle {:?}", t.elapsed());
                    let t = Instant::now();
                    link_all(&o, &mut link);
                    eprintln!("link {:?}", t.elapsed());
                } else {
                    link_all(&random_order::<usize>(elements, &mut rng), &mut link);
                }
            }
            ChasePattern::Page { pages_per_group } => {
                // Groups are aligned to pages of the address space, so a
                // group is exactly `pages_per_group` real pages.
                let gbytes = pages_per_group * PAGE;
                let gbase = base & !(PAGE - 1);
                let end = base + elements * LINE;
                let groups = (end - gbase).div_ceil(gbytes);
                let mut lines: Vec<usize> = Vec::with_capacity((gbytes / LINE).min(elements));
                let mut visit = |g: usize, link: &mut Linker, rng: &mut SplitMix64| {
                    let at = |g: usize| gbase.saturating_add(g.saturating_mul(gbytes));
                    let lo = at(g).max(base);
                    let hi = at(g + 1).min(end);
                    let first = (lo - base) / LINE;
                    lines.clear();
                    lines.extend(first..first + (hi - lo) / LINE);
                    shuffle(&mut lines, rng);
                    for &l in &lines {
                        link.push(l);
                    }
                };
                if groups <= u32::MAX as usize {
                    for g in random_order::<u32>(groups, &mut rng) {
                        visit(g.get(), &mut link, &mut rng);
                    }
                } else {
                    for g in random_order::<usize>(groups, &mut rng) {
                        visit(g.get(), &mut link, &mut rng);
                    }
                }
            }
            ChasePattern::Stride { .. } => {
                for i in 0..link.total {
                    link.push(i);
                }
            }
        }
        debug_assert_eq!(link.heads.len(), chains);
        Ok(Chase {
            buf,
            base,
            elem,
            elements,
            pattern,
            heads: link.heads,
            per_chain: per,
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

    /// Follows every chain `steps` times from its first element and times it.
    pub fn run(&self, steps: u64) -> ChaseRun {
        let heads = std::hint::black_box(&self.heads[..]);
        macro_rules! fixed {
            ($($n:literal)*) => {
                match heads.len() {
                    $($n => time(|| run_fixed::<$n>(heads, steps)),)*
                    _ => time(|| run_any(heads, steps)),
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
                if p < self.base || p >= end || (p - self.base) % self.elem != 0 {
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
            if p < self.base || p >= end || p % 8 != 0 {
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
fn run_fixed<const N: usize>(heads: &[usize], steps: u64) -> usize {
    let mut p: [usize; N] = heads.try_into().expect("chain count");
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
    p.iter().fold(0usize, |a, &x| a.wrapping_add(x))
}

/// The chase for any number of chains (pointers in memory: for many chains,
/// where throughput, not single-load latency, is measured).
#[inline(never)]
fn run_any(heads: &[usize], steps: u64) -> usize {
    let mut p = heads.to_vec();
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
    }

    impl Drop for Buf {
        fn drop(&mut self) {
            // SAFETY: allocated with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) }
        }
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
        for p in ["random", "page", "page:3", "stride", "stride:256"] {
            assert_eq!(ChasePattern::parse(p).unwrap().name(), p);
        }
    }

    #[test]
    fn unaligned_buffer_and_leftovers() {
        let b = Buf::new(64 * 1024);
        // Start 8 bytes in: lines start at the next 64-byte boundary.
        let c = Chase::build(
            b.ptr.wrapping_add(8),
            64 * 1024 - 8,
            ChasePattern::Random,
            3,
            1,
        )
        .unwrap();
        assert_eq!(c.lines_per_chain(), 1023 / 3);
        assert!(c.verify_cycle());
        assert!(c.walk(0, 10).iter().all(|o| (o + 8) % 64 == 0));
        let r = c.run(1000);
        assert_eq!(r.steps, 1000);
    }

    #[test]
    fn fixed_and_dynamic_chain_counts_agree() {
        let b = Buf::new(1 << 20);
        let c = Chase::build(b.ptr, 1 << 20, ChasePattern::Random, 17, 5).unwrap();
        assert!(c.verify_cycle());
        // After lines_per_chain steps every chain is back at its head.
        let heads: usize = c.heads.iter().fold(0, |a, &x| a.wrapping_add(x));
        assert_eq!(c.run(c.lines_per_chain() as u64).sum, heads);
        let c = Chase::build(b.ptr, 1 << 20, ChasePattern::Random, 4, 5).unwrap();
        let heads: usize = c.heads.iter().fold(0, |a, &x| a.wrapping_add(x));
        assert_eq!(c.run(3 * c.lines_per_chain() as u64).sum, heads);
    }
}
