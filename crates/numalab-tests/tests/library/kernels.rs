//! Bandwidth kernels (every kernel x every ISA this CPU has, odd lengths,
//! unaligned slices) and the pointer chase (cycles, patterns, errors, and a
//! cache-vs-DRAM sanity check on this host). The kernels' speeds are
//! measured by bench/kernels.sh, not here.

use numalab::measure::chase::{Chase, ChasePattern};
use numalab::measure::kernels::{
    read_prefetch_pass, run_pass, BandwidthKernel, BandwidthKernel as K, ByteCount, Isa,
};
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// A zeroed, page-aligned allocation.
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(bytes: usize) -> Self {
        let layout = Layout::from_size_align(bytes.max(64), 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation of {bytes} bytes failed");
        Aligned { ptr, layout }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: allocated with this layout; exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }

    fn f64s(&mut self) -> &mut [f64] {
        // SAFETY: zeroed memory is valid f64s; aligned; exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut f64, self.layout.size() / 8) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

const LENGTHS: [usize; 16] = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 1000, 4099];
const OFFSETS: [usize; 3] = [0, 1, 3];
const SENTINEL: f64 = -7.25;
const S: f64 = 3.0;

/// Exactly representable data: every partial sum is exact in any order.
fn data(seed: usize, i: usize) -> f64 {
    ((i * (2 * seed + 7) + seed) % 97) as f64 * 0.5 + 1.0
}

/// Runs `k` on subslices `[off, off + n)` of page-aligned arrays with guard
/// elements around them and checks values, guards and sources.
fn check(k: BandwidthKernel, isa: Isa, n: usize, off: usize) {
    let total = off + n + 16;
    let mut arrays: Vec<Aligned> = (0..k.arrays()).map(|_| Aligned::new(total * 8)).collect();
    for (a, arr) in arrays.iter_mut().enumerate() {
        for (i, x) in arr.f64s().iter_mut().enumerate() {
            *x = if a == 0 && k.writes() {
                SENTINEL
            } else {
                data(a, i)
            };
        }
    }
    let before: Vec<Vec<f64>> = arrays.iter_mut().map(|a| a.f64s().to_vec()).collect();
    let ctx = format!("{} {} n={n} off={off}", k.name(), isa.name());
    let got = {
        let mut slices: Vec<&mut [f64]> = arrays
            .iter_mut()
            .map(|a| &mut a.f64s()[off..off + n])
            .collect();
        run_pass(k, isa, &mut slices, S)
    };
    let after: Vec<Vec<f64>> = arrays.iter_mut().map(|a| a.f64s().to_vec()).collect();
    // Sources never change; b0 only inside the slice.
    for a in 1..after.len() {
        assert_eq!(after[a], before[a], "{ctx}: source b{a} changed");
    }
    for i in (0..off).chain(off + n..after[0].len()) {
        assert_eq!(
            after[0][i], before[0][i],
            "{ctx}: b0[{i}] outside the slice changed"
        );
    }
    let src = |a: usize, i: usize| before[a][off + i];
    let b0 = |i: usize| after[0][off + i];
    match k {
        K::Read | K::ReadPrefetch => {
            let want: f64 = (0..n).map(|i| src(0, i)).sum();
            assert_eq!(got, want, "{ctx}: sum");
        }
        K::LineRead => {
            let want: f64 = (0..n).step_by(8).map(|i| src(0, i)).sum();
            assert_eq!(got, want, "{ctx}: line sum");
        }
        K::RandomRead => {} // checked separately
        _ => {}
    }
    if k.writes() {
        for i in 0..n {
            let want = match k {
                K::Write | K::WriteNt => S,
                K::LineWrite if i % 8 == 0 => S,
                K::LineWrite => SENTINEL,
                K::Copy => src(1, i),
                K::Scale => S * src(1, i),
                K::Add => src(1, i) + src(2, i),
                K::Triad => src(1, i) + S * src(2, i),
                _ => unreachable!(),
            };
            assert_eq!(b0(i), want, "{ctx}: b0[{i}]");
        }
    } else {
        assert_eq!(after[0], before[0], "{ctx}: a read kernel wrote");
    }
}

#[test]
fn every_kernel_every_isa_every_length_and_offset() {
    let isas = Isa::available();
    assert!(isas.contains(&Isa::Portable));
    for isa in isas {
        for k in BandwidthKernel::ALL {
            for n in LENGTHS {
                for off in OFFSETS {
                    check(k, isa, n, off);
                }
            }
        }
    }
}

#[test]
fn random_read_reads_the_first_element_of_lines() {
    for isa in Isa::available() {
        for n in LENGTHS {
            for off in [0, 8] {
                let mut a = Aligned::new((off + n + 8) * 8);
                let v = a.f64s();
                for (i, x) in v.iter_mut().enumerate() {
                    // Only line starts (relative to the slice) hold 1.0.
                    *x = if i >= off && (i - off) % 8 == 0 {
                        1.0
                    } else {
                        1e9
                    };
                }
                let got = run_pass(K::RandomRead, isa, &mut [&mut v[off..off + n]], S);
                assert_eq!(got, n.div_ceil(8) as f64, "n={n} off={off} {}", isa.name());
            }
        }
    }
}

#[test]
fn random_read_spreads_over_the_lines() {
    // Put the line index in each line's first element: the sum is then the
    // sum of the indexes read, close to lines * (lines - 1) / 2 when spread.
    let lines = 1 << 14;
    let mut a = Aligned::new(lines * 64);
    let v = a.f64s();
    for (i, x) in v.iter_mut().enumerate() {
        *x = if i % 8 == 0 { (i / 8) as f64 } else { 0.0 };
    }
    let got = run_pass(K::RandomRead, Isa::Portable, &mut [v], S);
    let mean = got / lines as f64;
    let uniform = (lines - 1) as f64 / 2.0;
    assert!(
        (mean - uniform).abs() < 0.05 * uniform,
        "mean line {mean}, not ~{uniform}"
    );
}

#[test]
fn prefetch_distance_does_not_change_the_sum() {
    let mut a = Aligned::new(4099 * 8);
    let v = a.f64s();
    for (i, x) in v.iter_mut().enumerate() {
        *x = data(0, i);
    }
    let want: f64 = v.iter().sum();
    for isa in Isa::available() {
        for d in [0, 64, 512, 1024, 1 << 20] {
            assert_eq!(read_prefetch_pass(isa, v, d), want, "{} d={d}", isa.name());
        }
    }
}

#[test]
fn missing_isas_are_clean_errors() {
    let have = Isa::available();
    assert!(have.contains(&Isa::detect_best()));
    for isa in Isa::ALL {
        if have.contains(&isa) {
            assert!(isa.check_available().is_ok());
            continue;
        }
        let e = isa.check_available().unwrap_err();
        assert!(e.contains(isa.name()), "{e}");
        assert!(
            e.contains("portable"),
            "the error names what the CPU has: {e}"
        );
        // Running it anyway is a panic (a programming error), never SIGILL.
        let r = std::panic::catch_unwind(|| {
            let mut v = vec![1.0; 64];
            run_pass(K::Read, isa, &mut [&mut v], 1.0)
        });
        assert!(r.is_err());
    }
}

#[test]
fn wrong_buffer_count_is_a_clear_panic() {
    let r = std::panic::catch_unwind(|| {
        let mut v = vec![1.0; 64];
        run_pass(K::Triad, Isa::Portable, &mut [&mut v], 1.0)
    });
    let e = r.unwrap_err();
    let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("takes 3 array(s), got 1"), "{msg}");
}

#[test]
fn names_parse_and_serde() {
    let names = [
        "read",
        "read-prefetch",
        "write",
        "write-nt",
        "copy",
        "scale",
        "add",
        "triad",
        "line-read",
        "line-write",
        "random-read",
    ];
    for (k, name) in BandwidthKernel::ALL.into_iter().zip(names) {
        assert_eq!(k.name(), name);
        assert_eq!(BandwidthKernel::parse(name), Ok(k));
        assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{name}\""));
    }
    assert_eq!(
        BandwidthKernel::parse("stream").unwrap_err(),
        format!("unknown kernel 'stream'; valid: {}", names.join(", "))
    );
    let arrays: Vec<usize> = BandwidthKernel::ALL.iter().map(|k| k.arrays()).collect();
    assert_eq!(arrays, [1, 1, 1, 1, 2, 2, 3, 3, 1, 1, 1]);
    for isa in Isa::ALL {
        assert_eq!(Isa::parse(isa.name()), Ok(isa));
        assert_eq!(
            serde_json::to_string(&isa).unwrap(),
            format!("\"{}\"", isa.name())
        );
    }
    assert!(Isa::parse("avx1024").unwrap_err().contains("avx1024"));
}

#[test]
fn bytes_per_pass_table() {
    let n = 1000; // 125 lines
    let bc = |program, memory| ByteCount { program, memory };
    let want = [
        (K::Read, bc(8000, 8000)),
        (K::ReadPrefetch, bc(8000, 8000)),
        (K::Write, bc(8000, 16000)),
        (K::WriteNt, bc(8000, 8000)),
        (K::Copy, bc(16000, 24000)),
        (K::Scale, bc(16000, 24000)),
        (K::Add, bc(24000, 32000)),
        (K::Triad, bc(24000, 32000)),
        (K::LineRead, bc(125 * 64, 125 * 64)),
        (K::LineWrite, bc(125 * 64, 125 * 128)),
        (K::RandomRead, bc(125 * 64, 125 * 64)),
    ];
    for (k, w) in want {
        assert_eq!(k.bytes_per_pass(n), w, "{}", k.name());
        assert_eq!(k.bytes_per_pass(0), bc(0, 0), "{}", k.name());
    }
    // A partial last line still counts as a whole line.
    assert_eq!(K::LineRead.bytes_per_pass(9), bc(128, 128));
    assert_eq!(K::LineWrite.bytes_per_pass(9), bc(128, 256));
    assert_eq!(K::RandomRead.bytes_per_pass(1), bc(64, 64));
}

// ---- pointer chase -------------------------------------------------------

fn build(a: &mut Aligned, len: usize, p: ChasePattern, chains: usize) -> Chase<'_> {
    Chase::build(&mut a.bytes()[..len], p, chains, 42)
        .unwrap_or_else(|e| panic!("{p:?} x{chains}: {e}"))
}

#[test]
fn chase_cycles_for_every_pattern_and_chain_count() {
    let len = 1 << 20;
    let mut a = Aligned::new(len);
    let patterns = [
        ChasePattern::Random,
        ChasePattern::Page { pages_per_group: 1 },
        ChasePattern::Page { pages_per_group: 3 },
        ChasePattern::Stride { bytes: 64 },
        ChasePattern::Stride { bytes: 8 },
        ChasePattern::Stride { bytes: 200 },
    ];
    for p in patterns {
        for chains in [1, 2, 4, 7] {
            let mut c = build(&mut a, len, p, chains);
            assert_eq!(c.chains(), chains);
            let elem = c.element_bytes();
            let elems = if elem == 64 { len / 64 } else { len / elem };
            assert_eq!(c.lines_per_chain(), elems / chains, "{p:?} x{chains}");
            assert!(c.verify_cycle(), "{p:?} x{chains}");
            // Each chain walks lines_per_chain elements and comes back.
            for k in 0..chains {
                let w = c.walk(k, c.lines_per_chain() + 1);
                assert_eq!(w.len(), c.lines_per_chain() + 1);
                assert_eq!(w[0], w[c.lines_per_chain()]);
            }
            let r = c.run(1000);
            assert_eq!(r.steps, 1000);
        }
    }
}

#[test]
fn verify_cycle_notices_a_broken_chase() {
    let len = 64 * 1024;
    let mut a = Aligned::new(len);
    let base = a.ptr;
    let c = build(&mut a, len, ChasePattern::Random, 2);
    assert!(c.verify_cycle());
    // Short-circuit chain 0: its second element points back to itself.
    let w = c.walk(0, 2);
    // SAFETY: w[1] is an element offset inside the buffer, and the link
    // written is an element of it: this is the memory corruption the check
    // exists for, done behind the chase's borrow on purpose.
    unsafe { (base.add(w[1]) as *mut usize).write(base as usize + w[1]) };
    assert!(!c.verify_cycle());
}

#[test]
fn page_pattern_stays_inside_groups() {
    let len = 4 << 20;
    let mut a = Aligned::new(len);
    for ppg in [1, 4] {
        for chains in [1, 4] {
            let c = build(
                &mut a,
                len,
                ChasePattern::Page {
                    pages_per_group: ppg,
                },
                chains,
            );
            let group = ppg * 4096;
            let lines_per_group = group / 64;
            let mut leaves = 0;
            let mut transitions = 0;
            for k in 0..chains {
                let w = c.walk(k, c.lines_per_chain());
                for t in w.windows(2) {
                    transitions += 1;
                    if t[0] / group != t[1] / group {
                        leaves += 1;
                    }
                }
                // Each group's lines are visited in one contiguous run.
                let mut groups: Vec<usize> = w.iter().map(|o| o / group).collect();
                groups.dedup();
                let runs = groups.len();
                groups.sort();
                groups.dedup();
                assert_eq!(
                    runs,
                    groups.len(),
                    "ppg {ppg} chain {k}: a group was revisited"
                );
            }
            let frac = leaves as f64 / transitions as f64;
            let want = 1.0 / lines_per_group as f64;
            assert!(
                (frac - want).abs() < 0.2 * want,
                "ppg {ppg} x{chains}: {frac} of transitions leave the group, want ~{want}"
            );
            // ...and inside a group the order is not sequential.
            let w = c.walk(0, c.lines_per_chain());
            let adjacent = w.windows(2).filter(|t| t[1] == t[0] + 64).count();
            assert!(adjacent * 10 < w.len(), "{adjacent} sequential steps");
        }
    }
}

#[test]
fn stride_pattern_visits_in_order() {
    let len = 1 << 20;
    let mut a = Aligned::new(len);
    for stride in [8, 64, 256, 4096] {
        for chains in [1, 2] {
            let c = build(&mut a, len, ChasePattern::Stride { bytes: stride }, chains);
            let per = c.lines_per_chain();
            assert_eq!(per, len / stride / chains);
            for k in 0..chains {
                let w = c.walk(k, per + 1);
                let want: Vec<usize> = (0..per)
                    .map(|i| (k * per + i) * stride)
                    .chain([k * per * stride])
                    .collect();
                assert_eq!(w, want, "stride {stride} chain {k}");
            }
        }
    }
}

#[test]
fn random_pattern_is_not_sequential() {
    let len = 16 << 20;
    let mut a = Aligned::new(len);
    let c = build(&mut a, len, ChasePattern::Random, 1);
    let w = c.walk(0, c.lines_per_chain());
    assert_eq!(w.len(), len / 64);
    let adjacent = w.windows(2).filter(|t| t[0].abs_diff(t[1]) == 64).count();
    assert!(
        adjacent < w.len() / 1000,
        "{adjacent} of {} successors are adjacent",
        w.len()
    );
    let same_page = w.windows(2).filter(|t| t[0] / 4096 == t[1] / 4096).count();
    assert!(
        same_page < w.len() / 100,
        "{same_page} successors in the same page"
    );
    // Another seed gives another order.
    let first: Vec<usize> = w[..100].to_vec();
    let c2 = Chase::build(&mut a.bytes()[..len], ChasePattern::Random, 1, 43).unwrap();
    assert_ne!(c2.walk(0, 100), first);
}

#[test]
fn chase_build_errors() {
    let mut a = Aligned::new(8192);
    let mut err = |len: usize, p: ChasePattern, chains: usize| {
        Chase::build(&mut a.bytes()[..len], p, chains, 1).unwrap_err()
    };
    assert!(err(8192, ChasePattern::Random, 0).contains("chains must be 1 to 64"));
    assert!(err(8192, ChasePattern::Random, 65).contains("not 65"));
    let e = err(64, ChasePattern::Random, 1);
    assert!(
        e.contains("holds 1 lines") && e.contains("at least 2"),
        "{e}"
    );
    let e = err(4096, ChasePattern::Random, 64);
    assert!(e.contains("64 chain(s) need at least 128"), "{e}");
    let e = err(8192, ChasePattern::Stride { bytes: 12 }, 1);
    assert!(e.contains("multiple of 8"), "{e}");
    let e = err(8192, ChasePattern::Stride { bytes: 0 }, 1);
    assert!(e.contains("multiple of 8"), "{e}");
    let e = err(8192, ChasePattern::Stride { bytes: 16384 }, 1);
    assert!(e.contains("larger than the 8192-byte buffer"), "{e}");
    let e = err(8192, ChasePattern::Stride { bytes: 8192 }, 1);
    assert!(e.contains("at least 2"), "{e}");
    let e = err(8192, ChasePattern::Page { pages_per_group: 0 }, 1);
    assert!(e.contains("at least 1 page"), "{e}");
    assert!(Chase::build(&mut [], ChasePattern::Random, 1, 1)
        .unwrap_err()
        .contains("a 0-byte buffer"));
    // The smallest valid chase: 2 lines.
    let c = Chase::build(&mut a.bytes()[..128], ChasePattern::Random, 1, 1).unwrap();
    assert!(c.verify_cycle());
}

#[test]
fn chase_pattern_parse() {
    assert_eq!(ChasePattern::parse("random"), Ok(ChasePattern::Random));
    assert_eq!(
        ChasePattern::parse("page"),
        Ok(ChasePattern::Page { pages_per_group: 1 })
    );
    assert_eq!(
        ChasePattern::parse("stride"),
        Ok(ChasePattern::Stride { bytes: 64 })
    );
    assert_eq!(
        ChasePattern::parse("x").unwrap_err(),
        "unknown pattern 'x'; valid: random, page, stride"
    );
}

/// Nanoseconds per step of a random single-chain chase over `bytes`: the
/// best of 3 runs (other processes only ever make a run slower).
fn chase_ns(bytes: usize, steps: u64) -> f64 {
    let mut a = Aligned::new(bytes);
    let mut c = build(&mut a, bytes, ChasePattern::Random, 1);
    c.run(steps / 4); // warm caches and TLB
    (0..3)
        .map(|_| {
            let r = c.run(steps);
            std::hint::black_box(r.sum);
            r.ns_per_step()
        })
        .fold(f64::MAX, f64::min)
}

#[test]
fn host_cache_chase_is_faster_than_dram_chase() {
    let _turn = crate::common::turn();
    let small = chase_ns(256 << 10, 4_000_000);
    let big = chase_ns(256 << 20, 2_000_000);
    eprintln!("random chase: 256 KiB {small:.2} ns, 256 MiB {big:.2} ns per load");
    assert!(
        small * 3.0 < big,
        "a 256 KiB chase ({small:.2} ns) should be much faster than a 256 MiB one ({big:.2} ns)"
    );
}
