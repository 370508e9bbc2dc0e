//! The moves themselves: the arrays prepared before them, the measured
//! buffer, and the measuring thread or the forked `migrate_pages` child
//! that runs them.

use super::figures::{Count, Header, Rep, Stage};
use super::summary::summarize;
use super::{Method, MethodResult, Plan, HUGE_2M, MOVE_PAGES_BATCH};
use crate::placement::sys::{self, KernelMask, Mode};
use crate::placement::PlacementError;
use crate::sys::child::{self, Trial};
use crate::sys::mapping::AnonymousMapping;
use crate::IdSet;
use std::time::Instant;

/// Arrays prepared before the moves (and before any fork).
pub(super) struct Work {
    /// Page addresses, as numbers for the kernel.
    pages: Vec<usize>,
    status: Vec<i32>,
    to_dest: Vec<i32>,
    to_source: Vec<i32>,
    from_mask: KernelMask,
    to_mask: KernelMask,
    pub(super) header: Header,
    pub(super) reps: Vec<Rep>,
}

impl Work {
    fn new(region: &Region, plan: &Plan) -> Self {
        let n = plan.len / plan.page;
        Work {
            pages: (0..n).map(|i| region.start() + i * plan.page).collect(),
            status: vec![0; n],
            to_dest: vec![plan.to as i32; n],
            to_source: vec![plan.from as i32; n],
            from_mask: KernelMask::new(&IdSet::single(plan.from)),
            to_mask: KernelMask::new(&IdSet::single(plan.to)),
            header: Header::default(),
            reps: vec![Rep::default(); plan.reps],
        }
    }

    /// Where the pages are, counted against `node`. No allocation.
    fn count(&mut self, node: u32) -> Result<Count, i32> {
        let mut c = Count::default();
        let mut i = 0;
        while i < self.pages.len() {
            let k = MOVE_PAGES_BATCH.min(self.pages.len() - i);
            sys::query_page_nodes(0, &self.pages[i..i + k], &mut self.status[i..i + k])
                .map_err(|e| e.raw_os_error().unwrap_or(0))?;
            i += k;
        }
        for &s in &self.status {
            if s == node as i32 {
                c.on_node += 1;
            } else if s >= 0 {
                c.elsewhere += 1;
            } else if s == -libc::ENOENT {
                c.untouched += 1;
            } else {
                c.unknown += 1;
            }
        }
        Ok(c)
    }

    /// One move of the whole buffer to `dest` by `method`: (failures, first
    /// error status). No allocation.
    fn move_to(
        &mut self,
        method: Method,
        region: &Region,
        dest_is_to: bool,
    ) -> Result<(u64, i32), i32> {
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
        match method {
            Method::MovePages => {
                let targets = if dest_is_to {
                    &self.to_dest
                } else {
                    &self.to_source
                };
                let (mut failures, mut first) = (0u64, 0i32);
                let mut i = 0;
                while i < self.pages.len() {
                    let k = MOVE_PAGES_BATCH.min(self.pages.len() - i);
                    sys::move_pages(
                        0,
                        &self.pages[i..i + k],
                        &targets[i..i + k],
                        &mut self.status[i..i + k],
                    )
                    .map_err(errno)?;
                    i += k;
                }
                for &s in &self.status {
                    if s < 0 {
                        failures += 1;
                        if first == 0 {
                            first = s;
                        }
                    }
                }
                Ok((failures, first))
            }
            Method::Mbind => {
                let mask = if dest_is_to {
                    &self.to_mask
                } else {
                    &self.from_mask
                };
                region
                    .bind(Mode::Bind, mask, sys::MPOL_MF_MOVE)
                    .map_err(errno)?;
                Ok((0, 0))
            }
            Method::MigratePages => {
                let (old, new) = if dest_is_to {
                    (&self.from_mask, &self.to_mask)
                } else {
                    (&self.to_mask, &self.from_mask)
                };
                let left = sys::migrate_pages_mask(0, old, new).map_err(errno)?;
                Ok((left as u64, 0))
            }
        }
    }

    /// Binds and touches the buffer on the source, then the timed moves.
    /// `observe(None, _)` runs once the buffer is placed, `observe(Some(rep), _)`
    /// after each forward move. Makes only system calls into prepared
    /// memory: a forked child may run it.
    fn run(
        &mut self,
        method: Method,
        region: &mut Region,
        plan: &Plan,
        observe: &mut dyn FnMut(Option<usize>, &Region),
    ) {
        if let Err((stage, errno)) = self.run_inner(method, region, plan, observe) {
            self.header.failed_stage = stage as u32;
            self.header.errno = errno;
        }
    }

    fn run_inner(
        &mut self,
        method: Method,
        region: &mut Region,
        plan: &Plan,
        observe: &mut dyn FnMut(Option<usize>, &Region),
    ) -> Result<(), (Stage, i32)> {
        let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
        region
            .bind(Mode::Bind, &self.from_mask, 0)
            .map_err(|e| (Stage::Bind, errno(e)))?;
        region.touch_pages(plan.page, 1);
        self.header.placed = self.count(plan.from).map_err(|e| (Stage::Query, e))?;
        observe(None, region);
        if method == Method::MigratePages {
            // The warm-up: carries off whatever else of this child is on
            // the source (stack pages copied before its policy was set);
            // the buffer comes back by mbind, which moves nothing else.
            self.move_to(method, region, true)
                .map_err(|e| (Stage::Move, e))?;
            self.move_to(Method::Mbind, region, false)
                .map_err(|e| (Stage::MoveBack, e))?;
        }
        for rep in 0..self.reps.len() {
            let t0 = Instant::now();
            let (failures, first_status) = self
                .move_to(method, region, true)
                .map_err(|e| (Stage::Move, e))?;
            let seconds = t0.elapsed().as_secs_f64();
            let after = self.count(plan.to).map_err(|e| (Stage::Query, e))?;
            observe(Some(rep), region);
            let back_method = if method == Method::MigratePages {
                Method::Mbind
            } else {
                method
            };
            self.move_to(back_method, region, false)
                .map_err(|e| (Stage::MoveBack, e))?;
            let back = self.count(plan.from).map_err(|e| (Stage::Query, e))?;
            self.reps[rep] = Rep {
                seconds,
                after,
                failures,
                first_status,
                back,
            };
        }
        Ok(())
    }
}

/// The measured buffer: an anonymous mapping, 2 MiB aligned, with THP
/// advice and no pages yet.
struct Region(AnonymousMapping);

impl std::ops::Deref for Region {
    type Target = AnonymousMapping;
    fn deref(&self) -> &AnonymousMapping {
        &self.0
    }
}

impl std::ops::DerefMut for Region {
    fn deref_mut(&mut self) -> &mut AnonymousMapping {
        &mut self.0
    }
}

impl Region {
    fn new(len: usize, thp: bool) -> Result<Self, PlacementError> {
        let map = AnonymousMapping::new(len, HUGE_2M)
            .map_err(|e| PlacementError::Os(format!("mmap of {len} bytes: {e}")))?;
        let advice = if thp {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // A kernel without THP refuses the advice (EINVAL): then the
        // buffer has base pages, which the result says.
        let _ = map.advise(advice);
        Ok(Region(map))
    }

    /// 2 MiB pages backing the region now (/proc/self/smaps).
    fn huge_pages(&self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = self.start() as u64;
        Some(anon_huge_kb(&text, start, start + self.len() as u64)? * 1024 / HUGE_2M as u64)
    }
}

/// The AnonHugePages (kB) of the mappings of an smaps text that overlap
/// `[start, end)`; `None` when no mapping overlaps.
fn anon_huge_kb(smaps: &str, start: u64, end: u64) -> Option<u64> {
    let mut inside = false;
    let mut found = false;
    let mut kb = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                inside = a < end && b > start;
                found |= inside;
                continue;
            }
        }
        if inside {
            if let Some(rest) = line.strip_prefix("AnonHugePages:") {
                kb += rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    found.then_some(kb)
}

pub(super) fn measure_method(plan: &Plan, method: Method) -> Result<MethodResult, PlacementError> {
    let mut region = Region::new(plan.len, plan.thp)?;
    let mut work = Work::new(&region, plan);
    let mut huge = (None, None);
    if method == Method::MigratePages {
        in_child(&mut work, &mut region, plan)?;
    } else {
        let last = plan.reps - 1;
        std::thread::scope(|s| {
            crate::placement::sys::spawn_scoped(s, "the measuring thread", || {
                if let Err(e) = sys::set_affinity(0, &IdSet::single(plan.cpu)) {
                    work.header.failed_stage = Stage::Pin as u32;
                    work.header.errno = e.raw_os_error().unwrap_or(0);
                    return;
                }
                work.header.cpu_seen = sys::current_cpu().map_or(-1, |c| c as i32);
                let mut observe = |rep: Option<usize>, region: &Region| match rep {
                    None => huge.0 = region.huge_pages(),
                    Some(r) if r == last => huge.1 = region.huge_pages(),
                    Some(_) => {}
                };
                work.run(method, &mut region, plan, &mut observe);
            })?
            .join()
            .map_err(|_| PlacementError::Os("the measuring thread panicked".into()))
        })?;
    }
    Ok(summarize(method, plan, &work, huge))
}

/// How long the `migrate_pages` child may take: far beyond any move of the
/// largest buffer `migrate` accepts; a child past it is killed and the
/// method reported failed.
const CHILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Runs the moves in a forked child (see the module documentation) and
/// reads its figures back: the child writes them as bytes on its standard
/// error, which `sys::child` collects.
fn in_child(work: &mut Work, region: &mut Region, plan: &Plan) -> Result<(), PlacementError> {
    let cpu_mask = KernelMask::new(&IdSet::single(plan.cpu));
    let reps = work.reps.len();
    let trial = child::in_child(
        || {
            // Only system calls into memory prepared before the fork.
            child_moves(work, region, plan, &cpu_mask);
            let mut sent = child::write_stderr(&work.header.encode().b);
            for rep in &work.reps {
                sent &= child::write_stderr(&rep.encode().b);
            }
            i32::from(!sent)
        },
        CHILD_LIMIT,
        Header::BYTES + reps * Rep::BYTES,
    );
    let said = match trial {
        Trial::Exited { code: 0, said } if said.len() == Header::BYTES + reps * Rep::BYTES => said,
        Trial::NotRun => {
            return Err(PlacementError::Os(format!(
                "no child for migrate_pages (pipe or fork refused): {}",
                std::io::Error::last_os_error()
            )))
        }
        _ => {
            work.header.failed_stage = Stage::Child as u32;
            work.header.errno = 0;
            return Ok(());
        }
    };
    work.header = Header::decode(&said);
    for (i, rep) in work.reps.iter_mut().enumerate() {
        *rep = Rep::decode(&said[Header::BYTES + i * Rep::BYTES..]);
    }
    Ok(())
}

fn child_moves(work: &mut Work, region: &mut Region, plan: &Plan, cpu_mask: &KernelMask) {
    if let Err(e) = sys::set_affinity_mask(0, cpu_mask) {
        work.header.failed_stage = Stage::Pin as u32;
        work.header.errno = e.raw_os_error().unwrap_or(0);
        return;
    }
    work.header.cpu_seen = sys::current_cpu().map_or(-1, |c| c as i32);
    // Without CAP_SYS_NICE the kernel moves only pages this child alone
    // maps; an error means it was not in effect anyway.
    let _ = sys::drop_effective_capability(sys::CAP_SYS_NICE);
    if let Err(e) = sys::set_mempolicy_mask(Mode::Bind, &work.to_mask) {
        work.header.failed_stage = Stage::Policy as u32;
        work.header.errno = e.raw_os_error().unwrap_or(0);
        return;
    }
    work.run(Method::MigratePages, region, plan, &mut |_, _| {});
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smaps_huge_pages_of_a_range() {
        let smaps = "7f0000000000-7f0000400000 rw-p 00000000 00:00 0\nSize: 4096 kB\nAnonHugePages: 2048 kB\n7f0000400000-7f0000800000 rw-p 00000000 00:00 0\nAnonHugePages: 4096 kB\n";
        assert_eq!(
            anon_huge_kb(smaps, 0x7f00_0000_0000, 0x7f00_0040_0000),
            Some(2048)
        );
        assert_eq!(
            anon_huge_kb(smaps, 0x7f00_0000_0000, 0x7f00_0080_0000),
            Some(6144)
        );
        assert_eq!(anon_huge_kb(smaps, 0x1000, 0x2000), None);
    }
}
