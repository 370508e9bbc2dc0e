//! OpenBLAS (the system's `libopenblas.so.0`) through its C interface: the
//! three routines `numalab blas` measures (`daxpy`, `dgemv`, `dgemm`) as
//! safe functions on slices that check every dimension before the call, the
//! library's thread control, and naive reference implementations for the
//! numerical check (docs/blas.md).
//!
//! The routines are declared here rather than through `cblas-sys` and
//! `openblas-src`: `openblas-src` with only its `system` feature still
//! compiles its build helper, which refuses to build without a TLS stack
//! (`rustls` or `native-tls`) it would use only to download OpenBLAS
//! sources. Five declarations against the installed library are smaller
//! than that dependency tree, and link exactly the library Debian's
//! `libopenblas-dev` installs.
//!
//! OpenBLAS's integers (`blasint`) are C `int` in Debian's build (not the
//! 64-bit-integer `libopenblas64`), so every dimension must fit in `i32`.

use crate::random::SplitMix64;
use serde::{Deserialize, Serialize};
use std::ffi::{c_char, c_int, CStr};
use std::sync::OnceLock;

#[link(name = "openblas")]
extern "C" {
    fn cblas_daxpy(n: c_int, alpha: f64, x: *const f64, incx: c_int, y: *mut f64, incy: c_int);
    #[allow(clippy::too_many_arguments)]
    fn cblas_dgemv(
        order: c_int,
        trans: c_int,
        m: c_int,
        n: c_int,
        alpha: f64,
        a: *const f64,
        lda: c_int,
        x: *const f64,
        incx: c_int,
        beta: f64,
        y: *mut f64,
        incy: c_int,
    );
    #[allow(clippy::too_many_arguments)]
    fn cblas_dgemm(
        order: c_int,
        trans_a: c_int,
        trans_b: c_int,
        m: c_int,
        n: c_int,
        k: c_int,
        alpha: f64,
        a: *const f64,
        lda: c_int,
        b: *const f64,
        ldb: c_int,
        beta: f64,
        c: *mut f64,
        ldc: c_int,
    );
    fn openblas_set_num_threads(n: c_int);
    fn openblas_get_num_threads() -> c_int;
    fn openblas_get_config() -> *const c_char;
}

/// `CblasRowMajor` of cblas.h.
const ROW_MAJOR: c_int = 101;
/// `CblasNoTrans` of cblas.h.
const NO_TRANS: c_int = 111;

/// Operands whose dimensions do not match, or do not fit OpenBLAS's
/// 32-bit integers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DimensionError(pub String);

/// How OpenBLAS was kept to the calling thread, and what it says it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenBlasThreads {
    /// How: the call made before the first BLAS call.
    pub method: String,
    /// `OPENBLAS_NUM_THREADS` as this process saw it (read by OpenBLAS only
    /// when the library is loaded, so not relied on).
    pub env_openblas_num_threads: Option<String>,
    /// What `openblas_get_num_threads()` returned after the call.
    pub num_threads_after: i32,
    /// `openblas_get_config()`: version, build options and core.
    pub config: String,
}

/// Keeps OpenBLAS's own thread pool out of every call (its threads would
/// run wherever the scheduler likes, escaping the placement): one thread,
/// the caller's. Idempotent; every wrapper calls it first.
pub fn single_threaded() -> &'static OpenBlasThreads {
    static DONE: OnceLock<OpenBlasThreads> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: plain setters/getters of the library's global state;
        // `openblas_get_config` returns a static NUL-terminated string.
        let (after, config) = unsafe {
            openblas_set_num_threads(1);
            let p = openblas_get_config();
            let config = if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().trim().to_string()
            };
            (openblas_get_num_threads(), config)
        };
        OpenBlasThreads {
            method: "openblas_set_num_threads(1) before the first BLAS call".into(),
            env_openblas_num_threads: std::env::var("OPENBLAS_NUM_THREADS").ok(),
            num_threads_after: after,
            config,
        }
    })
}

fn int(what: &str, v: usize) -> Result<c_int, DimensionError> {
    c_int::try_from(v).map_err(|_| {
        DimensionError(format!(
            "{what} = {v} exceeds OpenBLAS's 32-bit limit {}",
            c_int::MAX
        ))
    })
}

fn expect_len(what: &str, got: usize, want: Option<usize>) -> Result<(), DimensionError> {
    match want {
        Some(w) if w == got => Ok(()),
        Some(w) => Err(DimensionError(format!(
            "{what} has {got} elements, expected {w}"
        ))),
        None => Err(DimensionError(format!("{what}: dimensions overflow"))),
    }
}

/// y = alpha·x + y.
pub fn daxpy(alpha: f64, x: &[f64], y: &mut [f64]) -> Result<(), DimensionError> {
    expect_len("y", y.len(), Some(x.len()))?;
    let n = int("n", x.len())?;
    single_threaded();
    // SAFETY: both slices hold n elements, unit stride; x is only read.
    unsafe { cblas_daxpy(n, alpha, x.as_ptr(), 1, y.as_mut_ptr(), 1) };
    Ok(())
}

/// y = alpha·A·x + beta·y, A of `rows` x `cols` in row-major order.
pub fn dgemv(
    rows: usize,
    cols: usize,
    alpha: f64,
    a: &[f64],
    x: &[f64],
    beta: f64,
    y: &mut [f64],
) -> Result<(), DimensionError> {
    expect_len("A", a.len(), rows.checked_mul(cols))?;
    expect_len("x", x.len(), Some(cols))?;
    expect_len("y", y.len(), Some(rows))?;
    let (m, n) = (int("rows", rows)?, int("cols", cols)?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    single_threaded();
    // SAFETY: A holds m·n elements with leading dimension n, x n and y m,
    // as checked above; only y is written.
    unsafe {
        cblas_dgemv(
            ROW_MAJOR,
            NO_TRANS,
            m,
            n,
            alpha,
            a.as_ptr(),
            n,
            x.as_ptr(),
            1,
            beta,
            y.as_mut_ptr(),
            1,
        )
    };
    Ok(())
}

/// C = alpha·A·B + beta·C, row-major, A `m` x `k`, B `k` x `n`, C `m` x `n`.
#[allow(clippy::too_many_arguments)]
pub fn dgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: &[f64],
    b: &[f64],
    beta: f64,
    c: &mut [f64],
) -> Result<(), DimensionError> {
    expect_len("A", a.len(), m.checked_mul(k))?;
    expect_len("B", b.len(), k.checked_mul(n))?;
    expect_len("C", c.len(), m.checked_mul(n))?;
    let (mi, ni, ki) = (int("m", m)?, int("n", n)?, int("k", k)?);
    if mi == 0 || ni == 0 {
        return Ok(());
    }
    single_threaded();
    // SAFETY: A holds m·k elements (leading dimension k), B k·n (n), C m·n
    // (n), as checked above; only C is written. A zero k is valid BLAS (C =
    // beta·C); lda must still be at least 1.
    unsafe {
        cblas_dgemm(
            ROW_MAJOR,
            NO_TRANS,
            NO_TRANS,
            mi,
            ni,
            ki,
            alpha,
            a.as_ptr(),
            ki.max(1),
            b.as_ptr(),
            ni,
            beta,
            c.as_mut_ptr(),
            ni,
        )
    };
    Ok(())
}

/// The naive y = alpha·x + y the check compares with.
pub fn naive_daxpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// The naive row-major y = alpha·A·x + beta·y.
pub fn naive_dgemv(cols: usize, alpha: f64, a: &[f64], x: &[f64], beta: f64, y: &mut [f64]) {
    for (i, yi) in y.iter_mut().enumerate() {
        let dot: f64 = (0..cols).map(|j| a[i * cols + j] * x[j]).sum();
        *yi = alpha * dot + beta * *yi;
    }
}

/// The naive row-major C = alpha·A·B + beta·C.
#[allow(clippy::too_many_arguments)]
pub fn naive_dgemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f64,
    a: &[f64],
    b: &[f64],
    beta: f64,
    c: &mut [f64],
) {
    for i in 0..m {
        for j in 0..n {
            let dot: f64 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            c[i * n + j] = alpha * dot + beta * c[i * n + j];
        }
    }
}

/// Largest relative error the check accepts. Values are uniform in
/// [-1, 1) and sums have at most 64 terms, so rounding differences between
/// summation orders stay near 64·2^-53 ≈ 7e-15 of the largest result.
pub const MAX_REL_ERROR: f64 = 1e-12;

/// Largest dimension the numerical check tries.
pub const CHECK_MAX_N: usize = 64;

/// The outcome of comparing OpenBLAS with the naive implementations.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NumericCheck {
    /// The check ran and every result was within `bound`.
    pub checked: bool,
    /// Largest relative error seen: max |blas - naive| / max(1, max |naive|).
    pub max_rel_error: f64,
    pub bound: f64,
    /// Dimensions tried, 1 to [`CHECK_MAX_N`].
    pub sizes: Vec<usize>,
    /// The first comparison over the bound, if any.
    pub failure: Option<String>,
}

fn random_vec(rng: &mut SplitMix64, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.unit() * 2.0 - 1.0).collect()
}

/// max |got - want| / max(1, max |want|): relative to the result's scale,
/// not per element, so that a result near zero does not inflate it.
pub fn rel_error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1.0f64, |s, w| s.max(w.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0.0f64, |d, (g, w)| d.max((g - w).abs()));
    if got.len() != want.len() || got.iter().any(|g| !g.is_finite()) {
        return f64::INFINITY;
    }
    diff / scale
}

/// Runs daxpy, dgemv and dgemm on random operands of every dimension in
/// `sizes` (each clamped to 1..=[`CHECK_MAX_N`]; dgemm also non-square) and
/// compares with the naive implementations.
pub fn check_numerics(sizes: &[usize], seed: u64) -> NumericCheck {
    let mut rng = SplitMix64::new(seed);
    let mut worst = 0.0f64;
    let mut failure = None;
    let mut note = |name: &str, n: usize, e: f64| {
        worst = worst.max(e);
        if (e.is_nan() || e > MAX_REL_ERROR) && failure.is_none() {
            failure = Some(format!(
                "{name} n={n}: relative error {e:e} above {MAX_REL_ERROR:e}"
            ));
        }
    };
    let sizes: Vec<usize> = sizes.iter().map(|&n| n.clamp(1, CHECK_MAX_N)).collect();
    for &n in &sizes {
        let alpha = rng.unit() * 2.0 - 1.0;
        let beta = rng.unit() * 2.0 - 1.0;
        let x = random_vec(&mut rng, n);
        let y0 = random_vec(&mut rng, n);
        let (mut y, mut want) = (y0.clone(), y0.clone());
        let e = match daxpy(alpha, &x, &mut y) {
            Ok(()) => {
                naive_daxpy(alpha, &x, &mut want);
                rel_error(&y, &want)
            }
            Err(_) => f64::INFINITY,
        };
        note("daxpy", n, e);

        let rows = (n / 2).max(1);
        let a = random_vec(&mut rng, rows * n);
        let y0 = random_vec(&mut rng, rows);
        let (mut y, mut want) = (y0.clone(), y0.clone());
        let e = match dgemv(rows, n, alpha, &a, &x, beta, &mut y) {
            Ok(()) => {
                naive_dgemv(n, alpha, &a, &x, beta, &mut want);
                rel_error(&y, &want)
            }
            Err(_) => f64::INFINITY,
        };
        note("dgemv", n, e);

        let (m, k) = (n, n.div_ceil(2) + 1);
        let a = random_vec(&mut rng, m * k);
        let b = random_vec(&mut rng, k * n);
        let c0 = random_vec(&mut rng, m * n);
        let (mut c, mut want) = (c0.clone(), c0.clone());
        let e = match dgemm(m, n, k, alpha, &a, &b, beta, &mut c) {
            Ok(()) => {
                naive_dgemm(m, n, k, alpha, &a, &b, beta, &mut want);
                rel_error(&c, &want)
            }
            Err(_) => f64::INFINITY,
        };
        note("dgemm", n, e);
    }
    NumericCheck {
        checked: failure.is_none(),
        max_rel_error: worst,
        bound: MAX_REL_ERROR,
        sizes,
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openblas_is_kept_to_one_thread_and_names_itself() {
        let t = single_threaded();
        assert_eq!(t.num_threads_after, 1);
        assert!(t.config.contains("OpenBLAS"), "{}", t.config);
    }

    #[test]
    fn every_routine_matches_the_naive_one_for_n_1_to_64() {
        let sizes: Vec<usize> = (1..=CHECK_MAX_N).collect();
        let c = check_numerics(&sizes, 7);
        assert!(c.checked, "{:?}", c.failure);
        assert!(c.max_rel_error <= MAX_REL_ERROR, "{}", c.max_rel_error);
        assert_eq!(c.sizes.len(), 64);
    }

    #[test]
    fn known_values() {
        let mut y = vec![1.0, 2.0];
        daxpy(2.0, &[3.0, 4.0], &mut y).unwrap();
        assert_eq!(y, vec![7.0, 10.0]);
        // [1 2; 3 4] · [1, 1] = [3, 7]
        let mut y = vec![1.0, 1.0];
        dgemv(2, 2, 1.0, &[1.0, 2.0, 3.0, 4.0], &[1.0, 1.0], 10.0, &mut y).unwrap();
        assert_eq!(y, vec![13.0, 17.0]);
        let mut c = vec![0.0; 4];
        let a = [1.0, 2.0, 3.0, 4.0];
        dgemm(2, 2, 2, 1.0, &a, &[1.0, 0.0, 0.0, 1.0], 0.0, &mut c).unwrap();
        assert_eq!(c, a.to_vec());
    }

    #[test]
    fn bad_dimensions_are_errors_not_calls() {
        let mut y = vec![0.0; 3];
        assert_eq!(
            daxpy(1.0, &[1.0; 2], &mut y).unwrap_err().0,
            "y has 3 elements, expected 2"
        );
        assert_eq!(
            dgemv(2, 2, 1.0, &[0.0; 3], &[0.0; 2], 0.0, &mut [0.0; 2])
                .unwrap_err()
                .0,
            "A has 3 elements, expected 4"
        );
        assert_eq!(
            dgemv(2, 2, 1.0, &[0.0; 4], &[0.0; 3], 0.0, &mut [0.0; 2])
                .unwrap_err()
                .0,
            "x has 3 elements, expected 2"
        );
        assert_eq!(
            dgemm(2, 3, 2, 1.0, &[0.0; 4], &[0.0; 6], 0.0, &mut [0.0; 5])
                .unwrap_err()
                .0,
            "C has 5 elements, expected 6"
        );
        assert_eq!(
            dgemm(usize::MAX, 2, 2, 1.0, &[], &[0.0; 4], 0.0, &mut [])
                .unwrap_err()
                .0,
            "A: dimensions overflow"
        );
        assert_eq!(
            int("n", 1 << 31).unwrap_err().0,
            "n = 2147483648 exceeds OpenBLAS's 32-bit limit 2147483647"
        );
    }

    #[test]
    fn rel_error_sees_a_wrong_result() {
        assert_eq!(rel_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((rel_error(&[1.0, 2.5], &[1.0, 2.0]) - 0.25).abs() < 1e-15);
        assert_eq!(rel_error(&[1.0], &[1.0, 2.0]), f64::INFINITY);
        assert_eq!(rel_error(&[f64::NAN], &[1.0]), f64::INFINITY);
    }
}
