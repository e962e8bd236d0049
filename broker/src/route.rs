//! Which provider a request goes to and whether it may: the first path segment names one of the
//! Adapter's hosts exactly, the path must be canonical (no dot or empty segments, no encoded
//! slash, backslash or dot), and each scheme has its list of model endpoints. Also the path
//! template a log line carries: the query dropped, ids and model names as `{id}` and `{model}`.

use roundtable_specs::broker::{PLACEHOLDER_PREFIX, Scheme};

/// Longest request target (path and query) accepted.
pub(crate) const MAX_TARGET: usize = 2048;
/// Longest path template in a log line.
const MAX_TEMPLATE: usize = 256;

/// Why a path is refused, with the detail the agent is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PathRefusal {
    /// Not canonical (400).
    BadPath(&'static str),
    /// A method no endpoint takes (405).
    Method,
    /// Not a model endpoint of the scheme (403).
    NotAllowed,
}

/// Checks that `path` (without its query) is canonical.
pub(crate) fn check_canonical(path: &str) -> Result<(), PathRefusal> {
    if !path.starts_with('/') {
        return Err(PathRefusal::BadPath("the path does not start with /"));
    }
    if path.contains('\\') {
        return Err(PathRefusal::BadPath("a backslash in the path"));
    }
    let lower = path.to_ascii_lowercase();
    for encoded in ["%2f", "%5c", "%2e", "%00"] {
        if lower.contains(encoded) {
            return Err(PathRefusal::BadPath("an encoded slash, backslash, dot or NUL in the path"));
        }
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return Err(PathRefusal::BadPath("an empty path segment")),
            "." | ".." => return Err(PathRefusal::BadPath("a dot segment in the path")),
            _ => {}
        }
    }
    Ok(())
}

/// Splits `/<host>/<rest>` into the host segment and the rest (`/` when there is none).
pub(crate) fn split_route(path: &str) -> (&str, &str) {
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    match trimmed.find('/') {
        Some(at) => (&trimmed[..at], &trimmed[at..]),
        None => (trimmed, "/"),
    }
}

const GEMINI_METHODS: [&str; 3] = ["generateContent", "streamGenerateContent", "countTokens"];

/// Whether `method` may go to `path` (the upstream path) of `scheme`.
pub(crate) fn check_endpoint(scheme: Scheme, method: &str, path: &str) -> Result<(), PathRefusal> {
    if method != "GET" && method != "POST" {
        return Err(PathRefusal::Method);
    }
    if scheme == Scheme::Custom {
        return Ok(());
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let allowed = match (scheme, method, segments.as_slice()) {
        (Scheme::Openai, "POST", ["v1", "responses"]) => true,
        (Scheme::Openai, "GET", ["v1", "models"]) => true,
        (Scheme::Openai, "GET", ["v1", "models", id]) => !id.is_empty(),
        (Scheme::Anthropic, "POST", ["v1", "messages"]) => true,
        (Scheme::Anthropic, "POST", ["v1", "messages", "count_tokens"]) => true,
        (Scheme::Anthropic, "GET", ["v1", "models"]) => true,
        (Scheme::Gemini, "POST", ["v1beta" | "v1", "models", call]) => {
            matches!(call.rsplit_once(':'), Some((model, action)) if !model.is_empty() && GEMINI_METHODS.contains(&action))
        }
        (Scheme::Gemini, "GET", ["v1beta", "models"]) => true,
        (Scheme::Gemini, "GET", ["v1beta", "models", model]) => !model.is_empty() && !model.contains(':'),
        _ => false,
    };
    if allowed { Ok(()) } else { Err(PathRefusal::NotAllowed) }
}

/// Whether a request to `path` (the upstream path) of `scheme` can be billed: model lists and
/// gets and the token counters cost nothing, so they settle as zero tokens whatever the body
/// says. A custom host is taken to bill anything but a `GET` of `…/models[/<id>]`.
pub(crate) fn bills(scheme: Scheme, method: &str, path: &str) -> bool {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (scheme, method, segments.as_slice()) {
        (Scheme::Custom, "GET", [.., "models"] | [.., "models", _]) => false,
        (Scheme::Custom, _, _) => true,
        (_, "GET", _) => false,
        (Scheme::Anthropic, "POST", ["v1", "messages", "count_tokens"]) => false,
        (Scheme::Gemini, "POST", [.., call]) => !call.ends_with(":countTokens"),
        _ => true,
    }
}

/// The path a log line carries: ids and model names replaced where the scheme knows them, a
/// placeholder never written, at most [`MAX_TEMPLATE`] bytes.
pub(crate) fn template(scheme: Option<Scheme>, path: &str) -> String {
    let path = match path.find(PLACEHOLDER_PREFIX) {
        Some(at) => format!("{}{{placeholder}}", &path[..at]),
        None => path.to_owned(),
    };
    let templated = match scheme {
        Some(Scheme::Openai | Scheme::Anthropic) => model_ids(&path),
        Some(Scheme::Gemini) => gemini_models(&path),
        _ => path,
    };
    truncate(templated, MAX_TEMPLATE)
}

/// `/<host>/v1/models/<id>` becomes `/<host>/v1/models/{id}`.
fn model_ids(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').collect();
    match segments.as_slice() {
        ["", host, "v1", "models", _id] => format!("/{host}/v1/models/{{id}}"),
        _ => path.to_owned(),
    }
}

/// `/<host>/v1beta/models/<model>[:<action>]` becomes `/<host>/v1beta/models/{model}[:<action>]`.
fn gemini_models(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').collect();
    match segments.as_slice() {
        ["", host, version @ ("v1beta" | "v1"), "models", call] => match call.rsplit_once(':') {
            Some((_, action)) => format!("/{host}/{version}/models/{{model}}:{action}"),
            None => format!("/{host}/{version}/models/{{model}}"),
        },
        _ => path.to_owned(),
    }
}

pub(crate) fn truncate(mut text: String, limit: usize) -> String {
    if text.len() > limit {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_and_token_counts_do_not_bill() {
        assert!(!bills(Scheme::Openai, "GET", "/v1/models"));
        assert!(!bills(Scheme::Anthropic, "POST", "/v1/messages/count_tokens"));
        assert!(!bills(Scheme::Gemini, "POST", "/v1beta/models/gemini-2.5-pro:countTokens"));
        assert!(!bills(Scheme::Custom, "GET", "/v1/models/m"));
        assert!(bills(Scheme::Openai, "POST", "/v1/responses"));
        assert!(bills(Scheme::Anthropic, "POST", "/v1/messages"));
        assert!(bills(Scheme::Gemini, "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"));
        assert!(bills(Scheme::Custom, "POST", "/v1/models"));
    }

    #[test]
    fn only_canonical_paths_pass() {
        assert_eq!(check_canonical("/api.openai.com/v1/responses"), Ok(()));
        for bad in [
            "/api.openai.com/v1/../v1/responses",
            "/api.openai.com/./v1/responses",
            "/api.openai.com//v1/responses",
            "/api.openai.com/v1/responses/",
            "/api.openai.com/v1%2Fresponses",
            "/api.openai.com/v1%2fresponses",
            "/api.openai.com/v1%5cresponses",
            "/api.openai.com/v1\\responses",
            "/api.openai.com/%2e%2e/x",
            "relative",
        ] {
            assert!(matches!(check_canonical(bad), Err(PathRefusal::BadPath(_))), "{bad}");
        }
    }

    #[test]
    fn each_scheme_takes_only_its_model_endpoints() {
        use Scheme::*;
        let allowed = [
            (Openai, "POST", "/v1/responses"),
            (Openai, "GET", "/v1/models"),
            (Openai, "GET", "/v1/models/gpt-5"),
            (Anthropic, "POST", "/v1/messages"),
            (Anthropic, "POST", "/v1/messages/count_tokens"),
            (Anthropic, "GET", "/v1/models"),
            (Gemini, "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
            (Gemini, "POST", "/v1/models/gemini-2.5-pro:generateContent"),
            (Gemini, "POST", "/v1beta/models/gemini-2.5-pro:countTokens"),
            (Gemini, "GET", "/v1beta/models"),
            (Gemini, "GET", "/v1beta/models/gemini-2.5-pro"),
            (Custom, "POST", "/anything/at/all"),
        ];
        for (scheme, method, path) in allowed {
            assert_eq!(check_endpoint(scheme, method, path), Ok(()), "{scheme} {method} {path}");
        }
        let refused = [
            (Openai, "GET", "/v1/responses", PathRefusal::NotAllowed),
            (Openai, "POST", "/v1/files", PathRefusal::NotAllowed),
            (Openai, "DELETE", "/v1/models/x", PathRefusal::Method),
            (Anthropic, "POST", "/v1/complete", PathRefusal::NotAllowed),
            (Anthropic, "HEAD", "/api/hello", PathRefusal::Method),
            (Gemini, "POST", "/v1beta/models/x:embedContent", PathRefusal::NotAllowed),
            (Gemini, "POST", "/v1beta/models/:generateContent", PathRefusal::NotAllowed),
            (Gemini, "GET", "/v1beta/files", PathRefusal::NotAllowed),
            (Custom, "PUT", "/x", PathRefusal::Method),
        ];
        for (scheme, method, path, refusal) in refused {
            assert_eq!(check_endpoint(scheme, method, path), Err(refusal), "{scheme} {method} {path}");
        }
    }

    #[test]
    fn templates_hide_ids_models_and_placeholders_and_stay_short() {
        assert_eq!(template(Some(Scheme::Openai), "/api.openai.com/v1/models/gpt-5"), "/api.openai.com/v1/models/{id}");
        assert_eq!(
            template(Some(Scheme::Gemini), "/g.example/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
            "/g.example/v1beta/models/{model}:streamGenerateContent"
        );
        assert_eq!(template(Some(Scheme::Custom), "/h/x/rt-placeholder-abc"), "/h/x/{placeholder}");
        assert_eq!(template(None, &format!("/{}", "a".repeat(600))).len(), 256);
    }
}
