//! Binding threads: the calling thread, a thread by id, the whole process,
//! to a set's CPUs; the n-th thread of a team by a thread policy; and
//! checking where a thread may run and runs.

use crate::args::{self, fill_mask, fill_message};
use crate::sets::{numalab_set, set_of, SetObject};
use crate::{guard, numalab_status, Fail, Result, NUMALAB_CPU_MASK_WORDS, NUMALAB_MESSAGE_BYTES};
use numalab::placement::threads;
use numalab::placement::ThreadPolicy;
use std::ffi::{c_char, c_int, c_uint};

/// Where a thread may run and runs, against the CPUs asked for it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct numalab_thread_check {
    /// The thread's id (the caller's own when 0 was given).
    pub tid: c_int,
    /// 1 when it may run only on CPUs asked and runs on one of them.
    pub verified: c_int,
    /// The CPU it runs on (the calling thread: now; another: at its last
    /// run), or -1 when unknown.
    pub running_cpu: c_int,
    /// How many CPUs its affinity mask allows.
    pub allowed_count: c_uint,
    /// The CPUs its affinity mask allows (bit `c % 64` of word `c / 64`).
    pub allowed: [u64; NUMALAB_CPU_MASK_WORDS],
    /// Every way it differs from the request, "; "-separated; empty when
    /// verified.
    pub message: [c_char; NUMALAB_MESSAGE_BYTES],
}

impl Default for numalab_thread_check {
    fn default() -> Self {
        Self {
            tid: 0,
            verified: 0,
            running_cpu: -1,
            allowed_count: 0,
            allowed: [0; NUMALAB_CPU_MASK_WORDS],
            message: [0; NUMALAB_MESSAGE_BYTES],
        }
    }
}

fn cpus_of(s: &SetObject) -> Result<&numalab::IdSet> {
    let cpus = &s.set().cpus;
    if cpus.is_empty() {
        return Err(Fail::invalid(format!(
            "the set has no CPU ({}) to run threads on",
            s.set()
        )));
    }
    Ok(cpus)
}

/// Binds the calling thread to the set's CPUs.
#[no_mangle]
pub extern "C" fn numalab_bind_thread(s: *const numalab_set) -> numalab_status {
    guard("numalab_bind_thread", || {
        let s = set_of(s, "set")?;
        threads::bind_thread(0, cpus_of(&s)?)?;
        Ok(())
    })
}

/// Binds thread `tid` (the kernel's id, `gettid()`; 0: the caller) to the
/// set's CPUs.
#[no_mangle]
pub extern "C" fn numalab_bind_thread_id(tid: c_int, s: *const numalab_set) -> numalab_status {
    guard("numalab_bind_thread_id", || {
        let s = set_of(s, "set")?;
        threads::bind_thread(tid, cpus_of(&s)?)?;
        Ok(())
    })
}

/// Binds every thread of the process to the set's CPUs (threads created
/// later inherit the mask of the thread that creates them).
#[no_mangle]
pub extern "C" fn numalab_bind_process(s: *const numalab_set) -> numalab_status {
    guard("numalab_bind_process", || {
        let s = set_of(s, "set")?;
        threads::bind_process(cpus_of(&s)?)?;
        Ok(())
    })
}

fn team_cpu(s: &SetObject, policy: &str, team: usize, index: usize) -> Result<u32> {
    let p = ThreadPolicy::parse(policy).map_err(Fail::invalid)?;
    let cpus = cpus_of(s)?;
    if team == 0 {
        return Err(Fail::invalid(
            "the team has no thread; team must be at least 1",
        ));
    }
    if index >= team {
        return Err(Fail::invalid(format!(
            "thread {index} is not in a team of {team} (0 to {})",
            team - 1
        )));
    }
    let room = match &p {
        ThreadPolicy::Explicit(list) => list.len(),
        _ => cpus.len(),
    };
    if team > room {
        return Err(Fail::invalid(format!(
            "a team of {team} threads does not fit on the {room} CPUs of {{{cpus}}}: one CPU a thread"
        )));
    }
    let order = p
        .assign(&s.machine, cpus, team, true)
        .map_err(Fail::invalid)?;
    Ok(order[index])
}

/// The CPU thread `index` of a team of `team` threads gets under thread
/// policy `policy` over the set's CPUs: `"compact"` (fill one node's
/// cores, then the next: threads sharing data), `"scatter"` (one thread
/// per node in turn: threads with their own data), or an explicit list
/// `"0,2,4,6"` (thread i on the i-th CPU). One CPU per thread: a team
/// larger than the set is `NUMALAB_E_INVALID`.
///
/// # Safety
/// `policy` is NULL or a NUL-terminated string; `cpu` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_team_cpu(
    s: *const numalab_set,
    policy: *const c_char,
    team: usize,
    index: usize,
    cpu: *mut c_uint,
) -> numalab_status {
    guard("numalab_team_cpu", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        let policy = unsafe { args::text(policy, "policy") }?;
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(cpu, "cpu") }?;
        *out = team_cpu(&s, policy, team, index)?;
        Ok(())
    })
}

/// Binds the calling thread, thread `index` of a team of `team`, to the
/// one CPU `numalab_team_cpu` gives it; `*cpu` (when not NULL) gets that
/// CPU. With OpenMP: `numalab_bind_team_member(s, "scatter",
/// omp_get_num_threads(), omp_get_thread_num(), NULL)` in a parallel
/// region.
///
/// # Safety
/// `policy` is NULL or a NUL-terminated string; `cpu` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_bind_team_member(
    s: *const numalab_set,
    policy: *const c_char,
    team: usize,
    index: usize,
    cpu: *mut c_uint,
) -> numalab_status {
    guard("numalab_bind_team_member", || {
        let s = set_of(s, "set")?;
        // SAFETY: the caller's guarantee.
        let policy = unsafe { args::text(policy, "policy") }?;
        let c = team_cpu(&s, policy, team, index)?;
        threads::bind_thread(0, &numalab::IdSet::single(c))?;
        // SAFETY: the caller's guarantee.
        if let Some(out) = unsafe { cpu.as_mut() } {
            *out = c;
        }
        Ok(())
    })
}

/// The kernel's id of the calling thread (`gettid()`).
///
/// # Safety
/// `tid` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_thread_id(tid: *mut c_int) -> numalab_status {
    guard("numalab_thread_id", || {
        // SAFETY: the caller's guarantee.
        *unsafe { args::out(tid, "tid") }? = threads::current_tid();
        Ok(())
    })
}

/// Checks thread `tid` (0: the caller) against the CPUs of `asked`, in
/// one call: the CPUs its affinity mask allows, the CPU it runs on, and
/// whether both are within the set (`verified`).
///
/// # Safety
/// `out` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn numalab_check_thread(
    tid: c_int,
    asked: *const numalab_set,
    out: *mut numalab_thread_check,
) -> numalab_status {
    guard("numalab_check_thread", || {
        // SAFETY: the caller's guarantee.
        let out = unsafe { args::out(out, "out") }?;
        let s = set_of(asked, "asked")?;
        let c = threads::check_thread(tid, &s.set().cpus)?;
        let mut r = numalab_thread_check {
            tid: c.tid,
            verified: c.verified as c_int,
            running_cpu: c.running_cpu.map(|c| c as c_int).unwrap_or(-1),
            allowed_count: c.allowed.len() as c_uint,
            ..Default::default()
        };
        fill_mask(&mut r.allowed, c.allowed.iter());
        fill_message(&mut r.message, &c.problems.join("; "));
        *out = r;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::numalab_machine_load;
    use crate::sets::numalab_set_parse;
    use crate::*;

    fn quartet_all() -> *mut numalab_set {
        let p = std::ffi::CString::new(format!(
            "{}/../../tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let mut m = std::ptr::null_mut();
        let mut s = std::ptr::null_mut();
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(numalab_machine_load(p.as_ptr(), &mut m), NUMALAB_OK);
            assert_eq!(numalab_set_parse(m, c"all".as_ptr(), &mut s), NUMALAB_OK);
        }
        s
    }

    fn team(s: *const numalab_set, policy: &std::ffi::CStr, n: usize) -> Vec<u32> {
        (0..n)
            .map(|i| {
                let mut c = 0;
                // SAFETY: valid pointers.
                let st = unsafe { numalab_team_cpu(s, policy.as_ptr(), n, i, &mut c) };
                assert_eq!(st, NUMALAB_OK, "{policy:?} {i}");
                c
            })
            .collect()
    }

    #[test]
    fn teams_are_laid_out_by_thread_policy() {
        let s = quartet_all();
        assert_eq!(team(s, c"scatter", 4), [0, 2, 4, 6]);
        assert_eq!(team(s, c"scatter", 8), [0, 2, 4, 6, 1, 3, 5, 7]);
        assert_eq!(team(s, c"compact", 3), [0, 1, 2]);
        assert_eq!(team(s, c"6,1", 2), [6, 1]);
        let mut c = 0;
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                numalab_team_cpu(s, c"scatter".as_ptr(), 9, 0, &mut c),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                numalab_team_cpu(s, c"scatter".as_ptr(), 4, 4, &mut c),
                NUMALAB_E_INVALID
            );
            assert_eq!(
                numalab_team_cpu(s, c"spread".as_ptr(), 4, 0, &mut c),
                NUMALAB_E_INVALID
            );
            let e = std::ffi::CStr::from_ptr(numalab_last_error())
                .to_str()
                .unwrap();
            assert!(e.contains("unknown thread policy 'spread'"), "{e}");
            assert_eq!(
                numalab_team_cpu(s, c"scatter".as_ptr(), 0, 0, &mut c),
                NUMALAB_E_INVALID
            );
        }
    }

    #[test]
    fn a_bound_thread_checks_as_verified() {
        let mut m = std::ptr::null_mut();
        let mut s = std::ptr::null_mut();
        // SAFETY: valid pointers.
        unsafe {
            assert_eq!(
                crate::machine::numalab_machine_load(std::ptr::null(), &mut m),
                NUMALAB_OK
            );
            assert_eq!(numalab_set_parse(m, c"all".as_ptr(), &mut s), NUMALAB_OK);
        }
        let (s, m) = (s as usize, m as usize);
        std::thread::spawn(move || {
            let s = s as *const numalab_set;
            let mut cpu = 0;
            let mut c = numalab_thread_check::default();
            let mut tid = 0;
            // SAFETY: valid pointers.
            unsafe {
                assert_eq!(
                    numalab_bind_team_member(s, c"compact".as_ptr(), 1, 0, &mut cpu),
                    NUMALAB_OK
                );
                assert_eq!(numalab_thread_id(&mut tid), NUMALAB_OK);
                let mut one = std::ptr::null_mut();
                assert_eq!(
                    crate::sets::numalab_set_from_cpus(m as *const _, &cpu, 1, &mut one),
                    NUMALAB_OK
                );
                assert_eq!(numalab_check_thread(0, one, &mut c), NUMALAB_OK);
            }
            assert_eq!(
                (c.tid, c.verified, c.running_cpu, c.allowed_count),
                (tid, 1, cpu as c_int, 1)
            );
            assert_eq!(c.allowed[cpu as usize / 64], 1 << (cpu % 64));
        })
        .join()
        .unwrap();
    }
}
