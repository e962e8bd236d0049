//! What crosses the broker in headers and the query. Upstream: the placeholder found where the
//! scheme puts the key, every credential-bearing, forwarding and hop-by-hop header stripped,
//! `host` set to the route host, and exactly one real credential injected in the place the
//! placeholder came from; a placeholder anywhere else refuses the request. Downstream: cookies,
//! hop-by-hop headers and the provider's organisation headers stripped.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use roundtable_specs::broker::{PLACEHOLDER_PREFIX, Scheme};

use crate::keyring::{Entry, Keyring, Place};

/// Never forwarded upstream: credentials, forwarding, hop-by-hop and the client's org/project.
const STRIPPED_UP: [&str; 19] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "x-goog-api-key",
    "cookie",
    "forwarded",
    "via",
    "x-real-ip",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "openai-organization",
    "openai-project",
    "host",
    "accept-encoding",
];

/// Never passed back to the agent.
const STRIPPED_DOWN: [&str; 11] = [
    "set-cookie",
    "set-cookie2",
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// The placeholder a request carries where its scheme puts the key.
pub(crate) struct Presented<'k> {
    pub(crate) place: Place,
    pub(crate) entry: &'k Entry,
    /// The placeholder itself, only to mask its echoes in an error body.
    pub(crate) placeholder: String,
}

/// Why no placeholder of this route was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotPresented {
    /// No placeholder of this session where the scheme puts the key.
    Missing,
    /// Only a placeholder of this session bound to another route host.
    OtherHost,
}

/// Finds this session's placeholder bound to `host` in the first place of the scheme's that
/// holds one. A placeholder of another route host is never taken, wherever it is.
pub(crate) fn find_placeholder<'k>(
    keyring: &'k Keyring,
    scheme: Scheme,
    host: &str,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Presented<'k>, NotPresented> {
    let mut foreign = false;
    for place in Place::of(scheme) {
        for candidate in candidates(*place, headers, query) {
            match keyring.find(&candidate) {
                Some(entry) if entry.host == host => {
                    return Ok(Presented { place: *place, entry, placeholder: candidate });
                }
                Some(_) => foreign = true,
                None => {}
            }
        }
    }
    Err(if foreign { NotPresented::OtherHost } else { NotPresented::Missing })
}

fn candidates(place: Place, headers: &HeaderMap, query: Option<&str>) -> Vec<String> {
    let values = |name: &str| -> Vec<String> {
        headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(|v| v.trim().to_owned()).collect()
    };
    match place {
        Place::Bearer => values("authorization")
            .into_iter()
            .filter_map(|value| {
                let (kind, token) = value.split_once(' ')?;
                kind.eq_ignore_ascii_case("bearer").then(|| token.trim().to_owned())
            })
            .collect(),
        Place::ApiKey => values("x-api-key"),
        Place::GoogApiKey => values("x-goog-api-key"),
        Place::QueryKey => query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter_map(|pair| {
                let (name, value) = decoded_pair(pair);
                name.eq_ignore_ascii_case("key").then_some(value)
            })
            .collect(),
    }
}

/// A query parameter's name and value, each percent-decoded (`+` kept: a placeholder holds
/// none, and a provider reads the name as it is).
fn decoded_pair(pair: &str) -> (String, String) {
    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
    let decode = |text: &str| String::from_utf8_lossy(&percent_decode(text)).into_owned();
    (decode(name), decode(value))
}

/// `text` with every `%XX` decoded; a `%` not followed by two hex digits is kept as it is.
pub(crate) fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = |byte: u8| char::from(byte).to_digit(16);
        if bytes[at] == b'%'
            && let (Some(high), Some(low)) =
                (bytes.get(at + 1).copied().and_then(hex), bytes.get(at + 2).copied().and_then(hex))
        {
            out.push(u8::try_from(high * 16 + low).unwrap_or(0));
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    out
}

/// Whether `bytes` hold anything that looks like a placeholder, in any case.
pub(crate) fn holds_placeholder(bytes: &[u8]) -> bool {
    let prefix = PLACEHOLDER_PREFIX.as_bytes();
    bytes.windows(prefix.len()).any(|window| window.eq_ignore_ascii_case(prefix))
}

/// The headers sent upstream, or why the request cannot be sent.
pub(crate) fn upstream_headers(
    incoming: &HeaderMap,
    host: &str,
    place: Place,
    secret: &str,
) -> Result<HeaderMap, &'static str> {
    // Names the client declared hop-by-hop in `Connection` go too.
    let declared: Vec<String> = incoming
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::with_capacity(incoming.len() + 2);
    for (name, value) in incoming {
        let lower = name.as_str();
        if STRIPPED_UP.contains(&lower) || lower.starts_with("x-forwarded-") || declared.iter().any(|d| d == lower) {
            continue;
        }
        if holds_placeholder(value.as_bytes()) {
            return Err("a placeholder outside the place the provider takes its key");
        }
        out.append(name.clone(), value.clone());
    }
    let host_value = HeaderValue::from_str(host).map_err(|_| "the route host is not a header value")?;
    out.insert(header::HOST, host_value);
    // A body the broker reads (usage, error echoes) must not arrive compressed.
    out.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    let (name, value) = match place {
        Place::Bearer => (header::AUTHORIZATION, format!("Bearer {secret}")),
        Place::ApiKey => (HeaderName::from_static("x-api-key"), secret.to_owned()),
        Place::GoogApiKey => (HeaderName::from_static("x-goog-api-key"), secret.to_owned()),
        Place::QueryKey => return Ok(out),
    };
    let mut value = HeaderValue::from_str(&value).map_err(|_| "the credential is not a header value")?;
    value.set_sensitive(true);
    out.insert(name, value);
    Ok(out)
}

/// Query parameters that carry a client's own credential, dropped in any case and encoding.
const CREDENTIAL_PARAMETERS: [&str; 2] = ["key", "access_token"];

/// The query sent upstream, each name and value judged percent-decoded: every `key` and
/// `access_token` parameter dropped (a client's own credential never passes), except that the
/// `key` carrying `placeholder` gets the real value in its place; a placeholder anywhere else,
/// encoded or not, refuses the request.
pub(crate) fn upstream_query(
    query: Option<&str>,
    place: Place,
    placeholder: &str,
    secret: &str,
) -> Result<Option<String>, &'static str> {
    let Some(query) = query else { return Ok(None) };
    let mut injected = false;
    let mut parts = Vec::new();
    for pair in query.split('&') {
        let (name, value) = decoded_pair(pair);
        if CREDENTIAL_PARAMETERS.iter().any(|credential| name.eq_ignore_ascii_case(credential)) {
            if place == Place::QueryKey && !injected && name.eq_ignore_ascii_case("key") && value == placeholder {
                injected = true;
                parts.push(format!("key={}", crate::redact::percent_encode(secret, true)));
            }
            continue;
        }
        if holds_placeholder(pair.as_bytes())
            || holds_placeholder(name.as_bytes())
            || holds_placeholder(value.as_bytes())
        {
            return Err("a placeholder outside the place the provider takes its key");
        }
        parts.push(pair.to_owned());
    }
    Ok((!parts.is_empty()).then(|| parts.join("&")))
}

/// Strips what the agent is never shown from a provider's response headers, and any header
/// that echoes the real key or a placeholder.
pub(crate) fn downstream_headers(headers: &mut HeaderMap, echoes: &crate::mask::Echoes) {
    for name in STRIPPED_DOWN {
        headers.remove(name);
    }
    let echoing: Vec<HeaderName> = headers
        .iter()
        .filter(|(_, value)| holds_placeholder(value.as_bytes()) || echoes.found_in(value.as_bytes()))
        .map(|(name, _)| name.clone())
        .collect();
    for name in echoing {
        headers.remove(name);
    }
}

/// The provider's request id, printable and bounded, for the log line.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("x-request-id").or_else(|| headers.get("request-id"))?.to_str().ok()?;
    let printable: String = value.chars().filter(char::is_ascii_graphic).take(128).collect();
    (!printable.is_empty()).then_some(printable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_key_is_replaced_in_place_and_other_keys_dropped() {
        let ph = "rt-placeholder-aa";
        let query = Some("alt=sse&key=agent-own&key=rt-placeholder-aa&x=1");
        assert_eq!(upstream_query(query, Place::QueryKey, ph, "AIza/+"), Ok(Some("alt=sse&key=AIza%2F%2B&x=1".into())));
        assert_eq!(upstream_query(query, Place::GoogApiKey, ph, "AIza"), Ok(Some("alt=sse&x=1".into())));
        assert!(upstream_query(Some("x=rt-placeholder-aa"), Place::Bearer, ph, "s").is_err());
    }

    #[test]
    fn query_names_and_values_are_judged_decoded() {
        let ph = "rt-placeholder-aa";
        let query = Some("k%65y=agent-own&KEY=also-own&access_token=ya29.own&Access%5FToken=x&x=1");
        assert_eq!(upstream_query(query, Place::GoogApiKey, ph, "AIza"), Ok(Some("x=1".into())));
        let query = Some("%6Bey=rt%2Dplaceholder%2Daa");
        assert_eq!(upstream_query(query, Place::QueryKey, ph, "AIza"), Ok(Some("key=AIza".into())));
        assert!(upstream_query(Some("note=%72t-placeholder-aa"), Place::GoogApiKey, ph, "s").is_err());
        assert!(upstream_query(Some("%72t-placeholder-aa=1"), Place::GoogApiKey, ph, "s").is_err());
    }

    #[test]
    fn a_response_header_echoing_the_encoded_key_is_dropped() {
        let mut headers = HeaderMap::new();
        headers.insert("x-echo", HeaderValue::from_static("/v1?key=abc%2Fdef"));
        headers.insert("x-json", HeaderValue::from_static("{\"k\":\"abc\\/def\"}"));
        headers.insert("x-fine", HeaderValue::from_static("ok"));
        downstream_headers(&mut headers, &crate::redact::echoes("abc/def", "rt-placeholder-aa"));
        assert!(headers.get("x-echo").is_none() && headers.get("x-json").is_none() && headers.get("x-fine").is_some());
    }
}
