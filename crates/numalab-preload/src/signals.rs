//! Signals the library takes for handlers of its own (SIGSEGV for the
//! samples, fault.rs; the word counter's timer signal, words.rs; SIGTRAP,
//! traps.rs), with the program's action for each kept: the interposed
//! `sigaction` reads and replaces it, and a signal that is not the
//! library's goes where the program asked.

use crate::runtime::{next, sys};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

type SigactionFn = unsafe extern "C" fn(i32, *const libc::sigaction, *mut libc::sigaction) -> i32;

/// The libc `sigaction` this library's interposes.
pub fn real_sigaction() -> Option<SigactionFn> {
    static S: next::Symbol = next::Symbol::new("sigaction\0");
    S.get().map(|p| {
        // SAFETY: the next definition of "sigaction" is that function.
        unsafe { std::mem::transmute::<usize, SigactionFn>(p) }
    })
}

/// A signal's action as the program last set it, while the library's own
/// handler holds the signal (SIGSEGV in fault.rs, the word counter's timer
/// signal in words.rs): the interposed `sigaction` reads and replaces it,
/// and faults or signals that are not the library's go to it.
pub struct KeptAction {
    action: UnsafeCell<libc::sigaction>,
    /// A writer is changing `action`: readers wait.
    writing: AtomicBool,
}

// SAFETY: `action` is written only under `writing` (one writer at a time,
// by compare_exchange) and read only while `writing` is clear.
unsafe impl Sync for KeptAction {}

impl KeptAction {
    /// SIG_DFL with no flags, until the program (or the action in place
    /// when the library took the signal) sets one.
    pub const fn new() -> KeptAction {
        KeptAction {
            // SAFETY: an all-zero sigaction is SIG_DFL with no flags.
            action: UnsafeCell::new(unsafe { std::mem::zeroed() }),
            writing: AtomicBool::new(false),
        }
    }

    /// The program's action now.
    pub fn get(&self) -> libc::sigaction {
        while self.writing.load(SeqCst) {
            std::hint::spin_loop();
        }
        // SAFETY: read while no writer holds `writing` (see KeptAction).
        unsafe { *self.action.get() }
    }

    /// Replaces the program's action; returns the previous one.
    pub fn set(&self, a: &libc::sigaction) -> libc::sigaction {
        while self
            .writing
            .compare_exchange(false, true, SeqCst, SeqCst)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: this thread holds `writing`.
        let old = unsafe { std::ptr::replace(self.action.get(), *a) };
        self.writing.store(false, SeqCst);
        old
    }
}

/// A library handler's signature (`SA_SIGINFO`).
pub type Handler = extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void);

/// Takes `sig` for `handler` (`SA_SIGINFO | SA_ONSTACK | SA_RESTART`, with
/// `blocked` blocked while it runs), keeping the action in place in
/// `kept` as the program's; whether it was taken.
pub fn take_signal(sig: i32, handler: Handler, blocked: Option<i32>, kept: &KeptAction) -> bool {
    let Some(real) = real_sigaction() else {
        return false;
    };
    // SAFETY: zeroed sigactions are valid to fill; the handler has the
    // SA_SIGINFO signature.
    unsafe {
        let mut ours: libc::sigaction = std::mem::zeroed();
        ours.sa_sigaction = handler as *const () as usize;
        ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut ours.sa_mask);
        if let Some(b) = blocked {
            libc::sigaddset(&mut ours.sa_mask, b);
        }
        let mut old: libc::sigaction = std::mem::zeroed();
        if real(sig, &ours, &mut old) != 0 {
            return false;
        }
        kept.set(&old);
    }
    true
}

/// Delivers a fault or signal that is not the library's as the program
/// asked (`kept`: its action for `sig`).
pub fn chain(kept: &KeptAction, sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let a = kept.get();
    // SAFETY: info is the kernel's siginfo_t.
    let sent = unsafe { (*info).si_code } <= 0;
    match a.sa_sigaction {
        libc::SIG_IGN if sent => {}
        libc::SIG_DFL | libc::SIG_IGN => {
            // The default action, as the kernel would take it: a real fault
            // repeats when the access runs again; a sent signal is sent
            // again, delivered once this handler returns.
            if let Some(real) = real_sigaction() {
                // SAFETY: a zeroed sigaction is SIG_DFL.
                unsafe {
                    let dfl: libc::sigaction = std::mem::zeroed();
                    real(sig, &dfl, std::ptr::null_mut());
                }
            }
            if sent {
                sys::raise_here(sig);
            }
        }
        handler => {
            if a.sa_flags & libc::SA_RESETHAND != 0 {
                // SAFETY: zeroed is SIG_DFL.
                kept.set(&unsafe { std::mem::zeroed() });
            }
            // The program's mask for its handler, as the kernel would set
            // it (SIGSEGV itself stays blocked unless SA_NODEFER).
            // SAFETY: a zeroed sigset is valid to fill.
            let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid sigsets; the handler is the program's own, of
            // the signature its flags say.
            unsafe {
                let mask = a.sa_mask;
                if a.sa_flags & libc::SA_NODEFER != 0 {
                    libc::pthread_sigmask(libc::SIG_UNBLOCK, &sigset_of(sig), std::ptr::null_mut());
                }
                libc::pthread_sigmask(libc::SIG_BLOCK, &mask, &mut old);
                if a.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(handler);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(i32) = std::mem::transmute(handler);
                    f(sig);
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            }
        }
    }
}

fn sigset_of(sig: i32) -> libc::sigset_t {
    // SAFETY: a zeroed sigset is valid to initialise.
    unsafe {
        let mut s: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut s);
        libc::sigaddset(&mut s, sig);
        s
    }
}
