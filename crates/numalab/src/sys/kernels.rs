//! Bandwidth kernels with run-time ISA selection.
//!
//! One call of [`run_pass`] streams once over the kernel's arrays. Kernels come
//! in several instruction-set flavours ([`Isa`]): explicit SSE2, AVX2 and
//! AVX-512 code on x86-64 (inner functions compiled with
//! `#[target_feature]`, entered only after run-time detection, so forcing an
//! ISA the CPU lacks is an error, never SIGILL), and portable Rust loops that
//! LLVM vectorizes for the baseline of the target (SSE2 on x86-64, NEON on
//! aarch64: there [`Isa::Neon`] is the portable code, which LLVM vectorizes
//! with NEON, plus `prfm` prefetches and `stnp` non-temporal stores).
//!
//! Every kernel is correct for any length and alignment: the SIMD flavours
//! store to 64-byte aligned addresses of the destination (`b0`) after a scalar
//! head, load with unaligned loads from the other arrays (aligned loads for
//! the read kernels), and finish with a scalar tail. Results are bit-identical
//! to the scalar reference: no FMA (`triad` is a multiply then an add), so
//! changing the ISA changes speed, never values.

use crate::random::mix64;
use serde::{Deserialize, Serialize};

/// A bandwidth kernel. Array roles (`bufs[i]` of [`run_pass`]) follow STREAM:
/// `copy` b0 = b1, `scale` b0 = s*b1, `add` b0 = b1 + b2, `triad` b0 = b1 + s*b2;
/// `read`, `read-prefetch`, `line-read`, `random-read` read b0; `write`,
/// `write-nt`, `line-write` write b0.
///
/// | kernel          | arrays | what one pass does                                           |
/// |-----------------|--------|--------------------------------------------------------------|
/// | `read`          | 1      | sum of b0 (8 independent vector accumulators)                |
/// | `read-prefetch` | 1      | `read` plus software prefetch [`PREFETCH_DISTANCE`] ahead    |
/// | `write`         | 1      | b0\[i\] = s, ordinary stores                                 |
/// | `write-nt`      | 1      | b0\[i\] = s, non-temporal (streaming) stores, then a fence   |
/// | `copy`          | 2      | b0 = b1                                                      |
/// | `scale`         | 2      | b0 = s*b1                                                    |
/// | `add`           | 3      | b0 = b1 + b2                                                 |
/// | `triad`         | 3      | b0 = b1 + s*b2                                               |
/// | `line-read`     | 1      | sum of b0\[8k\]: one f64 per 64-byte line                    |
/// | `line-write`    | 1      | b0\[8k\] = s: one f64 per 64-byte line                       |
/// | `random-read`   | 1      | sum of one f64 from each of ⌈n/8⌉ pseudo-random lines of b0  |
///
/// `line-*` and `random-read` make one scalar access per line, so they are
/// the same code for every ISA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BandwidthKernel {
    Read,
    ReadPrefetch,
    Write,
    WriteNt,
    Copy,
    Scale,
    Add,
    Triad,
    LineRead,
    LineWrite,
    RandomRead,
}

/// Bytes moved by one pass of a kernel over arrays of `n` f64 each.
///
/// `program` counts what the program reads and writes, as STREAM does;
/// `memory` counts what the memory system moves: an ordinary store that
/// misses the caches first reads the line (write-allocate, "RFO") and later
/// writes it back, so it costs twice; a non-temporal store does not read.
/// Line kernels count whole 64-byte lines (the classic convention: the
/// hardware moves the whole line even though the program touches 8 bytes of
/// it); lines touched = ⌈n/8⌉ (one f64 every 8 elements, starting at b0\[0\]).
///
/// | kernel                   | program      | memory        |
/// |--------------------------|--------------|---------------|
/// | `read`, `read-prefetch`  | 8n           | 8n            |
/// | `write`                  | 8n           | 16n           |
/// | `write-nt`               | 8n           | 8n            |
/// | `copy`                   | 16n          | 24n           |
/// | `scale`                  | 16n          | 24n           |
/// | `add`                    | 24n          | 32n           |
/// | `triad`                  | 24n          | 32n           |
/// | `line-read`              | 64 per line  | 64 per line   |
/// | `line-write`             | 64 per line  | 128 per line  |
/// | `random-read`            | 64 per read  | 64 per read   |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByteCount {
    pub program: u64,
    pub memory: u64,
}

impl BandwidthKernel {
    /// Every kernel, in the order of the table above.
    pub const ALL: [BandwidthKernel; 11] = [
        Self::Read,
        Self::ReadPrefetch,
        Self::Write,
        Self::WriteNt,
        Self::Copy,
        Self::Scale,
        Self::Add,
        Self::Triad,
        Self::LineRead,
        Self::LineWrite,
        Self::RandomRead,
    ];

    /// The kernel's name (also its serde name), e.g. "read-prefetch".
    pub fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::ReadPrefetch => "read-prefetch",
            Self::Write => "write",
            Self::WriteNt => "write-nt",
            Self::Copy => "copy",
            Self::Scale => "scale",
            Self::Add => "add",
            Self::Triad => "triad",
            Self::LineRead => "line-read",
            Self::LineWrite => "line-write",
            Self::RandomRead => "random-read",
        }
    }

    /// Parses a kernel name; an unknown name gives an error listing the valid ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let valid: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                format!("unknown kernel '{s}'; valid: {}", valid.join(", "))
            })
    }

    /// Number of arrays (buffers) the kernel uses: `bufs.len()` of [`run_pass`].
    pub fn arrays(self) -> usize {
        match self {
            Self::Copy | Self::Scale => 2,
            Self::Add | Self::Triad => 3,
            _ => 1,
        }
    }

    /// The name of each array in buffer order (`bufs[i]` of [`run_pass`]
    /// is `array_names()[i]`). The arrays read are `a`, `b` and the one
    /// written is the last name, as the placement distribution model names
    /// a kernel's quantities: copy `b = a`, scale `b = s·a`, add
    /// `c = a + b`, triad `c = a + s·b`. `bufs[0]` is the written one.
    pub fn array_names(self) -> &'static [&'static str] {
        match self {
            Self::Copy | Self::Scale => &["b", "a"],
            Self::Add | Self::Triad => &["c", "a", "b"],
            _ => &["a"],
        }
    }

    /// Bytes one pass over arrays of `n` f64 moves (see [`ByteCount`]).
    pub fn bytes_per_pass(self, n: usize) -> ByteCount {
        let n = n as u64;
        let lines = n.div_ceil(8);
        let (program, memory) = match self {
            Self::Read | Self::ReadPrefetch => (8 * n, 8 * n),
            Self::Write => (8 * n, 16 * n),
            Self::WriteNt => (8 * n, 8 * n),
            Self::Copy | Self::Scale => (16 * n, 24 * n),
            Self::Add | Self::Triad => (24 * n, 32 * n),
            Self::LineRead | Self::RandomRead => (64 * lines, 64 * lines),
            Self::LineWrite => (64 * lines, 128 * lines),
        };
        ByteCount { program, memory }
    }

    /// True if the kernel stores to b0.
    pub fn writes(self) -> bool {
        !matches!(
            self,
            Self::Read | Self::ReadPrefetch | Self::LineRead | Self::RandomRead
        )
    }
}

/// Instruction set a kernel is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Isa {
    /// Plain Rust loops, vectorized by LLVM for the target's baseline
    /// (SSE2 on x86-64). Two exceptions keep the traffic what the kernel
    /// says: `write-nt` uses the baseline streaming store (x86-64 SSE2
    /// `movntpd`, aarch64 `stnp`; ordinary stores elsewhere), and `copy` is
    /// written so that LLVM cannot turn it into a `memcpy` call.
    Portable,
    /// x86-64 SSE2 (128-bit), baseline on every x86-64 CPU.
    Sse2,
    /// x86-64 AVX2 (256-bit); no FMA is used.
    Avx2,
    /// x86-64 AVX-512F (512-bit).
    Avx512,
    /// aarch64 NEON: the portable code, which LLVM vectorizes with NEON
    /// (baseline on aarch64), with `prfm` prefetches and `stnp` stores.
    Neon,
}

impl Isa {
    /// Every ISA, whether or not this CPU has it.
    pub const ALL: [Isa; 5] = [
        Self::Portable,
        Self::Sse2,
        Self::Avx2,
        Self::Avx512,
        Self::Neon,
    ];

    /// "portable", "sse2", "avx2", "avx512" or "neon".
    pub fn name(self) -> &'static str {
        match self {
            Self::Portable => "portable",
            Self::Sse2 => "sse2",
            Self::Avx2 => "avx2",
            Self::Avx512 => "avx512",
            Self::Neon => "neon",
        }
    }

    /// Parses an ISA name (see [`Isa::name`]).
    pub fn parse(s: &str) -> Result<Isa, String> {
        Self::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| format!("unknown ISA '{s}'; valid: portable, sse2, avx2, avx512, neon"))
    }

    /// The widest ISA this CPU runs, detected at run time.
    pub fn detect_best() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Self::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Self::Avx2;
            }
            Self::Sse2
        }
        #[cfg(target_arch = "aarch64")]
        {
            Self::Neon
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            Self::Portable
        }
    }

    /// True if this CPU runs kernels of this ISA.
    pub fn is_available(self) -> bool {
        match self {
            Self::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Self::Sse2 => true,
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "aarch64")]
            Self::Neon => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The ISAs this CPU runs, narrowest first.
    pub fn available() -> Vec<Isa> {
        Self::ALL.into_iter().filter(|i| i.is_available()).collect()
    }

    /// `Ok` if this CPU runs the ISA, else an error naming what it has.
    pub fn check_available(self) -> Result<(), String> {
        if self.is_available() {
            return Ok(());
        }
        let have: Vec<&str> = Self::available().iter().map(|i| i.name()).collect();
        Err(format!(
            "ISA '{}' is not available on this CPU ({}); it has: {}",
            self.name(),
            std::env::consts::ARCH,
            have.join(", ")
        ))
    }
}

/// Default software prefetch distance of `read-prefetch`, in bytes ahead of
/// the loads (see [`read_prefetch_pass`] to choose another).
pub const PREFETCH_DISTANCE: usize = 768;

/// One pass of `kernel` over `bufs` (b0 = `bufs[0]`, ...; roles in
/// [`BandwidthKernel`]) with scalar `s` (the value stored by the write
/// kernels, the factor of `scale` and `triad`).
///
/// Returns a value derived from what was read (the sum for the read kernels,
/// the last element written for the others, 0.0 when empty) so that callers
/// can `std::hint::black_box` it.
///
/// # Panics
/// On programming errors: `bufs.len() != kernel.arrays()`, arrays of unequal
/// lengths, or an ISA the CPU lacks (check [`Isa::check_available`] first).
pub fn run_pass(kernel: BandwidthKernel, isa: Isa, bufs: &mut [&mut [f64]], scalar: f64) -> f64 {
    assert_eq!(
        bufs.len(),
        kernel.arrays(),
        "kernel '{}' takes {} array(s), got {}",
        kernel.name(),
        kernel.arrays(),
        bufs.len()
    );
    let n = bufs[0].len();
    assert!(
        bufs.iter().all(|b| b.len() == n),
        "kernel '{}': arrays of unequal lengths {:?}",
        kernel.name(),
        bufs.iter().map(|b| b.len()).collect::<Vec<_>>()
    );
    if let Err(e) = isa.check_available() {
        panic!("run_pass: {e}");
    }
    let (first, rest) = bufs.split_at_mut(1);
    let b0: &mut [f64] = &mut *first[0];
    let src = |i: usize| -> &[f64] { &*rest[i] };
    let s = scalar;
    use BandwidthKernel as K;
    match kernel {
        K::LineRead => return line_read(b0),
        K::LineWrite => return line_write(b0, s),
        K::RandomRead => return random_read(b0),
        K::ReadPrefetch => return read_prefetch_pass(isa, b0, PREFETCH_DISTANCE),
        _ => {}
    }
    macro_rules! dispatch {
        ($m:ident) => {
            // SAFETY: the ISA was checked above; lengths are equal.
            unsafe {
                match kernel {
                    K::Read => $m::read(b0),
                    K::Write => $m::write(b0, s),
                    K::WriteNt => $m::write_nt(b0, s),
                    K::Copy => $m::copy(b0, src(0)),
                    K::Scale => $m::scale(b0, src(0), s),
                    K::Add => $m::add(b0, src(0), src(1)),
                    K::Triad => $m::triad(b0, src(0), src(1), s),
                    K::ReadPrefetch | K::LineRead | K::LineWrite | K::RandomRead => {
                        unreachable!()
                    }
                }
            }
        };
    }
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => dispatch!(sse2),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => dispatch!(avx2),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => dispatch!(avx512),
        _ => dispatch!(portable),
    }
}

/// `read-prefetch` with a chosen prefetch distance in bytes (tuning; the
/// kernel of [`run_pass`] uses [`PREFETCH_DISTANCE`]). Prefetches are hints:
/// addresses past the end of the array are harmless.
///
/// # Panics
/// If the CPU lacks `isa`.
pub fn read_prefetch_pass(isa: Isa, b0: &[f64], distance_bytes: usize) -> f64 {
    if let Err(e) = isa.check_available() {
        panic!("read_prefetch_pass: {e}");
    }
    // SAFETY: the ISA was checked above.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => sse2::read_prefetch(b0, distance_bytes),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => avx2::read_prefetch(b0, distance_bytes),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => avx512::read_prefetch(b0, distance_bytes),
            _ => portable::read_prefetch(b0, distance_bytes),
        }
    }
}

/// Elements before the first `align`-byte boundary of `p` (at most `n`).
#[inline(always)]
fn head_len(p: *const f64, align: usize, n: usize) -> usize {
    let mis = (p as usize) & (align - 1);
    if mis == 0 {
        0
    } else {
        ((align - mis) / 8).min(n)
    }
}

/// Last element of `b`, 0.0 if empty: the cheap return value of writers.
#[inline(always)]
fn last(b: &[f64]) -> f64 {
    b.last().copied().unwrap_or(0.0)
}

#[inline(always)]
fn scalar_sum(b: &[f64]) -> f64 {
    b.iter().sum()
}

/// One f64 per 64-byte line: b0\[0\], b0\[8\], ... (4 independent accumulators).
fn line_read(b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut chunks = b.chunks_exact(32);
    for c in &mut chunks {
        acc[0] += c[0];
        acc[1] += c[8];
        acc[2] += c[16];
        acc[3] += c[24];
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for x in chunks.remainder().iter().step_by(8) {
        s += *x;
    }
    s
}

fn line_write(b: &mut [f64], v: f64) -> f64 {
    let mut chunks = b.chunks_exact_mut(32);
    for c in &mut chunks {
        c[0] = v;
        c[8] = v;
        c[16] = v;
        c[24] = v;
    }
    for x in chunks.into_remainder().iter_mut().step_by(8) {
        *x = v;
    }
    if b.is_empty() {
        0.0
    } else {
        v
    }
}

/// ⌈n/8⌉ reads of the first f64 of pseudo-random lines (with repetition):
/// line k = mix64(k) scaled to the line count. The indexes come from a
/// counter, not from loaded data, so the loads are independent and overlap.
fn random_read(b: &[f64]) -> f64 {
    let n = b.len();
    let lines = n.div_ceil(8) as u64;
    let pick = |k: u64| -> usize {
        let line = ((mix64(k) as u128 * lines as u128) >> 64) as usize;
        // The last line may be partial: read its first element (always present).
        line * 8
    };
    let mut acc = [0.0f64; 4];
    let mut k = 0u64;
    while k + 4 <= lines {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: pick() < 8 * lines and its line starts before n.
            *a += unsafe { *b.get_unchecked(pick(k + j as u64)) };
        }
        k += 4;
    }
    while k < lines {
        acc[0] += b[pick(k)];
        k += 1;
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// Plain loops, vectorized by LLVM for the baseline of the target.
mod portable {
    use super::{last, scalar_sum};

    /// Sum with 16 independent accumulators, which LLVM keeps in 8 vector
    /// registers (with 8 it interleaves iterations and keeps only 4 chains).
    /// `each` is called once per block of 16 elements with its index.
    #[inline(always)]
    fn sum16(b: &[f64], mut each: impl FnMut(usize)) -> f64 {
        let mut acc = [0.0f64; 16];
        let mut chunks = b.chunks_exact(16);
        let mut i = 0;
        for c in &mut chunks {
            each(i);
            for k in 0..16 {
                acc[k] += c[k];
            }
            i += 16;
        }
        let mut s = 0.0;
        for a in acc {
            s += a;
        }
        s + scalar_sum(chunks.remainder())
    }

    pub unsafe fn read(b: &[f64]) -> f64 {
        sum16(b, |_| {})
    }

    pub unsafe fn read_prefetch(b: &[f64], dist: usize) -> f64 {
        let p = b.as_ptr() as *const u8;
        sum16(b, |i| {
            // One prefetch per 64 bytes: two per block of 128.
            super::prefetch(p.wrapping_add(i * 8 + dist));
            super::prefetch(p.wrapping_add(i * 8 + dist + 64));
        })
    }

    pub unsafe fn write(b: &mut [f64], v: f64) -> f64 {
        for x in b.iter_mut() {
            *x = v;
        }
        last(b)
    }

    /// Non-temporal stores where the architecture has them in its baseline
    /// (x86-64: SSE2 `movntpd`; aarch64: `stnp`), else ordinary stores.
    pub unsafe fn write_nt(b: &mut [f64], v: f64) -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            super::sse2::write_nt(b, v)
        }
        #[cfg(target_arch = "aarch64")]
        {
            super::aarch64::write_nt(b, v)
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            write(b, v)
        }
    }

    /// Copies in blocks of 16 with a compiler fence between blocks, which
    /// keeps LLVM from turning the loop into a `memcpy` call (glibc's memcpy
    /// switches to non-temporal stores for large sizes, changing the traffic).
    pub unsafe fn copy(d: &mut [f64], a: &[f64]) -> f64 {
        let mut dc = d.chunks_exact_mut(16);
        let mut ac = a.chunks_exact(16);
        for (x, y) in (&mut dc).zip(&mut ac) {
            let t: [f64; 16] = y.try_into().unwrap();
            x.copy_from_slice(&t);
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
        }
        for (x, y) in dc.into_remainder().iter_mut().zip(ac.remainder()) {
            *x = *y;
        }
        last(d)
    }

    pub unsafe fn scale(d: &mut [f64], a: &[f64], s: f64) -> f64 {
        for (x, y) in d.iter_mut().zip(a) {
            *x = s * *y;
        }
        last(d)
    }

    pub unsafe fn add(d: &mut [f64], a: &[f64], b: &[f64]) -> f64 {
        for ((x, y), z) in d.iter_mut().zip(a).zip(b) {
            *x = *y + *z;
        }
        last(d)
    }

    pub unsafe fn triad(d: &mut [f64], a: &[f64], b: &[f64], s: f64) -> f64 {
        for ((x, y), z) in d.iter_mut().zip(a).zip(b) {
            *x = *y + s * *z;
        }
        last(d)
    }
}

/// A read prefetch hint for the line holding `p` (any address: never faults).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; SSE is baseline on x86-64.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p as *const i8)
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: prfm is a hint and never faults.
    unsafe {
        core::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

#[cfg(target_arch = "aarch64")]
mod aarch64 {
    use super::{head_len, last};

    /// b\[i\] = v with `stnp` (non-temporal store pair) on 64-byte aligned
    /// lines, ordinary stores for the head and tail.
    pub unsafe fn write_nt(b: &mut [f64], v: f64) -> f64 {
        let n = b.len();
        let p = b.as_mut_ptr();
        let h = head_len(p, 64, n);
        for x in &mut b[..h] {
            *x = v;
        }
        let bits = v.to_bits();
        let mut i = h;
        while i + 8 <= n {
            core::arch::asm!(
                "stnp {v}, {v}, [{p}]",
                "stnp {v}, {v}, [{p}, #16]",
                "stnp {v}, {v}, [{p}, #32]",
                "stnp {v}, {v}, [{p}, #48]",
                p = in(reg) p.add(i),
                v = in(reg) bits,
                options(nostack, preserves_flags)
            );
            i += 8;
        }
        for x in &mut b[i..] {
            *x = v;
        }
        // Order the non-temporal stores before later accesses.
        core::arch::asm!("dmb ish", options(nostack, preserves_flags));
        last(b)
    }
}

/// Generates one x86-64 SIMD module from its vector type and intrinsics.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_simd {
    (
        $(#[$doc:meta])*
        mod $m:ident, feature = $feat:literal, vec = $V:ty, lanes = $L:expr,
        zero = $zero:ident, set1 = $set1:ident, load = $load:ident, loadu = $loadu:ident,
        store = $store:ident, storeu = $storeu:ident, stream = $stream:ident,
        add = $add:ident, mul = $mul:ident
    ) => {
        $(#[$doc])*
        mod $m {
            #[allow(unused_imports)]
            use core::arch::x86_64::*;
            use super::{head_len, last, scalar_sum};

            const L: usize = $L;

            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn hsum(v: $V) -> f64 {
                let mut a = [0.0f64; L];
                $storeu(a.as_mut_ptr(), v);
                a.iter().sum()
            }

            /// Sum with 8 vector accumulators; `pf` is called once per
            /// iteration of 8 vectors with the byte offset of the iteration.
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn sum(b: &[f64], pf: impl Fn(usize)) -> f64 {
                let n = b.len();
                let p = b.as_ptr();
                let h = head_len(p, 64, n);
                let mut s = scalar_sum(&b[..h]);
                let mut i = h;
                let mut a = [$zero(); 8];
                while i + 8 * L <= n {
                    pf(i * 8);
                    for k in 0..8 {
                        a[k] = $add(a[k], $load(p.add(i + k * L)));
                    }
                    i += 8 * L;
                }
                while i + L <= n {
                    a[0] = $add(a[0], $load(p.add(i)));
                    i += L;
                }
                let v = $add(
                    $add($add(a[0], a[1]), $add(a[2], a[3])),
                    $add($add(a[4], a[5]), $add(a[6], a[7])),
                );
                s += hsum(v);
                s + scalar_sum(&b[i..])
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn read(b: &[f64]) -> f64 {
                sum(b, |_| {})
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn read_prefetch(b: &[f64], dist: usize) -> f64 {
                let p = b.as_ptr() as *const u8;
                sum(b, |off| {
                    // One prefetch per line of the 8 vectors of this iteration.
                    let mut l = 0;
                    while l < 8 * L * 8 {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off + dist + l) as *const i8);
                        l += 64;
                    }
                })
            }

            /// Shared body of the kernels that store to `d`: scalar head to
            /// a 64-byte boundary of `d`, 4 vectors per iteration, single
            /// vectors, scalar tail.
            #[target_feature(enable = $feat)]
            #[inline]
            unsafe fn each(
                d: &mut [f64],
                vec: impl Fn(*mut f64, usize),
                one: impl Fn(usize) -> f64,
            ) -> f64 {
                let n = d.len();
                let p = d.as_mut_ptr();
                let h = head_len(p, 64, n);
                for i in 0..h {
                    *p.add(i) = one(i);
                }
                let mut i = h;
                while i + 4 * L <= n {
                    vec(p, i);
                    vec(p, i + L);
                    vec(p, i + 2 * L);
                    vec(p, i + 3 * L);
                    i += 4 * L;
                }
                while i + L <= n {
                    vec(p, i);
                    i += L;
                }
                while i < n {
                    *p.add(i) = one(i);
                    i += 1;
                }
                last(d)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn write(d: &mut [f64], v: f64) -> f64 {
                let x = $set1(v);
                each(d, |p, i| $store(p.add(i), x), |_| v)
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn write_nt(d: &mut [f64], v: f64) -> f64 {
                let x = $set1(v);
                let r = each(d, |p, i| $stream(p.add(i), x), |_| v);
                _mm_sfence();
                r
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn copy(d: &mut [f64], a: &[f64]) -> f64 {
                let pa = a.as_ptr();
                each(d, |p, i| $store(p.add(i), $loadu(pa.add(i))), |i| *pa.add(i))
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn scale(d: &mut [f64], a: &[f64], s: f64) -> f64 {
                let pa = a.as_ptr();
                let x = $set1(s);
                each(
                    d,
                    |p, i| $store(p.add(i), $mul(x, $loadu(pa.add(i)))),
                    |i| s * *pa.add(i),
                )
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn add(d: &mut [f64], a: &[f64], b: &[f64]) -> f64 {
                let (pa, pb) = (a.as_ptr(), b.as_ptr());
                each(
                    d,
                    |p, i| $store(p.add(i), $add($loadu(pa.add(i)), $loadu(pb.add(i)))),
                    |i| *pa.add(i) + *pb.add(i),
                )
            }

            #[target_feature(enable = $feat)]
            pub unsafe fn triad(d: &mut [f64], a: &[f64], b: &[f64], s: f64) -> f64 {
                let (pa, pb) = (a.as_ptr(), b.as_ptr());
                let x = $set1(s);
                each(
                    d,
                    |p, i| {
                        $store(p.add(i), $add($loadu(pa.add(i)), $mul(x, $loadu(pb.add(i)))))
                    },
                    |i| *pa.add(i) + s * *pb.add(i),
                )
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
x86_simd! {
    /// SSE2, 128-bit (baseline on x86-64).
    mod sse2, feature = "sse2", vec = __m128d, lanes = 2,
    zero = _mm_setzero_pd, set1 = _mm_set1_pd, load = _mm_load_pd, loadu = _mm_loadu_pd,
    store = _mm_store_pd, storeu = _mm_storeu_pd, stream = _mm_stream_pd,
    add = _mm_add_pd, mul = _mm_mul_pd
}

#[cfg(target_arch = "x86_64")]
x86_simd! {
    /// AVX2, 256-bit.
    mod avx2, feature = "avx2", vec = __m256d, lanes = 4,
    zero = _mm256_setzero_pd, set1 = _mm256_set1_pd, load = _mm256_load_pd,
    loadu = _mm256_loadu_pd, store = _mm256_store_pd, storeu = _mm256_storeu_pd,
    stream = _mm256_stream_pd, add = _mm256_add_pd, mul = _mm256_mul_pd
}

#[cfg(target_arch = "x86_64")]
x86_simd! {
    /// AVX-512F, 512-bit.
    ///
    /// Needs Rust 1.89 (the `avx512f` target feature and the AVX-512
    /// intrinsics were stabilized there): the workspace's `rust-version`.
    mod avx512, feature = "avx512f", vec = __m512d, lanes = 8,
    zero = _mm512_setzero_pd, set1 = _mm512_set1_pd, load = _mm512_load_pd,
    loadu = _mm512_loadu_pd, store = _mm512_store_pd, storeu = _mm512_storeu_pd,
    stream = _mm512_stream_pd, add = _mm512_add_pd, mul = _mm512_mul_pd
}

/// Runs a chain of dependent register operations and returns how many
/// cycles it takes (0 on an architecture without one here): the clock
/// estimate of `measure::harness`.
#[cfg(target_arch = "x86_64")]
pub fn dependent_cycles(rounds: u64) -> u64 {
    let mut x: u64 = 3;
    for _ in 0..rounds {
        // SAFETY: register arithmetic only.
        unsafe {
            std::arch::asm!(
                "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}",
                "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}",
                "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}",
                "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}", "imul {0}, {0}",
                inout(reg) x,
                options(nomem, nostack)
            );
        }
    }
    std::hint::black_box(x);
    rounds * 16 * 3
}

/// aarch64: dependent adds, one cycle each.
#[cfg(target_arch = "aarch64")]
pub fn dependent_cycles(rounds: u64) -> u64 {
    let mut x: u64 = 0;
    for _ in 0..rounds {
        // SAFETY: register arithmetic only.
        unsafe {
            std::arch::asm!(
                "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1",
                "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1",
                "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1",
                "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1", "add {0}, {0}, #1",
                inout(reg) x,
                options(nomem, nostack)
            );
        }
    }
    std::hint::black_box(x);
    rounds * 16
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub fn dependent_cycles(_rounds: u64) -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_len_reaches_the_boundary() {
        let p = 0x1000 as *const f64;
        assert_eq!(head_len(p, 64, 100), 0);
        assert_eq!(head_len(p.wrapping_add(1), 64, 100), 7);
        assert_eq!(head_len(p.wrapping_add(7), 64, 100), 1);
        assert_eq!(head_len(p.wrapping_add(3), 64, 2), 2);
        assert_eq!(head_len(p.wrapping_add(1), 16, 100), 1);
    }

    #[test]
    fn random_read_indexes_cover_every_line_of_small_buffers() {
        // With as many reads as lines, most lines are read (1 - 1/e ~ 63%).
        let lines = 4096u64;
        let mut hit = vec![false; lines as usize];
        for k in 0..lines {
            hit[((mix64(k) as u128 * lines as u128) >> 64) as usize] = true;
        }
        let frac = hit.iter().filter(|&&h| h).count() as f64 / lines as f64;
        assert!((frac - 0.632).abs() < 0.03, "{frac}");
    }

    #[test]
    fn random_read_indexes_are_pinned() {
        // Element i holds i: the sum names the lines read.
        let b: Vec<f64> = (0..8 * 1000 + 3).map(|i| i as f64).collect();
        assert_eq!(random_read(&b), 3957992.0);
        let firsts: Vec<u64> = (0..6).map(|k| mix64(k) % 1000).collect();
        assert_eq!(firsts, [0, 789, 730, 856, 252, 132]);
    }

    #[test]
    fn every_isa_agrees_with_portable_on_a_large_odd_array() {
        let n = 100_003;
        let a: Vec<f64> = (0..n).map(|i| ((i * 37) % 101) as f64 * 0.25).collect();
        let b: Vec<f64> = (0..n).map(|i| ((i * 11) % 89) as f64).collect();
        for k in BandwidthKernel::ALL {
            let mut want = vec![0.0; n];
            let (mut a1, mut b1) = (a.clone(), b.clone());
            let r0 = {
                let mut bufs: Vec<&mut [f64]> = vec![&mut want, &mut a1, &mut b1];
                bufs.truncate(k.arrays());
                if !k.writes() {
                    bufs[0].copy_from_slice(&a);
                }
                run_pass(k, Isa::Portable, &mut bufs, 1.5)
            };
            for isa in Isa::available() {
                let mut got = vec![0.0; n];
                let (mut a2, mut b2) = (a.clone(), b.clone());
                let mut bufs: Vec<&mut [f64]> = vec![&mut got, &mut a2, &mut b2];
                bufs.truncate(k.arrays());
                if !k.writes() {
                    bufs[0].copy_from_slice(&a);
                }
                let r = run_pass(k, isa, &mut bufs, 1.5);
                assert_eq!(r, r0, "{} {}", k.name(), isa.name());
                assert!(got == want, "{} {}", k.name(), isa.name());
            }
        }
    }
}
