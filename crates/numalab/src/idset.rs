//! `IdSet`: a set of small integer ids (CPU or NUMA node OS indexes).
//!
//! Kernel interfaces (sched_setaffinity, mbind, set_mempolicy) take bitmasks of
//! `unsigned long` words, so the set is stored the same way and can be handed to
//! them without conversion. The text form is the numactl/cpuset list syntax
//! (`0-3,7`), which users already know from `numactl -H` and `/sys`.

use crate::text::format::excerpt;
use std::fmt;

const WORD_BITS: u32 = u64::BITS;

/// Ids read from text or from a saved file are below this (0 to 65535).
/// Linux's largest configurations have 8192 CPUs (`NR_CPUS` with MAXSMP)
/// and 1024 NUMA nodes (`NODES_SHIFT` 10), so no real CPU or node id comes
/// near, while the largest set stays an 8 KiB bitmask: `0-4294967295`
/// is refused instead of allocating half a gigabyte.
pub const ID_LIMIT: u32 = 1 << 16;

/// A set of CPU or node OS indexes, stored as a bitmask.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct IdSet {
    words: Vec<u64>,
}

impl IdSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set holding exactly `id`.
    pub fn single(id: u32) -> Self {
        let mut s = Self::new();
        s.insert(id);
        s
    }

    /// Adds `id`; returns whether it was absent.
    pub fn insert(&mut self, id: u32) -> bool {
        let (w, b) = ((id / WORD_BITS) as usize, id % WORD_BITS);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & (1 << b) != 0;
        self.words[w] |= 1 << b;
        !was
    }

    /// Adds every id from `lo` to `hi` (inclusive) a word at a time, so a
    /// long range costs its bitmask, not one step per id.
    pub fn insert_range(&mut self, lo: u32, hi: u32) {
        if lo > hi {
            return;
        }
        let (first, last) = ((lo / WORD_BITS) as usize, (hi / WORD_BITS) as usize);
        if self.words.len() <= last {
            self.words.resize(last + 1, 0);
        }
        for w in first..=last {
            let from = if w == first { lo % WORD_BITS } else { 0 };
            let to = if w == last {
                hi % WORD_BITS
            } else {
                WORD_BITS - 1
            };
            let span = to - from + 1;
            let mask = if span == WORD_BITS {
                u64::MAX
            } else {
                ((1u64 << span) - 1) << from
            };
            self.words[w] |= mask;
        }
    }

    /// Removes `id`; returns whether it was present.
    pub fn remove(&mut self, id: u32) -> bool {
        let (w, b) = ((id / WORD_BITS) as usize, id % WORD_BITS);
        match self.words.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.trim();
                true
            }
            _ => false,
        }
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        let (w, b) = ((id / WORD_BITS) as usize, id % WORD_BITS);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Number of ids in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// The smallest id, if any.
    pub fn first(&self) -> Option<u32> {
        self.iter().next()
    }

    /// The largest id, if any.
    pub fn last(&self) -> Option<u32> {
        self.words.iter().enumerate().rev().find_map(|(i, w)| {
            (*w != 0).then(|| i as u32 * WORD_BITS + (WORD_BITS - 1 - w.leading_zeros()))
        })
    }

    /// Ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros();
                rest &= rest - 1;
                Some(i as u32 * WORD_BITS + b)
            })
        })
    }

    /// Ids present in `self` or `other`.
    pub fn union(&self, other: &Self) -> Self {
        let n = self.words.len().max(other.words.len());
        let words = (0..n).map(|i| self.word(i) | other.word(i)).collect();
        Self { words }.trimmed()
    }

    /// Ids present in both.
    pub fn intersection(&self, other: &Self) -> Self {
        let n = self.words.len().min(other.words.len());
        let words = (0..n).map(|i| self.word(i) & other.word(i)).collect();
        Self { words }.trimmed()
    }

    /// Ids of `self` not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        let words = (0..self.words.len())
            .map(|i| self.word(i) & !other.word(i))
            .collect();
        Self { words }.trimmed()
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        (0..self.words.len()).all(|i| self.word(i) & !other.word(i) == 0)
    }

    /// Whether the two sets share an id.
    pub fn intersects(&self, other: &Self) -> bool {
        (0..self.words.len().min(other.words.len())).any(|i| self.word(i) & other.word(i) != 0)
    }

    /// The bitmask as kernel `unsigned long` words, at least `min_bits` wide
    /// (the kernel wants `maxnode` bits it can read without faulting).
    pub fn to_words(&self, min_bits: usize) -> Vec<u64> {
        let mut w = self.words.clone();
        let need = min_bits.div_ceil(WORD_BITS as usize).max(1);
        if w.len() < need {
            w.resize(need, 0);
        }
        w
    }

    /// A set from kernel bitmask words.
    pub fn from_words(words: &[u64]) -> Self {
        Self {
            words: words.to_vec(),
        }
        .trimmed()
    }

    /// Parses the list syntax `0-3,7,9-10` (whitespace around items allowed),
    /// ids from 0 to 65535 ([`ID_LIMIT`]). The empty string is the empty
    /// set; an empty item (`1,,2`) is refused.
    pub fn parse_list(text: &str) -> Result<Self, String> {
        let mut set = Self::new();
        let text = text.trim();
        if text.is_empty() {
            return Ok(set);
        }
        for item in text.split(',') {
            let item = item.trim();
            let (lo, hi) = match item.split_once('-') {
                Some((a, b)) => (parse_id(a, item)?, parse_id(b, item)?),
                None => {
                    let v = parse_id(item, item)?;
                    (v, v)
                }
            };
            if lo > hi {
                return Err(format!("range '{item}' is reversed (write {hi}-{lo})"));
            }
            set.insert_range(lo, hi);
        }
        Ok(set)
    }

    fn word(&self, i: usize) -> u64 {
        self.words.get(i).copied().unwrap_or(0)
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }

    fn trimmed(mut self) -> Self {
        self.trim();
        self
    }
}

fn parse_id(s: &str, item: &str) -> Result<u32, String> {
    let s = s.trim();
    let item = excerpt(item, 40);
    if s.is_empty() {
        return Err(format!("'{item}' is not a number or a range like 0-3"));
    }
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "'{}' in '{item}' is not an id (expected a number like 0, 3 or a range like 0-3)",
            excerpt(s, 40)
        ));
    }
    s.parse::<u32>()
        .ok()
        .filter(|v| *v < ID_LIMIT)
        .ok_or_else(|| {
            format!(
                "id '{}' in '{item}' is out of range: ids go from 0 to {} (Linux has at most 8192 CPUs and 1024 nodes)",
                excerpt(s, 40),
                ID_LIMIT - 1
            )
        })
}

impl FromIterator<u32> for IdSet {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        let mut s = Self::new();
        for id in iter {
            s.insert(id);
        }
        s
    }
}

/// The list syntax: `0-3,7`; the empty set prints as the empty string.
impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi = it.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if hi == lo {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdSet({self})")
    }
}

impl serde::Serialize for IdSet {
    /// Serialized as a plain list of ids: machine readers should not parse ranges.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for IdSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let ids = Vec::<u32>::deserialize(d)?;
        if let Some(bad) = ids.iter().find(|&&id| id >= ID_LIMIT) {
            return Err(serde::de::Error::custom(format!(
                "id {bad} is out of range: ids go from 0 to {}",
                ID_LIMIT - 1
            )));
        }
        Ok(ids.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn list_roundtrip_and_ops() {
        let a = IdSet::parse_list("0-3,7").unwrap();
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 7]);
        assert_eq!(a.to_string(), "0-3,7");
        let b = IdSet::parse_list("3-8").unwrap();
        assert_eq!(a.union(&b).to_string(), "0-8");
        assert_eq!(a.intersection(&b).to_string(), "3,7");
        assert_eq!(a.difference(&b).to_string(), "0-2");
        assert!(IdSet::parse_list("7").unwrap().is_subset(&a));
        assert!(!b.is_subset(&a));
        assert_eq!(a.last(), Some(7));
        assert_eq!(IdSet::parse_list("200").unwrap().last(), Some(200));
        assert_eq!(a.len(), 5);
        assert!(IdSet::parse_list("").unwrap().is_empty());
    }

    #[test]
    fn bad_lists_are_named() {
        assert!(IdSet::parse_list("3-1").unwrap_err().contains("reversed"));
        assert!(IdSet::parse_list("a").unwrap_err().contains("'a'"));
        assert!(IdSet::parse_list("1,,2").is_err());
        assert!(IdSet::parse_list("-1").is_err());
        assert!(IdSet::parse_list("+1").unwrap_err().contains("not an id"));
    }

    #[test]
    fn ids_are_bounded() {
        let all = IdSet::parse_list("0-65535").unwrap();
        assert_eq!(all.len(), 65536);
        assert_eq!(all.last(), Some(ID_LIMIT - 1));
        for bad in [
            "65536",
            "0-4294967295",
            "0-4294967296",
            "99999999999999999999",
        ] {
            let e = IdSet::parse_list(bad).unwrap_err();
            assert!(e.contains("ids go from 0 to 65535"), "{bad}: {e}");
        }
        let e = serde_json::from_str::<IdSet>("[1, 4294967295]").unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        assert_eq!(
            serde_json::from_str::<IdSet>("[3, 1]").unwrap().to_string(),
            "1,3"
        );
    }

    #[test]
    fn ranges_fill_whole_words() {
        for (lo, hi) in [
            (0, 0),
            (0, 63),
            (1, 64),
            (63, 64),
            (5, 300),
            (64, 127),
            (0, 65535),
        ] {
            let mut a = IdSet::new();
            a.insert_range(lo, hi);
            let b: IdSet = (lo..=hi).collect();
            assert_eq!(a, b, "{lo}-{hi}");
        }
        let mut e = IdSet::new();
        e.insert_range(5, 4);
        assert!(e.is_empty());
    }

    #[test]
    fn kernel_words() {
        let s = IdSet::parse_list("0,65").unwrap();
        assert_eq!(s.to_words(128), vec![1, 2]);
        assert_eq!(s.to_words(1).len(), 2);
        assert_eq!(IdSet::from_words(&[1, 2, 0]), s);
    }

    proptest! {
        #[test]
        fn display_parse_roundtrip(ids in proptest::collection::btree_set(0u32..300, 0..40)) {
            let s: IdSet = ids.iter().copied().collect();
            let back = IdSet::parse_list(&s.to_string()).unwrap();
            prop_assert_eq!(&back, &s);
            prop_assert_eq!(back.iter().collect::<Vec<_>>(), ids.into_iter().collect::<Vec<_>>());
        }

        #[test]
        fn parse_never_panics(text in ".{0,40}") {
            let _ = IdSet::parse_list(&text);
        }

        #[test]
        fn set_algebra(a in proptest::collection::btree_set(0u32..200, 0..30),
                       b in proptest::collection::btree_set(0u32..200, 0..30)) {
            let (sa, sb): (IdSet, IdSet) = (a.iter().copied().collect(), b.iter().copied().collect());
            let u: Vec<u32> = a.union(&b).copied().collect();
            let i: Vec<u32> = a.intersection(&b).copied().collect();
            let d: Vec<u32> = a.difference(&b).copied().collect();
            prop_assert_eq!(sa.union(&sb).iter().collect::<Vec<_>>(), u);
            prop_assert_eq!(sa.intersection(&sb).iter().collect::<Vec<_>>(), i);
            prop_assert_eq!(sa.difference(&sb).iter().collect::<Vec<_>>(), d);
            prop_assert_eq!(sa.is_subset(&sb), a.is_subset(&b));
        }
    }
}
