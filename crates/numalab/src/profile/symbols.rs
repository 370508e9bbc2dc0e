//! Names for the addresses of allocation stacks: the program's memory map
//! (saved by the preload library at exit) gives each address its object
//! and offset, and `addr2line` (binutils) the function and file:line where
//! the object has debug information. Static data is named from the
//! objects' ELF symbol tables, read here.

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
    /// Where the object was loaded: the start of its mapping at file
    /// offset 0 (its ELF addresses are relative to that), else `start -
    /// offset`. Linkers that place code at a virtual address other than
    /// its file offset (lld) make the two differ.
    pub bias: u64,
}

/// The executable, file-backed mappings of a /proc/PID/maps text. The
/// saved text holds one block per process that exited through the library
/// (a shell wrapper, then the program it runs: each appends its own map),
/// each block in address order: an object's load bias is taken within its
/// block, and the last block, the last process to exit, comes first.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut blocks: Vec<String> = Vec::new();
    let mut last_start = 0u64;
    for line in text.lines() {
        let start = line
            .split('-')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok());
        match (start, blocks.last_mut()) {
            (Some(s), Some(b)) if s >= last_start => b.push_str(line),
            _ => blocks.push(line.to_string()),
        }
        if let Some(b) = blocks.last_mut() {
            b.push('\n');
        }
        last_start = start.unwrap_or(0);
    }
    blocks.iter().rev().flat_map(|b| parse_block(b)).collect()
}

/// [`parse_maps`] of one process's map.
fn parse_block(text: &str) -> Vec<Mapping> {
    let fields = |l: &str| -> Option<(u64, u64, String, u64, String)> {
        let mut f = l.split_whitespace();
        let (range, perms, offset) = (f.next()?, f.next()?, f.next()?);
        let path = f.nth(2)?;
        let (a, b) = range.split_once('-')?;
        Some((
            u64::from_str_radix(a, 16).ok()?,
            u64::from_str_radix(b, 16).ok()?,
            perms.to_string(),
            u64::from_str_radix(offset, 16).ok()?,
            path.to_string(),
        ))
    };
    let all: Vec<_> = text.lines().filter_map(fields).collect();
    let mut first: BTreeMap<&str, u64> = BTreeMap::new();
    for (start, _, _, offset, path) in &all {
        if *offset == 0 {
            let e = first.entry(path).or_insert(*start);
            *e = (*e).min(*start);
        }
    }
    all.iter()
        .filter(|(_, _, perms, _, path)| perms.contains('x') && path.starts_with('/'))
        .map(|(start, end, _, offset, path)| Mapping {
            start: *start,
            end: *end,
            offset: *offset,
            path: path.clone(),
            bias: first
                .get(path.as_str())
                .copied()
                .unwrap_or(start.wrapping_sub(*offset)),
        })
        .collect()
}

/// The file-backed mapping holding `addr` in a /proc/PID/maps text, any
/// permissions: the object a static segment belongs to.
pub fn object_at(maps_text: &str, addr: u64) -> Option<String> {
    maps_text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        let path = f.nth(4)?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            u64::from_str_radix(a, 16).ok()?,
            u64::from_str_radix(b, 16).ok()?,
        );
        (path.starts_with('/') && addr >= a && addr < b).then(|| path.to_string())
    })
}

/// Symbol tables read at most (a larger file is read up to this).
const MAX_ELF_BYTES: u64 = 1 << 30;

/// The data objects (`STT_OBJECT` symbols with a size, defined) of the
/// ELF64 little-endian file at `path`, as (name, value, size), from its
/// `.symtab` (or `.dynsym` when stripped). Read here rather than by `nm`,
/// which minimal systems (the test guests) lack. Empty for anything else.
pub fn data_symbols(path: &str) -> Vec<(String, u64, u64)> {
    elf_file_symbols(path, STT_OBJECT)
}

/// The functions (`STT_FUNC` symbols with a size, defined) of the ELF
/// file at `path`, as (name, value, size): what `--regions site:FUNCTION`
/// resolves to.
pub fn function_symbols(path: &str) -> Vec<(String, u64, u64)> {
    elf_file_symbols(path, STT_FUNC)
}

const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;

fn elf_file_symbols(path: &str, kind: u8) -> Vec<(String, u64, u64)> {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut bytes = Vec::new();
    if f.take(MAX_ELF_BYTES).read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    elf_symbols(&bytes, kind)
}

/// [`data_symbols`] of an ELF image in memory.
pub fn elf_data_symbols(b: &[u8]) -> Vec<(String, u64, u64)> {
    elf_symbols(b, STT_OBJECT)
}

/// The defined symbols of type `kind` (`STT_*`) with a size.
fn elf_symbols(b: &[u8], kind: u8) -> Vec<(String, u64, u64)> {
    let u16_at = |o: usize| {
        b.get(o..o.checked_add(2)?)
            .map(|s| u16::from_le_bytes([s[0], s[1]]))
    };
    let u32_at = |o: usize| {
        b.get(o..o.checked_add(4)?)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    let u64_at = |o: usize| {
        b.get(o..o.checked_add(8)?).map(|s| {
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            u64::from_le_bytes(a)
        })
    };
    // ELF64 (class 2), little endian (data 1).
    if b.len() < 64 || b[..4] != *b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Vec::new();
    }
    let (Some(shoff), Some(shentsize), Some(shnum)) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c))
    else {
        return Vec::new();
    };
    // (sh_type, sh_offset, sh_size, sh_link, sh_entsize) of section i.
    let section = |i: usize| -> Option<(u32, usize, usize, u32, usize)> {
        let o = usize::try_from(shoff)
            .ok()?
            .checked_add(i.checked_mul(shentsize as usize)?)?;
        Some((
            u32_at(o.checked_add(4)?)?,
            usize::try_from(u64_at(o.checked_add(0x18)?)?).ok()?,
            usize::try_from(u64_at(o.checked_add(0x20)?)?).ok()?,
            u32_at(o.checked_add(0x28)?)?,
            usize::try_from(u64_at(o.checked_add(0x38)?)?).ok()?,
        ))
    };
    const SHT_SYMTAB: u32 = 2;
    const SHT_DYNSYM: u32 = 11;
    let sections: Vec<_> = (0..shnum as usize).map(section).collect();
    let find = |t: u32| sections.iter().flatten().find(|s| s.0 == t);
    let Some(&(_, off, size, link, entsize)) = find(SHT_SYMTAB).or_else(|| find(SHT_DYNSYM)) else {
        return Vec::new();
    };
    let Some(Some((_, str_off, str_size, _, _))) = sections.get(link as usize) else {
        return Vec::new();
    };
    let strings = str_off
        .checked_add(*str_size)
        .and_then(|end| b.get(*str_off..end))
        .unwrap_or(&[]);
    let entsize = entsize.max(24);
    let mut out = Vec::new();
    for i in 0..size / entsize {
        let Some(o) = off.checked_add(i * entsize) else {
            break;
        };
        let (Some(name), Some(info), Some(shndx), Some(value), Some(sz)) = (
            u32_at(o),
            b.get(o + 4).copied(),
            u16_at(o + 6),
            u64_at(o + 8),
            u64_at(o + 16),
        ) else {
            break;
        };
        // Of that type, defined (not SHN_UNDEF), with a size.
        if info & 0xf != kind || shndx == 0 || sz == 0 {
            continue;
        }
        let name = strings
            .get(name as usize..)
            .and_then(|s| s.split(|c| *c == 0).next())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .unwrap_or_default();
        if !name.is_empty() {
            out.push((name, value, sz));
        }
    }
    out
}

/// Names from a profiled program's saved memory map: call-stack frames by
/// addr2line, static data from the ELF symbol tables.
pub struct ProgramSymbols {
    maps_text: String,
    frames: BTreeMap<u64, String>,
}

impl ProgramSymbols {
    /// Names every frame address of `pcs` up front (one addr2line run per
    /// object).
    pub fn new(maps_text: String, pcs: &[u64]) -> ProgramSymbols {
        let frames = name_all(&parse_maps(&maps_text), pcs);
        ProgramSymbols { maps_text, frames }
    }
}

impl super::Symbolizer for ProgramSymbols {
    fn frame(&self, pc: u64) -> Option<String> {
        self.frames.get(&pc).cloned()
    }

    fn static_object(&self, segment: u64, bias: u64) -> Option<super::StaticObject> {
        let path = object_at(&self.maps_text, segment)?;
        let name = Path::new(&path)
            .file_name()
            .map_or(path.clone(), |f| f.to_string_lossy().into_owned());
        let symbols = data_symbols(&path)
            .into_iter()
            .map(|(name, value, size)| super::DataSymbol {
                name: demangle(&name).unwrap_or(name),
                start: bias.wrapping_add(value),
                size,
            })
            .collect();
        Some(super::StaticObject { name, symbols })
    }
}

/// The readable name of a mangled symbol of the nested-name form both C++
/// (Itanium: `_ZN2ns5tableE` is `ns::table`) and Rust's legacy scheme use
/// (`_ZN7program5TABLE17h0123456789abcdefE` is `program::TABLE`, the hash
/// left out); `None` for anything else (names not mangled, or forms this
/// does not read: templates, functions' parameter types).
pub fn demangle(name: &str) -> Option<String> {
    let mut rest = name.strip_prefix("_ZN")?;
    let mut parts: Vec<String> = Vec::new();
    while !rest.is_empty() && parts.len() < 64 {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let len: usize = rest[..digits].parse().ok()?;
        let seg = rest.get(digits..digits.checked_add(len)?)?;
        rest = &rest[digits + len..];
        parts.push(unescape_rust(seg));
        if let Some(tail) = rest.strip_prefix('E') {
            if !tail.is_empty() {
                return None;
            }
            // Rust's legacy hash: a last segment `h` + 16 hex digits.
            if parts.last().is_some_and(|p| {
                p.len() == 17 && p.starts_with('h') && p[1..].bytes().all(|b| b.is_ascii_hexdigit())
            }) {
                parts.pop();
            }
            return (!parts.is_empty()).then(|| parts.join("::"));
        }
    }
    None
}

/// Rust's legacy escapes in a segment (`$LT$` `<`, `..` `::`, ...).
fn unescape_rust(seg: &str) -> String {
    let seg = seg
        .strip_prefix("_$")
        .map_or(seg.to_string(), |s| format!("${s}"));
    let mut out = seg;
    for (from, to) in [
        ("$LT$", "<"),
        ("$GT$", ">"),
        ("$RF$", "&"),
        ("$BP$", "*"),
        ("$LP$", "("),
        ("$RP$", ")"),
        ("$C$", ","),
        ("$u20$", " "),
        ("$u27$", "'"),
        ("$u5b$", "["),
        ("$u5d$", "]"),
        ("$u7b$", "{"),
        ("$u7d$", "}"),
        ("$u7e$", "~"),
        ("..", "::"),
    ] {
        out = out.replace(from, to);
    }
    out
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
                at.wrapping_sub(m.bias)
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
55d0c1000000-55d0c1001000 rw-p 00000000 00:00 0 [heap]
7f1000000000-7f1000100000 r-xp 00028000 08:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0 [vdso]
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Mapping {
                start: 0x55d0c0a01000,
                end: 0x55d0c0a05000,
                offset: 0x1000,
                path: "/usr/bin/prog".into(),
                bias: 0x55d0c0a00000,
            }
        );
        // No mapping at offset 0 seen: the code's own offset.
        assert_eq!(m[1].bias, 0x7f1000000000 - 0x28000);
        // A name for an address of a file that is not there: object+offset.
        let names = name_all(&m, &[0x55d0c0a01235, 0x1]);
        assert_eq!(names.len(), 1);
        assert_eq!(names[&0x55d0c0a01235], "prog+0x1234");
    }

    #[test]
    fn each_process_map_has_its_own_biases_the_last_first() {
        // A wrapper (bash) that ran the program, each appending its map:
        // the same library at two places, each with its own bias.
        let text = "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 9 /usr/bin/bash
55d0c0a01000-55d0c0a05000 r-xp 00001000 08:01 9 /usr/bin/bash
7f2000000000-7f2000001000 r--p 00000000 08:01 7 /lib/libx.so
7f2000001000-7f2000002000 r-xp 00001000 08:01 7 /lib/libx.so
5600c0a00000-5600c0a01000 r--p 00000000 08:01 8 /usr/bin/prog
5600c0a01000-5600c0a05000 r-xp 00001000 08:01 8 /usr/bin/prog
7f3000000000-7f3000001000 r--p 00000000 08:01 7 /lib/libx.so
7f3000001000-7f3000002000 r-xp 00001000 08:01 7 /lib/libx.so
";
        let m = parse_maps(text);
        let paths: Vec<&str> = m.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/usr/bin/prog",
                "/lib/libx.so",
                "/usr/bin/bash",
                "/lib/libx.so"
            ]
        );
        assert_eq!(m[1].bias, 0x7f3000000000);
        assert_eq!(m[3].bias, 0x7f2000000000);
        let names = name_all(&m, &[0x7f3000001101, 0x7f2000001201]);
        assert_eq!(names[&0x7f3000001101], "libx.so+0x1100");
        assert_eq!(names[&0x7f2000001201], "libx.so+0x1200");
    }

    #[test]
    fn static_data_is_found_by_address_and_named_by_nm() {
        let maps = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/prog
55d0c0a03000-55d0c0a04000 rw-p 00003000 08:01 123 /usr/bin/prog
55d0c0a04000-55d0c4a05000 rw-p 00000000 00:00 0
";
        assert_eq!(
            object_at(maps, 0x55d0c0a03010).as_deref(),
            Some("/usr/bin/prog")
        );
        // The .bss past the file's pages is anonymous: no object there.
        assert_eq!(object_at(maps, 0x55d0c0a04010), None);
        // The data objects of a real ELF file: this test's own binary
        // holds the static below, by name and size.
        let exe = std::env::current_exe().unwrap();
        let syms = data_symbols(exe.to_str().unwrap());
        let (_, value, size) = syms
            .iter()
            .find(|s| s.0.contains("ELF_PROBE"))
            .unwrap_or_else(|| panic!("no ELF_PROBE in {} symbols", syms.len()));
        assert_eq!(*size, 4096);
        assert_eq!(*value % 8, 0);
        assert_eq!(std::hint::black_box(&ELF_PROBE)[0], 0);
        // Not ELF, or cut short anywhere: nothing or less, never a panic.
        assert!(elf_data_symbols(b"not an elf file").is_empty());
        let whole = std::fs::read(&exe).unwrap();
        for cut in [64, 1000, whole.len() / 2, whole.len() - 1] {
            assert!(elf_data_symbols(&whole[..cut]).len() <= syms.len());
        }
    }

    #[used]
    static ELF_PROBE: [u64; 512] = [0; 512];

    #[test]
    fn functions_are_found_with_their_code_range() {
        // This test's own binary holds the function below (not inlined:
        // its address is taken), and its range holds that address once
        // the load bias is taken off.
        let exe = std::env::current_exe().unwrap();
        let funcs = function_symbols(exe.to_str().unwrap());
        let (_, value, size) = funcs
            .iter()
            .find(|f| f.0.contains("function_probe_for_sites"))
            .unwrap_or_else(|| panic!("no function_probe_for_sites in {} functions", funcs.len()));
        assert!(*size > 0 && *size < 4096, "size {size}");
        assert!(data_symbols(exe.to_str().unwrap())
            .iter()
            .all(|d| !d.0.contains("function_probe_for_sites")));
        let here = function_probe_for_sites as *const () as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let m = parse_maps(&maps)
            .into_iter()
            .find(|m| here >= m.start && here < m.end)
            .unwrap();
        // A PIE's symbols are relative to its first mapping's start.
        let bias = if position_dependent(&m.path) {
            0
        } else {
            m.bias
        };
        let at = here - bias;
        assert!(
            (*value..value + size).contains(&at),
            "{at:#x} outside {value:#x}+{size:#x}"
        );
    }

    #[test]
    fn nested_names_demangle_and_others_do_not() {
        assert_eq!(demangle("_ZN2ns5tableE").as_deref(), Some("ns::table"));
        assert_eq!(
            demangle("_ZN7program5TABLE17h0123456789abcdefE").as_deref(),
            Some("program::TABLE")
        );
        assert_eq!(
            demangle(
                "_ZN4core3ptr42drop_in_place$LT$alloc..string..String$GT$17h1a2b3c4d5e6f7081E"
            )
            .as_deref(),
            Some("core::ptr::drop_in_place<alloc::string::String>")
        );
        for plain in [
            "static_table",
            "_Z5tablev",
            "_ZN2ns5tableEx",
            "_ZN99xE",
            "_ZN",
        ] {
            assert_eq!(demangle(plain), None, "{plain}");
        }
        // The static of this test binary is found by its readable name.
        let exe = std::env::current_exe().unwrap();
        let named: Vec<String> = data_symbols(exe.to_str().unwrap())
            .into_iter()
            .filter_map(|(n, _, _)| demangle(&n))
            .filter(|n| n.ends_with("ELF_PROBE"))
            .collect();
        assert_eq!(named.len(), 1, "{named:?}");
        assert!(named[0].contains("::tests::ELF_PROBE"), "{named:?}");
    }

    #[inline(never)]
    #[no_mangle]
    extern "C" fn function_probe_for_sites() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn allocator_frames_are_not_sites() {
        assert!(is_allocator_frame("malloc (libnumalab_preload.so+0x1234)"));
        assert!(is_allocator_frame("libc.so.6+0x99"));
        assert!(!is_allocator_frame("main hazards.c:42 (prog)"));
    }
}
