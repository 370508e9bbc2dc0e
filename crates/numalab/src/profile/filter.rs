//! `--regions FILTER` and `--only-threads SET`: which regions and threads a
//! profile samples.
//!
//! A filter is a comma-separated list of alternatives, each one term or
//! terms joined by `&`; a region is kept when every term of some
//! alternative matches it (`heap&size>100M,file:data.db`). The preload library applies the terms it can judge
//! when an allocation is made (kind, size, address, allocation site, as
//! code ranges [`resolve_sites`] found in the program's ELF files, read in
//! process), so
//! unselected allocations are never tracked, armed or charged for. Static
//! data and stacks are never armed; their terms select what the profile
//! reports ([`RegionFilter::keeps`]).

use super::RegionProfile;
use crate::idset::IdSet;
use std::path::{Path, PathBuf};

/// Terms in one filter at most.
pub const MAX_TERMS: usize = 64;
/// Code ranges one filter may resolve to at most (a line inlined in many
/// places has one range per copy).
pub const MAX_CODE_RANGES: usize = 256;
/// Thread ordinals a `--only-threads` set may name (0 is the main thread).
pub const MAX_THREAD_ORDINAL: u32 = 1023;

/// The terms, as `--help` and errors list them.
pub const TERMS_HELP: &str = "heap, mmap, file:PATH, stack, static, static:SYMBOL, site:FUNCTION, site:FILE:LINE, site:OBJECT+0xOFFSET, site:OBJECT:FUNCTION, 0xSTART-0xEND, size>N, size<N; a comma between terms means or, & means and (heap&size>1M)";

/// One term of a region filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// Allocations of the malloc family.
    Heap,
    /// Mappings (anonymous or of a file).
    Mmap,
    /// Mappings of this file: its path, or the path's last components
    /// (`file:data.db` selects `/srv/db/data.db`).
    File(String),
    /// Thread stacks.
    Stack,
    /// Static data; `Some`: the object named so (an ELF symbol).
    Static(Option<String>),
    /// Allocations whose call stack passes through this function.
    Function(String),
    /// Allocations whose call stack passes through this source line.
    Line { file: String, line: u32 },
    /// Allocations whose call stack has a call at this code address: an
    /// object (its file name) and the call's offset in it, as profiles name
    /// sites without debug information (`prog+0x17b6`).
    Call { object: String, offset: u64 },
    /// Allocations whose call stack passes through this function of the
    /// object of this file name (`site:libnames.so:lib_alloc`): a library
    /// the program may load later with `dlopen`, whose functions cannot be
    /// looked up before it runs (the preload library finds them in the
    /// object's dynamic symbols as the program loads it).
    ObjectFunction { object: String, name: String },
    /// Regions overlapping `[start, end)`.
    Address { start: u64, end: u64 },
    /// Regions (each allocation, mapping, static object or stack) of
    /// `min..=max` bytes.
    Size { min: u64, max: u64 },
}

/// A parsed `--regions` filter.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionFilter {
    /// Every term, in the order given.
    pub terms: Vec<Term>,
    /// The alternative of each term (`groups[i]` for `terms[i]`):
    /// alternatives are numbered from 0 in order, and a region is kept
    /// when all the terms of one alternative match it.
    pub groups: Vec<usize>,
}

impl RegionFilter {
    /// Parses `heap,size>1M,site:init_arrays`; the error names the term
    /// and lists the valid ones.
    pub fn parse(text: &str) -> Result<RegionFilter, String> {
        let mut parts = Vec::new();
        for (group, alternative) in split_terms(text, ',').into_iter().enumerate() {
            for term in split_terms(alternative, '&') {
                parts.push((group, term.trim()));
            }
        }
        if parts.len() > MAX_TERMS {
            return Err(format!(
                "{} terms is too many (at most {MAX_TERMS})",
                parts.len()
            ));
        }
        let terms = parts
            .iter()
            .map(|(_, p)| parse_term(p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RegionFilter {
            terms,
            groups: parts.iter().map(|(g, _)| *g).collect(),
        })
    }

    /// The alternatives: each the terms joined by `&`, with their indexes
    /// in `terms`.
    pub fn alternatives(&self) -> Vec<Vec<(usize, &Term)>> {
        let mut out: Vec<Vec<(usize, &Term)>> = Vec::new();
        for (i, (t, g)) in self.terms.iter().zip(&self.groups).enumerate() {
            if out.len() <= *g {
                out.resize_with(g + 1, Vec::new);
            }
            out[*g].push((i, t));
        }
        out.retain(|a| !a.is_empty());
        out
    }

    /// Whether some term is joined with another by `&`.
    pub fn has_conjunctions(&self) -> bool {
        self.alternatives().iter().any(|a| a.len() > 1)
    }

    /// Whether any term needs the allocation sites' code addresses.
    pub fn has_sites(&self) -> bool {
        self.terms.iter().any(is_site)
    }

    /// Whether the profile keeps this region. Heap and mmap regions were
    /// chosen by the library when they were allocated (per allocation:
    /// its size and address, its call stack), so they are kept as they
    /// come; static data and stacks are judged here.
    pub fn keeps(&self, r: &RegionProfile) -> bool {
        let any = |judge: &dyn Fn(&Term) -> bool| {
            self.alternatives()
                .iter()
                .any(|a| a.iter().all(|(_, t)| judge(t)))
        };
        match r.kind.as_str() {
            "static" | "stack" => any(&|t| self.located_term(t, r)),
            "small" => any(&|t| small_term(t, r)),
            _ => true,
        }
    }

    /// Whether the filter selects region `r` of a built profile, judged
    /// from what the profile says of it (`--granularity`'s filters): its
    /// kind, its mapping's file, the frames of its call stack, its
    /// allocations' addresses (`allocations`, start and bytes; the
    /// region's first address and bytes where none are given) and each
    /// allocation's mean size.
    pub fn judges(&self, r: &RegionProfile, allocations: &[(u64, u64)]) -> bool {
        let whole = [(r.first_address, r.bytes)];
        let ranges = if allocations.is_empty() {
            &whole[..]
        } else {
            allocations
        };
        let judge = |t: &Term| match t {
            Term::Heap => r.kind == "heap" || r.kind == "small",
            Term::Mmap => r.kind == "mmap" || r.kind == "file",
            Term::File(path) => {
                r.kind == "file" && r.object.as_deref().is_some_and(|o| path_is(o, path))
            }
            Term::Address { start, end } => ranges
                .iter()
                .any(|&(a, len)| a < *end && *start < a.saturating_add(len)),
            Term::Stack | Term::Static(_) => self.located_term(t, r),
            // Each allocation's size, as the library judges it: their
            // mean for a region of several.
            Term::Size { min, max } => {
                (*min..=*max).contains(&r.bytes.checked_div(r.allocations.max(1)).unwrap_or(0))
            }
            Term::Function(_)
            | Term::Line { .. }
            | Term::Call { .. }
            | Term::ObjectFunction { .. } => small_term(t, r),
        };
        self.alternatives()
            .iter()
            .any(|a| a.iter().all(|(_, t)| judge(t)))
    }

    fn located_term(&self, t: &Term, r: &RegionProfile) -> bool {
        let end = r.first_address.saturating_add(r.bytes);
        match t {
            Term::Stack => r.kind == "stack",
            Term::Static(None) => r.kind == "static",
            Term::Static(Some(name)) => r.kind == "static" && names_match(&r.site, name),
            Term::Address { start, end: e } => r.first_address < *e && *start < end,
            Term::Size { min, max } => (*min..=*max).contains(&r.bytes),
            _ => false,
        }
    }

    /// The library's form of the filter (`NUMALAB_PROFILE_REGIONS`): one
    /// line per term, `heap`, `mmap`, `file PATH`, `size MIN MAX`, `addr
    /// START END`, and per code range of a site term (from
    /// [`resolve_sites`]) `code START END PATH` (ELF virtual addresses of
    /// the object at PATH). A line starts an alternative of its own, or,
    /// with the prefix `& `, is also required by the alternative before it,
    /// or, with `| `, is another choice for the term before it (a site's
    /// further code ranges in an alternative joined by `&`). Terms the
    /// library cannot judge (statics, stacks) select no allocation, nor
    /// does an alternative that requires one; a filter of only those
    /// tracks nothing.
    pub fn library_form(&self, code: &[CodeRange]) -> String {
        let mut out = String::new();
        for alternative in self.alternatives() {
            let mut lines: Vec<Vec<String>> = Vec::new();
            for (i, t) in &alternative {
                let term: Vec<String> = match t {
                    Term::Heap => vec!["heap".into()],
                    Term::Mmap => vec!["mmap".into()],
                    Term::File(path) => vec![format!("file {path}")],
                    Term::Address { start, end } => vec![format!("addr {start} {end}")],
                    Term::Size { min, max } => vec![format!("size {min} {max}")],
                    Term::Function(_)
                    | Term::Line { .. }
                    | Term::Call { .. }
                    | Term::ObjectFunction { .. } => code
                        .iter()
                        .filter(|c| c.term == *i)
                        .flat_map(|c| match &c.function {
                            Some(name) => symbol_patterns(name)
                                .into_iter()
                                .map(|p| format!("function {} {p}", c.object.display()))
                                .collect(),
                            None => {
                                vec![format!("code {} {} {}", c.start, c.end, c.object.display())]
                            }
                        })
                        .collect(),
                    Term::Stack | Term::Static(_) => Vec::new(),
                };
                lines.push(term);
            }
            if alternative.len() == 1 {
                // One term: each of its lines an alternative.
                for l in &lines[0] {
                    out.push_str(&format!("{l}\n"));
                }
                continue;
            }
            if lines.iter().any(Vec::is_empty) {
                continue;
            }
            for (k, term) in lines.iter().enumerate() {
                for (j, l) in term.iter().enumerate() {
                    let prefix = match (k, j) {
                        (0, 0) => "",
                        (_, 0) => "& ",
                        _ => "| ",
                    };
                    out.push_str(&format!("{prefix}{l}\n"));
                }
            }
        }
        if out.is_empty() {
            // No allocation can match: the library is told so explicitly
            // (an empty filter would mean "no filter").
            out.push_str("none\n");
        }
        out
    }
}

/// The parts of a filter: split at `sep` (`,` between alternatives, `&`
/// between the terms of one), except inside the parentheses and angle
/// brackets of a `site:` or `static:` name (C++ parameter lists and
/// template arguments: `site:f(int, long)`, `site:g<a, b>`,
/// `site:f(int&)`); the `<` and `>` of an `operator<`-like name and the
/// `>` of `->` do not nest, and the `&` of `operator&` is the name's.
fn split_terms(text: &str, sep: char) -> Vec<&str> {
    let named = |term: &str| {
        let t = term.trim_start();
        t.starts_with("site:") || t.starts_with("static:")
    };
    let mut out = Vec::new();
    let (mut start, mut depth) = (0usize, 0u32);
    let mut in_name = named(text);
    for (i, c) in text.char_indices() {
        let head = &text[start..i];
        match c {
            '&' if in_name && after_operator(head) => {}
            c if c == sep && depth == 0 => {
                out.push(head);
                start = i + 1;
                in_name = named(&text[start..]);
            }
            // A term's end inside an alternative (split at commas): the
            // next term may be no name (`site:f&size<1M,heap`).
            '&' if depth == 0 => in_name = named(&text[i + 1..]),
            _ if !in_name => {}
            // `operator()`: its own parentheses do not nest.
            '(' if head.ends_with("operator") => {}
            ')' if head.ends_with("operator(") => {}
            '<' | '>' if after_operator(head) => {}
            '>' if head.ends_with('-') => {}
            '(' | '<' => depth += 1,
            ')' | '>' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// Whether `head` ends in `operator` followed only by operator characters
/// (`operator`, `operator<`, `operator-`): a `<` or `>` next is part of
/// the operator's name, not a bracket.
fn after_operator(head: &str) -> bool {
    let name = head.trim_end_matches(|c: char| "<>=-!+*/%^&|~".contains(c));
    name.ends_with("operator") && !name.ends_with("_operator")
}

fn parse_term(t: &str) -> Result<Term, String> {
    let bad = |why: String| Err(format!("{why}; terms: {TERMS_HELP}"));
    match t {
        "" => return bad("an empty term".into()),
        "heap" => return Ok(Term::Heap),
        "mmap" => return Ok(Term::Mmap),
        "stack" => return Ok(Term::Stack),
        "static" => return Ok(Term::Static(None)),
        _ => {}
    }
    if let Some(path) = t.strip_prefix("file:") {
        if path.is_empty() || path.len() > 512 || path.contains('\n') {
            return bad(format!("'{}' names no file", excerpt(t)));
        }
        return Ok(Term::File(path.to_string()));
    }
    if let Some(name) = t.strip_prefix("static:") {
        if name.is_empty() || name.len() > 512 {
            return bad(format!("'{}' names no symbol", excerpt(t)));
        }
        return Ok(Term::Static(Some(name.to_string())));
    }
    if let Some(spec) = t.strip_prefix("site:") {
        if spec.is_empty() || spec.len() > 512 {
            return bad(format!("'{}' names no function or line", excerpt(t)));
        }
        // OBJECT+0xOFFSET: a call's address; FILE:LINE ends in digits;
        // anything else is a function (C++'s `ns::f` included).
        if let Some((object, off)) = spec.rsplit_once('+') {
            if let Some(offset) = hex(off) {
                if object.is_empty() || object.contains('/') {
                    return bad(format!(
                        "'{}' is not site:OBJECT+0xOFFSET (the object's file name)",
                        excerpt(t)
                    ));
                }
                return Ok(Term::Call {
                    object: object.to_string(),
                    offset,
                });
            }
        }
        // OBJECT:FUNCTION: an object's file name (no folder), a single
        // colon (C++'s and Rust's `::` joins a name's parts), then a name
        // that is not a line number.
        if let Some((object, name)) = object_and_name(spec) {
            return Ok(Term::ObjectFunction {
                object: object.to_string(),
                name: name.to_string(),
            });
        }
        if let Some((file, line)) = spec.rsplit_once(':') {
            if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) {
                return match line.parse::<u32>() {
                    Ok(l) if l > 0 && !file.is_empty() => Ok(Term::Line {
                        file: file.to_string(),
                        line: l,
                    }),
                    _ => bad(format!("'{}' is not site:FILE:LINE", excerpt(t))),
                };
            }
        }
        return Ok(Term::Function(spec.to_string()));
    }
    if let Some(rest) = t.strip_prefix("size") {
        let (op, n) = if let Some(n) = rest.strip_prefix(">=") {
            (">=", n)
        } else if let Some(n) = rest.strip_prefix("<=") {
            ("<=", n)
        } else if let Some(n) = rest.strip_prefix('>') {
            (">", n)
        } else if let Some(n) = rest.strip_prefix('<') {
            ("<", n)
        } else {
            return bad(format!("'{}' is not size>N or size<N", excerpt(t)));
        };
        let n = crate::text::parse::size(n.trim()).map_err(|e| format!("'{}': {e}", excerpt(t)))?;
        let (min, max) = match op {
            ">=" => (n, u64::MAX),
            ">" => (n.saturating_add(1), u64::MAX),
            "<=" => (0, n),
            _ => (
                0,
                n.checked_sub(1).ok_or_else(|| {
                    format!("'{}' selects nothing; terms: {TERMS_HELP}", excerpt(t))
                })?,
            ),
        };
        return Ok(Term::Size { min, max });
    }
    if let Some((a, b)) = t.split_once('-') {
        if let (Some(start), Some(end)) = (hex(a), hex(b)) {
            if start >= end {
                return bad(format!("'{}' is an empty address range", excerpt(t)));
            }
            return Ok(Term::Address { start, end });
        }
    }
    bad(format!("'{}' is not a region term", excerpt(t)))
}

/// `OBJECT:FUNCTION` split at its first colon that is not half of a `::`,
/// where OBJECT can be a file name and FUNCTION is not a line number.
fn object_and_name(spec: &str) -> Option<(&str, &str)> {
    let b = spec.as_bytes();
    let at = (0..b.len())
        .find(|&i| b[i] == b':' && (i == 0 || b[i - 1] != b':') && b.get(i + 1) != Some(&b':'))?;
    let (object, name) = (&spec[..at], &spec[at + 1..]);
    let file = !object.is_empty()
        && !object.contains(['/', ' ', '(', '<', '>', ',', '&'])
        && object != "."
        && object != "..";
    (file && !name.is_empty() && !name.bytes().all(|c| c.is_ascii_digit()))
        .then_some((object, name))
}

/// Whether a term selects a site of small allocations (not judged by the
/// library, which does not track them): `heap`, a size term by their mean
/// size, a function or line its call stack passes through.
fn small_term(t: &Term, r: &RegionProfile) -> bool {
    let frames = || r.stack.iter().map(|f| super::symbols::parse_frame(f));
    match t {
        Term::Heap => true,
        Term::Size { min, max } => {
            (*min..=*max).contains(&r.bytes.checked_div(r.allocations).unwrap_or(0))
        }
        // The frame's name is the printed (demangled) one: it matches as a
        // symbol would.
        Term::Function(name) => frames().any(|f| f.function.is_some_and(|n| names_match(n, name))),
        // A frame names its file by name only: a term's folders cannot be
        // checked here, its file name and line can.
        Term::Line { file, line } => {
            let want = Path::new(file).file_name();
            frames().any(|f| {
                f.line
                    .and_then(|l| l.rsplit_once(':'))
                    .is_some_and(|(ff, l)| {
                        l.parse::<u32>() == Ok(*line) && Path::new(ff).file_name() == want
                    })
            })
        }
        Term::Call { object, offset } => {
            frames().any(|f| f.object == Some(object.as_str()) && f.address == Some(*offset))
        }
        Term::ObjectFunction { object, name } => frames().any(|f| {
            f.object == Some(object.as_str()) && f.function.is_some_and(|n| names_match(n, name))
        }),
        _ => false,
    }
}

/// How the preload library recognises function `name` among an object's
/// dynamic symbols, which are mangled: `=NAME` the symbol itself (C),
/// `^PREFIX` a symbol starting so: the Itanium mangling of a C++ name
/// without its parameters (`ns::Alloc::Make` is `_ZN2ns5Alloc4MakeE...`,
/// `make` is `_Z4make...`) and Rust's legacy one (`_ZN...17h<hash>E`).
/// Templates and operators are matched by their exact symbol only.
pub fn symbol_patterns(name: &str) -> Vec<String> {
    let mut out = vec![format!("={name}")];
    let bare = name.split('(').next().unwrap_or(name).trim();
    if bare.is_empty() || bare.contains(['<', '>', ' ', '~']) || bare.contains("operator") {
        return out;
    }
    let parts: Vec<&str> = bare.split("::").collect();
    let ident = |p: &&str| {
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !p.as_bytes()[0].is_ascii_digit()
    };
    if !parts.iter().all(ident) {
        return out;
    }
    let nested: String = parts.iter().map(|p| format!("{}{p}", p.len())).collect();
    if parts.len() == 1 {
        out.push(format!("^_Z{nested}"));
    } else {
        out.push(format!("^_ZN{nested}E"));
        out.push(format!("^_ZN{nested}17h"));
    }
    out
}

pub(crate) use super::symbols::names_match;

/// Whether `path` is `wanted`, or `wanted` is its last components (as the
/// library judges `file:` terms).
fn path_is(path: &str, wanted: &str) -> bool {
    let w = wanted.trim_end_matches('/');
    path == w || path.strip_suffix(w).is_some_and(|head| head.ends_with('/'))
}

fn hex(t: &str) -> Option<u64> {
    u64::from_str_radix(t.trim().strip_prefix("0x")?, 16).ok()
}

fn excerpt(t: &str) -> String {
    crate::text::format::excerpt(t, 40)
}

/// Code a site term resolved to: ELF virtual addresses `[start, end)` of
/// the object at `object` (the library adds the object's load bias).
#[derive(Debug, Clone, PartialEq)]
pub struct CodeRange {
    pub object: PathBuf,
    pub start: u64,
    pub end: u64,
    /// The index of the site term (in [`RegionFilter::terms`]) it is code of.
    pub term: usize,
    /// A function of an object not loaded at start, found by its name as
    /// the program loads it (then `object` is the object's file name, and
    /// `start` and `end` are 0).
    pub function: Option<String>,
}

/// The code ranges of the filter's site terms in `objects` (the program
/// first, then its libraries), each object read once ([`super::elf_index`]):
/// a function's symbols (every overload for a name without parameters), a
/// source line's rows of the DWARF line table, a call's address. Each term
/// must match somewhere, else the error says which and where it looked.
pub fn resolve_sites(f: &RegionFilter, objects: &[PathBuf]) -> Result<Vec<CodeRange>, String> {
    let mut out = Vec::new();
    for (i, t) in f.terms.iter().enumerate() {
        if !is_site(t) {
            continue;
        }
        let mut found = Vec::new();
        for o in objects {
            found.extend(resolve_term_in(t, o));
        }
        for c in &mut found {
            c.term = i;
        }
        if let (true, Term::Call { object, offset }) = (found.is_empty(), t) {
            // Not loaded at start: a library the program may `dlopen`
            // (Python's extension modules, libjvm), named by its file
            // name, which the preload library looks for in each stack.
            if later_object_name(object) {
                found.push(CodeRange {
                    object: PathBuf::from(object),
                    start: *offset,
                    end: offset.saturating_add(1),
                    term: i,
                    function: None,
                });
            }
        }
        if let (true, Term::ObjectFunction { object, name }) = (found.is_empty(), t) {
            let loaded = objects.iter().any(|o| file_named(o, object));
            // Only a shared object can be loaded later (dlopen).
            if !loaded && later_object_name(object) && object.contains(".so") {
                found.push(CodeRange {
                    object: PathBuf::from(object),
                    start: 0,
                    end: 0,
                    term: i,
                    function: Some(name.clone()),
                });
            }
        }
        if found.is_empty() {
            return Err(unresolved(t, objects));
        }
        out.extend(found);
        if out.len() > MAX_CODE_RANGES {
            return Err(format!(
                "the site terms match {} code ranges or more (at most {MAX_CODE_RANGES}); name a narrower function or line",
                out.len()
            ));
        }
    }
    Ok(out)
}

/// Whether `name` can be the file name of an object loaded later: a
/// plain file name, no path (which the library's lines could not carry).
fn later_object_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\n', ' '])
}

/// Whether the object at `path` has the file name `name` (or links to a
/// file of that name: a soname).
fn file_named(path: &Path, name: &str) -> bool {
    let named = |p: &Path| p.file_name().is_some_and(|f| f.to_string_lossy() == *name);
    named(path)
        || std::fs::canonicalize(path)
            .ok()
            .as_deref()
            .is_some_and(named)
}

/// The objects not loaded at start (see [`resolve_sites`]) whose code the
/// library's lines (a filter's or a plan's [`RegionFilter::library_form`])
/// name, by file name: the launch says that their code is looked for as
/// the program loads them.
pub fn later_objects(library_form: &str) -> Vec<String> {
    let mut out: Vec<String> = library_form
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("& ").or(l.strip_prefix("| ")).unwrap_or(l);
            match l.strip_prefix("function ") {
                Some(f) => f.split(' ').next(),
                None => l.strip_prefix("code ")?.splitn(3, ' ').nth(2),
            }
        })
        .filter(|o| later_object_name(o))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn is_site(t: &Term) -> bool {
    matches!(
        t,
        Term::Function(_) | Term::Line { .. } | Term::Call { .. } | Term::ObjectFunction { .. }
    )
}

/// The code ranges a site term selects in the one ELF object at `object`,
/// given explicitly: for a library the program loads later (`dlopen`),
/// whose path a plan entry carries, as for the program's own objects.
/// Empty when the term names nothing there (or the file is not a readable
/// ELF object); other terms select no code.
pub fn resolve_term_in(t: &Term, object: &Path) -> Vec<CodeRange> {
    let range = |start: u64, end: u64| CodeRange {
        object: object.to_path_buf(),
        start,
        end,
        term: 0,
        function: None,
    };
    match t {
        // The call instruction's own address: the library compares each
        // return address less one.
        Term::Call {
            object: name,
            offset,
        } => {
            let named = |p: &Path| p.file_name().is_some_and(|f| f.to_string_lossy() == *name);
            let real = std::fs::canonicalize(object).ok();
            if named(object) || real.as_deref().is_some_and(named) {
                vec![range(*offset, offset.saturating_add(1))]
            } else {
                Vec::new()
            }
        }
        Term::ObjectFunction {
            object: name,
            name: f,
        } if file_named(object, name) => resolve_term_in(&Term::Function(f.clone()), object),
        Term::Function(name) => super::elf_index::cached(object).map_or_else(Vec::new, |i| {
            i.functions()
                .iter()
                .filter(|s| names_match(&s.name, name))
                .map(|s| range(s.start, s.end()))
                .collect()
        }),
        Term::Line { file, line } => super::elf_index::cached(object).map_or_else(Vec::new, |i| {
            i.line_ranges(file, *line)
                .into_iter()
                .map(|(s, e)| range(s, e))
                .collect()
        }),
        _ => Vec::new(),
    }
}

/// Why a site term matched nothing in `objects`.
fn unresolved(t: &Term, objects: &[PathBuf]) -> String {
    let names: Vec<String> = objects
        .iter()
        .take(3)
        .map(|o| o.display().to_string())
        .collect();
    let more = if objects.len() > 3 { ", …" } else { "" };
    let place = format!("{}{more}", names.join(", "));
    match t {
        Term::Function(n) => format!(
            "site:{n} names no function in {place} (the program and the libraries it loads at start; a function of a library loaded later with dlopen is named with the library's file name, site:OBJECT:FUNCTION (site:libfoo.so:{n}), or by its call, site:OBJECT+0xADDRESS, as profiles print it)"
        ),
        Term::ObjectFunction { object, name } => {
            if objects.iter().any(|o| file_named(o, object)) {
                format!("site:{object}:{name} names no function in {object}")
            } else {
                format!(
                    "site:{object}:{name}: no object named {object} in {place}, and {object} is no shared library's file name (libfoo.so…) that the program could load later"
                )
            }
        }
        Term::Line { file, line } => {
            // Where no line table names the file (the program built
            // without -g while the system's libraries have debug files),
            // the line cannot be judged at all.
            let with_file = objects
                .iter()
                .any(|o| super::elf_index::cached(o).is_some_and(|i| i.names_file(file)));
            if with_file {
                format!("site:{file}:{line} is no line with code in {place}")
            } else {
                format!(
                    "site:{file}:{line}: no line information in {place} (no line table names {file}: built without -g, or its debug file is not installed); name the function (site:FUNCTION) or the call (site:OBJECT+0xADDRESS)"
                )
            }
        }
        Term::Call { object, offset } => {
            format!("site:{object}+{offset:#x}: no object named {object} in {place}")
        }
        _ => format!("{t:?} is not a site term"),
    }
}

/// A parsed `--only-threads` set: thread ordinals, 0 the main thread, then the
/// threads in the order the program created them (`pthread_create`).
pub fn parse_thread_set(text: &str) -> Result<IdSet, String> {
    let t = text.trim();
    let set = if t == "main" {
        IdSet::single(0)
    } else {
        IdSet::parse_list(t).map_err(|e| {
            format!(
                "{e}; give thread numbers in creation order, 0 (or main) the main thread, e.g. 1-8"
            )
        })?
    };
    match set.last() {
        None => Err("names no thread; give thread numbers in creation order, 0 (or main) the main thread, e.g. 1-8".into()),
        Some(l) if l > MAX_THREAD_ORDINAL => Err(format!(
            "thread {l} is beyond the last one numalab can select ({MAX_THREAD_ORDINAL})"
        )),
        Some(_) => Ok(set),
    }
}

/// Limits a built profile to what was selected: the static objects and
/// stacks `regions` does not keep are left out (the library already left
/// out the allocations), the selection is recorded, and the diagnoses are
/// made again from what remains.
pub fn apply(
    m: &crate::machine::Machine,
    p: &mut super::Profile,
    regions: Option<(&str, &RegionFilter)>,
    threads: Option<&str>,
) {
    if regions.is_none() && threads.is_none() {
        return;
    }
    let mut sel = p.selection.take().unwrap_or_default();
    if let Some((text, f)) = regions {
        let before = p.regions.len();
        p.regions.retain(|r| f.keeps(r));
        sel.regions_left_out = (before - p.regions.len()) as u64;
        sel.regions = Some(text.to_string());
        if !p.regions.iter().any(|r| r.samples > 0) {
            p.warnings.push(format!(
                "--regions {} selected no sampled region: check the terms against an unfiltered profile's sites",
                crate::text::format::excerpt(text, 60)
            ));
        }
    }
    sel.threads = threads.map(str::to_string);
    p.selection = Some(sel);
    p.diagnoses = super::diagnose::diagnose(m, p);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--granularity`'s filters are judged on the built profile: kinds,
    /// a mapping's file by its last components, frames, any allocation's
    /// address range, the mean allocation size.
    #[test]
    fn a_built_region_is_judged_by_what_the_profile_says_of_it() {
        let mut file =
            crate::profile::located_region("file", "load db.c:9 (db)".into(), 8 << 20, 0x10_0000);
        file.object = Some("/srv/db/data.db".into());
        file.stack = vec!["load db.c:9 (db)".into(), "main db.c:30 (db)".into()];
        let mut heap = crate::profile::located_region(
            "heap",
            "fill prog.c:12 (prog)".into(),
            2 << 20,
            0x40_0000,
        );
        heap.allocations = 2;
        heap.stack = vec!["fill prog.c:12 (prog)".into()];
        let two = [(0x40_0000, 1 << 20), (0x90_0000, 1 << 20)];
        let judges = |f: &str, r: &RegionProfile, a: &[(u64, u64)]| {
            RegionFilter::parse(f).unwrap().judges(r, a)
        };
        assert!(judges("file:data.db", &file, &[]));
        assert!(judges("file:/srv/db/data.db", &file, &[]));
        assert!(!judges("file:b/data.db", &file, &[]));
        assert!(judges("mmap&site:main", &file, &[]));
        assert!(!judges("heap", &file, &[]));
        assert!(judges("site:prog.c:12", &heap, &two));
        assert!(!judges("site:prog.c:13", &heap, &two));
        // The second allocation's range, not the first's.
        assert!(judges("0x900000-0x900001", &heap, &two));
        assert!(!judges("0x800000-0x900000", &heap, &two));
        // Each allocation is 1 MiB.
        assert!(judges("heap&size<=1M", &heap, &two));
        assert!(!judges("heap&size>1M", &heap, &two));
    }

    #[test]
    fn terms_parse_to_what_they_say() {
        let f = RegionFilter::parse(
            "heap, site:init_arrays,site:prog.c:42,static:table,size>1M,size<=4K,0x1000-0x3000",
        )
        .unwrap();
        assert_eq!(
            f.terms,
            vec![
                Term::Heap,
                Term::Function("init_arrays".into()),
                Term::Line {
                    file: "prog.c".into(),
                    line: 42
                },
                Term::Static(Some("table".into())),
                Term::Size {
                    min: (1 << 20) + 1,
                    max: u64::MAX
                },
                Term::Size { min: 0, max: 4096 },
                Term::Address {
                    start: 0x1000,
                    end: 0x3000
                },
            ]
        );
        assert!(f.has_sites());
        assert_eq!(
            RegionFilter::parse("site:ns::make").unwrap().terms,
            vec![Term::Function("ns::make".into())]
        );
        assert!(!RegionFilter::parse("heap").unwrap().has_sites());
        // A site as a profile names it without debug information.
        let f = RegionFilter::parse("site:profile_truth+0x17b6").unwrap();
        assert_eq!(
            f.terms,
            vec![Term::Call {
                object: "profile_truth".into(),
                offset: 0x17b6
            }]
        );
        assert!(f.has_sites());
        let objects = [
            PathBuf::from("/bin/profile_truth"),
            PathBuf::from("/lib/libc.so.6"),
        ];
        assert_eq!(
            resolve_sites(&f, &objects).unwrap(),
            vec![CodeRange {
                object: "/bin/profile_truth".into(),
                start: 0x17b6,
                end: 0x17b7,
                term: 0,
                function: None
            }]
        );
        // An object not loaded at start (dlopen'ed later) is kept by its
        // file name, for the library to find in each stack.
        let later = RegionFilter::parse("site:libm.so.6+0x10,site:profile_truth+0x20").unwrap();
        let code = resolve_sites(&later, &objects).unwrap();
        assert_eq!(
            code,
            vec![
                CodeRange {
                    object: "libm.so.6".into(),
                    start: 0x10,
                    end: 0x11,
                    term: 0,
                    function: None
                },
                CodeRange {
                    object: "/bin/profile_truth".into(),
                    start: 0x20,
                    end: 0x21,
                    term: 1,
                    function: None
                }
            ]
        );
        let form = later.library_form(&code);
        assert!(form.contains("code 16 17 libm.so.6\n"), "{form}");
        assert_eq!(later_objects(&form), ["libm.so.6"]);
        assert!(RegionFilter::parse("site:/bin/x+0x10")
            .unwrap_err()
            .contains("is not site:OBJECT+0xOFFSET"));
    }

    #[test]
    fn a_function_named_with_its_object_waits_for_the_object_and_matches_mangled_names() {
        let f = RegionFilter::parse("site:libnames.so:lib_alloc,site:ns::Alloc::Make(int),site:libx.so.1:a::b,site:libz.so:12").unwrap();
        assert_eq!(
            f.terms[0],
            Term::ObjectFunction {
                object: "libnames.so".into(),
                name: "lib_alloc".into()
            }
        );
        // C++'s `::` is no object; a number after the object is a line.
        assert_eq!(f.terms[1], Term::Function("ns::Alloc::Make(int)".into()));
        assert_eq!(
            f.terms[3],
            Term::Line {
                file: "libz.so".into(),
                line: 12
            }
        );
        assert_eq!(
            symbol_patterns("lib_alloc"),
            ["=lib_alloc", "^_Z9lib_alloc"]
        );
        assert_eq!(
            symbol_patterns("ns::Alloc::Make(int)"),
            [
                "=ns::Alloc::Make(int)",
                "^_ZN2ns5Alloc4MakeE",
                "^_ZN2ns5Alloc4Make17h"
            ]
        );
        assert_eq!(symbol_patterns("f<int>"), ["=f<int>"]);
        // An executable's name has no `.so`: `python3.11:PyList_New`, as a
        // profile prints the frame `PyList_New (python3.11+0x4fb079)`.
        assert_eq!(
            RegionFilter::parse("site:python3.11:PyList_New")
                .unwrap()
                .terms[0],
            Term::ObjectFunction {
                object: "python3.11".into(),
                name: "PyList_New".into()
            }
        );
        assert_eq!(
            RegionFilter::parse("site:ns::f(std::string const&)")
                .unwrap()
                .terms[0],
            Term::Function("ns::f(std::string const&)".into())
        );
        // Not loaded at start and no shared object: refused, saying why.
        let e = resolve_sites(
            &RegionFilter::parse("site:prog.c:main").unwrap(),
            &[PathBuf::from("/bin/profile_truth")],
        )
        .unwrap_err();
        assert!(e.contains("no object named prog.c in /bin/profile_truth, and prog.c is no shared library's file name"), "{e}");
        // Not loaded at start: kept for the library, by the object's name.
        let objects = [PathBuf::from("/bin/profile_truth")];
        let only = RegionFilter::parse("site:libnames.so:lib_alloc").unwrap();
        let code = resolve_sites(&only, &objects).unwrap();
        assert_eq!(code[0].function.as_deref(), Some("lib_alloc"));
        let form = only.library_form(&code);
        assert_eq!(
            form,
            "function libnames.so =lib_alloc\nfunction libnames.so ^_Z9lib_alloc\n"
        );
        assert_eq!(later_objects(&form), ["libnames.so"]);
        // Joined to another term, its patterns are choices of one part.
        let joined = RegionFilter::parse("heap&site:libnames.so:lib_alloc").unwrap();
        let code = resolve_sites(&joined, &objects).unwrap();
        assert_eq!(
            joined.library_form(&code),
            "heap\n& function libnames.so =lib_alloc\n| function libnames.so ^_Z9lib_alloc\n"
        );
    }

    #[test]
    fn bad_terms_name_themselves_and_the_valid_ones() {
        for (t, want) in [
            ("heap,,mmap", "an empty term"),
            ("hep", "'hep' is not a region term"),
            ("size=3", "'size=3' is not size>N or size<N"),
            ("size<0", "'size<0' selects nothing"),
            ("site:", "names no function or line"),
            ("site:prog.c:0", "'site:prog.c:0' is not site:FILE:LINE"),
            ("0x3000-0x1000", "empty address range"),
            ("static:", "names no symbol"),
        ] {
            let e = RegionFilter::parse(t).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
            assert!(e.contains("terms: heap, mmap"), "{t}: {e}");
        }
        let many = vec!["heap"; MAX_TERMS + 1].join(",");
        assert!(RegionFilter::parse(&many).unwrap_err().contains("too many"));
    }

    #[test]
    fn the_library_form_lists_what_the_library_judges() {
        let f = RegionFilter::parse("mmap,size>=2M,stack,site:f").unwrap();
        let code = [CodeRange {
            object: "/bin/prog".into(),
            start: 0x1100,
            end: 0x1180,
            term: 3,
            function: None,
        }];
        assert_eq!(
            f.library_form(&code),
            "mmap\nsize 2097152 18446744073709551615\ncode 4352 4480 /bin/prog\n"
        );
        // Only terms the library cannot judge: it tracks nothing.
        assert_eq!(
            RegionFilter::parse("stack").unwrap().library_form(&[]),
            "none\n"
        );
    }

    #[test]
    fn terms_joined_by_and_are_all_required() {
        let f = RegionFilter::parse("heap & size>100M, site:f&site:g(int&),file:x").unwrap();
        assert_eq!(f.groups, [0, 0, 1, 1, 2]);
        assert_eq!(f.terms[3], Term::Function("g(int&)".into()));
        assert!(f.has_conjunctions());
        assert!(!RegionFilter::parse("heap,size>1M")
            .unwrap()
            .has_conjunctions());
        // `&` of a C++ operator's name is the name's; a comma after a size
        // joined to a site still splits.
        let f = RegionFilter::parse("site:A::operator&&mmap").unwrap();
        assert_eq!(f.terms, [Term::Function("A::operator&&mmap".into())]);
        let f = RegionFilter::parse("site:f&size<1M,heap").unwrap();
        assert_eq!(f.groups, [0, 0, 1]);
        assert_eq!(f.terms[2], Term::Heap);
        assert!(RegionFilter::parse("heap&")
            .unwrap_err()
            .starts_with("an empty term"));
        // The library's lines: each alternative's first line alone, its
        // other terms after `& `, a site's further code after `| `.
        let f = RegionFilter::parse("heap&size>1M&site:f,mmap,site:h").unwrap();
        let range = |start: u64, term: usize| CodeRange {
            object: "/bin/prog".into(),
            start,
            end: start + 16,
            term,
            function: None,
        };
        let code = [
            range(0x100, 2),
            range(0x200, 2),
            range(0x300, 4),
            range(0x400, 4),
        ];
        assert_eq!(
            f.library_form(&code),
            "heap\n& size 1048577 18446744073709551615\n& code 256 272 /bin/prog\n| code 512 528 /bin/prog\nmmap\ncode 768 784 /bin/prog\ncode 1024 1040 /bin/prog\n"
        );
        assert_eq!(
            later_objects("& code 1 2 libm.so.6\n| code 3 4 libz.so.1\n"),
            ["libm.so.6", "libz.so.1"]
        );
        // An alternative that needs a static object or a stack selects no
        // allocation: left out of the library's lines.
        assert_eq!(
            RegionFilter::parse("stack&size>1M,mmap")
                .unwrap()
                .library_form(&[]),
            "mmap\n"
        );
        // Statics and stacks: every term of an alternative judged.
        let table = super::super::located_region("static", "table".into(), 4 << 20, 0x100000);
        let small = super::super::located_region("static", "table".into(), 4096, 0x100000);
        let f = RegionFilter::parse("static:table&size>1M").unwrap();
        assert!(f.keeps(&table) && !f.keeps(&small));
        assert!(!RegionFilter::parse("heap&static").unwrap().keeps(&table));
    }

    #[test]
    fn statics_and_stacks_are_kept_by_their_terms_only() {
        let region = |kind: &str, site: &str, at: u64, bytes: u64| {
            super::super::located_region(kind, site.into(), bytes, at)
        };
        let table = region("static", "table", 0x100000, 4 << 20);
        let stack = region("stack", "thread 7", 0x9000, 8 << 20);
        let heap = region("heap", "main prog.c:3", 0x1000, 100);
        let f = RegionFilter::parse("static:table").unwrap();
        assert!(f.keeps(&table) && !f.keeps(&stack) && f.keeps(&heap));
        let f = RegionFilter::parse("size<1M").unwrap();
        assert!(!f.keeps(&table) && !f.keeps(&stack));
        let f = RegionFilter::parse("0x9100-0x9200").unwrap();
        assert!(!f.keeps(&table) && f.keeps(&stack));
        assert!(RegionFilter::parse("stack").unwrap().keeps(&stack));
    }

    #[test]
    fn names_match_mangled_demangled_and_by_last_segments() {
        assert!(names_match("main", "main"));
        assert!(names_match("_ZN2ns4makeE", "ns::make"));
        assert!(names_match("_ZN4prog4init17h0123456789abcdefE", "init"));
        assert!(names_match(
            "_ZN4prog4init17h0123456789abcdefE",
            "prog::init"
        ));
        assert!(!names_match("_ZN4prog6reinit17h0123456789abcdefE", "init"));
        assert!(!names_match("main_loop", "main"));
        let table = super::super::located_region("static", "prog::TABLE".into(), 4096, 0x1000);
        assert!(RegionFilter::parse("static:TABLE").unwrap().keeps(&table));
        assert!(!RegionFilter::parse("static:ABLE").unwrap().keeps(&table));
    }

    #[test]
    fn commas_inside_a_names_brackets_do_not_split_terms() {
        let f = RegionFilter::parse(
            "site:ns::Alloc::Make(unsigned long, int), heap,site:std::map<int, long>::at(int const&),size>1M",
        )
        .unwrap();
        assert_eq!(
            f.terms,
            vec![
                Term::Function("ns::Alloc::Make(unsigned long, int)".into()),
                Term::Heap,
                Term::Function("std::map<int, long>::at(int const&)".into()),
                Term::Size {
                    min: (1 << 20) + 1,
                    max: u64::MAX
                },
            ]
        );
        // Operators' own brackets do not nest.
        for (text, first) in [
            ("site:ns::operator<(A, B),mmap", "ns::operator<(A, B)"),
            (
                "site:operator<<(std::ostream&, int),mmap",
                "operator<<(std::ostream&, int)",
            ),
            (
                "site:A::operator()(int, int),mmap",
                "A::operator()(int, int)",
            ),
            ("site:A::operator->(),mmap", "A::operator->()"),
            ("site:A::operator>=(A, A),mmap", "A::operator>=(A, A)"),
        ] {
            let f = RegionFilter::parse(text).unwrap();
            assert_eq!(
                f.terms,
                vec![Term::Function(first.into()), Term::Mmap],
                "{text}"
            );
        }
        // Elsewhere a comma always splits (size<N is no bracket).
        assert_eq!(
            RegionFilter::parse("size<1M,heap").unwrap().terms,
            vec![
                Term::Size {
                    min: 0,
                    max: (1 << 20) - 1
                },
                Term::Heap
            ]
        );
        assert_eq!(
            split_terms("static:f<é,x>,heap", ','),
            ["static:f<é,x>", "heap"]
        );
    }

    // An exported name for the symbol lookups to find (no_mangle counts
    // as unsafe code: the name could clash with another library's).
    #[allow(unsafe_code)]
    #[inline(never)]
    #[no_mangle]
    extern "C" fn filter_probe_for_terms() -> u64 {
        std::hint::black_box(11)
    }

    #[test]
    fn site_terms_resolve_in_an_object_given_explicitly() {
        // Its address taken: kept by the linker.
        assert!(!std::hint::black_box(filter_probe_for_terms as *const ()).is_null());
        let exe = std::env::current_exe().unwrap();
        let f = RegionFilter::parse("site:filter_probe_for_terms").unwrap();
        let found = resolve_term_in(&f.terms[0], &exe);
        assert_eq!(found.len(), 1, "{found:?}");
        let index = super::super::elf_index::ElfIndex::open(&exe).unwrap();
        let sym = index
            .functions()
            .iter()
            .find(|s| s.name == "filter_probe_for_terms")
            .unwrap();
        assert_eq!(
            (found[0].start, found[0].end, &found[0].object),
            (sym.start, sym.end(), &exe)
        );
        // Its source line, from this binary's DWARF, holds the same code.
        let (file, line) = index.location(sym.start).unwrap();
        assert!(file.ends_with("profile/filter.rs"), "{file}");
        let term = Term::Line {
            file: "profile/filter.rs".into(),
            line,
        };
        let lines = resolve_term_in(&term, &exe);
        assert!(
            lines.iter().any(|c| (c.start..c.end).contains(&sym.start)),
            "{:#x} in {lines:?}",
            sym.start
        );
        // A call in it by the object's file name; another object's not.
        let name = exe.file_name().unwrap().to_string_lossy().into_owned();
        let call = Term::Call {
            object: name,
            offset: sym.start + 4,
        };
        assert_eq!(resolve_term_in(&call, &exe)[0].start, sym.start + 4);
        assert!(resolve_term_in(&call, Path::new("/lib/other.so")).is_empty());
        // Nothing there: empty, and the whole filter's error says so.
        let none = RegionFilter::parse("site:no_such_function_here").unwrap();
        assert!(resolve_term_in(&none.terms[0], &exe).is_empty());
        let e = resolve_sites(&none, std::slice::from_ref(&exe)).unwrap_err();
        assert!(
            e.starts_with("site:no_such_function_here names no function in /"),
            "{e}"
        );
        let bad_line = RegionFilter::parse("site:filter.rs:999999").unwrap();
        assert!(resolve_sites(&bad_line, std::slice::from_ref(&exe))
            .unwrap_err()
            .starts_with("site:filter.rs:999999 is no line with code in /"));
        // An object without line tables says why a line cannot be found.
        let text = std::env::temp_dir().join(format!("numalab-no-lines-{}", std::process::id()));
        std::fs::write(&text, "not ELF").unwrap();
        let e = resolve_sites(&bad_line, std::slice::from_ref(&text)).unwrap_err();
        assert!(e.contains("no line information in"), "{e}");
        std::fs::remove_file(&text).unwrap();
    }

    #[test]
    fn thread_sets_are_ordinals_with_bounds() {
        assert_eq!(parse_thread_set("main").unwrap(), IdSet::single(0));
        assert_eq!(
            parse_thread_set("1-3,8")
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            vec![1, 2, 3, 8]
        );
        assert!(parse_thread_set("2000")
            .unwrap_err()
            .contains("beyond the last one"));
        assert!(parse_thread_set("x")
            .unwrap_err()
            .contains("creation order"));
    }

    #[test]
    fn file_terms_name_a_mapped_file_and_go_to_the_library_whole() {
        let f = RegionFilter::parse("file:/srv/my db/data.db,mmap").unwrap();
        assert_eq!(f.terms[0], Term::File("/srv/my db/data.db".into()));
        assert_eq!(f.library_form(&[]), "file /srv/my db/data.db\nmmap\n");
        let e = RegionFilter::parse("file:").unwrap_err();
        assert!(
            e.starts_with("'file:' names no file; terms: heap, mmap, file:PATH"),
            "{e}"
        );
    }
}
