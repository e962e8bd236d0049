//! The held credentials gate: finds, in a proposal's added lines, the value of any `credentialEnv`
//! variable the daemon holds, comparing keyed hashes (never the values: the accepting process
//! need not hold them). Each token of a line (split at spaces, quotes and brackets) is hashed in
//! every window as long as a held value, so `KEY=value`, `"value"` and `Bearer value` are found.

use std::collections::BTreeSet;
use std::ops::Range;

use roundtable_specs::secrets::fingerprint::{CredentialFingerprint, MIN_LENGTH};

/// The recorded fingerprints and the keyed hash that made them.
pub struct HeldCredentials<'a> {
    prints: Vec<&'a CredentialFingerprint>,
    lengths: BTreeSet<usize>,
    digest: &'a dyn Fn(&[u8]) -> String,
}

impl std::fmt::Debug for HeldCredentials<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.prints.iter().map(|p| p.name.as_str()).collect();
        f.debug_struct("HeldCredentials").field("names", &names).finish_non_exhaustive()
    }
}

/// Where a token ends: what cannot be part of a credential written into code or config.
fn separates(byte: u8) -> bool {
    byte.is_ascii_whitespace() || b"\"'`,;()[]{}<>".contains(&byte)
}

impl<'a> HeldCredentials<'a> {
    /// `digest` hashes a candidate as the fingerprints were made; values shorter than
    /// [`MIN_LENGTH`] were never fingerprinted and any such print is ignored.
    pub fn new(prints: &'a [CredentialFingerprint], digest: &'a dyn Fn(&[u8]) -> String) -> Self {
        let prints: Vec<&CredentialFingerprint> = prints.iter().filter(|p| p.length >= MIN_LENGTH).collect();
        let lengths = prints.iter().map(|p| p.length).collect();
        Self { prints, lengths, digest }
    }

    /// The names whose value `line` holds.
    pub fn scan_line(&self, line: &str) -> BTreeSet<&'a str> {
        self.spans(line).into_iter().map(|(_, name)| name).collect()
    }

    /// Each held value in `line`: its byte range and its name (to mask it where `line` is shown).
    pub fn spans(&self, line: &str) -> Vec<(Range<usize>, &'a str)> {
        let mut found = Vec::new();
        if self.prints.is_empty() {
            return found;
        }
        let bytes = line.as_bytes();
        let mut start = 0;
        for end in (0..=bytes.len()).filter(|&at| at == bytes.len() || separates(bytes[at])) {
            let token = &bytes[start..end];
            for &length in self.lengths.range(..=token.len()) {
                for (offset, window) in token.windows(length).enumerate() {
                    let digest = (self.digest)(window);
                    let at = start + offset;
                    found.extend(
                        self.prints
                            .iter()
                            .filter(|p| p.length == length && p.digest == digest)
                            .map(|p| (at..at + length, p.name.as_str())),
                    );
                }
            }
            start = end + 1;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in keyed hash for the decision logic: the store's is HMAC-SHA256.
    fn digest(bytes: &[u8]) -> String {
        roundtable_specs::digest::sha256_hex(&[b"key:".as_slice(), bytes].concat())
    }

    #[test]
    fn a_held_value_is_found_wherever_it_is_written_and_only_its_name_is_said() {
        let value = "acme-live-0123456789abcdef";
        let prints = vec![CredentialFingerprint::of("ACME_KEY", value, &digest).expect("long enough")];
        let held = HeldCredentials::new(&prints, &digest);
        for line in [
            format!("ACME_KEY={value}"),
            format!("  \"apiKey\": \"{value}\","),
            format!("Authorization: Bearer {value}"),
            format!("url = \"https://x.example/?k={value}&v=1\""),
        ] {
            assert_eq!(held.scan_line(&line), BTreeSet::from(["ACME_KEY"]), "{line}");
        }
        let line = format!("cache/{value}/x");
        assert_eq!(held.spans(&line), [(6..6 + value.len(), "ACME_KEY")], "where it is, to mask it");
        for look_alike in ["acme-live-0123456789abcdeX", "acme-live-0123456789abcde", "ACME_KEY=${ACME_KEY}"] {
            assert!(held.scan_line(look_alike).is_empty(), "{look_alike}");
        }
    }

    #[test]
    fn short_values_are_not_fingerprinted() {
        assert!(CredentialFingerprint::of("PIN", "12345", &digest).is_none());
    }
}
