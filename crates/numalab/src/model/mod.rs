//! Predicting placements nobody ran: the machine as memory controllers and
//! directed links with capacities, threads as flows over them, and a
//! fluid model of how they share (docs/model.md).
//!
//! - `params`: the figures the model needs, from a file or built in
//!   (`amd-quartet-2006`, the AMD note's machine);
//! - `network`: resources, routes (the PDM graph's shortest paths, equal
//!   paths splitting the traffic), the traffic model and one prediction;
//! - `mva`: the solver, approximate mean value analysis of a closed
//!   queueing network;
//! - `predict`: whole experiments (the study's scenarios, sweep cases)
//!   normalised as the study does.

pub mod advise;
pub mod calibrate;
pub mod mva;
pub mod network;
pub mod params;
pub mod predict;

pub use network::{Flow, FlowResult, Network, Prediction, Resource, ResourceLoad};
pub use params::{ModelParams, PARAMS_SCHEMA};
pub use predict::{predict_scenarios, PredictedCase, PredictedScenario};

#[cfg(test)]
mod amd_note {
    //! The AMD note's observations (publication 40555, 2006) on its
    //! 4-node ring, predicted from its own parameters
    //! (docs/models/amd-quartet-2006.json). `in_flight` was fitted to the
    //! crossfire link's 3.5 GB/s; every other figure here is a prediction.

    use super::*;
    use crate::machine::fixture;

    const W: bool = true;
    const R: bool = false;

    fn net() -> Network {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        Network::new(&m, ModelParams::amd_quartet_2006()).unwrap()
    }

    /// (cpu node, memory node, write) per foreground thread; background
    /// readers on `bg` nodes at `gbps`. Returns the total ns per line of
    /// the foreground threads and the prediction.
    fn case(net: &Network, fg: &[(u32, u32, bool)], bg: &[u32], gbps: f64) -> (f64, Prediction) {
        let mut flows: Vec<Flow> = fg
            .iter()
            .map(|&(c, m, w)| Flow::stream(format!("{c}.{m}.{w}"), c, m, w))
            .collect();
        flows.extend(
            bg.iter()
                .map(|&n| Flow::background(format!("bg {n}"), n, gbps)),
        );
        let p = net.predict(&flows).unwrap();
        let total = p.flows[..fg.len()].iter().map(|f| f.ns_per_line).sum();
        (total, p)
    }

    fn link(p: &Prediction, from: u32, to: u32) -> f64 {
        Network::load_of(p, Resource::Link { from, to })
    }

    fn controller(p: &Prediction, node: u32) -> f64 {
        Network::load_of(p, Resource::Controller { node })
    }

    fn within(x: f64, target: f64, rel: f64) -> bool {
        (x - target).abs() <= rel * target
    }

    #[test]
    fn idle_writers_in_crossfire_are_slower_and_saturate_their_link() {
        let n = net();
        let (cross, pc) = case(&n, &[(0, 1, W), (1, 0, W)], &[], 0.0);
        let (apart, pa) = case(&n, &[(0, 1, W), (1, 3, W)], &[], 0.0);
        assert!(
            cross > apart * 1.15,
            "crossfire {cross} vs no crossfire {apart}"
        );
        // The crossfire link asks 4.4 GB/s a direction and gets about 3.5.
        for (a, b) in [(0, 1), (1, 0)] {
            assert!(within(link(&pc, a, b), 3.5, 0.10), "{}", link(&pc, a, b));
        }
        assert_eq!(
            pc.bottleneck
                .as_ref()
                .map(|b| b.name.starts_with("link 0->1") || b.name.starts_with("link 1->0")),
            Some(true),
            "{:?}",
            pc.bottleneck
        );
        // No crossfire: 0->1 at about 60% and 1->3 at about 54%.
        assert!(
            within(link(&pa, 0, 1) / 4.0, 0.60, 0.10),
            "{}",
            link(&pa, 0, 1)
        );
        assert!(
            within(link(&pa, 1, 3) / 4.0, 0.54, 0.10),
            "{}",
            link(&pa, 1, 3)
        );
    }

    #[test]
    fn idle_readers_take_the_same_time_in_crossfire_or_not() {
        let n = net();
        let (cross, pc) = case(&n, &[(0, 1, R), (1, 0, R)], &[], 0.0);
        let (apart, _) = case(&n, &[(0, 1, R), (1, 3, R)], &[], 0.0);
        // The crossfire link carries 0.752 + 2.2 GB/s a direction (74%):
        // loaded, not saturated. The note saw no difference; the model's
        // queueing gives a few percent (docs/model.md).
        assert!(within(cross, apart, 0.05), "crossfire {cross} vs {apart}");
        assert!(link(&pc, 0, 1) / 4.0 < 0.80);
    }

    #[test]
    fn under_full_subscription_the_order_reverses_and_node_3_is_the_bottleneck() {
        let n = net();
        // Very high background (4 GB/s) on every CPU the two threads leave:
        // one on nodes 0 and 1, two on nodes 2 and 3.
        let bg = [0, 1, 2, 2, 3, 3];
        let (cross, _) = case(&n, &[(0, 1, W), (1, 0, W)], &bg, 4.0);
        let (apart, pa) = case(&n, &[(0, 1, W), (1, 3, W)], &bg, 4.0);
        assert!(
            apart > cross * 1.10,
            "no crossfire {apart} vs crossfire {cross}"
        );
        let node3 = controller(&pa, 3);
        assert!(within(node3, 4.5, 0.10), "node 3 at {node3} GB/s");
        assert_eq!(
            pa.flows[1].waits_most_at.as_deref(),
            Some("node 3's memory controller"),
            "{:?}",
            pa.flows[1]
        );
    }

    #[test]
    fn two_writers_on_node_0_local_lose_idle_and_win_under_very_high_load() {
        let n = net();
        let mut advantage = Vec::new();
        for gbps in [0.0f64, 0.5, 1.0, 2.0, 4.0] {
            let bg: &[u32] = if gbps > 0.0 { &[1, 2, 3] } else { &[] };
            let (local, pl) = case(&n, &[(0, 0, W), (0, 0, W)], bg, gbps.max(0.1));
            let (split, ps) = case(&n, &[(0, 0, W), (0, 1, W)], bg, gbps.max(0.1));
            advantage.push(local - split);
            if gbps == 0.0 {
                // 2 x 2.98 GB/s is more than node 0's controller gives.
                assert!(local > split * 1.15, "idle: {local} vs {split}");
                assert!(
                    within(controller(&pl, 0), 4.5, 0.10),
                    "{}",
                    controller(&pl, 0)
                );
            }
            if gbps == 4.0 {
                assert!(local < split, "very high: {local} vs {split}");
                assert!(
                    within(controller(&ps, 1), 4.78, 0.10),
                    "{}",
                    controller(&ps, 1)
                );
            }
        }
        // Splitting's advantage shrinks as the load rises.
        assert!(advantage.windows(2).all(|w| w[1] < w[0]), "{advantage:?}");
    }

    #[test]
    fn two_readers_on_node_0_are_fastest_both_local() {
        let n = net();
        let times: Vec<f64> = (0..4)
            .map(|m| case(&n, &[(0, 0, R), (0, m, R)], &[], 0.0).0)
            .collect();
        assert!(
            times[1..].iter().all(|&t| times[0] < t),
            "both local {} vs {:?}",
            times[0],
            &times[1..]
        );
    }

    #[test]
    fn equal_hop_placements_are_equal_unless_a_resource_saturates() {
        let n = net();
        // Every one- and two-thread idle case of the ring from node 0 and
        // node 1's CPUs: cases with the same hops and accesses agree when
        // no resource passes 80%.
        let hops = |a: u32, b: u32| {
            if a == b {
                0
            } else if a + b == 3 {
                2
            } else {
                1
            }
        };
        let mut groups: std::collections::BTreeMap<Vec<(u32, bool)>, Vec<f64>> = Default::default();
        for m1 in 0..4 {
            for w1 in [R, W] {
                let (t, p) = case(&n, &[(0, m1, w1)], &[], 0.0);
                if p.bottleneck.as_ref().is_some_and(|b| b.utilisation < 0.8) {
                    groups.entry(vec![(hops(0, m1), w1)]).or_default().push(t);
                }
                for m2 in 0..4 {
                    for w2 in [R, W] {
                        let (t, p) = case(&n, &[(0, m1, w1), (3, m2, w2)], &[], 0.0);
                        if p.bottleneck.as_ref().is_some_and(|b| b.utilisation < 0.8) {
                            let mut key = vec![(hops(0, m1), w1), (hops(3, m2), w2)];
                            key.sort();
                            groups.entry(key).or_default().push(t);
                        }
                    }
                }
            }
        }
        assert!(groups.len() >= 10, "{}", groups.len());
        for (key, times) in &groups {
            let lo = times.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = times.iter().copied().fold(0.0, f64::max);
            assert!(hi / lo < 1.03, "{key:?}: {times:?}");
        }
    }

    #[test]
    fn the_whole_scenario_set_is_predicted_normalised_by_the_study() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let n = Network::new(&m, ModelParams::amd_quartet_2006()).unwrap();
        let set = crate::experiments::sweep::plan_scenarios(
            &m,
            &crate::experiments::sweep::Scenario::ALL,
        );
        let out = predict_scenarios(&n, &m, &set).unwrap();
        let cases: usize = out.iter().map(|s| s.cases.len()).sum();
        assert_eq!(out.len(), 6);
        assert!(cases >= 30, "{cases}");
        // Mechanics, not timing: every case normalised, the baseline 1.
        assert!(out
            .iter()
            .flat_map(|s| &s.cases)
            .all(|c| c.normalized > 0.5));
    }
}
