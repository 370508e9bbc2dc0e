//! The paced threads' side: their shared control block and counters, their
//! start, and each thread's loop (a stream over its buffer on a schedule;
//! see the parent module's "Pacing").

use super::*;

/// Per-thread counters, each on its own cache lines (no false sharing).
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Counter {
    pub(super) program: AtomicU64,
    pub(super) memory: AtomicU64,
    /// The thread's kernel id once it runs (0 before), for its schedstat.
    pub(super) tid: AtomicI32,
}

impl Counter {
    /// Nanoseconds the thread has waited for its CPU so far (see
    /// [`crate::sys::process::run_delay_ns`]).
    pub(super) fn waited_ns(&self) -> Option<u64> {
        match self.tid.load(Ordering::Acquire) {
            0 => None,
            tid => crate::sys::process::run_delay_ns(tid),
        }
    }
}

#[derive(Clone, Copy)]
pub(super) struct Control {
    pub(super) pace: Pace,
    pub(super) mix: TrafficMix,
}

pub(super) struct Shared {
    pub(super) go: AtomicBool,
    pub(super) stop: AtomicBool,
    /// Bumped by every change of `control`.
    pub(super) generation: AtomicU64,
    pub(super) control: Mutex<Control>,
    pub(super) counters: Vec<Counter>,
}

impl Shared {
    pub(super) fn control(&self) -> Control {
        *self.control.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a thread hands back when it ends.
pub(super) struct ThreadEnd {
    pub(super) report: WorkerReport,
    pub(super) seconds: f64,
    /// Of `seconds`, the time spent waiting for the CPU.
    pub(super) waited_seconds: Option<f64>,
}

/// Starts one thread per CPU of the spec, each reporting its setup on `tx`.
/// Stops at the first thread the OS refuses: the threads started so far,
/// and that error.
pub(super) fn spawn_threads(
    m: &Machine,
    spec: &PacedSpec,
    isa: Isa,
    chunk_bytes: usize,
    shared: &Arc<Shared>,
    tx: mpsc::Sender<Setup>,
) -> (Vec<JoinHandle<ThreadEnd>>, Option<PlacementError>) {
    let machine = Arc::new(m.clone());
    let mut handles = Vec::with_capacity(spec.cpus.len());
    for (i, &cpu) in spec.cpus.iter().enumerate() {
        let (shared, machine, tx, spec) =
            (shared.clone(), machine.clone(), tx.clone(), spec.clone());
        let h = std::thread::Builder::new()
            .name(format!("paced-cpu{cpu}"))
            .spawn(move || thread_main(i, cpu, &machine, &spec, isa, chunk_bytes, &shared, tx));
        match h {
            Ok(h) => handles.push(h),
            Err(e) => {
                let e =
                    PlacementError::Os(format!("cannot start the paced thread for CPU {cpu}: {e}"));
                return (handles, Some(e));
            }
        }
    }
    (handles, None)
}

/// The report of a thread that has nothing to show: pinned to `cpu`, never
/// seen running, no buffer, not verified.
pub(super) fn empty_report(cpu: u32, node: Option<u32>) -> WorkerReport {
    WorkerReport {
        pinned: true,
        migrations: None,
        requested_cpu: cpu,
        seen_cpus: Vec::new(),
        node,
        buffers: Vec::new(),
        gbps: Vec::new(),
        verified: false,
    }
}

/// The life of one paced thread: setup, report, wait for go, traffic.
#[allow(clippy::too_many_arguments)]
pub(super) fn thread_main(
    i: usize,
    cpu: u32,
    m: &Machine,
    spec: &PacedSpec,
    isa: Isa,
    chunk_bytes: usize,
    shared: &Shared,
    tx: mpsc::Sender<Setup>,
) -> ThreadEnd {
    // Known before the load starts, so that every mark sees this thread's
    // waits.
    shared.counters[i]
        .tid
        .store(crate::sys::process::current_tid(), Ordering::Release);
    let setup = (|| -> Result<(PlacedBuffer, WorkerReport), PlacementError> {
        pin_current_thread(cpu)?;
        let bspec = BufferSpec {
            size: spec.buffer_bytes,
            policy: spec.policy.clone(),
            thp: spec.thp,
            hugetlb: false,
            toucher: Some(cpu),
            weighted: Default::default(),
        };
        let mut buf = PlacedBuffer::new(m, &bspec)?;
        buf.as_f64_mut().fill(1.0);
        let check = check_buffer(m, &spec.policy, &buf, m.node_of_cpu(cpu))?;
        Ok((buf, WorkerReport::pinned(m, cpu, check)))
    })();
    let (mut buf, mut report) = match setup {
        Ok(x) => {
            let _ = tx.send((i, Ok(x.1.clone())));
            x
        }
        Err(e) => {
            let _ = tx.send((i, Err(e)));
            return ThreadEnd {
                report: empty_report(cpu, m.node_of_cpu(cpu)),
                seconds: 0.0,
                waited_seconds: None,
            };
        }
    };
    drop(tx);
    // Sleeps end within ~1 µs of their deadline instead of the default 50 µs.
    crate::sys::process::set_timer_slack(1000);
    while !shared.go.load(Ordering::Acquire) {
        if shared.stop.load(Ordering::Acquire) {
            return ThreadEnd {
                report,
                seconds: 0.0,
                waited_seconds: None,
            };
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let counter = &shared.counters[i];
    let waited0 = counter.waited_ns();
    let t0 = Instant::now();
    let mut stream = Stream::new(buf.as_f64_mut(), chunk_bytes / 8, isa);
    traffic(&mut stream, counter, shared);
    let seconds = t0.elapsed().as_secs_f64();
    let waited_seconds = counter
        .waited_ns()
        .zip(waited0)
        .map(|(b, a)| b.saturating_sub(a) as f64 / 1e9);
    if let Some(c) = sys::current_cpu() {
        report.seen_cpus.push(c);
    }
    let p = shared.counters[i].program.load(Ordering::Relaxed);
    report.gbps = vec![p as f64 / seconds.max(1e-9) / 1e9];
    ThreadEnd {
        report,
        seconds,
        waited_seconds,
    }
}

/// A cursor walking a buffer chunk by chunk with a traffic mix.
pub(super) struct Stream<'a> {
    buf: &'a mut [f64],
    /// Elements per chunk (a multiple of 8: whole lines).
    chunk: usize,
    isa: Isa,
    pos: usize,
    /// Position in the reads-then-writes cycle of an R:W mix.
    phase: u32,
}

impl<'a> Stream<'a> {
    pub(super) fn new(buf: &'a mut [f64], chunk: usize, isa: Isa) -> Self {
        let chunk = (chunk / 8 * 8).clamp(8, buf.len() / 8 * 8);
        Stream {
            buf,
            chunk,
            isa,
            pos: 0,
            phase: 0,
        }
    }

    /// One kernel pass over the next `elems` elements (fewer at the end of
    /// the buffer, which then wraps); returns (program, memory) bytes.
    pub(super) fn pass(&mut self, kernel: BandwidthKernel, elems: usize) -> (u64, u64) {
        if self.pos >= self.buf.len() {
            self.pos = 0;
        }
        let end = (self.pos + elems).min(self.buf.len());
        let slice = &mut self.buf[self.pos..end];
        let n = slice.len();
        let r = run_pass(kernel, self.isa, &mut [slice], 1.0);
        std::hint::black_box(r);
        self.pos = end;
        let b = kernel.bytes_per_pass(n);
        (b.program, b.memory)
    }

    /// One chunk of work; returns (program, memory) bytes.
    pub(super) fn chunk(&mut self, mix: TrafficMix) -> (u64, u64) {
        match mix {
            TrafficMix::Read => self.pass(BandwidthKernel::Read, self.chunk),
            TrafficMix::WriteNt => self.pass(BandwidthKernel::WriteNt, self.chunk),
            TrafficMix::ReadWrite { reads, writes } => {
                // Four units per chunk, each read or written whole, in the
                // cycle R reads then W writes.
                let unit = (self.chunk / 4 / 8 * 8).max(8);
                let (mut p, mut m) = (0, 0);
                for _ in 0..4 {
                    let cycle = reads + writes;
                    if self.phase >= cycle {
                        self.phase = 0;
                    }
                    let k = if self.phase < reads {
                        BandwidthKernel::Read
                    } else {
                        BandwidthKernel::Write
                    };
                    self.phase = (self.phase + 1) % cycle.max(1);
                    let (a, b) = self.pass(k, unit);
                    p += a;
                    m += b;
                }
                (p, m)
            }
        }
    }
}

/// The traffic loop of one thread, until `shared.stop`.
pub(super) fn traffic(stream: &mut Stream, counter: &Counter, shared: &Shared) {
    let mut program = 0u64;
    let mut memory = 0u64;
    let mut seen_generation = u64::MAX;
    let mut control = shared.control();
    // Schedule of the current pace: bytes done since `since`.
    let mut since = Instant::now();
    let mut sched_bytes = 0u64;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let g = shared.generation.load(Ordering::Acquire);
        if g != seen_generation {
            seen_generation = g;
            control = shared.control();
            since = Instant::now();
            sched_bytes = 0;
        }
        if control.pace == Pace::Idle {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let (p, m) = stream.chunk(control.mix);
        program += p;
        memory += m;
        counter.program.store(program, Ordering::Relaxed);
        counter.memory.store(memory, Ordering::Relaxed);
        match control.pace {
            Pace::Idle | Pace::Unpaced => {}
            Pace::Delay { ns_per_chunk } => {
                if ns_per_chunk > 0 {
                    let due = Instant::now() + Duration::from_nanos(ns_per_chunk);
                    wait_until(due, shared, seen_generation);
                }
            }
            Pace::Rate { bytes_per_second } => {
                sched_bytes += p;
                let on_time = Duration::from_secs_f64(sched_bytes as f64 / bytes_per_second);
                let now = Instant::now();
                let elapsed = now.duration_since(since);
                if on_time > elapsed {
                    wait_until(since + on_time, shared, seen_generation);
                } else if elapsed - on_time > MAX_DEBT {
                    // Too far behind: forgive all but MAX_DEBT of it.
                    since = now.checked_sub(on_time + MAX_DEBT).unwrap_or(since);
                }
            }
        }
    }
}

/// Waits until `due`: sleeps while far from it, spins with `pause` near it;
/// returns early on stop or a change of pace.
pub(super) fn wait_until(due: Instant, shared: &Shared, generation: u64) {
    loop {
        let now = Instant::now();
        if now >= due
            || shared.stop.load(Ordering::Relaxed)
            || shared.generation.load(Ordering::Relaxed) != generation
        {
            return;
        }
        let left = due - now;
        if left > SLEEP_ABOVE {
            // Leave the last stretch to the spin; wake at least every 5 ms
            // to notice stop and pace changes.
            std::thread::sleep((left - SLEEP_ABOVE / 2).min(Duration::from_millis(5)));
        } else {
            for _ in 0..16 {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_counts_bytes_by_mix() {
        let mut v = vec![1.0f64; 64 << 10]; // 512 KiB
        let mut s = Stream::new(&mut v, 2048, Isa::Portable); // 16 KiB chunks
        assert_eq!(s.chunk(TrafficMix::Read), (16384, 16384));
        assert_eq!(s.chunk(TrafficMix::WriteNt), (16384, 16384));
        let rw = TrafficMix::ReadWrite {
            reads: 3,
            writes: 1,
        };
        // 3 units read, 1 written (4 KiB each): memory counts the write twice.
        assert_eq!(s.chunk(rw), (16384, 16384 + 4096));
        let one = TrafficMix::ReadWrite {
            reads: 1,
            writes: 1,
        };
        let (p, m) = (0..10).fold((0, 0), |a, _| {
            let (x, y) = s.chunk(one);
            (a.0 + x, a.1 + y)
        });
        assert_eq!(m as f64 / p as f64, one.memory_per_program());
        // The cursor wraps at the end of the buffer.
        for _ in 0..100 {
            s.chunk(TrafficMix::Read);
        }
        assert!(s.pos <= s.buf.len());
    }
}
