//! The registry of live objects behind the C handles.
//!
//! A handle is a number in pointer clothing, never dereferenced: each call
//! looks it up here, so a handle that was freed (or never handed out, or
//! of another kind) is a `NUMALAB_E_HANDLE` status, not a use after free.
//! Numbers are never reused, so a stale handle cannot reach a newer
//! object either. Objects are shared (`Arc`): freeing one while another
//! thread's call still uses it ends its life when that call returns.
//!
//! Buffers are keyed by their address instead, as `free` takes a pointer.

use crate::{Fail, Result, NUMALAB_E_HANDLE};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

/// What a handle stands for.
#[derive(Clone)]
pub enum Object {
    Machine(Arc<numalab::Machine>),
    Set(Arc<crate::sets::SetObject>),
    Policy(Arc<crate::memory::PolicyObject>),
    Results(Arc<crate::results::ResultsObject>),
}

impl Object {
    fn kind(&self) -> &'static str {
        match self {
            Object::Machine(_) => "machine",
            Object::Set(_) => "set",
            Object::Policy(_) => "policy",
            Object::Results(_) => "results",
        }
    }
}

struct Registry {
    objects: HashMap<usize, Object>,
    next: usize,
    buffers: HashMap<usize, Arc<crate::memory::BufferObject>>,
}

/// Handles start here and grow by 16, so they look like aligned pointers
/// to debuggers and never collide with NULL.
const FIRST_HANDLE: usize = 0x6e_6c00_0000;

fn registry() -> MutexGuard<'static, Registry> {
    static R: LazyLock<Mutex<Registry>> = LazyLock::new(|| {
        Mutex::new(Registry {
            objects: HashMap::new(),
            next: FIRST_HANDLE,
            buffers: HashMap::new(),
        })
    });
    // A panic while the lock was held leaves the maps consistent (every
    // change is one insert or remove): keep using them.
    R.lock().unwrap_or_else(|p| p.into_inner())
}

/// Registers `o`; returns its handle.
pub fn insert(o: Object) -> usize {
    let mut r = registry();
    let h = r.next;
    r.next += 16;
    r.objects.insert(h, o);
    h
}

/// The object of handle `h`, which must be of `kind`.
pub fn get(h: usize, kind: &'static str, arg: &str) -> Result<Object> {
    if h == 0 {
        return Err(crate::args::null(arg));
    }
    let r = registry();
    match r.objects.get(&h) {
        Some(o) if o.kind() == kind => Ok(o.clone()),
        Some(o) => Err(Fail::new(
            NUMALAB_E_HANDLE,
            format!("argument '{arg}' is a {} handle, not a {kind}", o.kind()),
        )),
        None => Err(stale(h, kind, arg)),
    }
}

/// Replaces the object of handle `h` (of `kind`) by what `f` makes of
/// it, under the registry's lock so that two threads changing one handle
/// both have their change.
pub fn modify(
    h: usize,
    kind: &'static str,
    arg: &str,
    f: impl FnOnce(&Object) -> Result<Object>,
) -> Result<()> {
    if h == 0 {
        return Err(crate::args::null(arg));
    }
    let mut r = registry();
    let new = match r.objects.get(&h) {
        Some(o) if o.kind() == kind => f(o)?,
        Some(o) => {
            return Err(Fail::new(
                NUMALAB_E_HANDLE,
                format!("argument '{arg}' is a {} handle, not a {kind}", o.kind()),
            ))
        }
        None => return Err(stale(h, kind, arg)),
    };
    let old = r.objects.insert(h, new);
    drop(r);
    drop(old);
    Ok(())
}

/// Removes handle `h` of `kind`; NULL is a no-op, as for `free`.
pub fn remove(h: usize, kind: &'static str, arg: &str) -> Result<()> {
    if h == 0 {
        return Ok(());
    }
    let removed = {
        let mut r = registry();
        match r.objects.get(&h) {
            Some(o) if o.kind() == kind => r.objects.remove(&h),
            Some(o) => {
                return Err(Fail::new(
                    NUMALAB_E_HANDLE,
                    format!("argument '{arg}' is a {} handle, not a {kind}", o.kind()),
                ))
            }
            None => return Err(stale(h, kind, arg)),
        }
    };
    // Dropped outside the lock: a buffer's munmap or a machine's free
    // should not hold up other threads' calls.
    drop(removed);
    Ok(())
}

fn stale(h: usize, kind: &str, arg: &str) -> Fail {
    Fail::new(
        NUMALAB_E_HANDLE,
        format!(
            "argument '{arg}' ({h:#x}) is not a live {kind} handle: already freed, or not made by numalab"
        ),
    )
}

/// Registers a buffer under its address.
pub fn insert_buffer(addr: usize, b: Arc<crate::memory::BufferObject>) {
    registry().buffers.insert(addr, b);
}

/// The buffer that starts at `addr`.
pub fn buffer(addr: usize, arg: &str) -> Result<Arc<crate::memory::BufferObject>> {
    if addr == 0 {
        return Err(crate::args::null(arg));
    }
    registry().buffers.get(&addr).cloned().ok_or_else(|| {
        Fail::new(
            NUMALAB_E_HANDLE,
            format!(
                "argument '{arg}' ({addr:#x}) is not the start of memory numalab_alloc returned, or it was already freed"
            ),
        )
    })
}

/// Forgets the buffer at `addr`; NULL is a no-op. The memory is unmapped
/// when the last call using it returns.
pub fn remove_buffer(addr: usize, arg: &str) -> Result<()> {
    if addr == 0 {
        return Ok(());
    }
    let removed = registry().buffers.remove(&addr);
    match removed {
        Some(b) => {
            drop(b);
            Ok(())
        }
        None => Err(Fail::new(
            NUMALAB_E_HANDLE,
            format!(
                "argument '{arg}' ({addr:#x}) is not the start of memory numalab_alloc returned, or it was already freed"
            ),
        )),
    }
}
