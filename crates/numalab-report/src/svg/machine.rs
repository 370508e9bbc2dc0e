//! A picture of the machine as lstopo draws it (`numalab topology --svg`,
//! and the report's machine section): boxes nested by the CPUs they hold —
//! packages, NUMA nodes with their memory, shared caches, cores with their
//! private caches, PUs — CPU-less memory nodes beside the package or
//! machine they belong to, and devices (with their model: "GPU nvml0
//! Tesla V100-SXM3-32GB-H") inside the box of their local CPUs.
//!
//! Unlike the charts, the picture is a standalone file as well, so it
//! carries its own style (fixed light colours, as lstopo's, readable on a
//! dark page too: every box has its own fill). Children are laid out in
//! rows that wrap at [`MAX_ROW`] pixels, so 256 CPUs stay readable at the
//! page's width; private caches are written in their core's label rather
//! than drawn as boxes of the same size.

use super::escape;
use super::metrics::text_w;
use numalab::machine::{Device, Machine, MemoryKind};
use numalab::text::format::bytes as format_bytes;
use numalab::IdSet;
use std::fmt::Write;

/// Widest row of children inside one box, in pixels, before it wraps.
pub const MAX_ROW: f64 = 1200.0;
const PAD: f64 = 5.0;
const GAP: f64 = 5.0;
const FONT: f64 = 11.0;
const LINE: f64 = 14.0;

/// What a box is (its colour and how it is labelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Machine,
    Package,
    Node,
    Cache,
    Core,
    Pu,
    Memory,
    Device,
}

impl Kind {
    fn class(self) -> &'static str {
        match self {
            Kind::Machine => "mp-machine",
            Kind::Package => "mp-package",
            Kind::Node => "mp-node",
            Kind::Cache => "mp-cache",
            Kind::Core => "mp-core",
            Kind::Pu => "mp-pu",
            Kind::Memory => "mp-memory",
            Kind::Device => "mp-device",
        }
    }
}

/// One box of the picture, before and after layout.
#[derive(Debug)]
struct Frame {
    kind: Kind,
    /// Its lines of text (the first bold).
    lines: Vec<String>,
    /// Its tooltip.
    tip: String,
    cpus: IdSet,
    /// Rank among boxes of equal CPUs: the lower is the outer.
    rank: u32,
    children: Vec<Frame>,
    /// Memory-only nodes and devices, laid out after the children.
    extras: Vec<Frame>,
    // Layout: position and size.
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

impl Frame {
    fn new(kind: Kind, lines: Vec<String>, tip: String, cpus: IdSet, rank: u32) -> Frame {
        Frame {
            kind,
            lines,
            tip,
            cpus,
            rank,
            children: Vec::new(),
            extras: Vec::new(),
            x: 0.0,
            y: 0.0,
            w: 0.0,
            h: 0.0,
        }
    }

    /// Puts `f` under the deepest box whose CPUs hold all of its own.
    fn insert(&mut self, f: Frame) {
        match self
            .children
            .iter_mut()
            .find(|c| c.kind != Kind::Pu && f.cpus.is_subset(&c.cpus))
        {
            Some(c) => c.insert(f),
            None => self.children.push(f),
        }
    }

    /// The deepest box whose CPUs are `cpus`, else the smallest that holds
    /// them (the machine when none does).
    fn home_of(&mut self, cpus: &IdSet) -> &mut Frame {
        let i = self
            .children
            .iter()
            .position(|c| c.kind != Kind::Pu && cpus.is_subset(&c.cpus));
        match i {
            Some(i) => self.children[i].home_of(cpus),
            None => self,
        }
    }

    /// The outermost box of `kind` whose CPUs are `cpus`.
    fn find(&mut self, kind: Kind, cpus: &IdSet) -> Option<&mut Frame> {
        if self.kind == kind && &self.cpus == cpus {
            return Some(self);
        }
        self.children
            .iter_mut()
            .filter(|c| cpus.is_subset(&c.cpus))
            .find_map(|c| c.find(kind, cpus))
    }

    /// Where a device whose local CPUs are `cpus` is drawn: in the NUMA
    /// node of those CPUs, else the package, else the box that holds them.
    fn device_home(&mut self, cpus: &IdSet) -> &mut Frame {
        let kind = [Kind::Node, Kind::Package]
            .into_iter()
            .find(|k| self.find(*k, cpus).is_some());
        match kind {
            Some(k) => self.find(k, cpus).expect("found above"),
            None => self.home_of(cpus),
        }
    }

    fn sort(&mut self) {
        self.children.sort_by_key(|c| (c.cpus.first(), c.rank));
        for c in &mut self.children {
            c.sort();
        }
    }

    /// Sizes every box (children first) and places the children relative
    /// to this box's corner.
    fn measure(&mut self) {
        let label_w = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| text_w(l, if i == 0 { FONT } else { FONT - 1.0 }))
            .fold(0.0, f64::max);
        let label_h = LINE * self.lines.len() as f64;
        let mut y = PAD + label_h;
        let mut inner_w: f64 = 0.0;
        for group in [&mut self.children, &mut self.extras] {
            if group.is_empty() {
                continue;
            }
            for c in group.iter_mut() {
                c.measure();
            }
            y += GAP;
            let (w, h) = flow(group, PAD, y);
            inner_w = inner_w.max(w);
            y += h;
        }
        self.w = (label_w.max(inner_w) + 2.0 * PAD).ceil();
        self.h = (y + PAD).ceil();
    }

    /// Moves the children by the box's own corner, down the tree.
    fn place(&mut self, dx: f64, dy: f64) {
        self.x += dx;
        self.y += dy;
        let (x, y) = (self.x, self.y);
        for c in self.children.iter_mut().chain(self.extras.iter_mut()) {
            c.place(x, y);
        }
    }

    fn draw(&self, out: &mut String) {
        let dashed = if self.kind == Kind::Memory {
            " mp-dashed"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<g><title>{}</title><rect class=\"{}{dashed}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\"/>",
            escape(&self.tip),
            self.kind.class(),
            self.x,
            self.y,
            self.w,
            self.h
        );
        for (i, l) in self.lines.iter().enumerate() {
            let _ = write!(
                out,
                "<text class=\"{}\" x=\"{}\" y=\"{}\">{}</text>",
                if i == 0 { "mp-label" } else { "mp-sub" },
                self.x + PAD,
                self.y + PAD + LINE * (i as f64 + 1.0) - 3.0,
                escape(l)
            );
        }
        out.push_str("</g>\n");
        for c in self.children.iter().chain(&self.extras) {
            c.draw(out);
        }
    }
}

/// Lays `frames` (already measured) left to right from (`x0`, `y0`),
/// wrapping rows at [`MAX_ROW`]: the width and height used.
fn flow(frames: &mut [Frame], x0: f64, y0: f64) -> (f64, f64) {
    let (mut x, mut y, mut row_h, mut widest) = (0.0, 0.0, 0.0f64, 0.0f64);
    for f in frames.iter_mut() {
        if x > 0.0 && x + f.w > MAX_ROW {
            y += row_h + GAP;
            x = 0.0;
            row_h = 0.0;
        }
        f.x = x0 + x;
        f.y = y0 + y;
        x += f.w + GAP;
        widest = widest.max(x - GAP);
        row_h = row_h.max(f.h);
    }
    (widest, y + row_h)
}

fn memory_kind(k: MemoryKind) -> &'static str {
    match k {
        MemoryKind::Dram => "DRAM",
        MemoryKind::Hbm => "HBM",
        MemoryKind::Nvm => "NVM",
        MemoryKind::GpuMemory => "GPU memory",
        MemoryKind::Cxl => "CXL",
        MemoryKind::SpecificPurpose => "specific-purpose",
        MemoryKind::Unknown => "memory",
    }
}

fn device_frame(d: &Device) -> Frame {
    let mut lines = vec![format!("{} {}", d.label(), d.name)];
    lines.extend(d.model.clone());
    let tip = format!(
        "{} {}{}{}{}; local nodes {}",
        d.label(),
        d.name,
        d.model
            .as_deref()
            .map(|m| format!(": {m}"))
            .unwrap_or_default(),
        d.vendor
            .as_deref()
            .map(|v| format!(" ({v})"))
            .unwrap_or_default(),
        d.pci_bus_id
            .as_deref()
            .map(|p| format!(", PCI {p}"))
            .unwrap_or_default(),
        if d.local_nodes.is_empty() {
            "none".to_string()
        } else {
            d.local_nodes.to_string()
        }
    );
    Frame::new(Kind::Device, lines, tip, d.local_cpus.clone(), 0)
}

/// The tree of boxes of `m`, measured and placed.
fn layout(m: &Machine) -> Frame {
    let total: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
    let mut root = Frame::new(
        Kind::Machine,
        vec![format!(
            "Machine ({} total, {} PUs)",
            format_bytes(total),
            m.complete_cpus.len()
        )],
        "the machine".into(),
        m.complete_cpus.clone(),
        0,
    );
    let mut frames: Vec<Frame> = package_frames(m);
    frames.extend(node_frames(m));
    frames.extend(shared_cache_frames(m));
    frames.extend(core_frames(m));
    frames.extend(pu_frames(m));
    // Outer boxes first: more CPUs, then the lower rank.
    frames.sort_by_key(|f| (std::cmp::Reverse(f.cpus.len()), f.rank));
    for f in frames {
        root.insert(f);
    }
    attach_cpuless_nodes(m, &mut root);
    for d in &m.devices {
        let f = device_frame(d);
        if d.local_cpus.is_empty() {
            root.extras.push(f);
        } else {
            root.device_home(&d.local_cpus).extras.push(f);
        }
    }
    root.sort();
    root.measure();
    root.place(0.0, 0.0);
    root
}

fn package_frames(m: &Machine) -> Vec<Frame> {
    m.packages
        .iter()
        .map(|p| {
            let name = match p.os_index {
                Some(i) => format!("Package {i}"),
                None => format!("Package L#{}", p.logical_index),
            };
            Frame::new(
                Kind::Package,
                vec![name.clone()],
                format!("{name}: CPUs {}", p.cpus),
                p.cpus.clone(),
                1,
            )
        })
        .collect()
}

/// Nodes with CPUs, as boxes around them (CPU-less nodes are attached
/// afterwards, `attach_cpuless_nodes`).
fn node_frames(m: &Machine) -> Vec<Frame> {
    m.nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| {
            Frame::new(
                Kind::Node,
                vec![format!(
                    "NUMA node {} ({})",
                    n.os_index,
                    format_bytes(n.memory_bytes)
                )],
                format!(
                    "NUMA node {}: {} {}, CPUs {}",
                    n.os_index,
                    format_bytes(n.memory_bytes),
                    memory_kind(n.kind),
                    n.cpus
                ),
                n.cpus.clone(),
                2,
            )
        })
        .collect()
}

/// Caches shared by more than one core; a cache with exactly one core's
/// CPUs is written in that core's label instead (`core_frames`).
fn shared_cache_frames(m: &Machine) -> Vec<Frame> {
    let private = |cpus: &IdSet| m.cores.iter().any(|c| &c.cpus == cpus);
    m.caches
        .iter()
        .filter(|c| !c.cpus.is_empty() && !private(&c.cpus))
        .map(|c| {
            let name = cache_name(c.level, &c.kind);
            Frame::new(
                Kind::Cache,
                vec![format!("{name} ({})", format_bytes(c.size_bytes))],
                format!(
                    "{name} {}, shared by CPUs {}",
                    format_bytes(c.size_bytes),
                    c.cpus
                ),
                c.cpus.clone(),
                10 - u32::from(c.level.min(9)),
            )
        })
        .collect()
}

fn core_frames(m: &Machine) -> Vec<Frame> {
    m.cores
        .iter()
        .map(|core| {
            let mut caches: Vec<_> = m
                .caches
                .iter()
                .filter(|c| c.cpus == core.cpus && c.kind != "instruction")
                .collect();
            caches.sort_by_key(|c| std::cmp::Reverse(c.level));
            let name = match core.os_index {
                Some(i) => format!("Core {i}"),
                None => format!("Core L#{}", core.logical_index),
            };
            let private: Vec<String> = caches
                .iter()
                .map(|c| {
                    format!(
                        "{} {}",
                        cache_name(c.level, &c.kind),
                        format_bytes(c.size_bytes)
                    )
                })
                .collect();
            let mut lines = vec![name.clone()];
            if !private.is_empty() {
                lines.push(private.join(" "));
            }
            Frame::new(
                Kind::Core,
                lines,
                format!("{name}: PUs {}", core.cpus),
                core.cpus.clone(),
                20,
            )
        })
        .collect()
}

fn pu_frames(m: &Machine) -> Vec<Frame> {
    m.complete_cpus
        .iter()
        .map(|cpu| {
            let allowed = m.allowed_cpus.contains(cpu);
            Frame::new(
                Kind::Pu,
                vec![format!("PU {cpu}")],
                format!(
                    "PU {cpu}{}",
                    if allowed {
                        ""
                    } else {
                        ": not allowed to this process"
                    }
                ),
                [cpu].into_iter().collect(),
                30,
            )
        })
        .collect()
}

/// CPU-less nodes: beside the package that lists them, else the machine.
fn attach_cpuless_nodes(m: &Machine, root: &mut Frame) {
    for n in m.nodes.iter().filter(|n| n.cpus.is_empty()) {
        let f = Frame::new(
            Kind::Memory,
            vec![
                format!(
                    "NUMA node {} ({})",
                    n.os_index,
                    format_bytes(n.memory_bytes)
                ),
                format!("CPU-less, {}", memory_kind(n.kind)),
            ],
            format!(
                "NUMA node {}: {} {}, no CPUs{}",
                n.os_index,
                format_bytes(n.memory_bytes),
                memory_kind(n.kind),
                n.tier.map(|t| format!(", tier {t}")).unwrap_or_default()
            ),
            IdSet::new(),
            0,
        );
        let package = m
            .packages
            .iter()
            .find(|p| p.nodes.contains(n.os_index))
            .map(|p| p.cpus.clone());
        match package.and_then(|cpus| root.find(Kind::Package, &cpus)) {
            Some(p) => p.extras.push(f),
            None => root.extras.push(f),
        }
    }
}

fn cache_name(level: u8, kind: &str) -> String {
    match kind {
        "instruction" => format!("L{level}i"),
        "data" => format!("L{level}d"),
        _ => format!("L{level}"),
    }
}

/// The style every picture carries.
const STYLE: &str = "\
.mp text{font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,Arial,sans-serif;fill:#111}\
.mp .mp-label{font-size:11px;font-weight:600}\
.mp .mp-sub{font-size:10px}\
.mp rect{stroke:#444;stroke-width:1}\
.mp .mp-machine{fill:#ffffff}\
.mp .mp-package{fill:#dedede}\
.mp .mp-node{fill:#d2e7a4}\
.mp .mp-memory{fill:#cfe3f3}\
.mp .mp-dashed{stroke-dasharray:4 3}\
.mp .mp-cache{fill:#f5f5f5}\
.mp .mp-core{fill:#bebebe}\
.mp .mp-pu{fill:#ffffff}\
.mp .mp-device{fill:#fbe3c0}";

/// The picture of `m` as one `<svg>` with the element id `id` (a
/// standalone file's content too: it declares its namespace and style).
pub fn machine_picture(id: &str, m: &Machine) -> String {
    let root = layout(m);
    let sid = super::frame::sanitize_id(id);
    let title = format!(
        "{} packages, {} cores, {} PUs, {} NUMA nodes{}",
        m.packages.len(),
        m.cores.len(),
        m.complete_cpus.len(),
        m.nodes.len(),
        if m.devices.is_empty() {
            String::new()
        } else {
            format!(", {} devices", m.devices.len())
        }
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"mp\" id=\"{sid}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-labelledby=\"{sid}-title\" style=\"max-width:100%;height:auto\"><title id=\"{sid}-title\">{}</title><style>{STYLE}</style>",
        escape(&title),
        w = root.w + 1.0,
        h = root.h + 1.0,
    );
    root.draw(&mut out);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{doc, El};
    use super::*;
    use crate::fixture;

    /// Every box's rectangle, with its label and tooltip.
    fn boxes(els: &[El]) -> Vec<(String, [f64; 4], String)> {
        els.iter()
            .enumerate()
            .filter(|(_, e)| e.name == "g")
            .map(|(_, g)| {
                let kids: Vec<&El> = g.children.iter().map(|&k| &els[k]).collect();
                let rect = kids.iter().find(|e| e.name == "rect").unwrap();
                let label = kids
                    .iter()
                    .filter(|e| e.name == "text")
                    .map(|e| e.text.clone())
                    .collect::<Vec<_>>()
                    .join(" / ");
                let tip = kids
                    .iter()
                    .find(|e| e.name == "title")
                    .map(|e| e.text.clone())
                    .unwrap_or_default();
                (
                    label,
                    [
                        rect.num("x"),
                        rect.num("y"),
                        rect.num("width"),
                        rect.num("height"),
                    ],
                    tip,
                )
            })
            .collect()
    }

    /// Whether rectangle `a` lies inside `o`.
    fn within(a: [f64; 4], o: [f64; 4]) -> bool {
        a[0] >= o[0] && a[1] >= o[1] && a[0] + a[2] <= o[0] + o[2] && a[1] + a[3] <= o[1] + o[3]
    }

    /// Boxes never cross: any two are apart or one holds the other.
    fn check_nesting(b: &[(String, [f64; 4], String)]) {
        let apart = |a: [f64; 4], o: [f64; 4]| {
            a[0] + a[2] <= o[0] || o[0] + o[2] <= a[0] || a[1] + a[3] <= o[1] || o[1] + o[3] <= a[1]
        };
        for (i, (la, a, _)) in b.iter().enumerate() {
            for (lo, o, _) in &b[i + 1..] {
                assert!(
                    within(*a, *o) || within(*o, *a) || apart(*a, *o),
                    "'{la}' {a:?} and '{lo}' {o:?} cross"
                );
            }
        }
    }

    #[test]
    fn dgx2_shows_its_gpus_by_model_near_their_nodes() {
        let m = fixture("nvidiaDGX2.xml");
        let svg = machine_picture("machine", &m);
        let els = doc(&svg);
        let b = boxes(&els);
        check_nesting(&b);
        let gpus: Vec<_> = b
            .iter()
            .filter(|(l, _, _)| l.starts_with("GPU nvml"))
            .collect();
        assert_eq!(gpus.len(), 16, "{svg}");
        assert!(gpus
            .iter()
            .all(|(l, _, _)| l.ends_with(" / Tesla V100-SXM3-32GB-H")));
        // nvml8 sits inside NUMA node 1's box, nvml0 inside node 0's.
        let rect = |prefix: &str| {
            b.iter()
                .find(|(l, _, _)| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {svg}"))
                .1
        };
        let (n0, n1) = (rect("NUMA node 0"), rect("NUMA node 1"));
        // Devices hang in their node's box, beside its caches and cores.
        assert!(!within(rect("GPU nvml0 "), rect("L3 (33")), "{svg}");
        assert!(within(rect("GPU nvml8 "), n1) && !within(rect("GPU nvml8 "), n0));
        assert!(within(rect("GPU nvml0 "), n0));
        // Every PU once, inside its core.
        let pus: Vec<_> = b.iter().filter(|(l, _, _)| l.starts_with("PU ")).collect();
        assert_eq!(pus.len(), 4);
        let pu = rect("PU 24");
        assert!(
            b.iter()
                .any(|(l, r, _)| l.starts_with("Core ") && within(pu, *r) && within(*r, n1)),
            "{svg}"
        );
        // Private caches in the core's label, the shared L3 a box.
        assert!(b.iter().any(|(l, _, _)| l.starts_with("L3 (33")), "{svg}");
        assert!(
            b.iter().any(|(l, _, _)| l.contains("L2 1 MiB L1d 32 KiB")),
            "{svg}"
        );
        let tip = &b
            .iter()
            .find(|(l, _, _)| l.starts_with("GPU nvml8 "))
            .unwrap()
            .2;
        assert_eq!(
            tip,
            "GPU nvml8: Tesla V100-SXM3-32GB-H (NVIDIA Corporation), PCI 0000:b7:00.0; local nodes 1"
        );
    }

    #[test]
    fn cpuless_memory_is_drawn_dashed_with_its_kind() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let svg = machine_picture("m", &m);
        let els = doc(&svg);
        check_nesting(&boxes(&els));
        let cpuless: Vec<_> = m.nodes.iter().filter(|n| n.cpus.is_empty()).collect();
        assert!(!cpuless.is_empty());
        for n in cpuless {
            let label = format!("NUMA node {} (", n.os_index);
            let b = boxes(&els);
            let (l, _, _) = b
                .iter()
                .find(|(l, _, _)| l.starts_with(&label))
                .unwrap_or_else(|| panic!("no {label} in {svg}"));
            assert!(l.contains(" / CPU-less, "), "{l}");
        }
        assert!(svg.contains("mp-memory mp-dashed"));
        // Node 4 belongs to package 0: drawn in its box, beside its nodes
        // and cores, not inside them.
        let b = boxes(&els);
        let rect = |prefix: &str| b.iter().find(|(l, _, _)| l.starts_with(prefix)).unwrap().1;
        let n4 = rect("NUMA node 4");
        assert!(within(n4, rect("Package 0")), "{svg}");
        assert!(!within(n4, rect("NUMA node 0")), "{svg}");
    }

    #[test]
    fn large_machines_wrap_and_keep_every_pu() {
        for name in [
            "256ppc-8n8s4t.xml",
            "256ia64-64n2s2c.xml",
            "192em64t-24n8c2t.xml",
        ] {
            let m = fixture(name);
            let svg = machine_picture("m", &m);
            let els = doc(&svg);
            let b = boxes(&els);
            check_nesting(&b);
            let pus = b.iter().filter(|(l, _, _)| l.starts_with("PU ")).count();
            assert_eq!(pus as u64, m.complete_cpus.len() as u64, "{name}");
            let nodes = b
                .iter()
                .filter(|(l, _, _)| l.starts_with("NUMA node "))
                .count();
            assert_eq!(nodes, m.nodes.len(), "{name}");
            // Readable at a page's width: rows wrap, so the picture is
            // no wider than a row and its frames.
            let root = &b[0].1;
            assert!(root[2] <= MAX_ROW + 60.0, "{name}: {} px wide", root[2]);
        }
    }

    #[test]
    fn small_machines_are_one_package_of_cores() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let svg = machine_picture("m", &m);
        let b = boxes(&doc(&svg));
        check_nesting(&b);
        assert!(b[0].0.starts_with("Machine ("), "{}", b[0].0);
        assert_eq!(b.iter().filter(|(l, _, _)| l.starts_with("PU ")).count(), 8);
        assert_eq!(
            b.iter()
                .filter(|(l, _, _)| l.starts_with("NUMA node "))
                .count(),
            4
        );
    }
}
