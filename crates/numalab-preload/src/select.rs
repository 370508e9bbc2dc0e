//! Which allocations are tracked and which threads' samples are kept:
//! `numalab profile --regions FILTER --only-threads SET`, passed as
//! `NUMALAB_PROFILE_REGIONS` (one term a line, in the form the engine's
//! `profile::filter` writes) and `NUMALAB_PROFILE_THREADS` (thread
//! ordinals: 0 the main thread, then threads in creation order).
//!
//! Both are read once at start, before the program runs: the hooks and
//! the fault handler only read them, without locks or allocation.

use crate::runtime::state::config;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::OnceLock;

/// Terms read at most.
const MAX_TERMS: usize = 512;
/// Thread ordinals a set may hold (as the engine bounds them).
const THREAD_WORDS: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Term {
    Heap,
    Mmap,
    Size(usize, usize),
    Addr(usize, usize),
    /// Absolute code addresses, the object's load bias added.
    Code(usize, usize),
    /// Code addresses of an object not loaded at start (the program may
    /// `dlopen` it later), relative to its load bias, and the object's
    /// file name at this index of [`LATER_OBJECTS`].
    LaterCode(usize, usize, usize),
    /// Code of a function of an object not loaded at start (`site:
    /// OBJECT:FUNCTION`): the object's file name at this index of
    /// [`LATER_OBJECTS`], and how its symbol is recognised (`=NAME`, or
    /// `^PREFIX` of a mangled name) at this index of the term strings.
    LaterFunction(usize, usize),
    /// Mappings of a file: the path (or its last components) at this
    /// index of [`FILE_PATHS`].
    File(usize),
    /// The next term is also required by the alternative before it (a
    /// line's `& ` prefix: `heap&size>1M`).
    And,
    /// The next term is another choice for the term before it (a line's
    /// `| ` prefix: a site's further code ranges inside an `&`).
    Or,
}

/// The paths of `file` terms, as given.
static FILE_PATHS: OnceLock<Vec<String>> = OnceLock::new();
/// The file names of the objects `LaterCode` terms name, set at start
/// and read without a lock.
static LATER_OBJECTS: [OnceLock<String>; MAX_LATER_OBJECTS] =
    [const { OnceLock::new() }; MAX_LATER_OBJECTS];
const MAX_LATER_OBJECTS: usize = 64;

/// The allocation filter; `None`: every allocation is tracked.
static REGIONS: OnceLock<Option<Vec<Term>>> = OnceLock::new();
/// The allocations refinement may watch (`--refine FILTER`); `None`: all.
static REFINE_REGIONS: OnceLock<Option<Vec<Term>>> = OnceLock::new();

/// The thread set as a bitmap of ordinals; `THREADS_SET` says whether one
/// was given.
static THREADS: [AtomicU64; THREAD_WORDS] = [const { AtomicU64::new(0) }; THREAD_WORDS];
static THREADS_SET: AtomicU64 = AtomicU64::new(0);
/// The next thread's ordinal.
static NEXT_ORDINAL: AtomicU32 = AtomicU32::new(1);
/// Samples left out because their thread is not in the set.
pub static SKIPPED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's ordinal; `u32::MAX`: not created by `pthread_create`
    /// after the library started (the library's own threads, raw `clone`s).
    static ORDINAL: Cell<u32> = const { Cell::new(u32::MAX) };
}

/// Reads the environment; called from the library's start, in the main
/// thread (ordinal 0).
pub fn init() {
    ORDINAL.with(|o| o.set(0));
    let config = config();
    let mut paths = Vec::new();
    let regions = config
        .regions
        .as_ref()
        .map(|t| parse_regions(t, object_bias, &mut paths));
    let _ = REGIONS.set(regions);
    let refine = config
        .refine_regions
        .as_ref()
        .map(|t| parse_regions(t, object_bias, &mut paths));
    let _ = REFINE_REGIONS.set(refine);
    let _ = FILE_PATHS.set(paths);
    resolve_find_object();
    if let Some(t) = &config.threads {
        for &w in t {
            if let Some(word) = THREADS.get(w as usize / 64) {
                word.fetch_or(1 << (w % 64), SeqCst);
            }
        }
        THREADS_SET.store(1, SeqCst);
    }
}

/// The terms of a `NUMALAB_PROFILE_REGIONS` text; `bias(path)` gives a
/// loaded object's load bias (`None`: not loaded, its code terms match
/// nothing); `file` terms' paths go to `paths`.
pub(crate) fn parse_regions(
    text: &str,
    bias: impl Fn(&str) -> Option<usize>,
    paths: &mut Vec<String>,
) -> Vec<Term> {
    let mut terms = Vec::new();
    for line in text.lines().take(MAX_TERMS) {
        let (link, line) = if let Some(l) = line.strip_prefix("& ") {
            (Some(Term::And), l)
        } else if let Some(l) = line.strip_prefix("| ") {
            (Some(Term::Or), l)
        } else {
            (None, line)
        };
        // A joined line the library cannot read still joins: the
        // alternative then requires a term nothing matches.
        terms.extend(link);
        if let Some(path) = line.strip_prefix("file ").filter(|p| !p.is_empty()) {
            terms.push(Term::File(paths.len()));
            paths.push(path.to_string());
            continue;
        }
        if let Some(f) = line.strip_prefix("function ") {
            // "function OBJECT =NAME" or "function OBJECT ^PREFIX": the
            // pattern kept with the terms' strings (`file` paths).
            let term = f
                .split_once(' ')
                .filter(|(o, p)| !o.is_empty() && !o.contains('/') && p.len() > 1)
                .filter(|(_, p)| p.starts_with('=') || p.starts_with('^'))
                .and_then(|(o, p)| {
                    let i = later_object(o)?;
                    paths.push(p.to_string());
                    Some(Term::LaterFunction(i, paths.len() - 1))
                });
            match (term, link) {
                (Some(t), _) => terms.push(t),
                (None, Some(_)) => terms.push(Term::Size(1, 0)),
                (None, None) => {}
            }
            continue;
        }
        let mut f = line.splitn(4, ' ');
        let word = f.next().unwrap_or("");
        let mut num = || f.next().and_then(|n| n.parse::<usize>().ok());
        let term = match word {
            "heap" => Some(Term::Heap),
            "mmap" => Some(Term::Mmap),
            "size" => num().zip(num()).map(|(a, b)| Term::Size(a, b)),
            "addr" => num().zip(num()).map(|(a, b)| Term::Addr(a, b)),
            "code" => {
                let range = num().zip(num());
                let path = f.next().unwrap_or("");
                range.and_then(|(a, b)| {
                    // A bare file name: an object the engine did not find
                    // among those loaded at start, looked for in each
                    // stack as the program runs.
                    if !path.contains('/') && !path.is_empty() {
                        return later_object(path).map(|i| Term::LaterCode(a, b, i));
                    }
                    let bias = bias(path)?;
                    Some(Term::Code(a.wrapping_add(bias), b.wrapping_add(bias)))
                })
            }
            // "none" and anything unknown select nothing.
            _ => None,
        };
        match (term, link) {
            (Some(t), _) => terms.push(t),
            // What cannot be judged, joined: a term that selects nothing.
            (None, Some(_)) => terms.push(Term::Size(1, 0)),
            (None, None) => {}
        }
    }
    terms
}

/// The index of `name` among the objects of `LaterCode` terms, added
/// when new (while the terms are read, at start); `None` past
/// [`MAX_LATER_OBJECTS`].
fn later_object(name: &str) -> Option<usize> {
    for (i, slot) in LATER_OBJECTS.iter().enumerate() {
        match slot.get() {
            Some(n) if n == name => return Some(i),
            Some(_) => {}
            None => return slot.get_or_init(|| name.to_string()).eq(name).then_some(i),
        }
    }
    None
}

impl Term {
    /// Whether the term judges an allocation by its call stack.
    pub(crate) fn by_code(&self) -> bool {
        matches!(
            self,
            Term::Code(..) | Term::LaterCode(..) | Term::LaterFunction(..)
        )
    }
}

/// Looks glibc's `_dl_find_object` up when a term needs it (code of
/// objects loaded after start; without it such a term matches nothing);
/// called at start, after the filter's or the plan's lines are read.
pub fn resolve_find_object() {
    if LATER_OBJECTS[0].get().is_some() {
        crate::runtime::unwind::resolve_find_object();
    }
}

/// The public head of glibc's `struct link_map` (<link.h>).
#[repr(C)]
struct LinkMapHead {
    l_addr: usize,
    l_name: *const libc::c_char,
    l_ld: *const u64,
}

/// A loaded object that holds an address, as the loader knows it.
struct LoadedObject {
    bias: usize,
    /// Its dynamic section (`l_ld`).
    dynamic: *const u64,
    /// Where it is mapped, `[start, end)`.
    start: usize,
    end: usize,
}

/// The load bias of the loaded object holding `pc` when its file name is
/// `name`: the path it was loaded by names the file, or a link to it by
/// its soname (`libz.so.1` for the file `libz.so.1.2.13`).
fn bias_in(pc: usize, name: &str) -> Option<usize> {
    object_in(pc, name).map(|o| o.bias)
}

/// The loaded object holding `pc` when its file name is `name` (see
/// [`bias_in`]).
fn object_in(pc: usize, name: &str) -> Option<LoadedObject> {
    let out = crate::runtime::unwind::find_object(pc)?;
    // struct dl_find_object: flags, map start, map end, link map.
    let map = out[3] as *const LinkMapHead;
    if map.is_null() {
        return None;
    }
    // SAFETY: a loaded object's link map, whose public head (l_addr,
    // l_name, l_ld) glibc keeps while the object is loaded.
    let (bias, path, dynamic) = unsafe { ((*map).l_addr, (*map).l_name, (*map).l_ld) };
    if path.is_null() {
        return None;
    }
    // SAFETY: l_name is NUL-terminated.
    let path = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
    let file = path.rsplit(|b| *b == b'/').next().unwrap_or(path);
    let n = name.as_bytes();
    let same = !file.is_empty()
        && (file == n || (n.starts_with(file) && n.get(file.len()) == Some(&b'.')));
    same.then_some(LoadedObject {
        bias,
        dynamic,
        start: out[1] as usize,
        end: out[2] as usize,
    })
}

/// Whether a function symbol of `o`'s dynamic symbol table that holds
/// `at` (its exported functions: a stripped library keeps these; aliases,
/// such as `getpid` and `__getpid`, each) has a name `wanted` accepts,
/// read from the loader's mapped tables, without a lock or allocation.
///
/// # Safety
/// `o` is an object loaded now, found for `at`.
unsafe fn function_at(o: &LoadedObject, at: usize, wanted: impl Fn(&[u8]) -> bool) -> bool {
    const DT_NULL: u64 = 0;
    const DT_HASH: u64 = 4;
    const DT_STRTAB: u64 = 5;
    const DT_SYMTAB: u64 = 6;
    const DT_STRSZ: u64 = 10;
    const DT_GNU_HASH: u64 = 0x6fff_fef5;
    if o.dynamic.is_null() {
        return false;
    }
    // glibc relocates the section's addresses in place where it may
    // write it; an address outside the object is still relative.
    let absolute = |v: u64| {
        let v = v as usize;
        if (o.start..o.end).contains(&v) {
            v
        } else {
            v.wrapping_add(o.bias)
        }
    };
    let (mut hash, mut gnu, mut strtab, mut symtab, mut strsz) = (0, 0, 0, 0, 0);
    for k in 0..512 {
        let (tag, val) = (*o.dynamic.add(2 * k), *o.dynamic.add(2 * k + 1));
        match tag {
            DT_NULL => break,
            DT_HASH => hash = absolute(val),
            DT_GNU_HASH => gnu = absolute(val),
            DT_STRTAB => strtab = absolute(val),
            DT_SYMTAB => symtab = absolute(val),
            DT_STRSZ => strsz = val as usize,
            _ => {}
        }
    }
    if strtab == 0 || symtab == 0 {
        return false;
    }
    let count = if hash != 0 {
        *((hash + 4) as *const u32) as usize
    } else if gnu != 0 {
        gnu_symbol_count(gnu)
    } else {
        return false;
    };
    let offset = at.wrapping_sub(o.bias) as u64;
    // Elf64_Sym: name (u32), info, other, section (u16), value, size.
    for k in 1..count.min(1 << 20) {
        let sym = (symtab + 24 * k) as *const u8;
        let info = *sym.add(4);
        let section = *(sym.add(6) as *const u16);
        let (value, size) = (*(sym.add(8) as *const u64), *(sym.add(16) as *const u64));
        // STT_FUNC (2) or STT_GNU_IFUNC (10), defined here.
        let function = matches!(info & 0xf, 2 | 10) && section != 0;
        if function && offset >= value && offset < value.saturating_add(size) {
            let name = *(sym as *const u32) as usize;
            if name >= strsz {
                continue;
            }
            let start = (strtab + name) as *const u8;
            let mut len = 0;
            while name + len < strsz && *start.add(len) != 0 {
                len += 1;
            }
            if wanted(std::slice::from_raw_parts(start, len)) {
                return true;
            }
        }
    }
    false
}

/// The number of dynamic symbols, from a GNU hash table: past the highest
/// symbol any bucket starts at, to the end of its chain.
///
/// # Safety
/// `table` is a mapped `DT_GNU_HASH` table.
unsafe fn gnu_symbol_count(table: usize) -> usize {
    let words = table as *const u32;
    let (buckets, first, bloom) = (
        *words as usize,
        *words.add(1) as usize,
        *words.add(2) as usize,
    );
    let bucket_at = (table + 16 + 8 * bloom) as *const u32;
    let mut last = 0;
    for b in 0..buckets.min(1 << 20) {
        last = last.max(*bucket_at.add(b) as usize);
    }
    if last < first {
        return first;
    }
    let chains = bucket_at.add(buckets);
    let mut k = last;
    while k - first < 1 << 20 && *chains.add(k - first) & 1 == 0 {
        k += 1;
    }
    k + 1
}

/// Whether a symbol is the function a `LaterFunction` term names:
/// `=NAME` the symbol itself, `^PREFIX` a mangled name that starts so.
fn symbol_is(symbol: &[u8], pattern: &str) -> bool {
    match pattern.as_bytes().split_first() {
        Some((b'=', name)) => symbol == name,
        Some((b'^', prefix)) => symbol.starts_with(prefix),
        _ => false,
    }
}

/// Whether a filter needs a mapping's file path.
pub fn needs_path() -> bool {
    FILE_PATHS.get().is_some_and(|p| !p.is_empty())
}

/// Whether the mapped file `path` is the one `wanted` names: the same
/// path, or `wanted` its last components.
fn file_matches(path: &[u8], wanted: &str) -> bool {
    let w = wanted.as_bytes();
    path == w
        || (path.ends_with(w) && path.len() > w.len() && path[path.len() - w.len() - 1] == b'/')
}

/// An allocation or mapping, as the filters judge it.
#[derive(Clone, Copy)]
pub struct Candidate<'a> {
    pub addr: usize,
    pub len: usize,
    /// A mapping (not the malloc family).
    pub mmap: bool,
    /// The call stack's return addresses (when a filter needs them).
    pub stack: &'a [usize],
    /// The mapped file's path (when a filter needs it).
    pub path: Option<&'a [u8]>,
}

/// Whether the allocation is tracked.
pub fn tracks(c: &Candidate) -> bool {
    REGIONS
        .get()
        .and_then(Option::as_ref)
        .is_none_or(|t| selects(t, c))
}

/// Whether refinement may watch the lines of that allocation.
pub fn refines(c: &Candidate) -> bool {
    REFINE_REGIONS
        .get()
        .and_then(Option::as_ref)
        .is_none_or(|t| selects(t, c))
}

/// Whether refinement is limited to some regions.
pub fn refine_limited() -> bool {
    matches!(REFINE_REGIONS.get(), Some(Some(_)))
}

fn selects(terms: &[Term], c: &Candidate) -> bool {
    selects_in(terms, FILE_PATHS.get().map_or(&[], |p| p), c)
}

/// Whether some alternative of `terms` selects `c`: a term starts an
/// alternative unless [`Term::And`] (all of its parts are required) or
/// [`Term::Or`] (either of two terms will do) joins it to the one
/// before; `file` terms index `paths`. No allocation: hooks call it.
pub(crate) fn selects_in(terms: &[Term], paths: &[String], c: &Candidate) -> bool {
    // The alternative so far: its finished parts all matched (`whole`),
    // and whether the part being read matched.
    let (mut whole, mut part, mut started, mut joined) = (true, false, false, false);
    for t in terms {
        match t {
            Term::And => {
                whole &= part;
                part = false;
                joined = true;
            }
            Term::Or => joined = true,
            t => {
                if started && !joined {
                    if whole && part {
                        return true;
                    }
                    whole = true;
                    part = false;
                }
                started = true;
                joined = false;
                part |= matches(t, paths, c);
            }
        }
    }
    started && whole && part
}

fn matches(t: &Term, paths: &[String], c: &Candidate) -> bool {
    match *t {
        Term::And | Term::Or => false,
        Term::Heap => !c.mmap,
        Term::Mmap => c.mmap,
        Term::Size(lo, hi) => (lo..=hi).contains(&c.len),
        Term::Addr(lo, hi) => c.addr < hi && lo < c.addr.saturating_add(c.len),
        // A return address is just past its call: the call is before it.
        Term::Code(lo, hi) => c
            .stack
            .iter()
            .any(|pc| (lo..hi).contains(&pc.wrapping_sub(1))),
        // Looked up in every stack (the object may be unloaded and loaded
        // again elsewhere): one lock-free search per frame.
        Term::LaterCode(lo, hi, i) => {
            LATER_OBJECTS
                .get(i)
                .and_then(OnceLock::get)
                .is_some_and(|name| {
                    c.stack.iter().any(|pc| {
                        let at = pc.wrapping_sub(1);
                        bias_in(at, name).is_some_and(|b| (lo..hi).contains(&at.wrapping_sub(b)))
                    })
                })
        }
        Term::LaterFunction(i, k) => {
            let (Some(name), Some(pattern)) =
                (LATER_OBJECTS.get(i).and_then(OnceLock::get), paths.get(k))
            else {
                return false;
            };
            c.stack.iter().any(|pc| {
                let at = pc.wrapping_sub(1);
                object_in(at, name).is_some_and(|o| {
                    // SAFETY: the loader's own tables of an object loaded
                    // now (found by `_dl_find_object` for this address).
                    unsafe { function_at(&o, at, |sym| symbol_is(sym, pattern)) }
                })
            })
        }
        Term::File(i) => match (c.path, paths.get(i)) {
            (Some(path), Some(wanted)) => file_matches(path, wanted),
            _ => false,
        },
    }
}

/// The ordinal of the thread being created, set in it by [`thread_starts`].
pub fn next_ordinal() -> u32 {
    NEXT_ORDINAL.fetch_add(1, SeqCst)
}

/// Runs first in a new program thread.
pub fn thread_starts(ordinal: u32) {
    ORDINAL.with(|o| o.set(ordinal));
}

/// This thread's ordinal (`u32::MAX`: unknown).
pub fn ordinal() -> u32 {
    ORDINAL.with(|o| o.get())
}

/// Whether this thread's samples are kept.
pub fn thread_selected() -> bool {
    if THREADS_SET.load(SeqCst) == 0 {
        return true;
    }
    let o = ordinal() as usize;
    THREADS
        .get(o / 64)
        .is_some_and(|w| w.load(SeqCst) & (1 << (o % 64)) != 0)
}

/// The load bias of the loaded object at `path` (the main program is
/// named by its executable's path).
pub(crate) fn object_bias(path: &str) -> Option<usize> {
    let want = std::fs::canonicalize(path).ok()?;
    let exe = std::fs::canonicalize("/proc/self/exe").ok();
    let mut found = Found {
        want,
        exe,
        bias: None,
    };
    // SAFETY: the callback gets `found` back as its data pointer, and only
    // reads the headers the loader gives it.
    unsafe {
        libc::dl_iterate_phdr(
            Some(each_object),
            &mut found as *mut Found as *mut libc::c_void,
        )
    };
    found.bias
}

struct Found {
    want: std::path::PathBuf,
    exe: Option<std::path::PathBuf>,
    bias: Option<usize>,
}

unsafe extern "C" fn each_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid dl_phdr_info; data is our Found.
    let (info, found) = unsafe { (&*info, &mut *(data as *mut Found)) };
    let name = if info.dlpi_name.is_null() {
        ""
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
            .to_str()
            .unwrap_or("")
    };
    let path = if name.is_empty() {
        found.exe.clone()
    } else {
        std::fs::canonicalize(name).ok()
    };
    if path.as_ref() == Some(&found.want) && found.bias.is_none() {
        found.bias = Some(info.dlpi_addr as usize);
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_lines_become_terms() {
        let bias = |p: &str| (p == "/bin/prog").then_some(0x5000);
        let mut paths = Vec::new();
        let t = parse_regions(
            "heap\nsize 10 20\naddr 4096 8192\ncode 16 32 /bin/prog\ncode 1 2 /not/loaded\nnone\nbogus 1\nfile db/my data\n",
            bias,
            &mut paths,
        );
        assert_eq!(
            t,
            vec![
                Term::Heap,
                Term::Size(10, 20),
                Term::Addr(4096, 8192),
                Term::Code(0x5010, 0x5020),
                Term::File(0)
            ]
        );
        assert_eq!(paths, ["db/my data"]);
        assert!(parse_regions("none\n", bias, &mut paths).is_empty());
        // A path with spaces stays whole.
        let spaced = |p: &str| (p == "/opt/my prog").then_some(0);
        assert_eq!(
            parse_regions("code 1 2 /opt/my prog", spaced, &mut paths),
            vec![Term::Code(1, 2)]
        );
    }

    #[test]
    fn joined_lines_require_every_part_of_their_alternative() {
        let bias = |p: &str| (p == "/bin/prog").then_some(0);
        let mut paths = Vec::new();
        // (heap and over 1000 bytes and called from [16, 32) or [64, 80))
        // or a mapping of 4096 bytes exactly.
        let t = parse_regions(
            "heap\n& size 1001 18446744073709551615\n& code 16 32 /bin/prog\n| code 64 80 /bin/prog\nmmap\n& size 4096 4096\n",
            bias,
            &mut paths,
        );
        assert_eq!(
            t,
            vec![
                Term::Heap,
                Term::And,
                Term::Size(1001, usize::MAX),
                Term::And,
                Term::Code(16, 32),
                Term::Or,
                Term::Code(64, 80),
                Term::Mmap,
                Term::And,
                Term::Size(4096, 4096)
            ]
        );
        let judge = |mmap: bool, len: usize, stack: &[usize]| {
            selects_in(
                &t,
                &paths,
                &Candidate {
                    addr: 0x10000,
                    len,
                    mmap,
                    stack,
                    path: None,
                },
            )
        };
        assert!(judge(false, 2000, &[20]));
        assert!(judge(false, 2000, &[3, 70]), "the site's second range");
        assert!(!judge(false, 500, &[20]), "too small");
        assert!(!judge(false, 2000, &[40]), "called from elsewhere");
        assert!(
            !judge(true, 2000, &[20]),
            "a mapping: the first alternative wants heap"
        );
        assert!(judge(true, 4096, &[]));
        assert!(!judge(true, 8192, &[]));
        // A joined line the library cannot read selects nothing in its
        // alternative (it is not dropped, which would widen it).
        let unread = parse_regions("heap\n& code 1 2 /not/loaded\n", bias, &mut paths);
        assert!(!selects_in(
            &unread,
            &paths,
            &Candidate {
                addr: 0,
                len: 10,
                mmap: false,
                stack: &[],
                path: None
            }
        ));
    }

    #[test]
    fn code_of_an_object_not_loaded_at_start_is_found_in_each_stack() {
        // libc holds getpid (malloc is this binary's own: the library's
        // hook): named by its file name only, as the engine names an
        // object it did not find among those loaded at start.
        let at = libc::getpid as *const () as usize;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let path = maps
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let (a, b) = f.next()?.split_once('-')?;
                let (a, b) = (
                    usize::from_str_radix(a, 16).ok()?,
                    usize::from_str_radix(b, 16).ok()?,
                );
                (a <= at && at < b).then(|| f.nth(4).map(str::to_string))?
            })
            .unwrap();
        let bias = object_bias(&path).unwrap();
        let name = path.rsplit('/').next().unwrap();
        let rel = at - bias;
        let mut paths = Vec::new();
        let text = format!(
            "code {} {} {name}\ncode {} {} libother.so.1\n",
            rel,
            rel + 16,
            rel,
            rel + 16
        );
        let t = parse_regions(&text, |_| None, &mut paths);
        let (Term::LaterCode(_, _, i), Term::LaterCode(_, _, j)) = (t[0], t[1]) else {
            panic!("{t:?}");
        };
        assert_ne!(i, j);
        assert_eq!(
            parse_regions(&text, |_| None, &mut paths),
            t,
            "one index per name"
        );
        resolve_find_object();
        let stack = [at + 1];
        let c = Candidate {
            addr: 0,
            len: 1,
            mmap: false,
            stack: &stack,
            path: None,
        };
        assert!(t[0].by_code());
        assert!(selects_in(&t[..1], &[], &c), "{name}+{rel:#x}");
        assert!(!selects_in(&t[1..], &[], &c));
        let elsewhere = [at + 64];
        let c = Candidate {
            stack: &elsewhere,
            ..c
        };
        assert!(!selects_in(&t[..1], &[], &c));
    }

    #[test]
    fn a_function_of_an_object_not_loaded_at_start_is_found_by_its_dynamic_symbol() {
        // libc's exported getpid, named as the engine names a function of
        // an object it did not find at start: by the object's file name,
        // and the symbol exactly (a C name) or by a mangled prefix.
        let at = libc::getpid as *const () as usize;
        let mut paths = Vec::new();
        let text = "function libc.so.6 =getpid\n\
                    function libc.so.6 =getppid\n\
                    function libc.so.6 ^getp\n\
                    function libother.so.1 =getpid\n\
                    function libc.so.6 getpid\n";
        let t = parse_regions(text, |_| None, &mut paths);
        assert_eq!(t.len(), 4, "the line without =/^ is no term: {t:?}");
        assert!(t.iter().all(Term::by_code));
        resolve_find_object();
        // A return address inside getpid (its body is a few bytes long).
        let stack = [at + 2];
        let c = Candidate {
            addr: 0,
            len: 1,
            mmap: false,
            stack: &stack,
            path: None,
        };
        let picks: Vec<bool> = (0..4)
            .map(|k| selects_in(&t[k..k + 1], &paths, &c))
            .collect();
        assert_eq!(picks, [true, false, true, false]);
        // An address in no function of it (a stack slot) selects nothing.
        let local = 0u8;
        let stack = [&local as *const u8 as usize];
        let c = Candidate { stack: &stack, ..c };
        assert!(!selects_in(&t[..1], &paths, &c));
    }

    #[test]
    fn files_match_by_path_or_last_components() {
        assert!(file_matches(b"/srv/db/data.db", "/srv/db/data.db"));
        assert!(file_matches(b"/srv/db/data.db", "data.db"));
        assert!(file_matches(b"/srv/db/data.db", "db/data.db"));
        assert!(!file_matches(b"/srv/db/mydata.db", "data.db"));
        assert!(!file_matches(b"/srv/db/data.db", "/db/data"));
    }

    #[test]
    fn this_tests_own_binary_has_a_bias() {
        let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
        assert!(object_bias(exe.to_str().unwrap()).is_some());
        assert_eq!(object_bias("/no/such/object"), None);
    }
}
