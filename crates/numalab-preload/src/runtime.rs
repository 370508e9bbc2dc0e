//! The bottom layer: what every other module of the library stands on.
//! Nothing here calls a module outside `runtime` (the contract crate's
//! records aside), so the hooks, the handlers and the sampler can all use
//! it.
//!
//! - [`state`]: the process-wide switches and counters, the library's own
//!   thread, and what the environment asks ([`state::config`]).
//! - [`emit`](mod@emit): a record out, and the files written beside the
//!   records; [`queue`] and [`channel`]: the lock-free queue that takes
//!   records to their file, and that file.
//! - [`stacks`]: the calling thread's stack, for an allocation's Frame
//!   records, taken by [`unwind`] (the library's own unwinder).
//! - [`sys`]: system calls made directly, and the clocks; [`pagemap`]: which
//!   pages of a range are present, huge or swapped, a run at a time.
//! - [`next`]: the next definitions of the functions the library
//!   interposes, found at its start (libc's `syscall` among them:
//!   [`next::real_syscall`]).
//!
//! `use crate::runtime::emit` brings both the module and its function.

pub mod channel;
pub mod emit;
pub mod next;
pub mod pagemap;
pub mod queue;
pub mod stacks;
pub mod state;
pub mod sys;
pub mod unwind;

pub use emit::emit;
