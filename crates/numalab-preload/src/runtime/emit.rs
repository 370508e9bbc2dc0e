//! Records out: one record at a time into the queue ([`super::queue`]),
//! and the files written beside the records (the memory map, the threads'
//! names).

use super::state::{config, OUT_FD};
use super::{queue, sys};
use crate::record;
use std::sync::atomic::Ordering::SeqCst;

/// Queues one record for the sampler to write (or writes it when no
/// sampler runs); lost when the output cannot take it (the profile then
/// has fewer samples, the program is unaffected).
pub fn emit(r: &record::Record) {
    let fd = OUT_FD.load(SeqCst);
    if fd >= 0 {
        queue::push(fd, &r.encode());
    }
}

/// Copies /proc/self/maps beside the records (`<out>.maps`), for the
/// allocation stacks' symbols.
pub fn save_maps() {
    let Some(path) = &config().records else {
        return;
    };
    let mut out = path.clone();
    out.push(".maps");
    let Some(to) = sys::open_append(&out) else {
        return;
    };
    if let Some(from) = sys::open_read(std::ffi::OsStr::new("/proc/self/maps")) {
        let mut buf = [0u8; 4096];
        while let Some(n) = sys::read_some(from, &mut buf).filter(|n| *n > 0) {
            sys::write_all(to, &buf[..n]);
        }
        sys::close(from);
    }
    sys::close(to);
}

/// Every live thread's name, as the kernel has it (a ThreadName record
/// each). Called by the sampler thread and at exit, never from a hook.
pub fn emit_thread_names() {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(comm) = std::fs::read(t.path().join("comm")) else {
            continue;
        };
        let name = comm.strip_suffix(b"\n").unwrap_or(&comm);
        let (addr, size) = record::name_words(name);
        emit(&record::Record {
            kind: record::Kind::ThreadName,
            tid,
            cpu: u32::MAX,
            node: 0,
            flags: 0,
            addr,
            size,
            time_ns: sys::monotonic_ns(),
            aux: 0,
        });
    }
}
