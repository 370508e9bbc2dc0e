//! Counters per thread and per process (`numalab run --counters
//! --per-thread`, docs/counters.md).
//!
//! - The launch is traced through every thread and process it starts
//!   ([`PreparedLaunch::follow_tasks`]); each task gets its own events
//!   (not inherited, enabled while it is stopped before its first
//!   instruction) and they are read at its exit, with its name.
//! - The totals are the sums over the tasks, so no event is opened twice
//!   on a task and hardware counters are not shared more than without
//!   `--per-thread`. Each task's value is scaled on its own when its events
//!   were multiplexed.
//! - Why not the kernel's `inherit_stat` and `PERF_RECORD_READ` at each
//!   thread's exit, which need no tracing: on Linux 6.18 the counts of
//!   events of different PMUs (task-clock and page-faults) came out swapped
//!   between threads, because the kernel pairs two tasks' events by list
//!   position when it swaps their contexts, and a task's list order is not
//!   the one its threads inherit. Measured: a thread that faulted 2048
//!   pages reported 3,095,249 page faults.
//! - At most [`MAX_TASKS`] tasks are listed one by one; the totals count
//!   them all.

use super::counters::{
    derive, open_on, report, CounterReport, DerivedValue, Event, EventValue, Opened,
};
use crate::placement::launch::{PreparedLaunch, TaskObserver};
use crate::sys::process;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Tasks listed one by one in a report; the rest are counted in the totals
/// and in [`TaskTable::not_listed`].
pub const MAX_TASKS: usize = 4096;

/// One thread's or process's counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCounters {
    /// Its process (thread group) id.
    pub pid: i32,
    /// Its thread id (the pid for a process's first thread).
    pub tid: i32,
    /// Its name at exit (`/proc/TID/comm`: a thread's name when the
    /// program set one, else the program's).
    pub name: String,
    /// Events in the order asked.
    pub events: Vec<EventValue>,
    /// The derived metrics that have a value for this task.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived: Vec<DerivedValue>,
    /// False when its exit was not seen: still running when the launch
    /// ended, or gone without an exit stop (its counts are those read
    /// then, and its name the one it started with).
    pub ended: bool,
}

/// The per-task part of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskTable {
    /// In the order the tasks started.
    pub tasks: Vec<TaskCounters>,
    /// Tasks counted in the totals but not listed (more than [`MAX_TASKS`]).
    pub not_listed: u64,
}

/// A task's events while it runs.
struct Live {
    pid: i32,
    /// Its name when it started, should `/proc` not have it at the end.
    name: String,
    order: u64,
    opened: Opened,
}

/// Sum of one event over the tasks.
#[derive(Default, Clone)]
struct Total {
    value: u128,
    enabled_ns: u128,
    running_ns: u128,
    scaled: bool,
    user_only: bool,
    counted: u64,
    missing: u64,
    first_reason: Option<String>,
}

struct State {
    events: Vec<&'static Event>,
    cpu_pmu: bool,
    line: u32,
    line_known: bool,
    next_order: u64,
    live: HashMap<i32, Live>,
    done: Vec<(u64, TaskCounters)>,
    not_listed: u64,
    totals: Vec<Total>,
    /// RLIMIT_NOFILE as it was before it was raised for the tasks' events.
    saved_nofile: Option<(u64, u64)>,
}

impl State {
    /// Reads and closes task `tid`'s events, adds them to the totals, and
    /// keeps its row (`ended`: it reached its exit).
    fn close(&mut self, tid: i32, ended: bool) {
        let Some(live) = self.live.remove(&tid) else {
            return;
        };
        let events = live.opened.read();
        for (t, e) in self.totals.iter_mut().zip(&events) {
            match (e.value, &e.unavailable) {
                (Some(v), _) => {
                    t.value += u128::from(v);
                    t.enabled_ns += u128::from(e.enabled_ns);
                    t.running_ns += u128::from(e.running_ns);
                    t.scaled |= e.scaled;
                    t.user_only |= e.user_only;
                    t.counted += 1;
                }
                (None, why) => {
                    t.missing += 1;
                    if t.first_reason.is_none() {
                        t.first_reason = Some(why.clone().unwrap_or_else(|| "no value".into()));
                    }
                }
            }
        }
        if self.done.len() >= MAX_TASKS {
            self.not_listed += 1;
            return;
        }
        let name = name_of(tid).unwrap_or(live.name);
        let derived = derive(&events, self.line, self.line_known)
            .into_iter()
            .filter(|d| d.value.is_some())
            .collect();
        self.done.push((
            live.order,
            TaskCounters {
                pid: live.pid,
                tid,
                name,
                events,
                derived,
                ended,
            },
        ));
    }

    /// The totals as events: a value only where every task counted it.
    fn total_values(&self) -> Vec<EventValue> {
        self.events
            .iter()
            .zip(&self.totals)
            .map(|(e, t)| {
                if t.counted == 0 {
                    let why = t
                        .first_reason
                        .clone()
                        .unwrap_or_else(|| "no task was counted".into());
                    return EventValue::unavailable(e, why);
                }
                if t.missing > 0 {
                    return EventValue::unavailable(
                        e,
                        format!(
                            "counted in {} of {} tasks only, so no total (the others: {})",
                            t.counted,
                            t.counted + t.missing,
                            t.first_reason.as_deref().unwrap_or("no value")
                        ),
                    );
                }
                let clamp = |x: u128| x.min(u128::from(u64::MAX)) as u64;
                let mut v = EventValue::unavailable(e, String::new());
                v.value = Some(clamp(t.value));
                v.unavailable = None;
                v.enabled_ns = clamp(t.enabled_ns);
                v.running_ns = clamp(t.running_ns);
                v.scaled = t.scaled;
                v.user_only = t.user_only;
                v
            })
            .collect()
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit
/// (each task holds one per event); the old (soft, hard) limit, to restore.
fn raise_nofile() -> Option<(u64, u64)> {
    let old = process::descriptor_limit()?;
    process::set_descriptor_limit(old.1, old.1).then_some(old)
}

/// `/proc/TID/comm`: the task's name.
fn name_of(tid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end().to_string())
}

/// The `Tgid:` of `/proc/TID/status`: the task's process.
fn process_of(tid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

struct Observer(Arc<Mutex<State>>);

impl TaskObserver for Observer {
    fn started(&mut self, tid: i32) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // The same id again: the task that had it went without an exit
        // stop, and this is a new one.
        if s.live.contains_key(&tid) {
            s.close(tid, false);
        }
        if s.saved_nofile.is_none() {
            s.saved_nofile = raise_nofile();
        }
        let opened = open_on(tid, &s.events, true, s.cpu_pmu);
        let order = s.next_order;
        s.next_order += 1;
        s.live.insert(
            tid,
            Live {
                pid: process_of(tid),
                name: name_of(tid).unwrap_or_else(|| "?".into()),
                order,
                opened,
            },
        );
    }

    fn ended(&mut self, tid: i32) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        s.close(tid, true);
    }
}

/// Counters per task attached to a launch, to read once it ended.
pub struct PerTask {
    state: Arc<Mutex<State>>,
}

/// Has `launch` follow every task of its command and count `events` in
/// each ([`PreparedLaunch::follow_tasks`]); `line` is the machine's cache
/// line size ([`super::counters::line_bytes`]).
pub fn follow(
    launch: PreparedLaunch,
    events: Vec<&'static Event>,
    line: Option<u32>,
) -> (PreparedLaunch, PerTask) {
    let state = Arc::new(Mutex::new(State {
        totals: vec![Total::default(); events.len()],
        events,
        cpu_pmu: super::counters::has_cpu_pmu(Path::new("/sys/bus/event_source/devices")),
        line: line.unwrap_or(64),
        line_known: line.is_some(),
        next_order: 0,
        live: HashMap::new(),
        done: Vec::new(),
        not_listed: 0,
        saved_nofile: None,
    }));
    let launch = launch.follow_tasks(Box::new(Observer(Arc::clone(&state))));
    (launch, PerTask { state })
}

impl PerTask {
    /// The totals and the tasks, once the launch's wait returned; `None`
    /// when no task was ever seen (the command did not start). Tasks still
    /// running then are read as they are.
    pub fn report(self) -> Option<CounterReport> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let still: Vec<i32> = s.live.keys().copied().collect();
        for tid in still {
            s.close(tid, false);
        }
        if let Some((soft, hard)) = s.saved_nofile.take() {
            process::set_descriptor_limit(soft, hard);
        }
        if s.next_order == 0 {
            return None;
        }
        let mut done = std::mem::take(&mut s.done);
        done.sort_by_key(|(order, _)| *order);
        let line = s.line_known.then_some(s.line);
        let mut r = report(s.total_values(), line);
        r.tasks = Some(TaskTable {
            tasks: done.into_iter().map(|(_, t)| t).collect(),
            not_listed: s.not_listed,
        });
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::counters::find;

    #[test]
    fn totals_are_sums_and_refuse_a_partial_count() {
        let pf = find("page-faults").unwrap();
        let cy = find("cycles").unwrap();
        let mut s = State {
            events: vec![pf, cy],
            cpu_pmu: false,
            line: 64,
            line_known: false,
            next_order: 0,
            live: HashMap::new(),
            done: Vec::new(),
            not_listed: 0,
            totals: vec![Total::default(); 2],
            saved_nofile: None,
        };
        for (counted, v) in [(true, 10u64), (true, 32), (false, 0)] {
            let (t, c) = s.totals.split_at_mut(1);
            let (t, c) = (&mut t[0], &mut c[0]);
            t.value += u128::from(v);
            t.counted += 1;
            if counted {
                c.counted += 1;
                c.value += 5;
            } else {
                c.missing += 1;
                c.first_reason = Some("not available on this machine: no cpu PMU".into());
            }
        }
        let v = s.total_values();
        assert_eq!(v[0].value, Some(42));
        assert_eq!(v[0].unavailable, None);
        assert_eq!(v[1].value, None);
        assert_eq!(
            v[1].unavailable.as_deref(),
            Some("counted in 2 of 3 tasks only, so no total (the others: not available on this machine: no cpu PMU)")
        );
    }
}
