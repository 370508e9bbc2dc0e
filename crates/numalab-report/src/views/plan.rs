//! Text of a placement plan (`numalab profile` writes plan.json) and of its
//! check (`numalab run --plan FILE --verify`).

use numalab::profile::plan::{Plan, PlanCheck};
use numalab::text::format::excerpt;

/// The plan, an entry a line with its expected effect.
pub fn plan_text(p: &Plan) -> String {
    if p.entries.is_empty() {
        return "plan: no region has a placement fix (no plan.json written)\n".into();
    }
    let mut out = format!(
        "plan: {} entr{}\n",
        p.entries.len(),
        if p.entries.len() == 1 { "y" } else { "ies" }
    );
    for e in &p.entries {
        let effect = e.expected.as_ref().map_or(String::new(), |x| {
            format!(
                ", remote {:.0}% -> about {:.0}% ({} samples)",
                x.remote_share_before * 100.0,
                x.remote_share_after * 100.0,
                x.samples
            )
        });
        out.push_str(&format!("  {} -> {}{effect}\n", e.region, e.policy));
    }
    out
}

/// The check, an entry a line, then what the library saw.
pub fn check_text(c: &PlanCheck) -> String {
    let mut out =
        String::from("plan check (pages by node from the kernel, when freed or at exit):\n");
    let width = c
        .entries
        .iter()
        .map(|e| e.region.len().min(40))
        .max()
        .unwrap_or(0);
    for e in &c.entries {
        out.push_str(&format!(
            "  {:<width$}  {:<16} {:<15} {} region(s): {}\n",
            excerpt(&e.region, 40),
            excerpt(&e.policy, 16),
            e.verdict,
            e.regions,
            e.detail
        ));
    }
    if c.program_mbinds_skipped > 0 {
        out.push_str(&format!(
            "  the program's own mbind on planned regions: {} call(s) skipped, the plan kept\n",
            c.program_mbinds_skipped
        ));
    }
    if c.refused > 0 {
        out.push_str(&format!(
            "  the kernel refused {} of the plan's mbind calls (first errno {})\n",
            c.refused,
            c.first_errno.unwrap_or(0)
        ));
    }
    if c.stripes_folded > 0 {
        out.push_str(&format!(
            "  {} range(s) interleaved page by page instead of striped: the stripes laid reached half of vm.max_map_count\n",
            c.stripes_folded
        ));
    }
    if c.small_spilled > 0 {
        out.push_str(&format!(
            "  {} small allocation(s) selected went to the heap: their entry's pool (64 MiB) was full\n",
            c.small_spilled
        ));
    }
    if c.channel_reopened > 0 {
        out.push_str(&format!(
            "  warning: the program closed or reused the descriptor of the library's record file {} time(s) (it closes descriptors from 3 up, or dup2s onto them): the library opened its file again each time and never wrote into the program's files, but records made meanwhile may be missing from this check\n",
            c.channel_reopened
        ));
    }
    if c.processes == 0 && c.regions_read_at_exit > 0 {
        out.push_str(&format!(
            "  the library never reported its end (the program exited without libc's exit, as Go's runtime does): the pages of {} region(s) were read from the process's mappings at exit\n",
            c.regions_read_at_exit
        ));
    } else if c.processes == 0 {
        out.push_str("  the library never reported its end: the program did not exit normally, or ignored LD_PRELOAD (static or setuid)\n");
    }
    out
}

/// The run times without and with the plan, and the verdict.
pub fn run_times_text(t: &numalab::profile::plan::RunTimes) -> String {
    use numalab::text::format::fixed;
    let median = |v: &[f64]| numalab::measure::stats::median(v.to_vec()).unwrap_or(f64::NAN);
    let mut out = format!(
        "run time (unprofiled, {} runs each, interleaved): without the plan {} s, with it {} s (medians)\n",
        t.without_s.len(),
        fixed(median(&t.without_s), 3),
        fixed(median(&t.with_s), 3)
    );
    match &t.comparison {
        Some(c) => out.push_str(&format!(
            "  faster with the plan: {}, with/without {} ({})\n",
            t.verdict.words(),
            c.describe(),
            t.rule
        )),
        None => out.push_str("  no comparison: a side has no run\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use numalab::profile::plan::PlanCheck;

    /// What the library saw beyond the entries is said after them, one line
    /// each, and only when it happened.
    #[test]
    fn folded_stripes_and_refusals_are_said_only_when_they_happened() {
        let mut c = PlanCheck {
            entries: Vec::new(),
            program_mbinds_skipped: 0,
            refused: 0,
            first_errno: None,
            stripes_folded: 0,
            small_spilled: 0,
            processes: 1,
            regions_read_at_exit: 0,
            channel_reopened: 0,
        };
        let quiet = super::check_text(&c);
        assert!(!quiet.contains("interleaved page by page"), "{quiet}");
        c.processes = 0;
        c.regions_read_at_exit = 3;
        assert!(super::check_text(&c).contains(
            "  the library never reported its end (the program exited without libc's exit, as Go's runtime does): the pages of 3 region(s) were read from the process's mappings at exit\n"
        ));
        c.regions_read_at_exit = 0;
        assert!(super::check_text(&c)
            .contains("the program did not exit normally, or ignored LD_PRELOAD"));
        c.processes = 1;
        c.stripes_folded = 2;
        assert!(super::check_text(&c).contains(
            "  2 range(s) interleaved page by page instead of striped: the stripes laid reached half of vm.max_map_count\n"
        ));
    }
}
