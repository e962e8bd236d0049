//! The patterns the schemas carry for fields `validate` checks alone (ECMA-262, as JSON Schema
//! has them): each says in the schema what the check in `validate.rs` refuses, so an editor flags
//! it as it is typed; `tests/schema-corpus/` holds both to it.

/// A readable path (`validate.rs::readable_path_problem`): relative, `/`-separated, no `..` or
/// `.git` component, no control character.
pub const READABLE_PATH: &str = r"^(?![/\\])(?!.*\\)(?!(.*/)?\.\.(/|$))(?!(.*/)?\.git(/|$))[^\u0000-\u001f\u007f]+$";

/// `source.repo` (`validate.rs::repo_path_problem`): relative, no control character.
pub const REPO_PATH: &str = r"^(?![/\\])[^\u0000-\u001f\u007f]+$";

/// A revision: a branch, tag or commit; not empty, no whitespace or control character, not
/// starting with `-`.
pub const REVISION: &str = r"^[^\s\u0000-\u001f\u007f-][^\s\u0000-\u001f\u007f]*$";

/// An argument: anything but NUL.
pub const NO_NUL: &str = r"^[^\u0000]*$";

/// A contract: a file name in `.roundtable/contracts/` ending `.yaml` or `.yml`, no folders, not
/// hidden.
pub const CONTRACT_FILE: &str = r"^[^./\\][^/\\]*\.ya?ml$";

/// A duration that adds up to nothing (`0s`, `0m0s`).
pub const ZERO_DURATION: &str = r"^(0+(ms|s|m|h|d))+$";

/// Something other than whitespace.
pub const NOT_BLANK: &str = r"\S";

/// Something other than whitespace, and no control character.
pub const NOT_BLANK_LINE: &str = r"^(?=.*\S)[^\u0000-\u001f\u007f]+$";
