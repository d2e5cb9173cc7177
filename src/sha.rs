//! The lab's one SHA rule (pure), shared by the gate, the records, git and the CLI.

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

#[cfg(test)]
mod tests {
    use super::*;

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
