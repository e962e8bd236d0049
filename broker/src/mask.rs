//! The one matcher of a secret's echoes, used for whole error bodies, streamed bodies and
//! response headers alike. It decodes while it scans: at each position, each byte of the value
//! may be written as itself, percent-encoded once or again up to [`PERCENT_DEPTH`] times (`%2F`,
//! `%2f`, `%252F`, `%25252f`), as a JSON `\uXXXX` escape (either case of hex) or a JSON short
//! escape (`\/`, `\"`, `\\`, …), byte by byte, mixed freely within one echo; so no list of forms
//! can miss a mix. A shortened form (a value's first 3 to 8 bytes, a run of `*`, `.` or `…`,
//! its last 4) is one more pattern of the same kind. Every position is tried as a start and the
//! union of what matched is masked, so overlapping echoes leave no piece behind; a stream holds
//! back only a tail that may still become an echo, and its end runs the same matcher over that
//! tail.

use bytes::Bytes;

/// What every echo is replaced with.
pub(crate) const MASK: &[u8] = b"[redacted]";

/// The most units of `*`, `.` or `…` a shortened form's run is matched over: it bounds how
/// long a stream can be held back on one undecided run.
const MAX_RUN: usize = 64;

/// One byte of text as a template sees it.
#[derive(Debug, Clone, Copy)]
enum Unit {
    Exact(u8),
    /// A hex digit of this value, in either case.
    Hex(u8),
}

impl Unit {
    fn matches(self, byte: u8) -> bool {
        match self {
            Unit::Exact(expected) => byte == expected,
            Unit::Hex(value) => char::from(byte).to_digit(16) == Some(u32::from(value)),
        }
    }
}

/// One way one value byte (or one unit of a run) is written.
type Template = Vec<Unit>;

/// The most times a byte is matched percent-encoded over and over: a URL that carries the key
/// encoded is itself encoded when a redirect puts it in a parameter (`rd=`, `next=`), so `%2B`
/// reaches the agent as `%252B`, and a second hop as `%25252B`.
const PERCENT_DEPTH: usize = 3;

/// `byte` percent-encoded once to [`PERCENT_DEPTH`] times: `%`, then `25` once per encoding
/// past the first (the `%` itself encoded), then its two hex digits in either case.
fn percent_encodings(byte: u8) -> impl Iterator<Item = Template> {
    (0..PERCENT_DEPTH).map(move |again| {
        let mut template = vec![Unit::Exact(b'%')];
        template.extend((0..again).flat_map(|_| [Unit::Hex(2), Unit::Hex(5)]));
        template.extend([Unit::Hex(byte >> 4), Unit::Hex(byte & 0x0f)]);
        template
    })
}

/// The JSON short escape of a byte, where JSON has one.
fn json_short_escape(byte: u8) -> Option<u8> {
    match byte {
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        b'/' => Some(b'/'),
        0x08 => Some(b'b'),
        0x0c => Some(b'f'),
        b'\n' => Some(b'n'),
        b'\r' => Some(b'r'),
        b'\t' => Some(b't'),
        _ => None,
    }
}

/// Every way `byte` can be written in a body or header: itself, `%XX` (also encoded again:
/// `%25XX`, …), `\u00XX` (ASCII only: a JSON escape names a character, not a byte) and its JSON
/// short escape.
fn encodings(byte: u8) -> Vec<Template> {
    let (high, low) = (byte >> 4, byte & 0x0f);
    let mut out = vec![vec![Unit::Exact(byte)]];
    out.extend(percent_encodings(byte));
    if byte.is_ascii() {
        out.push(vec![
            Unit::Exact(b'\\'),
            Unit::Exact(b'u'),
            Unit::Hex(0),
            Unit::Hex(0),
            Unit::Hex(high),
            Unit::Hex(low),
        ]);
    }
    if let Some(escape) = json_short_escape(byte) {
        out.push(vec![Unit::Exact(b'\\'), Unit::Exact(escape)]);
    }
    out
}

/// The units of a shortened form's run: `*` or `.` in any of their encodings, and `…` as UTF-8,
/// percent-encoded (as often as a byte is, all three bytes alike, as an encoder writes them) or
/// `\u2026`.
fn run_units() -> Vec<Template> {
    let mut out = encodings(b'*');
    out.extend(encodings(b'.'));
    let ellipsis = "\u{2026}".as_bytes();
    out.push(ellipsis.iter().map(|&byte| Unit::Exact(byte)).collect());
    for again in 0..PERCENT_DEPTH {
        out.push(ellipsis.iter().filter_map(|&byte| percent_encodings(byte).nth(again)).flatten().collect());
    }
    out.push(vec![Unit::Exact(b'\\'), Unit::Exact(b'u'), Unit::Hex(2), Unit::Hex(0), Unit::Hex(2), Unit::Hex(6)]);
    out
}

enum Piece {
    /// One byte of the value, in any of its encodings.
    Byte(Vec<Template>),
    /// One to [`MAX_RUN`] units of a shortened form's run.
    Run(Vec<Template>),
}

impl Piece {
    fn templates(&self) -> &[Template] {
        match self {
            Piece::Byte(templates) | Piece::Run(templates) => templates,
        }
    }

    fn longest(&self) -> usize {
        let unit = self.templates().iter().map(Vec::len).max().unwrap_or(0);
        match self {
            Piece::Byte(_) => unit,
            Piece::Run(_) => unit * MAX_RUN,
        }
    }
}

/// What is known of an echo starting at one position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// An echo ends here (the furthest end, when several encodings match).
    Ends(usize),
    Nothing,
    /// The text ended inside what may still become an echo.
    Undecided,
}

/// How one template fares at one position.
enum Step {
    Ends(usize),
    Cut,
    Fails,
}

fn step(template: &[Unit], text: &[u8], at: usize) -> Step {
    for (offset, unit) in template.iter().enumerate() {
        let Some(&byte) = text.get(at + offset) else { return Step::Cut };
        if !unit.matches(byte) {
            return Step::Fails;
        }
    }
    Step::Ends(at + template.len())
}

/// One shape of echo: the whole value, or one shortened form of it.
struct Pattern {
    pieces: Vec<Piece>,
}

impl Pattern {
    fn bytes(value: &[u8]) -> impl Iterator<Item = Piece> + '_ {
        value.iter().map(|&byte| Piece::Byte(encodings(byte)))
    }

    fn whole(value: &[u8]) -> Self {
        Self { pieces: Self::bytes(value).collect() }
    }

    fn shortened(value: &[u8], prefix: usize) -> Self {
        let suffix = &value[value.len() - 4..];
        let pieces =
            Self::bytes(&value[..prefix]).chain([Piece::Run(run_units())]).chain(Self::bytes(suffix)).collect();
        Self { pieces }
    }

    fn longest(&self) -> usize {
        self.pieces.iter().map(Piece::longest).sum()
    }

    /// Whether an echo of this shape starts at `start`: every position it can have reached after
    /// each piece is kept, so an ambiguous byte (`%` itself, `\` itself) costs a few positions
    /// more, never a search over forms.
    fn find(&self, text: &[u8], start: usize, ended: bool) -> Found {
        let mut reached = vec![start];
        let mut cut = false;
        for piece in &self.pieces {
            let mut next = Vec::new();
            match piece {
                Piece::Byte(templates) => {
                    for &at in &reached {
                        for template in templates {
                            match step(template, text, at) {
                                Step::Ends(end) => next.push(end),
                                Step::Cut => cut = true,
                                Step::Fails => {}
                            }
                        }
                    }
                }
                Piece::Run(templates) => {
                    for &at in &reached {
                        let mut frontier = vec![at];
                        for _ in 0..MAX_RUN {
                            let mut further = Vec::new();
                            for &from in &frontier {
                                for template in templates {
                                    match step(template, text, from) {
                                        Step::Ends(end) => further.push(end),
                                        Step::Cut => cut = true,
                                        Step::Fails => {}
                                    }
                                }
                            }
                            if further.is_empty() {
                                break;
                            }
                            next.extend_from_slice(&further);
                            frontier = further;
                        }
                    }
                }
            }
            next.sort_unstable();
            next.dedup();
            if next.is_empty() {
                return if cut && !ended { Found::Undecided } else { Found::Nothing };
            }
            reached = next;
        }
        // A branch the text cut short may still end further: wait for it before deciding.
        if cut && !ended {
            return Found::Undecided;
        }
        reached.last().map_or(Found::Nothing, |&end| Found::Ends(end))
    }

    fn may_start_with(&self, byte: u8) -> bool {
        self.pieces.first().is_some_and(|piece| {
            piece.templates().iter().any(|template| template.first().is_some_and(|unit| unit.matches(byte)))
        })
    }
}

/// Every shape of echo of a set of values (the key, the placeholder) that is masked.
pub(crate) struct Echoes {
    patterns: Vec<Pattern>,
    /// The bytes any echo can start with, so most positions are passed over at one look.
    starts: [u64; 4],
}

impl Echoes {
    /// Each value whole and, when it has at least 8 bytes, its shortened forms. Empty values
    /// are skipped: they echo nothing.
    pub(crate) fn of(values: &[&[u8]]) -> Self {
        let mut patterns = Vec::new();
        for value in values.iter().filter(|value| !value.is_empty()) {
            patterns.push(Pattern::whole(value));
            if value.len() >= 8 {
                patterns.extend((3..=8.min(value.len() - 4)).map(|prefix| Pattern::shortened(value, prefix)));
            }
        }
        let mut starts = [0u64; 4];
        for byte in (0..=u8::MAX).filter(|&byte| patterns.iter().any(|pattern| pattern.may_start_with(byte))) {
            starts[usize::from(byte >> 6)] |= 1 << (byte & 63);
        }
        Self { patterns, starts }
    }

    /// The most bytes one echo can span.
    pub(crate) fn longest(&self) -> usize {
        self.patterns.iter().map(Pattern::longest).max().unwrap_or(0)
    }

    fn find(&self, text: &[u8], start: usize, ended: bool) -> Found {
        let Some(&first) = text.get(start) else { return Found::Nothing };
        if self.starts[usize::from(first >> 6)] & (1 << (first & 63)) == 0 {
            return Found::Nothing;
        }
        let mut found = Found::Nothing;
        for pattern in self.patterns.iter().filter(|pattern| pattern.may_start_with(first)) {
            match (pattern.find(text, start, ended), found) {
                (Found::Undecided, _) => return Found::Undecided,
                (Found::Ends(end), Found::Ends(other)) => found = Found::Ends(end.max(other)),
                (Found::Ends(end), _) => found = Found::Ends(end),
                (Found::Nothing, _) => {}
            }
        }
        found
    }

    /// Whether `text` holds an echo anywhere.
    pub(crate) fn found_in(&self, text: &[u8]) -> bool {
        (0..text.len()).any(|start| matches!(self.find(text, start, true), Found::Ends(_)))
    }

    /// `text` with every echo masked.
    #[cfg(test)]
    pub(crate) fn mask(self, text: &[u8]) -> Vec<u8> {
        let mut mask = StreamMask::new(self);
        let mut out = mask.push(text).to_vec();
        out.extend_from_slice(&mask.flush().unwrap_or_default());
        out
    }
}

/// Masks echoes in a body that arrives in frames. What is decided goes out at once; a tail
/// that may be the start of an echo is held until the next frame decides it, or the body's
/// end, when the same matcher runs over it as over everything before.
pub(crate) struct StreamMask {
    echoes: Echoes,
    held: Vec<u8>,
    /// The first bytes of `held` that lie inside a mask already sent.
    covered: usize,
    ended: bool,
}

impl StreamMask {
    pub(crate) fn new(echoes: Echoes) -> Self {
        Self { echoes, held: Vec::new(), covered: 0, ended: false }
    }

    /// What of `data` (after what was held) can go out now, every echo in it masked.
    pub(crate) fn push(&mut self, data: &[u8]) -> Bytes {
        self.held.extend_from_slice(data);
        self.scan(false)
    }

    /// The held tail, masked, once the body ended.
    pub(crate) fn flush(&mut self) -> Option<Bytes> {
        if self.ended {
            return None;
        }
        self.ended = true;
        let tail = self.scan(true);
        (!tail.is_empty()).then_some(tail)
    }

    /// Nothing is held back any more.
    pub(crate) fn drained(&self) -> bool {
        self.ended || self.held.is_empty()
    }

    fn scan(&mut self, ended: bool) -> Bytes {
        let mut out = Vec::with_capacity(self.held.len());
        let mut covered = self.covered;
        let mut start = 0;
        while start < self.held.len() {
            match self.echoes.find(&self.held, start, ended) {
                Found::Undecided => break,
                Found::Ends(end) => {
                    if start >= covered {
                        out.extend_from_slice(MASK);
                    }
                    covered = covered.max(end);
                }
                Found::Nothing if start >= covered => out.push(self.held[start]),
                Found::Nothing => {}
            }
            start += 1;
        }
        self.held.drain(..start);
        self.covered = covered.saturating_sub(start);
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(text: &str, key: &str) -> String {
        String::from_utf8(Echoes::of(&[key.as_bytes()]).mask(text.as_bytes())).expect("utf-8")
    }

    #[test]
    fn each_encoding_of_a_key_and_their_mix_is_masked() {
        let key = "ab+c/d=e";
        for echo in [
            "ab+c/d=e",
            "ab%2Bc%2Fd%3De",
            "ab%2bc%2fd%3de",
            "ab+c\\/d=e",
            "ab\\u002bc\\u002fd\\u003de",
            "ab\\u002Bc\\u002Fd\\u003De",
            "ab%2bc\\/d\\u003De",
            "\\u0061b+c/d=e",
            // A URL holding the encoded key, encoded again by a redirect: `%2B` as `%252B`.
            "ab%252Bc%252Fd%253De",
            "ab%252bc%25252Fd%3De",
            "ab%25252bc\\/d%253de",
        ] {
            assert_eq!(masked(&format!("<{echo}>"), key), "<[redacted]>", "{echo}");
        }
    }

    #[test]
    fn a_near_miss_is_left_alone() {
        let key = "ab+c/d=e";
        for text in [
            "ab+c/d=f",
            "ab c/d=e",
            "ab%2Cc/d=e",
            "ab\\u002cc/d=e",
            "ab\\+c/d=e",
            "ab+c\\\\/d=e",
            // `%25` not followed by the byte's digits is a `%` and no more.
            "ab%25%2Bc/d=e",
            "ab%252Cc/d=e",
        ] {
            assert_eq!(masked(text, key), text);
        }
    }

    #[test]
    fn overlapping_echoes_are_masked_as_one() {
        let key = "ABCDEFGHABCDEFGH";
        assert_eq!(masked("xABCDEFGHABCDEFGHABCDEFGHy", key), "x[redacted]y");
    }

    #[test]
    fn a_key_in_the_last_bytes_of_a_stream_is_masked_at_its_end() {
        let key = "q/W+e=rTy";
        let mut mask = StreamMask::new(Echoes::of(&[key.as_bytes()]));
        let mut out = mask.push(b"{\"auth\":\"Bearer ").to_vec();
        out.extend_from_slice(&mask.push(b"q/W+e=r"));
        out.extend_from_slice(&mask.push(b"Ty"));
        out.extend_from_slice(&mask.flush().unwrap_or_default());
        assert_eq!(String::from_utf8(out).expect("utf-8"), "{\"auth\":\"Bearer [redacted]");
    }

    #[test]
    fn only_a_tail_that_may_start_an_echo_is_held() {
        let mut mask = StreamMask::new(Echoes::of(&[b"secret-value"]));
        assert_eq!(&mask.push(b"data: {}\n\n")[..], b"data: {}\n\n");
        assert_eq!(&mask.push(b"data: sec")[..], b"data: ");
        assert_eq!(&mask.push(b"tion\n")[..], b"section\n");
        assert!(mask.drained());
    }

    #[test]
    fn shortened_forms_are_masked_in_any_encoding_of_their_run() {
        let key = "sk-proj-abcdefghMxYA";
        for text in [
            "sk-proj-****MxYA",
            "sk-****\u{2026}MxYA",
            "sk-pr\\u2026MxYA",
            "sk-%2A%2AMxYA",
            "sk-%252A%252aMxYA",
            "sk-pro%25E2%2580%25A6MxYA",
        ] {
            assert_eq!(masked(text, key), "[redacted]", "{text}");
        }
        assert_eq!(masked("xx****MxYA", key), "xx****MxYA");
    }

    #[test]
    fn a_key_made_of_escape_bytes_is_found_without_a_blowup() {
        let key = "%%%%%%%%%%%%%%%%%%%%\\\\\\\\\\\\\\\\";
        let echo = "%25".repeat(20) + &"\\u005c".repeat(8);
        assert_eq!(masked(&echo, key), "[redacted]");
        let text = "%25".repeat(200);
        assert_eq!(masked(&text, key), text);
    }
}

#[cfg(test)]
mod properties {
    //! Properties of the matcher over random keys, encodings, surroundings and chunkings, judged
    //! by an oracle written apart from it: plain recursion over the encodings docs/broker.md
    //! lists.

    use proptest::prelude::*;

    use super::*;

    const KEY_BYTES: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+=_-";
    /// Text around an echo: JSON punctuation, escapes' and percent-encodings' own bytes, a few
    /// letters, and the runs of shortened forms.
    const FILLER: &[u8] = b" {}[]\":,\\%u0123456789abcdefABCDEFxyz.*\n";
    /// The same without anything a shortened form's run is made of.
    const PLAIN_FILLER: &[u8] = b" {}[]\":,\\%u0123456789bcdfBCDFxyz\n";

    fn hex_value(digits: &[u8]) -> Option<u32> {
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    }

    /// Whether `text` starts with `value`, each byte in any encoding the docs list.
    fn decodes_at(text: &[u8], value: &[u8]) -> bool {
        let Some((&byte, rest)) = value.split_first() else { return true };
        let wanted = Some(u32::from(byte));
        (text.first() == Some(&byte) && decodes_at(&text[1..], rest))
            || percent_decodes_at(text, byte).into_iter().any(|after| decodes_at(&text[after..], rest))
            || (text.len() >= 6
                && text.starts_with(b"\\u")
                && hex_value(&text[2..6]) == wanted
                && decodes_at(&text[6..], rest))
            || (text.len() >= 2
                && text[0] == b'\\'
                && [(b'/', b'/'), (b'"', b'"'), (b'\\', b'\\')].contains(&(byte, text[1]))
                && decodes_at(&text[2..], rest))
    }

    /// Where `byte` percent-encoded one to three times (`%2B`, `%252B`, `%25252B`) can end, when
    /// `text` starts with it: each `25` after the `%` is the `%` of one more encoding.
    fn percent_decodes_at(text: &[u8], byte: u8) -> Vec<usize> {
        let mut ends = Vec::new();
        if text.first() != Some(&b'%') {
            return ends;
        }
        let mut at = 1;
        for _ in 0..3 {
            let Some(digits) = text.get(at..at + 2) else { break };
            if hex_value(digits) == Some(u32::from(byte)) {
                ends.push(at + 2);
            }
            if digits != b"25" {
                break;
            }
            at += 2;
        }
        ends
    }

    fn oracle_holds(text: &[u8], value: &[u8]) -> bool {
        (0..=text.len()).any(|start| decodes_at(&text[start..], value))
    }

    /// `value` written byte by byte in the encodings `choices` pick.
    fn encode(value: &[u8], choices: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (&byte, &choice) in value.iter().zip(choices.iter().cycle()) {
            let written = match choice % 10 {
                0 => vec![byte],
                1 => format!("%{byte:02X}").into_bytes(),
                2 => format!("%{byte:02x}").into_bytes(),
                3 => format!("\\u{:04x}", byte).into_bytes(),
                4 => format!("\\u{:04X}", byte).into_bytes(),
                5 if byte == b'/' => b"\\/".to_vec(),
                5 => vec![byte],
                6 => format!("%{:X}{:x}", byte >> 4, byte & 0x0f).into_bytes(),
                // Percent-encoded, then encoded again once or twice (a redirect's parameter).
                7 => format!("%25{byte:02X}").into_bytes(),
                8 => format!("%25{byte:02x}").into_bytes(),
                _ => format!("%2525{:x}{:X}", byte >> 4, byte & 0x0f).into_bytes(),
            };
            out.extend_from_slice(&written);
        }
        out
    }

    /// `text` with each `%25` read as `%`: one level of repeated percent-encoding undone.
    fn percent_once_less(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut at = 0;
        while at < text.len() {
            out.push(text[at]);
            at += if text[at..].starts_with(b"%25") { 3 } else { 1 };
        }
        out
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(KEY_BYTES), 8..=64)
    }

    fn text_of(alphabet: &'static [u8], most: usize) -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(alphabet), 0..=most)
    }

    fn encoding_choices() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 1..=64)
    }

    /// Feeds `text` to a stream mask cut at `cuts`, as frames would bring it.
    fn streamed(key: &[u8], text: &[u8], cuts: &[prop::sample::Index]) -> Vec<u8> {
        let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(text.len() + 1)).collect();
        points.sort_unstable();
        let mut mask = StreamMask::new(Echoes::of(&[key]));
        let mut out = Vec::new();
        let mut from = 0;
        for point in points.into_iter().chain([text.len()]) {
            out.extend_from_slice(&mask.push(&text[from..point]));
            from = point;
        }
        out.extend_from_slice(&mask.flush().unwrap_or_default());
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn no_eight_byte_window_of_the_key_reaches_the_agent_in_any_form(
            key in key(),
            echoes in prop::collection::vec((text_of(FILLER, 24), encoding_choices()), 1..=3),
            tail in prop_oneof![Just(Vec::new()), text_of(FILLER, 24)],
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut text = Vec::new();
            for (before, choices) in &echoes {
                text.extend_from_slice(before);
                text.extend_from_slice(&encode(&key, choices));
            }
            text.extend_from_slice(&tail);
            let whole = Echoes::of(&[&key]).mask(&text);
            let streamed = streamed(&key, &text, &cuts);
            prop_assert_eq!(&streamed, &whole, "a chunking changed what was masked");
            for window in key.windows(8) {
                prop_assert!(
                    !oracle_holds(&streamed, window),
                    "{:?} of the key passed in {:?}",
                    String::from_utf8_lossy(window),
                    String::from_utf8_lossy(&streamed)
                );
            }
        }

        #[test]
        fn text_without_the_key_passes_unchanged(
            key in key(),
            pieces in prop::collection::vec(
                (0u8..3, text_of(PLAIN_FILLER, 16), encoding_choices(), any::<prop::sample::Index>(), any::<prop::sample::Index>()),
                1..=4,
            ),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let mut text = Vec::new();
            for (kind, filler, choices, at, replacement) in &pieces {
                let near_miss = match kind {
                    // The key with one byte changed.
                    0 => {
                        let mut changed = key.clone();
                        let at = at.index(changed.len());
                        let others: Vec<u8> = KEY_BYTES.iter().copied().filter(|&b| b != changed[at]).collect();
                        changed[at] = others[replacement.index(others.len())];
                        encode(&changed, choices)
                    }
                    // The key cut short.
                    1 => encode(&key[..at.index(key.len())], choices),
                    _ => Vec::new(),
                };
                text.extend_from_slice(filler);
                text.extend_from_slice(&near_miss);
            }
            let lower = text.to_ascii_lowercase();
            // `%25` decoded away first: a run's unit may be percent-encoded more than once.
            let lower = percent_once_less(&percent_once_less(&lower));
            let holds_run = [&b"*"[..], b".", b"%2a", b"%2e", b"\\u002a", b"\\u002e", b"\\u2026", b"%e2"]
                .iter()
                .any(|unit| lower.windows(unit.len()).any(|window| window == *unit));
            prop_assume!(!holds_run && !oracle_holds(&text, &key));
            prop_assert_eq!(&Echoes::of(&[&key]).mask(&text), &text);
            prop_assert_eq!(&streamed(&key, &text, &cuts), &text);
        }
    }
}
