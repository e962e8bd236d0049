//! Who is logged in to the review console: a login with the operator token opens a console
//! session, a random id kept in memory and carried by an `HttpOnly`, `SameSite=Strict` cookie
//! (`Secure` on a TLS listener). The token itself never reaches the browser's storage, so a logout
//! or a daemon restart ends every session it made. Each session has its own CSRF token, which
//! every form carries and every POST must return; the login form is protected by a double-submit
//! cookie. A module of its own below the shared state, as `auth.rs` is for the operator token:
//! the state holds these sessions and the serve layer's gate admits by them, while the console's
//! pages and forms (`console/`) read the state from above.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq as _;

pub(crate) use crate::auth::random_hex;

/// The session cookie.
pub(crate) const SESSION_COOKIE: &str = "rt_console";
/// The login form's double-submit cookie.
pub(crate) const LOGIN_COOKIE: &str = "rt_login";
/// How long a console session lives from its login.
const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// At most this many sessions at once; the oldest goes first.
const MAX_SESSIONS: usize = 256;

/// A logged-in console session.
#[derive(Clone)]
struct Session {
    csrf: String,
    expires: Instant,
}

/// The console sessions of one daemon.
#[derive(Default)]
pub struct ConsoleSessions {
    by_id: Mutex<HashMap<String, Session>>,
}

impl std::fmt::Debug for ConsoleSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsoleSessions(..)")
    }
}

/// Constant-time equality of two secrets.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// A `Set-Cookie` value for the console: only sent back to `/ui`, never readable by script,
/// never sent from another site, and over TLS only when the listener has it.
pub(crate) fn set_cookie(name: &str, value: &str, secure: bool, max_age: Option<Duration>) -> String {
    let mut text = format!("{name}={value}; Path=/ui; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age {
        text.push_str(&format!("; Max-Age={}", age.as_secs()));
    }
    if secure {
        text.push_str("; Secure");
    }
    text
}

/// A `Set-Cookie` value that removes cookie `name`.
pub(crate) fn clear_cookie(name: &str, secure: bool) -> String {
    set_cookie(name, "", secure, Some(Duration::ZERO))
}

impl ConsoleSessions {
    /// Opens a session; its id and CSRF token.
    pub(crate) fn open(&self) -> Option<(String, String)> {
        let (id, csrf) = (random_hex()?, random_hex()?);
        let mut sessions = self.by_id.lock().ok()?;
        let now = Instant::now();
        sessions.retain(|_, s| s.expires > now);
        while sessions.len() >= MAX_SESSIONS {
            let oldest = sessions.iter().min_by_key(|(_, s)| s.expires).map(|(id, _)| id.clone())?;
            sessions.remove(&oldest);
        }
        sessions.insert(id.clone(), Session { csrf: csrf.clone(), expires: now + LIFETIME });
        Some((id, csrf))
    }

    /// The CSRF token of the live session the request's cookie names.
    pub(crate) fn csrf_of(&self, headers: &HeaderMap) -> Option<String> {
        let id = cookie(headers, SESSION_COOKIE)?;
        let sessions = self.by_id.lock().ok()?;
        let (_, session) = sessions.iter().find(|(known, _)| same(known, id))?;
        (session.expires > Instant::now()).then(|| session.csrf.clone())
    }

    /// Whether the request carries a live session's cookie (judged on the head alone).
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        self.csrf_of(headers).is_some()
    }

    /// Ends the session the request's cookie names.
    pub(crate) fn close(&self, headers: &HeaderMap) {
        let Some(id) = cookie(headers, SESSION_COOKIE) else { return };
        if let Ok(mut sessions) = self.by_id.lock() {
            sessions.retain(|known, _| !same(known, id));
        }
    }

    /// How long a session lives.
    pub(crate) fn lifetime() -> Duration {
        LIFETIME
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_cookie(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, value.parse().expect("header"));
        headers
    }

    #[test]
    fn a_session_is_admitted_by_its_cookie_until_it_is_closed() {
        let sessions = ConsoleSessions::default();
        let (id, csrf) = sessions.open().expect("opened");
        let headers = with_cookie(&format!("theme=dark; {SESSION_COOKIE}={id}"));
        assert!(sessions.admits(&headers));
        assert_eq!(sessions.csrf_of(&headers), Some(csrf));
        assert!(!sessions.admits(&with_cookie(&format!("{SESSION_COOKIE}={}", "0".repeat(64)))));
        assert!(!sessions.admits(&HeaderMap::new()));
        sessions.close(&headers);
        assert!(!sessions.admits(&headers), "a closed session is gone");
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_over_tls() {
        let plain = set_cookie(SESSION_COOKIE, "x", false, None);
        assert_eq!(plain, "rt_console=x; Path=/ui; HttpOnly; SameSite=Strict");
        assert!(set_cookie(SESSION_COOKIE, "x", true, None).ends_with("; Secure"));
    }
}
