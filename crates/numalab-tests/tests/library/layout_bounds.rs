//! Thread layouts are bounded in the engine, whatever the front end lets
//! through: a layout of more than `MAX_LAYOUT_THREADS` threads is refused in one
//! line, the largest one is built.

use crate::common;

use common::fixture;
use numalab::placement::thread_policy::MAX_LAYOUT_THREADS;
use numalab::placement::ThreadPolicy;

#[test]
fn too_many_threads_are_refused_with_the_valid_range() {
    let m = fixture("qemu-quartet-4n2c-ring.xml");
    for policy in [ThreadPolicy::Compact, ThreadPolicy::Scatter] {
        let e = policy
            .assign(&m, &m.allowed_cpus, 50_000_000, true)
            .unwrap_err();
        assert_eq!(
            e,
            "50000000 threads is more than a layout may hold; valid: 1 to 65536"
        );
        let e = policy
            .assign(&m, &m.allowed_cpus, usize::MAX, true)
            .unwrap_err();
        assert!(e.contains("valid: 1 to 65536"), "{e}");
        let all = policy
            .assign(&m, &m.allowed_cpus, MAX_LAYOUT_THREADS, true)
            .unwrap();
        assert_eq!(all.len(), MAX_LAYOUT_THREADS);
        // Oversubscribed layouts wrap around the 8 CPUs.
        assert_eq!(all[8..16], all[..8]);
    }
}
