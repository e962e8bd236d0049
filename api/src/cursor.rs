//! List cursors: opaque to clients, emitted in `metadata.continue` and accepted back verbatim as
//! `?continue=`, the same encoding both ways. A cursor names the last item of a page (keyset
//! pagination), so items added or removed between pages neither repeat nor vanish; it carries the
//! list it belongs to, so one list's cursor is refused by another.

use crate::error::ApiError;

const VERSION: &str = "c1";
pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 200;

/// A page request: after which item, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub after: Option<String>,
    pub limit: usize,
}

/// The cursor of list `list` positioned after `last`.
pub fn encode(list: &str, last: &str) -> String {
    let plain = format!("{VERSION}\n{list}\n{last}");
    plain.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The position a cursor of list `list` names.
pub fn decode(list: &str, cursor: &str) -> Result<String, ApiError> {
    let invalid = || ApiError::bad_request("invalid_cursor", "the continue token is not one this list issued");
    if !cursor.len().is_multiple_of(2) || cursor.len() > 2048 {
        return Err(invalid());
    }
    let bytes: Vec<u8> = (0..cursor.len())
        .step_by(2)
        .map(|i| cursor.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect::<Option<_>>()
        .ok_or_else(invalid)?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut parts = text.splitn(3, '\n');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(VERSION), Some(kind), Some(last)) if kind == list => Ok(last.to_owned()),
        _ => Err(invalid()),
    }
}

/// `?limit=` and `?continue=` of list `list`, checked.
pub fn page(list: &str, limit: Option<&str>, cursor: Option<&str>) -> Result<PageRequest, ApiError> {
    let limit = match limit {
        None => DEFAULT_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_limit",
                    format!("limit must be a whole number from 1 to {MAX_LIMIT}, not {text:?}"),
                ));
            }
        },
    };
    let after = cursor.filter(|c| !c.is_empty()).map(|c| decode(list, c)).transpose()?;
    Ok(PageRequest { after, limit })
}

/// One page of an in-memory list ordered newest first, by `key` descending: the items past
/// `request.after`, and the cursor of the next page when more follow. Keys compare, so a cursor
/// naming an item removed since still resumes at its place.
pub fn slice<T>(
    list: &str,
    items: Vec<T>,
    request: &PageRequest,
    key: impl Fn(&T) -> String,
) -> (Vec<T>, Option<String>) {
    let past = |item: &T| request.after.as_ref().is_none_or(|after| key(item).as_str() < after.as_str());
    let mut rest: Vec<T> = items.into_iter().skip_while(|item| !past(item)).collect();
    let more = rest.len() > request.limit;
    rest.truncate(request.limit);
    let next = if more { rest.last().map(|last| encode(list, &key(last))) } else { None };
    (rest, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_comes_back_verbatim_and_belongs_to_its_list() {
        let cursor = encode("agents", "codex");
        assert_eq!(decode("agents", &cursor).expect("decodes"), "codex");
        assert_eq!(decode("sessions", &cursor).expect_err("another list's").code, "invalid_cursor");
        assert_eq!(decode("agents", "zz").expect_err("not hex").code, "invalid_cursor");
        assert_eq!(decode("agents", "abc").expect_err("odd").code, "invalid_cursor");
    }

    #[test]
    fn limits_outside_1_to_200_are_refused() {
        assert_eq!(page("agents", None, None).expect("default").limit, 50);
        assert_eq!(page("agents", Some("200"), None).expect("max").limit, 200);
        for bad in ["0", "201", "-1", "ten", ""] {
            assert_eq!(page("agents", Some(bad), None).expect_err(bad).code, "invalid_limit");
        }
    }

    #[test]
    fn slices_walk_a_list_once() {
        let items: Vec<String> = (0..7).rev().map(|i| format!("s{i}")).collect();
        let mut request = PageRequest { after: None, limit: 3 };
        let mut seen = Vec::new();
        loop {
            let (page, next) = slice("sessions", items.clone(), &request, Clone::clone);
            seen.extend(page);
            match next {
                Some(cursor) => request.after = Some(decode("sessions", &cursor).expect("ours")),
                None => break,
            }
        }
        assert_eq!(seen, items);
    }
}
