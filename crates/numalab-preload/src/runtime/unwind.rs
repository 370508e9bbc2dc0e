//! The library's own stack unwinder (x86_64): the return addresses of the
//! calling thread, found from the DWARF call frame information (`.eh_frame`
//! through `.eh_frame_hdr`) of the object holding each address, with a
//! frame-pointer step where an address has none. It exists because the
//! hooks run inside allocators' locks and signal handlers (issue 36):
//! libgcc's unwinder, behind glibc's `backtrace`, loads itself with
//! `dlopen` and takes the loader's and its own locks. This one takes no
//! lock, allocates nothing and never calls the loader once [`init`] has
//! looked up glibc's `_dl_find_object` (lock-free, made for unwinders,
//! glibc 2.35 and later; it also knows the objects loaded after start).
//! Every read of the stack is bounded by the thread's stack mapping, so a
//! wrong rule or a stale frame pointer stops the walk instead of faulting.
//! Without `_dl_find_object`, or on another architecture, [`init`] says so
//! and the caller keeps `backtrace`.

#[cfg(target_arch = "x86_64")]
pub use x86_64::{init, thread_starts, trace};

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// glibc's `_dl_find_object` (2.35 and later): the loaded object holding
/// an address, found without the loader's lock (it is meant for
/// unwinders), so the fault handler and the hooks may call it.
type FindObjectFn = unsafe extern "C" fn(*mut libc::c_void, *mut [u64; 32]) -> libc::c_int;

/// Its address; 0 until [`resolve_find_object`] finds it.
static FIND_OBJECT: AtomicUsize = AtomicUsize::new(0);

/// Looks `_dl_find_object` up (`dlsym` takes the loader's lock: at
/// start, never from a hook); whether glibc has it. Called by whichever
/// user starts first (the unwinder, region selection); once found, later
/// calls cost a load.
pub fn resolve_find_object() -> bool {
    if FIND_OBJECT.load(Relaxed) == 0 {
        // SAFETY: dlsym with a NUL-terminated name.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
        FIND_OBJECT.store(f as usize, Relaxed);
    }
    FIND_OBJECT.load(Relaxed) != 0
}

/// Whether [`resolve_find_object`] found it (no loader call: hooks may
/// ask).
pub fn have_find_object() -> bool {
    FIND_OBJECT.load(Relaxed) != 0
}

/// glibc's `struct dl_find_object` of the loaded object holding `pc`, as
/// words (flags, map start, map end, link map, then its
/// `PT_GNU_EH_FRAME`); `None` when no object holds it or
/// `_dl_find_object` was not found at start.
pub fn find_object(pc: usize) -> Option<[u64; 32]> {
    let f = FIND_OBJECT.load(Relaxed);
    if f == 0 {
        return None;
    }
    // SAFETY: f is glibc's `int _dl_find_object(void *, struct
    // dl_find_object *)`, whose struct is smaller than `out`; it takes no
    // lock and is async-signal-safe.
    let find = unsafe { std::mem::transmute::<usize, FindObjectFn>(f) };
    let mut out = [0u64; 32];
    // SAFETY: as above.
    (unsafe { find(pc as *mut libc::c_void, &mut out) } == 0).then_some(out)
}

/// On this architecture there is no unwinder of ours: callers keep glibc's
/// `backtrace`.
#[cfg(not(target_arch = "x86_64"))]
pub fn init() -> bool {
    false
}

/// Nothing to record where there is no unwinder of ours.
#[cfg(not(target_arch = "x86_64"))]
pub fn thread_starts() {}

/// Never called where [`init`] says false.
#[cfg(not(target_arch = "x86_64"))]
pub fn trace(_pcs: &mut [usize]) -> usize {
    0
}

#[cfg(target_arch = "x86_64")]
mod x86_64 {
    use super::{find_object, have_find_object, resolve_find_object};
    use std::cell::Cell;

    thread_local! {
        /// The calling thread's stack mapping, `[low, high)`; (0, 0) until
        /// known. Found once per thread: every read of the stack is checked
        /// against it.
        static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    /// Looks up `_dl_find_object` (the one loader call, made at start) and
    /// this thread's stack; whether the unwinder can be used.
    pub fn init() -> bool {
        let found = resolve_find_object();
        let _ = stack_bounds(current_sp());
        found
    }

    /// Records a new thread's stack from its attributes, before its start
    /// routine runs: cheaper than the memory map the first unwind would
    /// read otherwise.
    pub fn thread_starts() {
        if !have_find_object() {
            return;
        }
        // SAFETY: attr is initialised by pthread_getattr_np before it is
        // read and destroyed after.
        let bounds = unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return;
            }
            let mut addr: *mut libc::c_void = std::ptr::null_mut();
            let mut len: libc::size_t = 0;
            let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut len);
            libc::pthread_attr_destroy(&mut attr);
            if r != 0 || addr.is_null() {
                return;
            }
            (addr as usize, addr as usize + len)
        };
        let sp = current_sp();
        if bounds.0 <= sp && sp < bounds.1 {
            let _ = STACK.try_with(|s| s.set(bounds));
        }
    }

    #[inline(always)]
    fn current_sp() -> usize {
        let sp: usize;
        // SAFETY: reads rsp only.
        unsafe {
            core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        sp
    }

    /// DWARF numbers of x86_64's registers that the walk uses.
    const RBP: usize = 6;
    const RSP: usize = 7;
    /// The return address column: rip.
    const RA: usize = 16;
    /// Registers tracked: the general ones and the return address.
    const REGS: usize = 17;
    /// A callee keeps these for its caller: unless its rules say where it
    /// saved them, they still hold the caller's values.
    const CALLEE_SAVED: u32 = 1 << 3 | 1 << RBP | 1 << 12 | 1 << 13 | 1 << 14 | 1 << 15;

    /// The register values of one frame; `known`: which are.
    #[derive(Clone, Copy)]
    struct Regs {
        v: [usize; REGS],
        known: u32,
    }

    impl Regs {
        fn get(&self, r: usize) -> Option<usize> {
            (r < REGS && self.known & (1 << r) != 0).then(|| self.v[r])
        }
        fn set(&mut self, r: usize, value: usize) {
            self.v[r] = value;
            self.known |= 1 << r;
        }
    }

    /// The readable stack: from the walk's first rsp (below it may change
    /// under us) to the top of the thread's stack mapping.
    #[derive(Clone, Copy)]
    struct Stack {
        low: usize,
        high: usize,
    }

    impl Stack {
        fn holds(&self, a: usize, len: usize) -> bool {
            a >= self.low && a <= self.high.saturating_sub(len)
        }
        fn read(&self, a: usize) -> Option<usize> {
            if !a.is_multiple_of(8) || !self.holds(a, 8) {
                return None;
            }
            // SAFETY: an aligned word inside the thread's stack mapping,
            // above the walk's own stack pointer.
            Some(unsafe { (a as *const usize).read_volatile() })
        }
    }

    /// The calling thread's stack return addresses into `pcs`, innermost
    /// first, starting with this function's caller's; how many.
    #[inline(never)]
    pub fn trace(pcs: &mut [usize]) -> usize {
        let mut v = [0usize; REGS];
        // The registers here: this function's frame is the walk's first,
        // whose rules say where its caller's values are. A register this
        // function uses itself (the pointer below among them) is one it
        // saved, and its rules restore the caller's value.
        // SAFETY: stores eight words into v, which has seventeen.
        unsafe {
            core::arch::asm!(
                "lea {t}, [rip]",
                "mov [{p} + 128], {t}",
                "mov [{p} + 56], rsp",
                "mov [{p} + 48], rbp",
                "mov [{p} + 24], rbx",
                "mov [{p} + 96], r12",
                "mov [{p} + 104], r13",
                "mov [{p} + 112], r14",
                "mov [{p} + 120], r15",
                p = in(reg) v.as_mut_ptr(),
                t = out(reg) _,
                options(nostack, preserves_flags),
            );
        }
        let regs = Regs {
            v,
            known: CALLEE_SAVED | 1 << RSP | 1 << RA,
        };
        let Some(stack) = stack_bounds(v[RSP]) else {
            return 0;
        };
        walk(regs, stack, pcs)
    }

    /// The thread's stack mapping holding `sp` (cached per thread); `None`
    /// when not found.
    fn stack_bounds(sp: usize) -> Option<Stack> {
        let cached = STACK.try_with(|s| s.get()).unwrap_or((0, 0));
        let (low, high) = if cached.0 <= sp && sp < cached.1 {
            cached
        } else {
            // A thread not seen starting, or a handler on another stack.
            let found = mapping_holding(sp)?;
            let _ = STACK.try_with(|s| s.set(found));
            found
        };
        Some(Stack {
            low: sp.max(low),
            high,
        })
    }

    /// The mapping of /proc/self/maps holding `a`, read with direct system
    /// calls into a buffer on the stack: no allocation, no lock.
    fn mapping_holding(a: usize) -> Option<(usize, usize)> {
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c"/proc/self/maps".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        let fd = fd as i32;
        let mut buf = [0u8; 2048];
        // A line's fields as they arrive: start, end, then the rest.
        let (mut field, mut start, mut end) = (0u8, 0usize, 0usize);
        let mut found = None;
        'read: while let Some(n) = super::super::sys::read_some(fd, &mut buf) {
            if n == 0 {
                break;
            }
            for &c in &buf[..n] {
                match (field, c) {
                    (_, b'\n') => {
                        if start <= a && a < end {
                            found = Some((start, end));
                            break 'read;
                        }
                        (field, start, end) = (0, 0, 0);
                    }
                    (0, b'-') => field = 1,
                    (1, b' ') => field = 2,
                    (0 | 1, _) => {
                        let d = (c as char).to_digit(16).unwrap_or(0) as usize;
                        if field == 0 {
                            start = start << 4 | d;
                        } else {
                            end = end << 4 | d;
                        }
                    }
                    _ => {}
                }
            }
        }
        super::super::sys::close(fd);
        found
    }

    /// Walks up from `regs` (a frame whose pc is where it is, not a return
    /// address), filling `pcs` with the return addresses found.
    fn walk(mut regs: Regs, stack: Stack, pcs: &mut [usize]) -> usize {
        let mut n = 0;
        // The first pc is an instruction of its own; every later one a
        // return address, after the call: its call is the byte before,
        // which may be the last of its function (a noreturn call).
        let mut after_call = false;
        while n < pcs.len() {
            let Some(pc) = regs.get(RA) else {
                break;
            };
            let at = if after_call { pc.wrapping_sub(1) } else { pc };
            let step = match find_fde(at) {
                Some(fde) => cfi_step(&fde, at, &regs, &stack).map(|r| (r, fde.cie.signal)),
                // No unwind information (generated code, hand-written
                // assembly): frame pointers, where rbp plausibly is one.
                None => fp_step(&regs, &stack).map(|r| (r, false)),
            };
            let Some((next, signal)) = step else {
                break;
            };
            let (Some(sp), Some(next_sp), Some(ra)) = (regs.get(RSP), next.get(RSP), next.get(RA))
            else {
                break;
            };
            // Each caller's frame lies above its callee's: anything else is
            // a wrong rule or a garbage frame pointer.
            if next_sp <= sp || ra == 0 {
                break;
            }
            pcs[n] = ra;
            n += 1;
            regs = next;
            // Past a signal frame the pc is the interrupted instruction.
            after_call = !signal;
        }
        n
    }

    /// The caller's registers by frame pointers: the return address above
    /// the saved rbp, which rbp points at.
    fn fp_step(regs: &Regs, stack: &Stack) -> Option<Regs> {
        let rbp = regs.get(RBP)?;
        if rbp < regs.get(RSP)? || !stack.holds(rbp, 16) {
            return None;
        }
        let mut next = Regs {
            v: [0; REGS],
            known: 0,
        };
        next.set(RBP, stack.read(rbp)?);
        next.set(RA, stack.read(rbp + 8)?);
        next.set(RSP, rbp + 16);
        Some(next)
    }

    /// The caller's registers from the rules of `fde` at `at`.
    fn cfi_step(fde: &Fde, at: usize, regs: &Regs, stack: &Stack) -> Option<Regs> {
        if fde.cie.ra_column != RA {
            return None;
        }
        let row = fde.row_at(at)?;
        let cfa = match row.cfa {
            Rule::Offset(r, off) => regs.get(r as usize)?.wrapping_add(off as usize),
            Rule::ValExpr(e) => eval(e, None, regs, stack)?,
            _ => return None,
        };
        let mut next = Regs {
            v: [0; REGS],
            known: 0,
        };
        for (slot, &r) in SLOTS.iter().enumerate() {
            let value = match row.regs[slot] {
                // The return address and rsp have no value of their own to
                // keep: rsp is the CFA below, rip is no callee's to save.
                Rule::Same if r == RA => None,
                Rule::Same => regs.get(r),
                Rule::Undefined => None,
                Rule::Offset(_, off) => stack.read(cfa.wrapping_add(off as usize)),
                Rule::ValOffset(off) => Some(cfa.wrapping_add(off as usize)),
                Rule::Register(from) => regs.get(from as usize),
                Rule::Expr(e) => eval(e, Some(cfa), regs, stack).and_then(|a| stack.read(a)),
                Rule::ValExpr(e) => eval(e, Some(cfa), regs, stack),
            };
            if let Some(v) = value {
                next.set(r, v);
            }
        }
        // The caller's rsp is the CFA, unless a rule says otherwise (a
        // signal frame's saved context).
        if matches!(row.regs[slot(RSP)?], Rule::Same) {
            next.set(RSP, cfa);
        }
        Some(next)
    }

    /// A DWARF expression (its block: length, then operations) of the
    /// forms unwind rules use: registers plus offsets, constants,
    /// arithmetic and reads of the stack. `cfa`: pushed first, for a
    /// register's rule. `None` on anything else.
    fn eval(block: usize, cfa: Option<usize>, regs: &Regs, stack: &Stack) -> Option<usize> {
        let mut c = Cursor {
            p: block,
            end: usize::MAX,
        };
        let len = c.uleb()? as usize;
        c.end = c.p.checked_add(len)?;
        let mut st = [0usize; 8];
        let mut n = 0usize;
        macro_rules! push {
            ($v:expr) => {{
                let v = $v;
                *st.get_mut(n)? = v;
                n += 1;
            }};
        }
        macro_rules! pop {
            () => {{
                n = n.checked_sub(1)?;
                st[n]
            }};
        }
        if let Some(cfa) = cfa {
            push!(cfa);
        }
        while c.p < c.end {
            let op = c.u8()?;
            match op {
                0x06 => {
                    let a = pop!();
                    push!(stack.read(a)?)
                }
                0x08 => push!(c.u8()? as usize),
                0x09 => push!(c.u8()? as i8 as isize as usize),
                0x0a => push!(c.u16()? as usize),
                0x0b => push!(c.u16()? as i16 as isize as usize),
                0x0c => push!(c.u32()? as usize),
                0x0d => push!(c.u32()? as i32 as isize as usize),
                0x0e => push!(c.u64()? as usize),
                0x0f => push!(c.u64()? as usize),
                0x10 => push!(c.uleb()? as usize),
                0x11 => push!(c.sleb()? as usize),
                0x12 => {
                    let a = pop!();
                    push!(a);
                    push!(a)
                }
                0x13 => {
                    let _ = pop!();
                }
                0x1a => {
                    let (b, a) = (pop!(), pop!());
                    push!(a & b)
                }
                0x1c => {
                    let (b, a) = (pop!(), pop!());
                    push!(a.wrapping_sub(b))
                }
                0x22 => {
                    let (b, a) = (pop!(), pop!());
                    push!(a.wrapping_add(b))
                }
                0x23 => {
                    let a = pop!();
                    push!(a.wrapping_add(c.uleb()? as usize))
                }
                0x30..=0x4f => push!((op - 0x30) as usize),
                0x70..=0x80 => {
                    let base = regs.get((op - 0x70) as usize)?;
                    push!(base.wrapping_add(c.sleb()? as usize))
                }
                _ => return None,
            }
        }
        Some(pop!())
    }

    /// Reads of unwind data, bounded by the end of the record they are in.
    /// The data lies in a loaded object's mapped segment, found by
    /// `_dl_find_object`.
    struct Cursor {
        p: usize,
        end: usize,
    }

    macro_rules! fixed {
        ($name:ident, $t:ty) => {
            fn $name(&mut self) -> Option<$t> {
                let n = std::mem::size_of::<$t>();
                if self.p.checked_add(n)? > self.end {
                    return None;
                }
                // SAFETY: inside the unwind data of a loaded object.
                let v = unsafe { (self.p as *const $t).read_unaligned() };
                self.p += n;
                Some(v)
            }
        };
    }

    impl Cursor {
        fixed!(u8, u8);
        fixed!(u16, u16);
        fixed!(u32, u32);
        fixed!(u64, u64);

        fn uleb(&mut self) -> Option<u64> {
            let (mut v, mut shift) = (0u64, 0u32);
            loop {
                let b = self.u8()?;
                if shift < 64 {
                    v |= u64::from(b & 0x7f) << shift;
                }
                shift += 7;
                if b & 0x80 == 0 {
                    return Some(v);
                }
            }
        }

        fn sleb(&mut self) -> Option<i64> {
            let (mut v, mut shift) = (0i64, 0u32);
            loop {
                let b = self.u8()?;
                if shift < 64 {
                    v |= i64::from(b & 0x7f) << shift;
                }
                shift += 7;
                if b & 0x80 == 0 {
                    if shift < 64 && b & 0x40 != 0 {
                        v |= -1i64 << shift;
                    }
                    return Some(v);
                }
            }
        }

        /// A pointer in the `DW_EH_PE_*` encoding `enc`: relative to
        /// where it is read (pcrel) or to `data` (datarel), or absolute.
        /// Indirect and other bases are refused: the unwind data of
        /// x86_64 objects does not use them where the walk reads.
        fn pointer(&mut self, enc: u8, data: usize) -> Option<usize> {
            let at = self.p;
            let v = match enc & 0x0f {
                0x00 | 0x04 | 0x0c => self.u64()? as usize,
                0x01 => self.uleb()? as usize,
                0x02 => self.u16()? as usize,
                0x03 => self.u32()? as usize,
                0x09 => self.sleb()? as usize,
                0x0a => self.u16()? as i16 as isize as usize,
                0x0b => self.u32()? as i32 as isize as usize,
                _ => return None,
            };
            match enc & 0xf0 {
                0x00 => Some(v),
                0x10 => Some(at.wrapping_add(v)),
                0x30 => Some(data.wrapping_add(v)),
                _ => None,
            }
        }
    }

    /// An entry of a CIE or FDE length field: 32 bits, or 64 after
    /// 0xffffffff. `None` for the terminator (0).
    fn record(at: usize) -> Option<Cursor> {
        let mut c = Cursor {
            p: at,
            end: usize::MAX,
        };
        let len = match c.u32()? {
            0 => return None,
            0xffff_ffff => c.u64()? as usize,
            l => l as usize,
        };
        c.end = c.p.checked_add(len)?;
        Some(c)
    }

    /// What a CIE says for all its FDEs.
    #[derive(Clone, Copy)]
    struct Cie {
        code_align: u64,
        data_align: i64,
        ra_column: usize,
        /// How its FDEs' addresses are encoded.
        fde_enc: u8,
        /// Augmentation data follows each FDE's range ('z').
        has_aug: bool,
        /// Its FDEs are signal frames ('S'): the pc above one is not a
        /// return address.
        signal: bool,
        /// Its initial instructions, `[start, end)`.
        program: (usize, usize),
    }

    fn parse_cie(at: usize) -> Option<Cie> {
        let mut c = record(at)?;
        if c.u32()? != 0 {
            return None;
        }
        let version = c.u8()?;
        if !matches!(version, 1 | 3 | 4) {
            return None;
        }
        let mut aug = [0u8; 8];
        let mut aug_len = 0;
        loop {
            let b = c.u8()?;
            if b == 0 {
                break;
            }
            *aug.get_mut(aug_len)? = b;
            aug_len += 1;
        }
        if version == 4 {
            // Address and segment selector sizes.
            c.u16()?;
        }
        let code_align = c.uleb()?;
        let data_align = c.sleb()?;
        let ra_column = if version == 1 {
            c.u8()? as usize
        } else {
            c.uleb()? as usize
        };
        let mut cie = Cie {
            code_align,
            data_align,
            ra_column,
            fde_enc: 0,
            has_aug: false,
            signal: false,
            program: (0, c.end),
        };
        let aug = &aug[..aug_len];
        if aug.first() == Some(&b'z') {
            cie.has_aug = true;
            let len = c.uleb()? as usize;
            let data_end = c.p.checked_add(len)?;
            for &a in &aug[1..] {
                match a {
                    b'R' => cie.fde_enc = c.u8()?,
                    // The personality routine: skipped, by its encoding.
                    b'P' => {
                        let enc = c.u8()?;
                        c.pointer(enc & 0x7f, 0)?;
                    }
                    b'L' => {
                        c.u8()?;
                    }
                    b'S' => cie.signal = true,
                    // Others ('B', 'G'): the length above skips their data.
                    _ => break,
                }
            }
            c.p = data_end;
        } else if !aug.is_empty() {
            // Without 'z' an unknown augmentation's data cannot be skipped.
            return None;
        }
        cie.program.0 = c.p;
        Some(cie)
    }

    /// The frame description of one function.
    struct Fde {
        cie: Cie,
        /// The code it covers, `[start, end)`.
        start: usize,
        end: usize,
        /// Its instructions, `[start, end)`.
        program: (usize, usize),
    }

    /// The FDE covering `pc`, through the sorted table of the
    /// `.eh_frame_hdr` of the object `_dl_find_object` says holds it.
    fn find_fde(pc: usize) -> Option<Fde> {
        let out = find_object(pc)?;
        // struct dl_find_object: flags, map start, map end, link map,
        // then the object's PT_GNU_EH_FRAME.
        let hdr = out[4] as usize;
        if hdr == 0 {
            return None;
        }
        let mut c = Cursor {
            p: hdr,
            end: usize::MAX,
        };
        let (version, frame_enc, count_enc, table_enc) = (c.u8()?, c.u8()?, c.u8()?, c.u8()?);
        if version != 1 || count_enc == 0xff {
            return None;
        }
        c.pointer(frame_enc, hdr)?;
        let count = c.pointer(count_enc, hdr)?;
        // The table's usual encoding (the linkers write no other): pairs
        // of 32-bit offsets from the header, sorted by start.
        if table_enc != 0x3b || count == 0 {
            return None;
        }
        let table = c.p;
        let entry = |i: usize| -> (usize, usize) {
            let e = table + 8 * i;
            // SAFETY: i < count: inside the header's table.
            let (loc, fde) = unsafe {
                (
                    (e as *const i32).read_unaligned(),
                    ((e + 4) as *const i32).read_unaligned(),
                )
            };
            (
                hdr.wrapping_add(loc as isize as usize),
                hdr.wrapping_add(fde as isize as usize),
            )
        };
        // The last entry starting at or before pc.
        let (mut lo, mut hi) = (0, count);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if entry(mid).0 <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let (start, at) = entry(lo);
        if start > pc {
            return None;
        }
        parse_fde(at).filter(|f| f.start <= pc && pc < f.end)
    }

    fn parse_fde(at: usize) -> Option<Fde> {
        let mut c = record(at)?;
        let id_at = c.p;
        let cie_offset = c.u32()? as usize;
        if cie_offset == 0 {
            return None;
        }
        let cie = parse_cie(id_at.checked_sub(cie_offset)?)?;
        // An indirect address: never seen in an FDE.
        if cie.fde_enc & 0x80 != 0 {
            return None;
        }
        let start = c.pointer(cie.fde_enc, 0)?;
        let range = c.pointer(cie.fde_enc & 0x0f, 0)?;
        if cie.has_aug {
            let len = c.uleb()? as usize;
            c.p = c.p.checked_add(len)?;
        }
        Some(Fde {
            cie,
            start,
            end: start.checked_add(range)?,
            program: (c.p, c.end),
        })
    }

    /// Where a register's value for the caller is, or the CFA.
    #[derive(Clone, Copy)]
    enum Rule {
        /// Unchanged (the default for every register).
        Same,
        /// Lost: for the return address, the outermost frame.
        Undefined,
        /// Saved at CFA + offset; for the CFA: register + offset.
        Offset(u16, i64),
        /// Is CFA + offset.
        ValOffset(i64),
        /// In another register.
        Register(u16),
        /// Saved at the address an expression (its block) computes.
        Expr(usize),
        /// Is the value an expression computes; for the CFA too.
        ValExpr(usize),
    }

    /// The registers whose rules are kept: those a walk reads back (the
    /// callee-saved ones, rsp and the return address). Rules for the others
    /// are read and dropped: after a call their values are lost anyway.
    const SLOTS: [usize; 8] = [3, RBP, RSP, 12, 13, 14, 15, RA];

    fn slot(r: usize) -> Option<usize> {
        SLOTS.iter().position(|&s| s == r)
    }

    /// The rules at one pc.
    #[derive(Clone, Copy)]
    struct Row {
        cfa: Rule,
        regs: [Rule; SLOTS.len()],
    }

    /// Rows kept by DW_CFA_remember_state: deeper nesting than this is
    /// refused (compilers nest one or two).
    const STATES: usize = 8;

    impl Fde {
        /// The rules in force at `at`: the CIE's initial instructions, then
        /// the FDE's up to `at`.
        fn row_at(&self, at: usize) -> Option<Row> {
            let mut row = Row {
                cfa: Rule::Undefined,
                regs: [Rule::Same; SLOTS.len()],
            };
            let cie = &self.cie;
            execute(cie, cie.program, &mut row, None, self.start, usize::MAX)?;
            let initial = row;
            execute(cie, self.program, &mut row, Some(&initial), self.start, at)?;
            Some(row)
        }
    }

    /// Runs call frame instructions from `loc` until the row for `target`
    /// (the first advance past it). `initial`: the CIE's row, which
    /// DW_CFA_restore returns to.
    fn execute(
        cie: &Cie,
        program: (usize, usize),
        row: &mut Row,
        initial: Option<&Row>,
        mut loc: usize,
        target: usize,
    ) -> Option<()> {
        let mut c = Cursor {
            p: program.0,
            end: program.1,
        };
        let mut states = [const { std::mem::MaybeUninit::<Row>::uninit() }; STATES];
        let mut depth = 0;
        let da = cie.data_align;
        let set = |row: &mut Row, r: u64, rule: Rule| {
            if let Some(s) = slot(r as usize) {
                row.regs[s] = rule;
            }
        };
        let restore = |row: &mut Row, r: u64| -> Option<()> {
            if let Some(s) = slot(r as usize) {
                row.regs[s] = initial?.regs[s];
            }
            Some(())
        };
        while c.p < c.end {
            let op = c.u8()?;
            let delta = match (op & 0xc0, op & 0x3f) {
                (0x40, d) => Some(u64::from(d)),
                (0x80, r) => {
                    let off = (c.uleb()? as i64).wrapping_mul(da);
                    set(row, r.into(), Rule::Offset(0, off));
                    None
                }
                (0xc0, r) => {
                    restore(row, r.into())?;
                    None
                }
                (_, 0x00) => None,
                (_, 0x01) => {
                    let to = c.pointer(cie.fde_enc, 0)?;
                    if to > target {
                        return Some(());
                    }
                    loc = to;
                    None
                }
                (_, 0x02) => Some(u64::from(c.u8()?)),
                (_, 0x03) => Some(u64::from(c.u16()?)),
                (_, 0x04) => Some(u64::from(c.u32()?)),
                (_, 0x05) => {
                    let r = c.uleb()?;
                    let off = (c.uleb()? as i64).wrapping_mul(da);
                    set(row, r, Rule::Offset(0, off));
                    None
                }
                (_, 0x06) => {
                    restore(row, c.uleb()?)?;
                    None
                }
                (_, 0x07) => {
                    set(row, c.uleb()?, Rule::Undefined);
                    None
                }
                (_, 0x08) => {
                    set(row, c.uleb()?, Rule::Same);
                    None
                }
                (_, 0x09) => {
                    let (r, from) = (c.uleb()?, c.uleb()?);
                    set(row, r, Rule::Register(from as u16));
                    None
                }
                (_, 0x0a) => {
                    states.get_mut(depth)?.write(*row);
                    depth += 1;
                    None
                }
                (_, 0x0b) => {
                    depth = depth.checked_sub(1)?;
                    // SAFETY: every state below depth was written by a
                    // remember before.
                    *row = unsafe { states[depth].assume_init() };
                    None
                }
                (_, 0x0c) => {
                    let (r, off) = (c.uleb()?, c.uleb()?);
                    row.cfa = Rule::Offset(r as u16, off as i64);
                    None
                }
                (_, 0x0d) => {
                    let r = c.uleb()?;
                    let Rule::Offset(_, off) = row.cfa else {
                        return None;
                    };
                    row.cfa = Rule::Offset(r as u16, off);
                    None
                }
                (_, 0x0e) => {
                    let off = c.uleb()? as i64;
                    let Rule::Offset(r, _) = row.cfa else {
                        return None;
                    };
                    row.cfa = Rule::Offset(r, off);
                    None
                }
                (_, 0x0f) => {
                    row.cfa = Rule::ValExpr(c.p);
                    skip_block(&mut c)?;
                    None
                }
                (_, 0x10) => {
                    let r = c.uleb()?;
                    set(row, r, Rule::Expr(c.p));
                    skip_block(&mut c)?;
                    None
                }
                (_, 0x11) => {
                    let r = c.uleb()?;
                    let off = c.sleb()?.wrapping_mul(da);
                    set(row, r, Rule::Offset(0, off));
                    None
                }
                (_, 0x12) => {
                    let r = c.uleb()?;
                    let off = c.sleb()?.wrapping_mul(da);
                    row.cfa = Rule::Offset(r as u16, off);
                    None
                }
                (_, 0x13) => {
                    let off = c.sleb()?.wrapping_mul(da);
                    let Rule::Offset(r, _) = row.cfa else {
                        return None;
                    };
                    row.cfa = Rule::Offset(r, off);
                    None
                }
                (_, 0x14) => {
                    let r = c.uleb()?;
                    let off = (c.uleb()? as i64).wrapping_mul(da);
                    set(row, r, Rule::ValOffset(off));
                    None
                }
                (_, 0x15) => {
                    let r = c.uleb()?;
                    let off = c.sleb()?.wrapping_mul(da);
                    set(row, r, Rule::ValOffset(off));
                    None
                }
                (_, 0x16) => {
                    let r = c.uleb()?;
                    set(row, r, Rule::ValExpr(c.p));
                    skip_block(&mut c)?;
                    None
                }
                // DW_CFA_GNU_args_size: nothing the walk needs.
                (_, 0x2e) => {
                    c.uleb()?;
                    None
                }
                // DW_CFA_GNU_negative_offset_extended.
                (_, 0x2f) => {
                    let r = c.uleb()?;
                    let off = (c.uleb()? as i64).wrapping_mul(da);
                    set(row, r, Rule::Offset(0, off.wrapping_neg()));
                    None
                }
                _ => return None,
            };
            if let Some(d) = delta {
                let next = loc.checked_add((d.checked_mul(cie.code_align)?) as usize)?;
                if next > target {
                    return Some(());
                }
                loc = next;
            }
        }
        Some(())
    }

    /// Steps over an expression's block (its length, then its bytes).
    fn skip_block(c: &mut Cursor) -> Option<()> {
        let len = c.uleb()? as usize;
        c.p = c.p.checked_add(len)?;
        (c.p <= c.end).then_some(())
    }

    /// The internals the unit tests look at.
    #[cfg(test)]
    pub mod tests_support {
        use super::*;

        /// The code range of the FDE covering `pc`.
        pub fn fde_range(pc: usize) -> Option<(usize, usize)> {
            find_fde(pc).map(|f| (f.start, f.end))
        }

        /// At `pc`: the CFA's register and offset and where the return
        /// address is from the CFA.
        pub fn entry_rules(pc: usize) -> Option<((u16, i64), i64)> {
            let row = find_fde(pc)?.row_at(pc)?;
            match (row.cfa, row.regs[slot(RA)?]) {
                (Rule::Offset(r, off), Rule::Offset(_, ra)) => Some(((r, off), ra)),
                _ => None,
            }
        }

        /// Walks from a made-up frame: `pc` and `rbp`, on this stack.
        pub fn walk_from(pc: usize, rbp: usize) -> usize {
            let sp = current_sp();
            let mut regs = Regs {
                v: [0; REGS],
                known: 0,
            };
            regs.set(RA, pc);
            regs.set(RSP, sp);
            regs.set(RBP, rbp);
            let mut pcs = [0usize; 16];
            stack_bounds(sp).map_or(0, |s| walk(regs, s, &mut pcs))
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::x86_64::tests_support::*;
    use libc::{c_int, c_void};
    use std::hint::black_box;

    extern "C" {
        fn backtrace(buf: *mut *mut c_void, size: c_int) -> c_int;
    }

    const DEPTH: usize = 64;

    /// Both unwinders' stacks from the same function, `depth` calls down.
    #[inline(never)]
    fn both(depth: usize) -> (Vec<usize>, Vec<usize>) {
        if depth > 0 {
            let r = both(black_box(depth - 1));
            return black_box(r);
        }
        let mut ours = [0usize; DEPTH];
        let n = super::trace(&mut ours);
        let mut theirs = [std::ptr::null_mut::<c_void>(); DEPTH];
        // SAFETY: theirs holds DEPTH pointers.
        let m = unsafe { backtrace(theirs.as_mut_ptr(), DEPTH as c_int) }.max(0) as usize;
        (
            ours[..n].to_vec(),
            theirs[..m].iter().map(|p| *p as usize).collect(),
        )
    }

    /// The first frame differs (each is called from its own line); the
    /// rest must be the same addresses, to the same depth.
    fn assert_same(ours: &[usize], theirs: &[usize]) {
        assert!(ours.len() >= 6, "ours: {ours:x?}");
        assert_eq!(
            ours.len(),
            theirs.len(),
            "ours {ours:x?}\ntheirs {theirs:x?}"
        );
        assert_eq!(ours[1..], theirs[1..], "ours {ours:x?}\ntheirs {theirs:x?}");
    }

    #[test]
    fn matches_glibc_backtrace_frame_by_frame() {
        assert!(super::init(), "no _dl_find_object in this glibc");
        let (ours, theirs) = both(5);
        assert_same(&ours, &theirs);
    }

    #[test]
    fn works_on_a_thread_with_a_small_stack() {
        assert!(super::init());
        let (ours, theirs) = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| both(3))
            .unwrap()
            .join()
            .unwrap();
        assert_same(&ours, &theirs);
        // The thread's stack ends at its start: few frames, none cut.
        assert!(ours.len() < DEPTH, "{ours:x?}");
    }

    type Stacks = Option<(Vec<usize>, Vec<usize>)>;
    static IN_HANDLER: std::sync::Mutex<Stacks> = std::sync::Mutex::new(None);

    extern "C" fn on_signal(_: c_int) {
        let r = both(2);
        *IN_HANDLER.lock().unwrap() = Some(r);
    }

    /// Through the kernel's signal frame (glibc's `__restore_rt`, whose
    /// FDE gives the interrupted registers by expressions) to the code the
    /// signal interrupted, as libgcc does.
    #[test]
    fn walks_through_a_signal_frame() {
        assert!(super::init());
        // SAFETY: a handler for SIGUSR2, raised on this thread only.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as usize;
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()),
                0
            );
            assert_eq!(libc::raise(libc::SIGUSR2), 0);
        }
        let (ours, theirs) = IN_HANDLER.lock().unwrap().take().unwrap();
        assert_same(&ours, &theirs);
        let here = walks_through_a_signal_frame as *const () as usize;
        let (start, end) = fde_range(here).unwrap();
        assert!(
            ours.iter().any(|&pc| start < pc && pc <= end),
            "this test's own frame, past the signal's: {ours:x?}"
        );
    }

    #[inline(never)]
    fn known() -> usize {
        black_box(7)
    }

    #[test]
    fn finds_the_fde_of_a_known_function_and_its_cfa_rule() {
        assert!(super::init());
        let f = known as *const () as usize;
        assert_eq!(known(), 7);
        let (start, end) = fde_range(f).expect("an FDE for a function of this binary");
        assert!(start <= f && f < end, "{start:x}..{end:x} for {f:x}");
        // At a function's entry the CFA is rsp + 8 and the return
        // address just below it.
        assert_eq!(entry_rules(f), Some(((7, 8), -8)));
        // Past a return address the lookup is the call's last byte.
        assert!(fde_range(f + 1).is_some());
    }

    #[test]
    fn a_bogus_pc_gives_no_frames() {
        assert!(super::init());
        assert!(fde_range(0).is_none());
        assert!(fde_range(0x1000).is_none());
        for pc in [0usize, 1, 0x1000, usize::MAX - 8] {
            // No frame pointer, then a frame pointer to a frame of zeros.
            assert_eq!(walk_from(pc, 0), 0, "{pc:x}");
            let fake = [0usize; 4];
            assert_eq!(
                walk_from(pc, black_box(&fake).as_ptr() as usize),
                0,
                "{pc:x}"
            );
        }
    }

    /// What a stack costs, median of many calls: ours against glibc's
    /// `backtrace` (`cargo test -p numalab-preload -- --nocapture cost`).
    #[test]
    fn cost_against_backtrace() {
        assert!(super::init());
        #[inline(never)]
        fn down(depth: usize, ours: bool) -> u64 {
            if depth > 0 {
                return black_box(down(black_box(depth - 1), ours));
            }
            let mut pcs = [0usize; crate::runtime::stacks::STACK_CAPACITY];
            let t = std::time::Instant::now();
            if ours {
                black_box(super::trace(&mut pcs));
            } else {
                let mut buf =
                    [std::ptr::null_mut::<c_void>(); crate::runtime::stacks::STACK_CAPACITY];
                // SAFETY: buf holds STACK_CAPACITY pointers.
                black_box(unsafe { backtrace(buf.as_mut_ptr(), buf.len() as c_int) });
            }
            t.elapsed().as_nanos() as u64
        }
        let median = |ours: bool| {
            let mut v: Vec<u64> = (0..2001).map(|_| down(12, ours)).collect();
            v.sort_unstable();
            v[v.len() / 2]
        };
        let (ours, theirs) = (median(true), median(false));
        println!(
            "call stack of {} frames: ours {ours} ns, glibc backtrace {theirs} ns (median of 2001)",
            crate::runtime::stacks::STACK_CAPACITY
        );
    }
}
