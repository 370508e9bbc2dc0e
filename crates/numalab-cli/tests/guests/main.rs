//! The guest lane: tests that boot QEMU guests with emulated NUMA nodes (guest/boot.sh).
//!
//! One binary per lane (scripts/lanes.py): each former test file is a
//! module here, so the binary is linked once and its tests share one
//! process (and `common::turn`, which keeps measurements apart).

#[path = "../common/mod.rs"]
mod common;

mod guest;
mod guest_experiments;
mod guest_mpi;
mod guest_report;

/// Every guest of the lane, longest first, so that the short ones fill in
/// at the end (booted three at a time on this 2-core host; a clean run of
/// 2026-11-29, boot included: the main Quartet 390 s, profile's 353 s, the
/// measurements' 269 s, the truth suite's 207 s, the ring 190 s,
/// refinement's 121 s, 6.1 29 s; the lane 590 s in the old order, which
/// started refinement third): the first test that asks for a guest starts
/// them all in this order (`common::start_guests`). The 6.1 guest has run
/// Open MPI's ranks since (guest_mpi.rs): booted alone on a busy host it
/// took 35-44 s with them, 18-22 s without.
static GUESTS: &[&common::LazyGuest] = &[
    &guest_experiments::QUARTET,
    &guest_experiments::QUARTET_PROFILE,
    &guest_experiments::QUARTET_MEASURES,
    &guest_experiments::QUARTET_FOR_TRUTH,
    &guest_experiments::RING,
    &guest_experiments::QUARTET_FOR_REFINEMENT,
    &guest::OLD_KERNEL,
];

/// `g` once booted.
pub(crate) fn guest(g: &'static common::LazyGuest) -> &'static common::Guest {
    g.get(GUESTS)
}
