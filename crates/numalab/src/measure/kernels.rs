//! Bandwidth kernels with run-time ISA selection. (Being written.)

use serde::Serialize;

/// A bandwidth kernel. Array roles (`bufs[i]` of [`run_pass`]) follow STREAM:
/// `copy` b0 = b1, `scale` b0 = s*b1, `add` b0 = b1 + b2, `triad` b0 = b1 + s*b2;
/// `read`, `read-prefetch`, `line-read`, `random-read` read b0; `write`,
/// `write-nt`, `line-write` write b0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
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

/// Instruction set a kernel is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Isa {
    Portable,
    Sse2,
    Avx2,
    Avx512,
    Neon,
}
