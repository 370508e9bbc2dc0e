//! Opens an HTML file in a real headless Chromium and reports what the page
//! did: a PNG screenshot, console messages and errors, every network request,
//! the ids in the DOM and their text. The HTML reports numalab writes must be
//! self-contained and work offline; tests check that with [`render`].
//!
//! Chromium is driven over the Chrome DevTools Protocol (CDP): a WebSocket
//! carrying JSON commands (`{"id", "method", "params"}`) answered by the same
//! id, with events (`{"method", "params"}`) arriving in between. One browser
//! connection is opened; the page is a fresh target attached with
//! `flatten: true`, so page commands travel on the same socket tagged with its
//! `sessionId` and no HTTP request to `/json/list` is needed.
//!
//! Each render starts its own Chromium with a fresh profile and stops it
//! afterwards, whatever happens (a drop guard kills the process group and
//! removes the profile, also when a test panics). Renders in one test process
//! take turns: Chromium's start-up is CPU-heavy and the test machines are
//! small, so parallel browsers would only make timeouts more likely.
//!
//! Flags, and why:
//! - `--headless`: no display; screenshots still render the real page.
//! - `--no-sandbox`: the tests run as root, where Chromium refuses to start
//!   with its sandbox.
//! - `--disable-gpu`: there is no GPU; software rendering is deterministic.
//! - `--disable-quic`, `--disable-background-networking`,
//!   `--disable-component-update`, `--disable-sync`, `--disable-default-apps`,
//!   `--disable-extensions`, `--no-first-run`: without them Chromium connects
//!   to Google services on its own, which a closed network refuses (slowly,
//!   and with errors on stderr); they also keep the request list the page's.
//! - `--mute-audio`, `--hide-scrollbars`: no sound device; screenshots
//!   without scroll bars.
//! - `--user-data-dir=<fresh temp dir>`: no state shared between renders or
//!   with a user's profile.
//! - `--remote-debugging-port=0`: the kernel picks a free port; Chromium prints
//!   `DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID` on stderr.
//! - `about:blank`: start with nothing loaded.

use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tungstenite::{Message, WebSocket};

/// Chromium's command-line flags, before `--user-data-dir`; see the module
/// documentation for the reason of each.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
];

/// Full-page screenshots are cut at this height (CSS pixels).
const MAX_HEIGHT: u32 = 30_000;
/// Taken by each render for its whole length: one browser at a time.
static TURN: Mutex<()> = Mutex::new(());
/// Lines of Chromium's stderr kept for error messages.
const STDERR_LINES: usize = 50;
/// Lines of Chromium's stderr quoted in an error message.
const STDERR_QUOTED: usize = 6;
/// The eight bytes every PNG file starts with.
pub const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

/// How to render a page.
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// Viewport width in CSS pixels (device scale factor 1).
    pub width: u32,
    /// Viewport height in CSS pixels.
    pub height: u32,
    /// Emulate `prefers-color-scheme: dark` (else `light`).
    pub dark: bool,
    /// Capture the whole document (up to 30000 px high), not only the
    /// viewport.
    pub full_page: bool,
    /// Limit for the whole render, Chromium's start-up included.
    pub timeout: Duration,
    /// A JavaScript expression evaluated in the settled page before the
    /// screenshot (a promise is awaited); its JSON value lands in
    /// [`Rendered::probe`]. For what only the browser knows: laid-out
    /// sizes, text boxes.
    pub probe: Option<String>,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            width: 1280,
            height: 900,
            dark: false,
            full_page: true,
            timeout: Duration::from_secs(60),
            probe: None,
        }
    }
}

/// What Chromium saw when it opened the page.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The screenshot, PNG bytes.
    pub png: Vec<u8>,
    /// `console.error` and failed `console.assert` messages, uncaught
    /// exceptions (`Uncaught Error: x (url:line:col)`), and log entries of
    /// level error such as failed resource loads and CSP violations
    /// (`text (url)`).
    pub console_errors: Vec<String>,
    /// Every console message, exception and log entry, as
    /// `[console.TYPE] text`, `[exception] text` or `[log.SOURCE.LEVEL] text`.
    pub console_messages: Vec<String>,
    /// The URL of every network request the page made, the document's
    /// included, in order.
    pub requests: Vec<String>,
    /// Every `id` attribute in the DOM after load, in document order.
    pub element_ids: Vec<String>,
    /// `document.title`.
    pub title: String,
    /// `innerText` (`textContent` where there is none, as in SVG) of the
    /// first element with each id.
    pub texts: BTreeMap<String, String>,
    /// The value of [`RenderOptions::probe`] (null without one).
    pub probe: Value,
}

impl Rendered {
    /// The text of the element with this id, captured at render time.
    pub fn text_of(&self, id: &str) -> Option<String> {
        self.texts.get(id).cloned()
    }

    /// The requests that left the file: requests whose scheme is not
    /// `file:`, `data:` or `about:`.
    pub fn external_requests(&self) -> Vec<String> {
        self.requests
            .iter()
            .filter(|url| !is_local_url(url))
            .cloned()
            .collect()
    }
}

fn is_local_url(url: &str) -> bool {
    let scheme = url.split(':').next().unwrap_or("").to_ascii_lowercase();
    matches!(scheme.as_str(), "file" | "data" | "about")
}

/// Where Chromium is: `$NUMALAB_CHROMIUM` when set (taken as given, so a
/// wrong value fails loudly instead of skipping tests), else
/// `/usr/bin/chromium`, else `chromium` on `PATH`; `None` if there is none.
pub fn chromium_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NUMALAB_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let usual = Path::new("/usr/bin/chromium");
    if usual.is_file() {
        return Some(usual.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file())
}

/// Opens `html` (a file; Chromium gets its `file://` URL) in a fresh headless
/// Chromium found by [`chromium_path`], waits for the load event, a complete
/// document and two animation frames, and returns what it saw. Errors are one
/// line and end with the tail of Chromium's stderr.
pub fn render(html: &Path, opts: &RenderOptions) -> Result<Rendered, String> {
    let chromium = chromium_path().ok_or_else(|| {
        "chromium not found: set NUMALAB_CHROMIUM or install it (Debian package chromium)"
            .to_string()
    })?;
    render_with(&chromium, html, opts)
}

/// [`render`] with this Chromium executable.
pub fn render_with(chromium: &Path, html: &Path, opts: &RenderOptions) -> Result<Rendered, String> {
    let html = html
        .canonicalize()
        .map_err(|e| format!("cannot render {}: {e}", html.display()))?;
    let url = file_url(&html);

    let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    let deadline = Instant::now() + opts.timeout;

    let mut browser = Browser::spawn(chromium)?;
    let outcome = browser
        .devtools_url(deadline, opts.timeout)
        .and_then(|ws_url| Page::open(&ws_url, deadline, opts.timeout)?.render(&url, opts));
    outcome.map_err(|e| {
        one_line(&format!(
            "chromium on {url}: {e}; {}",
            browser.stderr_tail()
        ))
    })
}

/// The running Chromium: killed, reaped and its profile removed on drop.
struct Browser {
    child: Child,
    profile: PathBuf,
    stderr: Arc<Mutex<VecDeque<String>>>,
    devtools: Option<mpsc::Receiver<String>>,
}

impl Browser {
    fn spawn(chromium: &Path) -> Result<Browser, String> {
        let profile = fresh_dir("numalab-chromium")?;
        let mut command = Command::new(chromium);
        command
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--remote-debugging-port=0")
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group, so that drop can kill the zygotes,
            // renderers and utility processes with the browser.
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        // With it the browser dies when the thread that started it does,
        // even if the test process is killed before drop runs.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&profile);
                return Err(format!("cannot start chromium {}: {e}", chromium.display()));
            }
        };
        let pipe = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = mpsc::channel();
        let tail = Arc::clone(&stderr);
        // Drains stderr for Chromium's whole life (a full pipe would block
        // it), passes the DevTools URL on and keeps the last lines.
        let drain = move || {
            for line in BufReader::new(pipe).split(b'\n') {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line).trim_end().to_string();
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
                let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
                if tail.len() == STDERR_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        };
        let browser = Browser {
            child,
            profile,
            stderr,
            devtools: Some(rx),
        };
        thread::Builder::new()
            .name("chromium-stderr".into())
            .spawn(drain)
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        Ok(browser)
    }

    /// Waits for the `DevTools listening on ws://...` line.
    fn devtools_url(&mut self, deadline: Instant, timeout: Duration) -> Result<String, String> {
        let rx = self.devtools.take().expect("asked once");
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(url) => Ok(url),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err(format!("no DevTools URL on stderr within {timeout:?}"))
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // stderr closed: Chromium is gone or going.
                let mut status = None;
                for _ in 0..20 {
                    if let Ok(Some(s)) = self.child.try_wait() {
                        status = Some(s);
                        break;
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                Err(match status {
                    Some(s) => format!("chromium exited ({s}) before DevTools listened"),
                    None => "chromium closed its stderr before DevTools listened".into(),
                })
            }
        }
    }

    /// The last lines of stderr, minus the D-Bus complaints every headless
    /// Chromium without a system bus prints.
    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let lines: Vec<&str> = tail
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.contains(":ERROR:dbus/"))
            .collect();
        if lines.is_empty() {
            return "chromium stderr: nothing but D-Bus noise".into();
        }
        let start = lines.len().saturating_sub(STDERR_QUOTED);
        format!("chromium stderr: {}", lines[start..].join(" | "))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Kill the whole group while the browser is not reaped yet, so its
        // pid (the group id) cannot have been reused.
        if let Ok(None) = self.child.try_wait() {
            let pgid = self.child.id() as libc::pid_t;
            // SAFETY: a plain system call on a process group we created.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        // Helpers may take a moment to die and stop writing to the profile.
        for _ in 0..20 {
            if std::fs::remove_dir_all(&self.profile).is_ok() || !self.profile.exists() {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A CDP connection to the browser with one page target attached.
struct Page {
    ws: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
    /// Events of our session, in arrival order.
    events: Vec<Value>,
    deadline: Instant,
    timeout: Duration,
}

impl Page {
    fn open(ws_url: &str, deadline: Instant, timeout: Duration) -> Result<Page, String> {
        let addr: SocketAddr = ws_url
            .strip_prefix("ws://")
            .and_then(|rest| rest.split('/').next())
            .and_then(|host| host.parse().ok())
            .ok_or_else(|| format!("unexpected DevTools URL {ws_url}"))?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("timed out after {timeout:?} before connecting"));
        }
        let stream = TcpStream::connect_timeout(&addr, left)
            .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
        stream.set_nodelay(true).ok();
        stream
            .set_read_timeout(Some(left))
            .and_then(|()| stream.set_write_timeout(Some(left)))
            .map_err(|e| format!("socket timeouts: {e}"))?;
        // Screenshots of long pages are large messages.
        let config = tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(512 << 20))
            .max_frame_size(Some(512 << 20));
        let (ws, _) = tungstenite::client::client_with_config(ws_url, stream, Some(config))
            .map_err(|e| format!("WebSocket handshake with {ws_url}: {e}"))?;
        let mut page = Page {
            ws,
            session: String::new(),
            next_id: 0,
            events: Vec::new(),
            deadline,
            timeout,
        };
        let target = page.browser_call("Target.createTarget", json!({"url": "about:blank"}))?;
        let target_id = str_at(&target, "/targetId")?;
        let attached = page.browser_call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )?;
        page.session = str_at(&attached, "/sessionId")?;
        Ok(page)
    }

    fn render(mut self, url: &str, opts: &RenderOptions) -> Result<Rendered, String> {
        for domain in ["Page", "Runtime", "Log", "Network"] {
            self.call(&format!("{domain}.enable"), json!({}))?;
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": opts.width, "height": opts.height,
                   "deviceScaleFactor": 1, "mobile": false}),
        )?;
        let scheme = if opts.dark { "dark" } else { "light" };
        self.call(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        )?;

        let since = self.events.len();
        let nav = self.call("Page.navigate", json!({"url": url}))?;
        if let Some(error) = nav.get("errorText").and_then(Value::as_str) {
            return Err(format!("navigation failed: {error}"));
        }
        self.wait_event("Page.loadEventFired", since)?;
        // Settle: a complete document and two frames painted. The timer is a
        // fallback in case a hidden page gets no animation frames.
        self.evaluate(
            "new Promise(done => {
                const frames = () => requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
                if (document.readyState === 'complete') frames();
                else addEventListener('load', frames, { once: true });
                setTimeout(() => done(false), 2000);
            })",
        )?;
        let dom = self.evaluate(
            "(() => {
                const ids = [], texts = [];
                for (const el of document.querySelectorAll('[id]')) {
                    const id = el.getAttribute('id');
                    ids.push(id);
                    texts.push([id, typeof el.innerText === 'string' ? el.innerText : (el.textContent || '')]);
                }
                return { title: document.title, ids, texts };
            })()",
        )?;
        let probe = match &opts.probe {
            Some(expression) => self.evaluate(expression)?,
            None => Value::Null,
        };

        let mut shot = json!({"format": "png"});
        if opts.full_page {
            let metrics = self.call("Page.getLayoutMetrics", json!({}))?;
            let size = |key: &str, at_least: u32| {
                let css = metrics
                    .pointer(&format!("/cssContentSize/{key}"))
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                (css.ceil() as u32).max(at_least)
            };
            let width = size("width", opts.width);
            let height = size("height", opts.height).min(MAX_HEIGHT);
            shot["captureBeyondViewport"] = json!(true);
            shot["clip"] = json!({"x": 0, "y": 0, "width": width, "height": height, "scale": 1});
        }
        let shot = self.call("Page.captureScreenshot", shot)?;
        let png = base64_decode(&str_at(&shot, "/data")?)
            .ok_or("Page.captureScreenshot: data is not base64")?;

        let mut rendered = Rendered {
            png,
            title: dom["title"].as_str().unwrap_or_default().to_string(),
            probe,
            ..Rendered::default()
        };
        for id in dom["ids"].as_array().into_iter().flatten() {
            rendered
                .element_ids
                .push(id.as_str().unwrap_or_default().to_string());
        }
        for pair in dom["texts"].as_array().into_iter().flatten() {
            let (id, text) = (pair[0].as_str(), pair[1].as_str());
            if let (Some(id), Some(text)) = (id, text) {
                rendered
                    .texts
                    .entry(id.to_string())
                    .or_insert_with(|| text.to_string());
            }
        }
        for event in &self.events {
            record(event, &mut rendered);
        }
        let _ = self.ws.close(None);
        Ok(rendered)
    }

    /// Runs a JavaScript expression in the page (awaiting a promise) and
    /// returns its value.
    fn evaluate(&mut self, expression: &str) -> Result<Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
        )?;
        if let Some(details) = result.get("exceptionDetails") {
            return Err(format!("script failed: {}", exception_text(details)));
        }
        Ok(result
            .pointer("/result/value")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// A command to the page's session.
    fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let session = self.session.clone();
        self.send(method, params, Some(&session))
    }

    /// A command to the browser itself.
    fn browser_call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.send(method, params, None)
    }

    /// Sends a command and reads messages until its answer, keeping the
    /// events that arrive meanwhile.
    fn send(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.ws
            .send(Message::text(message.to_string()))
            .map_err(|e| format!("{method}: cannot send: {e}"))?;
        loop {
            let message = self.read(method)?;
            if message.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                let text = error.get("message").and_then(Value::as_str).unwrap_or("?");
                return Err(format!("{method}: {text}"));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }

    /// Reads messages until an event `method` of our session, received at or
    /// after index `since` of the event list.
    fn wait_event(&mut self, method: &str, since: usize) -> Result<Value, String> {
        let mut seen = since;
        loop {
            if let Some(event) = self.events[seen..].iter().find(|e| e["method"] == method) {
                return Ok(event.clone());
            }
            seen = self.events.len();
            self.read(method)?;
        }
    }

    /// Reads one protocol message, within the deadline. Events of our session
    /// are kept; a crash of our page is an error.
    fn read(&mut self, waiting_for: &str) -> Result<Value, String> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "timed out after {:?} waiting for {waiting_for}",
                    self.timeout
                ));
            }
            self.ws
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(|e| format!("socket timeout: {e}"))?;
            let text = match self.ws.read() {
                Ok(Message::Text(text)) => text.to_string(),
                Ok(Message::Binary(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(Message::Close(_)) => {
                    return Err(format!("connection closed waiting for {waiting_for}"))
                }
                Ok(_) => continue, // ping, pong: tungstenite answers pings itself
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue; // the loop head reports the timeout
                }
                Err(e) => {
                    return Err(format!(
                        "reading the DevTools socket waiting for {waiting_for}: {e}"
                    ))
                }
            };
            let message: Value = serde_json::from_str(&text)
                .map_err(|e| format!("bad DevTools message waiting for {waiting_for}: {e}"))?;
            if message.get("method").is_some() {
                if message["sessionId"].as_str() != Some(self.session.as_str()) {
                    if message["method"] == "Target.detachedFromTarget"
                        && message.pointer("/params/sessionId").and_then(Value::as_str)
                            == Some(self.session.as_str())
                        && !self.session.is_empty()
                    {
                        return Err(format!("page detached waiting for {waiting_for}"));
                    }
                    continue;
                }
                if message["method"] == "Inspector.targetCrashed" {
                    return Err(format!("page crashed waiting for {waiting_for}"));
                }
                self.events.push(message.clone());
            }
            return Ok(message);
        }
    }
}

/// Files one event of the page in `rendered`.
fn record(event: &Value, rendered: &mut Rendered) {
    let params = &event["params"];
    match event["method"].as_str().unwrap_or_default() {
        "Runtime.consoleAPICalled" => {
            let kind = params["type"].as_str().unwrap_or("log");
            let args: Vec<String> = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(remote_object_text)
                .collect();
            let text = args.join(" ");
            rendered
                .console_messages
                .push(format!("[console.{kind}] {text}"));
            match kind {
                "error" => rendered.console_errors.push(text),
                "assert" => rendered
                    .console_errors
                    .push(format!("Assertion failed: {text}")),
                _ => {}
            }
        }
        "Runtime.exceptionThrown" => {
            let text = exception_text(&params["exceptionDetails"]);
            rendered
                .console_messages
                .push(format!("[exception] {text}"));
            rendered.console_errors.push(text);
        }
        "Log.entryAdded" => {
            let entry = &params["entry"];
            let level = entry["level"].as_str().unwrap_or("?");
            let source = entry["source"].as_str().unwrap_or("?");
            let mut text = entry["text"].as_str().unwrap_or_default().to_string();
            if let Some(url) = entry["url"].as_str().filter(|u| !u.is_empty()) {
                text = format!("{text} ({url})");
            }
            rendered
                .console_messages
                .push(format!("[log.{source}.{level}] {text}"));
            if level == "error" {
                rendered.console_errors.push(text);
            }
        }
        "Network.requestWillBeSent" => {
            if let Some(url) = params.pointer("/request/url").and_then(Value::as_str) {
                rendered.requests.push(url.to_string());
            }
        }
        _ => {}
    }
}

/// A console argument as text: strings as they are, other values as JSON,
/// objects by their description.
fn remote_object_text(object: &Value) -> String {
    match object.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(value) => value.to_string(),
        None => object
            .get("unserializableValue")
            .or_else(|| object.get("description"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| object["type"].as_str().unwrap_or("?"))
            .to_string(),
    }
}

/// `Uncaught Error: message (url:line:column)` from CDP exception details.
fn exception_text(details: &Value) -> String {
    let prefix = details["text"].as_str().unwrap_or("exception");
    let description = details
        .pointer("/exception/description")
        .and_then(Value::as_str)
        .and_then(|d| d.lines().next());
    let mut text = match description {
        Some(d) if prefix != d => format!("{prefix} {d}"),
        _ => prefix.to_string(),
    };
    if let Some(url) = details["url"].as_str().filter(|u| !u.is_empty()) {
        let line = details["lineNumber"].as_u64().unwrap_or(0) + 1;
        let column = details["columnNumber"].as_u64().unwrap_or(0) + 1;
        text = format!("{text} ({url}:{line}:{column})");
    }
    text
}

fn str_at(value: &Value, pointer: &str) -> Result<String, String> {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("no {pointer} in DevTools answer {value}"))
}

/// The `file://` URL of an absolute path, percent-encoding all but the
/// characters that are safe in a path.
fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte) {
            url.push(byte as char);
        } else {
            let _ = write!(url, "%{byte:02X}");
        }
    }
    url
}

/// A new, empty directory under the system temp dir.
fn fresh_dir(prefix: &str) -> Result<PathBuf, String> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last_error = None;
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) => last_error = Some(e),
        }
    }
    Err(format!(
        "cannot create a profile dir in {}: {last_error:?}",
        std::env::temp_dir().display()
    ))
}

/// Joins the lines of a message into one.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Decodes standard base64 (padding optional); `None` on a bad character.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut bits, mut count) = (0u32, 0u32);
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            b'\r' | b'\n' => continue,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// Width and height from a PNG's IHDR chunk (bytes 16..24).
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    if png.len() < 24 || png[..8] != PNG_SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(png[16..20].try_into().ok()?);
    let height = u32::from_be_bytes(png[20..24].try_into().ok()?);
    Some((width, height))
}

/// The RGBA colour of pixel (x, y) of a PNG, decoded with the `png` crate.
pub fn png_pixel(png: &[u8], x: u32, y: u32) -> Result<[u8; 4], String> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().map_err(|e| format!("PNG: {e}"))?;
    let size = reader.output_buffer_size().ok_or("PNG: too large")?;
    let mut buf = vec![0; size];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("PNG: {e}"))?;
    if x >= info.width || y >= info.height {
        return Err(format!(
            "pixel ({x}, {y}) outside {}x{}",
            info.width, info.height
        ));
    }
    let channels = info.color_type.samples();
    let at = y as usize * info.line_size + x as usize * channels;
    let px = &buf[at..at + channels];
    Ok(match info.color_type {
        png::ColorType::Rgba => [px[0], px[1], px[2], px[3]],
        png::ColorType::Rgb => [px[0], px[1], px[2], 255],
        png::ColorType::GrayscaleAlpha => [px[0], px[0], px[0], px[1]],
        png::ColorType::Grayscale => [px[0], px[0], px[0], 255],
        png::ColorType::Indexed => return Err("PNG: palette not expanded".into()),
    })
}
