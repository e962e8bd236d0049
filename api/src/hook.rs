//! The git webhook's authentication: the shared secret (`start --webhook-secret-file`), the
//! check of a call's signature over its exact body bytes, the delivery ids already acted on, and
//! how often refusals and signed calls are recorded.
//!
//! GitHub, Gitea and Forgejo send `X-Hub-Signature-256: sha256=<hex>`, the HMAC-SHA256 of the
//! body under the secret; GitLab sends the secret itself as `X-Gitlab-Token` (it binds nothing
//! of the body, which the webhook does not use: a call only asks for a fetch). Both are compared
//! in constant time. A call with neither is refused.
//!
//! A captured signed call verifies again when replayed. The forge names each delivery
//! (`X-GitHub-Delivery`, GitLab's `X-Gitlab-Event-UUID`): a delivery id seen within
//! [`DELIVERY_WINDOW`] is a duplicate, answered and not acted on. The signature does not cover
//! that header, so a replay under a made-up id is acted on, which can do no more than one early
//! fetch; what bounds the replays is that signed calls, like refusals, reach the audit chain at
//! most once a second, each entry counting the calls in between.

use std::collections::{HashSet, VecDeque};
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use hmac::{Hmac, Mac as _};
use roundtable_specs::audit::HookRefusal;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// The header GitHub, Gitea and Forgejo sign with.
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// The header GitLab sends the secret in.
pub const GITLAB_TOKEN_HEADER: &str = "x-gitlab-token";
/// The headers a forge names each delivery in, the first present deciding: GitHub's (Gitea and
/// Forgejo send it too), then GitLab's.
pub const DELIVERY_HEADERS: [&str; 2] = ["x-github-delivery", "x-gitlab-event-uuid"];
/// How long a delivery id is remembered: a forge's redelivery of an old call, or a replay of
/// one, within a day is answered as a duplicate.
pub const DELIVERY_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// How many delivery ids are remembered at most; beyond it the oldest is forgotten early. Far
/// more pushes than a day brings to one daemon.
pub const DELIVERY_CAPACITY: usize = 10_000;
/// The longest delivery id kept (forges send a 36-character UUID).
const MAX_DELIVERY_ID: usize = 128;
const SIGNATURE_PREFIX: &str = "sha256=";
/// Longer than any secret a forge lets one type, far shorter than a mistaken file.
const MAX_SECRET: u64 = 4096;

/// Why a webhook secret file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read the webhook secret {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the webhook secret {path} has mode {mode:o}; it must be 0600 or stricter (`chmod 600 {path}`)")]
    Exposed { path: PathBuf, mode: u32 },
    #[error("the webhook secret {path} is owned by uid {owner}, not by this user (uid {user})")]
    NotOwned { path: PathBuf, owner: u32, user: u32 },
    #[error("the webhook secret {path} is empty")]
    Empty { path: PathBuf },
    #[error("the webhook secret {path} is longer than {MAX_SECRET} bytes")]
    TooLong { path: PathBuf },
}

/// The shared secret. Never printed.
#[derive(Clone)]
pub struct HookSecret {
    secret: Vec<u8>,
}

impl std::fmt::Debug for HookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookSecret(..)")
    }
}

impl HookSecret {
    /// Reads `path`: a file of this user's, mode 0600 or stricter, holding the secret (a
    /// trailing newline is not part of it). The mode and owner are those of the file opened.
    pub fn read(path: &Path) -> Result<Self, SecretError> {
        let io = |source| SecretError::Io { path: path.to_owned(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        let metadata = file.metadata().map_err(io)?;
        let mode = metadata.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(SecretError::Exposed { path: path.to_owned(), mode });
        }
        let user = rustix::process::geteuid().as_raw();
        if metadata.uid() != user {
            return Err(SecretError::NotOwned { path: path.to_owned(), owner: metadata.uid(), user });
        }
        let mut secret = Vec::new();
        file.take(MAX_SECRET + 1).read_to_end(&mut secret).map_err(io)?;
        if secret.len() as u64 > MAX_SECRET {
            return Err(SecretError::TooLong { path: path.to_owned() });
        }
        while secret.last().is_some_and(|b| matches!(b, b'\n' | b'\r')) {
            secret.pop();
        }
        if secret.is_empty() {
            return Err(SecretError::Empty { path: path.to_owned() });
        }
        Ok(Self { secret })
    }

    /// A secret given directly (tests).
    pub fn from_bytes(secret: &[u8]) -> Self {
        Self { secret: secret.to_vec() }
    }

    /// The MAC keyed with the secret; HMAC takes keys of any length, so `None` does not happen
    /// (and would refuse every call rather than accept one).
    fn mac(&self) -> Option<Hmac<Sha256>> {
        <Hmac<Sha256> as hmac::Mac>::new_from_slice(&self.secret).ok()
    }

    /// The `X-Hub-Signature-256` value a forge sends for `body`.
    pub fn signature(&self, body: &[u8]) -> String {
        let Some(mut mac) = self.mac() else { return String::new() };
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        format!("{SIGNATURE_PREFIX}{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    /// Whether the call's headers authenticate `body`: the signature header when present, else
    /// GitLab's token.
    pub fn verify(&self, headers: &HeaderMap, body: &[u8]) -> Result<(), HookRefusal> {
        if let Some(signature) = headers.get(SIGNATURE_HEADER) {
            let expected = signature
                .to_str()
                .ok()
                .and_then(|value| value.trim().strip_prefix(SIGNATURE_PREFIX))
                .and_then(decode_hex_32)
                .ok_or(HookRefusal::MalformedSignature)?;
            let mut mac = self.mac().ok_or(HookRefusal::BadSignature)?;
            mac.update(body);
            return mac.verify_slice(&expected).map_err(|_| HookRefusal::BadSignature);
        }
        if let Some(token) = headers.get(GITLAB_TOKEN_HEADER) {
            // By digest, so the comparison's time says nothing of the lengths either.
            let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            let secret: [u8; 32] = Sha256::digest(&self.secret).into();
            return if bool::from(presented.ct_eq(&secret)) { Ok(()) } else { Err(HookRefusal::BadSignature) };
        }
        Err(HookRefusal::MissingSignature)
    }
}

/// 64 hex digits as 32 bytes.
fn decode_hex_32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (byte, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(text, 16).ok()?;
    }
    Some(bytes)
}

/// The delivery id a call names (`DELIVERY_HEADERS`), when it is one: 1 to 128 visible ASCII
/// characters. Anything else counts as no id.
pub fn delivery_id(headers: &HeaderMap) -> Option<&str> {
    let value = DELIVERY_HEADERS.iter().find_map(|name| headers.get(*name))?;
    let id = value.to_str().ok()?.trim();
    let fits = !id.is_empty() && id.len() <= MAX_DELIVERY_ID && id.bytes().all(|b| b.is_ascii_graphic());
    fits.then_some(id)
}

/// The delivery ids seen within a window, in memory: bounded in time and in number, so a caller
/// sending fresh ids costs a fixed amount. A restart forgets them: a replay after it is acted on
/// once more (one early fetch).
#[derive(Debug)]
pub struct DeliveryLog {
    window: Duration,
    capacity: usize,
    seen: Mutex<SeenDeliveries>,
}

#[derive(Debug, Default)]
struct SeenDeliveries {
    ids: HashSet<String>,
    /// Oldest first, for expiry and eviction.
    order: VecDeque<(Instant, String)>,
}

impl Default for DeliveryLog {
    fn default() -> Self {
        Self::new(DELIVERY_WINDOW, DELIVERY_CAPACITY)
    }
}

impl DeliveryLog {
    pub fn new(window: Duration, capacity: usize) -> Self {
        Self { window, capacity: capacity.max(1), seen: Mutex::new(SeenDeliveries::default()) }
    }

    /// Whether `id` is seen for the first time within the window (then it is remembered from
    /// `now`); false for a duplicate. Checked and remembered in one step, so concurrent replays
    /// cannot both be first.
    pub fn first_sight(&self, id: &str, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let SeenDeliveries { ids, order } = &mut *seen;
        while let Some((at, _)) = order.front()
            && now.saturating_duration_since(*at) >= self.window
        {
            if let Some((_, expired)) = order.pop_front() {
                ids.remove(&expired);
            }
        }
        if ids.contains(id) {
            return false;
        }
        while order.len() >= self.capacity {
            if let Some((_, evicted)) = order.pop_front() {
                ids.remove(&evicted);
            }
        }
        ids.insert(id.to_owned());
        order.push_back((now, id.to_owned()));
        true
    }
}

/// How often one kind of webhook entry (refusals, signed calls) is written to the audit chain:
/// at most once per `every`, the next entry counting those in between. Unauthenticated callers
/// can send refusals, and anyone holding one captured call can replay it, as fast as the API
/// answers; this keeps what they cost the store bounded.
#[derive(Debug)]
pub struct EntryRate {
    every: Duration,
    last: Mutex<Option<Instant>>,
    unrecorded: AtomicU64,
}

impl Default for EntryRate {
    fn default() -> Self {
        Self::every(Duration::from_secs(1))
    }
}

impl EntryRate {
    pub fn every(every: Duration) -> Self {
        Self { every, last: Mutex::new(None), unrecorded: AtomicU64::new(0) }
    }

    /// Notes one call; `Some(n)` when it is to be recorded now, `n` the calls left unrecorded
    /// since the previous entry.
    pub fn note(&self, now: Instant) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match *last {
            Some(at) if now.saturating_duration_since(at) < self.every => {
                self.unrecorded.fetch_add(1, Ordering::Relaxed);
                None
            }
            _ => {
                *last = Some(now);
                Some(self.unrecorded.swap(0, Ordering::Relaxed))
            }
        }
    }
}

/// What the API knows of its git webhook when `--webhook-secret-file` is given.
#[derive(Debug)]
pub struct GitHook {
    pub secret: HookSecret,
    pub refusals: EntryRate,
    pub accepted: EntryRate,
    pub deliveries: DeliveryLog,
}

impl GitHook {
    pub fn new(secret: HookSecret) -> Self {
        Self {
            secret,
            refusals: EntryRate::default(),
            accepted: EntryRate::default(),
            deliveries: DeliveryLog::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use axum::http::HeaderValue;

    use super::*;

    const BODY: &[u8] = br#"{"ref":"refs/heads/main","after":"0123"}"#;

    fn headers(name: &'static str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_str(value).expect("a header value"));
        headers
    }

    /// GitHub's documented example: secret "It's a Secret to Everybody", payload "Hello,
    /// World!".
    #[test]
    fn githubs_example_signature_verifies() {
        let secret = HookSecret::from_bytes(b"It's a Secret to Everybody");
        let signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(secret.signature(b"Hello, World!"), signature);
        assert_eq!(secret.verify(&headers(SIGNATURE_HEADER, signature), b"Hello, World!"), Ok(()));
    }

    #[test]
    fn a_good_signature_passes_and_every_other_is_refused() {
        let secret = HookSecret::from_bytes(b"s3cret");
        let good = secret.signature(BODY);
        assert_eq!(secret.verify(&headers(SIGNATURE_HEADER, &good), BODY), Ok(()));
        assert_eq!(
            secret.verify(&headers(SIGNATURE_HEADER, &good.to_uppercase().replace("SHA256=", "sha256=")), BODY),
            Ok(()),
            "hex digits in either case"
        );

        assert_eq!(secret.verify(&HeaderMap::new(), BODY), Err(HookRefusal::MissingSignature));
        let other_body = [BODY, b" "].concat();
        assert_eq!(secret.verify(&headers(SIGNATURE_HEADER, &good), &other_body), Err(HookRefusal::BadSignature));
        let other_secret = HookSecret::from_bytes(b"s3cret2").signature(BODY);
        assert_eq!(secret.verify(&headers(SIGNATURE_HEADER, &other_secret), BODY), Err(HookRefusal::BadSignature));
        let hex = good.trim_start_matches(SIGNATURE_PREFIX);
        for wrong in [
            format!("sha1={hex}"),
            hex.to_owned(),
            format!("sha256={}", &hex[..62]),
            format!("sha256={}zz", &hex[..62]),
            String::new(),
        ] {
            assert_eq!(
                secret.verify(&headers(SIGNATURE_HEADER, &wrong), BODY),
                Err(HookRefusal::MalformedSignature),
                "{wrong:?}"
            );
        }
        // A signature header decides even beside GitLab's token.
        let mut both = headers(SIGNATURE_HEADER, &other_secret);
        both.insert(GITLAB_TOKEN_HEADER, HeaderValue::from_static("s3cret"));
        assert_eq!(secret.verify(&both, BODY), Err(HookRefusal::BadSignature));
    }

    #[test]
    fn gitlabs_token_is_the_secret_itself() {
        let secret = HookSecret::from_bytes(b"s3cret");
        assert_eq!(secret.verify(&headers(GITLAB_TOKEN_HEADER, "s3cret"), BODY), Ok(()));
        for wrong in ["s3cret ", "s3cre", "S3CRET", ""] {
            assert_eq!(secret.verify(&headers(GITLAB_TOKEN_HEADER, wrong), BODY), Err(HookRefusal::BadSignature));
        }
    }

    fn secret_file(text: &[u8], mode: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hook.secret");
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        (dir, path)
    }

    #[test]
    fn the_secret_file_is_private_non_empty_and_loses_its_trailing_newline() {
        let (_dir, path) = secret_file(b"s3cret\n", 0o600);
        let secret = HookSecret::read(&path).expect("reads");
        assert_eq!(secret.signature(BODY), HookSecret::from_bytes(b"s3cret").signature(BODY));
        let (_dir, path) = secret_file(b"s3cret\r\n", 0o400);
        assert!(HookSecret::read(&path).is_ok(), "stricter than 0600 is fine");

        for mode in [0o640, 0o604, 0o644, 0o660] {
            let (_dir, path) = secret_file(b"s3cret\n", mode);
            let refused = HookSecret::read(&path).expect_err("exposed");
            assert!(matches!(refused, SecretError::Exposed { mode: m, .. } if m == mode), "{refused}");
            let message = refused.to_string();
            assert!(
                message.contains(&path.display().to_string()) && message.contains(&format!("{mode:o}")),
                "{message}"
            );
        }
        for empty in [&b""[..], b"\n", b"\r\n\n"] {
            let (_dir, path) = secret_file(empty, 0o600);
            assert!(matches!(HookSecret::read(&path), Err(SecretError::Empty { .. })), "{empty:?}");
        }
        let (_dir, path) = secret_file(&[b'x'; 5000], 0o600);
        assert!(matches!(HookSecret::read(&path), Err(SecretError::TooLong { .. })));
        if rustix::process::geteuid().is_root() {
            // Private, but another user's: as root the test can make such a file.
            let (_dir, path) = secret_file(b"s3cret\n", 0o600);
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
            let refused = HookSecret::read(&path).expect_err("not ours");
            assert!(matches!(refused, SecretError::NotOwned { owner: 65534, user: 0, .. }), "{refused}");
        }
        let missing = HookSecret::read(Path::new("/nonexistent/hook.secret")).expect_err("missing");
        assert!(missing.to_string().contains("/nonexistent/hook.secret"), "{missing}");
    }

    #[test]
    fn refusals_are_recorded_at_most_once_per_period_counting_the_rest() {
        let log = EntryRate::every(Duration::from_secs(1));
        let start = Instant::now();
        assert_eq!(log.note(start), Some(0));
        assert_eq!(log.note(start + Duration::from_millis(10)), None);
        assert_eq!(log.note(start + Duration::from_millis(999)), None);
        assert_eq!(log.note(start + Duration::from_secs(1)), Some(2));
        assert_eq!(log.note(start + Duration::from_secs(5)), Some(0));
    }

    #[test]
    fn a_delivery_id_is_acted_on_once_within_the_window() {
        let log = DeliveryLog::new(Duration::from_secs(60), 100);
        let start = Instant::now();
        assert!(log.first_sight("72d3162e-cc78-11e3-81ab-4c9367dc0958", start));
        for later in [1, 30, 59] {
            let now = start + Duration::from_secs(later);
            assert!(!log.first_sight("72d3162e-cc78-11e3-81ab-4c9367dc0958", now), "a replay {later} s later");
        }
        assert!(log.first_sight("another", start + Duration::from_secs(59)));
        assert!(log.first_sight("72d3162e-cc78-11e3-81ab-4c9367dc0958", start + Duration::from_secs(60)), "expired");
    }

    #[test]
    fn fresh_ids_past_the_capacity_forget_the_oldest_and_hold_no_more() {
        let log = DeliveryLog::new(Duration::from_secs(60), 3);
        let now = Instant::now();
        for id in ["a", "b", "c", "d"] {
            assert!(log.first_sight(id, now), "{id}");
        }
        let seen = log.seen.lock().expect("lock");
        assert_eq!((seen.ids.len(), seen.order.len()), (3, 3));
        assert!(!seen.ids.contains("a"), "the oldest went first");
        drop(seen);
        assert!(!log.first_sight("d", now));
    }

    #[test]
    fn the_delivery_id_is_githubs_else_gitlabs_and_only_a_plausible_one() {
        assert_eq!(delivery_id(&headers("x-github-delivery", "abc-123")), Some("abc-123"));
        assert_eq!(delivery_id(&headers("x-gitlab-event-uuid", " 0a1b ")), Some("0a1b"));
        let mut both = headers("x-github-delivery", "github");
        both.insert("x-gitlab-event-uuid", HeaderValue::from_static("gitlab"));
        assert_eq!(delivery_id(&both), Some("github"));
        assert_eq!(delivery_id(&HeaderMap::new()), None);
        for odd in ["", "with space", &"x".repeat(129)] {
            assert_eq!(delivery_id(&headers("x-github-delivery", odd)), None, "{odd:?}");
        }
        assert_eq!(delivery_id(&headers("x-github-delivery", &"x".repeat(128))).map(str::len), Some(128));
    }
}
