//! The kernel calls placement makes: `crate::sys::numa` (memory policy,
//! page moves, affinity, capabilities, thread limits), with its errors as
//! [`PlacementError`]s where placement reports them.

pub use crate::sys::numa::*;

use super::PlacementError;

/// Starts `f` on a thread of scope `s`, as `Scope::spawn` does, but a
/// thread the system refuses (EAGAIN, ENOMEM: a limit reached) is an
/// error naming `what` and the limits on threads, where `Scope::spawn`
/// would panic. Code whose other threads wait for this one at a barrier
/// must release them on the error (see the sweep's and the harness's
/// start gates).
pub fn spawn_scoped<'scope, 'env, T: Send + 'scope>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    what: &str,
    f: impl FnOnce() -> T + Send + 'scope,
) -> Result<std::thread::ScopedJoinHandle<'scope, T>, PlacementError> {
    try_spawn_scoped(s, what, f).map_err(PlacementError::Os)
}
