//! The scanner's filter JSON: hbase-rest's `ScannerModel.FilterModel`.
//!
//! A FilterModel is an object with a `type` (the HBase class name) and the fields that type
//! uses: `op`, `comparator` (`{"type","value","op"}`), `value`, `filters`, `limit`, `offset`,
//! `family`, `qualifier`, `ifMissing`, `latestVersion`, `minColumn`, `minColumnInclusive`,
//! `maxColumn`, `maxColumnInclusive`, `dropDependentColumn`, `chance`, `prefixes`, `ranges`,
//! `timestamps`, `fuzzyKeys`. Row keys, columns, prefixes and binary comparator values are
//! base64; regex and substring comparator values are plain strings; `PageFilter`'s `value` is
//! the page size as a decimal string.
//!
//! Like Jackson, numbers and booleans are also accepted as strings and vice versa. Fields HBase
//! would dereference while null are reported as missing, except where a default is documented
//! below (HBase would answer those with a NullPointerException):
//! - `SingleColumnValue[Exclude]Filter`: `ifMissing` false, `latestVersion` true (HBase's own
//!   defaults: its serializer omits them when false);
//! - `ColumnRangeFilter`: missing or empty `minColumn` / `maxColumn` are unbounded,
//!   `minColumnInclusive` true, `maxColumnInclusive` false;
//! - `FilterList`: `op` MUST_PASS_ALL, `filters` empty; `MultipleColumnPrefixFilter`: `prefixes`
//!   empty (every column); `DependentColumnFilter`: no value test unless both `op` and
//!   `comparator` are given, `dropDependentColumn` false;
//! - `KeyOnlyFilter`: an optional `lenAsVal` boolean (not in HBase's model) selects lengths as
//!   values.

use super::{
    BitOp, Comparator, CompareOp, Filter, FuzzyKey, ListOp, RowRange, SingleColumnValue, MAX_DEPTH,
};
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;
use serde_json::{Map, Value};

/// Parses the scanner model's `filter` string (a JSON FilterModel).
pub fn parse_filter_json(s: &str) -> Result<Filter, String> {
    let value: Value = serde_json::from_str(s).map_err(|e| {
        format!(
            "the filter is not valid JSON ({e}); expected a FilterModel such as \
             {{\"type\":\"PrefixFilter\",\"value\":\"<base64>\"}}"
        )
    })?;
    build(&value, 0)
}

const B64_CONFIG: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const B64_STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, B64_CONFIG);
const B64_URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, B64_CONFIG);

/// Standard base64, padding optional, whitespace ignored; URL-safe base64 also accepted.
fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    B64_STANDARD
        .decode(&compact)
        .or_else(|e| B64_URL_SAFE.decode(&compact).map_err(|_| e))
        .map_err(|e| e.to_string())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The fields of one FilterModel object, with the filter's type for messages.
struct Fields<'a> {
    m: &'a Map<String, Value>,
    ty: &'a str,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.m.get(key).filter(|v| !v.is_null())
    }

    fn missing(&self, key: &str) -> String {
        format!("{} needs the field \"{key}\"", self.ty)
    }

    fn opt_str(&self, key: &str) -> Result<Option<String>, String> {
        self.get(key)
            .map(|v| value_to_string(v, self.ty, key))
            .transpose()
    }

    fn string(&self, key: &str) -> Result<String, String> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_b64(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        self.opt_str(key)?
            .map(|s| {
                decode_base64(&s).map_err(|e| {
                    format!("bad base64 in \"{key}\" of {}: {e} (got \"{s}\")", self.ty)
                })
            })
            .transpose()
    }

    fn b64(&self, key: &str) -> Result<Vec<u8>, String> {
        self.opt_b64(key)?.ok_or_else(|| self.missing(key))
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        self.get(key)
            .map(|v| value_to_bool(v, self.ty, key))
            .transpose()
    }

    fn opt_i64(&self, key: &str) -> Result<Option<i64>, String> {
        self.get(key)
            .map(|v| value_to_i64(v, self.ty, key))
            .transpose()
    }

    /// A non-negative Java `int`.
    fn count(&self, key: &str) -> Result<u32, String> {
        let n = self.opt_i64(key)?.ok_or_else(|| self.missing(key))?;
        if n < 0 {
            return Err(format!(
                "\"{key}\" of {} must not be negative (got {n})",
                self.ty
            ));
        }
        u32::try_from(n)
            .ok()
            .filter(|n| i32::try_from(*n).is_ok())
            .ok_or_else(|| format!("\"{key}\" of {} is too large (got {n})", self.ty))
    }

    fn op(&self) -> Result<CompareOp, String> {
        let name = self.string("op")?;
        CompareOp::from_name(&name).map_err(|e| format!("{}: {e}", self.ty))
    }

    fn comparator(&self) -> Result<Comparator, String> {
        let v = self
            .get("comparator")
            .ok_or_else(|| self.missing("comparator"))?;
        build_comparator(v, self.ty)
    }

    fn array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(other) => Err(format!(
                "\"{key}\" of {} must be an array, got {}",
                self.ty,
                kind(other)
            )),
        }
    }

    fn sub_filters(&self, depth: usize) -> Result<Vec<Filter>, String> {
        self.array("filters")?
            .map(|items| items.iter().map(|v| build(v, depth + 1)).collect())
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    fn wrapped(&self, depth: usize) -> Result<Box<Filter>, String> {
        let first = self
            .array("filters")?
            .and_then(|items| items.first())
            .ok_or_else(|| {
                format!(
                    "{} needs the wrapped filter in \"filters\": [{{...}}]",
                    self.ty
                )
            })?;
        Ok(Box::new(build(first, depth + 1)?))
    }
}

fn value_to_string(v: &Value, ty: &str, key: &str) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!(
            "\"{key}\" of {ty} must be a string, got {}",
            kind(other)
        )),
    }
}

fn value_to_bool(v: &Value, ty: &str, key: &str) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(format!(
            "\"{key}\" of {ty} must be true or false, got {other}"
        )),
    }
}

fn value_to_i64(v: &Value, ty: &str, key: &str) -> Result<i64, String> {
    let parsed = match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| format!("\"{key}\" of {ty} must be an integer, got {v}"))
}

fn build_comparator(v: &Value, owner: &str) -> Result<Comparator, String> {
    let Value::Object(m) = v else {
        return Err(format!(
            "the comparator of {owner} must be an object like \
             {{\"type\":\"BinaryComparator\",\"value\":\"<base64>\"}}, got {}",
            kind(v)
        ));
    };
    let ty = match m.get("type") {
        Some(Value::String(t)) => t.as_str(),
        _ => return Err(format!("the comparator of {owner} needs a \"type\"")),
    };
    let f = Fields { m, ty };
    Ok(match ty {
        "BinaryComparator" => Comparator::Binary(f.b64("value")?),
        "BinaryPrefixComparator" => Comparator::BinaryPrefix(f.b64("value")?),
        "BitComparator" => {
            let op = match f.string("op")?.to_ascii_uppercase().as_str() {
                "AND" => BitOp::And,
                "OR" => BitOp::Or,
                "XOR" => BitOp::Xor,
                other => {
                    return Err(format!(
                        "invalid BitComparator op '{other}' (expected AND, OR or XOR)"
                    ))
                }
            };
            Comparator::Bit {
                mask: f.b64("value")?,
                op,
            }
        }
        "NullComparator" => Comparator::Null,
        "RegexStringComparator" => Comparator::regex(&f.string("value")?)?,
        "SubstringComparator" => Comparator::substring(&f.string("value")?),
        other => return Err(format!("unknown comparator type: {other}")),
    })
}

fn build(v: &Value, depth: usize) -> Result<Filter, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "the filter is nested more than {MAX_DEPTH} levels deep"
        ));
    }
    let Value::Object(m) = v else {
        return Err(format!(
            "a filter must be a JSON object with a \"type\" (e.g. \
             {{\"type\":\"PrefixFilter\",\"value\":\"<base64>\"}}), got {}",
            kind(v)
        ));
    };
    let ty = match m.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(format!(
                "a filter's \"type\" must be a string, got {}",
                kind(other)
            ))
        }
        None => return Err("a filter needs a \"type\" field (e.g. \"PrefixFilter\")".to_string()),
    };
    let f = Fields { m, ty };
    Ok(match ty {
        "PrefixFilter" => Filter::Prefix(f.b64("value")?),
        "RowFilter" => Filter::Row(f.op()?, f.comparator()?),
        "FamilyFilter" => Filter::Family(f.op()?, f.comparator()?),
        "QualifierFilter" => Filter::Qualifier(f.op()?, f.comparator()?),
        "ValueFilter" => Filter::Value(f.op()?, f.comparator()?),
        "SingleColumnValueFilter" | "SingleColumnValueExcludeFilter" => {
            Filter::SingleColumnValue(Box::new(SingleColumnValue {
                family: f.b64("family")?,
                qualifier: f.opt_b64("qualifier")?.unwrap_or_default(),
                op: f.op()?,
                comparator: f.comparator()?,
                filter_if_missing: f.opt_bool("ifMissing")?.unwrap_or(false),
                latest_version_only: f.opt_bool("latestVersion")?.unwrap_or(true),
                exclude: ty == "SingleColumnValueExcludeFilter",
            }))
        }
        "DependentColumnFilter" => {
            let compare = match (f.get("op"), f.get("comparator")) {
                (Some(_), Some(_)) => Some((f.op()?, f.comparator()?)),
                _ => None,
            };
            Filter::DependentColumn {
                family: f.b64("family")?,
                qualifier: f.opt_b64("qualifier")?.unwrap_or_default(),
                drop_dependent: f.opt_bool("dropDependentColumn")?.unwrap_or(false),
                compare,
            }
        }
        "ColumnPrefixFilter" => Filter::ColumnPrefix(f.b64("value")?),
        "MultipleColumnPrefixFilter" => {
            let mut prefixes = Vec::new();
            for item in f.array("prefixes")?.into_iter().flatten() {
                let s = value_to_string(item, ty, "prefixes")?;
                prefixes.push(decode_base64(&s).map_err(|e| {
                    format!("bad base64 in \"prefixes\" of {ty}: {e} (got \"{s}\")")
                })?);
            }
            prefixes.sort();
            prefixes.dedup();
            Filter::MultipleColumnPrefix(prefixes)
        }
        "ColumnRangeFilter" => Filter::ColumnRange {
            min: f.opt_b64("minColumn")?.filter(|c| !c.is_empty()),
            min_inclusive: f.opt_bool("minColumnInclusive")?.unwrap_or(true),
            max: f.opt_b64("maxColumn")?.filter(|c| !c.is_empty()),
            max_inclusive: f.opt_bool("maxColumnInclusive")?.unwrap_or(false),
        },
        "FirstKeyOnlyFilter" => Filter::FirstKeyOnly,
        "KeyOnlyFilter" => Filter::KeyOnly {
            len_as_val: f.opt_bool("lenAsVal")?.unwrap_or(false),
        },
        "PageFilter" => {
            let size = f.string("value")?;
            match size.trim().parse::<i64>() {
                Ok(n) if n >= 0 => Filter::Page(n.unsigned_abs()),
                Ok(n) => return Err(format!("the page size of PageFilter must not be negative (got {n})")),
                Err(_) => {
                    return Err(format!(
                        "the \"value\" of PageFilter must be the page size as a number (got \"{size}\")"
                    ))
                }
            }
        }
        "InclusiveStopFilter" => Filter::InclusiveStop {
            stop: f.b64("value")?,
            reversed: false,
        },
        "TimestampsFilter" => {
            let items = f
                .array("timestamps")?
                .ok_or_else(|| f.missing("timestamps"))?;
            let mut stamps = Vec::with_capacity(items.len());
            for item in items {
                let ts = value_to_i64(item, ty, "timestamps")?;
                if ts < 0 {
                    return Err(format!(
                        "timestamps of TimestampsFilter must not be negative (got {ts})"
                    ));
                }
                stamps.push(ts);
            }
            stamps.sort_unstable();
            stamps.dedup();
            Filter::Timestamps(stamps)
        }
        "ColumnCountGetFilter" => Filter::ColumnCountGet(f.count("limit")?),
        "ColumnPaginationFilter" => Filter::ColumnPagination {
            limit: f.count("limit")?,
            offset: f.count("offset")?,
        },
        "MultiRowRangeFilter" => {
            let items = f.array("ranges")?.ok_or_else(|| f.missing("ranges"))?;
            if items.is_empty() {
                return Err(
                    "MultiRowRangeFilter needs at least one range in \"ranges\"".to_string()
                );
            }
            let mut ranges = Vec::with_capacity(items.len());
            for item in items {
                let Value::Object(rm) = item else {
                    return Err(format!(
                        "each range of MultiRowRangeFilter must be an object, got {}",
                        kind(item)
                    ));
                };
                let r = Fields {
                    m: rm,
                    ty: "a MultiRowRangeFilter range",
                };
                ranges.push(RowRange {
                    start: r.opt_b64("startRow")?.unwrap_or_default(),
                    start_inclusive: r.opt_bool("startRowInclusive")?.unwrap_or(true),
                    stop: r.opt_b64("stopRow")?.unwrap_or_default(),
                    stop_inclusive: r.opt_bool("stopRowInclusive")?.unwrap_or(false),
                });
            }
            Filter::MultiRowRange(ranges)
        }
        "FuzzyRowFilter" => {
            let items = f
                .array("fuzzyKeys")?
                .ok_or_else(|| f.missing("fuzzyKeys"))?;
            let mut keys = Vec::with_capacity(items.len());
            for item in items {
                let Value::Object(km) = item else {
                    return Err(format!(
                        "each fuzzy key of FuzzyRowFilter must be an object, got {}",
                        kind(item)
                    ));
                };
                let k = Fields {
                    m: km,
                    ty: "a FuzzyRowFilter key",
                };
                let key = k.b64("key")?;
                let mask = k.b64("mask")?;
                if key.len() != mask.len() {
                    return Err(format!(
                        "a FuzzyRowFilter key and its mask must have the same length ({} and {})",
                        key.len(),
                        mask.len()
                    ));
                }
                keys.push(FuzzyKey { key, mask });
            }
            Filter::FuzzyRow(keys)
        }
        "RandomRowFilter" => {
            let chance = f.get("chance").ok_or_else(|| f.missing("chance"))?;
            let chance = match chance {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            }
            .ok_or_else(|| {
                format!("\"chance\" of RandomRowFilter must be a number, got {chance}")
            })?;
            Filter::RandomRow {
                chance: chance as f32,
                seed: random_seed(),
            }
        }
        "SkipFilter" => Filter::Skip(f.wrapped(depth)?),
        "WhileMatchFilter" => Filter::WhileMatch(f.wrapped(depth)?),
        "FilterList" => {
            let op = match f
                .opt_str("op")?
                .as_deref()
                .map(str::to_ascii_uppercase)
                .as_deref()
            {
                None | Some("MUST_PASS_ALL") => ListOp::MustPassAll,
                Some("MUST_PASS_ONE") => ListOp::MustPassOne,
                Some(other) => {
                    return Err(format!(
                        "invalid FilterList op '{other}' (expected MUST_PASS_ALL or MUST_PASS_ONE)"
                    ))
                }
            };
            Filter::List(op, f.sub_filters(depth)?)
        }
        other => return Err(format!("unknown filter type: {other}")),
    })
}

/// A per-filter seed for `RandomRowFilter`, from the process's random hasher keys.
pub(super) fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    h.finish()
}
