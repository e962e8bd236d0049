//! The command-line reader the personalities share: long and short flags with `=value` or a
//! following value, positionals, `-` (stdin) and `--`. Each personality declares its own flags,
//! so anything it does not know is an error rather than silently ignored.

/// Whether a flag takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Nothing,
    Value,
    /// A value when one follows that is not itself a flag (Gemini's bare `--resume`).
    OptionalValue,
}

/// One flag and its aliases; the first name is the one the personality matches on.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    pub names: &'static [&'static str],
    pub takes: Takes,
}

impl Flag {
    pub const fn switch(names: &'static [&'static str]) -> Self {
        Self { names, takes: Takes::Nothing }
    }

    pub const fn value(names: &'static [&'static str]) -> Self {
        Self { names, takes: Takes::Value }
    }

    pub const fn optional(names: &'static [&'static str]) -> Self {
        Self { names, takes: Takes::OptionalValue }
    }

    fn canonical(&self) -> &'static str {
        self.names.first().copied().unwrap_or_default()
    }
}

/// One argument, in command-line order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Flag { name: &'static str, value: Option<String> },
    Positional(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// A flag none of the declared ones names (as written, without any `=value`).
    Unknown(String),
    MissingValue(&'static str),
    UnexpectedValue(&'static str),
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(flag) => write!(f, "unknown option '{flag}'"),
            Self::MissingValue(flag) => write!(f, "option '{flag}' needs a value"),
            Self::UnexpectedValue(flag) => write!(f, "option '{flag}' takes no value"),
        }
    }
}

/// Reads `args` against `flags`.
pub fn read(args: &[String], flags: &[Flag]) -> Result<Vec<Arg>, ArgError> {
    let mut out = Vec::new();
    let mut index = 0;
    let mut only_positionals = false;
    while let Some(arg) = args.get(index) {
        index += 1;
        if only_positionals || arg == "-" || !arg.starts_with('-') {
            out.push(Arg::Positional(arg.clone()));
            continue;
        }
        if arg == "--" {
            only_positionals = true;
            continue;
        }
        let (written, inline) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        let Some(flag) = flags.iter().find(|flag| flag.names.contains(&written)) else {
            return Err(ArgError::Unknown(written.to_owned()));
        };
        let name = flag.canonical();
        let value = match (flag.takes, inline) {
            (Takes::Nothing, Some(_)) => return Err(ArgError::UnexpectedValue(name)),
            (Takes::Nothing, None) => None,
            (_, Some(value)) => Some(value),
            (Takes::Value, None) => {
                // Like commander and clap, a required value is taken even if it starts with `-`.
                let value = args.get(index).cloned().ok_or(ArgError::MissingValue(name))?;
                index += 1;
                Some(value)
            }
            (Takes::OptionalValue, None) => match args.get(index) {
                Some(next) if !next.starts_with('-') => {
                    index += 1;
                    Some(next.clone())
                }
                _ => None,
            },
        };
        out.push(Arg::Flag { name, value });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[Flag] = &[
        Flag::switch(&["--json", "--experimental-json"]),
        Flag::value(&["--model", "-m"]),
        Flag::optional(&["--resume", "-r"]),
    ];

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    fn flag(name: &'static str, value: Option<&str>) -> Arg {
        Arg::Flag { name, value: value.map(str::to_owned) }
    }

    #[test]
    fn reads_each_form_of_flag_and_positional() {
        let cases: &[(&str, Result<Vec<Arg>, ArgError>)] = &[
            ("--json", Ok(vec![flag("--json", None)])),
            ("--experimental-json", Ok(vec![flag("--json", None)])),
            ("--model=o3", Ok(vec![flag("--model", Some("o3"))])),
            ("-m o3", Ok(vec![flag("--model", Some("o3"))])),
            ("--model -x", Ok(vec![flag("--model", Some("-x"))])),
            ("--model", Err(ArgError::MissingValue("--model"))),
            ("--json=yes", Err(ArgError::UnexpectedValue("--json"))),
            ("--jsn", Err(ArgError::Unknown("--jsn".into()))),
            ("--nope=1", Err(ArgError::Unknown("--nope".into()))),
            ("--resume", Ok(vec![flag("--resume", None)])),
            ("--resume --json", Ok(vec![flag("--resume", None), flag("--json", None)])),
            ("--resume abc", Ok(vec![flag("--resume", Some("abc"))])),
            ("- --json", Ok(vec![Arg::Positional("-".into()), flag("--json", None)])),
            ("-- --json x", Ok(vec![Arg::Positional("--json".into()), Arg::Positional("x".into())])),
            ("exec x", Ok(vec![Arg::Positional("exec".into()), Arg::Positional("x".into())])),
        ];
        for (line, want) in cases {
            assert_eq!(&read(&words(line), FLAGS), want, "{line}");
        }
    }
}
