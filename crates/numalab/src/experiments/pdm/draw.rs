//! Random placements: sampling when the count cannot be exact, and
//! placements drawn per contention class ([`draw_by_class`]).

use super::model::milli;
use super::{
    count, invalid, model_of, setup, Labelled, PdmError, PdmRequest, Prepared, ThreadPlacement,
    EXAMPLES_PER_CLASS, MILLI,
};
use crate::machine::Machine;
use crate::random::SplitMix64;
use serde::Serialize;
use std::collections::BTreeMap;

/// Loads one quantity adds: (resource, amount).
type Sparse = Vec<(usize, u64)>;
/// What [`each_random_placement`] shows each placement to: its class, its
/// largest load normalized, its thread vertices and memory vertices.
type PlacementVisitor<'v> = dyn FnMut(u64, u64, &[usize], &[Vec<usize>]) -> bool + 'v;

/// Draws `samples` uniform random placements and shows each to `visit`
/// (thread nodes and memory nodes as vertices, its class, its largest load
/// normalized); `visit` returns false to stop early.
#[allow(clippy::too_many_arguments)]
fn each_random_placement(
    p: &Prepared,
    threads: &ThreadPlacement,
    fixed: Option<&[usize]>,
    cpu_vertices: &[usize],
    n_threads: usize,
    samples: u64,
    seed: u64,
    visit: &mut PlacementVisitor,
) {
    let model = p.model;
    let v = model.nodes.len();
    // contributions[c][m][q], normalized.
    let contributions: Vec<Vec<Vec<Sparse>>> = (0..v)
        .map(|c| {
            (0..v)
                .map(|m| {
                    if !model.cpu[c] {
                        return Vec::new();
                    }
                    p.quantities
                        .iter()
                        .map(|q| {
                            model
                                .contribution(c, m, milli(q.weight), q.direction)
                                .into_iter()
                                .map(|(r, a)| (r, a / p.unit))
                                .collect()
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut rng = SplitMix64::new(seed);
    let mut load = vec![0u64; model.resources()];
    let mut layout: Vec<usize> = match (threads, fixed) {
        (_, Some(f)) => f.to_vec(),
        _ => cpu_vertices[..n_threads.min(cpu_vertices.len())].to_vec(),
    };
    layout.resize(n_threads, cpu_vertices[0]);
    let mut memory = vec![vec![0usize; p.quantities.len()]; n_threads];
    for _ in 0..samples {
        match threads {
            ThreadPlacement::OnePerNode => rng.shuffle(&mut layout),
            ThreadPlacement::Any(_) => layout
                .iter_mut()
                .for_each(|t| *t = cpu_vertices[rng.below(cpu_vertices.len())]),
            ThreadPlacement::Fixed(_) => {}
        }
        load.iter_mut().for_each(|l| *l = 0);
        for (t, &c) in layout.iter().enumerate() {
            for (q, slot) in memory[t].iter_mut().enumerate() {
                let m = rng.below(v);
                *slot = m;
                for &(r, a) in &contributions[c][m][q] {
                    load[r] += a;
                }
            }
        }
        let max = load.iter().copied().max().unwrap_or(0);
        if !visit(p.class_of(max), max, &layout, &memory) {
            return;
        }
    }
}

/// Draws `samples.0` uniform random placements, or, past `deadline`, stops
/// after at least `samples.1`; returns each class's count and examples and
/// the number drawn.
#[allow(clippy::too_many_arguments)]
pub(super) fn sample(
    p: &Prepared,
    threads: &ThreadPlacement,
    fixed: Option<&[usize]>,
    cpu_vertices: &[usize],
    n_threads: usize,
    samples: (u64, u64),
    seed: u64,
    deadline: Option<std::time::Instant>,
) -> (Labelled, u64) {
    let (wanted, at_least) = samples;
    let mut out = Labelled::new();
    let mut drawn = 0u64;
    each_random_placement(
        p,
        threads,
        fixed,
        cpu_vertices,
        n_threads,
        wanted,
        seed,
        &mut |class, _, layout, memory| {
            let e = out.entry(class).or_insert((0, Vec::new()));
            e.0 += 1;
            if e.1.len() < EXAMPLES_PER_CLASS {
                e.1.push(p.example(layout, memory.to_vec()));
            }
            drawn += 1;
            // The clock is read once every 1024 draws (a draw takes
            // well under a microsecond here).
            !(drawn >= at_least
                && drawn.is_multiple_of(1024)
                && deadline.is_some_and(|d| std::time::Instant::now() >= d))
        },
    );
    (out, drawn)
}

/// Most random placements [`draw_by_class`] looks at before it gives up on
/// filling the rarest classes.
pub const MAX_DRAWS: u64 = 4_000_000;
/// How often [`draw_by_class`] asks [`worth_drawing_on`].
const DRAWS_BETWEEN_CHECKS: u64 = 4096;

/// Whether `left` more uniform draws can be expected to meet a class that
/// still lacks placements at least once (its exact share times `left`):
/// when none can, drawing on would cost up to [`MAX_DRAWS`] for nothing the
/// count's examples do not give. On the Quartet's triad the rarest class
/// (96 of 402,653,184 placements) kept all 4 million draws going, where
/// the other classes were full after a few hundred thousand.
fn worth_drawing_on<'a>(classes: impl IntoIterator<Item = &'a ClassDraw>, left: u64) -> bool {
    classes
        .into_iter()
        .any(|d| d.placements.len() < d.wanted && d.share * left as f64 >= 1.0)
}

/// One placement drawn at random: each thread's CPU node and each of its
/// quantities' memory nodes (os indexes).
#[derive(Debug, Clone, Serialize)]
pub struct DrawnPlacement {
    pub thread_nodes: Vec<u32>,
    /// `memory[t][q]`: the node of thread `t`'s quantity `q`.
    pub memory: Vec<Vec<u32>>,
    /// As the examples of [`PdmClass`](super::PdmClass) write it: `T0@0:a→1,b→2`.
    pub label: String,
    /// False for one of the exact count's examples, added because uniform
    /// draws did not meet the class often enough.
    pub drawn: bool,
    /// The placement's largest arc or controller load.
    pub contention: f64,
}

/// The placements drawn from one contention class.
#[derive(Debug, Clone, Serialize)]
pub struct ClassDraw {
    pub class: u64,
    pub low: f64,
    pub high: f64,
    /// The class's share of all placements (exact, or sampled while drawing).
    pub share: f64,
    /// How many were asked for; `placements` holds fewer when the class is
    /// so rare that [`MAX_DRAWS`] uniform draws did not meet it often enough.
    pub wanted: usize,
    pub placements: Vec<DrawnPlacement>,
}

/// Up to `per_class` distinct placements of each contention class of `req`
/// on `machine`, each drawn uniformly from its class: uniform placements are
/// drawn and sorted into their classes (a placement met twice is kept once)
/// until every class has `per_class`, or all its placements when it has
/// fewer, or [`MAX_DRAWS`] were drawn, or (exact counts) no class still
/// short can expect another hit (`worth_drawing_on`). Classes come from the count, so a
/// class too rare to be met still appears: it gets the count's examples
/// (up to [`EXAMPLES_PER_CLASS`], marked `drawn: false`) and may still hold
/// fewer placements than wanted.
pub fn draw_by_class(
    machine: &Machine,
    req: &PdmRequest,
    per_class: usize,
    seed: u64,
) -> Result<Vec<ClassDraw>, PdmError> {
    if per_class == 0 || per_class > 1000 {
        return invalid(format!(
            "{per_class} placements per class (valid: 1 to 1000)"
        ));
    }
    let model = model_of(machine, req)?;
    let counted = count(&model, req)?;
    let setup = setup(&model, req)?;
    let p = &setup.prepared;
    let w = req.class_width;
    // An exactly counted class smaller than `per_class` is wanted whole.
    let mut out: BTreeMap<u64, ClassDraw> = counted
        .classes
        .iter()
        .map(|c| {
            let wanted = match counted.exact {
                true => usize::try_from(c.count)
                    .unwrap_or(usize::MAX)
                    .min(per_class),
                false => per_class,
            };
            (
                c.class,
                ClassDraw {
                    class: c.class,
                    low: c.low,
                    high: c.high,
                    share: c.share,
                    wanted,
                    placements: Vec::new(),
                },
            )
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut full = 0usize;
    let classes = out.len();
    let mut drawn = 0u64;
    let unit = (MILLI * model.scale) as f64;
    let ids = &model.nodes;
    each_random_placement(
        p,
        &req.threads,
        setup.fixed.as_deref(),
        &setup.cpu_vertices,
        setup.threads,
        MAX_DRAWS,
        seed,
        &mut |class, max, layout, memory| {
            let d = out.entry(class).or_insert_with(|| ClassDraw {
                class,
                low: class as f64 * w,
                high: (class + 1) as f64 * w,
                share: 0.0,
                wanted: per_class,
                placements: Vec::new(),
            });
            if d.placements.len() < d.wanted && seen.insert((layout.to_vec(), memory.to_vec())) {
                d.placements.push(DrawnPlacement {
                    thread_nodes: layout.iter().map(|&c| ids[c]).collect(),
                    memory: memory
                        .iter()
                        .map(|qs| qs.iter().map(|&m| ids[m]).collect())
                        .collect(),
                    label: p.label(layout, memory),
                    drawn: true,
                    contention: (max * p.unit) as f64 / unit,
                });
                if d.placements.len() == d.wanted {
                    full += 1;
                }
            }
            drawn += 1;
            if drawn.is_multiple_of(DRAWS_BETWEEN_CHECKS)
                && counted.exact
                && !worth_drawing_on(out.values(), MAX_DRAWS - drawn)
            {
                return false;
            }
            full < classes.max(out.len())
        },
    );
    // A class too rare for the draws: the count's examples (real
    // placements of the class, though not random ones).
    for c in &counted.classes {
        let Some(d) = out.get_mut(&c.class) else {
            continue;
        };
        for e in &c.example_placements {
            if d.placements.len() >= d.wanted || !seen.insert((e.threads.clone(), e.memory.clone()))
            {
                continue;
            }
            let contention = model
                .loads(&req.quantities, &e.threads, &e.memory)
                .into_iter()
                .fold(0.0, f64::max);
            d.placements.push(DrawnPlacement {
                thread_nodes: e.threads.iter().map(|&c| ids[c]).collect(),
                memory: e
                    .memory
                    .iter()
                    .map(|qs| qs.iter().map(|&m| ids[m]).collect())
                    .collect(),
                label: e.label.clone(),
                drawn: false,
                contention,
            });
        }
    }
    Ok(out.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawing_stops_when_no_short_class_expects_another_hit() {
        let class = |share: f64, have: usize, wanted: usize| ClassDraw {
            class: 0,
            low: 0.0,
            high: 1.0,
            share,
            wanted,
            placements: vec![
                DrawnPlacement {
                    thread_nodes: vec![0],
                    memory: vec![vec![0]],
                    label: String::new(),
                    drawn: true,
                    contention: 0.5,
                };
                have
            ],
        };
        // The triad's rarest class: 96 of 402,653,184 placements.
        let rare = 96.0 / 402_653_184.0;
        assert!(worth_drawing_on(&[class(rare, 0, 10)], 4_200_000));
        assert!(!worth_drawing_on(&[class(rare, 0, 10)], 4_000_000));
        // A full class asks for nothing, however common.
        assert!(!worth_drawing_on(
            &[class(0.5, 10, 10), class(rare, 2, 10)],
            1_000_000
        ));
        assert!(worth_drawing_on(
            &[class(0.5, 9, 10), class(rare, 2, 10)],
            2
        ));
        assert!(!worth_drawing_on(&[], MAX_DRAWS));
    }
}
