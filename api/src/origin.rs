//! Where a request says it comes from: its `Origin` header (browsers send one on every
//! cross-site request and on every POST) against the host it was sent to. The one reading the
//! console's forms and the admin MCP endpoint (MCP's transport rule against DNS rebinding) refuse
//! by; a request without `Origin` is not a browser's page and is judged by its token alone.

use axum::http::{HeaderMap, header};

/// What a request's `Origin` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// No `Origin`: not a browser's page (the CLI, an SDK, curl).
    Absent,
    /// A page of the host the request was sent to.
    SameSite,
    /// `null` (or unreadable): a browser hiding where the request comes from. Chrome sends it
    /// for a form POST from a page whose referrer policy is `no-referrer`, as the console's are.
    Opaque,
    /// A page of another host or port.
    OtherSite,
}

/// Reads `Origin` against `Host`.
pub fn origin_of(headers: &HeaderMap) -> Origin {
    let Some(origin) = headers.get(header::ORIGIN) else { return Origin::Absent };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    match origin.to_str().ok().and_then(|o| o.split_once("://")) {
        None => Origin::Opaque,
        Some((_, authority)) if authority.eq_ignore_ascii_case(host) => Origin::SameSite,
        Some(_) => Origin::OtherSite,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>, host: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, host.parse().expect("host"));
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, origin.parse().expect("origin"));
        }
        headers
    }

    #[test]
    fn only_a_page_of_the_same_host_and_port_is_this_site() {
        assert_eq!(origin_of(&headers(None, "127.0.0.1:8080")), Origin::Absent);
        assert_eq!(origin_of(&headers(Some("http://127.0.0.1:8080"), "127.0.0.1:8080")), Origin::SameSite);
        assert_eq!(origin_of(&headers(Some("https://Console.example:443"), "console.example:443")), Origin::SameSite);
        assert_eq!(origin_of(&headers(Some("null"), "127.0.0.1:8080")), Origin::Opaque);
        for other in ["https://evil.example", "http://127.0.0.1:8081", "http://127.0.0.1:8080.evil.example"] {
            assert_eq!(origin_of(&headers(Some(other), "127.0.0.1:8080")), Origin::OtherSite, "{other}");
        }
    }
}
