//! Whether a request was sent by a page of another site: its `Origin` header (browsers send one
//! on every cross-site request and on every POST) names another host than the one it was sent
//! to. The one rule the console's forms and the admin MCP endpoint (MCP's transport rule against
//! DNS rebinding) refuse by; a request without `Origin` is not a browser's page and is judged by
//! its token alone.

use axum::http::{HeaderMap, header};

/// True when `Origin` is there and names another host and port than `Host`; an opaque origin
/// (`null`: a sandboxed frame, a local file) is another site too.
pub fn from_another_site(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return false };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let authority = origin.to_str().ok().and_then(|o| o.split_once("://")).map(|(_, authority)| authority);
    authority.is_none_or(|authority| !authority.eq_ignore_ascii_case(host))
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
        assert!(!from_another_site(&headers(None, "127.0.0.1:8080")), "no Origin: not a page");
        assert!(!from_another_site(&headers(Some("http://127.0.0.1:8080"), "127.0.0.1:8080")));
        assert!(!from_another_site(&headers(Some("https://Console.example:443"), "console.example:443")));
        for other in ["https://evil.example", "http://127.0.0.1:8081", "null", "http://127.0.0.1:8080.evil.example"] {
            assert!(from_another_site(&headers(Some(other), "127.0.0.1:8080")), "{other}");
        }
    }
}
