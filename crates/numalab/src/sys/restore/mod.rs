//! System settings put back when numalab cannot do it in the normal way:
//! from a signal handler ([`handler`]: fixed slots read without locks or
//! allocation) and from a watchdog process when numalab was killed
//! ([`watchdog`]). `placement::settings` holds the settings, their journal
//! and guards, and fills these.

pub mod handler;
pub mod watchdog;

/// The names the kernel's automatic-weights switch goes by in the weighted
/// interleave directory: `auto`, or `__auto_type` where the kernel's C
/// sources define `auto` as a keyword (`placement::settings` re-exports
/// them).
pub const AUTO_NAMES: [&str; 2] = ["auto", "__auto_type"];
