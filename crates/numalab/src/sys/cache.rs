//! Cache-line maintenance from user space.

/// Whether [`flush_line`] writes back and invalidates lines on this
/// architecture (x86-64: `clflush`; AArch64: `dc civac`, which Linux lets
/// user space run); elsewhere it does nothing.
pub const FLUSH_SUPPORTED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// Writes back and invalidates, in every cache, the line holding `x`.
#[inline(always)]
pub fn flush_line<T>(x: &T) {
    let p = x as *const T as *const u8;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: clflush of an address a live reference points into; SSE2 (and
    // so clflush) is baseline on x86-64.
    unsafe {
        std::arch::x86_64::_mm_clflush(p)
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: clean and invalidate by the address of a live reference;
    // Linux lets user space do it (SCTLR_EL1.UCI).
    unsafe {
        std::arch::asm!("dc civac, {0}", in(reg) p, options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Waits for the flushes issued before it to finish.
#[inline(always)]
pub fn flush_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a fence; no memory operand.
    unsafe {
        std::arch::x86_64::_mm_mfence()
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier; no memory operand.
    unsafe {
        std::arch::asm!("dsb ish", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flushed_line_keeps_its_value() {
        let words: Vec<u64> = (0..64).collect();
        for w in &words {
            flush_line(w);
        }
        flush_fence();
        assert_eq!(words.iter().sum::<u64>(), 63 * 64 / 2);
    }
}
