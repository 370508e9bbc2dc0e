//! The bottom layer: what every other module of the library stands on,
//! and which calls nothing above it.
//!
//! - [`sys`]: system calls made directly (async-signal-safe).
//! - [`next`]: the next definitions of the functions the library
//!   interposes, found at its start.
//! - [`channel`] and [`queue`]: where records go, and the lock-free queue
//!   that takes them there.
//! - [`state`]: the process-wide switches and counters, and what the
//!   environment asks ([`state::config`]).
//! - [`emit`]: a record out, and the files written beside the records.
//! - [`stacks`]: the calling thread's stack, for an allocation's Frame
//!   records.

pub mod channel;
pub mod emit;
pub mod next;
pub mod queue;
pub mod stacks;
pub mod state;
pub mod sys;

pub use emit::emit;
