//! The guest lane: tests that boot QEMU guests with emulated NUMA nodes (guest/boot.sh).
//!
//! One binary per lane (scripts/lanes.py): each former test file is a
//! module here, so the binary is linked once and its tests share one
//! process (and `common::turn`, which keeps measurements apart).

#[path = "../common/mod.rs"]
mod common;

mod guest;
mod guest_experiments;
mod guest_report;

/// Every guest of the lane, longest first, so that the short ones fill in
/// at the end (booted three at a time on this 2-core host, which keeps both
/// CPUs 98% busy through the lane: what shortens it is less work in the
/// guests, not another order). The guest lane alone on 2026-12-03, boot
/// included: the main Quartet 555 s, profile's 266 s and the truth suite's
/// 263 s (one guest since), the measurements' 449 s, the ring 261 s,
/// refinement's 146 s, 6.1 70 s; the lane 722 s. The first test that asks
/// for a guest starts them all in this order (`common::start_guests`).
static GUESTS: &[&common::LazyGuest] = &[
    &guest_experiments::QUARTET,
    &guest_experiments::QUARTET_PROFILE,
    &guest_experiments::QUARTET_MEASURES,
    &guest_experiments::RING,
    &guest_experiments::QUARTET_FOR_REFINEMENT,
    &guest::OLD_KERNEL,
];

/// `g` once booted.
pub(crate) fn guest(g: &'static common::LazyGuest) -> &'static common::Guest {
    g.get(GUESTS)
}
