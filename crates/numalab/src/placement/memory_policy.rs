//! `MemoryPolicy`: where a buffer's (or a process's) pages go, by the names
//! every command accepts (docs/policies.md):
//!
//! | text | meaning |
//! |---|---|
//! | `first-touch` (`default`) | OS default: the node of the thread that first writes a page |
//! | `local` | the toucher's node (MPOL_LOCAL) |
//! | `bind:NODES` | strictly on NODES (MPOL_BIND) |
//! | `preferred:NODE` | NODE first, elsewhere when full; several nodes = MPOL_PREFERRED_MANY |
//! | `interleave:NODES[@PAGES]` | round robin over NODES in chunks of PAGES pages (default 1) |
//! | `weighted:N=W,N=W[@PAGES]` | weighted round robin: W chunks on node N per round |
//! | `remote[:near\|:far]` | the nearest (default) or farthest node other than the toucher's |

use super::resource_set::{ListMeaning, ResourceSet};
use super::sys::Mode;
use super::PlacementError;
use crate::machine::Machine;
use crate::text::format::excerpt;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A memory policy as the user wrote it (node sets already resolved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum MemoryPolicy {
    FirstTouch,
    Local,
    Bind {
        nodes: IdSet,
    },
    Preferred {
        nodes: IdSet,
    },
    Interleave {
        nodes: IdSet,
        chunk_pages: u64,
    },
    Weighted {
        weights: Vec<(u32, u32)>,
        chunk_pages: u64,
    },
    Remote {
        far: bool,
    },
}

/// How weighted interleave is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WeightedImpl {
    /// The kernel's MPOL_WEIGHTED_INTERLEAVE when it has it and its
    /// system-wide weights already are the ones asked for (nothing is
    /// written), else the per-process emulation: no setting other
    /// processes rely on is ever changed without being asked for.
    #[default]
    Auto,
    /// The kernel policy, its system-wide weights written for the
    /// duration (restored after); an error on kernels older than 6.9.
    Kernel,
    /// Exact chunk-wise binding, on any kernel.
    Emulate,
}

impl WeightedImpl {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(Self::Auto),
            "kernel" => Ok(Self::Kernel),
            "emulate" => Ok(Self::Emulate),
            _ => Err(format!(
                "unknown weighted-interleave implementation '{text}'; valid: auto, kernel, emulate"
            )),
        }
    }
}

/// What the kernel is actually asked to do for a buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mechanism", rename_all = "kebab-case")]
pub enum Realization {
    /// One policy over the whole range (or none for first-touch); the mode
    /// by its kernel name (`bind`, `prefer (many)`...).
    Kernel {
        #[serde(serialize_with = "ser_mode", deserialize_with = "de_mode")]
        mode: Mode,
        nodes: IdSet,
    },
    /// The kernel's weighted interleave; weights must be written to
    /// /sys/kernel/mm/mempolicy/weighted_interleave for the duration.
    KernelWeighted {
        nodes: IdSet,
        weights: Vec<(u32, u32)>,
    },
    /// Chunk-wise strict binding: `pattern` repeats, each entry `(node, pages)`.
    Chunks { pattern: Vec<(u32, u64)> },
}

fn ser_mode<S: serde::Serializer>(m: &Mode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.kernel_name())
}

/// The inverse of `ser_mode`.
fn de_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
    let name = String::deserialize(d)?;
    Mode::from_kernel_name(&name).ok_or_else(|| {
        serde::de::Error::custom(format!("unknown kernel memory policy mode '{name}'"))
    })
}

pub const POLICY_CHOICES: &str = "first-touch, local, bind:NODES, preferred:NODE, interleave:NODES[@PAGES], weighted:NODE=W,...[@PAGES], remote[:near|:far]";

impl MemoryPolicy {
    /// Every page on `node` (`bind:N`).
    pub fn on_node(node: u32) -> Self {
        Self::Bind {
            nodes: IdSet::single(node),
        }
    }

    /// Parses a policy; node sets use the resource-set grammar with bare lists
    /// meaning nodes (`bind:0-1`, `bind:package:0`, `interleave:all`).
    pub fn parse(m: &Machine, text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (text, None),
        };
        let need_arg = |what: &str| -> Result<&str, String> {
            arg.filter(|a| !a.is_empty()).ok_or_else(|| {
                format!(
                    "policy '{name}' needs {what}, e.g. {}; policies: {POLICY_CHOICES}",
                    example(m, name)
                )
            })
        };
        let no_arg = |p: MemoryPolicy| -> Result<MemoryPolicy, String> {
            match arg {
                Some(a) => Err(format!(
                    "policy '{name}' takes no argument (got '{}')",
                    excerpt(a, 40)
                )),
                None => Ok(p),
            }
        };
        match name {
            "first-touch" | "firsttouch" | "default" => no_arg(Self::FirstTouch),
            "local" | "localalloc" => no_arg(Self::Local),
            "bind" | "membind" => {
                let nodes = node_set(m, need_arg("nodes")?)?;
                Ok(Self::Bind { nodes })
            }
            "preferred" | "prefer" => {
                let nodes = node_set(m, need_arg("a node")?)?;
                Ok(Self::Preferred { nodes })
            }
            "interleave" => {
                let (set, chunk_pages) = split_chunk(m, need_arg("nodes")?)?;
                let nodes = node_set(m, set)?;
                Ok(Self::Interleave { nodes, chunk_pages })
            }
            "weighted" => {
                let (spec, chunk_pages) = split_chunk(m, need_arg("weights")?)?;
                Ok(Self::Weighted {
                    weights: parse_weights(m, spec)?,
                    chunk_pages,
                })
            }
            "remote" => match arg {
                None | Some("near") => Ok(Self::Remote { far: false }),
                Some("far") => Ok(Self::Remote { far: true }),
                Some(other) => Err(format!(
                    "unknown remote choice '{}'; valid: remote, remote:near, remote:far",
                    excerpt(other, 40)
                )),
            },
            _ => Err(format!(
                "unknown memory policy '{}'; valid: {POLICY_CHOICES}",
                excerpt(text, 40)
            )),
        }
    }

    /// Whether the policy places single pages differently from their
    /// neighbours (so THP, which allocates 2 MiB at once, would blur it).
    pub fn is_page_granular(&self) -> bool {
        matches!(self, Self::Interleave { .. } | Self::Weighted { .. })
    }

    /// The node a page should land on when this policy is followed
    /// exactly, or `None` when the answer depends on more than the policy.
    pub fn nodes_expected(&self, m: &Machine, toucher_node: Option<u32>) -> Option<IdSet> {
        match self {
            Self::FirstTouch | Self::Local => toucher_node.map(IdSet::single),
            Self::Bind { nodes } | Self::Interleave { nodes, .. } => Some(nodes.clone()),
            Self::Preferred { nodes } => Some(nodes.clone()),
            Self::Weighted { weights, .. } => Some(weights.iter().map(|w| w.0).collect()),
            Self::Remote { far } => remote_node(m, toucher_node?, *far).ok().map(IdSet::single),
        }
    }

    /// Turns the policy into what the kernel is asked to do, for a buffer
    /// first touched from `toucher_node`.
    pub fn realize(
        &self,
        m: &Machine,
        toucher_node: Option<u32>,
        weighted: WeightedImpl,
    ) -> Result<Realization, PlacementError> {
        let kernel = |mode: Mode, nodes: IdSet| Realization::Kernel { mode, nodes };
        Ok(match self {
            Self::FirstTouch => kernel(Mode::Default, IdSet::new()),
            Self::Local => kernel(Mode::Local, IdSet::new()),
            Self::Bind { nodes } => kernel(Mode::Bind, nodes.clone()),
            Self::Preferred { nodes } if nodes.len() == 1 => kernel(Mode::Preferred, nodes.clone()),
            Self::Preferred { nodes } => kernel(Mode::PreferredMany, nodes.clone()),
            Self::Interleave {
                nodes,
                chunk_pages: 1,
            } => kernel(Mode::Interleave, nodes.clone()),
            Self::Interleave { nodes, chunk_pages } => Realization::Chunks {
                pattern: nodes.iter().map(|n| (n, *chunk_pages)).collect(),
            },
            Self::Weighted {
                weights,
                chunk_pages,
            } => {
                let have_kernel = super::sys::kernel_supports(Mode::WeightedInterleave);
                let use_kernel = match weighted {
                    WeightedImpl::Kernel => {
                        have_kernel.map_err(PlacementError::Unsupported)?;
                        if *chunk_pages != 1 {
                            return Err(PlacementError::Invalid("the kernel's weighted interleave works page by page: @PAGES needs --weighted-impl emulate".into()));
                        }
                        true
                    }
                    WeightedImpl::Auto => {
                        have_kernel.is_ok()
                            && *chunk_pages == 1
                            && kernel_weights_are(super::settings::Journal::system(), weights)
                    }
                    WeightedImpl::Emulate => false,
                };
                if use_kernel {
                    Realization::KernelWeighted {
                        nodes: weights.iter().map(|w| w.0).collect(),
                        weights: weights.clone(),
                    }
                } else {
                    Realization::Chunks {
                        pattern: weights
                            .iter()
                            .map(|&(n, w)| (n, w as u64 * chunk_pages))
                            .collect(),
                    }
                }
            }
            Self::Remote { far } => {
                let from = toucher_node.ok_or_else(|| {
                    PlacementError::Invalid(
                        "remote placement needs a toucher CPU on one node (use --cpu)".into(),
                    )
                })?;
                let node = remote_node(m, from, *far).map_err(PlacementError::Invalid)?;
                kernel(Mode::Bind, IdSet::single(node))
            }
        })
    }
}

/// The node other than `from` at the smallest (or largest) distance; ties go
/// to the lowest OS index so experiments are repeatable.
pub fn remote_node(m: &Machine, from: u32, far: bool) -> Result<u32, String> {
    let candidates: Vec<u32> = m.allowed_nodes.iter().filter(|&n| n != from).collect();
    let pick = if far {
        candidates
            .iter()
            .copied()
            .max_by_key(|&n| (m.distance(from, n), std::cmp::Reverse(n)))
    } else {
        candidates
            .iter()
            .copied()
            .min_by_key(|&n| (m.distance(from, n), n))
    };
    pick.ok_or_else(|| {
        format!(
            "remote placement needs a second memory node; this machine has only node {from} (allowed nodes: {})",
            m.allowed_nodes
        )
    })
}

/// A policy of kind `name` that this machine accepts, for error messages:
/// built from its allowed nodes, so the example given always works here.
fn example(m: &Machine, name: &str) -> String {
    let mut nodes = m.allowed_nodes.iter();
    let first = nodes.next().unwrap_or(0);
    match (name, nodes.next()) {
        ("weighted", Some(second)) => format!("weighted:{first}=3,{second}=1"),
        ("weighted", None) => format!("weighted:{first}=1"),
        ("interleave", Some(second)) => format!("interleave:{first},{second}"),
        _ => format!("{name}:{first}"),
    }
}

fn node_set(m: &Machine, text: &str) -> Result<IdSet, String> {
    let s = ResourceSet::parse(m, text, ListMeaning::Nodes)?;
    if s.nodes.is_empty() {
        return Err(format!(
            "'{}' names no memory node; allowed nodes: {}",
            excerpt(text, 40),
            m.allowed_nodes
        ));
    }
    Ok(s.nodes)
}

/// Most pages in one chunk of `@PAGES`: 2^30 pages, 4 TiB of 4 KiB pages,
/// beyond any buffer worth spreading.
pub const MAX_CHUNK_PAGES: u64 = 1 << 30;

fn split_chunk<'t>(m: &Machine, text: &'t str) -> Result<(&'t str, u64), String> {
    match text.rsplit_once('@') {
        None => Ok((text, 1)),
        Some((set, pages)) => {
            let n: u64 = pages
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=MAX_CHUNK_PAGES).contains(n))
                .ok_or_else(|| {
                    format!(
                        "'@{}' is not a chunk size: write @PAGES with PAGES a whole number of pages from 1 to {MAX_CHUNK_PAGES}, e.g. {}@4",
                        excerpt(pages, 40),
                        example(m, "interleave")
                    )
                })?;
            Ok((set, n))
        }
    }
}

fn parse_weights(m: &Machine, text: &str) -> Result<Vec<(u32, u32)>, String> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for item in text.split(',') {
        let (node, w) = item.split_once('=').ok_or_else(|| {
            format!(
                "'{}' is not NODE=WEIGHT; write e.g. {}",
                excerpt(item, 40),
                example(m, "weighted")
            )
        })?;
        let nodes = node_set(m, node.trim())?;
        let w: u32 = w
            .trim()
            .parse()
            .ok()
            .filter(|&w| (1..=255).contains(&w))
            .ok_or_else(|| {
                format!(
                    "weight '{}' of node {} must be a whole number from 1 to 255 (the kernel's range)",
                    excerpt(w.trim(), 40),
                    excerpt(node.trim(), 40)
                )
            })?;
        for n in nodes.iter() {
            if out.iter().any(|o| o.0 == n) {
                return Err(format!(
                    "node {n} has two weights in '{}'",
                    excerpt(text, 60)
                ));
            }
            out.push((n, w));
        }
    }
    out.sort_unstable();
    Ok(out)
}

impl fmt::Display for MemoryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let chunk = |c: u64| {
            if c == 1 {
                String::new()
            } else {
                format!("@{c}")
            }
        };
        match self {
            Self::FirstTouch => write!(f, "first-touch"),
            Self::Local => write!(f, "local"),
            Self::Bind { nodes } => write!(f, "bind:{nodes}"),
            Self::Preferred { nodes } => write!(f, "preferred:{nodes}"),
            Self::Interleave { nodes, chunk_pages } => {
                write!(f, "interleave:{nodes}{}", chunk(*chunk_pages))
            }
            Self::Weighted {
                weights,
                chunk_pages,
            } => {
                let w: Vec<String> = weights.iter().map(|(n, w)| format!("{n}={w}")).collect();
                write!(f, "weighted:{}{}", w.join(","), chunk(*chunk_pages))
            }
            Self::Remote { far: false } => write!(f, "remote:near"),
            Self::Remote { far: true } => write!(f, "remote:far"),
        }
    }
}

/// Whether the kernel's system-wide weighted-interleave weights of the
/// nodes in `weights` already are those weights (read under `journal`'s
/// root: /sys on the live machine), so that the kernel's policy needs
/// nothing written. A weight that cannot be read is not equal.
pub fn kernel_weights_are(journal: &super::settings::Journal, weights: &[(u32, u32)]) -> bool {
    weights.iter().all(|(node, w)| {
        let key = format!("{}/node{node}", super::settings::WEIGHTS_DIR);
        std::fs::read_to_string(journal.path_of(&key))
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            == Some(*w)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::settings::{Journal, WEIGHTS_DIR};

    /// `auto` uses the kernel's weighted interleave only where nothing
    /// needs writing: every listed node's system-wide weight already is
    /// the one asked for.
    #[test]
    fn kernel_weights_are_equal_only_when_every_listed_node_matches() {
        let base = std::env::temp_dir().join(format!("numalab-weights-eq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("root").join(WEIGHTS_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("node0"), "3\n").unwrap();
        std::fs::write(dir.join("node1"), "1\n").unwrap();
        std::fs::write(dir.join("node2"), "7\n").unwrap();
        let j = Journal::new(base.join("journal"), base.join("root"));
        assert!(kernel_weights_are(&j, &[(0, 3), (1, 1)]));
        // Node 2's weight does not matter when it is not listed.
        assert!(kernel_weights_are(&j, &[(1, 1)]));
        assert!(!kernel_weights_are(&j, &[(0, 3), (1, 2)]));
        // The same ratio is not the same layout (6:2 runs differ).
        assert!(!kernel_weights_are(&j, &[(0, 6), (1, 2)]));
        // A node the kernel has no weight file for.
        assert!(!kernel_weights_are(&j, &[(0, 3), (5, 1)]));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
