//! The fluid model's solver: approximate mean value analysis of a closed
//! queueing network with one class per thread (Schweitzer's
//! approximation, as in Lazowska et al., *Quantitative System
//! Performance*, ch. 7).
//!
//! A thread keeps `in_flight` requests going. Each request spends
//! `think` ns outside every modelled resource (the core, the caches, the
//! wire's fixed latency) and `demand[k]` ns of service at each resource
//! `k` it crosses (bytes it puts there / the resource's bytes per ns),
//! plus the time it waits behind the requests already queued there. The
//! solution is each thread's rate (requests per ns), each resource's
//! utilisation, and where each thread waits. A resource near saturation
//! slows every thread crossing it, the more the closer it is to full (a
//! link at 87% already hurts); at saturation the threads share it by the
//! requests each keeps there, so a thread whose requests spend longer
//! elsewhere (a farther one) gets less of it.

/// One thread as the solver sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    /// Requests it keeps in flight (at least 1).
    pub in_flight: f64,
    /// ns per request outside the modelled resources.
    pub think: f64,
    /// (resource index, ns of service per request), each resource once.
    pub demand: Vec<(usize, f64)>,
}

/// Rates and loads at the fixed point.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Requests per ns, per class.
    pub rate: Vec<f64>,
    /// Busy fraction of each resource.
    pub utilisation: Vec<f64>,
    /// ns per request each class spends at each of its resources
    /// (service and waiting), in `Class::demand`'s order.
    pub residence: Vec<Vec<f64>>,
    /// Iterations to converge.
    pub iterations: usize,
}

/// Most iterations before giving up.
pub const MAX_ITERATIONS: usize = 200_000;

/// Relative change of every rate below which the solution is taken.
pub const TOLERANCE: f64 = 1e-10;

/// Solves the network of `resources` resources for `classes`. `Err` names
/// the class or resource that makes it unsolvable.
pub fn solve(classes: &[Class], resources: usize) -> Result<Solution, String> {
    for (c, class) in classes.iter().enumerate() {
        let in_range = class.in_flight.is_finite()
            && class.in_flight >= 1.0
            && class.think.is_finite()
            && class.think >= 0.0
            && class
                .demand
                .iter()
                .all(|&(k, d)| k < resources && d.is_finite() && d >= 0.0);
        let bad = !in_range;
        if bad {
            return Err(format!("thread {c}'s parameters are out of range"));
        }
        if class.think + class.demand.iter().map(|d| d.1).sum::<f64>() <= 0.0 {
            return Err(format!("thread {c} takes no time per request"));
        }
    }
    // Each class answers the others' queues exactly (its own queue
    // solved with them, below); only the coupling between classes is
    // iterated, damped by half. Iterating Schweitzer's equations as they
    // stand swings, and crawls, when a class keeps thousands of requests
    // in flight: its own queue then dominates its waits.
    let mut queue: Vec<Vec<f64>> = classes.iter().map(|c| vec![0.0; c.demand.len()]).collect();
    let mut total = vec![0.0; resources];
    let mut rate = vec![0.0; classes.len()];
    let mut others: Vec<f64> = Vec::new();
    for iteration in 1..=MAX_ITERATIONS {
        total.iter_mut().for_each(|t| *t = 0.0);
        for (c, class) in classes.iter().enumerate() {
            for (i, &(k, _)) in class.demand.iter().enumerate() {
                total[k] += queue[c][i];
            }
        }
        let mut change: f64 = 0.0;
        for (c, class) in classes.iter().enumerate() {
            others.clear();
            others.extend(
                class
                    .demand
                    .iter()
                    .enumerate()
                    .map(|(i, &(k, _))| (total[k] - queue[c][i]).max(0.0)),
            );
            let x = best_response(class, &others);
            change = change.max(if rate[c] > 0.0 {
                ((x - rate[c]) / rate[c]).abs()
            } else {
                f64::INFINITY
            });
            rate[c] = x;
            for (i, q) in queue[c].iter_mut().enumerate() {
                let r = residence(class, i, others[i], x);
                *q = 0.5 * *q + 0.5 * x * r;
            }
        }
        if change < TOLERANCE {
            let mut utilisation = vec![0.0; resources];
            let mut residences = Vec::with_capacity(classes.len());
            for (c, class) in classes.iter().enumerate() {
                let mut row = Vec::with_capacity(class.demand.len());
                for (i, &(k, d)) in class.demand.iter().enumerate() {
                    utilisation[k] += rate[c] * d;
                    row.push(residence(
                        class,
                        i,
                        (total[k] - queue[c][i]).max(0.0),
                        rate[c],
                    ));
                }
                residences.push(row);
            }
            return Ok(Solution {
                rate,
                utilisation,
                residence: residences,
                iterations: iteration,
            });
        }
    }
    Err(format!(
        "the model did not converge in {MAX_ITERATIONS} iterations"
    ))
}

/// ns per request class `c` spends at its `i`-th resource, running at
/// `x` with the other classes' queue `others` there. Schweitzer: an
/// arriving request sees the others' queue and its own class's less
/// itself; with the own queue `x R` solved in, the wait is
/// `D (1 + others) / (1 - x D (N - 1) / N)`.
fn residence(class: &Class, i: usize, others: f64, x: f64) -> f64 {
    let d = class.demand[i].1;
    let own = x * d * (class.in_flight - 1.0) / class.in_flight;
    d * (1.0 + others) / (1.0 - own).max(1e-12)
}

/// The rate of `class` given the other classes' queues at its resources:
/// the root of `x (think + Σ residence) = in_flight`, whose left side
/// grows with `x` (bisection, to 1e-14).
fn best_response(class: &Class, others: &[f64]) -> f64 {
    let f = (class.in_flight - 1.0) / class.in_flight;
    let base: f64 = class.think
        + class
            .demand
            .iter()
            .zip(others)
            .map(|(&(_, d), &a)| d * (1.0 + a))
            .sum::<f64>();
    // Every residence is at least its value at x = 0, so the root is at
    // most this; and below where the class alone would fill a resource.
    let mut hi = class.in_flight / base;
    let max_d = class.demand.iter().map(|d| d.1).fold(0.0, f64::max);
    if f > 0.0 && max_d > 0.0 {
        hi = hi.min(1.0 / (f * max_d));
    }
    let g = |x: f64| {
        x * (class.think
            + (0..class.demand.len())
                .map(|i| residence(class, i, others[i], x))
                .sum::<f64>())
            - class.in_flight
    };
    let mut lo = 0.0;
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) > 0.0 {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo <= 1e-14 * hi {
            break;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(n: f64, z: f64, demand: Vec<(usize, f64)>) -> Class {
        Class {
            in_flight: n,
            think: z,
            demand,
        }
    }

    #[test]
    fn one_request_in_flight_is_exact() {
        // One customer, no queueing possible: rate = 1 / (Z + D).
        let s = solve(&[class(1.0, 3.0, vec![(0, 1.0)])], 1).unwrap();
        assert!((s.rate[0] - 0.25).abs() < 1e-12, "{s:?}");
        assert!((s.utilisation[0] - 0.25).abs() < 1e-12);
    }

    #[test]
    fn a_saturated_resource_is_shared_and_never_exceeded() {
        // Two classes that alone would each keep resource 0 about 90% busy.
        let c = class(4.0, 2.0, vec![(0, 1.0)]);
        let alone = solve(std::slice::from_ref(&c), 1).unwrap();
        let both = solve(&[c.clone(), c], 1).unwrap();
        assert!(
            alone.utilisation[0] > 0.6 && alone.utilisation[0] < 0.95,
            "{alone:?}"
        );
        assert!(
            both.utilisation[0] <= 1.0 && both.utilisation[0] > 0.95,
            "{both:?}"
        );
        assert!((both.rate[0] - both.rate[1]).abs() < 1e-9);
        assert!(both.rate[0] < alone.rate[0]);
    }

    #[test]
    fn the_class_with_more_time_elsewhere_gets_less_of_a_full_resource() {
        let near = class(16.0, 10.0, vec![(0, 1.0)]);
        let far = class(16.0, 30.0, vec![(0, 1.0)]);
        let s = solve(&[near, far], 1).unwrap();
        assert!(s.rate[0] > s.rate[1], "{s:?}");
    }

    #[test]
    fn thousands_of_requests_in_flight_converge() {
        // Two classes at the largest in_flight a parameter file allows,
        // sharing one resource, as a calibration of this host once gave.
        let c = class(4096.0, 11018.27, vec![(0, 1.418)]);
        let s = solve(&[c.clone(), c], 1).unwrap();
        assert!(s.utilisation[0] <= 1.0 && s.utilisation[0] > 0.99, "{s:?}");
        assert!(s.iterations < 20_000, "{}", s.iterations);
    }

    #[test]
    fn bad_classes_are_refused() {
        let e = solve(&[class(0.5, 1.0, vec![(0, 1.0)])], 1).unwrap_err();
        assert_eq!(e, "thread 0's parameters are out of range");
        let e = solve(&[class(1.0, 1.0, vec![(3, 1.0)])], 1).unwrap_err();
        assert_eq!(e, "thread 0's parameters are out of range");
        let e = solve(&[class(1.0, 0.0, vec![])], 1).unwrap_err();
        assert_eq!(e, "thread 0 takes no time per request");
    }
}
