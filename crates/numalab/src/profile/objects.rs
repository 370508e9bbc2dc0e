//! The ELF objects a program has when it starts, found as the dynamic
//! loader finds them: the program, its interpreter, the `LD_PRELOAD`
//! libraries, then every `DT_NEEDED` library breadth first, each looked
//! up in `DT_RPATH`, `LD_LIBRARY_PATH`, `DT_RUNPATH` and the system
//! folders (`/etc/ld.so.conf` and the loader's defaults). Read in
//! process: `ldd` runs the program's loader (not a thing to do to a
//! program one has not vetted) and is missing where binutils and the
//! loader's scripts are (the test guests). Libraries loaded later with
//! `dlopen` are not among them.

use object::elf;
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::read::ReadRef;
use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Objects one program's list holds at most.
pub const MAX_OBJECTS: usize = 256;
/// Bytes of one `ld.so.conf` file read at most, and how deep includes go.
const MAX_CONF_BYTES: u64 = 1 << 16;
const MAX_CONF_DEPTH: u32 = 4;

/// Where the loader looks, beside each object's own paths.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoaderPaths {
    /// `LD_LIBRARY_PATH`'s folders.
    pub library_path: Vec<PathBuf>,
    /// `LD_PRELOAD`'s entries (names or paths).
    pub preload: Vec<String>,
    /// The system folders: `/etc/ld.so.conf`'s, then the defaults.
    pub system: Vec<PathBuf>,
}

impl LoaderPaths {
    /// Those of this process's environment and system, which a program it
    /// launches inherits.
    pub fn current() -> LoaderPaths {
        let split = |v: Option<std::ffi::OsString>, seps: &[char]| -> Vec<String> {
            v.map(|v| {
                v.to_string_lossy()
                    .split(|c| seps.contains(&c))
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
        };
        let mut system = Vec::new();
        read_conf(Path::new("/etc/ld.so.conf"), 0, &mut system);
        let triple = match std::env::consts::ARCH {
            "x86_64" => "x86_64-linux-gnu",
            "aarch64" => "aarch64-linux-gnu",
            "powerpc64" => "powerpc64le-linux-gnu",
            "riscv64" => "riscv64-linux-gnu",
            "s390x" => "s390x-linux-gnu",
            other => other,
        };
        for d in [
            format!("/lib/{triple}"),
            format!("/usr/lib/{triple}"),
            "/lib64".into(),
            "/usr/lib64".into(),
            "/lib".into(),
            "/usr/lib".into(),
        ] {
            let d = PathBuf::from(d);
            if !system.contains(&d) {
                system.push(d);
            }
        }
        LoaderPaths {
            library_path: split(std::env::var_os("LD_LIBRARY_PATH"), &[':', ';'])
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            preload: split(std::env::var_os("LD_PRELOAD"), &[':', ' ']),
            system,
        }
    }
}

/// The folders an `ld.so.conf` file lists, its includes followed.
fn read_conf(path: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    if depth > MAX_CONF_DEPTH {
        return;
    }
    let Ok(f) = std::fs::File::open(path) else {
        return;
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return;
    }
    let mut text = String::new();
    if f.take(MAX_CONF_BYTES).read_to_string(&mut text).is_err() {
        return;
    }
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            for p in pattern.split_whitespace() {
                let p = if p.starts_with('/') {
                    PathBuf::from(p)
                } else {
                    path.parent().unwrap_or(Path::new("/")).join(p)
                };
                for file in glob(&p) {
                    read_conf(&file, depth + 1, out);
                }
            }
        } else if line.starts_with('/') {
            let d = PathBuf::from(line);
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
}

/// The files a pattern whose last component may hold `*` names, sorted
/// (`/etc/ld.so.conf.d/*.conf`).
fn glob(pattern: &Path) -> Vec<PathBuf> {
    let name = pattern
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some((before, after)) = name.split_once('*') else {
        return vec![pattern.to_path_buf()];
    };
    let dir = pattern.parent().unwrap_or(Path::new("/"));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.len() >= before.len() + after.len() && n.starts_with(before) && n.ends_with(after)
        })
        .map(|n| dir.join(n))
        .collect();
    out.sort();
    out
}

/// What the loader reads from one object.
#[derive(Debug, Default)]
struct Dynamic {
    machine: u16,
    interp: Option<PathBuf>,
    needed: Vec<String>,
    rpath: Vec<String>,
    runpath: Vec<String>,
}

fn dynamic_of(path: &Path) -> Option<Dynamic> {
    super::elf_index::with_elf(path, |elf| {
        let endian = elf.endian();
        let data = elf.data();
        let mut d = Dynamic {
            machine: elf.elf_header().e_machine(endian).0,
            ..Dynamic::default()
        };
        for p in elf.elf_program_headers() {
            if p.p_type(endian) == elf::PT_INTERP {
                if let Ok(bytes) = data.read_bytes_at(p.p_offset(endian), p.p_filesz(endian)) {
                    let s = String::from_utf8_lossy(bytes.split(|b| *b == 0).next().unwrap_or(&[]))
                        .into_owned();
                    if s.starts_with('/') {
                        d.interp = Some(PathBuf::from(s));
                    }
                }
            }
        }
        let table = elf.elf_section_table();
        if let Ok(Some((entries, link))) = table.dynamic(endian, data) {
            if let Ok(strings) = table.strings(endian, data, link) {
                for e in entries {
                    let tag = e.d_tag(endian);
                    let Ok(value) = u32::try_from(e.d_val(endian)) else {
                        continue;
                    };
                    let text = || {
                        strings
                            .get(value)
                            .ok()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                    };
                    if tag == elf::DT_NEEDED {
                        d.needed.extend(text());
                    } else if tag == elf::DT_RPATH {
                        d.rpath.extend(text().map(split_paths).unwrap_or_default());
                    } else if tag == elf::DT_RUNPATH {
                        d.runpath
                            .extend(text().map(split_paths).unwrap_or_default());
                    }
                }
            }
        }
        d
    })
    .ok()
    .map(|(_, d)| d)
}

fn split_paths(s: String) -> Vec<String> {
    s.split(':')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// A `DT_RPATH`/`DT_RUNPATH` entry with `$ORIGIN` (the folder of the
/// object that names it) expanded; `None` for other substitutions
/// (`$LIB`, `$PLATFORM`), which depend on the loader's build.
fn expand(entry: &str, origin: &Path) -> Option<PathBuf> {
    let o = origin.to_string_lossy();
    let e = entry.replace("${ORIGIN}", &o).replace("$ORIGIN", &o);
    (!e.contains('$')).then(|| PathBuf::from(e))
}

/// Whether the file at `path` is a 64-bit ELF object for `machine`, as the
/// loader skips libraries of another architecture in a shared folder.
fn loadable(path: &Path, machine: u16) -> bool {
    let mut head = [0u8; 20];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    f.metadata().is_ok_and(|m| m.is_file())
        && f.read_exact(&mut head).is_ok()
        && head[..4] == *b"\x7fELF"
        && head[4] == 2
        && match head[5] {
            1 => u16::from_le_bytes([head[18], head[19]]) == machine,
            2 => u16::from_be_bytes([head[18], head[19]]) == machine,
            _ => false,
        }
}

/// Whether the loader never runs for the program at `exe`, so that
/// `LD_PRELOAD` (and with it numalab's preload library) is ignored: an
/// ELF file without an interpreter (statically linked, static-pie
/// included). False for what is not an ELF file (a script's interpreter
/// is what runs) or cannot be read.
pub fn statically_linked(exe: &Path) -> bool {
    dynamic_of(exe).is_some_and(|d| d.interp.is_none())
}

/// The objects the program at `exe` has when it starts (see the module's
/// documentation), canonical paths, the program first, at most
/// [`MAX_OBJECTS`]; a library that cannot be found is left out (the
/// loader would refuse to start the program, and says so itself).
pub fn loaded_at_start(exe: &Path, paths: &LoaderPaths) -> Vec<PathBuf> {
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let Some(exe) = canonical(exe) else {
        return Vec::new();
    };
    let mut out = vec![exe.clone()];
    let Some(top) = dynamic_of(&exe) else {
        return out;
    };
    let machine = top.machine;
    let exe_dir = exe.parent().unwrap_or(Path::new("/")).to_path_buf();
    let push = |p: PathBuf, out: &mut Vec<PathBuf>| -> bool {
        if out.contains(&p) || out.len() >= MAX_OBJECTS {
            return false;
        }
        out.push(p);
        true
    };
    if let Some(i) = top.interp.as_deref().and_then(canonical) {
        push(i, &mut out);
    }
    // Breadth first, as the loader orders its search list: (object, its
    // dynamic section).
    let mut queue: VecDeque<(PathBuf, Dynamic)> = VecDeque::new();
    for name in &paths.preload {
        if let Some(p) = find(name, None, &exe_dir, &top, paths, machine) {
            if push(p.clone(), &mut out) {
                if let Some(d) = dynamic_of(&p) {
                    queue.push_back((p, d));
                }
            }
        }
    }
    queue.push_front((exe.clone(), top));
    while let Some((object, d)) = queue.pop_front() {
        let origin = object.parent().unwrap_or(Path::new("/")).to_path_buf();
        for name in &d.needed {
            let Some(p) = find(name, Some((&origin, &d)), &exe_dir, &d, paths, machine) else {
                continue;
            };
            if push(p.clone(), &mut out) {
                if let Some(dd) = dynamic_of(&p) {
                    queue.push_back((p, dd));
                }
            }
            if out.len() >= MAX_OBJECTS {
                return out;
            }
        }
    }
    out
}

/// Where the loader finds the library `name` that `requester` (with its
/// folder) needs: a name with a slash as it is; else `DT_RPATH` (when the
/// requester has no `DT_RUNPATH`), `LD_LIBRARY_PATH`, `DT_RUNPATH`, the
/// system folders.
fn find(
    name: &str,
    requester: Option<(&Path, &Dynamic)>,
    exe_dir: &Path,
    exe: &Dynamic,
    paths: &LoaderPaths,
    machine: u16,
) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return loadable(&p, machine)
            .then(|| std::fs::canonicalize(&p).ok())
            .flatten();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some((origin, d)) = requester {
        if d.runpath.is_empty() {
            dirs.extend(d.rpath.iter().filter_map(|e| expand(e, origin)));
            // The program's DT_RPATH also serves the libraries it loads.
            if exe.runpath.is_empty() {
                dirs.extend(exe.rpath.iter().filter_map(|e| expand(e, exe_dir)));
            }
        }
    }
    dirs.extend(paths.library_path.iter().cloned());
    if let Some((origin, d)) = requester {
        dirs.extend(d.runpath.iter().filter_map(|e| expand(e, origin)));
    }
    dirs.extend(paths.system.iter().cloned());
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|c| loadable(c, machine))
        .and_then(|c| std::fs::canonicalize(c).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_has_its_loader_and_libc() {
        let exe = std::env::current_exe().unwrap();
        let objects = loaded_at_start(&exe, &LoaderPaths::current());
        assert_eq!(objects[0], std::fs::canonicalize(&exe).unwrap());
        let names: Vec<String> = objects
            .iter()
            .map(|o| o.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
        assert!(names.iter().any(|n| n.starts_with("ld-linux")), "{names:?}");
        assert!(objects.iter().all(|o| o.is_absolute() && o.is_file()));
    }

    #[test]
    fn origin_is_expanded_and_other_substitutions_are_not_guessed() {
        let o = Path::new("/opt/app/bin");
        assert_eq!(
            expand("$ORIGIN/../lib", o),
            Some("/opt/app/bin/../lib".into())
        );
        assert_eq!(expand("${ORIGIN}/lib", o), Some("/opt/app/bin/lib".into()));
        assert_eq!(expand("/usr/$LIB", o), None);
    }

    #[test]
    fn conf_files_list_folders_and_follow_includes() {
        let dir = std::env::temp_dir().join(format!("numalab-ldconf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(
            dir.join("ld.so.conf"),
            format!(
                "include {}/conf.d/*.conf\n/opt/x/lib # comment\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "/a\n").unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "# nothing\n/b\n").unwrap();
        std::fs::write(dir.join("conf.d/c.txt"), "/not-this\n").unwrap();
        let mut out = Vec::new();
        read_conf(&dir.join("ld.so.conf"), 0, &mut out);
        assert_eq!(
            out,
            [
                PathBuf::from("/a"),
                PathBuf::from("/b"),
                PathBuf::from("/opt/x/lib")
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
