//! The browser lane: tests that render report.html in headless Chromium.
//!
//! One binary per lane (scripts/lanes.py): each former test file is a
//! module here, so the binary is linked once and its tests share one
//! process (and `common::turn`, which keeps measurements apart).

#[path = "../common/mod.rs"]
mod common;

mod browser_harness;
mod report;
mod report_charts;
