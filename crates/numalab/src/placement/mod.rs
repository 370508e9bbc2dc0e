//! Layer 2, placement: resource sets, thread and memory policies, placed
//! buffers, and verification of where threads and pages really are.
//!
//! Placement is never assumed: [`PlacedBuffer::histogram`] asks the kernel
//! where every page is, and workers check the CPU they run on.

pub mod buffer;
pub mod memory_policy;
pub mod resource_set;
pub mod sys;
pub mod thread_policy;
pub mod verify;

pub use buffer::{
    pin_current_thread, usable_free_bytes, BufferSpec, PlacedBuffer, SysfsWeights, Thp,
};
pub use memory_policy::{remote_node, MemoryPolicy, Realization, WeightedImpl};
pub use resource_set::{ListMeaning, ResourceSet};
pub use thread_policy::ThreadPolicy;
pub use verify::{PageHistogram, ProcessPlacement, RunLengths};

/// Why a placement could not be made. Every message is one line that names
/// the problem and, where there is one, the way out.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// Bad request: unknown ids, impossible combinations.
    #[error("{0}")]
    Invalid(String),
    /// The running kernel or system lacks a feature.
    #[error("{0}")]
    Unsupported(String),
    /// Not permitted (capabilities, cgroup, sysfs).
    #[error("{0}")]
    Permission(String),
    /// A strict placement that cannot fit in the nodes' free memory.
    #[error("{0}")]
    Capacity(String),
    /// Any other OS failure.
    #[error("{0}")]
    Os(String),
}

/// Parses a size like `64M`, `1GiB`, `4096`, `2.5G` (binary units: K = 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            format!("'{text}' is not a size; write e.g. 4096, 64K, 256M, 1G (binary units)")
        })?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => {
            return Err(format!(
                "unknown size unit '{u}' in '{text}'; valid: B, K, M, G, T (binary: K = 1024)"
            ))
        }
    };
    let bytes = value * mult as f64;
    if bytes >= u64::MAX as f64 / 2.0 {
        return Err(format!("size '{text}' is too large"));
    }
    Ok(bytes.round() as u64)
}

/// Human-readable binary size: `512 KiB`, `1.5 GiB`.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{} {}", v as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5m").unwrap(), 3 << 19);
        assert!(parse_size("12Q")
            .unwrap_err()
            .contains("valid: B, K, M, G, T"));
        assert!(parse_size("-3").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(format_bytes(512 << 10), "512 KiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(100), "100 B");
    }
}
