//! The workload as the command line gives it: which way each quantity's
//! data moves, its weight, the STREAM kernels, and the parsers of the
//! directions, weights, class width, thread nodes and links.

use super::{
    invalid, PdmError, MAX_CLASS_WIDTH, MAX_NODES, MAX_QUANTITIES, MAX_THREADS, MAX_WEIGHT,
};
use serde::Serialize;

/// Which way a quantity's data moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Memory to CPU.
    Read,
    /// CPU to memory.
    Write,
    /// Both ways (each way carries the full weight).
    Both,
}

impl Direction {
    /// `r`/`read`, `w`/`write`, `b`/`both`.
    pub fn parse(s: &str) -> Result<Self, PdmError> {
        match s.trim() {
            "r" | "read" => Ok(Self::Read),
            "w" | "write" => Ok(Self::Write),
            "b" | "both" => Ok(Self::Both),
            other => invalid(format!(
                "--directions: unknown direction '{other}' (valid: r, w, both)"
            )),
        }
    }

    /// `r`, `w` or `rw`, as the text writes it.
    pub fn short(self) -> &'static str {
        match self {
            Self::Read => "r",
            Self::Write => "w",
            Self::Both => "rw",
        }
    }
}

/// One data quantity of every thread.
#[derive(Debug, Clone, Serialize)]
pub struct Quantity {
    /// `a`, `b`, `c`, ... as in the STREAM kernels.
    pub name: String,
    pub weight: f64,
    pub direction: Direction,
}

/// The STREAM kernels the model knows, by name.
pub const KERNELS: [&str; 4] = ["copy", "scale", "add", "triad"];

/// The quantities of a STREAM kernel: copy and scale read `a` and write `b`;
/// add and triad read `a` and `b` and write `c` ([`streamed`]).
pub fn kernel_quantities(kernel: &str) -> Result<Vec<Quantity>, PdmError> {
    match kernel {
        "copy" | "scale" => Ok(streamed(2)),
        "add" | "triad" => Ok(streamed(3)),
        other => invalid(format!(
            "--kernel: unknown kernel '{other}' (valid: {})",
            KERNELS.join(", ")
        )),
    }
}

/// The traffic of a kernel that reads its first `arrays - 1` arrays and
/// writes the last, weight 1 each: the read arrays move from memory to the
/// CPU; the written one both ways, because an ordinary store misses,
/// reads the line (write-allocate) and later writes it back, which is the
/// memory-bytes rule of `bench` (a written byte counts twice). Each array
/// adds its weight once to its node's controller, as the 2007 study
/// counts it. `pdm --kernel` and `blas --parallel` both use this model;
/// with it the Quartet's one-thread-per-node copy and triad give the
/// study's Tables 4 and 5.
pub fn streamed(arrays: usize) -> Vec<Quantity> {
    let mut dirs = vec![Direction::Read; arrays];
    if let Some(last) = dirs.last_mut() {
        *last = Direction::Both;
    }
    named_quantities(&dirs, &vec![1.0; arrays])
}

/// Quantities named `a`, `b`, ... with these directions and weights.
pub fn named_quantities(dirs: &[Direction], weights: &[f64]) -> Vec<Quantity> {
    dirs.iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (&direction, &weight))| Quantity {
            name: ((b'a' + i as u8) as char).to_string(),
            weight,
            direction,
        })
        .collect()
}

/// `r,r,w`: one direction per quantity.
pub fn parse_directions(text: &str, quantities: usize) -> Result<Vec<Direction>, PdmError> {
    let d: Vec<Direction> = text
        .split(',')
        .map(Direction::parse)
        .collect::<Result<_, _>>()?;
    if d.len() != quantities {
        return invalid(format!(
            "--directions: {} given for {quantities} quantities (give one per quantity)",
            d.len()
        ));
    }
    Ok(d)
}

/// A positive decimal with at most three decimals, at most `max`.
fn parse_milli(opt: &str, s: &str, max: f64) -> Result<f64, PdmError> {
    let bad = || {
        PdmError::Invalid(format!(
            "{opt}: '{}' is not a number above 0 and at most {max} with at most 3 decimals",
            s.trim()
        ))
    };
    let t = s.trim();
    if t.len() > 24 {
        return Err(bad());
    }
    let v: f64 = t.parse().map_err(|_| bad())?;
    if !v.is_finite() || v <= 0.0 || v > max {
        return Err(bad());
    }
    let decimals = t.split_once('.').map_or(0, |(_, f)| f.len());
    if decimals > 3 || t.contains(['e', 'E']) {
        return Err(bad());
    }
    Ok(v)
}

/// `1,1,2`: one weight per quantity.
pub fn parse_weights(text: &str, quantities: usize) -> Result<Vec<f64>, PdmError> {
    let w: Vec<f64> = text
        .split(',')
        .take(MAX_QUANTITIES + 1)
        .map(|s| parse_milli("--weights", s, MAX_WEIGHT))
        .collect::<Result<_, _>>()?;
    if w.len() != quantities {
        return invalid(format!(
            "--weights: {} given for {quantities} quantities (give one per quantity)",
            text.split(',').count()
        ));
    }
    Ok(w)
}

/// The class width: above 0, at most [`MAX_CLASS_WIDTH`], three decimals.
pub fn parse_class_width(text: &str) -> Result<f64, PdmError> {
    parse_milli("--class-width", text, MAX_CLASS_WIDTH)
}

fn parse_node(opt: &str, s: &str) -> Result<u32, PdmError> {
    let t = s.trim();
    if t.is_empty() || t.len() > 5 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return invalid(format!("{opt}: '{t}' is not a node number"));
    }
    t.parse()
        .map_err(|_| PdmError::Invalid(format!("{opt}: '{t}' is not a node number")))
}

/// `0,0,1,3`: the CPU node of each thread.
pub fn parse_thread_nodes(text: &str) -> Result<Vec<u32>, PdmError> {
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() > MAX_THREADS {
        return invalid(format!(
            "--thread-nodes: {} threads (at most {MAX_THREADS})",
            parts.len()
        ));
    }
    parts
        .iter()
        .map(|s| parse_node("--thread-nodes", s))
        .collect()
}

/// `0-1,1-2,...`: undirected links between nodes.
pub fn parse_links(text: &str) -> Result<Vec<(u32, u32)>, PdmError> {
    let max = MAX_NODES * (MAX_NODES - 1) / 2;
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() > max {
        return invalid(format!("--links: {} links (at most {max})", parts.len()));
    }
    let mut links = Vec::new();
    for p in parts {
        let Some((a, b)) = p.split_once('-') else {
            return invalid(format!(
                "--links: '{}' is not a link (write A-B, e.g. 0-1,1-2)",
                p.trim()
            ));
        };
        let (a, b) = (parse_node("--links", a)?, parse_node("--links", b)?);
        if a == b {
            return invalid(format!("--links: {a}-{b} links a node to itself"));
        }
        let key = (a.min(b), a.max(b));
        if links.contains(&key) {
            return invalid(format!("--links: {}-{} is given twice", key.0, key.1));
        }
        links.push(key);
    }
    Ok(links)
}
