//! Random streams: one small, fast generator (splitmix64) for every place
//! that needs reproducible pseudo-random numbers: pointer-chase orders,
//! Apex-MAP addresses, c2c line orders, kernel index streams.
//!
//! Not for cryptography. Seeded explicitly so that every experiment can be
//! replayed exactly.

/// The splitmix64 output function: a good 64-bit mix of any input (a
/// counter, a seed). Kernels use it to derive independent indexes from a
/// loop counter without a data dependence between loads.
#[inline(always)]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A splitmix64 stream: a 64-bit counter stepped by the golden ratio, each
/// state mixed by [`mix64`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The increment of the counter (2^64 / golden ratio).
    const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    /// A stream starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        mix64(self.0)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below
    /// n / 2^64). `n` must be at least 1.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1), with 53 random bits.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Shuffles `v` in place (Fisher-Yates): every order equally likely.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_splitmix64() {
        // Reference values of splitmix64 from seed 0 (Vigna's splitmix64.c).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
        assert_eq!(mix64(SplitMix64::GAMMA), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn below_unit_and_shuffle_stay_in_range() {
        let mut r = SplitMix64::new(42);
        let mut seen = [0usize; 7];
        for _ in 0..7000 {
            seen[r.below(7)] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        for _ in 0..1000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        let mut v: Vec<u32> = (0..100).collect();
        r.shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
        // Same seed, same stream.
        assert_eq!(SplitMix64::new(9).next_u64(), SplitMix64::new(9).next_u64());
    }
}
