//! The list envelope every JSON output uses, kubectl style: `apiVersion`, `<Kind>List`, an
//! opaque cursor, the items.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::meta::API_VERSION;

/// An item type that can be listed; `LIST_KIND` is the envelope's `kind`.
pub trait ListItem {
    const LIST_KIND: &'static str;
}

/// `{"apiVersion", "kind": "<Kind>List", "metadata": {"continue"?}, "items": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    pub api_version: String,
    pub kind: String,
    pub metadata: ListMeta,
    pub items: Vec<T>,
}

/// `metadata` of a list: an opaque cursor when more items follow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ListMeta {
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

impl<T: ListItem> List<T> {
    pub fn of(items: Vec<T>) -> Self {
        Self { api_version: API_VERSION.into(), kind: T::LIST_KIND.into(), metadata: ListMeta::default(), items }
    }
}
