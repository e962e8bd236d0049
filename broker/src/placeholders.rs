//! A session's placeholders (docs/broker.md): for each `credentialEnv` variable the daemon holds
//! a value of, the string the agent gets instead, minted per session from the OS random source.
//! The broker swaps each back for its value on the host; the scanners look for them in
//! everything the agent leaves behind.

/// One session's placeholders: for each `credentialEnv` variable the daemon holds a value of,
/// the string the agent gets instead.
#[derive(Clone, Default)]
pub struct Placeholders {
    by_name: Vec<(String, String)>,
}

// Never the values: the set is carried by tasks whose state may be logged.
impl std::fmt::Debug for Placeholders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.iter().map(|(name, _)| name)).finish()
    }
}

impl Placeholders {
    /// 32 random bytes per name.
    pub fn mint<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, getrandom::Error> {
        let mut by_name = Vec::new();
        for name in names {
            let mut random = [0u8; 32];
            getrandom::fill(&mut random)?;
            by_name.push((name.to_owned(), roundtable_specs::broker::placeholder_from(&random)));
        }
        Ok(Self { by_name })
    }

    /// `(variable, placeholder)` pairs, in the order minted.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_name.iter().map(|(name, placeholder)| (name.as_str(), placeholder.as_str()))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.by_name.iter().find(|(n, _)| n == name).map(|(_, placeholder)| placeholder.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_distinct_per_name_and_shaped_for_the_scanners() {
        let minted = Placeholders::mint(["A_KEY", "B_KEY"]).expect("random");
        let (a, b) = (minted.get("A_KEY").expect("a"), minted.get("B_KEY").expect("b"));
        assert_ne!(a, b);
        for placeholder in [a, b] {
            assert!(placeholder.starts_with(roundtable_specs::broker::PLACEHOLDER_PREFIX));
            assert_eq!(placeholder.len(), roundtable_specs::broker::PLACEHOLDER_PREFIX.len() + 64);
        }
        assert_ne!(Placeholders::mint(["A_KEY"]).expect("random").get("A_KEY"), Some(a), "per session");
        assert_eq!(format!("{minted:?}"), r#"["A_KEY", "B_KEY"]"#, "Debug names, never values");
    }
}
