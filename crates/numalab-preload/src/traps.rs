//! Debug traps the kernel does not claim. The word counter and refinement
//! watch words with hardware breakpoints (perf events); a trap the kernel
//! cannot tie to a live event is sent to the program as SIGTRAP, whose
//! default action ends it with a core dump: one profile of
//! profile_truth.c in about 200 here (a virtual machine) died so.
//! While the library watches, it holds SIGTRAP: a hardware-breakpoint trap
//! with the program's action at its default is dropped, and
//! everything else goes where it went without the library (the program's
//! handler, or the default action for an `int3` or a single step).

use crate::runtime::sys;
use crate::signals::{chain, real_sigaction, take_signal, KeptAction};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// `si_code` of a trap from a debug register (`TRAP_HWBKPT`), and of a
/// debug exception whose status names no cause (`TRAP_BRKPT`: how the
/// kernel reports one with an empty DR6, which some hypervisors give).
const TRAP_BRKPT: i32 = 1;
const TRAP_HWBKPT: i32 = 4;

/// The program's SIGTRAP action while the library holds the signal.
static PROGRAM: KeptAction = KeptAction::new();
static GUARDED: AtomicBool = AtomicBool::new(false);

/// Takes SIGTRAP, keeping the action in place as the program's.
pub fn guard() {
    if GUARDED.load(SeqCst) {
        return;
    }
    if !take_signal(libc::SIGTRAP, on_trap, None, &PROGRAM) {
        return;
    }
    GUARDED.store(true, SeqCst);
}

/// The program's SIGTRAP action, for the interposed `sigaction`, while
/// the library holds the signal.
pub fn program_action() -> Option<&'static KeptAction> {
    GUARDED.load(SeqCst).then_some(&PROGRAM)
}

/// What happens to a SIGTRAP with this `si_code` given the program's
/// action.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    /// A stray breakpoint trap of the library's own watches.
    Drop,
    /// The default action, as without the library: sent again.
    Default,
    /// As the program asked: its handler, or a signal another process
    /// sent, ignored or taken by default as the program set.
    Program,
}

fn fate(si_code: i32, handler: libc::sighandler_t) -> Fate {
    let by_kernel = si_code > 0;
    match handler {
        libc::SIG_DFL | libc::SIG_IGN if by_kernel => {
            if matches!(si_code, TRAP_HWBKPT | TRAP_BRKPT) {
                Fate::Drop
            } else {
                Fate::Default
            }
        }
        _ => Fate::Program,
    }
}

extern "C" fn on_trap(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO.
    let code = unsafe { (*info).si_code };
    match fate(code, PROGRAM.get().sa_sigaction) {
        Fate::Drop => {}
        Fate::Default => {
            // An `int3` or a single step returns past the instruction: the
            // default action must be taken now, not on a repeat.
            if let Some(real) = real_sigaction() {
                // SAFETY: a zeroed sigaction is SIG_DFL.
                unsafe {
                    let dfl: libc::sigaction = std::mem::zeroed();
                    real(sig, &dfl, std::ptr::null_mut());
                }
            }
            sys::raise_here(sig);
        }
        Fate::Program => chain(&PROGRAM, sig, info, ctx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_breakpoint_traps_without_a_program_handler_are_dropped() {
        let handler = on_trap as *const () as libc::sighandler_t;
        assert_eq!(fate(TRAP_HWBKPT, libc::SIG_DFL), Fate::Drop);
        assert_eq!(fate(TRAP_BRKPT, libc::SIG_IGN), Fate::Drop);
        // int3 (SI_KERNEL) and a single step (TRAP_TRACE) end the program
        // as before; `kill -TRAP` is ignored or taken as the program set.
        assert_eq!(fate(0x80, libc::SIG_DFL), Fate::Default);
        assert_eq!(fate(2, libc::SIG_IGN), Fate::Default);
        assert_eq!(fate(libc::SI_USER, libc::SIG_DFL), Fate::Program);
        assert_eq!(fate(libc::SI_USER, libc::SIG_IGN), Fate::Program);
        assert_eq!(fate(TRAP_HWBKPT, handler), Fate::Program);
    }
}
