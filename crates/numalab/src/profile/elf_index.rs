//! One ELF object read once and indexed, for naming a profile's code and
//! data and for resolving `site:` terms: its loadable segments (which turn
//! a file offset from a process's memory map into the virtual address the
//! object's symbols and DWARF use), its function and data symbols sorted
//! by address with their sizes, and, built the first time a source line is
//! asked for, its DWARF line table, from the object itself or from its
//! separate debug file (`.gnu_debuglink`, or the build ID under
//! `/usr/lib/debug/.build-id`).
//!
//! Everything is read in process: minimal compute nodes, containers and
//! the test guests have no binutils (docs/profile.md). The crates are
//! gimli-rs's `object` (ELF headers, symbol tables, notes, compressed
//! sections) and `addr2line`/`gimli` (DWARF line tables), the stack Rust's
//! own backtraces use. `blazesym` was the other candidate: it names
//! addresses as well, but offers no walk of the line table, which
//! `site:FILE:LINE` needs (a source line to its code ranges), so gimli
//! would have been needed beside it anyway; the symbol tables are read raw
//! here so that "no symbol" is judged by each symbol's size rather than by
//! the nearest name before an address.

use addr2line::Context;
use gimli::{EndianArcSlice, Reader as _, RunTimeEndian};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader, Sym};
use object::read::{ReadCache, StringTable};
use object::{Endianness, Object, ObjectSection};
use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// DWARF bytes (uncompressed, supplementary file included) one object may
/// load: a larger one is named from its symbols only.
pub const MAX_DWARF_BYTES: u64 = 1 << 30;
/// Bytes of one symbol table or its strings read at most.
const MAX_TABLE_BYTES: u64 = 1 << 30;
/// Objects the per-thread cache keeps before it starts afresh.
const MAX_CACHED: usize = 4096;

/// Where separate debug files are looked for, as GDB's
/// `debug-file-directory` (Debian's `-dbgsym` and `-dbg` packages install
/// there).
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

type Reader = EndianArcSlice<RunTimeEndian>;
pub(crate) type Elf<'a> = ElfFile64<'a, Endianness, &'a ReadCache<File>>;

/// A function or data symbol: its (mangled) name and the addresses
/// `[start, start + size)` it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct Symbol {
    pub name: String,
    pub start: u64,
    pub size: u64,
    /// Which of several symbols at one address names it: global before
    /// weak before local, then the name with fewer leading underscores
    /// (`malloc` rather than `__libc_malloc`), then the shorter.
    rank: (u8, usize, usize),
}

impl Symbol {
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.size)
    }

    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.end()
    }
}

/// A loadable segment: `filesz` bytes at file offset `offset`, mapped at
/// virtual address `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    offset: u64,
    filesz: u64,
    vaddr: u64,
}

/// One ELF object, indexed.
pub struct ElfIndex {
    path: PathBuf,
    inode: u64,
    position_dependent: bool,
    segments: Vec<Segment>,
    /// Sorted by (start, rank); `max_end[i]` is the largest end of
    /// `functions[..=i]`, so a lookup walks back only over symbols that may
    /// still hold the address.
    functions: Vec<Symbol>,
    max_end: Vec<u64>,
    data: Vec<Symbol>,
    debug_file: Option<PathBuf>,
    /// The file whose DWARF gives lines: the object or its debug file.
    dwarf_file: Option<PathBuf>,
    debug_roots: Vec<PathBuf>,
    lines: OnceCell<Option<Lines>>,
}

/// An object's DWARF: addr2line's index of it for lookups by address, and
/// the sections themselves for walking the inlined calls of a line.
struct Lines {
    dwarf: Arc<gimli::Dwarf<Reader>>,
    ctx: Context<Reader>,
}

impl std::fmt::Debug for ElfIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfIndex")
            .field("path", &self.path)
            .field("functions", &self.functions.len())
            .field("data", &self.data.len())
            .field("debug_file", &self.debug_file)
            .field("dwarf_file", &self.dwarf_file)
            .finish()
    }
}

impl ElfIndex {
    /// Reads the 64-bit ELF file at `path`: its segments and symbol tables
    /// (`.symtab` and `.dynsym`, and the debug file's `.symtab` when the
    /// object has none), and where its DWARF is. The error names the file
    /// and what is wrong with it.
    pub fn open(path: &Path) -> Result<ElfIndex, String> {
        ElfIndex::open_with(path, &[PathBuf::from(DEBUG_ROOT)])
    }

    /// [`ElfIndex::open`] looking for separate debug files under
    /// `debug_roots` instead of [`DEBUG_ROOT`].
    pub fn open_with(path: &Path, debug_roots: &[PathBuf]) -> Result<ElfIndex, String> {
        let (inode, facts) = with_elf(path, |elf| {
            let endian = elf.endian();
            let header = elf.elf_header();
            let segments = elf
                .elf_program_headers()
                .iter()
                .filter(|p| p.p_type(endian) == elf::PT_LOAD)
                .map(|p| Segment {
                    offset: p.p_offset(endian),
                    filesz: p.p_filesz(endian),
                    vaddr: p.p_vaddr(endian),
                })
                .collect::<Vec<_>>();
            let mut symbols = Vec::new();
            let had_symtab = read_symbols(elf, elf::SHT_SYMTAB, &mut symbols);
            read_symbols(elf, elf::SHT_DYNSYM, &mut symbols);
            Facts {
                position_dependent: header.e_type(endian) == elf::ET_EXEC,
                segments,
                symbols,
                had_symtab,
                has_dwarf: has_dwarf(elf),
                build_id: elf.build_id().ok().flatten().map(<[u8]>::to_vec),
                debuglink: elf
                    .gnu_debuglink()
                    .ok()
                    .flatten()
                    .map(|(name, crc)| (name.to_vec(), crc)),
            }
        })?;
        let Facts {
            position_dependent,
            segments,
            mut symbols,
            had_symtab,
            has_dwarf: own_dwarf,
            build_id,
            debuglink,
        } = facts;
        let debug_file = if own_dwarf && had_symtab {
            None
        } else {
            find_debug_file(path, build_id.as_deref(), debuglink.as_ref(), debug_roots)
        };
        let mut dwarf_file = own_dwarf.then(|| path.to_path_buf());
        if let Some(d) = &debug_file {
            if let Ok((_, (debug_symbols, debug_dwarf))) = with_elf(d, |elf| {
                let mut v = Vec::new();
                if !had_symtab {
                    read_symbols(elf, elf::SHT_SYMTAB, &mut v);
                }
                (v, has_dwarf(elf))
            }) {
                symbols.extend(debug_symbols);
                if dwarf_file.is_none() && debug_dwarf {
                    dwarf_file = Some(d.clone());
                }
            }
        }
        let (mut functions, mut data) = (Vec::new(), Vec::new());
        for (s, function) in symbols {
            if function {
                functions.push(s);
            } else {
                data.push(s);
            }
        }
        for list in [&mut functions, &mut data] {
            list.sort_by(|a, b| (a.start, a.rank, &a.name).cmp(&(b.start, b.rank, &b.name)));
            list.dedup_by(|a, b| a.start == b.start && a.size == b.size && a.name == b.name);
        }
        let max_end = functions
            .iter()
            .scan(0u64, |m, s| {
                *m = (*m).max(s.end());
                Some(*m)
            })
            .collect();
        Ok(ElfIndex {
            path: path.to_path_buf(),
            inode,
            position_dependent,
            segments,
            functions,
            max_end,
            data,
            debug_file,
            dwarf_file,
            debug_roots: debug_roots.to_vec(),
            lines: OnceCell::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The inode the file had when it was read (a memory map names each
    /// mapping's inode: a file replaced since is not the one that ran).
    pub fn inode(&self) -> u64 {
        self.inode
    }

    /// Whether the object is position-dependent (`ET_EXEC`): its
    /// addresses are where it runs.
    pub fn position_dependent(&self) -> bool {
        self.position_dependent
    }

    /// The separate debug file found for it, if one was needed and found.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug_file.as_deref()
    }

    /// Whether any source line can be had (DWARF here or in a debug file).
    pub fn has_lines(&self) -> bool {
        self.dwarf_file.is_some()
    }

    /// The virtual address of the byte at file offset `offset`, from the
    /// loadable segment holding it: exact for any linker's layout (lld
    /// places code at addresses other than its offsets).
    pub fn address_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| offset >= s.offset && offset - s.offset < s.filesz)
            .map(|s| s.vaddr.wrapping_add(offset - s.offset))
    }

    /// Function symbols (`STT_FUNC`, `STT_GNU_IFUNC`) with a size, by
    /// address.
    pub fn functions(&self) -> &[Symbol] {
        &self.functions
    }

    /// Data symbols (`STT_OBJECT`) with a size, by address.
    pub fn data_objects(&self) -> &[Symbol] {
        &self.data
    }

    /// The function whose symbol holds `addr` (by its size); where several
    /// do (a function inside another's range), the one starting last.
    /// `None` when no symbol holds it: the nearest symbol before an address
    /// is not its name (stripped libraries export few symbols).
    pub fn function_at(&self, addr: u64) -> Option<&Symbol> {
        let n = self.functions.partition_point(|s| s.start <= addr);
        let mut found: Option<&Symbol> = None;
        for i in (0..n).rev() {
            if self.max_end[i] <= addr {
                break;
            }
            let s = &self.functions[i];
            if found.is_some_and(|f| f.start != s.start) {
                break;
            }
            // Walking back over one start, ranks descend: the last one
            // holding the address ranks first.
            if s.contains(addr) {
                found = Some(s);
            }
        }
        found
    }

    /// The source file (as DWARF names it, folders included) and line of
    /// the code at `addr` in the function that holds it: where code was
    /// inlined, the line of the outermost inlined call (the line of
    /// `main` that called `std::vector`'s constructor, not the line of the
    /// library header where the allocation's call was inlined from), as
    /// the function is named by its symbol.
    pub fn location(&self, addr: u64) -> Option<(String, u32)> {
        let lines = self.line_table()?;
        let owned = |l: addr2line::Location<'_>| Some((l.file?.to_string(), l.line?));
        let mut outermost = None;
        if let Ok(mut frames) = lines.ctx.find_frames(addr).skip_all_loads() {
            while let Ok(Some(frame)) = frames.next() {
                outermost = frame.location.and_then(owned);
            }
        }
        outermost.or_else(|| lines.ctx.find_location(addr).ok()?.and_then(owned))
    }

    /// The code ranges `[start, end)` of `file:line`: the rows of the line
    /// table for that line, and the code inlined into calls made on that
    /// line (see [`ElfIndex::location`]); adjacent ranges merged. `file`
    /// is compared by its last path components (`prog.c` and `src/prog.c`
    /// both name `/build/src/prog.c`).
    pub fn line_ranges(&self, file: &str, line: u32) -> Vec<(u64, u64)> {
        let Some(lines) = self.line_table() else {
            return Vec::new();
        };
        let mut ranges: Vec<(u64, u64)> = match lines.ctx.find_location_range(0, u64::MAX) {
            Ok(rows) => rows
                .filter(|(_, len, loc)| {
                    *len > 0
                        && loc.line == Some(line)
                        && loc.file.is_some_and(|f| same_file(f, file))
                })
                .map(|(start, len, _)| (start, start.saturating_add(len)))
                .collect(),
            Err(_) => Vec::new(),
        };
        ranges.extend(inlined_calls(&lines.dwarf, file, line));
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (s, e) in ranges {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        merged
    }

    /// Whether the line table names the source file `file` (compared as
    /// [`same_file`] does).
    pub fn names_file(&self, file: &str) -> bool {
        let Some(lines) = self.line_table() else {
            return false;
        };
        let mut headers = lines.dwarf.units();
        while let Ok(Some(header)) = headers.next() {
            if let Ok(unit) = lines.dwarf.unit(header) {
                if !file_indices(&lines.dwarf, &unit, file).is_empty() {
                    return true;
                }
            }
        }
        false
    }

    /// The DWARF context, loaded the first time a line is asked for.
    fn line_table(&self) -> Option<&Lines> {
        self.lines
            .get_or_init(|| {
                self.dwarf_file
                    .as_deref()
                    .and_then(|p| load_dwarf(p, &self.debug_roots))
            })
            .as_ref()
    }
}

/// What is read from the object itself.
struct Facts {
    position_dependent: bool,
    segments: Vec<Segment>,
    /// (symbol, whether a function)
    symbols: Vec<(Symbol, bool)>,
    had_symtab: bool,
    has_dwarf: bool,
    build_id: Option<Vec<u8>>,
    debuglink: Option<(Vec<u8>, u32)>,
}

/// Opens `path` (a regular file only: a FIFO or device would block) and
/// runs `f` on it parsed as 64-bit ELF; also gives the file's inode.
pub(crate) fn with_elf<T>(
    path: &Path,
    f: impl for<'a> FnOnce(&Elf<'a>) -> T,
) -> Result<(u64, T), String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let cache = ReadCache::new(file);
    let elf = Elf::parse(&cache)
        .map_err(|e| format!("{}: not a 64-bit ELF file ({e})", path.display()))?;
    Ok((meta.ino(), f(&elf)))
}

/// Appends the defined function and data symbols with a size of the
/// symbol table of type `kind`; whether the object has that table. The
/// table and its strings are read whole, once (not name by name).
fn read_symbols(elf: &Elf<'_>, kind: elf::SectionType, out: &mut Vec<(Symbol, bool)>) -> bool {
    let endian = elf.endian();
    let data = elf.data();
    let table = elf.elf_section_table();
    let Some((_, section)) = table.enumerate().find(|(_, s)| s.sh_type(endian) == kind) else {
        return false;
    };
    let size_ok = |s: &elf::SectionHeader64<Endianness>| s.sh_size(endian) <= MAX_TABLE_BYTES;
    if !size_ok(section) {
        return true;
    }
    let Ok(bytes) = section.data(endian, data) else {
        return true;
    };
    let strtab = table
        .section(section.link(endian))
        .ok()
        .filter(|s| size_ok(s))
        .and_then(|s| s.data(endian, data).ok())
        .unwrap_or(&[]);
    let strings = StringTable::new(strtab, 0, strtab.len() as u64);
    let count = bytes.len() / std::mem::size_of::<elf::Sym64<Endianness>>();
    let Ok((entries, _)) = object::pod::slice_from_bytes::<elf::Sym64<Endianness>>(bytes, count)
    else {
        return true;
    };
    for s in entries.iter().skip(1) {
        let ty = s.st_type();
        let function = ty == elf::STT_FUNC || ty == elf::STT_GNU_IFUNC;
        if !function && ty != elf::STT_OBJECT {
            continue;
        }
        let size = s.st_size(endian);
        if size == 0 || s.st_shndx(endian).is_special() {
            continue;
        }
        let Ok(name) = s.name(endian, strings) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let name = String::from_utf8_lossy(name).into_owned();
        let bind = match s.st_bind() {
            elf::STB_GLOBAL => 0,
            elf::STB_WEAK => 1,
            _ => 2,
        };
        let underscores = name.bytes().take_while(|b| *b == b'_').count();
        out.push((
            Symbol {
                rank: (bind, underscores, name.len()),
                name,
                start: s.st_value(endian),
                size,
            },
            function,
        ));
    }
    true
}

/// Whether the object carries a DWARF line table of its own.
fn has_dwarf(elf: &Elf<'_>) -> bool {
    let endian = elf.endian();
    elf.section_by_name(".debug_line")
        .is_some_and(|s| s.elf_section_header().sh_type(endian) != elf::SHT_NOBITS && s.size() > 0)
}

/// The separate debug file of an object: by build ID under each root
/// (`.build-id/ab/cdef….debug`), else by `.gnu_debuglink` name beside the
/// object, in its `.debug` folder, and under each root followed by the
/// object's folder (GDB's order). A candidate must carry the same build
/// ID, or where the object has none, the CRC the link names.
fn find_debug_file(
    object: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&(Vec<u8>, u32)>,
    roots: &[PathBuf],
) -> Option<PathBuf> {
    let real = std::fs::canonicalize(object).unwrap_or_else(|_| object.to_path_buf());
    let not_itself = |c: &PathBuf| std::fs::canonicalize(c).is_ok_and(|c| c != real);
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        for root in roots {
            let c = root
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]));
            if c.is_file() && not_itself(&c) && build_id_of(&c).as_deref() == Some(id) {
                return Some(c);
            }
        }
    }
    let (name, crc) = debuglink?;
    let name = std::str::from_utf8(name).ok()?;
    // A bare file name only: a link is not to lead anywhere else.
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return None;
    }
    let dir = real.parent()?;
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    for root in roots {
        let rel = dir.strip_prefix("/").unwrap_or(dir);
        candidates.push(root.join(rel).join(name));
    }
    candidates.into_iter().find(|c| {
        c.is_file()
            && not_itself(c)
            && match build_id {
                Some(id) => build_id_of(c).as_deref() == Some(id),
                None => crc32_of(c) == Some(*crc),
            }
    })
}

fn build_id_of(path: &Path) -> Option<Vec<u8>> {
    with_elf(path, |elf| {
        elf.build_id().ok().flatten().map(<[u8]>::to_vec)
    })
    .ok()?
    .1
}

/// The CRC-32 `.gnu_debuglink` names: of the whole debug file.
fn crc32_of(path: &Path) -> Option<u32> {
    let mut f = File::open(path).ok()?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            return Some(h.finalize());
        }
        h.update(&buf[..n]);
    }
}

/// The DWARF of the file at `path` (and of its supplementary file, where
/// `dwz` moved shared entries to one), for line lookups; `None` when it
/// cannot be read, is larger than [`MAX_DWARF_BYTES`], or is not DWARF
/// addr2line reads.
fn load_dwarf(path: &Path, roots: &[PathBuf]) -> Option<Lines> {
    let mut budget = MAX_DWARF_BYTES;
    let (_, (dwarf, altlink)) = with_elf(path, |elf| {
        let dwarf = gimli::Dwarf::load(|id| load_section(elf, id, &mut budget)).ok();
        let altlink = elf
            .gnu_debugaltlink()
            .ok()
            .flatten()
            .map(|(name, id)| (name.to_vec(), id.to_vec()));
        (dwarf, altlink)
    })
    .ok()?;
    let mut dwarf = dwarf?;
    if let Some(sup) = altlink.and_then(|(name, id)| find_supplementary(path, &name, &id, roots)) {
        if let Ok((_, Some(sup_dwarf))) = with_elf(&sup, |elf| {
            gimli::Dwarf::load(|id| load_section(elf, id, &mut budget)).ok()
        }) {
            dwarf.set_sup(sup_dwarf);
        }
    }
    let dwarf = Arc::new(dwarf);
    let ctx = Context::from_arc_dwarf(dwarf.clone()).ok()?;
    Some(Lines { dwarf, ctx })
}

/// The code ranges of the calls inlined at `file:line`
/// (`DW_TAG_inlined_subroutine` entries whose call site is there), from
/// the units whose line tables name that file.
fn inlined_calls(dwarf: &gimli::Dwarf<Reader>, file: &str, line: u32) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let files = file_indices(dwarf, &unit, file);
        if files.is_empty() {
            continue;
        }
        let mut entries = unit.entries();
        while let Ok(Some(e)) = entries.next_dfs() {
            if e.tag() != gimli::DW_TAG_inlined_subroutine {
                continue;
            }
            let number = |v: gimli::AttributeValue<Reader>| match v {
                gimli::AttributeValue::FileIndex(i) => Some(i),
                v => v.udata_value(),
            };
            let call_line = e.attr_value(gimli::DW_AT_call_line).and_then(number);
            let call_file = e.attr_value(gimli::DW_AT_call_file).and_then(number);
            if call_line != Some(u64::from(line)) || !call_file.is_some_and(|f| files.contains(&f))
            {
                continue;
            }
            if let Ok(mut ranges) = dwarf.die_ranges(&unit, e) {
                while let Ok(Some(r)) = ranges.next() {
                    if r.begin < r.end {
                        out.push((r.begin, r.end));
                    }
                }
            }
        }
    }
    out
}

/// The indices a unit's line table gives `file` (compared as
/// [`same_file`] does).
fn file_indices(dwarf: &gimli::Dwarf<Reader>, unit: &gimli::Unit<Reader>, file: &str) -> Vec<u64> {
    let Some(program) = &unit.line_program else {
        return Vec::new();
    };
    let header = program.header();
    let text = |v: gimli::AttributeValue<Reader>| {
        dwarf
            .attr_string(unit, v)
            .ok()
            .map(|r| String::from_utf8_lossy(&r.to_slice().unwrap_or_default()).into_owned())
    };
    // DWARF 5 numbers files from 0, earlier versions from 1.
    let first = if header.version() >= 5 { 0 } else { 1 };
    (first..first + header.file_names().len() as u64)
        .filter(|&i| {
            header.file(i).is_some_and(|entry| {
                let name = text(entry.path_name()).unwrap_or_default();
                let dir = entry.directory(header).and_then(text).unwrap_or_default();
                same_file(&Path::new(&dir).join(&name).to_string_lossy(), file)
            })
        })
        .collect()
}

/// One DWARF section, decompressed, as gimli reads it (an empty one when
/// the file has none); an error past the byte budget.
fn load_section(elf: &Elf<'_>, id: gimli::SectionId, budget: &mut u64) -> Result<Reader, ()> {
    let endian = if elf.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    // Variables' locations, macros and name indexes: nothing a line or a
    // function needs, and libc's location lists alone are a sixth of its
    // debug file.
    let unused = matches!(
        id,
        gimli::SectionId::DebugLoc
            | gimli::SectionId::DebugLocLists
            | gimli::SectionId::DebugMacinfo
            | gimli::SectionId::DebugMacro
            | gimli::SectionId::DebugPubNames
            | gimli::SectionId::DebugPubTypes
    );
    let section = if unused {
        None
    } else {
        elf.section_by_name(id.name())
    };
    let bytes: Arc<[u8]> = match section {
        Some(s) => {
            let size = s.size();
            // The compressed size is known before decompressing; the
            // decompressed one is checked again after.
            if size > *budget {
                return Err(());
            }
            let data = s.uncompressed_data().map_err(|_| ())?;
            let len = data.len() as u64;
            if len > *budget {
                return Err(());
            }
            *budget -= len;
            Arc::from(data.into_owned().into_boxed_slice())
        }
        None => Arc::from(Vec::new().into_boxed_slice()),
    };
    Ok(EndianArcSlice::new(bytes, endian))
}

/// The supplementary DWARF file `.gnu_debugaltlink` names (absolute, or
/// relative to the debug file's folder), else the one with its build ID
/// under a root; it must carry that build ID.
fn find_supplementary(debug: &Path, name: &[u8], id: &[u8], roots: &[PathBuf]) -> Option<PathBuf> {
    let name = Path::new(std::str::from_utf8(name).ok()?);
    let mut candidates = Vec::new();
    if name.is_absolute() {
        candidates.push(name.to_path_buf());
    } else if let Some(dir) = debug.parent() {
        candidates.push(dir.join(name));
    }
    if id.len() >= 2 {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        for root in roots {
            candidates.push(
                root.join(".build-id")
                    .join(&hex[..2])
                    .join(format!("{}.debug", &hex[2..])),
            );
        }
    }
    candidates
        .into_iter()
        .find(|c| c.is_file() && build_id_of(c).as_deref() == Some(id))
}

/// Whether DWARF's file `full` is the file a user named `wanted`: the
/// components of `wanted` end `full`'s.
pub fn same_file(full: &str, wanted: &str) -> bool {
    let parts = |p: &str| -> Vec<String> {
        Path::new(p)
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    };
    let (full, wanted) = (parts(full), parts(wanted));
    !wanted.is_empty() && full.ends_with(&wanted)
}

/// The identity of a file's contents as far as a cache can tell.
type FileId = (u64, u64, u64, i64, i64);

fn file_id(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
}

/// An object's index (or `None`: not one) as of the file it was read from.
type CacheEntry = (FileId, Option<Rc<ElfIndex>>);

thread_local! {
    /// Each object indexed once per thread (the profile is built on one),
    /// failures included, until the file changes.
    static INDEXES: RefCell<BTreeMap<PathBuf, CacheEntry>> =
        const { RefCell::new(BTreeMap::new()) };
}

/// The index of the ELF file at `path`, read the first time it is asked
/// for and kept while the file stays the same; `None` when it is not a
/// readable 64-bit ELF file.
pub fn cached(path: &Path) -> Option<Rc<ElfIndex>> {
    let id = file_id(path)?;
    if let Some(hit) =
        INDEXES.with_borrow(|m| m.get(path).filter(|e| e.0 == id).map(|e| e.1.clone()))
    {
        return hit;
    }
    let index = ElfIndex::open(path).ok().map(Rc::new);
    INDEXES.with_borrow_mut(|m| {
        if m.len() >= MAX_CACHED {
            m.clear();
        }
        m.insert(path.to_path_buf(), (id, index.clone()));
    });
    index
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_compare_by_their_last_components() {
        assert!(same_file("/build/src/prog.c", "prog.c"));
        assert!(same_file("/build/src/prog.c", "src/prog.c"));
        assert!(same_file("/build/./src/prog.c", "./src/prog.c"));
        assert!(!same_file("/build/src/prog.c", "rog.c"));
        assert!(!same_file("/build/src/prog.c", "other/prog.c"));
        assert!(!same_file("/build/src/prog.c", ""));
    }

    #[test]
    fn what_is_not_a_readable_elf_file_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("numalab-elf-index-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = dir.join("not-elf");
        std::fs::write(&text, "#!/bin/sh\n").unwrap();
        let e = ElfIndex::open(&text).unwrap_err();
        assert!(e.contains("not-elf: not a 64-bit ELF file"), "{e}");
        let e = ElfIndex::open(&dir).unwrap_err();
        assert!(e.ends_with("not a regular file"), "{e}");
        assert!(ElfIndex::open(&dir.join("absent")).is_err());
        assert!(cached(&dir.join("absent")).is_none());
        // Cut short anywhere: an error or fewer symbols, never a panic.
        let exe = std::env::current_exe().unwrap();
        let whole = std::fs::read(&exe).unwrap();
        let full = ElfIndex::open(&exe).unwrap();
        let cut = dir.join("cut");
        for at in [16, 64, 1000, whole.len() / 2, whole.len() - 1] {
            std::fs::write(&cut, &whole[..at]).unwrap();
            if let Ok(i) = ElfIndex::open(&cut) {
                assert!(i.functions().len() <= full.functions().len());
                let _ = i.location(full.functions()[0].start);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
