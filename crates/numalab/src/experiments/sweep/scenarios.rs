//! `numalab sweep --scenarios`: the figures of the classic two-thread study
//! as fixed scenarios, planned by role on any machine.
//!
//! The study ran a 4-node dual-core ring. Its figures name nodes by role:
//! A and B are linked (one hop), C is one hop from B and is not A. Every
//! scenario here is one of its figures with the same roles, chosen from
//! this machine's topology ([`Roles::choose`]): the lowest-numbered linked
//! pair of CPU nodes that has such a third node, and the C farthest from A
//! (on the ring C is then two hops from A, as in the study). A scenario
//! this machine cannot have (one CPU node, no third node one hop from B,
//! a single CPU on A) is planned as *not applicable* with its reason.
//!
//! Normalisation follows the study (docs/sweep.md): one-thread cases over
//! the fastest one-thread case, a local read; two-thread cases by the total
//! time of both threads over the idle two local readers on different nodes;
//! cases under load over that same idle baseline, so that load shows as
//! bars above 1. Running and judging the scenarios is
//! `scenario_run.rs` and `scenario_findings.rs`.

use super::space::{Access, ThreadCase};
use crate::machine::Machine;
use crate::measure::pacing::background_rate;
use serde::{Deserialize, Serialize};

/// One of the study's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Fig. 3-5: one thread on A core 0, reads and writes, memory on every node.
    OneThreadHops,
    /// Fig. 6: two writers, crossfire vs no crossfire vs local, idle.
    Crossfire,
    /// Fig. 7-8: the Fig. 6 cases at low and very-high load, one background
    /// thread per node on the cores the foreground leaves.
    CrossfireHigh,
    /// Fig. 9: the Fig. 6 cases at very-high load on every free CPU.
    CrossfireFull,
    /// Fig. 10-11: two threads on A cores 0 and 1, both reading or both
    /// writing, the second buffer on every node.
    TwoOnOneNode,
    /// Fig. 12-15: the two writers of Fig. 11 with one background thread on
    /// each other node, low to very-high.
    TwoWritersLoaded,
}

impl Scenario {
    /// Every scenario, in the study's figure order.
    pub const ALL: [Scenario; 6] = [
        Scenario::OneThreadHops,
        Scenario::Crossfire,
        Scenario::CrossfireHigh,
        Scenario::CrossfireFull,
        Scenario::TwoOnOneNode,
        Scenario::TwoWritersLoaded,
    ];

    /// The name `--scenarios` takes and the JSON says.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::OneThreadHops => "one-thread-hops",
            Scenario::Crossfire => "crossfire",
            Scenario::CrossfireHigh => "crossfire-high",
            Scenario::CrossfireFull => "crossfire-full",
            Scenario::TwoOnOneNode => "two-on-one-node",
            Scenario::TwoWritersLoaded => "two-writers-loaded",
        }
    }

    /// The study's figures it reproduces.
    pub fn figure(self) -> &'static str {
        match self {
            Scenario::OneThreadHops => "Fig. 3-5",
            Scenario::Crossfire => "Fig. 6",
            Scenario::CrossfireHigh => "Fig. 7-8",
            Scenario::CrossfireFull => "Fig. 9",
            Scenario::TwoOnOneNode => "Fig. 10-11",
            Scenario::TwoWritersLoaded => "Fig. 12-15",
        }
    }

    /// What it shows, for titles.
    pub fn title(self) -> &'static str {
        match self {
            Scenario::OneThreadHops => "one thread, memory 0, 1 and 2 hops away",
            Scenario::Crossfire => "crossfire, idle",
            Scenario::CrossfireHigh => "crossfire under load, high subscription",
            Scenario::CrossfireFull => "crossfire under load, full subscription",
            Scenario::TwoOnOneNode => "two threads on one node, idle",
            Scenario::TwoWritersLoaded => "two writers on one node under load",
        }
    }

    /// Foreground threads of each case.
    pub fn threads(self) -> usize {
        match self {
            Scenario::OneThreadHops => 1,
            _ => 2,
        }
    }

    /// Background levels it runs at, in order; empty: idle only.
    pub fn levels(self) -> &'static [&'static str] {
        match self {
            Scenario::OneThreadHops | Scenario::Crossfire | Scenario::TwoOnOneNode => &[],
            Scenario::CrossfireHigh => &["low", "very-high"],
            Scenario::CrossfireFull => &["very-high"],
            Scenario::TwoWritersLoaded => &["low", "medium", "high", "very-high"],
        }
    }

    /// `all`, or scenario names separated by commas (each at most once,
    /// run in figure order).
    pub fn parse_list(text: &str) -> Result<Vec<Scenario>, String> {
        let valid = || {
            Scenario::ALL
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if text.trim() == "all" {
            return Ok(Scenario::ALL.to_vec());
        }
        let mut out = Vec::new();
        for part in text.split(',') {
            let p = part.trim();
            let s = Scenario::ALL
                .iter()
                .copied()
                .find(|s| s.name() == p)
                .ok_or_else(|| {
                    format!(
                        "unknown scenario '{}'; valid: all, {}",
                        crate::text::format::excerpt(p, 40),
                        valid()
                    )
                })?;
            if out.contains(&s) {
                return Err(format!("scenario '{p}' is named twice"));
            }
            out.push(s);
        }
        out.sort();
        Ok(out)
    }
}

/// The study's roles on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Roles {
    /// Node A: the home of the one-thread and one-node scenarios.
    pub a: u32,
    /// A's core 0 and, when it has a second one, core 1 (CPU ids; distinct
    /// physical cores when A has them).
    pub a_cpus: Vec<u32>,
    /// Node B, one hop from A (`None`: no CPU node is linked to A).
    pub b: Option<u32>,
    /// B's core 0 and core 1 when it has them.
    pub b_cpus: Vec<u32>,
    /// Node C with memory, one hop from B and not A.
    pub c: Option<u32>,
    /// How the roles were chosen, and what differs from the study's ring.
    pub notes: Vec<String>,
    /// The other nodes, lettered D, E, ... in this order.
    pub others: Vec<u32>,
}

impl Roles {
    /// Picks the roles: among CPU nodes with memory, the lowest A that has a
    /// linked B with a third node C one hop from B (lowest B first), C the
    /// farthest from A among those; failing that the lowest linked pair,
    /// failing that the lowest CPU node alone. `None` without any CPU node.
    pub fn choose(m: &Machine) -> Option<Roles> {
        let mem = m.memory_nodes();
        let cpu_nodes: Vec<u32> = m
            .cpu_nodes()
            .iter()
            .filter(|&n| !m.allowed_cpus_of(n).is_empty() && mem.contains(n))
            .collect();
        let hops = |a: u32, b: u32| m.hops_between(a, b);
        let third = |a: u32, b: u32| {
            mem.iter()
                .filter(|&c| c != a && c != b && hops(b, c) == Some(1))
                .max_by_key(|&c| (hops(a, c).unwrap_or(0), std::cmp::Reverse(c)))
        };
        let pairs: Vec<(u32, u32)> = cpu_nodes
            .iter()
            .flat_map(|&a| cpu_nodes.iter().map(move |&b| (a, b)))
            .filter(|&(a, b)| a != b && hops(a, b) == Some(1))
            .collect();
        // A with two CPUs first: the one-node scenarios need two cores on A.
        let two_cpus = |n: u32| m.allowed_cpus_of(n).len() >= 2;
        let pick = pairs
            .iter()
            .copied()
            .filter(|&(a, b)| third(a, b).is_some())
            .min_by_key(|&(a, b)| (!two_cpus(a), a, b))
            .or_else(|| {
                pairs
                    .iter()
                    .copied()
                    .min_by_key(|&(a, b)| (!two_cpus(a), a, b))
            });
        let mut notes = Vec::new();
        let (a, b, c) = match pick {
            Some((a, b)) => (a, Some(b), third(a, b)),
            None => {
                let a = cpu_nodes
                    .iter()
                    .copied()
                    .min_by_key(|&n| (!two_cpus(n), n))?;
                notes.push(if cpu_nodes.len() < 2 {
                    "one node with CPUs and memory: no B and no C".to_string()
                } else {
                    "no two nodes with CPUs are one hop apart: no B and no C".to_string()
                });
                (a, None, None)
            }
        };
        if b.is_some() && c.is_none() {
            notes.push(format!(
                "no node with memory is one hop from B (node {}) other than A: no C",
                b.unwrap_or(0)
            ));
        }
        let (a_cpus, a_note) = two_cores(m, a);
        notes.extend(a_note);
        let (b_cpus, b_note) = b.map(|b| two_cores(m, b)).unwrap_or_default();
        notes.extend(b_note);
        let others = m
            .node_ids()
            .iter()
            .filter(|&n| n != a && Some(n) != b && Some(n) != c)
            .collect();
        Some(Roles {
            a,
            a_cpus,
            b,
            b_cpus,
            c,
            notes,
            others,
        })
    }

    /// The role letter of `node` (`A`, `B`, `C`), else its number.
    pub fn letter(&self, node: u32) -> String {
        if node == self.a {
            "A".into()
        } else if Some(node) == self.b {
            "B".into()
        } else if Some(node) == self.c {
            "C".into()
        } else {
            // The other nodes in id order: D, E, ... as the study's ring has D.
            let others = self.others.iter().position(|&n| n == node);
            match others {
                Some(i) if i < 23 => ((b'D' + i as u8) as char).to_string(),
                _ => format!("n{node}"),
            }
        }
    }

    /// A thread of a case: on `cpu` (core `core` of its node), `access`,
    /// memory on `mem`.
    fn thread(&self, m: &Machine, cpu: u32, access: Access, mem: u32) -> ThreadCase {
        let node = m.node_of_cpu(cpu).unwrap_or(self.a);
        ThreadCase {
            cpu,
            node,
            core: core_index(m, node, cpu),
            access,
            mem,
            hops: m.hops_between(node, mem),
        }
    }

    /// The study's label of a thread: `A.0.w.B`.
    fn role_label(&self, t: &ThreadCase) -> String {
        format!(
            "{}.{}.{}.{}",
            self.letter(t.node),
            t.core,
            t.access.letter(),
            self.letter(t.mem)
        )
    }
}

/// Position of `cpu` among its node's allowed CPUs: the `core` of a label.
fn core_index(m: &Machine, node: u32, cpu: u32) -> u32 {
    m.allowed_cpus_of(node)
        .iter()
        .position(|c| c == cpu)
        .unwrap_or(0) as u32
}

/// A node's core 0 and core 1: its first allowed CPU and the first one on
/// another physical core (an SMT sibling only when it has no other core).
fn two_cores(m: &Machine, node: u32) -> (Vec<u32>, Option<String>) {
    let cpus: Vec<u32> = m.allowed_cpus_of(node).iter().collect();
    let Some(&first) = cpus.first() else {
        return (Vec::new(), None);
    };
    let core_of = |c: u32| m.cores.iter().position(|k| k.cpus.contains(c));
    if let Some(&other) = cpus
        .iter()
        .find(|&&c| c != first && core_of(c) != core_of(first))
    {
        return (vec![first, other], None);
    }
    match cpus.get(1) {
        Some(&sibling) => (
            vec![first, sibling],
            Some(format!(
                "node {node} has one physical core: its two CPUs {first} and {sibling} are SMT siblings"
            )),
        ),
        None => (vec![first], None),
    }
}

/// One case of a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioCase {
    /// What the case is in the study: `local`, `crossfire`, `no crossfire`,
    /// `read, 1 hop`, `second buffer 2 hops`...
    pub name: String,
    /// The study's labels by role: `A.0.w.B`.
    pub roles: Vec<String>,
    /// The concrete labels `node.core.access.memnode`, as `sweep` prints them.
    pub labels: Vec<String>,
    pub threads: Vec<ThreadCase>,
}

impl ScenarioCase {
    fn new(name: String, roles: &Roles, threads: Vec<ThreadCase>) -> Self {
        ScenarioCase {
            name,
            roles: threads.iter().map(|t| roles.role_label(t)).collect(),
            labels: threads.iter().map(|t| t.label()).collect(),
            threads,
        }
    }

    /// The labels joined by spaces.
    pub fn label(&self) -> String {
        self.labels.join(" ")
    }
}

/// Where a scenario's background threads run, and how hard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioBackground {
    /// One paced reader pinned to each, its buffer local.
    pub cpus: Vec<u32>,
    /// Levels, each a run of its own: `low`, `medium`, `high`, `very-high`.
    pub levels: Vec<String>,
    /// Bytes/s per background thread at each level.
    pub bytes_per_second: Vec<f64>,
}

/// A scenario planned on a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioPlan {
    pub name: Scenario,
    pub figure: String,
    pub title: String,
    pub threads: usize,
    /// Why this machine cannot have the scenario; `None` when it can.
    pub not_applicable: Option<String>,
    pub cases: Vec<ScenarioCase>,
    /// `None`: idle only.
    pub background: Option<ScenarioBackground>,
    /// `idle`, `high` (one background thread per node, on the cores the
    /// foreground leaves), `full` (every free CPU), or `one per other node`.
    pub subscription: String,
    /// The case it is normalised to (labels), as the study does.
    pub baseline: String,
}

/// The scenarios planned on a machine, and the baselines they share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSet {
    /// `None` on a machine without a node that has both CPUs and memory.
    pub roles: Option<Roles>,
    pub scenarios: Vec<ScenarioPlan>,
    /// The fastest one-thread case of the study: a local read on A core 0.
    pub one_thread_baseline: Option<ScenarioCase>,
    /// The fastest idle two-thread case of the study: two local readers on
    /// different nodes (on two cores of A where there is no B).
    pub two_thread_baseline: Option<ScenarioCase>,
}

impl ScenarioSet {
    /// The scenarios that can run here.
    pub fn applicable(&self) -> impl Iterator<Item = &ScenarioPlan> {
        self.scenarios.iter().filter(|s| s.not_applicable.is_none())
    }

    /// `name: why` of every scenario that cannot run here, joined by `; `.
    pub fn not_applicable_reasons(&self) -> String {
        self.scenarios
            .iter()
            .filter_map(|p| {
                p.not_applicable
                    .as_deref()
                    .map(|why| format!("{}: {why}", p.name.name()))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Plans `which` on `m`.
pub fn plan_scenarios(m: &Machine, which: &[Scenario]) -> ScenarioSet {
    let Some(roles) = Roles::choose(m) else {
        let why = "this machine has no node with both CPUs (allowed) and memory";
        return ScenarioSet {
            roles: None,
            scenarios: which.iter().map(|&s| not_applicable(s, why)).collect(),
            one_thread_baseline: None,
            two_thread_baseline: None,
        };
    };
    let a0 = roles.a_cpus[0];
    let one_base = ScenarioCase::new(
        "read, 0 hops".into(),
        &roles,
        vec![roles.thread(m, a0, Access::Read, roles.a)],
    );
    let two_base = match (roles.b, roles.b_cpus.first(), roles.a_cpus.get(1)) {
        (Some(b), Some(&b0), _) => Some(ScenarioCase::new(
            "two local readers".into(),
            &roles,
            vec![
                roles.thread(m, a0, Access::Read, roles.a),
                roles.thread(m, b0, Access::Read, b),
            ],
        )),
        (None, _, Some(&a1)) => Some(ScenarioCase::new(
            "two local readers (one node)".into(),
            &roles,
            vec![
                roles.thread(m, a0, Access::Read, roles.a),
                roles.thread(m, a1, Access::Read, roles.a),
            ],
        )),
        _ => None,
    };
    let scenarios = which
        .iter()
        .map(|&s| {
            plan_one(m, &roles, s, &one_base, two_base.as_ref())
                .unwrap_or_else(|why| not_applicable(s, &why))
        })
        .collect();
    ScenarioSet {
        roles: Some(roles),
        scenarios,
        one_thread_baseline: Some(one_base),
        two_thread_baseline: two_base,
    }
}

fn not_applicable(s: Scenario, why: &str) -> ScenarioPlan {
    ScenarioPlan {
        name: s,
        figure: s.figure().into(),
        title: s.title().into(),
        threads: s.threads(),
        not_applicable: Some(why.into()),
        cases: Vec::new(),
        background: None,
        subscription: "idle".into(),
        baseline: String::new(),
    }
}

/// Hops in words: `0 hops`, `1 hop`.
fn hops_words(h: Option<u32>) -> String {
    match h {
        Some(1) => "1 hop".into(),
        Some(h) => format!("{h} hops"),
        None => "unknown hops".into(),
    }
}

/// The Fig. 6 cases: local, crossfire, no crossfire.
fn crossfire_cases(m: &Machine, r: &Roles) -> Result<Vec<ScenarioCase>, String> {
    let b = r.b.ok_or_else(|| {
        "needs two nodes with CPUs one hop apart (A and B); this machine has none".to_string()
    })?;
    let c = r.c.ok_or_else(|| {
        format!("needs a node with memory one hop from B (node {b}) other than A (node {}): this machine has none", r.a)
    })?;
    let (a0, b0) = (r.a_cpus[0], r.b_cpus[0]);
    let w = Access::Write;
    let case = |name: &str, ma: u32, mb: u32| {
        ScenarioCase::new(
            name.into(),
            r,
            vec![r.thread(m, a0, w, ma), r.thread(m, b0, w, mb)],
        )
    };
    Ok(vec![
        case("local", r.a, b),
        case("crossfire", b, r.a),
        case("no crossfire", b, c),
    ])
}

/// Per node with allowed CPUs: its CPUs the foreground does not use.
fn free_cpus_by_node(m: &Machine, busy: &[u32]) -> Vec<(u32, Vec<u32>)> {
    m.cpu_nodes()
        .iter()
        .map(|n| {
            let free: Vec<u32> = m
                .allowed_cpus_of(n)
                .iter()
                .filter(|c| !busy.contains(c))
                .collect();
            (n, free)
        })
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

fn background(levels: &[&str], cpus: Vec<u32>) -> Result<ScenarioBackground, String> {
    if cpus.is_empty() {
        return Err(
            "needs a free CPU for the background threads: the foreground uses them all".into(),
        );
    }
    Ok(ScenarioBackground {
        cpus,
        levels: levels.iter().map(|l| l.to_string()).collect(),
        bytes_per_second: levels
            .iter()
            .map(|l| background_rate(l))
            .collect::<Result<_, _>>()?,
    })
}

/// One thread on A's first CPU reading, then writing, a buffer on each
/// memory node.
fn one_thread_cases(m: &Machine, r: &Roles, mem: &[u32]) -> Vec<ScenarioCase> {
    let a0 = r.a_cpus[0];
    [Access::Read, Access::Write]
        .iter()
        .flat_map(|&acc| mem.iter().map(move |&n| (acc, n)))
        .map(|(acc, n)| {
            let t = r.thread(m, a0, acc, n);
            let name = format!(
                "{}, {}",
                if acc == Access::Read { "read" } else { "write" },
                hops_words(t.hops)
            );
            ScenarioCase::new(name, r, vec![t])
        })
        .collect()
}

/// Two threads on node A (its first CPU and `a1`), the first on A's
/// memory, the second's buffer on each memory node, for each of `accesses`.
fn same_node_cases(
    m: &Machine,
    r: &Roles,
    a1: u32,
    accesses: &[Access],
    mem: &[u32],
) -> Vec<ScenarioCase> {
    let a0 = r.a_cpus[0];
    accesses
        .iter()
        .flat_map(|&acc| mem.iter().map(move |&n| (acc, n)))
        .map(|(acc, n)| {
            let t = [r.thread(m, a0, acc, r.a), r.thread(m, a1, acc, n)];
            let name = format!(
                "{}, second buffer {}",
                if acc == Access::Read {
                    "two readers"
                } else {
                    "two writers"
                },
                hops_words(t[1].hops)
            );
            ScenarioCase::new(name, r, t.to_vec())
        })
        .collect()
}

/// The background CPUs of high crossfire: one per node, the other core of
/// A and of B, one core of each other node.
fn one_per_node(m: &Machine, r: &Roles) -> Vec<u32> {
    let busy = [r.a_cpus[0], r.b_cpus[0]];
    free_cpus_by_node(m, &busy)
        .into_iter()
        .map(|(n, free)| {
            let other = if n == r.a {
                r.a_cpus.get(1).copied()
            } else if Some(n) == r.b {
                r.b_cpus.get(1).copied()
            } else {
                None
            };
            other.unwrap_or(free[0])
        })
        .collect()
}

fn plan_one(
    m: &Machine,
    r: &Roles,
    s: Scenario,
    one_base: &ScenarioCase,
    two_base: Option<&ScenarioCase>,
) -> Result<ScenarioPlan, String> {
    let a0 = r.a_cpus[0];
    let mem: Vec<u32> = m.memory_nodes().iter().collect();
    let two_base_label = || {
        two_base
            .map(|c| c.label())
            .ok_or_else(|| "needs two CPUs for its two threads".to_string())
    };
    let (cases, bg, subscription, baseline) = match s {
        Scenario::OneThreadHops => (
            one_thread_cases(m, r, &mem),
            None,
            "idle".to_string(),
            one_base.label(),
        ),
        Scenario::Crossfire => (
            crossfire_cases(m, r)?,
            None,
            "idle".into(),
            two_base_label()?,
        ),
        Scenario::CrossfireHigh => {
            let cases = crossfire_cases(m, r)?;
            (
                cases,
                Some(background(s.levels(), one_per_node(m, r))?),
                "high".into(),
                two_base_label()?,
            )
        }
        Scenario::CrossfireFull => {
            let cases = crossfire_cases(m, r)?;
            let busy = [a0, r.b_cpus[0]];
            let cpus = free_cpus_by_node(m, &busy)
                .into_iter()
                .flat_map(|(_, f)| f)
                .collect();
            (
                cases,
                Some(background(s.levels(), cpus)?),
                "full".into(),
                two_base_label()?,
            )
        }
        Scenario::TwoOnOneNode | Scenario::TwoWritersLoaded => {
            let a1 = *r
                .a_cpus
                .get(1)
                .ok_or_else(|| format!("needs two CPUs on node A (node {}); it has one", r.a))?;
            let accesses: &[Access] = if s == Scenario::TwoOnOneNode {
                &[Access::Read, Access::Write]
            } else {
                &[Access::Write]
            };
            let cases = same_node_cases(m, r, a1, accesses, &mem);
            if s == Scenario::TwoOnOneNode {
                (cases, None, "idle".into(), two_base_label()?)
            } else {
                let others: Vec<u32> = free_cpus_by_node(m, &[a0, a1])
                    .into_iter()
                    .filter(|(n, _)| *n != r.a)
                    .map(|(_, f)| f[0])
                    .collect();
                if others.is_empty() {
                    return Err("needs a second node with CPUs for the background threads".into());
                }
                (
                    cases,
                    Some(background(s.levels(), others)?),
                    "one per other node".into(),
                    two_base_label()?,
                )
            }
        }
    };
    Ok(ScenarioPlan {
        name: s,
        figure: s.figure().into(),
        title: s.title().into(),
        threads: s.threads(),
        not_applicable: None,
        cases,
        background: bg,
        subscription,
        baseline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    fn quartet() -> Machine {
        fixture("qemu-quartet-4n2c-ring.xml")
    }

    fn plan_of(set: &ScenarioSet, s: Scenario) -> &ScenarioPlan {
        set.scenarios.iter().find(|p| p.name == s).unwrap()
    }

    fn roles_of(p: &ScenarioPlan) -> Vec<String> {
        p.cases.iter().map(|c| c.roles.join(" + ")).collect()
    }

    #[test]
    fn the_quartet_gets_the_study_roles() {
        let m = quartet();
        let set = plan_scenarios(&m, &Scenario::ALL);
        let r = set.roles.as_ref().unwrap();
        // Ring 0-1, 0-2, 1-3, 2-3: A = 0, B = 1, C = 3 (one hop from B, two from A).
        assert_eq!((r.a, r.b, r.c), (0, Some(1), Some(3)));
        assert_eq!(r.a_cpus, vec![0, 1]);
        assert_eq!(r.b_cpus, vec![2, 3]);
        assert!(set.applicable().count() == 6, "{:?}", set.scenarios);
        let one = plan_of(&set, Scenario::OneThreadHops);
        assert_eq!(one.cases.len(), 8);
        assert_eq!(one.cases[0].roles, vec!["A.0.r.A"]);
        assert_eq!(one.baseline, "0.0.r.0");
        let hops: Vec<Option<u32>> = one.cases[..4].iter().map(|c| c.threads[0].hops).collect();
        assert_eq!(hops, vec![Some(0), Some(1), Some(1), Some(2)]);
        let cross = plan_of(&set, Scenario::Crossfire);
        assert_eq!(
            roles_of(cross),
            vec![
                "A.0.w.A + B.0.w.B",
                "A.0.w.B + B.0.w.A",
                "A.0.w.B + B.0.w.C"
            ]
        );
        assert_eq!(cross.cases[2].labels, vec!["0.0.w.1", "1.0.w.3"]);
        assert_eq!(cross.baseline, "0.0.r.0 1.0.r.1");
        // Fig. 7-8: the other core of A and B, one core of each other node.
        let high = plan_of(&set, Scenario::CrossfireHigh);
        let bg = high.background.as_ref().unwrap();
        assert_eq!(bg.cpus, vec![1, 3, 4, 6]);
        assert_eq!(bg.levels, vec!["low", "very-high"]);
        assert_eq!(high.subscription, "high");
        // Fig. 9: every free CPU, six on the ring.
        let full = plan_of(&set, Scenario::CrossfireFull);
        assert_eq!(
            full.background.as_ref().unwrap().cpus,
            vec![1, 3, 4, 5, 6, 7]
        );
        assert_eq!(full.background.as_ref().unwrap().levels, vec!["very-high"]);
        // Fig. 10-11: A cores 0 and 1, the second buffer on every node.
        let two = plan_of(&set, Scenario::TwoOnOneNode);
        assert_eq!(two.cases.len(), 8);
        assert_eq!(two.cases[7].roles, vec!["A.0.w.A", "A.1.w.C"]);
        assert_eq!(two.cases[7].name, "two writers, second buffer 2 hops");
        // Fig. 12-15: one background thread on each other node.
        let loaded = plan_of(&set, Scenario::TwoWritersLoaded);
        assert_eq!(loaded.background.as_ref().unwrap().cpus, vec![2, 4, 6]);
        assert_eq!(loaded.cases.len(), 4);
        assert_eq!(
            loaded.background.as_ref().unwrap().levels,
            vec!["low", "medium", "high", "very-high"]
        );
    }

    #[test]
    fn a_one_node_machine_says_what_it_cannot_have() {
        let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
        let set = plan_scenarios(&m, &Scenario::ALL);
        let why = |s| plan_of(&set, s).not_applicable.clone();
        assert_eq!(why(Scenario::OneThreadHops), None);
        assert_eq!(why(Scenario::TwoOnOneNode), None);
        assert_eq!(
            why(Scenario::Crossfire).unwrap(),
            "needs two nodes with CPUs one hop apart (A and B); this machine has none"
        );
        assert_eq!(
            why(Scenario::TwoWritersLoaded).unwrap(),
            "needs a second node with CPUs for the background threads"
        );
        assert_eq!(
            set.two_thread_baseline.as_ref().unwrap().name,
            "two local readers (one node)"
        );
    }

    #[test]
    fn scenario_lists_parse_with_one_line_errors() {
        assert_eq!(Scenario::parse_list("all").unwrap().len(), 6);
        assert_eq!(
            Scenario::parse_list("two-on-one-node,crossfire").unwrap(),
            vec![Scenario::Crossfire, Scenario::TwoOnOneNode]
        );
        let e = Scenario::parse_list("crossfire,fig6").unwrap_err();
        assert!(
            e.starts_with("unknown scenario 'fig6'; valid: all, one-thread-hops, crossfire"),
            "{e}"
        );
        assert_eq!(
            Scenario::parse_list("crossfire,crossfire").unwrap_err(),
            "scenario 'crossfire' is named twice"
        );
    }
}
