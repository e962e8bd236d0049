//! Registry credentials for a pull, where the Docker CLI (the engine's own client) keeps them:
//! the `auths` of `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`, each entry's `auth`
//! being base64 of `user:password` (or an `identitytoken`). Credential helpers (`credsStore`,
//! `credHelpers`) are not run: a registry they serve is pulled from without credentials, and a
//! log line names the helper (never a credential). Nothing read here is logged, recorded, or put
//! in an error: the values go to the engine in the pull's `X-Registry-Auth` header and nowhere
//! else.

use std::collections::HashMap;
use std::path::PathBuf;

use base64::Engine as _;
use bollard::auth::DockerCredentials;
use serde::Deserialize;

/// The Docker CLI's name for Docker Hub in `auths`.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// The Docker config as far as pulls read it.
#[derive(Default, Deserialize)]
struct Config {
    #[serde(default)]
    auths: HashMap<String, Entry>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: HashMap<String, String>,
}

/// One `auths` entry. No `Debug`: it holds a credential.
#[derive(Default, Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// What the config says about one registry.
pub(crate) enum Found {
    /// Credentials to hand the engine.
    Credentials(DockerCredentials),
    /// No inline entry; a credential helper Roundtable does not run is named for it.
    HelperOnly(String),
    /// Nothing: pull anonymously.
    Nothing,
    /// An entry that does not read (not base64, no `user:password` in it): why, without it.
    Unreadable(&'static str),
}

/// Which config file the engine's client would read: `$DOCKER_CONFIG/config.json`, else
/// `$HOME/.docker/config.json`.
fn config_path() -> Option<PathBuf> {
    match std::env::var_os("DOCKER_CONFIG").filter(|dir| !dir.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir).join("config.json")),
        None => std::env::var_os("HOME").filter(|home| !home.is_empty()).map(|home| {
            let mut path = PathBuf::from(home);
            path.push(".docker");
            path.push("config.json");
            path
        }),
    }
}

/// The credentials for pulling from `registry` (a reference's registry host, `docker.io` for
/// Docker Hub), read from the config file now (so a `docker login` meanwhile counts), or `None`.
pub(crate) fn for_registry(registry: &str) -> Option<DockerCredentials> {
    let path = config_path()?;
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot read the Docker config; pulling without credentials");
            return None;
        }
    };
    match lookup(&text, registry) {
        Ok(Found::Credentials(credentials)) => Some(credentials),
        Ok(Found::HelperOnly(helper)) => {
            tracing::warn!(
                registry,
                helper,
                path = %path.display(),
                "the Docker config names a credential helper for this registry, which Roundtable does not run; pulling without credentials"
            );
            None
        }
        Ok(Found::Nothing) => None,
        Ok(Found::Unreadable(why)) => {
            tracing::warn!(registry, path = %path.display(), why, "the Docker config's entry for this registry does not read; pulling without credentials");
            None
        }
        Err(error) => {
            // Where, never what: serde_json's message can quote the value it did not expect.
            let (line, column) = (error.line(), error.column());
            tracing::warn!(path = %path.display(), line, column, "the Docker config does not read as one; pulling without credentials");
            None
        }
    }
}

/// `registry` as `auths` keys name it, compared without a scheme or path: `https://host:5000/v1/`
/// is `host:5000`, and Docker Hub's several names are one.
fn key_host(key: &str) -> &str {
    let bare = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    let host = bare.split('/').next().unwrap_or(bare);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io",
        other => other,
    }
}

/// What the config text `text` holds for `registry`.
fn lookup(text: &str, registry: &str) -> Result<Found, serde_json::Error> {
    let config: Config = serde_json::from_str(text)?;
    let entry = config.auths.iter().find(|(key, _)| key_host(key) == registry);
    let Some((key, entry)) = entry else {
        let helper = config
            .cred_helpers
            .iter()
            .find(|(key, _)| key_host(key) == registry)
            .map(|(_, helper)| helper.clone())
            .or(config.creds_store);
        return Ok(helper.map_or(Found::Nothing, Found::HelperOnly));
    };
    let server = if registry == "docker.io" { DOCKER_HUB_KEY.to_owned() } else { key_host(key).to_owned() };
    let (username, password) = match (&entry.auth, &entry.username, &entry.password) {
        (Some(auth), _, _) if !auth.is_empty() => {
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(auth.trim()) else {
                return Ok(Found::Unreadable("its auth is not base64"));
            };
            let Ok(decoded) = String::from_utf8(decoded) else {
                return Ok(Found::Unreadable("its auth is not text"));
            };
            let Some((user, password)) = decoded.split_once(':') else {
                return Ok(Found::Unreadable("its auth is not user:password"));
            };
            (Some(user.to_owned()), Some(password.to_owned()))
        }
        (_, username, password) => (username.clone(), password.clone()),
    };
    let identitytoken = entry.identitytoken.clone().filter(|token| !token.is_empty());
    if username.is_none() && identitytoken.is_none() {
        return Ok(Found::Nothing);
    }
    Ok(Found::Credentials(DockerCredentials {
        username,
        password,
        serveraddress: Some(server),
        identitytoken,
        ..DockerCredentials::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(user_password: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(user_password)
    }

    fn found(text: &str, registry: &str) -> String {
        match lookup(text, registry) {
            Ok(Found::Credentials(c)) => format!(
                "{}:{}@{} token={}",
                c.username.unwrap_or_default(),
                c.password.unwrap_or_default(),
                c.serveraddress.unwrap_or_default(),
                c.identitytoken.unwrap_or_default()
            ),
            Ok(Found::HelperOnly(helper)) => format!("helper {helper}"),
            Ok(Found::Nothing) => "nothing".into(),
            Ok(Found::Unreadable(why)) => format!("unreadable: {why}"),
            Err(_) => "not json".into(),
        }
    }

    #[test]
    fn an_auths_entry_is_found_by_its_registry_host_however_the_key_is_spelled() {
        let entry = auth("rt-user:pa:ss");
        for key in ["127.0.0.1:5000", "http://127.0.0.1:5000", "https://127.0.0.1:5000/v2/"] {
            let text = format!(r#"{{"auths": {{"{key}": {{"auth": "{entry}"}}}}}}"#);
            assert_eq!(found(&text, "127.0.0.1:5000"), "rt-user:pa:ss@127.0.0.1:5000 token=", "{key}");
            assert_eq!(found(&text, "127.0.0.1:5001"), "nothing", "another port is another registry");
        }
        let hub = format!(r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}}}}}}"#, auth("me:pw"));
        assert_eq!(found(&hub, "docker.io"), "me:pw@https://index.docker.io/v1/ token=");
    }

    #[test]
    fn helpers_are_named_and_never_run_and_bad_entries_are_refused_without_their_text() {
        let helpers = r#"{"auths": {}, "credHelpers": {"registry.example": "ecr-login"}, "credsStore": "desktop"}"#;
        assert_eq!(found(helpers, "registry.example"), "helper ecr-login");
        assert_eq!(found(helpers, "other.example"), "helper desktop");
        assert_eq!(
            found(r#"{"auths": {"r.example": {"auth": "%%%"}}}"#, "r.example"),
            "unreadable: its auth is not base64"
        );
        let no_colon = format!(r#"{{"auths": {{"r.example": {{"auth": "{}"}}}}}}"#, auth("justauser"));
        assert_eq!(found(&no_colon, "r.example"), "unreadable: its auth is not user:password");
        assert_eq!(found(r#"{"auths": {"r.example": {}}}"#, "r.example"), "nothing");
        assert_eq!(found("{not json", "r.example"), "not json");
        assert_eq!(found("{}", "r.example"), "nothing");
        let token = r#"{"auths": {"r.example": {"identitytoken": "tok"}}}"#;
        assert_eq!(found(token, "r.example"), ":@r.example token=tok");
    }
}
