//! Slurm host lists: `cn[01-03,7],gpu1` is cn01, cn02, cn03, cn7, gpu1.
//! Read here (bounded) so that a fleet knows which nodes it expects without
//! asking `scontrol`, which a login node may lack.

/// The most names one list expands to.
pub const MAX_HOSTS: usize = 100_000;

/// Expands a host list; one-line errors name what is wrong.
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in split_top(list)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        expand_item(item, &mut out)?;
    }
    if out.is_empty() {
        return Err(format!("host list '{list}' names no host"));
    }
    Ok(out)
}

/// Splits at the commas outside brackets.
fn split_top(list: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!(
                "host list '{list}': brackets do not match (one level, as in cn[1-4,8])"
            ));
        }
    }
    if depth != 0 {
        return Err(format!("host list '{list}': a '[' is not closed"));
    }
    parts.push(&list[start..]);
    Ok(parts)
}

/// One item: a name, or a prefix, one bracketed range set and a suffix.
fn expand_item(item: &str, out: &mut Vec<String>) -> Result<(), String> {
    let Some(open) = item.find('[') else {
        return push(out, item.to_string());
    };
    let close = item[open..]
        .find(']')
        .map(|c| c + open)
        .ok_or_else(|| format!("host list item '{item}': a '[' is not closed"))?;
    let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    if suffix.contains('[') {
        return Err(format!(
            "host list item '{item}': one bracket per name is read (cn[1-4]); give the others as separate items"
        ));
    }
    for r in ranges.split(',') {
        let (lo, hi) = r.split_once('-').unwrap_or((r, r));
        let bad = || format!("host list item '{item}': '{r}' is not a number or a range a-b");
        if lo.is_empty() || !lo.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let a: u64 = lo.parse().map_err(|_| bad())?;
        let b: u64 = hi.parse().map_err(|_| bad())?;
        if b < a {
            return Err(format!(
                "host list item '{item}': range '{r}' runs backwards"
            ));
        }
        if b - a >= MAX_HOSTS as u64 {
            return Err(format!(
                "host list item '{item}': range '{r}' is more than {MAX_HOSTS} hosts"
            ));
        }
        // Zero padding as written: cn[01-10] is cn01 ... cn10.
        let width = lo.len();
        for n in a..=b {
            push(out, format!("{prefix}{n:0width$}{suffix}"))?;
        }
    }
    Ok(())
}

fn push(out: &mut Vec<String>, name: String) -> Result<(), String> {
    if out.len() >= MAX_HOSTS {
        return Err(format!("the host list names more than {MAX_HOSTS} hosts"));
    }
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '/' || c == ']') {
        return Err(format!("'{name}' is not a host name"));
    }
    out.push(name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_padding_and_plain_names() {
        assert_eq!(
            expand("cn[01-03,7],gpu1").unwrap(),
            vec!["cn01", "cn02", "cn03", "cn7", "gpu1"]
        );
        assert_eq!(expand("nlnode[1-2]").unwrap(), vec!["nlnode1", "nlnode2"]);
        assert_eq!(
            expand("a[8-10]-ib").unwrap(),
            vec!["a8-ib", "a9-ib", "a10-ib"]
        );
        assert_eq!(expand("single").unwrap(), vec!["single"]);
    }

    #[test]
    fn bad_lists_are_one_line_errors() {
        assert!(expand("cn[1-3").unwrap_err().contains("not closed"));
        assert!(expand("cn[3-1]").unwrap_err().contains("runs backwards"));
        assert!(expand("cn[x]").unwrap_err().contains("not a number"));
        assert!(expand("cn[[1]]")
            .unwrap_err()
            .contains("brackets do not match"));
        assert!(expand("cn[0-100000000]")
            .unwrap_err()
            .contains("more than 100000"));
        assert!(expand(",").unwrap_err().contains("names no host"));
        assert!(expand("a b").unwrap_err().contains("is not a host name"));
    }
}
