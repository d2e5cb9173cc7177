//! The lab's one SHA rule (pure), shared by the gate, the records, git and the CLI, and [`Sha`],
//! the type that carries it: parsed once where a SHA enters, short forms derived here only.

/// 40 lowercase hex characters: the only SHA form the lab accepts.
pub fn is_full_sha(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The first 7 characters, for humans (pictures, summaries).
pub fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// A full commit SHA (40 lowercase hex characters), checked once at the edge (a flag, an
/// Application's field); what takes a `Sha` never checks again. JSON: the plain string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Sha(String);

/// What was given where a full SHA was needed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{found:?} is not a full 40-hex lowercase SHA")]
pub struct NotASha {
    pub found: String,
}

impl Sha {
    pub fn parse(s: &str) -> Result<Sha, NotASha> {
        if is_full_sha(s) {
            Ok(Sha(s.to_string()))
        } else {
            Err(NotASha {
                found: s.to_string(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 7 characters, for humans.
    pub fn short(&self) -> &str {
        &self.0[..7]
    }

    /// The first 12 characters, for likely causes and verdict lines.
    pub fn short12(&self) -> &str {
        &self.0[..12]
    }
}

impl std::ops::Deref for Sha {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Sha {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Sha {
    type Err = NotASha;
    fn from_str(s: &str) -> Result<Sha, NotASha> {
        Sha::parse(s)
    }
}

impl PartialEq<str> for Sha {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sha_is_parsed_once_and_shortened_here() {
        let full = "0123456789abcdef0123456789abcdef01234567";
        let sha = Sha::parse(full).unwrap();
        assert_eq!(sha.as_str(), full);
        assert_eq!(sha.short(), "0123456");
        assert_eq!(sha.short12(), "0123456789ab");
        assert_eq!(serde_json::to_value(&sha).unwrap(), serde_json::json!(full));
        assert_eq!(
            Sha::parse("main").unwrap_err().to_string(),
            "\"main\" is not a full 40-hex lowercase SHA"
        );
        assert!(full.to_uppercase().parse::<Sha>().is_err());
    }

    #[test]
    fn only_full_lowercase_hex_is_a_sha() {
        assert!(is_full_sha("0123456789abcdef0123456789abcdef01234567"));
        for bad in [
            "",
            "main",
            "0123456789ABCDEF0123456789abcdef01234567",
            "0123456789abcdef0123456789abcdef0123456",
            "0123456789abcdef0123456789abcdef012345678",
        ] {
            assert!(!is_full_sha(bad), "{bad}");
        }
        assert_eq!(short("0123456789abcdef"), "0123456");
        assert_eq!(short("abc"), "abc");
    }
}
