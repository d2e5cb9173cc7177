//! The release gate (step 8 of the lab): approves a state only when it is really serving the
//! expected revision. Pure: JSON in, every violation out. It never writes anything.
//!
//! Fail closed: every required field is checked on its own, by JSON type first. A missing key, a
//! `null`, `true` for a replica count or `"1"` for 1 each yield a violation naming the field. The
//! verdict also records which fields were evaluated, so a gate that evaluated nothing can never
//! approve (see [`Verdict::approved`]).

pub mod strict_json;

use serde::Serialize;
use serde_json::{Map, Value};
use strict_json::{type_name, JsonInputError};

/// The fields the contract reads, in report order. Every other field is ignored.
pub const REQUIRED_FIELDS: [&str; 13] = [
    "target_revision",
    "observed_revision",
    "sync",
    "health",
    "replicas",
    "updated",
    "available",
    "ready",
    "ready_endpoints",
    "generation",
    "observed_generation",
    "http_code",
    "http_body",
];

/// The five counters that must each be the JSON integer 1.
pub const COUNTERS: [&str; 5] = [
    "replicas",
    "updated",
    "available",
    "ready",
    "ready_endpoints",
];

/// Name used for the EXPECTED_SHA argument when it is itself malformed.
pub const EXPECTED_SHA_ARG: &str = "EXPECTED_SHA";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The state field (or `EXPECTED_SHA` for the argument) that breaks the contract.
    pub field: String,
    /// The rule it breaks, in words.
    pub rule: String,
    /// What was found: `missing`, or the JSON value (shortened) with its JSON type.
    pub found: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub approved: bool,
    /// Set when the input could not be read as one JSON object; then no field was evaluated.
    pub input_error: Option<String>,
    pub violations: Vec<Violation>,
    /// Fields whose rules were evaluated. Approval requires all of [`REQUIRED_FIELDS`].
    pub evaluated: Vec<&'static str>,
}

impl Verdict {
    /// The distinct field names the verdict rejects, in report order.
    pub fn failing_fields(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for v in &self.violations {
            if !out.contains(&v.field.as_str()) {
                out.push(&v.field);
            }
        }
        out
    }

    /// One human line per violation (what the command prints on stderr).
    pub fn report_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(e) = &self.input_error {
            lines.push(format!("input: {e}"));
        }
        for v in &self.violations {
            lines.push(format!("{}: {} (found {})", v.field, v.rule, v.found));
        }
        lines
    }
}

pub use crate::sha::is_full_sha;

/// Reads the state from raw bytes (strictly: duplicate keys, non-objects etc. are rejections).
pub fn evaluate_bytes(state: &[u8], expected_sha: &str, expected_body: &str) -> Verdict {
    match strict_json::parse_object(state) {
        Ok(map) => evaluate(&map, expected_sha, expected_body),
        Err(e) => rejected_input(e),
    }
}

/// Evaluates an already-parsed JSON value. A non-object is a rejection.
pub fn evaluate_value(state: &Value, expected_sha: &str, expected_body: &str) -> Verdict {
    match state {
        Value::Object(map) => evaluate(map, expected_sha, expected_body),
        other => rejected_input(JsonInputError::NotAnObject {
            found: type_name(other),
        }),
    }
}

fn rejected_input(e: JsonInputError) -> Verdict {
    Verdict {
        approved: false,
        input_error: Some(e.to_string()),
        violations: vec![],
        evaluated: vec![],
    }
}

/// The contract, rule by rule. Every rule runs; nothing short-circuits.
pub fn evaluate(state: &Map<String, Value>, expected_sha: &str, expected_body: &str) -> Verdict {
    let mut c = Checker {
        state,
        violations: Vec::new(),
        evaluated: Vec::new(),
    };

    // Rule 1: the expected SHA is well formed and both revisions equal it.
    let sha_ok = is_full_sha(expected_sha);
    if !sha_ok {
        c.violations.push(Violation {
            field: EXPECTED_SHA_ARG.into(),
            rule: "must be 40 lowercase hex characters".into(),
            found: shorten(&Value::String(expected_sha.into())),
        });
    }
    let rule = format!("must be the string EXPECTED_SHA {expected_sha:?}");
    for field in ["target_revision", "observed_revision"] {
        c.string_equals(field, expected_sha, &rule);
    }

    // Rule 2: exact status strings.
    c.string_equals("sync", "Synced", "must be the string \"Synced\"");
    c.string_equals("health", "Healthy", "must be the string \"Healthy\"");

    // Rule 3: each counter is the JSON integer 1 (not true, "1", 1.0 or 1e0).
    for field in COUNTERS {
        c.check(field, |v| match as_integer(v) {
            Some(1) => Ok(()),
            Some(_) => Err("must be the JSON integer 1".into()),
            None => Err(format!(
                "must be the JSON integer 1, not a {}",
                type_name(v)
            )),
        });
    }

    // Rule 4: generation is a positive integer; observed_generation an integer equal to it.
    let generation = c.check("generation", |v| match as_integer(v) {
        Some(g) if g > 0 => Ok(()),
        Some(_) => Err("must be a positive integer".into()),
        None => Err(format!(
            "must be a positive integer, not a {}",
            type_name(v)
        )),
    });
    let generation = generation.and_then(as_integer).filter(|g| *g > 0);
    let observed = c.check("observed_generation", |v| match as_integer(v) {
        None => Err(format!("must be an integer, not a {}", type_name(v))),
        Some(_) => Ok(()),
    });
    // Both are well formed but differ: either may be the wrong one, so both are named.
    if let (Some(g), Some(o)) = (generation, observed.and_then(as_integer)) {
        if g != o {
            c.violations.push(Violation {
                field: "generation".into(),
                rule: format!("must equal observed_generation ({o})"),
                found: format!("{g} (integer)"),
            });
            c.violations.push(Violation {
                field: "observed_generation".into(),
                rule: format!(
                    "must equal generation ({g}): the controller has not observed the latest spec"
                ),
                found: format!("{o} (integer)"),
            });
        }
    }

    // Rule 5: the service really answers with the expected page.
    c.check("http_code", |v| match as_integer(v) {
        Some(200) => Ok(()),
        Some(_) => Err("must be the JSON integer 200".into()),
        None => Err(format!(
            "must be the JSON integer 200, not a {}",
            type_name(v)
        )),
    });
    c.string_equals(
        "http_body",
        expected_body,
        "must equal EXPECTED_BODY byte for byte",
    );

    let complete = REQUIRED_FIELDS.iter().all(|f| c.evaluated.contains(f));
    let approved = complete && sha_ok && c.violations.is_empty();
    Verdict {
        approved,
        input_error: None,
        violations: c.violations,
        evaluated: c.evaluated,
    }
}

/// A JSON integer (never a bool, string or float such as 1.0 or 1e0).
fn as_integer(v: &Value) -> Option<i128> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from)),
        _ => None,
    }
}

struct Checker<'a> {
    state: &'a Map<String, Value>,
    violations: Vec<Violation>,
    evaluated: Vec<&'static str>,
}

impl<'a> Checker<'a> {
    /// Rule 6 for every field (missing or null is a rejection), then the field's own rule.
    /// Returns the value when it passed.
    fn check(
        &mut self,
        field: &'static str,
        rule: impl FnOnce(&'a Value) -> Result<(), String>,
    ) -> Option<&'a Value> {
        self.evaluated.push(field);
        let outcome = match self.state.get(field) {
            None => Err(("is required".to_string(), "missing".to_string())),
            Some(Value::Null) => Err(("must not be null".to_string(), "null".to_string())),
            Some(v) => rule(v).map_err(|r| (r, shorten(v))),
        };
        match outcome {
            Ok(()) => self.state.get(field),
            Err((rule, found)) => {
                self.violations.push(Violation {
                    field: field.into(),
                    rule,
                    found,
                });
                None
            }
        }
    }

    fn string_equals(&mut self, field: &'static str, expected: &str, rule: &str) {
        self.check(field, |v| match v {
            Value::String(s) if s == expected => Ok(()),
            Value::String(_) => Err(rule.to_string()),
            other => Err(format!("{rule}, not a {}", type_name(other))),
        });
    }
}

/// `"value" (string)`, cut to a readable length so a hostile 1 MiB string does not flood stderr.
fn shorten(v: &Value) -> String {
    const MAX: usize = 120;
    let text = v.to_string();
    let text = if text.len() > MAX {
        let mut end = MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &text[..end], text.len())
    } else {
        text
    };
    format!("{text} ({})", type_name(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_sha_form() {
        assert!(is_full_sha("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_full_sha("0123456789ABCDEF0123456789abcdef01234567"));
        assert!(!is_full_sha("0123456789abcdef0123456789abcdef0123456"));
        assert!(!is_full_sha("0123456789abcdef0123456789abcdef012345678"));
        assert!(!is_full_sha("g123456789abcdef0123456789abcdef01234567"));
    }

    #[test]
    fn an_empty_object_is_rejected_on_every_field() {
        let v = evaluate(&Map::new(), "0123456789abcdef0123456789abcdef01234567", "x");
        assert!(!v.approved);
        assert_eq!(v.failing_fields(), REQUIRED_FIELDS.to_vec());
    }
}
