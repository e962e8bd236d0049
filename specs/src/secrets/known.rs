//! Values the daemon itself put into a session (each `credentialEnv` variable's value today, a
//! broker's per-session placeholder next), found byte for byte wherever they stand: masked as
//! `[redacted:NAME]` in what is kept of the session, and reported when a proposal adds one.
//! Pure: the caller hands the values and the bytes.
//!
//! A value is looked for as given and as a JSON string escapes it (an agent's JSON transcript
//! shows `a\"b` for `a"b`). A value shorter than [`MIN_SUBSTRING`] bytes is only found where it
//! stands as a whole word: masking every `abc` inside other words would garble the output and
//! flag every proposal, while a whole-word match still hides the value when it is printed alone.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;

/// Values at least this long are found inside other text; shorter ones only as whole words.
pub const MIN_SUBSTRING: usize = 8;

/// The shortest start of a value that is masked where kept output was cut off in the middle of
/// it: fewer bytes say nothing about the value.
pub const MIN_CUT_PREFIX: usize = 4;

/// One form of one value.
#[derive(Clone)]
struct Form {
    name: String,
    bytes: Vec<u8>,
    whole_word: bool,
}

/// The values injected into one session, by variable name.
#[derive(Clone, Default)]
pub struct KnownSecrets {
    /// Longest first, so where two forms start at the same byte the longer one is masked.
    forms: Vec<Form>,
    /// Names whose value is shorter than [`MIN_SUBSTRING`].
    short: BTreeSet<String>,
}

// Never the values: the set is held by tasks whose state may be logged.
impl fmt::Debug for KnownSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: BTreeSet<&str> = self.forms.iter().map(|form| form.name.as_str()).collect();
        f.debug_tuple("KnownSecrets").field(&names).finish()
    }
}

/// What a value is replaced with: `[redacted:NAME]`.
pub fn marker(name: &str) -> String {
    format!("[redacted:{name}]")
}

impl KnownSecrets {
    /// The set of `(name, value)` pairs; empty values are skipped (there is nothing to find).
    pub fn new<'a>(values: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut known = Self::default();
        for (name, value) in values {
            if value.is_empty() {
                continue;
            }
            let whole_word = value.len() < MIN_SUBSTRING;
            if whole_word {
                known.short.insert(name.to_owned());
            }
            let escaped = serde_json::to_string(value).unwrap_or_default();
            let escaped = escaped.get(1..escaped.len().saturating_sub(1)).unwrap_or_default();
            for form in std::iter::once(value).chain((escaped != value).then_some(escaped)) {
                known.forms.push(Form { name: name.to_owned(), bytes: form.as_bytes().to_vec(), whole_word });
            }
        }
        known.forms.sort_by_key(|form| std::cmp::Reverse(form.bytes.len()));
        known
    }

    /// The length of the longest form of any value: how much of a stream's tail may still be the
    /// start of one.
    pub fn longest(&self) -> usize {
        self.forms.first().map_or(0, |form| form.bytes.len())
    }

    /// Whether a value holds a line break (a PEM key): a stream cannot then be masked line by line.
    pub fn spans_lines(&self) -> bool {
        self.forms.iter().any(|form| form.bytes.contains(&b'\n'))
    }

    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// The names whose values are too short to be found inside other words.
    pub fn short_names(&self) -> impl Iterator<Item = &str> {
        self.short.iter().map(String::as_str)
    }

    /// Every place a value stands in `bytes`, sorted and without overlaps, with its name.
    fn spans(&self, bytes: &[u8]) -> Vec<(Range<usize>, &str)> {
        let mut spans: Vec<(Range<usize>, &str)> = Vec::new();
        for form in &self.forms {
            spans.extend(occurrences(bytes, form).map(|range| (range, form.name.as_str())));
        }
        // Earliest first; at one start the longest (forms are longest first, the sort is stable).
        spans.sort_by_key(|(range, _)| range.start);
        let mut merged: Vec<(Range<usize>, &str)> = Vec::with_capacity(spans.len());
        for (range, name) in spans {
            match merged.last_mut() {
                Some((last, _)) if range.start < last.end => last.end = last.end.max(range.end),
                _ => merged.push((range, name)),
            }
        }
        merged
    }

    /// `bytes` with every value replaced by its [`marker`]; other bytes, valid UTF-8 or not, are
    /// kept as they are.
    pub fn mask(&self, bytes: &[u8]) -> Vec<u8> {
        replace(bytes, self.spans(bytes))
    }

    /// [`KnownSecrets::mask`] of the head of a longer stream (output kept up to a limit): a
    /// value the cut went through is masked too, from its first [`MIN_CUT_PREFIX`] bytes on.
    pub fn mask_cut(&self, bytes: &[u8]) -> Vec<u8> {
        let mut spans = self.spans(bytes);
        let masked_to = spans.last().map_or(0, |(range, _)| range.end);
        let cut = self
            .forms
            .iter()
            .filter_map(|form| {
                let longest = (MIN_CUT_PREFIX..form.bytes.len()).rev().find(|&k| bytes.ends_with(&form.bytes[..k]))?;
                Some((bytes.len() - longest, form.name.as_str()))
            })
            .filter(|(start, _)| *start >= masked_to)
            .min_by_key(|(start, _)| *start);
        if let Some((start, name)) = cut {
            spans.push((start..bytes.len(), name));
        }
        replace(bytes, spans)
    }

    /// [`KnownSecrets::mask`] of text.
    pub fn mask_text(&self, text: &str) -> String {
        if self.is_empty() {
            return text.to_owned();
        }
        // Values are UTF-8, so each match starts and ends on a character boundary of `text`.
        String::from_utf8(self.mask(text.as_bytes()))
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
    }

    /// The names whose value appears more often in `after` than in `before`: what a change adds.
    pub fn added(&self, before: &[u8], after: &[u8]) -> BTreeSet<&str> {
        // One scan per side (a changed file may be large), then counts by name.
        let counts = |bytes: &[u8]| {
            let mut counts = std::collections::BTreeMap::<&str, usize>::new();
            for (_, name) in self.spans(bytes) {
                *counts.entry(name).or_default() += 1;
            }
            counts
        };
        let (before, after) = (counts(before), counts(after));
        after
            .into_iter()
            .filter(|(name, n)| *n > before.get(name).copied().unwrap_or(0))
            .map(|(name, _)| name)
            .collect()
    }
}

/// The non-overlapping places `form` stands in `bytes`, left to right.
fn occurrences<'a>(bytes: &'a [u8], form: &'a Form) -> impl Iterator<Item = Range<usize>> + 'a {
    let needle = form.bytes.as_slice();
    let first = needle.first().copied();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at + needle.len() <= bytes.len() {
            // Skip to the next byte that can start the value: most of the output is not it.
            let Some(skip) = bytes[at..].iter().position(|&b| Some(b) == first) else { break };
            at += skip;
            let start = at;
            if bytes[start..].starts_with(needle) {
                let end = start + needle.len();
                if !form.whole_word
                    || (!word_byte(start.checked_sub(1).map(|i| bytes[i])) && !word_byte(bytes.get(end).copied()))
                {
                    at = end;
                    return Some(start..end);
                }
            }
            at += 1;
        }
        None
    })
}

fn word_byte(byte: Option<u8>) -> bool {
    byte.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn replace(bytes: &[u8], spans: Vec<(Range<usize>, &str)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut kept = 0;
    for (range, name) in spans {
        out.extend_from_slice(&bytes[kept..range.start]);
        out.extend_from_slice(marker(name).as_bytes());
        kept = range.end;
    }
    out.extend_from_slice(&bytes[kept..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "acme-live-0123456789abcdef";

    fn known() -> KnownSecrets {
        KnownSecrets::new([("ACME_API_KEY", KEY), ("SHORT", "abc1"), ("QUOTED", "pa\"ss\\word!"), ("EMPTY", "")])
    }

    fn masked(text: &str) -> String {
        String::from_utf8_lossy(&known().mask(text.as_bytes())).into_owned()
    }

    /// What is printed, and what is kept of it.
    #[test]
    fn each_value_is_masked_wherever_it_stands() {
        let cases: &[(&str, &str)] = &[
            ("acme-live-0123456789abcdef\n", "[redacted:ACME_API_KEY]\n"),
            ("key=acme-live-0123456789abcdef;", "key=[redacted:ACME_API_KEY];"),
            ("xxacme-live-0123456789abcdefyy", "xx[redacted:ACME_API_KEY]yy"),
            ("acme-live-0123456789abcdefacme-live-0123456789abcdef", "[redacted:ACME_API_KEY][redacted:ACME_API_KEY]"),
            (r#"{"k":"pa\"ss\\word!"}"#, r#"{"k":"[redacted:QUOTED]"}"#),
            ("raw pa\"ss\\word! too", "raw [redacted:QUOTED] too"),
            ("abc1", "[redacted:SHORT]"),
            ("id abc1.", "id [redacted:SHORT]."),
            // Short values inside other words are left: masking them would garble the output.
            ("xabc1 abc12 abc1_", "xabc1 abc12 abc1_"),
            ("nothing here", "nothing here"),
            ("", ""),
        ];
        for (printed, kept) in cases {
            assert_eq!(masked(printed), *kept, "{printed:?}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_as_they_are() {
        let printed = [b"\xff\xfe ".as_slice(), KEY.as_bytes(), b" \xc3"].concat();
        assert_eq!(known().mask(&printed), b"\xff\xfe [redacted:ACME_API_KEY] \xc3");
    }

    #[test]
    fn a_value_cut_by_the_output_limit_is_masked_from_its_start() {
        let known = known();
        for cut in [MIN_CUT_PREFIX, 10, KEY.len() - 1] {
            let kept = format!("out: {}", &KEY[..cut]);
            assert_eq!(known.mask_cut(kept.as_bytes()), b"out: [redacted:ACME_API_KEY]", "cut after {cut} bytes");
        }
        // Fewer bytes than that say nothing, and a whole value is masked as usual.
        assert_eq!(known.mask_cut(b"out: acm"), b"out: acm");
        let whole = format!("{KEY} then {}", &KEY[..12]);
        assert_eq!(known.mask_cut(whole.as_bytes()), b"[redacted:ACME_API_KEY] then [redacted:ACME_API_KEY]");
    }

    #[test]
    fn what_a_change_adds_is_reported_by_name() {
        let known = known();
        let before = b"# Project\n";
        let after = format!("# Project\nkey={KEY}\n");
        assert_eq!(known.added(before, after.as_bytes()), BTreeSet::from(["ACME_API_KEY"]));
        // A value already there is not added by moving it; a second copy is.
        let moved = format!("key={KEY}\n# Project\n");
        assert!(known.added(after.as_bytes(), moved.as_bytes()).is_empty());
        let twice = format!("{after}{KEY}\n");
        assert_eq!(known.added(after.as_bytes(), twice.as_bytes()), BTreeSet::from(["ACME_API_KEY"]));
        assert!(known.added(after.as_bytes(), before).is_empty(), "a removal adds nothing");
    }

    /// Adversarial inputs: self-overlapping values, values inside values, every cut point of a
    /// stream. Whatever is kept never holds a value.
    #[test]
    fn no_masked_output_holds_a_value() {
        let known = KnownSecrets::new([("A", "aaaaaaaa"), ("B", "xaaaaaaaay"), ("K", KEY)]);
        let values = ["aaaaaaaa", "xaaaaaaaay", KEY];
        let printed = format!("aaaaaaaaaaaaaaaaaaa xaaaaaaaay {KEY}{KEY} a{KEY}a xaaaaaaaaaaaaaaay");
        let kept = known.mask(printed.as_bytes());
        for value in values {
            assert!(!kept.windows(value.len()).any(|w| w == value.as_bytes()), "{value} in {kept:?}");
        }
        for cut in 0..=printed.len() {
            let kept = known.mask_cut(&printed.as_bytes()[..cut]);
            for value in values {
                assert!(!kept.windows(value.len()).any(|w| w == value.as_bytes()), "cut {cut}: {value}");
            }
            let tail = &kept[kept.len().saturating_sub(MIN_CUT_PREFIX)..];
            assert!(!KEY.as_bytes().starts_with(tail) || tail.len() < MIN_CUT_PREFIX, "cut {cut}: {tail:?}");
        }
    }

    #[test]
    fn the_values_never_show_in_debug_output() {
        let shown = format!("{:?}", known());
        assert!(!shown.contains(KEY) && shown.contains("ACME_API_KEY"), "{shown}");
        assert_eq!(known().short_names().collect::<Vec<_>>(), ["SHORT"]);
        assert!(KnownSecrets::new([("EMPTY", "")]).is_empty());
    }
}
