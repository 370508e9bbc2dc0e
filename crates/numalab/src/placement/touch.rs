//! Writing a placed buffer from pinned worker threads, as a parallel
//! program's workers would after the prefault, and where they really ran.

use super::buffer::{pin_current_thread, PlacedBuffer};
use super::sys;
use super::PlacementError;
use serde::Serialize;

/// One worker: the CPU it was pinned to and the CPU it was seen on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerCheck {
    pub requested_cpu: u32,
    pub seen_cpu: Option<u32>,
    /// Whether it ran where it was pinned.
    pub ok: bool,
}

/// Each worker, pinned to its CPU, writes its contiguous slice of the buffer
/// (whole pages, split as evenly as pages allow, in the order of `cpus`):
/// one byte per 64-byte line is incremented. Returns where each ran. A
/// buffer of fewer pages than workers leaves the last workers without a
/// slice; they do not run.
pub fn write_from_workers(
    buf: &mut PlacedBuffer,
    cpus: &[u32],
) -> Result<Vec<WorkerCheck>, PlacementError> {
    if cpus.is_empty() {
        return Ok(Vec::new());
    }
    let page = buf.page_size();
    let pages = buf.len() / page;
    let per = pages.div_ceil(cpus.len()) * page;
    let chunks = buf.as_mut_slice().chunks_mut(per.max(page));
    on_pinned_workers(
        "a worker thread",
        cpus.iter().copied().zip(chunks),
        |chunk: &mut [u8]| {
            for b in chunk.iter_mut().step_by(64) {
                *b = b.wrapping_add(1);
            }
        },
    )
}

/// Runs `work` on each `(cpu, item)` of `jobs` at once, each in a thread of
/// its own (`what`, in errors) pinned to its CPU; returns where each ran.
/// Every thread that started is joined before a refused one's error is
/// returned.
pub(crate) fn on_pinned_workers<I: Send>(
    what: &str,
    jobs: impl IntoIterator<Item = (u32, I)>,
    work: impl Fn(I) + Sync,
) -> Result<Vec<WorkerCheck>, PlacementError> {
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|(cpu, item)| {
                sys::spawn_scoped(s, what, move || -> Result<WorkerCheck, PlacementError> {
                    pin_current_thread(cpu)?;
                    work(item);
                    let seen = sys::current_cpu();
                    Ok(WorkerCheck {
                        requested_cpu: cpu,
                        seen_cpu: seen,
                        ok: seen == Some(cpu),
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h?.join()
                    .map_err(|_| PlacementError::Os(format!("{what} panicked")))?
            })
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{BufferSpec, MemoryPolicy, WeightedImpl};
    use crate::Machine;

    fn buffer(m: &Machine, pages: usize) -> PlacedBuffer {
        let spec = BufferSpec {
            size: pages * sys::page_size(),
            policy: MemoryPolicy::FirstTouch,
            thp: None,
            hugetlb: false,
            toucher: None,
            weighted: WeightedImpl::Auto,
        };
        PlacedBuffer::new(m, &spec).unwrap()
    }

    #[test]
    fn workers_write_their_slices_on_their_cpus() {
        let m = Machine::load(None).unwrap();
        let cpus: Vec<u32> = m.allowed_cpus.iter().take(2).collect();
        assert_eq!(cpus.len(), 2, "this test needs two CPUs");
        let mut buf = buffer(&m, 16);
        let checks = write_from_workers(&mut buf, &cpus).unwrap();
        assert_eq!(
            checks,
            cpus.iter()
                .map(|&c| WorkerCheck {
                    requested_cpu: c,
                    seen_cpu: Some(c),
                    ok: true
                })
                .collect::<Vec<_>>()
        );
        // Every line written exactly once, nothing else touched.
        let bytes = buf.as_slice();
        assert!(bytes.iter().step_by(64).all(|&b| b == 1));
        assert_eq!(
            bytes.iter().map(|&b| b as usize).sum::<usize>(),
            bytes.len() / 64
        );
    }

    #[test]
    fn more_workers_than_pages_leaves_the_last_idle() {
        let m = Machine::load(None).unwrap();
        let cpu = m.allowed_cpus.first().unwrap();
        let mut buf = buffer(&m, 1);
        let checks = write_from_workers(&mut buf, &[cpu, cpu, cpu]).unwrap();
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].seen_cpu, Some(cpu));
        assert!(write_from_workers(&mut buf, &[]).unwrap().is_empty());
        assert!(buf.as_slice().iter().step_by(64).all(|&b| b == 1));
    }

    #[test]
    fn a_cpu_that_does_not_exist_is_an_error() {
        let m = Machine::load(None).unwrap();
        let mut buf = buffer(&m, 2);
        let e = write_from_workers(&mut buf, &[4095]).unwrap_err();
        assert!(e.to_string().contains("cannot pin to CPU 4095"), "{e}");
    }
}
