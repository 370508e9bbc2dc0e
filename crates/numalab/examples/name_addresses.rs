//! Names code addresses of one ELF object as `numalab profile` names its
//! call stacks (in process, the object indexed once), for
//! bench/symbolize.sh to time against binutils' `addr2line` on the same
//! addresses:
//!
//!     name_addresses OBJECT < ADDRESSES
//!
//! ADDRESSES: ELF virtual addresses in hex, one a line (`0x` optional).
//! Prints one name a line, then on stderr the seconds taken to index the
//! object and to name them all.

use numalab::profile::elf_index::ElfIndex;
use numalab::profile::symbols::frame_name;
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Instant;

fn main() {
    let Some(object) = std::env::args().nth(1) else {
        eprintln!("usage: name_addresses OBJECT < ADDRESSES");
        std::process::exit(2);
    };
    let mut addresses = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap_or_default();
        let hex = line.trim().trim_start_matches("0x");
        match u64::from_str_radix(hex, 16) {
            Ok(a) => addresses.push(a),
            Err(_) if hex.is_empty() => {}
            Err(_) => {
                eprintln!("name_addresses: '{line}' is not a hex address");
                std::process::exit(2);
            }
        }
    }
    let t0 = Instant::now();
    let index = match ElfIndex::open(Path::new(&object)) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("name_addresses: {e}");
            std::process::exit(1);
        }
    };
    let indexed = t0.elapsed().as_secs_f64();
    let short = Path::new(&object)
        .file_name()
        .map_or(object.clone(), |f| f.to_string_lossy().into_owned());
    let names: Vec<String> = addresses
        .iter()
        .map(|&a| frame_name(&index, &short, a))
        .collect();
    let total = t0.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    for n in names {
        if writeln!(out, "{n}").is_err() {
            std::process::exit(1);
        }
    }
    eprintln!(
        "indexed {indexed:.3} s, named {} addresses {total:.3} s",
        addresses.len()
    );
}
