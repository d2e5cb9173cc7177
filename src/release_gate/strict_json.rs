//! Strict JSON reading for evidence files.
//!
//! serde_json already rejects NaN/Infinity tokens, trailing garbage, invalid UTF-8 and nesting
//! deeper than 128 levels. What it does not do is reject duplicate object keys (it silently keeps
//! the last one), and duplicate keys in evidence are ambiguous: a gate that reads `"ready": 0`
//! and then `"ready": 1` must not guess which one the observer meant. This module adds that.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Evidence files are a few KiB; anything past this is not evidence. Reading stops here, so a
/// 100 MB (or endless) input costs bounded memory.
pub const MAX_INPUT_BYTES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonInputError {
    #[error("input is empty")]
    Empty,
    #[error("input is larger than {limit} bytes; an evidence file is a few KiB")]
    TooLarge { limit: usize },
    #[error("input is not UTF-8 (first invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("input is not valid JSON: {0}")]
    Syntax(String),
    #[error("duplicate key {key:?} in one object: the evidence is ambiguous")]
    DuplicateKey { key: String },
    #[error("top-level JSON must be an object, found {found}")]
    NotAnObject { found: &'static str },
}

/// The JSON type name used in every message, so bool/int/float/string confusions read plainly.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "float",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Parses `bytes` as one JSON value, rejecting duplicate keys anywhere in it.
pub fn parse_value(bytes: &[u8]) -> Result<Value, JsonInputError> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(JsonInputError::TooLarge {
            limit: MAX_INPUT_BYTES,
        });
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(JsonInputError::Empty);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| JsonInputError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictSeed.deserialize(&mut de).map_err(classify)?;
    de.end().map_err(classify)?;
    Ok(value)
}

/// Parses `bytes` as a JSON object (the shape of an evidence file).
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, JsonInputError> {
    match parse_value(bytes)? {
        Value::Object(map) => Ok(map),
        other => Err(JsonInputError::NotAnObject {
            found: type_name(&other),
        }),
    }
}

const DUPLICATE_MARKER: &str = "\u{0}duplicate key:";

fn classify(e: serde_json::Error) -> JsonInputError {
    let msg = e.to_string();
    match msg.strip_prefix(DUPLICATE_MARKER) {
        Some(rest) => {
            // serde_json appends " at line L column C"; keep only the key.
            let key = rest.rsplit_once(" at line ").map_or(rest, |(k, _)| k);
            JsonInputError::DuplicateKey {
                key: key.to_string(),
            }
        }
        None => JsonInputError::Syntax(msg),
    }
}

struct StrictSeed;

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictSeed)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!("{DUPLICATE_MARKER}{key}")));
            }
            let value = map.next_value_seed(StrictSeed)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_key_is_named() {
        let err = parse_object(br#"{"ready": 0, "ready": 1}"#).unwrap_err();
        assert_eq!(
            err,
            JsonInputError::DuplicateKey {
                key: "ready".into()
            }
        );
    }

    #[test]
    fn nested_duplicate_is_found() {
        let err = parse_object(br#"{"conditions": [{"type": "a", "type": "b"}]}"#).unwrap_err();
        assert_eq!(err, JsonInputError::DuplicateKey { key: "type".into() });
    }

    #[test]
    fn numbers_keep_their_json_type() {
        let v = parse_value(b"[1, 1.0, 1e0, -1, 18446744073709551615]").unwrap();
        let names: Vec<_> = v.as_array().unwrap().iter().map(type_name).collect();
        assert_eq!(names, ["integer", "float", "float", "integer", "integer"]);
    }
}
