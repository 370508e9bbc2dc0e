//! The registry of report parts: which parts a report has, in run order,
//! and what a [`PartName`] stands for. It sits above the views (whose
//! [`crate::views::PARTS`] it holds) and below what runs and writes a
//! whole report (budget, session, document), which are given a registry
//! (or use [`REPORT`], the report's own).

use crate::model::{Mode, PartName, FULL_ONLY_REASON};
use crate::part::Part;
use numalab::machine::Machine;
use serde::Deserialize;

/// Parts in run order, and lookups by name.
pub struct Registry {
    parts: &'static [&'static dyn Part],
}

/// The parts of `numalab report`.
pub static REPORT: Registry = Registry::new(crate::views::PARTS);

impl Registry {
    /// A registry of `parts`, in run order (names must be unique).
    pub const fn new(parts: &'static [&'static dyn Part]) -> Self {
        Registry { parts }
    }

    /// The part named `name`, if the registry has it.
    pub fn find(&self, name: &str) -> Option<PartName> {
        self.parts
            .iter()
            .map(|p| p.info().name)
            .find(|n| *n == name)
            .map(PartName::new)
    }

    /// Every part, in run order.
    pub fn all(&self) -> Vec<PartName> {
        self.parts
            .iter()
            .map(|p| PartName::new(p.info().name))
            .collect()
    }

    /// Position of `p` in run order.
    ///
    /// # Panics
    /// When `p` is not this registry's (a bug: names come from it).
    pub fn index(&self, p: PartName) -> usize {
        self.parts
            .iter()
            .position(|q| q.info().name == p.name())
            .unwrap_or_else(|| panic!("part {p} is not in the registry"))
    }

    /// The implementation of `p` (see [`Registry::index`] for the panic).
    pub fn part(&self, p: PartName) -> &'static dyn Part {
        self.parts[self.index(p)]
    }

    /// A title for people.
    pub fn title(&self, p: PartName) -> &'static str {
        self.part(p).info().title
    }

    /// Whether a report of `mode` on `m` can have `p`: the part's own
    /// [`Part::applicable`], after [`crate::model::PartInfo::full_only`]
    /// (`Err` says why not, [`FULL_ONLY_REASON`] for a full-only part
    /// outside `--full`).
    pub fn available(&self, p: PartName, m: &Machine, mode: Mode) -> Result<(), String> {
        let part = self.part(p);
        if part.info().full_only && mode != Mode::Full {
            return Err(FULL_ONLY_REASON.to_string());
        }
        part.applicable(m)
    }

    /// The names [`Registry::parse_list`] accepts.
    pub fn choices(&self) -> String {
        let mut v: Vec<&str> = self.all().iter().map(|p| p.name()).collect();
        for p in self.parts {
            for a in p.info().aliases {
                if !v.contains(a) {
                    v.push(a);
                }
            }
        }
        v.push("all");
        v.join(", ")
    }

    /// Parses a comma-separated list of part names (an alias such as
    /// `matrix` names every part of that kind, `all` every part), kept in
    /// run order without repeats.
    pub fn parse_list(&self, text: &str) -> Result<Vec<PartName>, String> {
        let all = self.all();
        let mut out: Vec<PartName> = Vec::new();
        for item in text.split(',').map(str::trim) {
            if item.is_empty() {
                return Err(format!(
                    "empty part name in '{text}'; valid: {}",
                    self.choices()
                ));
            }
            let add: Vec<PartName> = if item == "all" {
                all.clone()
            } else {
                all.iter()
                    .copied()
                    .filter(|&p| p.name() == item || self.part(p).info().aliases.contains(&item))
                    .collect()
            };
            if add.is_empty() {
                return Err(format!("unknown part '{item}'; valid: {}", self.choices()));
            }
            for p in add {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out.sort_by_key(|&p| self.index(p));
        Ok(out)
    }
}

/// A part name in JSON is one of [`REPORT`]'s: an unknown one is an error
/// that lists the valid names.
impl<'de> Deserialize<'de> for PartName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        REPORT.find(&s).ok_or_else(|| {
            serde::de::Error::custom(format!("unknown part '{s}'; valid: {}", REPORT.choices()))
        })
    }
}
