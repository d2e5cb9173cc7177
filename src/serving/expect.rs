//! What a probe answer must hold (exactly one of `--expect-body`, `--expect-contains`,
//! `--expect-json POINTER=VALUE`). `{sha}` in an expected value stands for the full SHA.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Expect {
    /// The body is exactly this text.
    Body { text: String },
    /// The body contains this text.
    Contains { text: String },
    /// The body is JSON whose value at the RFC 6901 `pointer` equals `value` (VALUE parsed as
    /// JSON when it parses, else taken as a JSON string).
    Json {
        pointer: String,
        value: serde_json::Value,
    },
}

/// A bad `--expect-*` value, naming the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag}: {reason}")]
pub struct ExpectError {
    pub flag: &'static str,
    pub reason: String,
}

impl Expect {
    /// From the flags as given (exactly one must be set), with `{sha}` replaced by `sha`.
    ///
    /// Refused, naming the flag(s): none or several set; an empty `--expect-body` or
    /// `--expect-contains` (almost always an unset shell variable, and an empty "contains"
    /// would match every body); `--expect-json` without `=`, or whose POINTER is not RFC 6901
    /// (empty, or starting with `/`, with `~` only as `~0` or `~1`). `--expect-json` splits at
    /// the FIRST `=`, so VALUE may contain `=` (a POINTER containing `=` cannot be given).
    /// VALUE is parsed as JSON when it parses (`3`, `true`, `"x"`, `{"a":1}`), else taken as a
    /// JSON string; `{sha}` is replaced in VALUE (and in the texts) before parsing.
    pub fn from_flags(
        body: Option<&str>,
        contains: Option<&str>,
        json: Option<&str>,
        sha: &str,
    ) -> Result<Expect, ExpectError> {
        let fill = |s: &str| s.replace("{sha}", sha);
        match (body, contains, json) {
            (Some(b), None, None) => {
                if b.is_empty() {
                    return Err(ExpectError {
                        flag: "--expect-body",
                        reason: "is empty (an unset variable?); give the exact body expected"
                            .into(),
                    });
                }
                Ok(Expect::Body { text: fill(b) })
            }
            (None, Some(c), None) => {
                if c.is_empty() {
                    return Err(ExpectError {
                        flag: "--expect-contains",
                        reason: "is empty: it would match every body".into(),
                    });
                }
                Ok(Expect::Contains { text: fill(c) })
            }
            (None, None, Some(j)) => {
                let flag = "--expect-json";
                let Some((pointer, value)) = j.split_once('=') else {
                    return Err(ExpectError {
                        flag,
                        reason: format!("{j:?} is not POINTER=VALUE (no '=')"),
                    });
                };
                check_pointer(pointer).map_err(|reason| ExpectError { flag, reason })?;
                let value = fill(value);
                let value = serde_json::from_str::<serde_json::Value>(&value)
                    .unwrap_or(serde_json::Value::String(value));
                Ok(Expect::Json {
                    pointer: pointer.to_string(),
                    value,
                })
            }
            (None, None, None) => Err(ExpectError {
                flag: "--expect-body | --expect-contains | --expect-json",
                reason: "exactly one must be set; none is".into(),
            }),
            (b, c, j) => Err(ExpectError {
                flag: match (b.is_some(), c.is_some(), j.is_some()) {
                    (true, true, false) => "--expect-body, --expect-contains",
                    (true, false, true) => "--expect-body, --expect-json",
                    (false, true, true) => "--expect-contains, --expect-json",
                    _ => "--expect-body, --expect-contains, --expect-json",
                },
                reason: "exactly one must be set; these are all set".into(),
            }),
        }
    }

    /// Whether an answer's body satisfies the expectation (the 2xx check is the caller's).
    ///
    /// Body: byte-for-byte equal (no trimming: a trailing newline is content). Contains: a
    /// substring. Json: the body parses as JSON and the value at the pointer equals VALUE,
    /// numbers compared by value (`1` equals `1.0`); a body that is not JSON never matches.
    pub fn matches(&self, body: &str) -> bool {
        match self {
            Expect::Body { text } => body == text,
            Expect::Contains { text } => body.contains(text.as_str()),
            Expect::Json { pointer, value } => {
                serde_json::from_str::<serde_json::Value>(body)
                    .ok()
                    .and_then(|v| v.pointer(pointer).map(|found| json_eq(found, value)))
                    == Some(true)
            }
        }
    }

    /// One line for a human: "body == \"v2\"", "body contains \"v2\"", "/version == \"abc\"".
    pub fn describe(&self) -> String {
        match self {
            Expect::Body { text } => format!("body == {text:?}"),
            Expect::Contains { text } => format!("body contains {text:?}"),
            Expect::Json { pointer, value } => {
                let at = if pointer.is_empty() {
                    "(whole JSON)"
                } else {
                    pointer
                };
                format!("{at} == {value}")
            }
        }
    }
}

/// RFC 6901: empty (the whole document) or `/`-prefixed, `~` only as `~0` / `~1`.
fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "POINTER {pointer:?} is not a JSON pointer (RFC 6901): it must be empty or start with '/'"
        ));
    }
    let mut chars = pointer.chars();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(format!(
                "POINTER {pointer:?}: '~' must be followed by 0 or 1 (RFC 6901)"
            ));
        }
    }
    Ok(())
}

/// JSON equality with numbers compared by value.
fn json_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "3b18e512dba79e4c8300dd08aeb37f8e728b8dad";

    #[test]
    fn exactly_one_flag() {
        assert!(Expect::from_flags(None, None, None, SHA).is_err());
        let e = Expect::from_flags(Some("a"), None, Some("/a=1"), SHA).unwrap_err();
        assert_eq!(e.flag, "--expect-body, --expect-json");
        let e = Expect::from_flags(Some(""), None, None, SHA).unwrap_err();
        assert_eq!(e.flag, "--expect-body");
        let e = Expect::from_flags(None, Some(""), None, SHA).unwrap_err();
        assert_eq!(e.flag, "--expect-contains");
    }

    #[test]
    fn sha_is_filled_in() {
        let e = Expect::from_flags(None, Some("at {sha}"), None, SHA).unwrap();
        assert!(e.matches(&format!("<p>at {SHA}</p>")));
        assert!(!e.matches("at {sha}"));
    }

    #[test]
    fn json_pointer_and_value() {
        let e = Expect::from_flags(None, None, Some("/version={sha}"), SHA).unwrap();
        assert_eq!(
            e,
            Expect::Json {
                pointer: "/version".into(),
                value: serde_json::Value::String(SHA.into())
            }
        );
        assert!(e.matches(&format!(r#"{{"version":"{SHA}"}}"#)));
        assert!(!e.matches("not json"));
        let n = Expect::from_flags(None, None, Some("/a/0=1"), SHA).unwrap();
        assert!(n.matches(r#"{"a":[1.0]}"#));
        assert!(!n.matches(r#"{"a":["1"]}"#));
        let eq = Expect::from_flags(None, None, Some("/k=a=b"), SHA).unwrap();
        assert!(eq.matches(r#"{"k":"a=b"}"#));
        for bad in ["version=1", "/a~2=1", "no-equals"] {
            let e = Expect::from_flags(None, None, Some(bad), SHA).unwrap_err();
            assert_eq!(e.flag, "--expect-json", "{bad}");
        }
        let esc = Expect::from_flags(None, None, Some("/a~1b=true"), SHA).unwrap();
        assert!(esc.matches(r#"{"a/b":true}"#));
    }

    #[test]
    fn body_is_exact() {
        let e = Expect::from_flags(Some("v2"), None, None, SHA).unwrap();
        assert!(e.matches("v2"));
        assert!(!e.matches("v2\n"));
        assert_eq!(e.describe(), "body == \"v2\"");
    }
}
