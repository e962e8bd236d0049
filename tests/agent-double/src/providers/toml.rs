//! The part of TOML that Codex's `config.toml` needs here: one table (and its sub-tables, dotted
//! keys and inline tables) read into a JSON object, everything else in the document skipped.
//!
//! Values inside the wanted table are parsed strictly (basic and literal strings, integers,
//! floats, booleans, arrays, inline tables); a value elsewhere that this reader does not know
//! (a date, a multi-line string) is skipped to the end of its line, since Codex's own parser,
//! not this one, owns the rest of the file.

use serde_json::{Map, Number, Value};

/// Where and why the document could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for TomlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

type Parsed<T> = Result<T, TomlError>;

/// The table at `prefix` (e.g. `["mcp_servers", "roundtable"]`) as a JSON object; `None` when the
/// document never defines it.
pub fn read_table(text: &str, prefix: &[&str]) -> Parsed<Option<Map<String, Value>>> {
    let mut reader = Reader { chars: text.chars().collect(), pos: 0, line: 1 };
    let mut table: Option<Map<String, Value>> = None;
    let mut current: Vec<String> = Vec::new();
    loop {
        reader.skip_blank_lines();
        let Some(c) = reader.peek() else { break };
        if c == '[' {
            let start_line = reader.line;
            // A broken header is an error wherever it is: Codex refuses the whole file.
            let (path, array) = reader.header()?;
            if starts_with(&path, prefix) {
                if array {
                    return Err(TomlError {
                        line: start_line,
                        message: "an array of tables is not supported in this table".into(),
                    });
                }
                let root = table.get_or_insert_with(Map::new);
                ensure_table(root, &path[prefix.len()..], start_line)?;
            }
            current = path;
            continue;
        }
        let line = reader.line;
        let key = match reader.key_path() {
            Ok(key) => key,
            Err(error) if relevant_section(&current, prefix) => return Err(error),
            Err(_) => {
                reader.skip_line();
                continue;
            }
        };
        let mut full = current.clone();
        full.extend(key);
        let wanted = starts_with(&full, prefix) || starts_with_str(prefix, &full);
        let value = reader.expect('=').and_then(|()| reader.value()).and_then(|value| {
            reader.end_of_line()?;
            Ok(value)
        });
        let value = match value {
            Ok(value) => value,
            Err(error) if wanted => return Err(error),
            Err(_) => {
                reader.skip_line();
                continue;
            }
        };
        if starts_with(&full, prefix) {
            let root = table.get_or_insert_with(Map::new);
            match (&full[prefix.len()..], value) {
                // `[mcp_servers]` then `roundtable = { … }`: the table itself, inline.
                ([], Value::Object(entries)) => {
                    for (key, entry) in entries {
                        insert(root, std::slice::from_ref(&key), entry, line)?;
                    }
                }
                (rest, value) => insert(root, rest, value, line)?,
            }
        } else if wanted {
            // `mcp_servers = { roundtable = { … } }`: descend into the value.
            let mut inner = Some(&value);
            for part in &prefix[full.len()..] {
                inner = inner.and_then(|v| v.get(*part));
            }
            if let Some(Value::Object(entries)) = inner {
                let root = table.get_or_insert_with(Map::new);
                for (key, entry) in entries {
                    insert(root, std::slice::from_ref(key), entry.clone(), line)?;
                }
            }
        }
    }
    Ok(table)
}

fn starts_with(path: &[String], prefix: &[&str]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

fn starts_with_str(prefix: &[&str], path: &[String]) -> bool {
    path.len() < prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

/// Keys in this section can reach the wanted table (it, a sub-table, or one of its parents).
fn relevant_section(current: &[String], prefix: &[&str]) -> bool {
    starts_with(current, prefix) || starts_with_str(prefix, current)
}

fn ensure_table<'a>(
    root: &'a mut Map<String, Value>,
    path: &[String],
    line: usize,
) -> Parsed<&'a mut Map<String, Value>> {
    let mut table = root;
    for part in path {
        let entry = table.entry(part.clone()).or_insert_with(|| Value::Object(Map::new()));
        table = match entry {
            Value::Object(inner) => inner,
            _ => return Err(TomlError { line, message: format!("`{part}` is a value, not a table") }),
        };
    }
    Ok(table)
}

fn insert(root: &mut Map<String, Value>, path: &[String], value: Value, line: usize) -> Parsed<()> {
    let Some((last, parents)) = path.split_last() else {
        return Err(TomlError { line, message: "the table itself cannot be assigned a value".into() });
    };
    let table = ensure_table(root, parents, line)?;
    if table.contains_key(last) {
        return Err(TomlError { line, message: format!("duplicate key `{last}`") });
    }
    table.insert(last.clone(), value);
    Ok(())
}

// === the reader ===

struct Reader {
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn error<T>(&self, message: impl Into<String>) -> Parsed<T> {
        Err(TomlError { line: self.line, message: message.into() })
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    fn skip_comment(&mut self) {
        if self.peek() == Some('#') {
            while !matches!(self.peek(), None | Some('\n')) {
                self.bump();
            }
        }
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.bump() {
            if c == '\n' {
                break;
            }
        }
    }

    /// Whitespace, newlines and comments between statements (or inside an array).
    fn skip_blank_lines(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\r' | '\n') => {
                    self.bump();
                }
                Some('#') => self.skip_comment(),
                _ => break,
            }
        }
    }

    fn expect(&mut self, wanted: char) -> Parsed<()> {
        self.skip_spaces();
        match self.peek() {
            Some(c) if c == wanted => {
                self.bump();
                Ok(())
            }
            Some(c) => self.error(format!("expected `{wanted}`, found `{c}`")),
            None => self.error(format!("expected `{wanted}`, found the end of the file")),
        }
    }

    fn end_of_line(&mut self) -> Parsed<()> {
        self.skip_spaces();
        self.skip_comment();
        match self.peek() {
            None => Ok(()),
            Some('\n') => {
                self.bump();
                Ok(())
            }
            Some('\r') if self.peek_at(1) == Some('\n') => {
                self.bump();
                self.bump();
                Ok(())
            }
            Some(c) => self.error(format!("expected the end of the line, found `{c}`")),
        }
    }

    /// `[a.b]` or `[[a.b]]`; returns the path and whether it is an array of tables.
    fn header(&mut self) -> Parsed<(Vec<String>, bool)> {
        self.bump();
        let array = self.peek() == Some('[');
        if array {
            self.bump();
        }
        let path = self.key_path()?;
        self.expect(']')?;
        if array {
            if self.peek() != Some(']') {
                return self.error("expected `]]`");
            }
            self.bump();
        }
        self.end_of_line()?;
        Ok((path, array))
    }

    /// `a`, `"a b"`, `'a'`, `a.b.c` with optional spaces around the dots.
    fn key_path(&mut self) -> Parsed<Vec<String>> {
        let mut path = Vec::new();
        loop {
            self.skip_spaces();
            let part = match self.peek() {
                Some('"') => self.basic_string()?,
                Some('\'') => self.literal_string()?,
                Some(c) if is_bare(c) => {
                    let mut part = String::new();
                    while let Some(c) = self.peek().filter(|c| is_bare(*c)) {
                        part.push(c);
                        self.bump();
                    }
                    part
                }
                Some(c) => return self.error(format!("expected a key, found `{c}`")),
                None => return self.error("expected a key, found the end of the file"),
            };
            path.push(part);
            self.skip_spaces();
            if self.peek() == Some('.') {
                self.bump();
            } else {
                return Ok(path);
            }
        }
    }

    fn value(&mut self) -> Parsed<Value> {
        self.skip_spaces();
        match self.peek() {
            Some('"') if self.peek_at(1) == Some('"') && self.peek_at(2) == Some('"') => {
                self.error("multi-line strings are not supported here")
            }
            Some('\'') if self.peek_at(1) == Some('\'') && self.peek_at(2) == Some('\'') => {
                self.error("multi-line strings are not supported here")
            }
            Some('"') => self.basic_string().map(Value::String),
            Some('\'') => self.literal_string().map(Value::String),
            Some('[') => self.array(),
            Some('{') => self.inline_table(),
            Some(c) if c.is_ascii_alphanumeric() || matches!(c, '+' | '-') => self.scalar(),
            Some(c) => self.error(format!("expected a value, found `{c}`")),
            None => self.error("expected a value, found the end of the file"),
        }
    }

    fn basic_string(&mut self) -> Parsed<String> {
        self.bump();
        let mut text = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return self.error("unterminated string"),
                Some('"') => return Ok(text),
                Some('\\') => text.push(self.escape()?),
                Some(c) if c.is_control() && c != '\t' => {
                    return self.error(format!("control character U+{:04X} in a string", u32::from(c)));
                }
                Some(c) => text.push(c),
            }
        }
    }

    fn escape(&mut self) -> Parsed<char> {
        let c = match self.bump() {
            Some('b') => '\u{8}',
            Some('t') => '\t',
            Some('n') => '\n',
            Some('f') => '\u{c}',
            Some('r') => '\r',
            Some('e') => '\u{1b}',
            Some('"') => '"',
            Some('\\') => '\\',
            Some('x') => return self.hex_escape(2),
            Some('u') => return self.hex_escape(4),
            Some('U') => return self.hex_escape(8),
            Some(other) => return self.error(format!("invalid escape `\\{other}`")),
            None => return self.error("unterminated string"),
        };
        Ok(c)
    }

    fn hex_escape(&mut self, digits: usize) -> Parsed<char> {
        let mut code = 0u32;
        for _ in 0..digits {
            let Some(digit) = self.bump().and_then(|c| c.to_digit(16)) else {
                return self.error(format!("expected {digits} hexadecimal digits in an escape"));
            };
            code = code * 16 + digit;
        }
        match char::from_u32(code) {
            Some(c) => Ok(c),
            None => self.error(format!("U+{code:X} is not a Unicode scalar value")),
        }
    }

    fn literal_string(&mut self) -> Parsed<String> {
        self.bump();
        let mut text = String::new();
        loop {
            match self.bump() {
                None | Some('\n') => return self.error("unterminated string"),
                Some('\'') => return Ok(text),
                Some(c) => text.push(c),
            }
        }
    }

    fn array(&mut self) -> Parsed<Value> {
        self.bump();
        let mut items = Vec::new();
        loop {
            self.skip_blank_lines();
            if self.peek() == Some(']') {
                self.bump();
                return Ok(Value::Array(items));
            }
            items.push(self.value()?);
            self.skip_blank_lines();
            match self.bump() {
                Some(',') => {}
                Some(']') => return Ok(Value::Array(items)),
                Some(c) => return self.error(format!("expected `,` or `]` in an array, found `{c}`")),
                None => return self.error("unterminated array"),
            }
        }
    }

    fn inline_table(&mut self) -> Parsed<Value> {
        self.bump();
        let mut table = Map::new();
        self.skip_spaces();
        if self.peek() == Some('}') {
            self.bump();
            return Ok(Value::Object(table));
        }
        loop {
            let line = self.line;
            let key = self.key_path()?;
            self.expect('=')?;
            let value = self.value()?;
            insert(&mut table, &key, value, line)?;
            self.skip_spaces();
            match self.bump() {
                Some(',') => {}
                Some('}') => return Ok(Value::Object(table)),
                Some(c) => return self.error(format!("expected `,` or `}}` in an inline table, found `{c}`")),
                None => return self.error("unterminated inline table"),
            }
        }
    }

    /// Booleans and numbers; dates and special floats are refused.
    fn scalar(&mut self) -> Parsed<Value> {
        let mut token = String::new();
        while let Some(c) =
            self.peek().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '.' | ':'))
        {
            token.push(c);
            self.bump();
        }
        match token.as_str() {
            "true" => return Ok(Value::Bool(true)),
            "false" => return Ok(Value::Bool(false)),
            _ => {}
        }
        if token.contains(':') || token.contains("inf") || token.contains("nan") {
            return self.error(format!("`{token}` is not supported here (dates and special floats)"));
        }
        if token.starts_with('_') || token.ends_with('_') || token.contains("__") {
            return self.error(format!("`{token}` is not a number"));
        }
        let digits = token.replace('_', "");
        let (sign, unsigned) = match digits.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, digits.strip_prefix('+').unwrap_or(&digits)),
        };
        let radix = [("0x", 16), ("0o", 8), ("0b", 2)].into_iter().find(|(p, _)| unsigned.starts_with(p));
        if let Some((prefix, radix)) = radix {
            return match i64::from_str_radix(&unsigned[prefix.len()..], radix) {
                Ok(n) if sign > 0 => Ok(Value::Number(n.into())),
                _ => self.error(format!("`{token}` is not a number")),
            };
        }
        if unsigned.len() > 1 && unsigned.starts_with('0') && !unsigned.starts_with("0.") {
            return self.error(format!("`{token}` has a leading zero"));
        }
        if let Ok(n) = digits.trim_start_matches('+').parse::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        match digits.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) if unsigned.chars().next().is_some_and(|c| c.is_ascii_digit()) => Ok(Value::Number(n)),
            _ => self.error(format!("`{token}` is not a value")),
        }
    }
}

fn is_bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PREFIX: [&str; 2] = ["mcp_servers", "roundtable"];

    fn table(text: &str) -> Parsed<Option<Value>> {
        read_table(text, &PREFIX).map(|t| t.map(Value::Object))
    }

    #[test]
    fn reads_the_manifest_roundtable_writes() {
        let text = "# Written by Roundtable for this session; read-only.\n\
                    [mcp_servers.roundtable]\n\
                    command = \"/roundtable/bin/roundtable\"\n\
                    args = [\"mcp\", \"stdio\", \"--unix-socket\", \"/run/roundtable/mcp.sock\"]\n\
                    env_vars = [\"ROUNDTABLE_AGENT_CAPABILITY\"]\n\
                    startup_timeout_sec = 20\n\
                    tool_timeout_sec = 600\n\
                    required = true\n\
                    default_tools_approval_mode = \"approve\"\n";
        assert_eq!(
            table(text),
            Ok(Some(json!({
                "command": "/roundtable/bin/roundtable",
                "args": ["mcp", "stdio", "--unix-socket", "/run/roundtable/mcp.sock"],
                "env_vars": ["ROUNDTABLE_AGENT_CAPABILITY"],
                "startup_timeout_sec": 20,
                "tool_timeout_sec": 600,
                "required": true,
                "default_tools_approval_mode": "approve"
            })))
        );
    }

    #[test]
    fn every_way_of_spelling_the_table_reaches_it() {
        let cases: &[(&str, Value)] = &[
            ("[mcp_servers.roundtable]\ncommand = 'x'\n", json!({"command": "x"})),
            ("[mcp_servers.\"roundtable\"]\ncommand = \"x\"", json!({"command": "x"})),
            ("[ mcp_servers . roundtable ]\ncommand=\"x\"\n", json!({"command": "x"})),
            ("[mcp_servers]\nroundtable.command = \"x\"\n", json!({"command": "x"})),
            ("mcp_servers.roundtable.command = \"x\"\n", json!({"command": "x"})),
            (
                "[mcp_servers]\nroundtable = { command = \"x\", env = { A = \"1\" } }\n",
                json!({"command": "x", "env": {"A": "1"}}),
            ),
            (
                "[mcp_servers.roundtable]\ncommand = \"x\"\n[mcp_servers.roundtable.env]\nA = \"1\"\n",
                json!({"command": "x", "env": {"A": "1"}}),
            ),
            ("[mcp_servers.roundtable]\nargs = [\n  \"a\", # first\n  \"b\",\n]\n", json!({"args": ["a", "b"]})),
            (
                "[mcp_servers.roundtable.tools.\"task.get\"]\napproval_mode = \"approve\"\n",
                json!({"tools": {"task.get": {"approval_mode": "approve"}}}),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(table(text), Ok(Some(want.clone())), "{text}");
        }
    }

    #[test]
    fn values_are_read_strictly_inside_the_table() {
        let ok: &[(&str, Value)] = &[
            ("\"a\\tb\\u00e9\\U0001F600\\\"\"", json!("a\tb\u{e9}\u{1F600}\"")),
            ("'C:\\path'", json!("C:\\path")),
            ("1_000", json!(1000)),
            ("-5", json!(-5)),
            ("+5", json!(5)),
            ("0x1F", json!(31)),
            ("2.5", json!(2.5)),
            ("1e3", json!(1000.0)),
            ("false", json!(false)),
            ("[]", json!([])),
            ("[1, \"a\", [true]]", json!([1, "a", [true]])),
            ("{}", json!({})),
        ];
        for (value, want) in ok {
            let text = format!("[mcp_servers.roundtable]\nv = {value}\n");
            assert_eq!(table(&text), Ok(Some(json!({"v": want}))), "{value}");
        }
        let bad = [
            "\"unterminated",
            "\"bad \\q escape\"",
            "1979-05-27T07:32:00Z",
            "inf",
            "01",
            "1__0",
            "\"\"\"multi\"\"\"",
            "[1, 2",
            "{ a = 1, a = 2 }",
            "yes",
            "\"a\" \"b\"",
        ];
        for value in bad {
            let text = format!("[mcp_servers.roundtable]\nv = {value}\n");
            assert!(table(&text).is_err(), "{value} should be refused");
        }
        assert_eq!(
            table("[mcp_servers.roundtable]\nv = 1\nv = 2\n"),
            Err(TomlError { line: 3, message: "duplicate key `v`".into() })
        );
    }

    #[test]
    fn other_tables_may_hold_what_this_reader_does_not_know() {
        let text = "model = \"o3\"\n\
                    created = 1979-05-27T07:32:00Z\n\
                    notes = \"\"\"\n\
                    [[profiles]]\n\
                    name = 'x'\n\
                    [mcp_servers.other]\n\
                    command = \"other\"\n\
                    [mcp_servers.roundtable]\n\
                    command = \"rt\"\n\
                    [profiles.fast]\n\
                    command = \"not ours\"\n";
        assert_eq!(table(text), Ok(Some(json!({"command": "rt"}))));
        assert_eq!(table("[mcp_servers.other]\ncommand = \"x\"\n"), Ok(None));
        assert_eq!(table(""), Ok(None));
        assert_eq!(table("[mcp_servers.roundtable]\n"), Ok(Some(json!({}))));
    }
}
