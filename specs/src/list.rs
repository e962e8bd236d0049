//! The list envelope every JSON output uses, kubectl style: `apiVersion`, `<Kind>List`, an
//! opaque cursor, the items.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::meta::API_VERSION;

/// An item type that can be listed; `LIST_KIND` is the envelope's `kind`.
pub trait ListItem {
    const LIST_KIND: &'static str;
}

/// `{"apiVersion", "kind": "<Kind>List", "metadata": {"continue"?}, "items": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct List<T> {
    pub api_version: String,
    pub kind: String,
    pub metadata: ListMeta,
    pub items: Vec<T>,
}

/// `metadata` of a list: an opaque cursor when more items follow; the version a watch resumes
/// from, for a list that can be watched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ListMeta {
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
    /// The list's version: `?watch=true&resourceVersion=` it to get what changed after it.
    #[serde(rename = "resourceVersion", default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// Named by its kind (`SessionList`), which code generators turn into a class of that name.
impl<T: JsonSchema + ListItem> JsonSchema for List<T> {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed(T::LIST_KIND)
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Owned(format!("{}::List<{}>", module_path!(), T::schema_id()))
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": format!("A list of {} items, as every JSON output lists them.", T::schema_name()),
            "type": "object",
            "required": ["apiVersion", "kind", "metadata", "items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string", "enum": [T::LIST_KIND]},
                "metadata": generator.subschema_for::<ListMeta>(),
                "items": {"type": "array", "items": generator.subschema_for::<T>()},
            },
        })
    }
}

impl<T: ListItem> List<T> {
    pub fn of(items: Vec<T>) -> Self {
        Self { api_version: API_VERSION.into(), kind: T::LIST_KIND.into(), metadata: ListMeta::default(), items }
    }
}
