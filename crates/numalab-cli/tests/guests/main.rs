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

/// Every guest of the lane, longest first (booted three at a time on this
/// 2-core host, one run on a day its CPUs were slow: the main Quartet
/// 789 s, the measurements' 586 s, refinement's 268 s, profile's 581 s, the
/// truth suite's 387 s, the ring 290 s, 6.1 115 s; the lane 1095 s; a lone
/// boot takes 17-22 s): the first test that asks for a guest starts them
/// all in this order (`common::start_guests`).
static GUESTS: &[&common::LazyGuest] = &[
    &guest_experiments::QUARTET,
    &guest_experiments::QUARTET_MEASURES,
    &guest_experiments::QUARTET_FOR_REFINEMENT,
    &guest_experiments::QUARTET_PROFILE,
    &guest_experiments::QUARTET_FOR_TRUTH,
    &guest_experiments::RING,
    &guest::OLD_KERNEL,
];

/// `g` once booted.
pub(crate) fn guest(g: &'static common::LazyGuest) -> &'static common::Guest {
    g.get(GUESTS)
}
