//! Reading numalab's JSON back into the types that wrote it.
//!
//! Every result type derives `Deserialize` as the exact inverse of its
//! `Serialize` form; two things JSON does not carry need help, and the
//! functions here give it (as `#[serde(deserialize_with = "...")]`):
//!
//! - **Non-finite numbers.** JSON has no NaN or infinity: serde_json writes
//!   them as `null` (the statistics of a measurement without data, a ratio
//!   over zero). A plain `f64` refuses `null`; [`f64_or_nan`] (and
//!   [`vec_f64_or_nan`], [`NanF64`] inside other shapes) reads it back as
//!   NaN, so the value writes out again as the same `null`. An infinity
//!   therefore comes back as NaN: the JSON cannot tell them apart.
//! - **Number-keyed maps** (pages by node). JSON object keys are strings, so
//!   `BTreeMap<u32, u64>` is written with keys like `"0"`. serde_json parses
//!   them back when it reads the map itself, but not when the map lies
//!   anywhere under a `#[serde(flatten)]` field of an enclosing type (such as
//!   a command's JSON envelope that flattens a result next to its
//!   environment): serde then buffers the content and hands the keys over as
//!   plain strings. [`int_keyed_map`] accepts keys as strings or numbers, so
//!   such maps read back on both paths.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// An `f64` that reads `null` as NaN (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NanF64(pub f64);

impl<'de> Deserialize<'de> for NanF64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<f64>::deserialize(d).map(|x| NanF64(x.unwrap_or(f64::NAN)))
    }
}

/// Reads a number, or `null` as NaN.
pub fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    NanF64::deserialize(d).map(|x| x.0)
}

/// Reads a list of numbers, each `null` as NaN.
pub fn vec_f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    Vec::<NanF64>::deserialize(d).map(|v| v.into_iter().map(|x| x.0).collect())
}

/// A map key read from a string holding a number (`"12"`) or from a number.
struct NumberKey<K>(K);

impl<'de, K> Deserialize<'de> for NumberKey<K>
where
    K: FromStr + TryFrom<u64> + TryFrom<i64>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor<K>(PhantomData<K>);

        impl<K> Visitor<'_> for KeyVisitor<K>
        where
            K: FromStr + TryFrom<u64> + TryFrom<i64>,
        {
            type Value = NumberKey<K>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number, or a string holding one")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                s.parse()
                    .map(NumberKey)
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(s), &self))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                K::try_from(v)
                    .map(NumberKey)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                K::try_from(v)
                    .map(NumberKey)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
        }

        d.deserialize_any(KeyVisitor(PhantomData))
    }
}

/// Reads a map with number keys written as strings (`{"0": 512}`), also
/// under `#[serde(flatten)]` (see the module documentation).
pub fn int_keyed_map<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Ord + FromStr + TryFrom<u64> + TryFrom<i64>,
    V: Deserialize<'de>,
{
    struct MapVisitor<K, V>(PhantomData<(K, V)>);

    impl<'de, K, V> Visitor<'de> for MapVisitor<K, V>
    where
        K: Ord + FromStr + TryFrom<u64> + TryFrom<i64>,
        V: Deserialize<'de>,
    {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map with whole-number keys")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some((NumberKey(k), v)) = map.next_entry::<NumberKey<K>, V>()? {
                out.insert(k, v);
            }
            Ok(out)
        }
    }

    d.deserialize_map(MapVisitor(PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Inner {
        #[serde(deserialize_with = "f64_or_nan")]
        x: f64,
        #[serde(deserialize_with = "vec_f64_or_nan")]
        v: Vec<f64>,
        #[serde(deserialize_with = "int_keyed_map")]
        pages: BTreeMap<u32, u64>,
    }

    #[derive(Debug, Serialize, Deserialize)]
    struct Envelope {
        command: String,
        #[serde(flatten)]
        inner: Inner,
    }

    #[test]
    fn null_reads_back_as_nan_and_writes_as_null() {
        let a = Inner {
            x: f64::NAN,
            v: vec![1.5, f64::INFINITY],
            pages: [(0, 3), (12, 4)].into_iter().collect(),
        };
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["x"], serde_json::Value::Null);
        let b: Inner = serde_json::from_value(json.clone()).unwrap();
        assert!(b.x.is_nan() && b.v[0] == 1.5 && b.v[1].is_nan());
        assert_eq!(serde_json::to_value(&b).unwrap(), json);
        // The same from text.
        let c: Inner = serde_json::from_str(&json.to_string()).unwrap();
        assert_eq!(c.pages, a.pages);
    }

    #[test]
    fn number_keys_read_back_through_flatten() {
        let e = Envelope {
            command: "x".into(),
            inner: Inner {
                x: 2.0,
                v: vec![],
                pages: [(1, 7)].into_iter().collect(),
            },
        };
        let text = serde_json::to_string(&e).unwrap();
        let back: Envelope = serde_json::from_str(&text).unwrap();
        assert_eq!(back.inner, e.inner);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert!(serde_json::from_str::<Envelope>(
            r#"{"command":"x","x":1,"v":[],"pages":{"node":1}}"#
        )
        .is_err());
    }
}

/// One page histogram (`{"0": 512}`) read with [`int_keyed_map`].
#[derive(Deserialize)]
struct PageCounts(#[serde(deserialize_with = "int_keyed_map")] BTreeMap<u32, u64>);

/// Pages per node of each named array (`{"a": {"0": 512}}`).
type ArrayPages = BTreeMap<String, BTreeMap<u32, u64>>;

/// Reads pages by array and node (`{"a": {"0": 512}}`), also under
/// `#[serde(flatten)]`.
pub fn pages_by_array<'de, D: Deserializer<'de>>(d: D) -> Result<ArrayPages, D::Error> {
    let m = BTreeMap::<String, PageCounts>::deserialize(d)?;
    Ok(m.into_iter().map(|(k, p)| (k, p.0)).collect())
}

/// [`pages_by_array`] for a list (one entry per thread).
pub fn pages_by_array_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ArrayPages>, D::Error> {
    let v = Vec::<BTreeMap<String, PageCounts>>::deserialize(d)?;
    Ok(v.into_iter()
        .map(|m| m.into_iter().map(|(k, p)| (k, p.0)).collect())
        .collect())
}
