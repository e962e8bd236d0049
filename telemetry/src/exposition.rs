//! The Prometheus text exposition format 0.0.4: which names are valid, how label values and help
//! text are escaped, how a sample line and a number are written.

use std::fmt::{self, Display, Write};

/// Why a metric or label name cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("metric name {0:?} does not match [a-zA-Z_:][a-zA-Z0-9_:]*")]
    Metric(String),
    #[error("label name {0:?} does not match [a-zA-Z_][a-zA-Z0-9_]*")]
    Label(String),
    #[error("label name {0:?} starts with `__`, which Prometheus reserves")]
    ReservedLabel(String),
    #[error("label name `le` is the histogram's bucket bound")]
    HistogramLe,
    #[error("label name {0:?} is given twice")]
    DuplicateLabel(String),
}

/// Checks a metric name against `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn check_metric_name(name: &str) -> Result<(), NameError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(NameError::Metric(name.to_owned()))
    }
}

/// Checks a label name against `[a-zA-Z_][a-zA-Z0-9_]*`, without the reserved `__` prefix.
pub fn check_label_name(name: &str) -> Result<(), NameError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !(first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')) {
        return Err(NameError::Label(name.to_owned()));
    }
    if name.starts_with("__") {
        return Err(NameError::ReservedLabel(name.to_owned()));
    }
    Ok(())
}

/// Checks a family's name and label names; a histogram may not use `le` itself.
pub(crate) fn check_family(name: &str, label_names: &[String], histogram: bool) -> Result<(), NameError> {
    check_metric_name(name)?;
    for (index, label) in label_names.iter().enumerate() {
        check_label_name(label)?;
        if histogram && label == "le" {
            return Err(NameError::HistogramLe);
        }
        if label_names[..index].contains(label) {
            return Err(NameError::DuplicateLabel(label.clone()));
        }
    }
    Ok(())
}

/// `# HELP` and `# TYPE` lines (no `# HELP` for an empty help text).
pub(crate) fn write_header(out: &mut String, name: &str, help: &str, kind: &str) {
    if !help.is_empty() {
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        for c in help.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('\n');
    }
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// `name{labels} value`, or `name value` without labels.
pub(crate) fn write_sample(out: &mut String, name: &str, labels: &str, value: impl Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        out.push_str(labels);
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label pairs joined for a sample line: `a="x",b="y"`, each value escaped.
pub(crate) fn label_pairs(names: &[String], values: &[String]) -> String {
    let mut out = String::new();
    for (index, (name, value)) in names.iter().zip(values).enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out
}

/// A float as the format writes it: `+Inf`, `-Inf`, `NaN`, otherwise the shortest decimal that
/// reads back as the same value (`1`, `0.005`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloatText(pub f64);

impl Display for FloatText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            value if value.is_nan() => f.write_str("NaN"),
            f64::INFINITY => f.write_str("+Inf"),
            f64::NEG_INFINITY => f.write_str("-Inf"),
            value => write!(f, "{value}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_prometheus_grammar() {
        for good in ["a", "_a", "a:b_c9", "roundtable_gateway_decisions_total"] {
            assert_eq!(check_metric_name(good), Ok(()), "{good}");
        }
        for bad in ["", "9a", "a-b", "a b", "é"] {
            assert!(check_metric_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(check_label_name("reason"), Ok(()));
        assert!(matches!(check_label_name("a:b"), Err(NameError::Label(_))));
        assert!(matches!(check_label_name("__name__"), Err(NameError::ReservedLabel(_))));
        let labels = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_family("h", &labels(&["le"]), true), Err(NameError::HistogramLe));
        assert_eq!(check_family("g", &labels(&["le"]), false), Ok(()));
        assert_eq!(check_family("g", &labels(&["a", "a"]), false), Err(NameError::DuplicateLabel("a".into())));
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let pairs = label_pairs(&["a".into(), "b".into()], &["x\\y\"z\nw".into(), "plain".into()]);
        assert_eq!(pairs, r#"a="x\\y\"z\nw",b="plain""#);
        let mut out = String::new();
        write_header(&mut out, "m", "back\\slash \"quoted\"\nnext", "gauge");
        assert_eq!(out, "# HELP m back\\\\slash \"quoted\"\\nnext\n# TYPE m gauge\n");
    }

    #[test]
    fn floats_are_written_as_prometheus_reads_them() {
        let texts: Vec<String> =
            [1.0, 0.005, 2.5e-7, f64::INFINITY, f64::NEG_INFINITY, f64::NAN].map(|v| FloatText(v).to_string()).into();
        assert_eq!(texts, ["1", "0.005", "0.00000025", "+Inf", "-Inf", "NaN"]);
    }
}
