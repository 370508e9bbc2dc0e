//! Multi-node tests of the placement experiments (sweep, loaded-latency,
//! c2c, apexmap, policies, blas, per-array placement, sizes, pdm --measure,
//! scenarios, scaling --copies, migrate, profile, plans and stripes, the
//! C API from a C program)
//! inside the QEMU guest, as in guest.rs: each machine boots once and runs the steps of every experiment; the tests of
//! each experiment live in guest_experiments/<command>.rs. Timings inside the
//! guest mean nothing and are never asserted; placement and counts are real.

use crate::common;

#[path = "guest_experiments/apexmap.rs"]
mod apexmap;
#[path = "guest_experiments/blas.rs"]
mod blas;
#[path = "guest_experiments/c2c.rs"]
mod c2c;
#[path = "guest_experiments/capi.rs"]
mod capi;
#[path = "guest_experiments/loaded_latency.rs"]
mod loaded_latency;
#[path = "guest_experiments/migrate.rs"]
mod migrate;
#[path = "guest_experiments/model.rs"]
mod model;
#[path = "guest_experiments/placement.rs"]
mod placement;
#[path = "guest_experiments/plan.rs"]
mod plan;
#[path = "guest_experiments/policies.rs"]
mod policies;
#[path = "guest_experiments/profile.rs"]
mod profile;
#[path = "guest_experiments/scaling.rs"]
mod scaling;
#[path = "guest_experiments/scenarios.rs"]
mod scenarios;
#[path = "guest_experiments/sizes.rs"]
mod sizes;
#[path = "guest_experiments/sweep.rs"]
mod sweep;

use common::{boot, boot_with, boot_with_files, Guest, LazyGuest};

/// The Quartet guest (4 nodes in a ring, 2 CPUs each) with the placement,
/// topology and error steps of guest.rs and most experiments' steps. The
/// Quartet's steps are split over three guests that boot side by side
/// (main.rs): one guest of them all took 1073 s here, alone most of the
/// lane.
pub(crate) fn quartet() -> &'static Guest {
    crate::guest(&QUARTET)
}
pub(crate) static QUARTET: LazyGuest = LazyGuest::new(|| {
    let steps: Vec<(&str, &str)> = [
        // First, on a fresh machine: placement, topology and errors.
        crate::guest::QUARTET_STEPS,
        sweep::QUARTET_STEPS,
        scenarios::QUARTET_STEPS,
        loaded_latency::QUARTET_STEPS,
        c2c::QUARTET_STEPS,
        apexmap::QUARTET_STEPS,
        policies::QUARTET_STEPS,
        sizes::QUARTET_STEPS,
        scaling::QUARTET_STEPS,
        migrate::QUARTET_STEPS,
        capi::QUARTET_STEPS,
    ]
    .concat();
    boot_with_files("quartet", "6.12", &steps, &[], &capi::programs())
});

/// The Quartet guest of the longest measurements: blas, per-array
/// placement with pdm and the whole report (guest_report.rs), the folder
/// packed last.
pub(crate) fn quartet_measures() -> &'static Guest {
    crate::guest(&QUARTET_MEASURES)
}
pub(crate) static QUARTET_MEASURES: LazyGuest = LazyGuest::new(|| {
    let steps: Vec<(&str, &str)> = [
        blas::QUARTET_STEPS,
        placement::QUARTET_STEPS,
        crate::guest_report::QUARTET_STEPS,
        model::QUARTET_STEPS,
    ]
    .concat();
    boot("quartet", "6.12", &steps)
});

/// The Quartet guest of `numalab profile` and of the plans made from its
/// profiles (plan.rs reads the profile steps' plan.json).
pub(crate) fn quartet_profile() -> &'static Guest {
    crate::guest(&QUARTET_PROFILE)
}
pub(crate) static QUARTET_PROFILE: LazyGuest = LazyGuest::new(|| {
    let steps: Vec<(&str, &str)> = [profile::QUARTET_STEPS, plan::QUARTET_STEPS].concat();
    boot("quartet", "6.12", &steps)
});

/// The Quartet guest for `numalab profile --refine`, its vCPUs on one host
/// thread: refinement's perf events make the guest kernel patch its own
/// code, which multi-threaded TCG sometimes gets wrong ("Oops: int3",
/// guest/README.md).
fn quartet_for_refinement() -> &'static Guest {
    crate::guest(&QUARTET_FOR_REFINEMENT)
}
pub(crate) static QUARTET_FOR_REFINEMENT: LazyGuest = LazyGuest::new(|| {
    boot_with(
        "quartet",
        "6.12",
        profile::REFINE_STEPS,
        &["--tcg", "single"],
    )
});

/// The Quartet guest for the profile's truth suite, fresh: at the end of
/// the experiments' guest (after a hundred steps) truth_slices' S (0, 0)
/// was estimated 0.083 (95% CI 0.036–0.182) against a truth of 0.250,
/// which a fresh guest has not shown (issue 29 follows it up).
pub(crate) fn quartet_for_truth() -> &'static Guest {
    crate::guest(&QUARTET_FOR_TRUTH)
}
pub(crate) static QUARTET_FOR_TRUTH: LazyGuest =
    LazyGuest::new(|| boot("quartet", "6.12", profile::TRUTH_STEPS));

/// The ring guest with CPU-less node 4 (HMAT) with every experiment's steps,
/// and the whole report's.
pub(crate) fn ring() -> &'static Guest {
    crate::guest(&RING)
}
pub(crate) static RING: LazyGuest = LazyGuest::new(|| {
    let steps: Vec<(&str, &str)> = [
        crate::guest::RING_STEPS,
        sweep::RING_STEPS,
        scenarios::RING_STEPS,
        loaded_latency::RING_STEPS,
        c2c::RING_STEPS,
        apexmap::RING_STEPS,
        policies::RING_STEPS,
        migrate::RING_STEPS,
        profile::RING_STEPS,
        crate::guest_report::RING_STEPS,
    ]
    .concat();
    boot("ring4-cpuless", "6.12", &steps)
});
