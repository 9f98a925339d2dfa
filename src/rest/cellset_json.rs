//! The JSON CellSet body read in one pass into typed values that borrow its strings
//! ([`Body`]), for [`super::cellset`] to check and decode: no `serde_json::Value` tree, no
//! owned string per key, column and value.
//!
//! # Invariants
//! 1. Reading fails only on JSON syntax (and the parser's own limits), never on what a value
//!    holds: every field is taken as whatever it is ([`Slot`], [`List`], [`Obj`]), and the
//!    CellSet rules are applied afterwards, in document order, by `cellset::parse_json`. A
//!    body therefore gets exactly the answer a `serde_json::Value` reading gives it: a syntax
//!    error anywhere before any shape error, and the first shape error in document order.
//! 2. Every value, known field or not, is read through `deserialize_any`, as
//!    `serde_json::Value` reads it, so the nesting limit, the number rules and the string
//!    rules (UTF-8, escapes) apply everywhere exactly as they did.
//! 3. A repeated field keeps its last value, as `serde_json::Map` does.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A scalar field (`key`, `column`, `timestamp`, `$`) as the body gave it.
#[derive(Debug, Default, PartialEq)]
pub enum Slot<'a> {
    /// The field is not there.
    #[default]
    Absent,
    /// `null` (also a float `serde_json::Value` cannot hold, which it reads as null).
    Null,
    /// A string, borrowed from the body unless it holds escapes.
    Str(Cow<'a, str>),
    /// A number.
    Num(Number),
    /// A boolean, a list or an object.
    Other,
}

/// A list field (`Row`, `Cell`) as the body gave it.
#[derive(Debug, Default, PartialEq)]
pub enum List<T> {
    /// The field is not there, or `null`.
    #[default]
    Empty,
    /// A JSON list.
    Items(Vec<T>),
    /// A JSON object where a list belongs.
    Object,
    /// Anything else where a list belongs.
    Other,
}

/// An element that must be a JSON object.
#[derive(Debug, PartialEq)]
pub enum Obj<T> {
    /// It is one, with its fields.
    Obj(T),
    /// It is something else.
    Not,
}

/// The top-level object: `{"Row":[..]}`.
#[derive(Debug, Default, PartialEq)]
pub struct Body<'a> {
    pub row: List<Obj<RowJson<'a>>>,
}

/// One `Row` object: `{"key":..,"Cell":[..]}`.
#[derive(Debug, Default, PartialEq)]
pub struct RowJson<'a> {
    pub key: Slot<'a>,
    pub cell: List<Obj<CellJson<'a>>>,
}

/// One `Cell` object: `{"column":..,"timestamp":..,"$":..}`.
#[derive(Debug, Default, PartialEq)]
pub struct CellJson<'a> {
    pub column: Slot<'a>,
    pub timestamp: Slot<'a>,
    pub value: Slot<'a>,
}

/// Reads `body` (invariant 1: only a syntax error fails).
pub fn read(body: &[u8]) -> serde_json::Result<Obj<Body<'_>>> {
    serde_json::from_slice(body)
}

/// An object whose fields are read one by one; unknown fields are skipped.
trait Fields<'de>: Default {
    fn field<A: MapAccess<'de>>(&mut self, name: &str, map: &mut A) -> Result<(), A::Error>;
}

impl<'de> Fields<'de> for Body<'de> {
    fn field<A: MapAccess<'de>>(&mut self, name: &str, map: &mut A) -> Result<(), A::Error> {
        match name {
            "Row" => self.row = map.next_value()?,
            _ => map.next_value::<Skip>().map(drop)?,
        }
        Ok(())
    }
}

impl<'de> Fields<'de> for RowJson<'de> {
    fn field<A: MapAccess<'de>>(&mut self, name: &str, map: &mut A) -> Result<(), A::Error> {
        match name {
            "key" => self.key = map.next_value()?,
            "Cell" => self.cell = map.next_value()?,
            _ => map.next_value::<Skip>().map(drop)?,
        }
        Ok(())
    }
}

impl<'de> Fields<'de> for CellJson<'de> {
    fn field<A: MapAccess<'de>>(&mut self, name: &str, map: &mut A) -> Result<(), A::Error> {
        match name {
            "column" => self.column = map.next_value()?,
            "timestamp" => self.timestamp = map.next_value()?,
            "$" => self.value = map.next_value()?,
            _ => map.next_value::<Skip>().map(drop)?,
        }
        Ok(())
    }
}

/// Consumes the rest of a list, reading each element as `serde_json::Value` would.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<Skip>()?.is_some() {}
    Ok(())
}

/// Consumes the rest of an object, reading each key and value as `serde_json::Value` would.
fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<Skip, Skip>()?.is_some() {}
    Ok(())
}

/// Any value, read and dropped (through `deserialize_any`: invariant 2).
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Skip;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_unit<E>(self) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_none<E>(self) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Skip, A::Error> {
                drain_seq(seq).map(|()| Skip)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Skip, A::Error> {
                drain_map(map).map(|()| Skip)
            }
        }
        d.deserialize_any(V)
    }
}

/// An object key, borrowed unless it holds escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Slot<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Slot<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Slot<'de>, E> {
                Ok(Slot::Other)
            }
            fn visit_i64<E>(self, n: i64) -> Result<Slot<'de>, E> {
                Ok(Slot::Num(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Slot<'de>, E> {
                Ok(Slot::Num(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Slot<'de>, E> {
                Ok(Number::from_f64(n).map_or(Slot::Null, Slot::Num))
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Slot<'de>, E> {
                Ok(Slot::Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Slot<'de>, E> {
                Ok(Slot::Str(Cow::Owned(s.to_owned())))
            }
            fn visit_unit<E>(self) -> Result<Slot<'de>, E> {
                Ok(Slot::Null)
            }
            fn visit_none<E>(self) -> Result<Slot<'de>, E> {
                Ok(Slot::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Slot<'de>, A::Error> {
                drain_seq(seq).map(|()| Slot::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Slot<'de>, A::Error> {
                drain_map(map).map(|()| Slot::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<List<T>, E> {
                Ok(List::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<List<T>, E> {
                Ok(List::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<List<T>, E> {
                Ok(List::Other)
            }
            fn visit_f64<E>(self, n: f64) -> Result<List<T>, E> {
                // A float `serde_json::Value` cannot hold is read as null (invariant 1).
                Ok(if n.is_finite() {
                    List::Other
                } else {
                    List::Empty
                })
            }
            fn visit_str<E>(self, _: &str) -> Result<List<T>, E> {
                Ok(List::Other)
            }
            fn visit_unit<E>(self) -> Result<List<T>, E> {
                Ok(List::Empty)
            }
            fn visit_none<E>(self) -> Result<List<T>, E> {
                Ok(List::Empty)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<List<T>, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(List::Items(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<List<T>, A::Error> {
                drain_map(map).map(|()| List::Object)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<'de, T: Fields<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Fields<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_str<E>(self, _: &str) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_unit<E>(self) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_none<E>(self) -> Result<Obj<T>, E> {
                Ok(Obj::Not)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Obj<T>, A::Error> {
                drain_seq(seq).map(|()| Obj::Not)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Obj<T>, A::Error> {
                let mut fields = T::default();
                while let Some(Key(name)) = map.next_key()? {
                    fields.field(&name, &mut map)?;
                }
                Ok(Obj::Obj(fields))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}
