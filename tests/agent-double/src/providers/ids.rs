//! Session, message and call ids in each CLI's own shape, and the clocks the transcripts print.
//! Randomness comes from the kernel (`/proc/sys/kernel/random/uuid`, `/dev/urandom`), with a
//! hash of the time and process as the fallback, so the binary needs no crate and no libc call.

use std::hash::{BuildHasher as _, Hasher as _};
use std::io::Read as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Separates ids made in the same millisecond.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A random (version 4) UUID in lower case.
pub fn uuid() -> String {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/random/uuid").unwrap_or_default();
    let from_kernel = from_kernel.trim().to_ascii_lowercase();
    if is_uuid(&from_kernel) {
        return from_kernel;
    }
    let mut bytes = random_bytes(16);
    bytes.resize(16, 0);
    if let Some(version) = bytes.get_mut(6) {
        *version = (*version & 0x0f) | 0x40;
    }
    if let Some(variant) = bytes.get_mut(8) {
        *variant = (*variant & 0x3f) | 0x80;
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// `8-4-4-4-12` hexadecimal digits.
pub fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.chars().all(|c| c.is_ascii_hexdigit()))
}

pub fn random_bytes(count: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; count];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut file| file.read_exact(&mut bytes));
    if read.is_err() {
        bytes = hashed_bytes(count);
    }
    bytes
}

/// Bytes from a randomly keyed hash of the clock, the process and a counter: unpredictable
/// enough for ids in a test, never for secrets.
fn hashed_bytes(count: usize) -> Vec<u8> {
    let state = std::collections::hash_map::RandomState::new();
    let mut out = Vec::with_capacity(count + 8);
    let mut block = 0u64;
    while out.len() < count {
        let mut hasher = state.build_hasher();
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
        hasher.write_u32(std::process::id());
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u64(block);
        out.extend_from_slice(&hasher.finish().to_le_bytes());
        block += 1;
    }
    out.truncate(count);
    out
}

/// `count` random characters of `[0-9A-Za-z]`.
pub fn base62(count: usize) -> String {
    random_bytes(count).iter().map(|b| char::from(BASE62[usize::from(*b) % BASE62.len()])).collect()
}

/// OpenCode's ids: a prefix, 12 hexadecimal digits of time and counter, 14 of base62
/// (`ses_f86f2df67ffep5CKpMOXIyR44R`).
pub fn opencode(prefix: &str) -> String {
    let stamp = epoch_ms().wrapping_mul(0x1000).wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed) & 0xfff);
    format!("{prefix}_{:012x}{}", stamp & 0xffff_ffff_ffff, base62(14))
}

pub fn epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The time as JavaScript's `Date.toISOString()` prints it: `2026-08-22T10:15:02.118Z`.
pub fn iso_now() -> String {
    iso(epoch_ms())
}

pub fn iso(ms: u64) -> String {
    let seconds = ms / 1000;
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_uuids_and_differ() {
        let (a, b) = (uuid(), uuid());
        assert!(is_uuid(&a) && is_uuid(&b), "{a} {b}");
        assert_ne!(a, b);
        assert_eq!(a.chars().nth(14), Some('4'), "version 4: {a}");
    }

    #[test]
    fn is_uuid_checks_every_group() {
        assert!(is_uuid("0199a213-81c0-7800-8aa1-bbab2a035a53"));
        for bad in
            ["", "0199a213-81c0-7800-8aa1", "0199a213-81c0-7800-8aa1-bbab2a035a5g", "0199a21381c078008aa1bbab2a035a53"]
        {
            assert!(!is_uuid(bad), "{bad}");
        }
    }

    #[test]
    fn hashed_bytes_fill_the_length_asked() {
        assert_eq!(hashed_bytes(21).len(), 21);
        assert_ne!(hashed_bytes(16), hashed_bytes(16));
    }

    #[test]
    fn opencode_ids_have_the_real_shape() {
        let id = opencode("ses");
        assert_eq!(id.len(), 30, "{id}");
        assert!(id.starts_with("ses_"));
        assert!(id[4..16].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert!(id[4..].chars().all(|c| c.is_ascii_alphanumeric()), "{id}");
        assert_ne!(opencode("ses"), opencode("ses"));
    }

    #[test]
    fn iso_matches_javascript() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_755_857_702_118), "2025-08-22T10:15:02.118Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
