//! Binding threads of the running program to CPUs, and checking where a
//! thread may run and runs against what was asked: the thread half of the
//! placement API (the C API and the Python package build on it).
//!
//! Thread ids are the kernel's (`gettid()`); 0 means the calling thread.
//! Binding the whole process binds every thread it has now; threads
//! created later inherit the mask of the thread that creates them.

use super::sys;
use super::{PlacementError, PlacementError as E};
use crate::IdSet;
use serde::Serialize;

pub use crate::sys::process::current_tid;

/// Binds thread `tid` (0: the caller) to `cpus`.
pub fn bind_thread(tid: i32, cpus: &IdSet) -> Result<(), PlacementError> {
    if cpus.is_empty() {
        return Err(E::Invalid(
            "the set holds no CPU to bind a thread to".into(),
        ));
    }
    if tid < 0 {
        return Err(E::Invalid(format!(
            "thread id {tid} is negative; give a thread's id (gettid) or 0 for the calling thread"
        )));
    }
    sys::set_affinity(tid, cpus).map_err(|e| affinity_error(e, tid, cpus))
}

/// Binds every thread this process has now to `cpus`; returns how many.
/// Threads that exit meanwhile are skipped.
pub fn bind_process(cpus: &IdSet) -> Result<usize, PlacementError> {
    if cpus.is_empty() {
        return Err(E::Invalid(
            "the set holds no CPU to bind the process to".into(),
        ));
    }
    let mut bound = 0;
    for tid in own_threads()? {
        match sys::set_affinity(tid, cpus) {
            Ok(()) => bound += 1,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => return Err(affinity_error(e, tid, cpus)),
        }
    }
    Ok(bound)
}

/// The ids of this process's threads, sorted.
pub fn own_threads() -> Result<Vec<i32>, PlacementError> {
    let mut tids: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .map_err(|e| E::Os(format!("listing /proc/self/task: {e}")))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

fn affinity_error(e: std::io::Error, tid: i32, cpus: &IdSet) -> PlacementError {
    let who = if tid == 0 {
        "the calling thread".to_string()
    } else {
        format!("thread {tid}")
    };
    match e.raw_os_error() {
        Some(libc::EINVAL) => E::Invalid(format!(
            "cannot bind {who} to CPUs {{{cpus}}}: none of them is online and allowed for this process (allowed: {})",
            sys::get_affinity(0).map(|s| s.to_string()).unwrap_or_default()
        )),
        Some(libc::ESRCH) => E::Invalid(format!("no thread {tid}")),
        Some(libc::EPERM) => E::Permission(format!(
            "binding {who}: {e} (another user's thread needs CAP_SYS_NICE)"
        )),
        _ => E::Os(format!("sched_setaffinity for {who}: {e}")),
    }
}

/// Where a thread may run and runs, against the CPUs asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadCheck {
    /// The thread (the caller's own id when 0 was given).
    pub tid: i32,
    /// The CPUs it was asked to run on.
    pub asked: IdSet,
    /// The CPUs the kernel lets it run on (its affinity mask).
    pub allowed: IdSet,
    /// The CPU it runs on: now for the calling thread, at its last run for
    /// another (/proc/self/task/TID/stat).
    pub running_cpu: Option<u32>,
    /// Whether it may run only on CPUs asked and runs on one of them.
    pub verified: bool,
    /// Every way it differs from the request, one sentence each.
    pub problems: Vec<String>,
}

/// Checks thread `tid` (0: the caller) against `asked`.
pub fn check_thread(tid: i32, asked: &IdSet) -> Result<ThreadCheck, PlacementError> {
    if tid < 0 {
        return Err(E::Invalid(format!(
            "thread id {tid} is negative; give a thread's id (gettid) or 0 for the calling thread"
        )));
    }
    let me = current_tid();
    let (tid, own) = if tid == 0 || tid == me {
        (me, true)
    } else {
        (tid, false)
    };
    let allowed =
        sys::get_affinity(if own { 0 } else { tid }).map_err(|e| affinity_error(e, tid, asked))?;
    let running_cpu = if own {
        sys::current_cpu()
    } else {
        last_cpu(tid)?
    };
    let mut problems = Vec::new();
    let extra = allowed.difference(asked);
    if !extra.is_empty() {
        problems.push(format!(
            "thread {tid} may also run on CPUs {{{extra}}}, outside the {{{asked}}} asked"
        ));
    }
    match running_cpu {
        Some(c) if !asked.contains(c) => problems.push(format!(
            "thread {tid} runs on CPU {c}, outside the {{{asked}}} asked"
        )),
        Some(_) => {}
        None => problems.push(format!("the CPU thread {tid} runs on is unknown")),
    }
    Ok(ThreadCheck {
        tid,
        asked: asked.clone(),
        allowed,
        running_cpu,
        verified: problems.is_empty(),
        problems,
    })
}

/// The CPU a thread of this process last ran on.
fn last_cpu(tid: i32) -> Result<Option<u32>, PlacementError> {
    let path = format!("/proc/self/task/{tid}/stat");
    let stat = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => E::Invalid(format!(
            "no thread {tid} in this process (it has exited, or belongs to another process)"
        )),
        _ => E::Os(format!("reading {path}: {e}")),
    })?;
    Ok(super::verify::stat_last_cpu(&stat))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_bound_to_one_cpu_checks_against_it() {
        let all = sys::get_affinity(0).unwrap();
        let cpu = all.last().unwrap();
        let one = IdSet::single(cpu);
        let (tid, check_inside) = std::thread::spawn(move || {
            bind_thread(0, &one).unwrap();
            (current_tid(), check_thread(0, &one).unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(check_inside.tid, tid);
        assert_eq!(check_inside.allowed, IdSet::single(cpu));
        assert_eq!(check_inside.running_cpu, Some(cpu));
        assert!(check_inside.verified, "{:?}", check_inside.problems);
        // The whole mask asked of a one-CPU thread: it may run elsewhere.
        let me = check_thread(0, &IdSet::single(cpu)).unwrap();
        if all.len() > 1 {
            assert!(!me.verified);
            assert!(
                me.problems[0].contains("may also run on CPUs"),
                "{:?}",
                me.problems
            );
        }
    }

    #[test]
    fn another_thread_is_checked_by_its_id() {
        let all = sys::get_affinity(0).unwrap();
        let cpu = all.first().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(current_tid()).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        bind_thread(tid, &IdSet::single(cpu)).unwrap();
        let c = check_thread(tid, &IdSet::single(cpu)).unwrap();
        assert_eq!(c.tid, tid);
        assert_eq!(c.allowed, IdSet::single(cpu));
        done_tx.send(()).unwrap();
        h.join().unwrap();
        // join returns when the kernel clears the thread's tid word, a
        // moment before the task leaves /proc: wait for it to go.
        let task = format!("/proc/self/task/{tid}");
        for _ in 0..500 {
            if !std::path::Path::new(&task).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let e = check_thread(tid, &all).unwrap_err().to_string();
        assert!(e.contains(&format!("no thread {tid}")), "{e}");
    }

    #[test]
    fn bad_requests_are_one_line_errors() {
        let e = bind_thread(0, &IdSet::new()).unwrap_err().to_string();
        assert_eq!(e, "the set holds no CPU to bind a thread to");
        let e = bind_thread(0, &IdSet::single(4000))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cannot bind the calling thread to CPUs {4000}"),
            "{e}"
        );
        let e = bind_thread(-3, &IdSet::single(0)).unwrap_err().to_string();
        assert!(e.contains("thread id -3 is negative"), "{e}");
        assert!(bind_process(&IdSet::new()).is_err());
    }

    #[test]
    fn binding_the_process_binds_every_thread() {
        // In a child process, whose threads are its own (the test
        // harness's threads would be bound too).
        // The child allocates and starts threads although the harness has
        // threads of its own: glibc's fork resets its allocator's locks in
        // the child, and the child locks nothing else the harness holds.
        let trial = crate::sys::child::in_child(
            || {
                let all = sys::get_affinity(0).unwrap();
                let cpu = all.first().unwrap();
                let (go, wait) = std::sync::mpsc::channel::<()>();
                let wait = std::sync::Arc::new(std::sync::Mutex::new(wait));
                let helpers: Vec<_> = (0..2)
                    .map(|_| {
                        let w = wait.clone();
                        std::thread::spawn(move || {
                            let _ = w.lock().unwrap().recv();
                        })
                    })
                    .collect();
                while own_threads().unwrap().len() < 3 {
                    std::thread::yield_now();
                }
                let bound = bind_process(&IdSet::single(cpu)).unwrap_or(0);
                let ok = bound == 3
                    && own_threads()
                        .unwrap()
                        .iter()
                        .all(|&t| sys::get_affinity(t).unwrap() == IdSet::single(cpu));
                drop(go);
                for h in helpers {
                    let _ = h.join();
                }
                i32::from(!ok)
            },
            std::time::Duration::from_secs(60),
            crate::sys::child::SAID_BYTES,
        );
        assert!(
            matches!(trial, crate::sys::child::Trial::Exited { code: 0, .. }),
            "{trial:?}"
        );
    }
}
