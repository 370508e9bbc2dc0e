//! Names for the addresses of allocation stacks: the program's memory map
//! (saved by the preload library at exit) gives each address its object
//! and file offset, and the object's index ([`super::elf_index`], read in
//! process, once per object) the function whose symbol holds it and the
//! source line where DWARF gives one. Static data is named from the same
//! symbol tables. Names are demangled (C++, Rust legacy and v0), and every
//! name printed is a `--regions` term that selects it (docs/profile.md).

use super::elf_index::{self, ElfIndex};
use std::collections::BTreeMap;
use std::path::Path;

/// One executable mapping of the program.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    pub path: String,
    /// Where the object was loaded: the start of its mapping at file
    /// offset 0, else `start - offset`. Used only where the object's
    /// segments cannot be read (they turn an offset into an address
    /// exactly, whatever the linker's layout).
    pub bias: u64,
    /// The file's inode as mapped (0 where not known): a file replaced
    /// since is not named from.
    pub inode: u64,
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
    struct Line<'a> {
        start: u64,
        end: u64,
        perms: &'a str,
        offset: u64,
        inode: u64,
        path: &'a str,
    }
    fn fields(l: &str) -> Option<Line<'_>> {
        let mut f = l.split_whitespace();
        let (range, perms, offset, _dev, inode) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        let path = f.next()?;
        let (a, b) = range.split_once('-')?;
        Some(Line {
            start: u64::from_str_radix(a, 16).ok()?,
            end: u64::from_str_radix(b, 16).ok()?,
            perms,
            offset: u64::from_str_radix(offset, 16).ok()?,
            inode: inode.parse().unwrap_or(0),
            path,
        })
    }
    let all: Vec<Line> = text.lines().filter_map(fields).collect();
    let mut first: BTreeMap<&str, u64> = BTreeMap::new();
    for l in &all {
        if l.offset == 0 {
            let e = first.entry(l.path).or_insert(l.start);
            *e = (*e).min(l.start);
        }
    }
    all.iter()
        .filter(|l| l.perms.contains('x') && l.path.starts_with('/'))
        .map(|l| Mapping {
            start: l.start,
            end: l.end,
            offset: l.offset,
            path: l.path.to_string(),
            bias: first
                .get(l.path)
                .copied()
                .unwrap_or(l.start.wrapping_sub(l.offset)),
            inode: l.inode,
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

/// The data objects (`STT_OBJECT` symbols with a size, defined) of the
/// ELF file at `path`, as (name, value, size): its `.symtab` and
/// `.dynsym`, and its debug file's `.symtab` where it has none. Empty for
/// anything that is not a readable 64-bit ELF file.
pub fn data_symbols(path: &str) -> Vec<(String, u64, u64)> {
    elf_index::cached(Path::new(path)).map_or_else(Vec::new, |i| triples(i.data_objects()))
}

/// The functions (`STT_FUNC` and `STT_GNU_IFUNC` symbols with a size,
/// defined) of the ELF file at `path`, as (name, value, size): what
/// `--regions site:FUNCTION` resolves to.
pub fn function_symbols(path: &str) -> Vec<(String, u64, u64)> {
    elf_index::cached(Path::new(path)).map_or_else(Vec::new, |i| triples(i.functions()))
}

fn triples(symbols: &[elf_index::Symbol]) -> Vec<(String, u64, u64)> {
    symbols
        .iter()
        .map(|s| (s.name.clone(), s.start, s.size))
        .collect()
}

/// Names from a profiled program's saved memory map: call-stack frames and
/// static data, from each object's index (read once per object).
pub struct ProgramSymbols {
    maps_text: String,
    frames: BTreeMap<u64, String>,
}

impl ProgramSymbols {
    /// Names every frame address of `pcs` up front.
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
        let name = file_name(&path);
        // Only objects that can be regions of their own: a large program
        // has 10^4 smaller ones, each demangled for nothing.
        let symbols = elf_index::cached(Path::new(&path))
            .map(|i| {
                i.data_objects()
                    .iter()
                    .filter(|s| s.size >= STATIC_MIN_BYTES)
                    .map(|s| super::DataSymbol {
                        name: printed(&s.name),
                        start: bias.wrapping_add(s.start),
                        size: s.size,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(super::StaticObject { name, symbols })
    }
}

/// The smallest static object named as a region of its own: `--min-bytes`
/// is at least a page.
const STATIC_MIN_BYTES: u64 = 4096;

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or(path.to_string(), |f| f.to_string_lossy().into_owned())
}

/// The readable name of a mangled symbol, as profiles print it: C++
/// (Itanium) with its parameters and without a return type
/// (`_ZN2ns5Alloc4MakeEm` is `ns::Alloc::Make(unsigned long)`), Rust's
/// legacy and v0 schemes without the hash (`program::TABLE`); `None` for a
/// name that is not mangled (C) or that neither demangler reads.
pub fn demangle(name: &str) -> Option<String> {
    Some(demangled(name)?.0)
}

/// The readable name and the name without parameters, clone suffixes and
/// return type (`ns::Alloc::Make`), as `--regions site:` terms may give
/// it; `None` for names that are not mangled.
fn demangled(name: &str) -> Option<(String, String)> {
    // Rust's own schemes first: a legacy Rust name is also a valid C++
    // nested name, which C++ demangling would print with its hash.
    if name.starts_with("_R") || is_legacy_rust(name) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            let text = format!("{d:#}");
            return Some((text.clone(), text));
        }
    }
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name.as_bytes()) {
            let opts = cpp_demangle::DemangleOptions::new().no_return_type();
            if let (Ok(full), Ok(bare)) = (
                sym.demangle_with_options(&opts),
                sym.demangle_with_options(&opts.no_params()),
            ) {
                return Some((full, bare));
            }
        }
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            let text = format!("{d:#}");
            return Some((text.clone(), text));
        }
    }
    None
}

/// `_ZN…17h<16 hex digits>E`, optionally with an LLVM suffix: Rust's
/// legacy mangling, whose last segment is a hash.
fn is_legacy_rust(name: &str) -> bool {
    let name = name.split_once(".llvm.").map_or(name, |(head, _)| head);
    name.starts_with("_ZN")
        && name.strip_suffix('E').is_some_and(|s| {
            s.len() > 19
                && s.is_char_boundary(s.len() - 19)
                && s[s.len() - 19..].starts_with("17h")
                && s[s.len() - 16..].bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// A C name without the suffixes of the copies GCC makes of a function
/// (`init.part.0`, `main.cold`, `f.constprop.0.isra.0`): the same
/// function's code, so `site:init` covers them.
fn without_clone_suffix(name: &str) -> &str {
    let Some((head, tail)) = name.split_once('.') else {
        return name;
    };
    let clone = !head.is_empty()
        && tail.split('.').all(|p| {
            matches!(
                p,
                "cold" | "part" | "isra" | "constprop" | "lto_priv" | "localalias" | "llvm"
            ) || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        });
    if clone {
        head
    } else {
        name
    }
}

/// Whether a symbol (as its object spells it, mangled or not) is the
/// function or object a user named: the same text; for mangled names the
/// printed name (with parameters: `ns::Alloc::Make(unsigned long)`), or,
/// when `wanted` gives no parameters, the name without them
/// (`ns::Alloc::Make`, every overload); either may be given by its last
/// segments (`Alloc::Make`, `Make`), never by a part of one (`ake`). GCC's
/// copies of a function (`f.part.0`) match as `f`.
pub fn names_match(symbol: &str, wanted: &str) -> bool {
    if symbol == wanted {
        return true;
    }
    // Mangling keeps a name's identifiers as they are: a symbol without
    // the wanted one is not demangled (a term is compared with each of a
    // large program's 10^5 symbols).
    if last_identifier(wanted).is_some_and(|id| !symbol.contains(id)) {
        return false;
    }
    let wanted = normalize(wanted);
    let ends = |name: &str| {
        name == wanted
            || name
                .strip_suffix(wanted.as_str())
                .is_some_and(|head| head.ends_with("::"))
    };
    match demangled(symbol) {
        Some((full, bare)) => {
            if wanted.contains('(') {
                let full = normalize(&full);
                let without_clone = full.split(" [clone ").next().unwrap_or(&full);
                ends(&full) || ends(without_clone)
            } else {
                ends(&bare)
            }
        }
        None => ends(without_clone_suffix(symbol)),
    }
}

/// The identifier a function's name ends with, before its parameters and
/// template arguments (`Make` of `ns::Alloc::Make(unsigned long)`); `None`
/// where mangling may not spell it out: operators, and the standard
/// library names it abbreviates (`std::allocator` is `Sa`).
fn last_identifier(name: &str) -> Option<&str> {
    if name.contains("operator") {
        return None;
    }
    let mut end = name.trim_end().len();
    let bytes = name.as_bytes();
    // Strip trailing bracketed groups and qualifiers: `(…)`, `<…>`,
    // ` const`, `&`, ` [clone .cold]`.
    loop {
        let head = name[..end].trim_end();
        end = head.len();
        let opening = match head.as_bytes().last() {
            Some(b')') => b'(',
            Some(b'>') => b'<',
            Some(b']') => b'[',
            _ => {
                let h = head
                    .trim_end_matches(['&', '*'])
                    .trim_end_matches(" const")
                    .trim_end_matches(" volatile");
                if h.len() == end {
                    break;
                }
                end = h.len();
                continue;
            }
        };
        let closing = bytes[end - 1];
        let mut depth = 0usize;
        let mut at = None;
        for i in (0..end).rev() {
            if bytes[i] == closing {
                depth += 1;
            } else if bytes[i] == opening {
                depth -= 1;
                if depth == 0 {
                    at = Some(i);
                    break;
                }
            }
        }
        end = at?;
    }
    let head = &name[..end];
    let start = head
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let id = &head[start..];
    let abbreviated = [
        "allocator",
        "basic_string",
        "string",
        "basic_istream",
        "basic_ostream",
        "basic_iostream",
        "istream",
        "ostream",
        "iostream",
    ];
    (!id.is_empty() && !id.as_bytes()[0].is_ascii_digit() && !abbreviated.contains(&id))
        .then_some(id)
}

/// One spelling of a C++ name for comparison: no space after a comma
/// (`f(int, long)` and `f(int,long)` are one name) or around `<>`.
fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.trim().chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' {
            let prev = out.chars().last();
            let next = chars.peek().copied();
            if matches!(prev, Some(',' | '<' | '(' | ' '))
                || matches!(next, Some('>' | ')' | ',' | ' '))
            {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// A call-stack frame's name taken apart. Profiles name a frame
/// `FUNCTION FILE:LINE (OBJECT)` where debug information gives the line,
/// `FUNCTION (OBJECT+0xADDRESS)` where it does not, `in OBJECT, no symbol
/// (OBJECT+0xADDRESS)` where no symbol holds the address (a stripped
/// library), `OBJECT+0xADDRESS` where the object could not be read, and
/// `0xADDRESS` outside every mapping. ADDRESS is the call's ELF virtual
/// address in the object: `site:OBJECT+0xADDRESS` selects it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Frame<'a> {
    /// The function as printed (demangled, with parameters).
    pub function: Option<&'a str>,
    /// `FILE:LINE`, the file by name.
    pub line: Option<&'a str>,
    /// The object's file name.
    pub object: Option<&'a str>,
    /// The call's address in the object, where the name gives it.
    pub address: Option<u64>,
}

/// The parts of a frame name ([`Frame`]).
pub fn parse_frame(name: &str) -> Frame<'_> {
    fn object_part(s: &str) -> (Option<&str>, Option<u64>) {
        match s.rsplit_once('+') {
            Some((o, a)) if !o.is_empty() => match a
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                Some(addr) => (Some(o), Some(addr)),
                None => (Some(s), None),
            },
            _ => (Some(s), None),
        }
    }
    let Some(head_obj) = name
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once(" ("))
        .filter(|(_, o)| !o.is_empty() && !o.contains(' '))
    else {
        // `OBJECT+0xADDRESS` or `0xADDRESS`.
        if name.starts_with("0x") || name.contains(' ') {
            return Frame::default();
        }
        let (object, address) = object_part(name);
        return Frame {
            object: address.and(object),
            address,
            ..Frame::default()
        };
    };
    let (head, obj) = head_obj;
    let (object, address) = object_part(obj);
    let (rest, line) = match head.rsplit_once(' ') {
        Some((rest, last))
            if last.rsplit_once(':').is_some_and(|(f, l)| {
                !f.is_empty() && !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())
            }) =>
        {
            (rest.trim_end_matches(','), Some(last))
        }
        _ => (head, None),
    };
    let no_symbol = rest.starts_with("in ") && rest.ends_with(", no symbol");
    Frame {
        function: (!no_symbol && !rest.is_empty()).then_some(rest),
        line,
        object,
        address,
    }
}

/// Names every address of `pcs` ([`Frame`] says how). Addresses outside
/// every mapping are left out.
pub fn name_all(maps: &[Mapping], pcs: &[u64]) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    for &pc in pcs {
        // A return address points after the call: name the call itself.
        let at = pc.saturating_sub(1);
        let Some(m) = maps.iter().find(|m| at >= m.start && at < m.end) else {
            continue;
        };
        let short = file_name(&m.path);
        // The preload library's frames are left out of every stack: not
        // worth reading its symbols and DWARF for.
        let index = if is_profiler_object(&short) {
            None
        } else {
            // A file replaced since the program ran is not the code that
            // ran.
            elf_index::cached(Path::new(&m.path)).filter(|i| m.inode == 0 || i.inode() == m.inode)
        };
        let name = match index {
            Some(i) => {
                let offset = at - m.start + m.offset;
                let addr = i.address_of_offset(offset).unwrap_or_else(|| {
                    if i.position_dependent() {
                        at
                    } else {
                        at.wrapping_sub(m.bias)
                    }
                });
                frame_name(&i, &short, addr)
            }
            None => format!("{short}+{:#x}", at.wrapping_sub(m.bias)),
        };
        out.insert(pc, name);
    }
    out
}

/// The name of the code at ELF virtual address `addr` of the indexed object
/// whose file name is `object`, in the forms of [`Frame`].
pub fn frame_name(i: &ElfIndex, object: &str, addr: u64) -> String {
    let line = i.location(addr).map(|(file, line)| {
        let file = Path::new(&file)
            .file_name()
            .map_or(file.clone(), |f| f.to_string_lossy().into_owned());
        format!("{file}:{line}")
    });
    match (i.function_at(addr), line) {
        (Some(s), Some(line)) => format!("{} {line} ({object})", printed(&s.name)),
        (Some(s), None) => format!("{} ({object}+{addr:#x})", printed(&s.name)),
        (None, Some(line)) => format!("in {object}, no symbol, {line} ({object}+{addr:#x})"),
        (None, None) => format!("in {object}, no symbol ({object}+{addr:#x})"),
    }
}

/// A symbol as profiles print it: demangled where it is mangled.
fn printed(name: &str) -> String {
    demangle(name).unwrap_or_else(|| name.to_string())
}

/// Whether a frame is the preload library's own (its hooks and the
/// unwinder it calls): left out of the stacks a profile shows.
pub fn is_profiler_frame(name: &str) -> bool {
    parse_frame(name).object.is_some_and(is_profiler_object)
}

fn is_profiler_object(file_name: &str) -> bool {
    file_name.starts_with("libnumalab_preload")
}

/// The functions that allocate for a program: a frame in one is not the
/// program's allocation site.
const ALLOCATOR_FUNCTIONS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "mmap",
    "mmap64",
    "mremap",
    "backtrace",
    "operator new",
    "operator new[]",
];

/// The libraries (C and C++ runtimes, the loader, allocators) whose frames
/// are not a program's allocation site: where `fopen` allocates, the site
/// is the program's call to `fopen`.
const SYSTEM_OBJECTS: &[&str] = &[
    "libnumalab_preload",
    "libc.so",
    "libstdc++.so",
    "ld-linux",
    "libjemalloc.so",
    "libtcmalloc",
    "libmimalloc.so",
];

/// Whether a frame's name is the allocator's, the system libraries' or the
/// preload library's, not the program's allocation site.
pub fn is_allocator_frame(name: &str) -> bool {
    let f = parse_frame(name);
    if f.object
        .is_some_and(|o| SYSTEM_OBJECTS.iter().any(|s| o.starts_with(s)))
    {
        return true;
    }
    f.function.is_some_and(|func| {
        let bare = func.split('(').next().unwrap_or(func).trim_end();
        ALLOCATOR_FUNCTIONS.contains(&bare)
            || ALLOCATOR_FUNCTIONS.contains(&without_clone_suffix(bare))
    })
}

/// Whether a frame is C++ standard library code instantiated in the
/// program (`std::vector<double>::_M_default_append`): every container's
/// allocations pass there, so it names no particular site.
fn is_library_template(name: &str) -> bool {
    parse_frame(name).function.is_some_and(|f| {
        ["std::", "__gnu_cxx::", "__cxxabiv1::"]
            .iter()
            .any(|ns| f.starts_with(ns))
    })
}

/// The allocation site of a stack (innermost frame first): the first frame
/// outside the allocator, the system libraries, the preload library and
/// C++ library templates; failing that the first outside the allocator
/// and libraries, then the first frame not the preload library's. `None`
/// for an empty stack.
pub fn site_of(stack: &[String]) -> Option<&String> {
    stack
        .iter()
        .find(|f| !is_allocator_frame(f) && !is_library_template(f))
        .or_else(|| stack.iter().find(|f| !is_allocator_frame(f)))
        .or_else(|| stack.iter().find(|f| !is_profiler_frame(f)))
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
                inode: 123,
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
    fn static_data_is_found_by_address_and_named_from_the_symbol_table() {
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
        assert!(data_symbols("/nonexistent/prog").is_empty());
    }

    #[used]
    static ELF_PROBE: [u64; 512] = [0; 512];

    #[test]
    fn functions_are_found_with_their_code_range_and_named_with_their_line() {
        // This test's own binary holds the function below (not inlined:
        // its address is taken), and its range holds that address once
        // the segment's offset is turned into an address.
        let exe = std::env::current_exe().unwrap();
        let funcs = function_symbols(exe.to_str().unwrap());
        let (_, value, size) = funcs
            .iter()
            .find(|f| f.0 == "function_probe_for_sites")
            .unwrap_or_else(|| panic!("no function_probe_for_sites in {} functions", funcs.len()));
        assert!(*size > 0 && *size < 4096, "size {size}");
        assert!(data_symbols(exe.to_str().unwrap())
            .iter()
            .all(|d| !d.0.contains("function_probe_for_sites")));
        let here = function_probe_for_sites as *const () as u64;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mapped = parse_maps(&maps);
        let m = mapped
            .iter()
            .find(|m| here >= m.start && here < m.end)
            .unwrap();
        let index = ElfIndex::open(Path::new(&m.path)).unwrap();
        let at = index.address_of_offset(here - m.start + m.offset).unwrap();
        assert_eq!(at, *value, "the symbol starts where the function is");
        // Named as a frame whose return address is one past it: function,
        // file:line from this binary's DWARF, object.
        let names = name_all(&mapped, &[here + 1]);
        let name = &names[&(here + 1)];
        let object = Path::new(&m.path).file_name().unwrap().to_string_lossy();
        let f = parse_frame(name);
        assert_eq!(f.function, Some("function_probe_for_sites"), "{name}");
        assert_eq!(f.object, Some(&*object), "{name}");
        let line: u32 = f
            .line
            .and_then(|l| l.strip_prefix("symbols.rs:"))
            .and_then(|l| l.parse().ok())
            .unwrap_or_else(|| panic!("no symbols.rs:LINE in {name}"));
        assert!(
            (PROBE_LINE..PROBE_LINE + 4).contains(&line),
            "{name}: line {line}, the function at {PROBE_LINE}"
        );
        // Its line resolves back to code holding the function's start.
        let ranges = index.line_ranges("profile/symbols.rs", line);
        assert!(
            ranges.iter().any(|r| (r.0..r.1).contains(&at)),
            "{at:#x} not in {ranges:x?}"
        );
        assert!(index.line_ranges("other/symbols.rs", line).is_empty());
    }

    #[test]
    fn an_address_no_symbol_holds_gets_no_name() {
        // Between two functions, past the first's size (alignment padding
        // of this binary): the nearest symbol before is not its name.
        let exe = std::env::current_exe().unwrap();
        let index = ElfIndex::open(&exe).unwrap();
        let fs = index.functions();
        let gap = fs
            .windows(2)
            .find(|w| w[0].end() < w[1].start && fs.iter().all(|f| !f.contains(w[0].end())))
            .expect("a gap between two functions");
        assert_eq!(index.function_at(gap[0].end()), None);
        assert_eq!(index.function_at(gap[0].end() - 1), Some(&gap[0]));
        assert_eq!(index.function_at(gap[1].start), Some(&gap[1]));
        assert_eq!(
            frame_name(&index, "prog", gap[0].end()).split(" (").next(),
            Some(if index.location(gap[0].end()).is_some() {
                "in prog, no symbol,"
            } else {
                "in prog, no symbol"
            })
        );
    }

    #[test]
    fn names_demangle_as_cpp_and_rust_print_them() {
        for (mangled, printed) in [
            ("_ZN2ns5tableE", "ns::table"),
            ("_ZN2ns5Alloc4MakeEm", "ns::Alloc::Make(unsigned long)"),
            (
                "_ZN2ns5Alloc4MakeEmi",
                "ns::Alloc::Make(unsigned long, int)",
            ),
            ("_ZNK2ns1A3getEv", "ns::A::get() const"),
            ("_Z1fIiEvT_", "f<int>(int)"),
            ("_Znwm", "operator new(unsigned long)"),
            ("_ZN7program5TABLE17h0123456789abcdefE", "program::TABLE"),
            ("_RNvCs1234_7program4init", "program::init"),
            (
                "_ZN4core3ptr42drop_in_place$LT$alloc..string..String$GT$17h1a2b3c4d5e6f7081E",
                "core::ptr::drop_in_place<alloc::string::String>",
            ),
        ] {
            assert_eq!(demangle(mangled).as_deref(), Some(printed), "{mangled}");
        }
        for plain in ["static_table", "main", "_ZN99xE", "_ZN", "_R"] {
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

    #[test]
    fn names_match_printed_bare_and_last_segments() {
        let make = "_ZN2ns5Alloc4MakeEm";
        let make2 = "_ZN2ns5Alloc4MakeEmi";
        for wanted in [
            "ns::Alloc::Make",
            "Alloc::Make",
            "Make",
            "ns::Alloc::Make(unsigned long)",
            "Alloc::Make(unsigned long)",
            make,
        ] {
            assert!(names_match(make, wanted), "{wanted}");
        }
        assert!(names_match(make2, "ns::Alloc::Make"));
        assert!(names_match(make2, "ns::Alloc::Make(unsigned long, int)"));
        assert!(names_match(make2, "ns::Alloc::Make(unsigned long,int)"));
        assert!(!names_match(make2, "ns::Alloc::Make(unsigned long)"));
        assert!(!names_match(make, "ake"));
        assert!(!names_match(make, "s::Alloc::Make"));
        assert!(!names_match(make, "long)"));
        assert!(!names_match(
            "_ZN2ns1fENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
            "string"
        ));
        // A clone is its function's code.
        assert!(names_match("_ZN2ns1fEv.cold", "ns::f"));
        assert!(names_match("_ZN2ns1fEv.cold", "ns::f()"));
        assert!(names_match("init.part.0", "init"));
        assert!(names_match("main.cold", "main"));
        assert!(!names_match("main.data", "main"));
        assert!(!names_match("main_loop", "main"));
        // Rust paths.
        assert!(names_match("_ZN4prog4init17h0123456789abcdefE", "init"));
        assert!(names_match(
            "_ZN4prog4init17h0123456789abcdefE",
            "prog::init"
        ));
        assert!(names_match("_RNvCs1234_7program4init", "program::init"));
        assert!(!names_match("_ZN4prog6reinit17h0123456789abcdefE", "init"));
    }

    #[test]
    fn the_last_identifier_of_a_name_is_found_past_its_brackets() {
        assert_eq!(
            last_identifier("ns::Alloc::Make(unsigned long)"),
            Some("Make")
        );
        assert_eq!(last_identifier("ns::A::get() const"), Some("get"));
        assert_eq!(
            last_identifier("std::map<int, long>::at(int const&)"),
            Some("at")
        );
        assert_eq!(last_identifier("(anonymous namespace)::g()"), Some("g"));
        assert_eq!(last_identifier("ns::f() [clone .cold]"), Some("f"));
        assert_eq!(last_identifier("ns::Foo::~Foo()"), Some("Foo"));
        assert_eq!(last_identifier("main"), Some("main"));
        assert_eq!(last_identifier("ns::operator<(A, B)"), None);
        assert_eq!(last_identifier("std::allocator<int>::allocator()"), None);
        assert_eq!(last_identifier("f)"), None);
        // A symbol without it is no match; one with it is demangled.
        assert!(!names_match("_ZN2ns5Alloc4TakeEm", "ns::Alloc::Make"));
        assert!(names_match(
            "_ZNSaIiEC2Ev",
            "std::allocator<int>::allocator()"
        ));
    }

    #[test]
    fn frame_names_come_apart_into_what_terms_select() {
        let f = parse_frame("ns::Alloc::Make(unsigned long) alloc.cpp:12 (prog)");
        assert_eq!(
            f,
            Frame {
                function: Some("ns::Alloc::Make(unsigned long)"),
                line: Some("alloc.cpp:12"),
                object: Some("prog"),
                address: None
            }
        );
        let f = parse_frame("(anonymous namespace)::g() (libx.so.1+0x1a2b)");
        assert_eq!(f.function, Some("(anonymous namespace)::g()"));
        assert_eq!((f.object, f.address), (Some("libx.so.1"), Some(0x1a2b)));
        assert_eq!(f.line, None);
        let f = parse_frame("in liblzma.so.5.4.1, no symbol (liblzma.so.5.4.1+0x1ad8)");
        assert_eq!(
            f,
            Frame {
                function: None,
                line: None,
                object: Some("liblzma.so.5.4.1"),
                address: Some(0x1ad8)
            }
        );
        let f = parse_frame("in prog, no symbol, prog.c:9 (prog+0x40)");
        assert_eq!((f.function, f.line), (None, Some("prog.c:9")));
        let f = parse_frame("prog+0x17b6");
        assert_eq!((f.object, f.address), (Some("prog"), Some(0x17b6)));
        assert_eq!(parse_frame("0x7ffd1234"), Frame::default());
        assert_eq!(parse_frame("(no stack)"), Frame::default());
        let f = parse_frame("operator new(unsigned long) (libstdc++.so.6.0.30+0xa958b)");
        assert_eq!(f.function, Some("operator new(unsigned long)"));
    }

    // An exported name for the symbol lookups to find (no_mangle counts
    // as unsafe code: the name could clash with another library's).
    const PROBE_LINE: u32 = line!() + 3;
    #[allow(unsafe_code)]
    #[inline(never)]
    #[no_mangle]
    extern "C" fn function_probe_for_sites() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn sites_skip_the_allocator_the_libraries_and_the_profiler() {
        assert!(is_allocator_frame(
            "malloc hooks.rs:327 (libnumalab_preload.so)"
        ));
        assert!(is_allocator_frame("libc.so.6+0x99"));
        assert!(is_allocator_frame("malloc (libjemalloc.so.2+0x1000)"));
        assert!(is_allocator_frame(
            "operator new(unsigned long) (libstdc++.so.6.0.30+0xa958b)"
        ));
        assert!(is_allocator_frame(
            "operator new[](unsigned long) (prog+0x10)"
        ));
        assert!(is_allocator_frame("mmap (prog+0x10)"));
        assert!(!is_allocator_frame("main hazards.c:42 (prog)"));
        assert!(!is_allocator_frame("mallocate (prog+0x10)"));
        assert!(is_profiler_frame(
            "numalab_preload::hooks::track hooks.rs:134 (libnumalab_preload.so)"
        ));
        assert!(!is_profiler_frame("main hazards.c:42 (prog)"));
        let stack: Vec<String> = [
            "operator new(unsigned long) (libstdc++.so.6.0.30+0xa958b)",
            "std::__new_allocator<double>::allocate(unsigned long, void const*) new_allocator.h:147 (prog)",
            "std::vector<double, std::allocator<double> >::vector(unsigned long) stl_vector.h:557 (prog)",
            "ns::Alloc::Make(unsigned long) alloc.cpp:12 (prog)",
            "main alloc.cpp:30 (prog)",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(site_of(&stack), Some(&stack[3]));
        // Library code only: the first frame outside the allocator.
        assert_eq!(site_of(&stack[..3]), Some(&stack[1]));
        assert_eq!(site_of(&stack[..1]), Some(&stack[0]));
        assert_eq!(site_of(&[]), None);
    }
}
