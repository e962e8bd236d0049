//! `-o jsonpath=TEMPLATE`: kubectl's JSONPath templates over a command's JSON document: text
//! with `{.path}` expressions, `{"literal"}`, and `{range .path}…{end}`. Paths take `.name`,
//! `['name']`, `[n]` (negative from the end), `[*]` or `.*`, `..name` (at any depth) and
//! filters `[?(@.path)]`, `[?(@.path == "x")]` with `== != < <= > >=`.

use serde_json::Value;

/// Why a template does not parse.
#[derive(Debug, PartialEq, Eq)]
pub enum JsonPathError {
    Syntax(String),
}

impl std::fmt::Display for JsonPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonPathError::Syntax(message) => write!(f, "jsonpath template: {message}"),
        }
    }
}

impl std::error::Error for JsonPathError {}

fn syntax<T>(message: impl Into<String>) -> Result<T, JsonPathError> {
    Err(JsonPathError::Syntax(message.into()))
}

/// A parsed template, evaluated once per document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Path(Vec<Step>),
    Range(Vec<Step>, Vec<Node>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    Descend(String),
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Filter {
    path: Vec<Step>,
    compare: Option<(Op, Value)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Template {
    pub fn parse(text: &str) -> Result<Self, JsonPathError> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find('{') {
                None => {
                    pieces.push(Piece::Text(rest.to_owned()));
                    rest = "";
                }
                Some(start) => {
                    if start > 0 {
                        pieces.push(Piece::Text(rest[..start].to_owned()));
                    }
                    let end = closing_brace(&rest[start..])
                        .ok_or_else(|| JsonPathError::Syntax(format!("unclosed '{{' in {text:?}")))?;
                    pieces.push(Piece::Action(rest[start + 1..start + end].trim().to_owned()));
                    rest = &rest[start + end + 1..];
                }
            }
        }
        let mut pieces = pieces.into_iter();
        let nodes = nodes(&mut pieces, false)?;
        Ok(Self { nodes })
    }

    /// The template's text for `document`: strings bare, other values as JSON, several results
    /// of one expression separated by spaces.
    pub fn render(&self, document: &Value) -> String {
        let mut out = String::new();
        render(&self.nodes, document, &mut out);
        out
    }
}

enum Piece {
    Text(String),
    Action(String),
}

/// Where the `}` closing the action that starts `text` is, past any quoted string in it.
fn closing_brace(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        match (quote, c) {
            (Some(_), _) if escaped => escaped = false,
            (Some(_), '\\') => escaped = true,
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '}') => return Some(at),
            _ => {}
        }
    }
    None
}

fn nodes(pieces: &mut impl Iterator<Item = Piece>, in_range: bool) -> Result<Vec<Node>, JsonPathError> {
    let mut nodes = Vec::new();
    while let Some(piece) = pieces.next() {
        match piece {
            Piece::Text(text) => nodes.push(Node::Text(text)),
            Piece::Action(action) if action == "end" => {
                return if in_range { Ok(nodes) } else { syntax("{end} without {range}") };
            }
            Piece::Action(action) => {
                if let Some(path) = action.strip_prefix("range ") {
                    let body = nodes_in_range(pieces)?;
                    nodes.push(Node::Range(path_steps(path.trim())?, body));
                } else if action.starts_with('"') || action.starts_with('\'') {
                    nodes.push(Node::Text(literal(&action)?));
                } else {
                    nodes.push(Node::Path(path_steps(&action)?));
                }
            }
        }
    }
    if in_range { syntax("{range} without {end}") } else { Ok(nodes) }
}

fn nodes_in_range(pieces: &mut impl Iterator<Item = Piece>) -> Result<Vec<Node>, JsonPathError> {
    nodes(pieces, true)
}

/// A quoted literal: JSON's escapes in double quotes (`"\n"`, `"\t"`), as-is in single quotes.
fn literal(text: &str) -> Result<String, JsonPathError> {
    if let Some(inner) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
        return Ok(inner.to_owned());
    }
    serde_json::from_str::<String>(text).or_else(|_| syntax(format!("bad string literal {text}")))
}

/// The steps of a path such as `.items[*].name`, `$.kind` or `@.status`.
fn path_steps(text: &str) -> Result<Vec<Step>, JsonPathError> {
    let mut rest = text.strip_prefix(['$', '@']).unwrap_or(text);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            let (name, tail) = split_name(after);
            if name.is_empty() {
                return syntax(format!("'..' needs a field name in {text:?}"));
            }
            steps.push(Step::Descend(name.to_owned()));
            rest = tail;
        } else if let Some(after) = rest.strip_prefix('.') {
            if let Some(tail) = after.strip_prefix('*') {
                steps.push(Step::Wildcard);
                rest = tail;
            } else {
                let (name, tail) = split_name(after);
                // A bare `.` is the current value.
                if !name.is_empty() {
                    steps.push(Step::Field(name.to_owned()));
                }
                rest = tail;
            }
        } else if rest.starts_with('[') {
            let end = bracket_end(rest).ok_or_else(|| JsonPathError::Syntax(format!("unclosed '[' in {text:?}")))?;
            steps.push(bracket(&rest[1..end])?);
            rest = &rest[end + 1..];
        } else {
            let (name, tail) = split_name(rest);
            if name.is_empty() {
                return syntax(format!("unexpected {rest:?} in {text:?}"));
            }
            steps.push(Step::Field(name.to_owned()));
            rest = tail;
        }
    }
    Ok(steps)
}

fn split_name(text: &str) -> (&str, &str) {
    let end = text.find(['.', '[']).unwrap_or(text.len());
    text.split_at(end)
}

/// Where the `]` closing the bracket that starts `text` is, past quotes and nested brackets.
fn bracket_end(text: &str) -> Option<usize> {
    let (mut depth, mut quote) = (0usize, None);
    for (at, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

fn bracket(inner: &str) -> Result<Step, JsonPathError> {
    let inner = inner.trim();
    if inner == "*" {
        return Ok(Step::Wildcard);
    }
    if let Some(filter) = inner.strip_prefix('?') {
        let filter = filter.trim();
        let filter = filter.strip_prefix('(').and_then(|f| f.strip_suffix(')')).unwrap_or(filter);
        return Ok(Step::Filter(parse_filter(filter.trim())?));
    }
    if inner.starts_with(['\'', '"']) {
        return Ok(Step::Field(literal(inner)?));
    }
    inner.parse::<i64>().map(Step::Index).or_else(|_| syntax(format!("unsupported [{inner}]")))
}

fn parse_filter(text: &str) -> Result<Filter, JsonPathError> {
    const OPS: [(&str, Op); 6] =
        [("==", Op::Eq), ("!=", Op::Ne), ("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)];
    for (spelling, op) in OPS {
        if let Some((left, right)) = text.split_once(spelling) {
            let right = right.trim();
            let value = if right.starts_with('\'') {
                Value::String(literal(right)?)
            } else {
                serde_json::from_str(right).or_else(|_| syntax(format!("bad value {right:?} in filter {text:?}")))?
            };
            return Ok(Filter { path: path_steps(left.trim())?, compare: Some((op, value)) });
        }
    }
    Ok(Filter { path: path_steps(text)?, compare: None })
}

fn render(nodes: &[Node], current: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Path(steps) => {
                let values = select(current, steps);
                let texts: Vec<String> = values.iter().map(|v| text_of(v)).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(steps, body) => {
                for value in select(current, steps) {
                    // kubectl ranges over a list's elements when the path names the list itself.
                    match value {
                        Value::Array(items) if !matches!(steps.last(), Some(Step::Wildcard)) => {
                            items.iter().for_each(|item| render(body, item, out));
                        }
                        value => render(body, value, out),
                    }
                }
            }
        }
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn select<'a>(root: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for value in current {
            apply(step, value, &mut next);
        }
        current = next;
    }
    current
}

fn apply<'a>(step: &Step, value: &'a Value, out: &mut Vec<&'a Value>) {
    match step {
        Step::Field(name) => out.extend(value.get(name)),
        Step::Index(index) => {
            if let Value::Array(items) = value {
                let at = if *index < 0 { items.len() as i64 + index } else { *index };
                out.extend(usize::try_from(at).ok().and_then(|at| items.get(at)));
            }
        }
        Step::Wildcard => match value {
            Value::Array(items) => out.extend(items),
            Value::Object(map) => out.extend(map.values()),
            _ => {}
        },
        Step::Descend(name) => descend(name, value, out),
        Step::Filter(filter) => {
            let candidates: Vec<&Value> = match value {
                Value::Array(items) => items.iter().collect(),
                Value::Object(map) => map.values().collect(),
                _ => Vec::new(),
            };
            out.extend(candidates.into_iter().filter(|candidate| filter.keeps(candidate)));
        }
    }
}

fn descend<'a>(name: &str, value: &'a Value, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            out.extend(map.get(name));
            map.values().for_each(|child| descend(name, child, out));
        }
        Value::Array(items) => items.iter().for_each(|child| descend(name, child, out)),
        _ => {}
    }
}

impl Filter {
    fn keeps(&self, candidate: &Value) -> bool {
        let found = select(candidate, &self.path);
        match &self.compare {
            None => found.iter().any(|v| !v.is_null() && *v != &Value::Bool(false)),
            Some((op, expected)) => found.iter().any(|actual| compare(actual, *op, expected)),
        }
    }
}

fn compare(actual: &Value, op: Op, expected: &Value) -> bool {
    let order = match (actual, expected) {
        (Value::Number(a), Value::Number(b)) => a.as_f64().zip(b.as_f64()).and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (a, b) if a == b => Some(std::cmp::Ordering::Equal),
        _ => None,
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    match op {
        Op::Eq => order == Some(Equal),
        Op::Ne => order != Some(Equal),
        Op::Lt => order == Some(Less),
        Op::Le => matches!(order, Some(Less | Equal)),
        Op::Gt => order == Some(Greater),
        Op::Ge => matches!(order, Some(Greater | Equal)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn render(template: &str, document: &Value) -> String {
        Template::parse(template).expect("parses").render(document)
    }

    fn list() -> Value {
        json!({"kind": "StatusList", "items": [
            {"kind": "Adapter", "name": "codex", "health": "Healthy", "generation": 2},
            {"kind": "Assignment", "name": "fix", "health": "Degraded", "generation": 5,
             "conditions": [{"type": "Ready", "status": "False"}]}
        ]})
    }

    #[test]
    fn paths_wildcards_and_indexes_select_as_kubectl_does() {
        let list = list();
        assert_eq!(render("{.kind}", &list), "StatusList");
        assert_eq!(render("{.items[*].name}", &list), "codex fix");
        assert_eq!(render("{.items[-1].name}", &list), "fix");
        assert_eq!(render("{$.items[0]['health']}", &list), "Healthy");
        assert_eq!(render("{..type}", &list), "Ready");
        assert_eq!(render("{.items[0].generation}", &list), "2");
        assert_eq!(render("{.missing}", &list), "");
    }

    #[test]
    fn ranges_literals_and_filters_make_lines() {
        let list = list();
        assert_eq!(render(r#"{range .items[*]}{.kind}/{.name}{"\n"}{end}"#, &list), "Adapter/codex\nAssignment/fix\n");
        assert_eq!(render(r#"{range .items}{.name},{end}"#, &list), "codex,fix,");
        assert_eq!(render(r#"{.items[?(@.health=="Degraded")].name}"#, &list), "fix");
        assert_eq!(render(r#"{.items[?(@.generation > 3)].name}"#, &list), "fix");
        assert_eq!(render(r#"{.items[?(@.conditions)].name}"#, &list), "fix");
        assert_eq!(render(r#"name: {.items[0].name} {'}'}"#, &list), "name: codex }");
    }

    #[test]
    fn broken_templates_are_refused_with_the_reason() {
        for (template, said) in [
            ("{.items", "unclosed '{'"),
            ("{range .items}{.name}", "without {end}"),
            ("{end}", "without {range}"),
            ("{.items[x]}", "unsupported [x]"),
            ("{.items[0}", "unclosed '['"),
        ] {
            let error = Template::parse(template).expect_err(template).to_string();
            assert!(error.contains(said), "{template}: {error}");
        }
    }
}
