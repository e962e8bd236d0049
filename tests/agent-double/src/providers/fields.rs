//! Typed reads of manifest fields. An error names the field by its path in the manifest, the way
//! each CLI's own schema check does, so a test failure points at the line Roundtable wrote.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value};

pub type Object = Map<String, Value>;

/// The field at `at.key`, absent or `null` meaning unset.
fn get<'a>(object: &'a Object, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

pub fn string(object: &Object, key: &str, at: &str) -> Result<Option<String>, String> {
    match get(object, key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!("`{at}.{key}` must be a string")),
    }
}

pub fn strings(object: &Object, key: &str, at: &str) -> Result<Option<Vec<String>>, String> {
    let Some(value) = get(object, key) else { return Ok(None) };
    let items = value.as_array().ok_or_else(|| format!("`{at}.{key}` must be an array of strings"))?;
    items
        .iter()
        .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| format!("`{at}.{key}` must be an array of strings")))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

pub fn string_map(object: &Object, key: &str, at: &str) -> Result<Option<BTreeMap<String, String>>, String> {
    let Some(value) = get(object, key) else { return Ok(None) };
    let entries = value.as_object().ok_or_else(|| format!("`{at}.{key}` must be a table of strings"))?;
    entries
        .iter()
        .map(|(name, value)| match value {
            Value::String(text) => Ok((name.clone(), text.clone())),
            _ => Err(format!("`{at}.{key}.{name}` must be a string")),
        })
        .collect::<Result<BTreeMap<_, _>, _>>()
        .map(Some)
}

pub fn boolean(object: &Object, key: &str, at: &str) -> Result<Option<bool>, String> {
    match get(object, key) {
        None => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(_) => Err(format!("`{at}.{key}` must be a boolean")),
    }
}

pub fn object<'a>(object: &'a Object, key: &str, at: &str) -> Result<Option<&'a Object>, String> {
    match get(object, key) {
        None => Ok(None),
        Some(Value::Object(inner)) => Ok(Some(inner)),
        Some(_) => Err(format!("`{at}.{key}` must be a table")),
    }
}

/// A non-negative number of `unit` (seconds or milliseconds) as a duration.
pub fn duration(object: &Object, key: &str, at: &str, unit: Duration) -> Result<Option<Duration>, String> {
    let Some(value) = get(object, key) else { return Ok(None) };
    let count = value
        .as_f64()
        .filter(|count| count.is_finite() && *count >= 0.0)
        .ok_or_else(|| format!("`{at}.{key}` must be a non-negative number"))?;
    // Far beyond any read limit; it only keeps the conversion from overflowing.
    Ok(Some(unit.mul_f64(count.min(1e9))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn manifest() -> Object {
        match json!({
            "s": "x", "n": 20, "f": 1.5, "b": true, "a": ["x", "y"], "m": {"K": "v"},
            "bad_a": ["x", 1], "bad_m": {"K": 1}, "neg": -1, "nul": null
        }) {
            Value::Object(object) => object,
            _ => Object::new(),
        }
    }

    #[test]
    fn each_reader_accepts_its_type_and_names_the_field_otherwise() {
        let m = manifest();
        assert_eq!(string(&m, "s", "srv"), Ok(Some("x".into())));
        assert_eq!(string(&m, "nul", "srv"), Ok(None));
        assert_eq!(string(&m, "missing", "srv"), Ok(None));
        assert_eq!(string(&m, "n", "srv"), Err("`srv.n` must be a string".into()));
        assert_eq!(strings(&m, "a", "srv"), Ok(Some(vec!["x".into(), "y".into()])));
        assert_eq!(strings(&m, "bad_a", "srv"), Err("`srv.bad_a` must be an array of strings".into()));
        assert_eq!(string_map(&m, "m", "srv"), Ok(Some(BTreeMap::from([("K".into(), "v".into())]))));
        assert_eq!(string_map(&m, "bad_m", "srv"), Err("`srv.bad_m.K` must be a string".into()));
        assert_eq!(boolean(&m, "b", "srv"), Ok(Some(true)));
        assert_eq!(boolean(&m, "s", "srv"), Err("`srv.s` must be a boolean".into()));
        assert!(object(&m, "m", "srv").is_ok_and(|o| o.is_some()));
        let second = Duration::from_secs(1);
        assert_eq!(duration(&m, "n", "srv", second), Ok(Some(Duration::from_secs(20))));
        assert_eq!(duration(&m, "f", "srv", second), Ok(Some(Duration::from_millis(1500))));
        assert_eq!(duration(&m, "neg", "srv", second), Err("`srv.neg` must be a non-negative number".into()));
    }
}
