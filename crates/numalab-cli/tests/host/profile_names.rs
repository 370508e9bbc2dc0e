//! `numalab profile`'s names for allocation sites, read in process from
//! the programs' ELF files and DWARF: C++ demangled with parameters, C
//! with and without debug information and with it in a separate file, a
//! stripped shared library's code honestly without a symbol; and every
//! name printed selects its region again as a `--regions` term. numalab
//! runs with a PATH whose only tools are traps named after binutils (and
//! `ldd`), which would leave a mark if numalab ran one.
//!
//! The programs are tests/programs/names_*.{c,cpp}; the test builds them
//! with gcc and g++ and splits and strips them with binutils, which the
//! machine running the tests has (numalab's users may not).

use crate::common;

use common::{parse_json, preload_library, repo_root, scratch, Run};
use numalab::profile::elf_index::ElfIndex;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const MIB: u64 = 1 << 20;

/// The test programs, built once per test binary.
struct Programs {
    dir: PathBuf,
    /// A PATH holding only trap tools.
    trap_path: PathBuf,
    cpp: PathBuf,
    /// names_c.c with -g, without, its DWARF in a file named by
    /// `.gnu_debuglink`, and in one named by build ID only.
    c_debug: PathBuf,
    c_plain: PathBuf,
    c_linked: PathBuf,
    c_build_id: PathBuf,
    /// The folder holding `.build-id/` for `c_build_id`.
    debug_root: PathBuf,
    /// names_dlopen.c, and the stripped library it loads with dlopen.
    dlopen: PathBuf,
    lib: PathBuf,
}

fn run_ok(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e} (gcc, g++ and binutils build the test programs)"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn programs() -> &'static Programs {
    static P: OnceLock<Programs> = OnceLock::new();
    P.get_or_init(|| {
        preload_library();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("names-programs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let lib_dir = dir.join("lib");
        std::fs::create_dir_all(&lib_dir).unwrap();
        let src = |f: &str| {
            repo_root()
                .join("crates/numalab-cli/tests/programs")
                .join(f)
        };
        let cpp = dir.join("names_cpp");
        run_ok(
            Command::new("g++")
                .args(["-O1", "-g", "-o"])
                .arg(&cpp)
                .arg(src("names_cpp.cpp")),
        );
        // The library: its exports only (strip --strip-all keeps .dynsym).
        let lib = lib_dir.join("libnames.so");
        run_ok(
            Command::new("gcc")
                .args(["-O1", "-fPIC", "-shared", "-fno-toplevel-reorder", "-o"])
                .arg(&lib)
                .arg(src("names_lib.c")),
        );
        run_ok(Command::new("strip").arg("--strip-all").arg(&lib));
        let dlopen = dir.join("names_dlopen");
        run_ok(
            Command::new("gcc")
                .args(["-O1", "-g", "-o"])
                .arg(&dlopen)
                .arg(src("names_dlopen.c"))
                .arg("-ldl"),
        );
        let c = |name: &str, debug: bool| -> PathBuf {
            let out = dir.join(name);
            let mut cmd = Command::new("gcc");
            cmd.arg("-O1");
            if debug {
                cmd.arg("-g");
            }
            cmd.arg("-o")
                .arg(&out)
                .arg(src("names_c.c"))
                .arg(format!("-L{}", lib_dir.display()))
                .arg("-lnames")
                .arg(format!("-Wl,-rpath,{}", lib_dir.display()));
            run_ok(&mut cmd);
            out
        };
        let c_debug = c("names_c_g", true);
        let c_plain = c("names_c", false);
        // DWARF moved to a file the program links to by name and CRC.
        let c_linked = c("names_c_linked", true);
        run_ok(Command::new("objcopy").current_dir(&dir).args([
            "--only-keep-debug",
            "names_c_linked",
            "names_c_linked.debug",
        ]));
        run_ok(Command::new("strip").arg("--strip-debug").arg(&c_linked));
        run_ok(
            Command::new("objcopy")
                .current_dir(&dir)
                .args(["--add-gnu-debuglink=names_c_linked.debug", "names_c_linked"]),
        );
        // DWARF moved under a debug root by build ID, no link.
        let c_build_id = c("names_c_bid", true);
        let id_out = Command::new("readelf")
            .arg("-n")
            .arg(&c_build_id)
            .output()
            .unwrap();
        let id = String::from_utf8_lossy(&id_out.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
            .expect("gcc links a build ID (Debian's default)");
        let debug_root = dir.join("debug");
        let by_id = debug_root.join(".build-id").join(&id[..2]);
        std::fs::create_dir_all(&by_id).unwrap();
        run_ok(
            Command::new("objcopy")
                .arg("--only-keep-debug")
                .arg(&c_build_id)
                .arg(by_id.join(format!("{}.debug", &id[2..]))),
        );
        run_ok(Command::new("strip").arg("--strip-debug").arg(&c_build_id));
        // Traps: binutils' symbolizers, ldd and friends leave a mark and fail.
        let trap_path = dir.join("bin");
        std::fs::create_dir_all(&trap_path).unwrap();
        for tool in [
            "addr2line",
            "objdump",
            "nm",
            "readelf",
            "c++filt",
            "ldd",
            "eu-addr2line",
            "llvm-symbolizer",
        ] {
            let t = trap_path.join(tool);
            std::fs::write(
                &t,
                format!("#!/bin/sh\ntouch '{}/ran-{tool}'\nexit 1\n", dir.display()),
            )
            .unwrap();
            run_ok(Command::new("chmod").arg("755").arg(&t));
        }
        Programs {
            dir,
            trap_path,
            cpp,
            c_debug,
            c_plain,
            c_linked,
            c_build_id,
            debug_root,
            dlopen,
            lib,
        }
    })
}

/// The line of `src` (under tests/programs) that carries `marker`.
fn line_of(src: &str, marker: &str) -> u32 {
    let text = std::fs::read_to_string(
        repo_root()
            .join("crates/numalab-cli/tests/programs")
            .join(src),
    )
    .unwrap();
    let i = text
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no {marker} in {src}"));
    i as u32 + 1
}

/// `numalab profile` of `prog` with `extra` options, binutils trapped;
/// the profile it wrote.
fn profile(prog: &Path, extra: &[&str], what: &str) -> Value {
    profile_with(prog, &[], extra, what)
}

/// [`profile`] of `prog` given `prog_args`.
fn profile_with(prog: &Path, prog_args: &[&str], extra: &[&str], what: &str) -> Value {
    let p = programs();
    let out = scratch(what);
    let dir = out.join("p");
    let mut args = vec!["profile", "--json", "-o", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", prog.to_str().unwrap()]);
    args.extend_from_slice(prog_args);
    let r = Run::new(&args)
        .env("PATH", p.trap_path.to_str().unwrap())
        .run();
    assert_eq!(r.rc, 0, "numalab {args:?}: {}", r.err);
    let ran: Vec<String> = std::fs::read_dir(&p.dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-"))
        .collect();
    assert!(ran.is_empty(), "numalab ran an external tool: {ran:?}");
    common::written_profile(&r, &dir).1
}

/// The refused `numalab profile` of `prog` with `extra`: its stderr.
fn refused(prog: &Path, extra: &[&str], what: &str) -> String {
    let p = programs();
    let dir = scratch(what).join("p");
    let mut args = vec!["profile", "-o", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", prog.to_str().unwrap()]);
    let r = Run::new(&args)
        .env("PATH", p.trap_path.to_str().unwrap())
        .run();
    assert_eq!(r.rc, 2, "numalab {args:?} should be refused: {}", r.err);
    r.err
}

/// The heap regions of a profile by size.
fn heap(v: &Value) -> Vec<&Value> {
    v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "heap")
        .collect()
}

fn region_of(v: &Value, bytes: u64) -> &Value {
    heap(v)
        .into_iter()
        .find(|r| r["bytes"] == bytes)
        .unwrap_or_else(|| panic!("no heap region of {bytes} bytes: {v}"))
}

fn site(r: &Value) -> &str {
    r["site"].as_str().unwrap()
}

/// The sizes of the heap regions `--regions FILTER` keeps.
fn selected(prog: &Path, filter: &str, what: &str) -> BTreeSet<u64> {
    let v = profile(prog, &["--regions", filter], what);
    heap(&v)
        .iter()
        .map(|r| r["bytes"].as_u64().unwrap())
        .collect()
}

fn no_profiler_frames(v: &Value) {
    for r in v["regions"].as_array().unwrap() {
        for f in r["stack"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert!(!f.contains("libnumalab_preload"), "{f} in {}", r["stack"]);
        }
    }
}

#[test]
fn cpp_sites_are_demangled_and_select_their_regions_with_or_without_parameters() {
    let p = programs();
    let v = profile(&p.cpp, &[], "names-cpp");
    no_profiler_frames(&v);
    let line = |m: &str| line_of("names_cpp.cpp", m);
    let make1 = region_of(&v, 8 * MIB);
    assert_eq!(
        site(make1),
        format!(
            "ns::Alloc::Make(unsigned long) names_cpp.cpp:{} (names_cpp)",
            line("site:make1")
        )
    );
    assert_eq!(
        site(region_of(&v, 4 * MIB)),
        format!(
            "ns::Alloc::Make(unsigned long, int) names_cpp.cpp:{} (names_cpp)",
            line("site:make2")
        )
    );
    // Through operator new[] (which calls operator new): in the stack,
    // not the site.
    let other = region_of(&v, 2 * MIB);
    assert_eq!(
        site(other),
        format!(
            "other::Make(unsigned long) names_cpp.cpp:{} (names_cpp)",
            line("site:other")
        )
    );
    let first = other["stack"][0].as_str().unwrap();
    assert!(
        first.starts_with("operator new(unsigned long) (libstdc++.so"),
        "{}",
        other["stack"]
    );
    // The caller's frame after the site: main, by its line.
    assert!(
        make1["stack"][1]
            .as_str()
            .unwrap()
            .starts_with("main names_cpp.cpp:"),
        "{}",
        make1["stack"]
    );
    let set = |v: &[u64]| v.iter().map(|m| m * MIB).collect::<BTreeSet<u64>>();
    for (filter, want) in [
        ("site:ns::Alloc::Make", set(&[8, 4])),
        ("site:Alloc::Make", set(&[8, 4])),
        ("site:ns::Alloc::Make(unsigned long)", set(&[8])),
        ("site:ns::Alloc::Make(unsigned long, int)", set(&[4])),
        ("site:other::Make(unsigned long)", set(&[2])),
        (
            &format!("site:names_cpp.cpp:{}", line("site:make2")),
            set(&[4]),
        ),
    ] {
        assert_eq!(
            selected(&p.cpp, filter, "names-cpp-filter"),
            want,
            "--regions {filter}"
        );
    }
    let e = refused(
        &p.cpp,
        &["--regions", "site:ns::Alloc::Make(int)"],
        "names-cpp-bad",
    );
    assert!(
        e.contains("site:ns::Alloc::Make(int) names no function in "),
        "{e}"
    );
}

#[test]
fn c_sites_by_line_by_function_and_honestly_without_a_symbol_in_a_stripped_library() {
    let p = programs();
    let table_line = line_of("names_c.c", "site:table");
    let v = profile(&p.c_debug, &[], "names-c-debug");
    no_profiler_frames(&v);
    assert_eq!(
        site(region_of(&v, 6 * MIB)),
        format!("make_table names_c.c:{table_line} (names_c_g)")
    );
    // The library keeps only its exports: the allocation's code, in a
    // static function right after the 6-byte lib_tiny, has no symbol.
    let lib = region_of(&v, 3 * MIB);
    let lib_site = site(lib);
    let address = lib_site
        .strip_prefix("in libnames.so, no symbol (libnames.so+0x")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{lib_site}"));
    assert!(u64::from_str_radix(address, 16).is_ok(), "{lib_site}");
    let stack: Vec<&str> = lib["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(stack.iter().all(|f| !f.contains("lib_tiny")), "{stack:?}");
    assert!(
        stack[1].starts_with("lib_alloc (libnames.so+0x"),
        "the exported caller holds its call: {stack:?}"
    );
    assert!(stack[2].starts_with("main names_c.c:"), "{stack:?}");
    let only = |n: u64| BTreeSet::from([n * MIB]);
    assert_eq!(
        selected(
            &p.c_debug,
            &format!("site:libnames.so+0x{address}"),
            "names-c-lib"
        ),
        only(3)
    );
    assert_eq!(
        selected(&p.c_debug, "site:lib_alloc", "names-c-export"),
        only(3)
    );
    assert_eq!(
        selected(&p.c_debug, "site:make_table", "names-c-fn"),
        only(6)
    );
    assert_eq!(
        selected(
            &p.c_debug,
            &format!("site:names_c.c:{table_line}"),
            "names-c-line"
        ),
        only(6)
    );

    // Without -g: the function and the call's address, which selects it.
    let v = profile(&p.c_plain, &[], "names-c-plain");
    let plain_site = site(region_of(&v, 6 * MIB));
    let call = plain_site
        .strip_prefix("make_table (")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{plain_site}"));
    assert!(call.starts_with("names_c+0x"), "{plain_site}");
    assert_eq!(
        selected(&p.c_plain, &format!("site:{call}"), "names-c-call"),
        only(6)
    );
    let e = refused(
        &p.c_plain,
        &["--regions", &format!("site:names_c.c:{table_line}")],
        "names-c-noline",
    );
    assert!(
        e.contains(&format!(
            "site:names_c.c:{table_line}: no line information in "
        )),
        "{e}"
    );

    // DWARF in a separate file the program links to: lines again.
    let v = profile(&p.c_linked, &[], "names-c-linked");
    assert_eq!(
        site(region_of(&v, 6 * MIB)),
        format!("make_table names_c.c:{table_line} (names_c_linked)")
    );
    assert_eq!(
        selected(
            &p.c_linked,
            &format!("site:names_c.c:{table_line}"),
            "names-c-linked-line"
        ),
        only(6)
    );
}

#[test]
fn a_debug_file_is_found_by_build_id_under_a_debug_root() {
    let p = programs();
    let table_line = line_of("names_c.c", "site:table");
    let alone = ElfIndex::open_with(&p.c_build_id, &[]).unwrap();
    let table = alone
        .functions()
        .iter()
        .find(|s| s.name == "make_table")
        .expect("make_table in .symtab")
        .clone();
    assert!(!alone.has_lines());
    assert_eq!(alone.location(table.start), None);
    let index = ElfIndex::open_with(&p.c_build_id, std::slice::from_ref(&p.debug_root)).unwrap();
    let debug = index.debug_file().expect("the debug file by build ID");
    assert!(
        debug.starts_with(p.debug_root.join(".build-id")),
        "{debug:?}"
    );
    let ranges = index.line_ranges("names_c.c", table_line);
    assert!(!ranges.is_empty());
    assert!(
        ranges.iter().all(|r| table.contains(r.0)),
        "{ranges:x?} outside make_table {:#x}+{:#x}",
        table.start,
        table.size
    );
    let (file, line) = index.location(ranges[0].0).unwrap();
    assert!(file.ends_with("names_c.c"), "{file}");
    assert_eq!(line, table_line);
    // A file with another build ID under that name is not taken.
    let other = ElfIndex::open_with(&p.c_plain, std::slice::from_ref(&p.debug_root)).unwrap();
    assert_eq!(other.debug_file(), None);
}

#[test]
fn sites_in_a_library_loaded_with_dlopen_are_named_selected_and_placed() {
    let p = programs();
    let lib = p.lib.to_str().unwrap();
    let v = profile_with(&p.dlopen, &[lib], &[], "names-dlopen");
    no_profiler_frames(&v);
    let r = region_of(&v, 3 * MIB);
    let at = site(r)
        .strip_prefix("in libnames.so, no symbol (libnames.so+0x")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{}", site(r)));
    let term = format!("site:libnames.so+0x{at}");
    let stack = &r["stack"];
    assert!(
        stack[1]
            .as_str()
            .unwrap()
            .starts_with("lib_alloc (libnames.so+0x"),
        "{stack}"
    );
    assert!(
        stack[2]
            .as_str()
            .unwrap()
            .starts_with("main names_dlopen.c:"),
        "{stack}"
    );
    // The library selects by the call's address once the object is
    // loaded; the program's own 5 MiB stay out.
    let sizes = |v: &Value| -> BTreeSet<u64> {
        heap(v)
            .iter()
            .map(|r| r["bytes"].as_u64().unwrap())
            .collect()
    };
    let v = profile_with(
        &p.dlopen,
        &[lib],
        &["--regions", &term],
        "names-dlopen-term",
    );
    assert_eq!(sizes(&v), BTreeSet::from([3 * MIB]), "--regions {term}");
    // Another address of that object selects nothing.
    let other = format!(
        "site:libnames.so+0x{:x}",
        u64::from_str_radix(at, 16).unwrap() + 1
    );
    let v = profile_with(
        &p.dlopen,
        &[lib],
        &["--regions", &other],
        "names-dlopen-other",
    );
    assert_eq!(sizes(&v), BTreeSet::new(), "--regions {other}");

    // A plan naming that site is accepted by `run --plan`, said to wait for
    // the object, and places the region.
    let dir = scratch("names-dlopen-plan");
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        serde_json::json!({"schema": "numalab-plan/1", "entries": [
            {"region": term, "policy": "bind:0"},
        ]})
        .to_string(),
    )
    .unwrap();
    let verify = dir.join("verify.json");
    let args = [
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--verify",
        "--verify-json",
        verify.to_str().unwrap(),
        "--",
        p.dlopen.to_str().unwrap(),
        lib,
    ];
    let r = Run::new(&args)
        .env("PATH", p.trap_path.to_str().unwrap())
        .run();
    assert_eq!(r.rc, 0, "{}", r.err);
    assert_eq!(r.out, "sum 4608\n");
    assert!(
        r.err.contains(
            "numalab: --plan: libnames.so not among the libraries the program loads at start; its sites apply if the program loads it later (dlopen)"
        ),
        "{}",
        r.err
    );
    let v = parse_json(&std::fs::read_to_string(&verify).unwrap(), "verify.json");
    let e = &v["plan"]["entries"][0];
    assert_eq!(e["verdict"], "placed", "{e}");
    assert_eq!(
        (e["regions"].clone(), e["pages_by_node"]["0"].clone()),
        (1.into(), 768.into()),
        "{e}"
    );

    // A function there cannot be looked up before the program runs: alone,
    // its name is refused (a typo would select nothing), and the refusal
    // says how to name it: with its object.
    let e = refused(
        &p.dlopen,
        &["--regions", "site:lib_alloc"],
        "names-dlopen-fn",
    );
    assert!(
        e.contains("site:lib_alloc names no function in ")
            && e.contains("site:OBJECT:FUNCTION (site:libfoo.so:lib_alloc)")
            && e.contains("or by its call, site:OBJECT+0xADDRESS"),
        "{e}"
    );
    // With its object, the function the stack names (`lib_alloc`, an
    // export of the stripped library) selects the 3 MiB as the library
    // loads: found in its dynamic symbols at run time.
    let v = profile_with(
        &p.dlopen,
        &[lib],
        &["--regions", "site:libnames.so:lib_alloc"],
        "names-dlopen-objfn",
    );
    assert_eq!(
        sizes(&v),
        BTreeSet::from([3 * MIB]),
        "--regions site:libnames.so:lib_alloc"
    );
    // Another function of it, which no allocation passes through: none.
    let v = profile_with(
        &p.dlopen,
        &[lib],
        &["--regions", "site:libnames.so:lib_tiny"],
        "names-dlopen-objfn-other",
    );
    assert_eq!(
        sizes(&v),
        BTreeSet::new(),
        "--regions site:libnames.so:lib_tiny"
    );
    // An object loaded at start is named the same way, the executable
    // included (no `.so`): main is on both allocations' stacks.
    let v = profile_with(
        &p.dlopen,
        &[lib],
        &["--regions", "site:names_dlopen:main"],
        "names-dlopen-exe-fn",
    );
    assert_eq!(
        sizes(&v),
        BTreeSet::from([3 * MIB, 5 * MIB]),
        "--regions site:names_dlopen:main"
    );
    // And a plan naming it places the region.
    std::fs::write(
        &plan,
        serde_json::json!({"schema": "numalab-plan/1", "entries": [
            {"region": "site:libnames.so:lib_alloc", "policy": "bind:0"},
        ]})
        .to_string(),
    )
    .unwrap();
    let r = Run::new(&args)
        .env("PATH", p.trap_path.to_str().unwrap())
        .run();
    assert_eq!((r.rc, r.out.as_str()), (0, "sum 4608\n"), "{}", r.err);
    let v = parse_json(&std::fs::read_to_string(&verify).unwrap(), "verify.json");
    let e = &v["plan"]["entries"][0];
    assert_eq!(
        (e["verdict"].clone(), e["pages_by_node"]["0"].clone()),
        ("placed".into(), 768.into()),
        "{e}"
    );
}
