//! Reading C arguments and writing C results, each checked: NULL pointers,
//! unterminated or non-UTF-8 strings, counts that overflow, output buffers
//! too small. Every helper fails with a status and a line naming the
//! argument.

use crate::{Fail, Result, NUMALAB_E_NULL, NUMALAB_E_TRUNCATED};
use std::ffi::{c_char, c_uint};

/// Longest string argument read, in bytes: the longest set expression
/// (`numalab::placement::resource_set::MAX_SET_TEXT`), and room for
/// a path. A string with no NUL within it is refused rather than read on.
pub(crate) const MAX_TEXT: usize = 64 << 10;

/// Most ids a list argument may hold: every id numalab accepts
/// (`numalab::idset::ID_LIMIT`).
pub(crate) const MAX_LIST: usize = numalab::idset::ID_LIMIT as usize;

/// The NUL error for argument `name`.
pub fn null(name: &str) -> Fail {
    Fail::new(NUMALAB_E_NULL, format!("argument '{name}' is NULL"))
}

/// A string argument: not NULL, NUL-terminated within [`MAX_TEXT`] bytes,
/// UTF-8.
///
/// # Safety
/// `p` is NULL or points to readable memory up to its NUL or
/// [`MAX_TEXT`] + 1 bytes, whichever comes first.
pub unsafe fn text<'a>(p: *const c_char, name: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(null(name));
    }
    // SAFETY: the caller's guarantee; strnlen reads no further than the
    // bound.
    let len = unsafe { libc::strnlen(p, MAX_TEXT + 1) };
    if len > MAX_TEXT {
        return Err(Fail::overflow(format!(
            "argument '{name}' is longer than {MAX_TEXT} bytes (or not NUL-terminated)"
        )));
    }
    // SAFETY: `len` bytes were just found readable.
    let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    std::str::from_utf8(bytes)
        .map_err(|_| Fail::invalid(format!("argument '{name}' is not UTF-8 text")))
}

/// An optional string argument: NULL gives `None`.
///
/// # Safety
/// As [`text`].
pub unsafe fn opt_text<'a>(p: *const c_char, name: &str) -> Result<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        // SAFETY: the caller's guarantee.
        unsafe { text(p, name) }.map(Some)
    }
}

/// An output argument: not NULL.
///
/// # Safety
/// `p` is NULL or valid for a write of `T`.
pub unsafe fn out<'a, T>(p: *mut T, name: &str) -> Result<&'a mut T> {
    // SAFETY: the caller's guarantee.
    unsafe { p.as_mut() }.ok_or_else(|| null(name))
}

/// A list argument of `n` ids: `p` may be NULL only when `n` is 0.
///
/// # Safety
/// `p` is NULL or valid for reading `n` values.
pub unsafe fn ids<'a>(p: *const c_uint, n: usize, name: &str) -> Result<&'a [u32]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(name));
    }
    if n > MAX_LIST {
        return Err(Fail::overflow(format!(
            "argument '{name}' holds {n} ids; at most {MAX_LIST}"
        )));
    }
    // SAFETY: the caller's guarantee, `n` bounded above.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Writes ids to `(buf, capacity)` and their number to `count`: the
/// whole list always counted, as many written as fit; `NUMALAB_E_TRUNCATED`
/// when some did not. `buf` may be NULL when `capacity` is 0 (to ask
/// only for the count).
///
/// # Safety
/// `buf` is NULL or valid for writing `capacity` values; `count` is NULL
/// or valid for a write.
pub unsafe fn write_ids(
    list: impl Iterator<Item = u32>,
    buf: *mut c_uint,
    capacity: usize,
    count: *mut usize,
) -> Result<()> {
    // SAFETY: the caller's guarantee.
    let count = unsafe { out(count, "count") }?;
    if capacity > 0 && buf.is_null() {
        return Err(null("ids"));
    }
    if capacity > isize::MAX as usize / std::mem::size_of::<c_uint>() {
        return Err(Fail::overflow(format!(
            "capacity {capacity} is larger than any array"
        )));
    }
    let mut n = 0usize;
    for id in list {
        if n < capacity {
            // SAFETY: `n < capacity`, within the caller's array.
            unsafe { buf.add(n).write(id) };
        }
        n += 1;
    }
    *count = n;
    if n > capacity && capacity > 0 {
        return Err(Fail::new(
            NUMALAB_E_TRUNCATED,
            format!("{n} ids do not fit in {capacity}; the first {capacity} were written"),
        ));
    }
    Ok(())
}

/// Writes `s` NUL-terminated into `(buf, capacity)`, and the bytes it
/// needs (NUL included) to `needed` when that is not NULL; as much as
/// fits (always NUL-terminated) and `NUMALAB_E_TRUNCATED` when it does
/// not. `buf` may be NULL when `capacity` is 0 (to ask for the size).
///
/// # Safety
/// `buf` is NULL or valid for writing `capacity` bytes; `needed` is NULL
/// or valid for a write.
pub unsafe fn write_text(
    s: &str,
    buf: *mut c_char,
    capacity: usize,
    needed: *mut usize,
) -> Result<()> {
    let need = s.len() + 1;
    // SAFETY: the caller's guarantee.
    if let Some(n) = unsafe { needed.as_mut() } {
        *n = need;
    }
    if capacity == 0 {
        return if needed.is_null() {
            Err(null("needed"))
        } else {
            Ok(())
        };
    }
    if buf.is_null() {
        return Err(null("buffer"));
    }
    if capacity > isize::MAX as usize {
        return Err(Fail::overflow(format!(
            "capacity {capacity} is larger than any buffer"
        )));
    }
    let n = s.len().min(capacity - 1);
    // SAFETY: `n + 1 <= capacity` bytes of the caller's buffer.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        buf.add(n).write(0);
    }
    if need > capacity {
        return Err(Fail::new(
            NUMALAB_E_TRUNCATED,
            format!("the text needs {need} bytes; the buffer holds {capacity}"),
        ));
    }
    Ok(())
}

/// Copies `s` into a fixed message field, cut at a character boundary to
/// fit with its NUL.
pub fn fill_message(field: &mut [c_char], s: &str) {
    let room = field.len().saturating_sub(1);
    let mut n = s.len().min(room);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    for (d, b) in field.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    if let Some(end) = field.get_mut(n) {
        *end = 0;
    }
}

/// A set of ids as mask words (bit `i % 64` of word `i / 64`); ids beyond
/// the mask are left out.
pub fn fill_mask(mask: &mut [u64], ids: impl Iterator<Item = u32>) {
    mask.iter_mut().for_each(|w| *w = 0);
    for id in ids {
        if let Some(w) = mask.get_mut(id as usize / 64) {
            *w |= 1 << (id % 64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NUMALAB_E_OVERFLOW;

    #[test]
    fn text_arguments_are_bounded_and_checked() {
        // SAFETY: NUL-terminated literals and owned buffers.
        unsafe {
            assert_eq!(text(c"node:0".as_ptr(), "x").unwrap(), "node:0");
            assert_eq!(text(std::ptr::null(), "expr").unwrap_err(), null("expr"));
            let long = vec![b'a' as c_char; MAX_TEXT + 8];
            let e = text(long.as_ptr(), "expr").unwrap_err();
            assert_eq!(e.status, NUMALAB_E_OVERFLOW);
            let bad = [0xffu8 as c_char, 0];
            let e = text(bad.as_ptr(), "expr").unwrap_err();
            assert_eq!(e.message, "argument 'expr' is not UTF-8 text");
            assert_eq!(opt_text(std::ptr::null(), "p").unwrap(), None);
        }
    }

    #[test]
    fn lists_report_their_length_and_truncation() {
        let mut buf = [0u32; 2];
        let mut n = 0usize;
        // SAFETY: buffers sized as passed.
        unsafe {
            write_ids([3, 5].into_iter(), buf.as_mut_ptr(), 2, &mut n).unwrap();
            assert_eq!((buf, n), ([3, 5], 2));
            write_ids([1, 2, 3].into_iter(), std::ptr::null_mut(), 0, &mut n).unwrap();
            assert_eq!(n, 3);
            let e = write_ids([7, 8, 9].into_iter(), buf.as_mut_ptr(), 2, &mut n).unwrap_err();
            assert_eq!((e.status, buf, n), (NUMALAB_E_TRUNCATED, [7, 8], 3));
            let e = write_ids([1].into_iter(), std::ptr::null_mut(), 4, &mut n).unwrap_err();
            assert_eq!(e.status, NUMALAB_E_NULL);
            let e = write_ids([1].into_iter(), buf.as_mut_ptr(), usize::MAX, &mut n).unwrap_err();
            assert_eq!(e.status, NUMALAB_E_OVERFLOW);
            let e = ids(buf.as_ptr(), usize::MAX, "cpus").unwrap_err();
            assert_eq!(e.status, NUMALAB_E_OVERFLOW);
        }
    }

    #[test]
    fn text_results_are_always_terminated() {
        let mut buf = [1 as c_char; 4];
        let mut need = 0usize;
        // SAFETY: buffers sized as passed.
        unsafe {
            let e = write_text("hello", buf.as_mut_ptr(), 4, &mut need).unwrap_err();
            assert_eq!((e.status, need), (NUMALAB_E_TRUNCATED, 6));
            assert_eq!(
                std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
                "hel"
            );
            write_text("hi", buf.as_mut_ptr(), 4, std::ptr::null_mut()).unwrap();
            assert_eq!(
                std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
                "hi"
            );
            write_text("hello", std::ptr::null_mut(), 0, &mut need).unwrap();
            assert_eq!(need, 6);
        }
        let mut field = [1 as c_char; 5];
        fill_message(&mut field, "n\u{e9}\u{e9}d");
        // "n" + two bytes of "é" fit in 4; the second "é" would be cut.
        assert_eq!(
            &field[..4],
            &[b'n' as c_char, 0xc3u8 as c_char, 0xa9u8 as c_char, 0]
        );
        let mut mask = [u64::MAX; 2];
        fill_mask(&mut mask, [0, 65, 300].into_iter());
        assert_eq!(mask, [1, 2]);
    }
}
