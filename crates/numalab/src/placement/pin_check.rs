//! `numalab run --pin --verify`: where each thread of the command was
//! pinned, and the kernel's word that it ran there and stayed.
//!
//! The preload library pins each thread as it starts and writes a Pinned
//! record (the CPU asked, `sched_setaffinity`'s errno, the CPU the thread
//! ran on right after); the command's placement read at its exit gives,
//! for threads still running then, the CPUs they were allowed. A thread is
//! verified when the call succeeded, it ran on its CPU, and (if it was
//! still running at the exit) it was allowed that CPU alone.

use crate::idset::IdSet;
use crate::placement::verify::ProcessPlacement;
use numalab_profile_abi::events::Pinned;
use numalab_profile_abi::record::Record;
use serde::Serialize;

/// One thread as the library pinned it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PinnedThread {
    /// 0 the main thread, then in creation order.
    pub ordinal: u32,
    pub tid: u32,
    /// The CPU it was pinned to; `None`: `--skip` left it alone.
    pub cpu: Option<u32>,
    /// The errno of `sched_setaffinity` (0: done).
    pub errno: i32,
    /// The CPU it ran on right after.
    pub ran_on: Option<u32>,
    /// The CPUs it was allowed when the command exited; `None`: it had
    /// ended by then.
    pub allowed_at_exit: Option<IdSet>,
    /// What is wrong with it, if anything.
    pub problem: Option<String>,
}

/// Every thread of a `--pin` run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PinCheck {
    /// The CPUs in pinning order.
    pub cpus: Vec<u32>,
    /// `--skip`'s mask (bit k: the k-th created thread).
    pub skip_mask: u64,
    /// In ordinal order.
    pub threads: Vec<PinnedThread>,
    /// Other processes that pinned their threads from the list's start
    /// too (the command's children, which inherit the preload library).
    pub other_processes: usize,
    /// Threads running at the exit that the library never saw start
    /// (made by a raw `clone`, not `pthread_create`): not pinned.
    pub unseen_tids: Vec<u32>,
    /// The CPUs taken match the list's first CPUs, in any order (threads
    /// start in their own order), with no problem on any thread.
    pub verified: bool,
}

impl PinCheck {
    /// The check of process `pid` run pinned to `cpus` with `skip_mask`,
    /// from the library's records and the placement read at the exit (if
    /// any). A process that execs another program (a wrapper script) pins
    /// again in each: the last program's threads are the ones checked.
    pub fn new(
        cpus: &[u32],
        skip_mask: u64,
        pid: u32,
        records: &[Record],
        at_exit: Option<&ProcessPlacement>,
    ) -> PinCheck {
        let all: Vec<Pinned> = records.iter().filter_map(Pinned::from_record).collect();
        let mut others: Vec<u32> = all.iter().map(|p| p.pid).filter(|p| *p != pid).collect();
        others.sort_unstable();
        others.dedup();
        let last_start = all
            .iter()
            .filter(|p| p.pid == pid && p.ordinal == 0)
            .map(|p| p.time_ns)
            .max()
            .unwrap_or(0);
        let alive = |tid: u32| {
            at_exit.and_then(|p| {
                p.threads
                    .iter()
                    .find(|t| t.tid == tid as i32)
                    .map(|t| t.cpus_allowed.clone())
            })
        };
        let mut threads: Vec<PinnedThread> = all
            .iter()
            .filter(|p| p.pid == pid && p.time_ns >= last_start)
            .map(|p| {
                let allowed_at_exit = alive(p.tid);
                let problem = problem_of(p, allowed_at_exit.as_ref());
                PinnedThread {
                    ordinal: p.ordinal,
                    tid: p.tid,
                    cpu: p.cpu,
                    errno: p.errno,
                    ran_on: p.ran_on,
                    allowed_at_exit,
                    problem,
                }
            })
            .collect();
        threads.sort_by_key(|t| (t.ordinal, t.tid));
        let unseen_tids = at_exit
            .map(|p| {
                p.threads
                    .iter()
                    .map(|t| t.tid as u32)
                    .filter(|tid| !threads.iter().any(|s| s.tid == *tid))
                    .collect()
            })
            .unwrap_or_default();
        // The CPUs taken, whatever order the threads started in, are the
        // list's first ones (from its start again past its end).
        let mut taken: Vec<u32> = threads.iter().filter_map(|t| t.cpu).collect();
        let mut expected: Vec<u32> = cpus.iter().copied().cycle().take(taken.len()).collect();
        taken.sort_unstable();
        expected.sort_unstable();
        let verified =
            !threads.is_empty() && taken == expected && threads.iter().all(|t| t.problem.is_none());
        PinCheck {
            cpus: cpus.to_vec(),
            skip_mask,
            threads,
            other_processes: others.len(),
            unseen_tids,
            verified,
        }
    }
}

fn problem_of(p: &Pinned, allowed_at_exit: Option<&IdSet>) -> Option<String> {
    let cpu = p.cpu?;
    if p.errno != 0 {
        return Some(format!(
            "the kernel refused CPU {cpu}: {}",
            std::io::Error::from_raw_os_error(p.errno)
        ));
    }
    if let Some(r) = p.ran_on.filter(|r| *r != cpu) {
        return Some(format!(
            "pinned to CPU {cpu} but ran on CPU {r} right after"
        ));
    }
    match allowed_at_exit {
        Some(a) if *a != IdSet::single(cpu) => Some(format!(
            "pinned to CPU {cpu}, allowed {{{a}}} at the exit: the program changed its CPUs"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned(tid: u32, ordinal: u32, cpu: Option<u32>, ran_on: u32) -> Record {
        Pinned {
            pid: 10,
            tid,
            ordinal,
            cpu,
            errno: 0,
            ran_on: Some(ran_on),
            time_ns: 1,
        }
        .to_record()
    }

    #[test]
    fn threads_on_the_lists_cpus_in_any_start_order_are_verified() {
        // Threads 1 and 2 started in the other order: 2 took CPU 0.
        let r = [
            pinned(10, 0, Some(1), 1),
            pinned(12, 2, Some(0), 0),
            pinned(11, 1, Some(1), 1),
            pinned(13, 3, None, 0),
        ];
        let c = PinCheck::new(&[1, 0], 0x4, 10, &r, None);
        assert!(c.verified, "{c:?}");
        let order: Vec<(u32, Option<u32>)> = c.threads.iter().map(|t| (t.ordinal, t.cpu)).collect();
        assert_eq!(order, [(0, Some(1)), (1, Some(1)), (2, Some(0)), (3, None)]);
    }

    #[test]
    fn a_refusal_a_wrong_cpu_or_cpus_changed_later_are_named() {
        let mut refused = Pinned::from_record(&pinned(10, 0, Some(3), 0)).unwrap();
        refused.errno = libc::EINVAL;
        let r = [refused.to_record(), pinned(11, 1, Some(0), 1)];
        let c = PinCheck::new(&[3, 0], 0, 10, &r, None);
        assert!(!c.verified);
        assert!(
            c.threads[0]
                .problem
                .as_deref()
                .unwrap()
                .starts_with("the kernel refused CPU 3: "),
            "{:?}",
            c.threads[0].problem
        );
        assert_eq!(
            c.threads[1].problem.as_deref(),
            Some("pinned to CPU 0 but ran on CPU 1 right after")
        );
        // Taking CPUs the list does not start with fails too.
        let c = PinCheck::new(&[1, 0], 0, 10, &[pinned(10, 0, Some(0), 0)], None);
        assert!(!c.verified);
        assert_eq!(c.threads[0].problem, None);
    }

    #[test]
    fn the_last_program_of_an_exec_chain_counts_and_children_are_counted_apart() {
        let at = |mut r: Record, t: u64| {
            r.time_ns = t;
            r
        };
        let mut child = Pinned::from_record(&pinned(20, 0, Some(1), 1)).unwrap();
        child.pid = 20;
        let r = [
            // A wrapper (pid 10) pinned its main thread, then exec'd the
            // program, which pinned it again and made thread 1 on CPU 0.
            at(pinned(10, 0, Some(1), 1), 1),
            at(pinned(11, 1, Some(0), 0), 2),
            at(pinned(10, 0, Some(1), 1), 3),
            at(pinned(12, 1, Some(0), 0), 4),
            at(child.to_record(), 5),
        ];
        let c = PinCheck::new(&[1, 0], 0, 10, &r, None);
        assert!(c.verified, "{c:?}");
        let tids: Vec<u32> = c.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, [10, 12]);
        assert_eq!(c.other_processes, 1);
    }

    #[test]
    fn no_record_is_no_proof() {
        assert!(!PinCheck::new(&[0], 0, 10, &[], None).verified);
    }
}
