//! Tests of the headless-Chromium harness (tests/common/browser.rs) on small
//! hand-written pages, so that report tests can trust what it says.
//! Chromium is software the README's test command installs
//! (scripts/install-deps.sh --test), not hardware: without it these tests fail.

use crate::common;

use common::browser::{self, png_pixel, png_size, render, RenderOptions, PNG_SIGNATURE};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Chromium must be here: the test command installs it. Panics (the test
/// fails, it does not skip) when it is not.
fn need_chromium(test: &str) {
    assert!(
        browser::chromium_path().is_some(),
        "{test}: chromium not found: run scripts/install-deps.sh --test (the README test command does) or set NUMALAB_CHROMIUM"
    );
}

/// Writes `html` to a file of its own and returns its path.
fn page(name: &str, html: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser_harness");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.html"));
    std::fs::write(&path, html).unwrap();
    path
}

/// Renders `path`, which must work, and prints how long it took (for
/// bench/browser.sh).
fn render_ok(path: &Path, opts: &RenderOptions) -> browser::Rendered {
    let start = Instant::now();
    let rendered = render(path, opts).unwrap_or_else(|e| panic!("render failed: {e}"));
    println!(
        "bench: rendered {} in {:.3} s",
        path.display(),
        start.elapsed().as_secs_f64()
    );
    rendered
}

#[test]
fn static_page_ids_text_and_screenshot() {
    need_chromium("static_page_ids_text_and_screenshot");
    let path = page(
        "static",
        r##"<!doctype html><html><head><meta charset="utf-8"><title>static report</title>
<style>body { font-family: sans-serif; margin: 0 } #a { color: #235; } .box { width: 100px; height: 40px; background: #8ac; }</style>
</head><body>
<h1 id="a">numalab</h1>
<div id="b" class="box"></div>
<p id="summary">3 NUMA nodes, 12 CPUs</p>
<svg width="120" height="60" viewBox="0 0 120 60"><rect x="5" y="5" width="50" height="50" fill="#c33"/>
<text id="svglabel" x="60" y="35">node 0</text></svg>
</body></html>"##,
    );
    let opts = RenderOptions::default();
    let r = render_ok(&path, &opts);
    assert!(
        r.console_errors.is_empty(),
        "console errors: {:?}",
        r.console_errors
    );
    for id in ["a", "b", "summary", "svglabel"] {
        assert!(
            r.element_ids.iter().any(|x| x == id),
            "no #{id} in {:?}",
            r.element_ids
        );
    }
    let summary = r.text_of("summary").expect("#summary text");
    assert!(summary.contains("3 NUMA nodes"), "#summary: {summary:?}");
    assert_eq!(r.text_of("svglabel").as_deref(), Some("node 0"));
    assert_eq!(r.text_of("nonexistent"), None);
    assert_eq!(r.title, "static report");
    assert_eq!(r.png[..8], PNG_SIGNATURE);
    let (w, h) = png_size(&r.png).expect("IHDR");
    assert!(w >= opts.width && h >= 1, "screenshot {w}x{h}");
    assert!(
        r.external_requests().is_empty(),
        "external: {:?}",
        r.external_requests()
    );
    assert!(
        r.requests
            .iter()
            .any(|u| u.starts_with("file://") && u.ends_with("/static.html")),
        "the document is not among the requests: {:?}",
        r.requests
    );
    let corner = png_pixel(&r.png, 0, 0).unwrap();
    assert_eq!(corner, [255, 255, 255, 255], "page background");
}

#[test]
fn console_errors_and_uncaught_exceptions() {
    need_chromium("console_errors_and_uncaught_exceptions");
    let opts = RenderOptions {
        full_page: false,
        ..RenderOptions::default()
    };
    let boom = page(
        "boom",
        r#"<!doctype html><p id="x">x</p><script>console.log("hello", 42); console.error("boom")</script>"#,
    );
    let r = render_ok(&boom, &opts);
    assert!(
        r.console_errors.iter().any(|m| m.contains("boom")),
        "{:?}",
        r.console_errors
    );
    assert!(
        !r.console_errors.iter().any(|m| m.contains("hello")),
        "{:?}",
        r.console_errors
    );
    assert!(
        r.console_messages
            .iter()
            .any(|m| m == "[console.log] hello 42"),
        "{:?}",
        r.console_messages
    );
    // Viewport only: exactly the viewport.
    assert_eq!(png_size(&r.png), Some((opts.width, opts.height)));

    let kaput = page(
        "kaput",
        r#"<!doctype html><script>throw new Error("kaput")</script>"#,
    );
    let r = render_ok(&kaput, &opts);
    assert!(
        r.console_errors.iter().any(|m| m.contains("kaput")),
        "{:?}",
        r.console_errors
    );

    let assert = page(
        "assert",
        r#"<!doctype html><script>console.assert(1 === 2, "arith")</script>"#,
    );
    let r = render_ok(&assert, &opts);
    assert!(
        r.console_errors.iter().any(|m| m.contains("arith")),
        "{:?}",
        r.console_errors
    );
}

#[test]
fn external_requests_are_listed() {
    need_chromium("external_requests_are_listed");
    let path = page(
        "external",
        r#"<!doctype html><img src="http://example.invalid/x.png"><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">"#,
    );
    let r = render_ok(&path, &RenderOptions::default());
    let external = r.external_requests();
    assert!(
        external.iter().any(|u| u == "http://example.invalid/x.png"),
        "{:?}",
        r.requests
    );
    assert!(
        external.iter().all(|u| !u.starts_with("data:")),
        "{external:?}"
    );
    println!("console errors of a failed load: {:?}", r.console_errors);
}

#[test]
fn csp_violations_are_errors() {
    need_chromium("csp_violations_are_errors");
    let path = page(
        "csp",
        r#"<!doctype html><meta http-equiv="Content-Security-Policy" content="script-src 'none'">
<script>document.title = "ran"</script>"#,
    );
    let r = render_ok(&path, &RenderOptions::default());
    assert_ne!(r.title, "ran");
    assert!(
        r.console_errors
            .iter()
            .any(|m| m.contains("Content Security Policy")),
        "{:?}",
        r.console_messages
    );
}

#[test]
fn dark_mode_is_emulated() {
    need_chromium("dark_mode_is_emulated");
    let path = page(
        "dark",
        r#"<!doctype html><style>
html, body { margin: 0; background: #fff; }
@media (prefers-color-scheme: dark) { html, body { background: #000; } }
</style><body><p id="t">theme</p></body>"#,
    );
    let light = render_ok(&path, &RenderOptions::default());
    let dark = render_ok(
        &path,
        &RenderOptions {
            dark: true,
            ..RenderOptions::default()
        },
    );
    assert_eq!(png_pixel(&light.png, 0, 0).unwrap(), [255, 255, 255, 255]);
    assert_eq!(png_pixel(&dark.png, 0, 0).unwrap(), [0, 0, 0, 255]);
}

#[test]
fn full_page_captures_the_whole_document() {
    need_chromium("full_page_captures_the_whole_document");
    let path = page(
        "tall",
        r#"<!doctype html><style>body { margin: 0 } div { height: 2500px; background: linear-gradient(#fff, #000); }</style><div id="tall"></div>"#,
    );
    let opts = RenderOptions {
        width: 800,
        height: 600,
        ..RenderOptions::default()
    };
    let r = render_ok(&path, &opts);
    assert_eq!(png_size(&r.png), Some((800, 2500)));
    let bottom = png_pixel(&r.png, 10, 2499).unwrap();
    assert!(bottom[0] < 20, "bottom of the page is not dark: {bottom:?}");
}

#[test]
fn errors_are_one_line() {
    need_chromium("errors_are_one_line");
    let path = page("plain", "<!doctype html><p>plain</p>");
    let err = browser::render_with(Path::new("/nonexistent"), &path, &RenderOptions::default())
        .expect_err("rendering with /nonexistent worked");
    println!("missing chromium: {err}");
    assert!(err.contains("/nonexistent"), "{err}");
    assert!(!err.contains('\n'), "{err:?}");

    let err = render(
        Path::new("/nonexistent/page.html"),
        &RenderOptions::default(),
    )
    .expect_err("rendering a missing file worked");
    assert!(
        err.contains("/nonexistent/page.html") && !err.contains('\n'),
        "{err:?}"
    );

    // A page that never finishes loading (its script spins for HANG) hits
    // the timeout, and the error says so and quotes stderr. The render gave
    // up while the page still hung; how close to its timeout is measured by
    // bench/browser.sh.
    const HANG: Duration = Duration::from_secs(60);
    let hang = page(
        "hang",
        &format!(
            "<!doctype html><script>const end = Date.now() + {}; while (Date.now() < end) {{}}</script>",
            HANG.as_millis()
        ),
    );
    let opts = RenderOptions {
        timeout: Duration::from_secs(4),
        ..RenderOptions::default()
    };
    let start = Instant::now();
    let err = render(&hang, &opts).expect_err("a hanging page rendered");
    let took = start.elapsed();
    println!("hanging page: {err}");
    println!(
        "bench: timed out in {:.3} s of a {:.3} s timeout",
        took.as_secs_f64(),
        opts.timeout.as_secs_f64()
    );
    assert!(
        took < HANG,
        "took {took:?}: waited for the page, not the timeout"
    );
    assert!(
        err.contains("timed out") && err.contains("chromium stderr") && !err.contains('\n'),
        "{err}"
    );
}
