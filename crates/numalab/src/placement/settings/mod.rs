//! System settings numalab changes for a while, and the journal that brings
//! them back whatever happens to the process that changed them.
//!
//! The only system-wide settings numalab writes are the kernel's
//! weighted-interleave weights (`/sys/kernel/mm/mempolicy/weighted_interleave/nodeN`,
//! for `place` and the measurements during a buffer's prefault, for `run`
//! during the command's life). Writing one of them also turns the kernel's
//! automatic weights off (`weighted_interleave/auto`, spelled `__auto_type`
//! by some 6.18 kernels), which is therefore recorded and put back too.
//! Nothing else under /sys or /proc is written: THP, hugetlbfs pools and
//! NUMA balancing are only read, and the user is told how to change them.
//!
//! One mechanism covers them all, [`SettingGuard`]:
//!
//! 1. Under an exclusive lock on the journal, the setting's current value is
//!    read and recorded in a journal entry (written to a temporary file and
//!    renamed into place) *before* the setting is changed.
//! 2. The guard restores the value when dropped: normal returns, errors and
//!    panics (unwinding) alike. Guards of one process that ask for the same
//!    value share it; the last one restores.
//! 3. While a guard is held and SIGINT, SIGTERM or SIGHUP would end the
//!    process (their default action), a handler restores every held setting,
//!    prints one line and exits with 128 + the signal number. A process that
//!    handles these signals itself (the report's cooperative cancellation,
//!    `run`'s forwarding to the child) keeps its handling and restores
//!    through the guards as it returns.
//! 4. A SIGKILL (or a second Ctrl-C during a report) leaves the journal entry
//!    behind: the next numalab command [`replay_journal`]s it, restoring what
//!    a dead writer left changed, and says so in one line.
//!
//! A setting held by another live numalab process is never overwritten:
//! a guard waits up to [`Journal::wait`] for it, then fails naming the
//! holder. Liveness is the writer's pid *and* its start time, so a reused
//! pid is not mistaken for the writer.
//!
//! # Where the journal lives
//!
//! - `$NUMALAB_STATE_DIR` ([`STATE_DIR_ENV`]) when set (tests use a scratch
//!   directory);
//! - otherwise, for root, `/run/numalab/journal`: `/run` is emptied at boot,
//!   exactly when the kernel resets these settings, so an entry never
//!   outlives what it describes;
//! - otherwise `$XDG_RUNTIME_DIR/numalab/journal` (also per boot).
//!
//! An entry also records the boot id, so an entry in a directory that
//! survives a reboot is discarded rather than replayed. Entries are not
//! fsynced: a power loss resets the settings as well.

use crate::sys::restore::{handler, watchdog};

use super::PlacementError as E;
use super::PlacementError;
use crate::sys::process;
use handler::{claim_slot, release_slot, BlockedSignals, VALUE_CAP};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The environment variable that chooses the journal's directory.
pub const STATE_DIR_ENV: &str = "NUMALAB_STATE_DIR";

/// The directory of the kernel's weighted-interleave weights, relative to `/`.
pub const WEIGHTS_DIR: &str = "sys/kernel/mm/mempolicy/weighted_interleave";

/// The names the kernel's automatic-weights switch goes by in
/// [`WEIGHTS_DIR`]: `auto`, or `__auto_type` where the kernel's C sources
/// define `auto` as a keyword (defined beside the signal handler that
/// restores them).
pub use crate::sys::restore::AUTO_NAMES;

/// How long a guard waits for a setting another numalab process holds.
const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// Entries a replay looks at, and the size of one: the journal is ours, but
/// it is still input.
const MAX_ENTRIES: usize = 1024;
const MAX_ENTRY_BYTES: u64 = 4096;

/// The name of the lock file in the journal directory.
const LOCK_FILE: &str = ".numalab-settings.lock";

/// How every entry's file name begins: a journal directory may be one a
/// user chose (`NUMALAB_STATE_DIR`), and only files of this shape are ours.
const ENTRY_PREFIX: &str = "numalab-setting.";

/// What every entry says it is, and the shape's version: a file without
/// them is someone else's, read and left alone.
const MAGIC: &str = "numalab settings journal";
const ENTRY_VERSION: u32 = 1;

/// The journal of changed settings, and the root the settings' paths are
/// relative to (`/` but in tests).
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
    root: PathBuf,
    wait: Duration,
}

/// One journal entry: a setting, the value to put back, and who changed it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Entry {
    /// [`MAGIC`].
    magic: String,
    /// [`ENTRY_VERSION`].
    version: u32,
    /// The setting's path relative to the root, e.g.
    /// `sys/kernel/mm/mempolicy/weighted_interleave/node0`.
    key: String,
    /// The value before the change.
    saved: String,
    /// The value written; `None` for a setting that changes as a side
    /// effect of another (the automatic-weights switch).
    set: Option<String>,
    pid: u32,
    /// Field 22 of /proc/PID/stat: with the pid, names one process.
    start_time: u64,
    boot_id: String,
    /// Order of the changes in the writer: later ones are undone first.
    seq: u64,
}

impl Journal {
    /// The journal of this system (see the module documentation for the
    /// directory; an unprivileged user without `XDG_RUNTIME_DIR` gets
    /// `/run/user/UID/numalab/journal`, which only matters if such a user
    /// may write a setting at all).
    pub fn system() -> &'static Journal {
        static SYSTEM: OnceLock<Journal> = OnceLock::new();
        SYSTEM.get_or_init(|| {
            let euid = process::effective_uid();
            let dir = match (
                std::env::var_os(STATE_DIR_ENV),
                std::env::var_os("XDG_RUNTIME_DIR"),
            ) {
                (Some(d), _) if !d.is_empty() => PathBuf::from(d),
                _ if euid == 0 => PathBuf::from("/run/numalab/journal"),
                (_, Some(x)) if !x.is_empty() => PathBuf::from(x).join("numalab/journal"),
                _ => PathBuf::from(format!("/run/user/{euid}/numalab/journal")),
            };
            Journal::new(dir, "/")
        })
    }

    /// A journal in `dir` for settings under `root`.
    pub fn new(dir: impl Into<PathBuf>, root: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            root: root.into(),
            wait: DEFAULT_WAIT,
        }
    }

    /// The same journal, waiting at most `wait` for a setting another
    /// numalab process holds.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The journal's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long a guard waits for a setting another numalab process holds.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The file of a setting.
    pub fn path_of(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.dir
            .join(format!("{ENTRY_PREFIX}{}.json", key.replace('/', "%")))
    }

    /// Restores every setting a numalab process changed and did not live to
    /// restore; returns one line per setting, saying what was done.
    /// Entries of live processes are left alone; entries from an earlier
    /// boot, and entries whose setting was already back, are removed
    /// quietly. Cheap when there is nothing to do: one directory read.
    pub fn replay(&self) -> Vec<String> {
        let Ok(list) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let names: Vec<PathBuf> = list
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_entry_name(p))
            .take(MAX_ENTRIES)
            .collect();
        self.replay_entries(names)
    }

    /// [`Journal::replay`] of the entries listed as `names`.
    fn replay_entries(&self, names: Vec<PathBuf>) -> Vec<String> {
        if names.is_empty() {
            return Vec::new();
        }
        if let Err(why) = check_dir(&self.dir) {
            return vec![format!(
                "ignored the journal of changed settings in {}: {why}",
                self.dir.display()
            )];
        }
        let me = process_identity();
        let mut dead: Vec<(PathBuf, Entry)> = Vec::new();
        let mut lines = Vec::new();
        for p in names {
            match read_entry(&p) {
                Ok(e) if is_alive(e.pid, e.start_time) || me == Some((e.pid, e.start_time)) => {}
                Ok(e) => dead.push((p, e)),
                // Gone since the listing: its writer restored its setting
                // and removed it (a live process's entry, which another
                // test's numalab warned of as "not a journal entry numalab
                // wrote (No such file or directory)"). A dangling link is
                // still there, and still said.
                Err(_) if std::fs::symlink_metadata(&p).is_err() => {}
                // Not ours, or not ours to trust: never removed, never replayed.
                Err(why) => lines.push(format!(
                    "ignored {}: not a journal entry numalab wrote ({why})",
                    p.display()
                )),
            }
        }
        if dead.is_empty() {
            return lines;
        }
        let Ok(_lock) = self.lock() else {
            return lines;
        };
        // Later changes of one writer are undone first: weights before the
        // automatic-weights switch they turned off.
        dead.sort_by(|a, b| (a.1.pid, b.1.seq).cmp(&(b.1.pid, a.1.seq)));
        let boot = boot_id();
        for (p, e) in dead {
            // Another replay may have handled it while we waited for the lock.
            if read_entry(&p).ok().as_ref() != Some(&e) {
                continue;
            }
            if let Some(line) = self.undo(&p, &e, &boot) {
                lines.push(line);
            }
        }
        lines
    }

    /// Puts back what a dead writer's entry records, removes the entry
    /// (unless the setting could not be written for a reason that may pass),
    /// and says what happened; `None` when there is nothing worth saying.
    fn undo(&self, entry_path: &Path, e: &Entry, boot: &str) -> Option<String> {
        if !is_known_key(&e.key) {
            return Some(format!(
                "ignored the journal entry {}: {} is not a setting numalab changes",
                entry_path.display(),
                e.key
            ));
        }
        if e.boot_id != boot {
            // The kernel reset the setting at boot.
            let _ = std::fs::remove_file(entry_path);
            return None;
        }
        let path = self.path_of(&e.key);
        let who = format!("numalab pid {}", e.pid);
        let current = match read_value(&path) {
            Ok(v) => v,
            Err(err) => {
                let _ = std::fs::remove_file(entry_path);
                return Some(format!(
                    "could not restore {} to {}, left changed by {who}, which ended without restoring it: {err}",
                    path.display(),
                    e.saved
                ));
            }
        };
        if current == e.saved {
            let _ = std::fs::remove_file(entry_path);
            return None;
        }
        if e.set.as_ref().is_some_and(|s| *s != current) {
            let _ = std::fs::remove_file(entry_path);
            return Some(format!(
                "left {} at {current}: {who} ended without restoring it to {}, but it has changed since",
                path.display(),
                e.saved
            ));
        }
        match std::fs::write(&path, &e.saved) {
            Ok(()) => {
                let _ = std::fs::remove_file(entry_path);
                Some(format!(
                    "restored {} to {}, left changed by {who}, which ended without restoring it",
                    path.display(),
                    e.saved
                ))
            }
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => Some(format!(
                "{} is still changed by {who}, which ended without restoring it to {}: writing it needs root ({err}); the next numalab command run as root restores it",
                path.display(),
                e.saved
            )),
            Err(err) => {
                // The kernel refuses the old value (e.g. automatic weights
                // without bandwidth data): retrying would not help.
                let _ = std::fs::remove_file(entry_path);
                Some(format!(
                    "could not restore {} to {}, left changed by {who}, which ended without restoring it: the kernel refuses it ({err})",
                    path.display(),
                    e.saved
                ))
            }
        }
    }

    /// Creates the directory (owner only) and takes the journal's lock,
    /// held until the returned file is closed (or the process ends, however).
    fn lock(&self) -> io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        check_dir(&self.dir).map_err(io::Error::other)?;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(self.dir.join(LOCK_FILE))?;
        if !f.metadata()?.is_file() {
            return Err(io::Error::other(format!(
                "{LOCK_FILE} there is not a regular file"
            )));
        }
        process::lock_exclusive(&f)?;
        Ok(f)
    }

    fn journal_error(&self, e: io::Error) -> PlacementError {
        E::Os(format!(
            "cannot keep the journal of changed system settings in {} ({e}); numalab changes a system setting only once its old value is recorded there ({STATE_DIR_ENV} names another directory)",
            self.dir.display()
        ))
    }
}

/// Replays [`Journal::system`] (see [`Journal::replay`]); the lines to show
/// the user.
pub fn replay_journal() -> Vec<String> {
    Journal::system().replay()
}

/// Whether `key` is a setting numalab changes: the weighted-interleave
/// weights and their automatic switch. A journal entry naming anything else
/// is never written back.
fn is_known_key(key: &str) -> bool {
    let Some(name) = key
        .strip_prefix(WEIGHTS_DIR)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return false;
    };
    AUTO_NAMES.contains(&name)
        || name
            .strip_prefix("node")
            .is_some_and(|n| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a path has the name of a journal entry ([`ENTRY_PREFIX`]).
fn is_entry_name(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(ENTRY_PREFIX) && n.ends_with(".json"))
}

/// This process's effective user.
fn euid() -> u32 {
    process::effective_uid()
}

/// Why the journal directory cannot be trusted, if it cannot: it must be a
/// real directory (not a link) of this user or root that nobody else may
/// write, or anyone could plant or swap entries in it.
fn check_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !m.is_dir() {
        return Err("it is not a directory (a link is not followed)".into());
    }
    if m.uid() != euid() && m.uid() != 0 {
        return Err(format!("it belongs to user {}, not to this user", m.uid()));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "others may write it (mode {:o}); give {STATE_DIR_ENV} a directory only this user can write",
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Reads a journal entry, trusting only a regular file (never a link, a
/// FIFO or a device: opened without following or blocking) of this user,
/// nobody else may write, of our shape ([`MAGIC`], [`ENTRY_VERSION`]),
/// whose values are values of its setting.
fn read_entry(p: &Path) -> Result<Entry, String> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                "a symbolic link".to_string()
            } else {
                e.to_string()
            }
        })?;
    let m = f.metadata().map_err(|e| e.to_string())?;
    if !m.is_file() {
        return Err("not a regular file".into());
    }
    if m.uid() != euid() {
        return Err(format!("owned by user {}, not this user", m.uid()));
    }
    if m.mode() & 0o022 != 0 {
        return Err(format!(
            "others may write it (mode {:o})",
            m.mode() & 0o7777
        ));
    }
    let mut text = String::new();
    f.take(MAX_ENTRY_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_ENTRY_BYTES {
        return Err(format!("larger than {MAX_ENTRY_BYTES} bytes"));
    }
    let e: Entry = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if e.magic != MAGIC || e.version != ENTRY_VERSION {
        return Err(format!(
            "it says it is '{}' version {}, not '{MAGIC}' version {ENTRY_VERSION}",
            e.magic, e.version
        ));
    }
    if !is_known_key(&e.key) {
        return Err(format!("{} is not a setting numalab changes", e.key));
    }
    for v in std::iter::once(&e.saved).chain(e.set.as_ref()) {
        if !is_value_of(&e.key, v) {
            return Err(format!("'{v}' is not a value of {}", e.key));
        }
    }
    Ok(e)
}

/// Whether `v` is a value the kernel prints or takes for the setting
/// `key`: a weight from 1 to 255, or a boolean for the automatic switch.
fn is_value_of(key: &str, v: &str) -> bool {
    if AUTO_NAMES.iter().any(|n| key.ends_with(&format!("/{n}"))) {
        return matches!(v, "true" | "false" | "1" | "0" | "Y" | "N" | "y" | "n");
    }
    v.len() <= 3
        && v.bytes().all(|b| b.is_ascii_digit())
        && v.parse::<u16>().is_ok_and(|w| (1..=255).contains(&w))
}

/// A setting's value as the kernel prints it, without the newline.
fn read_value(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(VALUE_CAP as u64)
        .read_to_string(&mut text)?;
    Ok(text.trim().to_string())
}

/// This process's pid and start time.
fn process_identity() -> Option<(u32, u64)> {
    static ME: OnceLock<Option<(u32, u64)>> = OnceLock::new();
    *ME.get_or_init(|| {
        let pid = std::process::id();
        Some((pid, start_time(pid)?))
    })
}

/// Field 22 of /proc/PID/stat (start time in clock ticks after boot), or
/// `None` when there is no such process or it is a zombie.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

fn is_alive(pid: u32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// The settings this process holds.

/// One setting held by this process, shared by the guards that asked for
/// the same value.
struct Held {
    path: PathBuf,
    entry_path: PathBuf,
    saved: String,
    set: Option<String>,
    refs: usize,
    slot: usize,
}

static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());
/// Signalled when a setting is released, for guards waiting to set another
/// value of it.
static RELEASED: Condvar = Condvar::new();
static SEQ: AtomicU64 = AtomicU64::new(0);

fn held() -> MutexGuard<'static, Vec<Held>> {
    // A panic while the list was locked leaves it consistent: every change
    // to it is a single push, decrement or removal.
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// A system setting changed (or recorded, for [`SettingGuard::watch`]) for
/// the guard's life; the old value comes back on drop, on SIGINT, SIGTERM
/// or SIGHUP, and after a SIGKILL at the next numalab command (see the
/// module documentation).
#[derive(Debug)]
pub struct SettingGuard {
    path: PathBuf,
    saved: String,
}

impl SettingGuard {
    /// Records the setting `key` (a path relative to the journal's root) in
    /// the journal and writes `value` to it.
    pub fn set(journal: &Journal, key: &str, value: &str) -> Result<Self, PlacementError> {
        Self::acquire(journal, key, Some(value))
    }

    /// Records the setting `key` in the journal without writing it, for a
    /// setting that changes as a side effect of others; it is put back
    /// (when it differs) like the others.
    pub fn watch(journal: &Journal, key: &str) -> Result<Self, PlacementError> {
        Self::acquire(journal, key, None)
    }

    /// The value before the change, as the kernel printed it.
    pub fn saved(&self) -> &str {
        &self.saved
    }

    /// The setting's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn acquire(journal: &Journal, key: &str, value: Option<&str>) -> Result<Self, PlacementError> {
        let path = journal.path_of(key);
        let show = path.display();
        if value.is_some_and(|v| v.len() >= VALUE_CAP || v.contains('\n')) {
            return Err(E::Invalid(format!(
                "'{}' is not a value for {show}",
                value.unwrap_or_default()
            )));
        }
        // Unprivileged users learn that first, not that the journal is missing.
        if let (Some(_), Err(e)) = (value, process::may_write(&path)) {
            return Err(if e.kind() == io::ErrorKind::PermissionDenied {
                E::Permission(format!("writing {show} needs root ({e})"))
            } else {
                E::Os(format!("cannot write {show}: {e}"))
            });
        }
        let deadline = Instant::now() + journal.wait;
        let mut list = held();
        loop {
            if let Some(h) = list.iter_mut().find(|h| h.path == path) {
                if h.set.as_deref() == value || value.is_none() {
                    h.refs += 1;
                    let saved = h.saved.clone();
                    return Ok(Self { path, saved });
                }
                // Another part of this process set another value: wait for it.
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(E::Os(format!(
                        "{show} is held at {} by this numalab run and cannot also be {}: waited {:.1} s",
                        h.set.as_deref().unwrap_or("its old value"),
                        value.unwrap_or("?"),
                        journal.wait.as_secs_f64()
                    )));
                }
                list = RELEASED
                    .wait_timeout(list, left)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                continue;
            }
            match Self::first_hold(journal, key, &path, value)? {
                Some(h) => {
                    let saved = h.saved.clone();
                    list.push(h);
                    return Ok(Self { path, saved });
                }
                None => {
                    // Held by another numalab process: poll, without the lock.
                    if Instant::now() >= deadline {
                        let holder = read_entry(&journal.entry_path(key))
                            .map(|e| format!("numalab pid {}", e.pid))
                            .unwrap_or_else(|_| "another numalab process".into());
                        return Err(E::Os(format!(
                            "{show} is in use by {holder} (these settings are system-wide): waited {:.0} s; try again when it has ended",
                            journal.wait.as_secs_f64()
                        )));
                    }
                    drop(list);
                    std::thread::sleep(Duration::from_millis(50));
                    list = held();
                }
            }
        }
    }

    /// Journals and changes a setting no guard of this process holds;
    /// `None` when another live numalab process holds it.
    fn first_hold(
        journal: &Journal,
        key: &str,
        path: &Path,
        value: Option<&str>,
    ) -> Result<Option<Held>, PlacementError> {
        let me = process_identity().ok_or_else(|| {
            E::Os("cannot read this process's start time in /proc/self/stat".into())
        })?;
        let _lock = journal.lock().map_err(|e| journal.journal_error(e))?;
        let entry_path = journal.entry_path(key);
        if let Ok(e) = read_entry(&entry_path) {
            if is_alive(e.pid, e.start_time) && (e.pid, e.start_time) != me {
                return Ok(None);
            }
            // A dead writer's change comes back before we record the value.
            let _ = journal.undo(&entry_path, &e, &boot_id());
        }
        let saved = read_value(path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                E::Unsupported(format!("{} does not exist on this kernel", path.display()))
            } else {
                E::Os(format!("cannot read {}: {e}", path.display()))
            }
        })?;
        let entry = Entry {
            magic: MAGIC.into(),
            version: ENTRY_VERSION,
            key: key.to_string(),
            saved: saved.clone(),
            set: value.map(str::to_string),
            pid: me.0,
            start_time: me.1,
            boot_id: boot_id(),
            seq: SEQ.fetch_add(1, Ordering::SeqCst),
        };
        // The slot first: from then on SIGINT, SIGTERM and SIGHUP reach the
        // handler, which restores the value and removes the entry. An entry
        // written before the handler was in place stayed behind when a
        // signal's default action ended the process in between.
        let slot = claim_slot(path, &entry_path, &saved).map_err(E::Os)?;
        {
            let _blocked = BlockedSignals::new();
            if let Err(e) = write_entry(&entry_path, &entry) {
                release_slot(slot);
                return Err(journal.journal_error(e));
            }
        }
        // Before the value changes: a kill in between leaves the value as
        // it was, which the watchdog sees and leaves.
        watchdog::held(&watchdog::Held {
            slot,
            order: entry.seq,
            path,
            entry: &entry_path,
            lock: &journal.dir.join(LOCK_FILE),
            saved: &saved,
            set: value,
        });
        if let Some(v) = value.filter(|v| *v != saved) {
            let _blocked = BlockedSignals::new();
            if let Err(e) = std::fs::write(path, v) {
                release_slot(slot);
                let _ = std::fs::remove_file(&entry_path);
                watchdog::released(slot);
                return Err(if e.kind() == io::ErrorKind::PermissionDenied {
                    E::Permission(format!("writing {} needs root ({e})", path.display()))
                } else {
                    E::Os(format!("writing {v} to {}: {e}", path.display()))
                });
            }
        }
        Ok(Some(Held {
            path: path.to_path_buf(),
            entry_path,
            saved,
            set: value.map(str::to_string),
            refs: 1,
            slot,
        }))
    }
}

impl Drop for SettingGuard {
    fn drop(&mut self) {
        let mut list = held();
        let Some(i) = list.iter().position(|h| h.path == self.path) else {
            return;
        };
        list[i].refs -= 1;
        if list[i].refs > 0 {
            return;
        }
        let h = list.remove(i);
        {
            let _blocked = BlockedSignals::new();
            let restored = match read_value(&h.path) {
                Ok(v) if v == h.saved => true,
                _ => match std::fs::write(&h.path, &h.saved) {
                    Ok(()) => true,
                    // See `AUTO_STAYS_OFF`.
                    Err(e)
                        if e.raw_os_error() == Some(libc::ENODEV)
                            && h.path.file_name().is_some_and(|n| {
                                AUTO_NAMES.iter().any(|a| n == std::ffi::OsStr::new(a))
                            }) =>
                    {
                        eprintln!(
                            "numalab: warning: automatic interleave weights stay off ({} reads false, not {}): the kernel has no memory bandwidth data to turn them on ({e}); the weights are the same as before",
                            h.path.display(),
                            h.saved
                        );
                        true
                    }
                    Err(_) => false,
                },
            };
            release_slot(h.slot);
            // A value that could not be written keeps its entry, for the
            // next numalab command to retry and report.
            if restored {
                let _ = std::fs::remove_file(&h.entry_path);
                watchdog::released(h.slot);
            }
        }
        drop(list);
        RELEASED.notify_all();
    }
}

fn write_entry(path: &Path, e: &Entry) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let text = serde_json::to_string(e).map_err(io::Error::other)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    // A left-over of an earlier process of this pid is ours: the name has
    // our prefix in a directory only we may write.
    let _ = std::fs::remove_file(&tmp);
    // Never through a link, never an existing file: the rename replaces the
    // entry itself (a link there is replaced, not followed).
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    if let Err(err) = f.write_all(text.as_bytes()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(err);
    }
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::restore::handler::{is_auto_path, stopped_line};

    /// A scratch journal and settings root with weight files in it.
    struct Scratch {
        base: PathBuf,
        journal: Journal,
    }

    impl Scratch {
        fn new(name: &str) -> Self {
            let base = std::env::temp_dir()
                .join(format!("numalab-settings-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&base);
            let weights = base.join("root").join(WEIGHTS_DIR);
            std::fs::create_dir_all(&weights).unwrap();
            for (f, v) in [("node0", "1\n"), ("node1", "1\n"), ("auto", "true\n")] {
                std::fs::write(weights.join(f), v).unwrap();
            }
            let journal = Journal::new(base.join("journal"), base.join("root"))
                .with_wait(Duration::from_millis(200));
            Self { base, journal }
        }

        fn key(f: &str) -> String {
            format!("{WEIGHTS_DIR}/{f}")
        }

        fn value(&self, f: &str) -> String {
            read_value(&self.journal.path_of(&Self::key(f))).unwrap()
        }

        fn write(&self, f: &str, v: &str) {
            std::fs::write(self.journal.path_of(&Self::key(f)), v).unwrap();
        }

        fn entries(&self) -> Vec<Entry> {
            let mut v: Vec<Entry> = std::fs::read_dir(self.journal.dir())
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .filter(|e| is_entry_name(&e.path()))
                        .map(|e| read_entry(&e.path()).unwrap())
                        .collect()
                })
                .unwrap_or_default();
            v.sort_by_key(|e| e.seq);
            v
        }

        /// An entry as a dead process would have left it.
        fn dead_entry(&self, f: &str, saved: &str, set: Option<&str>, seq: u64, pid: u32) {
            let e = Entry {
                magic: MAGIC.into(),
                version: ENTRY_VERSION,
                key: Self::key(f),
                saved: saved.into(),
                set: set.map(Into::into),
                pid,
                start_time: 12345,
                boot_id: boot_id(),
                seq,
            };
            std::fs::create_dir_all(self.journal.dir()).unwrap();
            write_entry(&self.journal.entry_path(&e.key), &e).unwrap();
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.base);
        }
    }

    /// The pid of a process that has ended and been reaped.
    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    }

    #[test]
    fn a_guard_journals_before_and_restores_after() {
        let s = Scratch::new("guard");
        {
            let auto = SettingGuard::watch(&s.journal, &Scratch::key("auto")).unwrap();
            let g = SettingGuard::set(&s.journal, &Scratch::key("node0"), "3").unwrap();
            assert_eq!((g.saved(), auto.saved()), ("1", "true"));
            assert_eq!(s.value("node0"), "3");
            // The kernel turns automatic weights off when a weight is written.
            s.write("auto", "false\n");
            let e = s.entries();
            assert_eq!(e.len(), 2, "{e:?}");
            assert_eq!(
                (e[0].key.as_str(), e[0].saved.as_str(), e[0].set.as_deref()),
                (Scratch::key("auto").as_str(), "true", None)
            );
            assert_eq!((e[1].saved.as_str(), e[1].set.as_deref()), ("1", Some("3")));
            assert_eq!(e[1].pid, std::process::id());
        }
        assert_eq!(
            (s.value("node0"), s.value("auto")),
            ("1".into(), "true".into())
        );
        assert!(s.entries().is_empty());
    }

    #[test]
    fn guards_of_one_value_share_it_and_the_last_restores() {
        let s = Scratch::new("share");
        let a = SettingGuard::set(&s.journal, &Scratch::key("node1"), "5").unwrap();
        let b = SettingGuard::set(&s.journal, &Scratch::key("node1"), "5").unwrap();
        assert_eq!(b.saved(), "1");
        drop(a);
        assert_eq!(s.value("node1"), "5");
        assert_eq!(s.entries().len(), 1);
        drop(b);
        assert_eq!(s.value("node1"), "1");
        assert!(s.entries().is_empty());
    }

    #[test]
    fn another_value_waits_for_the_holder_then_fails() {
        let s = Scratch::new("wait");
        let a = SettingGuard::set(&s.journal, &Scratch::key("node0"), "2").unwrap();
        let e = SettingGuard::set(&s.journal, &Scratch::key("node0"), "4").unwrap_err();
        assert!(
            e.to_string().contains("held at 2 by this numalab run"),
            "{e}"
        );
        drop(a);
        let b = SettingGuard::set(&s.journal, &Scratch::key("node0"), "4").unwrap();
        assert_eq!((b.saved(), s.value("node0").as_str()), ("1", "4"));
    }

    #[test]
    fn a_live_numalab_elsewhere_is_never_overwritten() {
        let s = Scratch::new("live");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = (0..100)
            .find_map(|_| {
                std::thread::sleep(Duration::from_millis(10));
                start_time(pid)
            })
            .unwrap();
        s.write("node0", "7\n");
        let e = Entry {
            magic: MAGIC.into(),
            version: ENTRY_VERSION,
            key: Scratch::key("node0"),
            saved: "1".into(),
            set: Some("7".into()),
            pid,
            start_time: start,
            boot_id: boot_id(),
            seq: 0,
        };
        std::fs::create_dir_all(s.journal.dir()).unwrap();
        write_entry(&s.journal.entry_path(&e.key), &e).unwrap();
        let err = SettingGuard::set(&s.journal, &Scratch::key("node0"), "3").unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("in use by numalab pid {pid}")),
            "{err}"
        );
        assert!(s.journal.replay().is_empty());
        assert_eq!(s.value("node0"), "7");
        let _ = child.kill();
        let _ = child.wait();
        // Once it is gone its change comes back, and the way is free.
        let lines = s.journal.replay();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(s.value("node0"), "1");
    }

    #[test]
    fn replay_restores_what_a_dead_writer_left_latest_first() {
        let s = Scratch::new("replay");
        s.write("node0", "3\n");
        s.write("auto", "false\n");
        let pid = dead_pid();
        s.dead_entry("auto", "true", None, 0, pid);
        s.dead_entry("node0", "1", Some("3"), 1, pid);
        let lines = s.journal.replay();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(
            lines[0],
            format!(
                "restored {} to 1, left changed by numalab pid {pid}, which ended without restoring it",
                s.journal.path_of(&Scratch::key("node0")).display()
            )
        );
        assert!(lines[1].contains("auto to true"), "{lines:?}");
        assert_eq!(
            (s.value("node0"), s.value("auto")),
            ("1".into(), "true".into())
        );
        assert!(s.entries().is_empty());
        assert!(
            s.journal.replay().is_empty(),
            "a second replay has nothing to do"
        );
    }

    #[test]
    fn replay_leaves_a_value_changed_since_and_drops_stale_entries_quietly() {
        let s = Scratch::new("since");
        s.write("node0", "9\n");
        s.dead_entry("node0", "1", Some("3"), 0, dead_pid());
        let lines = s.journal.replay();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("at 9") && lines[0].contains("changed since"),
            "{lines:?}"
        );
        assert_eq!(s.value("node0"), "9");
        // Already back: nothing to say.
        s.dead_entry("node1", "1", Some("3"), 0, dead_pid());
        assert!(s.journal.replay().is_empty());
        // From an earlier boot: the kernel reset it.
        s.write("node1", "3\n");
        s.dead_entry("node1", "1", Some("3"), 0, dead_pid());
        let mut e = read_entry(&s.journal.entry_path(&Scratch::key("node1"))).unwrap();
        e.boot_id = "another-boot".into();
        write_entry(&s.journal.entry_path(&e.key), &e).unwrap();
        assert!(s.journal.replay().is_empty());
        assert_eq!(s.value("node1"), "3");
        assert!(s.entries().is_empty());
    }

    #[test]
    fn replay_never_writes_what_is_not_a_known_setting() {
        let s = Scratch::new("unknown");
        std::fs::create_dir_all(s.journal.dir()).unwrap();
        let victim = s.base.join("root/etc/passwd");
        std::fs::create_dir_all(victim.parent().unwrap()).unwrap();
        std::fs::write(&victim, "root:x:0:0\n").unwrap();
        let e = Entry {
            magic: MAGIC.into(),
            version: ENTRY_VERSION,
            key: "etc/passwd".into(),
            saved: "owned".into(),
            set: None,
            pid: dead_pid(),
            start_time: 1,
            boot_id: boot_id(),
            seq: 0,
        };
        let passwd = s.journal.entry_path(&e.key);
        write_entry(&passwd, &e).unwrap();
        let broken = s.journal.dir().join(format!("{ENTRY_PREFIX}broken.json"));
        std::fs::write(&broken, "{not json").unwrap();
        let lines = s.journal.replay();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with(&format!(
                "ignored {}: not a journal entry numalab wrote (etc/passwd is not a setting numalab changes)",
                passwd.display()
            ))),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with(&format!(
                "ignored {}: not a journal entry numalab wrote (",
                broken.display()
            ))),
            "{lines:?}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root:x:0:0\n");
        // Neither is ours to delete.
        assert!(passwd.exists() && broken.exists());
    }

    /// An entry listed and then removed by its writer before it was read
    /// (a numalab process restoring its setting as another starts) is
    /// gone, not foreign: nothing is said of it; a dangling link still is.
    #[test]
    fn an_entry_removed_after_the_listing_is_not_said() {
        let s = Scratch::new("vanished");
        std::fs::create_dir_all(s.journal.dir()).unwrap();
        let gone = s.journal.entry_path(&Scratch::key("node0"));
        assert_eq!(s.journal.replay_entries(vec![gone]), Vec::<String>::new());
        let link = s.journal.entry_path(&Scratch::key("node1"));
        std::os::unix::fs::symlink(s.base.join("nowhere"), &link).unwrap();
        let lines = s.journal.replay_entries(vec![link.clone()]);
        assert_eq!(
            lines,
            [format!(
                "ignored {}: not a journal entry numalab wrote (a symbolic link)",
                link.display()
            )]
        );
    }

    /// A journal directory a user chose holds the user's own files: replay
    /// reads only entries of our shape, deletes none of the rest, never
    /// blocks on a FIFO, never follows a link, and trusts no entry another
    /// user could have written (a forged one asked for node0=77).
    #[test]
    fn replay_touches_only_its_own_entries_in_a_users_folder() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new("userdir");
        let dir = s.journal.dir().to_path_buf();
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..5 {
            std::fs::write(dir.join(format!("user{i}.json")), "{not ours").unwrap();
        }
        let fifo = |name: &str| process::make_fifo(&dir.join(name), 0o600).unwrap();
        fifo("pipe.json");
        fifo(&format!("{ENTRY_PREFIX}pipe.json"));
        // A valid entry, but reached through a link.
        let elsewhere = s.base.join("elsewhere.json");
        s.write("node0", "3\n");
        s.dead_entry("node0", "1", Some("3"), 0, dead_pid());
        std::fs::rename(s.journal.entry_path(&Scratch::key("node0")), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, s.journal.entry_path(&Scratch::key("node0")))
            .unwrap();
        // A forged entry of another user, and one anyone may write.
        s.dead_entry("node1", "77", Some("1"), 0, dead_pid());
        let forged = s.journal.entry_path(&Scratch::key("node1"));
        std::os::unix::fs::chown(&forged, Some(4242), None).unwrap();
        s.dead_entry("auto", "false", None, 1, dead_pid());
        let open = s.journal.entry_path(&Scratch::key("auto"));
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();

        let t0 = Instant::now();
        let lines = s.journal.replay();
        assert!(t0.elapsed() < Duration::from_secs(2), "replay blocked");
        let mut why: Vec<&str> = lines
            .iter()
            .map(|l| {
                l.split_once(": not a journal entry numalab wrote (")
                    .map_or("", |x| x.1)
            })
            .collect();
        why.sort();
        assert_eq!(
            why,
            [
                "a symbolic link)",
                "not a regular file)",
                "others may write it (mode 666))",
                "owned by user 4242, not this user)",
            ],
            "{lines:?}"
        );
        assert_eq!(s.value("node0"), "3", "nothing replayed through the link");
        assert_eq!(s.value("node1"), "1", "the forged 77 was not written");
        assert_eq!(s.value("auto"), "true");
        let left = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(left, 5 + 2 + 3, "nothing deleted");
        assert!(elsewhere.exists());
    }

    /// A journal directory others may write is not used: no entry there is
    /// trusted, and no setting is changed with its old value kept there.
    #[test]
    fn a_journal_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new("opendir");
        s.write("node0", "3\n");
        s.dead_entry("node0", "1", Some("3"), 0, dead_pid());
        std::fs::set_permissions(s.journal.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let lines = s.journal.replay();
        assert_eq!(
            lines,
            [format!(
                "ignored the journal of changed settings in {}: others may write it (mode 777); give {STATE_DIR_ENV} a directory only this user can write",
                s.journal.dir().display()
            )]
        );
        assert_eq!(s.value("node0"), "3");
        let err = SettingGuard::set(&s.journal, &Scratch::key("node1"), "2")
            .unwrap_err()
            .to_string();
        assert!(err.contains("others may write it (mode 777)"), "{err}");
        assert_eq!(s.value("node1"), "1");
    }

    #[test]
    fn a_guard_restores_a_dead_writers_change_before_recording() {
        let s = Scratch::new("takeover");
        s.write("node0", "3\n");
        s.dead_entry("node0", "1", Some("3"), 0, dead_pid());
        let g = SettingGuard::set(&s.journal, &Scratch::key("node0"), "2").unwrap();
        assert_eq!(g.saved(), "1", "the true old value, not the dead writer's");
        drop(g);
        assert_eq!(s.value("node0"), "1");
    }

    #[test]
    fn known_keys() {
        assert!(is_known_key(&format!("{WEIGHTS_DIR}/node12")));
        assert!(is_auto_path(
            b"/sys/kernel/mm/mempolicy/weighted_interleave/auto\0\0"
        ));
        assert!(is_auto_path(
            b"/sys/kernel/mm/mempolicy/weighted_interleave/__auto_type\0"
        ));
        assert!(!is_auto_path(
            b"/sys/kernel/mm/mempolicy/weighted_interleave/node0\0"
        ));
        assert!(!is_auto_path(b"/x/not_auto\0"));
        assert!(!is_auto_path(b"auto\0"));
        assert!(String::from_utf8(stopped_line(libc::SIGTERM, true).concat())
            .unwrap()
            .contains("SIGTERM; the system settings it changed are restored, but automatic interleave weights stay off"));
        assert!(stopped_line(libc::SIGHUP, false)
            .concat()
            .ends_with(b"SIGHUP; the system settings it changed are restored\n"));
        assert!(is_known_key(&format!("{WEIGHTS_DIR}/auto")));
        assert!(is_known_key(&format!("{WEIGHTS_DIR}/__auto_type")));
        for k in [
            "etc/passwd",
            "sys/kernel/mm/mempolicy/weighted_interleave/node",
            "sys/kernel/mm/mempolicy/weighted_interleave/node0/../../x",
            "sys/kernel/mm/mempolicy/weighted_interleave/node1x",
        ] {
            assert!(!is_known_key(k), "{k}");
        }
    }
}
