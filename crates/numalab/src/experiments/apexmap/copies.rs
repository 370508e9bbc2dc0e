//! Copies of the map: one per core of a node (packed) or one per node
//! (unpacked), started together and kept in step point by point (the
//! Apex-MAP study's Figure 7: what sharing a memory controller costs).

use super::*;
/// The CPUs of a packed run: one per core of `cpu`'s node that this
/// process may use (`cpu` itself on its core, the first allowed CPU of each
/// other core: SMT siblings are not separate cores), in CPU order. Refused
/// when that is one copy: packed would then be the single map.
pub fn packed_cpus(m: &Machine, cpu: u32) -> Result<Vec<u32>, PlacementError> {
    let node = m
        .node_of_cpu(cpu)
        .ok_or_else(|| PlacementError::Invalid(format!("CPU {cpu} is on no node")))?;
    let allowed = m.allowed_cpus_of(node);
    let mut cpus: Vec<u32> = if m.cores.is_empty() {
        allowed.iter().collect()
    } else {
        m.cores
            .iter()
            .filter_map(|c| {
                let mine = c.cpus.intersection(&allowed);
                if mine.contains(cpu) {
                    Some(cpu)
                } else {
                    mine.first()
                }
            })
            .collect()
    };
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() < 2 {
        return Err(PlacementError::Invalid(format!(
            "--copies packed needs two or more cores of node {node} that this process may use, and it has one (CPU {cpu}): packed would be one copy, the single map (--copies single)"
        )));
    }
    Ok(cpus)
}

/// The CPUs of an unpacked run: one per node with CPUs this process may
/// use (`cpu` on its own node, the first allowed CPU of every other), in
/// node order. With one such node that is one copy, the single map:
/// refused unless `allow_one` (the unpacked half of [`Copies::Both`], where
/// one copy alone on its node is the baseline packing is compared with).
pub fn unpacked_cpus(m: &Machine, cpu: u32, allow_one: bool) -> Result<Vec<u32>, PlacementError> {
    let own = m
        .node_of_cpu(cpu)
        .ok_or_else(|| PlacementError::Invalid(format!("CPU {cpu} is on no node")))?;
    let cpus: Vec<u32> = m
        .cpu_nodes()
        .iter()
        .filter_map(|n| {
            if n == own {
                Some(cpu)
            } else {
                m.allowed_cpus_of(n).first()
            }
        })
        .collect();
    if cpus.len() < 2 && !allow_one {
        return Err(PlacementError::Invalid(format!(
            "--copies unpacked needs two or more nodes with CPUs this process may use, and it has one (node {own}): unpacked would be one copy, the single map (--copies single; --copies both compares it with packed)"
        )));
    }
    Ok(cpus)
}

/// Checks the request and measures the map with one copy on each of
/// `cpus` at once (one copy: the single map).
pub(super) fn run_copies(
    m: &Machine,
    req: &ApexRequest,
    copies: Copies,
    cpus: &[u32],
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<ApexResult, PlacementError> {
    check_request(req)?;
    // Every copy's buffer at once: one phase.
    check_plan(
        m,
        &[cpus
            .iter()
            .map(|&c| BufferDemand::new(req.buffer_bytes, &req.policy, Some(c)))
            .collect()],
        "use a smaller --size",
    )?;
    let start = Instant::now();
    let map = Map::new(m, req);
    let done = run_in_step(m, &map, cpus, progress)?;
    let several = copies != Copies::Single;
    let mut warnings = copy_warnings(&done, several);
    let mut points = merge_copies(&done, several);
    let model = match fit_points(&map.levels, &mut points) {
        Ok(mo) => Some(mo),
        Err(e) => {
            warnings.push(format!("multi-level model: {e}"));
            None
        }
    };
    let published_model = match published_model(m, req.cpu, &points, Path::new("/")) {
        Ok(mo) => {
            warnings.extend(mo.unresolved());
            Some(mo)
        }
        Err(e) => {
            warnings.push(format!("published model: {e}"));
            None
        }
    };
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let verification = verification_of(done.into_iter().map(|c| c.report).collect());
    warnings.extend(verification.warning());
    Ok(ApexResult {
        cpu: req.cpu,
        copies,
        copy_cpus: cpus.to_vec(),
        policy: req.policy.to_string(),
        buffer_bytes: req.buffer_bytes as u64,
        isa: req.isa,
        alphas: map.alphas,
        ls: map.ls,
        points,
        model,
        published_model,
        elapsed_s: start.elapsed().as_secs_f64(),
        warnings,
        verification,
    })
}

/// The request's own limits, before anything is placed: the ISA, alpha and
/// L in range, L within the buffer and the block count within 32 bits.
fn check_request(req: &ApexRequest) -> Result<(), PlacementError> {
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    if req.alphas.is_empty() || req.ls.is_empty() {
        return Err(PlacementError::Invalid(
            "apexmap needs at least one alpha and one L".into(),
        ));
    }
    for &a in &req.alphas {
        check_alpha(a).map_err(PlacementError::Invalid)?;
    }
    for &l in &req.ls {
        check_l(l).map_err(PlacementError::Invalid)?;
    }
    let words = req.buffer_bytes / 8;
    let max_l = req.ls.iter().copied().max().unwrap_or(1);
    if max_l > words {
        return Err(PlacementError::Invalid(format!(
            "L = {max_l} words ({}) does not fit in the {} buffer; use a larger --size or smaller --ls",
            format::bytes(8 * max_l as u64),
            format::bytes(req.buffer_bytes as u64)
        )));
    }
    let min_l = req.ls.iter().copied().min().unwrap_or(1);
    if (words / min_l) as u64 > u32::MAX as u64 + 1 {
        return Err(PlacementError::Invalid(format!(
            "a {} buffer holds more than 2^32 blocks of L = {min_l}: use --size of at most {} or a larger L",
            format::bytes(req.buffer_bytes as u64),
            format::bytes(8 * min_l as u64 * (1 << 32))
        )));
    }
    Ok(())
}

/// One copy of `map` on each of `cpus` at once, kept in step; the first
/// copy reports progress. A copy that fails stops the others, and its
/// error, not theirs, is returned.
fn run_in_step(
    m: &Machine,
    map: &Map,
    cpus: &[u32],
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<Vec<CopyOutcome>, PlacementError> {
    let together = Together::new(cpus.len());
    let mut progress = Some(progress);
    let outcomes: Vec<Result<CopyOutcome, PlacementError>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(cpus.len());
        for (i, &cpu) in cpus.iter().enumerate() {
            let together = &together;
            let progress = if i == 0 { progress.take() } else { None };
            let what = if cpus.len() == 1 {
                "the apexmap worker".to_string()
            } else {
                format!("the apexmap copy on CPU {cpu}")
            };
            let h = sys::spawn_scoped(s, &what, move || {
                let _guard = AbortOnPanic(&together.meet);
                run_copy(m, map, together, cpu, progress)
            });
            if h.is_err() {
                // The copies started would wait for this one forever.
                together.meet.abort();
            }
            handles.push((what, h));
        }
        handles
            .into_iter()
            .map(|(what, h)| {
                h?.join()
                    .unwrap_or_else(|_| Err(PlacementError::Os(format!("{what} panicked"))))
            })
            .collect()
    });
    let mut done = Vec::with_capacity(outcomes.len());
    let mut errors = Vec::new();
    for o in outcomes {
        match o {
            Ok(c) => done.push(c),
            Err(e) => errors.push(e),
        }
    }
    // The copy that failed, not the others it stopped.
    if let Some(i) = errors.iter().position(|e| !e.to_string().contains(ABORTED)) {
        return Err(errors.swap_remove(i));
    }
    if let Some(e) = errors.pop() {
        return Err(e);
    }
    Ok(done)
}

/// Every copy's warnings once, named by its CPU where there are several.
fn copy_warnings(done: &[CopyOutcome], several: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    for c in done {
        for w in &c.warnings {
            let w = if several {
                format!("copy on CPU {}: {w}", c.cpu)
            } else {
                w.clone()
            };
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    warnings
}

/// What a copy ends with: its points, its placement and its warnings.
pub(super) struct CopyOutcome {
    pub(super) cpu: u32,
    pub(super) points: Vec<ApexPoint>,
    pub(super) report: WorkerReport,
    pub(super) warnings: Vec<String>,
}

/// The text of the error a copy returns when another copy failed.
pub(super) const ABORTED: &str = "another apexmap copy failed";

/// One copy on the calling thread, pinned to `cpu`: its buffer placed and
/// checked, then every point in step with the other copies.
pub(super) fn run_copy(
    m: &Machine,
    map: &Map,
    together: &Together,
    cpu: u32,
    progress: Option<&mut (dyn FnMut(&str) + Send)>,
) -> Result<CopyOutcome, PlacementError> {
    let req = map.req;
    let placed = pinned_buffer(m, cpu, &req.policy, req.buffer_bytes, req.thp, false);
    let (mut buf, check) = match placed {
        Ok(x) => x,
        Err(e) => {
            together.meet.abort();
            return Err(e);
        }
    };
    let mut report = WorkerReport::pinned(m, cpu, check);
    let data = &mut buf.as_f64_mut()[..req.buffer_bytes / 8];
    let mut warnings = Vec::new();
    let points = map.points(data, progress, together, &mut warnings)?;
    report.seen_cpus.extend(sys::current_cpu());
    Ok(CopyOutcome {
        cpu,
        points,
        report,
        warnings,
    })
}

/// The points of the copies merged: with one copy its own points; with
/// several (`several`), each figure the median over copies, `samples` the
/// fewest of a copy, and every copy's figures kept.
pub(super) fn merge_copies(done: &[CopyOutcome], several: bool) -> Vec<ApexPoint> {
    let Some(first) = done.first() else {
        return Vec::new();
    };
    if !several {
        return first.points.clone();
    }
    (0..first.points.len())
        .map(|k| {
            let mut p = first.points[k].clone();
            let per: Vec<&ApexPoint> = done.iter().filter_map(|c| c.points.get(k)).collect();
            p.copies = done
                .iter()
                .zip(&per)
                .map(|(c, q)| CopyPoint {
                    cpu: c.cpu,
                    ns: q.ns.clone(),
                    gbps: q.gbps.clone(),
                    samples: q.samples,
                })
                .collect();
            p.ns = median_figure(per.iter().map(|q| &q.ns));
            p.gbps = median_figure(per.iter().map(|q| &q.gbps));
            p.samples = per.iter().map(|q| q.samples).min().unwrap_or(0);
            if let Some(q) = per.iter().min_by_key(|q| q.samples) {
                p.stop_reason = q.stop_reason;
            }
            let medians: Vec<f64> = per.iter().map(|q| q.ns.median).collect();
            let (lo, hi) = medians
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            p.copy_spread = (p.ns.median > 0.0 && hi >= lo).then(|| (hi - lo) / p.ns.median);
            p
        })
        .collect()
}

/// Each field of the figures, the median over them.
pub(super) fn median_figure<'a>(figs: impl Iterator<Item = &'a Figure> + Clone) -> Figure {
    let med = |f: fn(&Figure) -> f64| median(figs.clone().map(f).collect()).unwrap_or(f64::NAN);
    Figure {
        median: med(|f| f.median),
        best: med(|f| f.best),
        min: med(|f| f.min),
        max: med(|f| f.max),
        spread: med(|f| f.spread),
        rel_ci: med(|f| f.rel_ci),
    }
}

/// A barrier that a failed or panicking copy can open for everyone (the
/// others would wait for it forever at a `std::sync::Barrier`).
pub(super) struct Meet {
    /// Arrived in this round, the round, and whether it was opened.
    pub(super) state: Mutex<(usize, u64, bool)>,
    pub(super) met: Condvar,
    pub(super) parties: usize,
}

impl Meet {
    pub(super) fn new(parties: usize) -> Self {
        Meet {
            state: Mutex::new((0, 0, false)),
            met: Condvar::new(),
            parties,
        }
    }

    /// Waits for every party: `Ok(true)` for the last to arrive (one per
    /// round), an error once a party opened the meet.
    pub(super) fn wait(&self) -> Result<bool, PlacementError> {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if g.2 {
            return Err(PlacementError::Os(ABORTED.into()));
        }
        let round = g.1;
        g.0 += 1;
        if g.0 == self.parties {
            g.0 = 0;
            g.1 += 1;
            self.met.notify_all();
            return Ok(true);
        }
        while g.1 == round && !g.2 {
            g = self.met.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        if g.1 == round {
            Err(PlacementError::Os(ABORTED.into()))
        } else {
            Ok(false)
        }
    }

    /// Lets everyone through with an error, now and later.
    pub(super) fn abort(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).2 = true;
        self.met.notify_all();
    }

    pub(super) fn aborted(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).2
    }
}

/// Opens the meet when the copy's thread unwinds.
pub(super) struct AbortOnPanic<'a>(&'a Meet);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

/// How the copies keep in step: they start each point's timed samples
/// together, and each keeps loading its memory until every copy has
/// finished the point's samples; whether to stop (cancellation) is decided
/// once for all of them.
pub(super) struct Together {
    pub(super) meet: Meet,
    /// Copies done with their timed samples, summed over the points.
    pub(super) finished: AtomicUsize,
    pub(super) stop: AtomicBool,
}

impl Together {
    pub(super) fn new(copies: usize) -> Self {
        Together {
            meet: Meet::new(copies),
            finished: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// Whether to measure the next point: one copy reads the cancellation
    /// request for all, so that they all stop at the same point.
    pub(super) fn proceed(&self) -> Result<bool, PlacementError> {
        if self.meet.wait()? {
            self.stop.store(cancel::requested(), Ordering::Release);
        }
        self.meet.wait()?;
        Ok(!self.stop.load(Ordering::Acquire))
    }
}
