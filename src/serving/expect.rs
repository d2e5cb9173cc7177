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
    pub fn from_flags(
        body: Option<&str>,
        contains: Option<&str>,
        json: Option<&str>,
        sha: &str,
    ) -> Result<Expect, ExpectError> {
        let _ = (body, contains, json, sha);
        unimplemented!("helper: parse and validate")
    }

    /// Whether an answer's body satisfies the expectation (the 2xx check is the caller's).
    pub fn matches(&self, body: &str) -> bool {
        let _ = body;
        unimplemented!("helper")
    }

    /// One line for a human: "body == \"v2\"", "body contains \"v2\"", "/version == \"abc\"".
    pub fn describe(&self) -> String {
        unimplemented!("helper")
    }
}
