//! Names for the addresses of allocation stacks: the program's memory map
//! (saved by the preload library at exit) gives each address its object
//! and offset, and `addr2line` (binutils) the function and file:line where
//! the object has debug information.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// One executable mapping of the program.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
}

/// The executable, file-backed mappings of a /proc/PID/maps text.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
            let path = f.nth(2)?;
            if !perms.contains('x') || !path.starts_with('/') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                path: path.to_string(),
            })
        })
        .collect()
}

/// Whether a frame's name is the allocator's or the preload library's,
/// not the program's allocation site.
pub fn is_allocator_frame(name: &str) -> bool {
    name.contains("libnumalab_preload")
        || name.contains("numalab_preload::")
        || name.starts_with("malloc ")
        || name.starts_with("calloc ")
        || name.starts_with("realloc ")
        || name.starts_with("posix_memalign ")
        || name.starts_with("aligned_alloc ")
        || name.starts_with("memalign ")
        || name.starts_with("valloc ")
        || name.starts_with("mmap ")
        || name.starts_with("backtrace ")
        || name.contains("libc.so")
}

/// Whether the ELF file at `path` is position-dependent (ET_EXEC): its
/// addresses are absolute, not relative to where it was loaded.
fn position_dependent(path: &str) -> bool {
    std::fs::read(path)
        .ok()
        .filter(|b| b.len() > 18 && b[..4] == *b"\x7fELF")
        .is_some_and(|b| u16::from_le_bytes([b[16], b[17]]) == 2)
}

/// Names every address of `pcs`: "function file:line (object)" where
/// addr2line knows them, "object+0xOFF" otherwise. Addresses outside
/// every mapping are left out.
pub fn name_all(maps: &[Mapping], pcs: &[u64]) -> BTreeMap<u64, String> {
    let mut by_object: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for &pc in pcs {
        // A return address points after the call: look up the call itself.
        let at = pc.saturating_sub(1);
        if let Some(m) = maps.iter().find(|m| at >= m.start && at < m.end) {
            let rel = if position_dependent(&m.path) {
                at
            } else {
                at - m.start + m.offset
            };
            by_object.entry(&m.path).or_default().push((pc, rel));
        }
    }
    let mut out = BTreeMap::new();
    for (object, list) in by_object {
        let short = Path::new(object)
            .file_name()
            .map_or(object.to_string(), |f| f.to_string_lossy().into_owned());
        let lines = addr2line(object, &list.iter().map(|x| x.1).collect::<Vec<_>>());
        for (i, (pc, rel)) in list.iter().enumerate() {
            let named = lines
                .as_ref()
                .and_then(|l| l.get(i))
                .and_then(|(func, loc)| {
                    let known_func = func != "??";
                    let known_loc = !loc.starts_with("??");
                    match (known_func, known_loc) {
                        (true, true) => Some(format!("{func} {loc} ({short})")),
                        (true, false) => Some(format!("{func} ({short}+{rel:#x})")),
                        _ => None,
                    }
                });
            out.insert(*pc, named.unwrap_or_else(|| format!("{short}+{rel:#x}")));
        }
    }
    out
}

/// (function, file:line) per address from `addr2line -f -C -e OBJECT`;
/// `None` when addr2line is missing or fails.
fn addr2line(object: &str, addrs: &[u64]) -> Option<Vec<(String, String)>> {
    let out = Command::new("addr2line")
        .args(["-f", "-C", "-e", object])
        .args(addrs.iter().map(|a| format!("{a:#x}")))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() != addrs.len() * 2 {
        return None;
    }
    Some(
        lines
            .chunks(2)
            .map(|c| {
                let loc = c[1].split(" (discriminator").next().unwrap_or(c[1]);
                let loc = Path::new(loc.split(':').next().unwrap_or(loc))
                    .file_name()
                    .map_or(loc.to_string(), |f| {
                        format!(
                            "{}{}",
                            f.to_string_lossy(),
                            &loc[loc.find(':').unwrap_or(loc.len())..]
                        )
                    });
                (c[0].to_string(), loc)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_keep_executable_files_only() {
        let text = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/prog
55d0c0a01000-55d0c0a05000 r-xp 00001000 08:01 123 /usr/bin/prog
7f00000000-7f00001000 rw-p 00000000 00:00 0 [heap]
7f10000000-7f10100000 r-xp 00028000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd0000-7ffd1000 r-xp 00000000 00:00 0 [vdso]
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Mapping {
                start: 0x55d0c0a01000,
                end: 0x55d0c0a05000,
                offset: 0x1000,
                path: "/usr/bin/prog".into()
            }
        );
        // A name for an address of a file that is not there: object+offset.
        let names = name_all(&m, &[0x55d0c0a01235, 0x1]);
        assert_eq!(names.len(), 1);
        assert_eq!(names[&0x55d0c0a01235], "prog+0x1234");
    }

    #[test]
    fn allocator_frames_are_not_sites() {
        assert!(is_allocator_frame("malloc (libnumalab_preload.so+0x1234)"));
        assert!(is_allocator_frame("libc.so.6+0x99"));
        assert!(!is_allocator_frame("main hazards.c:42 (prog)"));
    }
}
