//! OpenBLAS (the system's `libopenblas.so.0`) through its C interface: the
//! three routines `numalab blas` measures (`daxpy`, `dgemv`, `dgemm`) as
//! safe functions on slices that check every dimension before the call, the
//! library's thread control, and naive reference implementations for the
//! numerical check (docs/blas.md).
//!
//! The library is loaded at the first use (`dlopen` of `libopenblas.so.0`),
//! not linked: a numalab that never runs `blas` never pays OpenBLAS's
//! initialisation at load (0.25–0.3 s of every numalab command in the
//! 8-CPU emulated guest, none with `OPENBLAS_NUM_THREADS=1`: it grows with
//! the threads OpenBLAS prepares for, though it starts none then), and
//! numalab builds and runs without OpenBLAS installed: `blas` then says
//! what to install. Five routines and four getters are
//! looked up by name rather than declared through `cblas-sys` and
//! `openblas-src` (whose build helper refuses to build without a TLS
//! stack it would use only to download OpenBLAS's sources).
//!
//! OpenBLAS's integers (`blasint`) are C `int` in Debian's build (not the
//! 64-bit-integer `libopenblas64`), so every dimension must fit in `i32`.

use crate::random::SplitMix64;
use serde::{Deserialize, Serialize};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// The shared object loaded: Debian's `libopenblas0` (the pthread, OpenMP
/// or serial build, through its alternatives) installs it.
pub const LIBRARY: &str = "libopenblas.so.0";

/// The environment variable naming another OpenBLAS to load (a path or a
/// soname): a build of one's own, say.
pub const LIBRARY_VAR: &str = "NUMALAB_OPENBLAS";

// cblas.h's prototypes: (order,) (trans,) dimensions, alpha, each operand
// with its leading dimension or stride, beta, the result and its own.
type Daxpy = unsafe extern "C" fn(c_int, f64, *const f64, c_int, *mut f64, c_int);
#[rustfmt::skip]
type Dgemv = unsafe extern "C" fn(c_int, c_int, c_int, c_int, f64, *const f64, c_int, *const f64, c_int, f64, *mut f64, c_int);
#[rustfmt::skip]
type Dgemm = unsafe extern "C" fn(c_int, c_int, c_int, c_int, c_int, c_int, f64, *const f64, c_int, *const f64, c_int, f64, *mut f64, c_int);
type SetThreads = unsafe extern "C" fn(c_int);
type GetThreads = unsafe extern "C" fn() -> c_int;
type GetText = unsafe extern "C" fn() -> *const c_char;

/// OpenBLAS's entry points, looked up once.
struct OpenBlas {
    daxpy: Daxpy,
    dgemv: Dgemv,
    dgemm: Dgemm,
    set_num_threads: SetThreads,
    get_num_threads: GetThreads,
    get_config: GetText,
    get_corename: GetText,
}

/// The library, loaded at the first call; the error says what is missing
/// and what to install.
fn library() -> Result<&'static OpenBlas, BlasError> {
    static LOADED: OnceLock<Result<OpenBlas, String>> = OnceLock::new();
    LOADED
        .get_or_init(load)
        .as_ref()
        .map_err(|e| BlasError(e.clone()))
}

/// The last `dlerror()` text.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl call on this thread; it is copied at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "no reason given".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn load() -> Result<OpenBlas, String> {
    use std::os::unix::ffi::OsStrExt;
    let chosen = std::env::var_os(LIBRARY_VAR).filter(|v| !v.is_empty());
    let bytes = chosen
        .as_deref()
        .map_or(LIBRARY.as_bytes(), |v| v.as_bytes());
    let Ok(name) = std::ffi::CString::new(bytes) else {
        return Err(format!("{LIBRARY_VAR} holds a NUL byte"));
    };
    // SAFETY: a NUL-terminated name; the handle is kept for the process's
    // life (never closed: the function pointers below stay valid).
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(match chosen {
            Some(_) => format!(
                "OpenBLAS cannot be loaded ({}): {LIBRARY_VAR} names it; unset it to load {LIBRARY}",
                dl_error()
            ),
            None => format!(
                "OpenBLAS cannot be loaded ({}): install it (apt-get install libopenblas0)",
                dl_error()
            ),
        });
    }
    let symbol = |what: &CStr| -> Result<*mut c_void, String> {
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, what.as_ptr()) };
        if p.is_null() {
            Err(format!(
                "{} has no {} ({}): it is not OpenBLAS, or too old",
                name.to_string_lossy(),
                what.to_string_lossy(),
                dl_error()
            ))
        } else {
            Ok(p)
        }
    };
    // SAFETY: each symbol is the OpenBLAS function of that name, whose C
    // prototype (cblas.h, openblas_config.h) the field's type spells out.
    unsafe {
        Ok(OpenBlas {
            daxpy: as_fn(symbol(c"cblas_daxpy")?),
            dgemv: as_fn(symbol(c"cblas_dgemv")?),
            dgemm: as_fn(symbol(c"cblas_dgemm")?),
            set_num_threads: as_fn(symbol(c"openblas_set_num_threads")?),
            get_num_threads: as_fn(symbol(c"openblas_get_num_threads")?),
            get_config: as_fn(symbol(c"openblas_get_config")?),
            get_corename: as_fn(symbol(c"openblas_get_corename")?),
        })
    }
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `F` must be an `extern "C"` function pointer type matching the
/// symbol's true prototype.
unsafe fn as_fn<F: Copy>(p: *mut c_void) -> F {
    const { assert!(std::mem::size_of::<F>() == std::mem::size_of::<*mut c_void>()) };
    // SAFETY: same size (above); the caller vouches for the prototype.
    unsafe { std::mem::transmute_copy(&p) }
}

/// OpenBLAS loaded and kept to the calling thread: what every wrapper
/// calls first.
fn ready() -> Result<&'static OpenBlas, BlasError> {
    single_threaded()?;
    library()
}

/// `CblasRowMajor` of cblas.h.
const ROW_MAJOR: c_int = 101;
/// `CblasNoTrans` of cblas.h.
const NO_TRANS: c_int = 111;

/// Operands whose dimensions do not match or do not fit OpenBLAS's 32-bit
/// integers, or an OpenBLAS that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BlasError(pub String);

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
    /// `openblas_get_corename()`: the kernels OpenBLAS chose when it was
    /// loaded (`Haswell`, `SkylakeX`, `Zen`, or a generic `Prescott`).
    #[serde(default)]
    pub core: String,
    /// The widest vector instructions those kernels use, from the core's
    /// name (`sse`, `sse4.2`, `avx`, `avx2`, `avx512`; `unknown` for a
    /// name numalab does not know).
    #[serde(default)]
    pub core_isa: String,
    /// The widest this CPU runs, as the same names.
    #[serde(default)]
    pub cpu_isa: String,
    /// `OPENBLAS_CORETYPE` as this process saw it: the core is chosen from
    /// it when the library is loaded, so it must be set before numalab
    /// starts.
    #[serde(default)]
    pub env_openblas_coretype: Option<String>,
    /// Why OpenBLAS's kernels are below what the CPU runs, and what to set;
    /// `None` when they match (or cannot be told).
    #[serde(default)]
    pub core_warning: Option<String>,
}

/// Vector instruction levels, narrowest first.
const ISA_LEVELS: [&str; 5] = ["sse", "sse4.2", "avx", "avx2", "avx512"];

/// The widest vector instructions the kernels of an OpenBLAS core type
/// (`openblas_get_corename`, DYNAMIC_ARCH x86-64 names) use; `None` for a
/// name not in the list.
pub fn core_isa(core: &str) -> Option<&'static str> {
    let c = core.to_ascii_lowercase();
    Some(match c.as_str() {
        "prescott" | "core2" | "penryn" | "dunnington" | "atom" | "katmai" | "coppermine"
        | "northwood" | "banias" | "athlon" | "opteron" | "opteron_sse3" | "barcelona"
        | "bobcat" | "nano" | "generic" => "sse",
        "nehalem" => "sse4.2",
        "sandybridge" | "bulldozer" | "piledriver" | "steamroller" | "excavator" => "avx",
        "haswell" | "zen" => "avx2",
        "skylakex" | "cooperlake" | "sapphirerapids" => "avx512",
        _ => return None,
    })
}

/// The widest vector instructions this CPU runs, as [`core_isa`] names.
pub fn cpu_isa() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return "avx2";
        }
        if std::arch::is_x86_feature_detected!("avx") {
            return "avx";
        }
        if std::arch::is_x86_feature_detected!("sse4.2") {
            return "sse4.2";
        }
        "sse"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "unknown"
    }
}

/// The core type to ask for on a CPU of `cpu` level: the widest kernels
/// Debian's OpenBLAS 0.3.21 has for it (docs/blas.md, "OpenBLAS core type": on a Sapphire
/// Rapids server it chose `Prescott`; `SkylakeX` ran DGEMM 5x faster).
fn suggested_core(cpu: &str, vendor_amd: bool) -> &'static str {
    match cpu {
        "avx512" => "SkylakeX",
        "avx2" if vendor_amd => "Zen",
        "avx2" => "Haswell",
        "avx" if vendor_amd => "Bulldozer",
        "avx" => "Sandybridge",
        _ => "Nehalem",
    }
}

/// Why OpenBLAS's `core` runs narrower kernels than the CPU's `cpu` level,
/// naming the generic fallback and the variable to set; `None` when they
/// match or either is unknown.
pub fn core_warning(core: &str, cpu: &str, vendor_amd: bool) -> Option<String> {
    let core_level = core_isa(core)?;
    let have = ISA_LEVELS.iter().position(|l| *l == core_level)?;
    let want = ISA_LEVELS.iter().position(|l| *l == cpu)?;
    if have >= want {
        return None;
    }
    let generic = if have == 0 {
        "its generic kernels"
    } else {
        "kernels"
    };
    Some(format!(
        "OpenBLAS chose {generic} for {core} ({}) on a CPU that runs {cpu}: its GFLOPS are a fraction of what this machine can do (level 3 most). Set OPENBLAS_CORETYPE={} before starting numalab: OpenBLAS reads it only when it is loaded",
        ISA_LEVELS[have],
        suggested_core(cpu, vendor_amd)
    ))
}

/// Whether the CPU is AMD's (for the core type to suggest).
fn vendor_amd() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|t| t.contains("AuthenticAMD"))
        .unwrap_or(false)
}

/// Loads OpenBLAS and keeps its own thread pool out of every call (its
/// threads would run wherever the scheduler likes, escaping the
/// placement): one thread, the caller's. Idempotent; every wrapper calls
/// it first. The error says what to install when OpenBLAS cannot be loaded.
pub fn single_threaded() -> Result<&'static OpenBlasThreads, BlasError> {
    static DONE: OnceLock<OpenBlasThreads> = OnceLock::new();
    let lib = library()?;
    Ok(DONE.get_or_init(|| {
        let text = |p: *const c_char| {
            if p.is_null() {
                String::new()
            } else {
                // SAFETY: a static NUL-terminated string of the library.
                unsafe { CStr::from_ptr(p) }
                    .to_string_lossy()
                    .trim()
                    .to_string()
            }
        };
        // SAFETY: plain setters/getters of the library's global state;
        // `openblas_get_config` and `openblas_get_corename` return static
        // NUL-terminated strings.
        let (after, config, core) = unsafe {
            (lib.set_num_threads)(1);
            let config = text((lib.get_config)());
            let core = text((lib.get_corename)());
            ((lib.get_num_threads)(), config, core)
        };
        let cpu = cpu_isa();
        OpenBlasThreads {
            method: "openblas_set_num_threads(1) before the first BLAS call".into(),
            env_openblas_num_threads: std::env::var("OPENBLAS_NUM_THREADS").ok(),
            num_threads_after: after,
            config,
            core_isa: core_isa(&core).unwrap_or("unknown").into(),
            cpu_isa: cpu.into(),
            env_openblas_coretype: std::env::var("OPENBLAS_CORETYPE").ok(),
            core_warning: core_warning(&core, cpu, vendor_amd()),
            core,
        }
    }))
}

fn int(what: &str, v: usize) -> Result<c_int, BlasError> {
    c_int::try_from(v).map_err(|_| {
        BlasError(format!(
            "{what} = {v} exceeds OpenBLAS's 32-bit limit {}",
            c_int::MAX
        ))
    })
}

fn expect_len(what: &str, got: usize, want: Option<usize>) -> Result<(), BlasError> {
    match want {
        Some(w) if w == got => Ok(()),
        Some(w) => Err(BlasError(format!(
            "{what} has {got} elements, expected {w}"
        ))),
        None => Err(BlasError(format!("{what}: dimensions overflow"))),
    }
}

/// y = alpha·x + y.
pub fn daxpy(alpha: f64, x: &[f64], y: &mut [f64]) -> Result<(), BlasError> {
    expect_len("y", y.len(), Some(x.len()))?;
    let n = int("n", x.len())?;
    let lib = ready()?;
    // SAFETY: both slices hold n elements, unit stride; x is only read.
    unsafe { (lib.daxpy)(n, alpha, x.as_ptr(), 1, y.as_mut_ptr(), 1) };
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
) -> Result<(), BlasError> {
    expect_len("A", a.len(), rows.checked_mul(cols))?;
    expect_len("x", x.len(), Some(cols))?;
    expect_len("y", y.len(), Some(rows))?;
    let (m, n) = (int("rows", rows)?, int("cols", cols)?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    let lib = ready()?;
    // SAFETY: A holds m·n elements with leading dimension n, x n and y m,
    // as checked above; only y is written.
    unsafe {
        (lib.dgemv)(
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
) -> Result<(), BlasError> {
    expect_len("A", a.len(), m.checked_mul(k))?;
    expect_len("B", b.len(), k.checked_mul(n))?;
    expect_len("C", c.len(), m.checked_mul(n))?;
    let (mi, ni, ki) = (int("m", m)?, int("n", n)?, int("k", k)?);
    if mi == 0 || ni == 0 {
        return Ok(());
    }
    let lib = ready()?;
    // SAFETY: A holds m·k elements (leading dimension k), B k·n (n), C m·n
    // (n), as checked above; only C is written. A zero k is valid BLAS (C =
    // beta·C); lda must still be at least 1.
    unsafe {
        (lib.dgemm)(
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
        let t = single_threaded().unwrap();
        assert_eq!(t.num_threads_after, 1);
        assert!(t.config.contains("OpenBLAS"), "{}", t.config);
        // The core type ran is named, and is the one in the config line.
        assert!(!t.core.is_empty());
        assert!(t.config.contains(&t.core), "{} not in {}", t.core, t.config);
        assert_eq!(t.cpu_isa, cpu_isa());
    }

    /// Debian's 0.3.21 on a Sapphire Rapids server chose its generic
    /// Prescott kernels (docs/blas.md, "OpenBLAS core type"): that is warned about, with
    /// the variable to set; a core type that matches the CPU is not.
    #[test]
    fn a_generic_or_narrow_core_type_is_warned_about() {
        let w = core_warning("Prescott", "avx512", false).unwrap();
        assert!(w.contains("generic kernels for Prescott (sse)"), "{w}");
        assert!(w.contains("OPENBLAS_CORETYPE=SkylakeX"), "{w}");
        let w = core_warning("Sandybridge", "avx2", true).unwrap();
        assert!(w.contains("chose kernels for Sandybridge (avx)"), "{w}");
        assert!(w.contains("OPENBLAS_CORETYPE=Zen"), "{w}");
        assert!(core_warning("Haswell", "avx512", false)
            .unwrap()
            .contains("SkylakeX"));
        assert_eq!(core_warning("SkylakeX", "avx512", false), None);
        assert_eq!(core_warning("Zen", "avx2", true), None);
        // A core type newer than numalab's list decides nothing.
        assert_eq!(core_warning("FutureLake", "avx512", false), None);
        assert_eq!(core_isa("COOPERLAKE"), Some("avx512"));
        assert_eq!(core_isa("Nehalem"), Some("sse4.2"));
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
