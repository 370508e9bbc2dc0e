//! Checking claims against the document they were rendered from: every
//! figure re-derived from its path, every comparison and rank test re-run,
//! and every sentence of a summary traced to a claim.

use super::*;

/// Whether two numbers print the same, or differ by less than one unit of
/// the last printed digit (a re-derived sum may differ in its last bits).
fn agrees(a: f64, b: f64, unit: &str, decimals: u8) -> bool {
    if print_number(a, unit, decimals) == print_number(b, unit, decimals) {
        return true;
    }
    let step = 10f64.powi(-(decimals as i32)) * if unit == "%" { 0.01 } else { 1.0 };
    (a - b).abs() <= step.max(a.abs().max(b.abs()) * 1e-9)
}

/// Checks one claim against `doc`; every mismatch as a sentence.
pub fn check_claim(c: &Claim, doc: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let who = format!("{:?} claim \"{}\"", c.kind, c.text);
    let mut derived: Vec<(String, f64)> = Vec::new();
    for f in &c.figures {
        match f.from.eval(doc) {
            Ok(v) if agrees(v, f.value, &f.unit, f.decimals) => derived.push((f.name.clone(), v)),
            Ok(v) => bad.push(format!(
                "{who}: {} states {} but the data give {}",
                f.name,
                f.print(),
                print_number(v, &f.unit, f.decimals)
            )),
            Err(e) => bad.push(format!("{who}: {} cannot be re-derived: {e}", f.name)),
        }
    }
    for f in &c.facts {
        match doc.pointer(&f.from) {
            Some(v) if *v == f.value => {}
            Some(v) => bad.push(format!(
                "{who}: {} states {} but {} is {v}",
                f.name, f.value, f.from
            )),
            None => bad.push(format!(
                "{who}: {} comes from {}, which is absent",
                f.name, f.from
            )),
        }
    }
    if bad.is_empty() {
        for x in &c.comparisons {
            let value = |n: &str| derived.iter().find(|(m, _)| m == n).map(|(_, v)| *v);
            let stated = x
                .stated_by
                .as_ref()
                .map(|p| (p, doc.pointer(p).and_then(Value::as_bool)));
            if let Some((p, said)) = &stated {
                if *said != Some(x.holds) {
                    bad.push(format!(
                        "{who}: its words follow {p} = {said:?}, but the comparison {} says {}",
                        x.name, x.holds
                    ));
                }
            }
            match judge(x, value) {
                Ok(h) if h == x.holds => {}
                Ok(h) => bad.push(format!(
                    "{who}: says '{}' but {} {:?} {} is {h} under its rule",
                    if x.holds { &x.yes } else { &x.no },
                    x.left,
                    x.relation,
                    x.right
                )),
                Err(e) => bad.push(format!("{who}: comparison {}: {e}", x.name)),
            }
        }
    }
    for t in &c.rank_tests {
        bad.extend(check_rank_test(t, doc).map(|e| format!("{who}: rank test {}: {e}", t.name)));
    }
    match render(c) {
        Ok(t) if t == c.text => {}
        Ok(t) => bad.push(format!("{who}: the template renders \"{t}\"")),
        Err(e) => bad.push(format!("{who}: {e}")),
    }
    bad
}

/// The values at `paths`, pooled: arrays flattened, numbers once.
fn pooled(doc: &Value, paths: &[String]) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for p in paths {
        match doc.pointer(p) {
            Some(Value::Array(a)) => {
                // A sample that was not finite is written as null.
                for v in a.iter().filter(|v| !v.is_null()) {
                    out.push(
                        v.as_f64()
                            .ok_or_else(|| format!("{p} holds {v}, not a number"))?,
                    );
                }
            }
            Some(v) => out.push(number(doc, p).map_err(|_| format!("{p} is {v}, not samples"))?),
            None => return Err(format!("no samples at {p}")),
        }
    }
    Ok(out.into_iter().filter(|x| x.is_finite()).collect())
}

/// Why `t` does not follow from the samples it names, if it does not.
fn check_rank_test(t: &RankTest, doc: &Value) -> Option<String> {
    let (a, b) = match (pooled(doc, &t.a), pooled(doc, &t.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Some(e),
    };
    let Some(test) = rank_compare(&a, &b) else {
        return Some(format!(
            "the {} and {} values it names cannot be compared",
            a.len(),
            b.len()
        ));
    };
    let verdict = t.rule.judge(&test);
    let recorded = t.stated_by.as_ref().map(|p| {
        (
            p,
            doc.pointer(p)
                .and_then(|v| serde_json::from_value::<Verdict>(v.clone()).ok()),
        )
    });
    if let Some((p, Some(v))) = recorded.filter(|(_, v)| *v != Some(verdict)) {
        return Some(format!(
            "{p} records '{}' but the samples give '{}' ({}, {})",
            v.words(),
            verdict.words(),
            t.rule.words(),
            test.describe()
        ));
    }
    if let Some((p, None)) = recorded {
        return Some(format!("{p} holds no verdict"));
    }
    if (test.p_value - t.p_value).abs() > 1e-9 * test.p_value.abs().max(1e-3) {
        Some(format!(
            "states p = {} but the samples give p = {}",
            t.p_value, test.p_value
        ))
    } else if verdict != t.verdict {
        Some(format!(
            "says '{}' but the samples give '{}' ({}, {})",
            t.verdict.words(),
            verdict.words(),
            t.rule.words(),
            test.describe()
        ))
    } else {
        None
    }
}

/// Checks every claim of a results.json document, and that every sentence
/// of its summary is one of them. Returns the mismatches (none: consistent).
pub fn check(doc: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let Some(summary) = doc.get("summary") else {
        return vec!["no summary".into()];
    };
    let claims: Vec<Claim> = match summary.get("claims") {
        Some(v) => match serde_json::from_value(v.clone()) {
            Ok(c) => c,
            Err(e) => return vec![format!("summary.claims does not read: {e}")],
        },
        None => return vec!["summary.claims is missing".into()],
    };
    for c in &claims {
        bad.extend(check_claim(c, doc));
    }
    let has = |kind: ClaimKind, text: &str| claims.iter().any(|c| c.kind == kind && c.text == text);
    let mut sentence = |kind: ClaimKind, text: &str| {
        if !has(kind, text) {
            bad.push(format!("{kind:?} \"{text}\" is not rendered from a claim"));
        }
    };
    if let Some(h) = summary.get("headline").and_then(Value::as_str) {
        sentence(ClaimKind::Headline, h);
    }
    if let Some(b) = summary.get("banner").and_then(Value::as_str) {
        sentence(ClaimKind::Banner, b);
    }
    for (key, kind) in [
        ("findings", ClaimKind::Finding),
        ("advice", ClaimKind::Advice),
    ] {
        for l in summary
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            sentence(kind, l.get("text").and_then(Value::as_str).unwrap_or(""));
        }
    }
    for (key, kind) in [
        ("warnings", ClaimKind::Warning),
        ("missing", ClaimKind::Missing),
    ] {
        for l in summary
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            sentence(kind, l.as_str().unwrap_or(""));
        }
    }
    bad
}
