//! Durations (`30s`, `20m`, `24h`) and Kubernetes-style quantities (`512Mi`, `2Gi`) as typed values,
//! and a count in words (`1 file`, `3 files`).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A span of time written as one or more `<integer><unit>` pairs, units `ms`, `s`, `m`, `h`, `d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(std::time::Duration);

/// Why a duration or quantity did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(String);

impl Duration {
    pub const fn from_secs(secs: u64) -> Self {
        Self(std::time::Duration::from_secs(secs))
    }

    pub const fn as_std(self) -> std::time::Duration {
        self.0
    }
}

impl FromStr for Duration {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || UnitError(format!("invalid duration {text:?}: expected forms like 30s, 20m, 24h or 1h30m"));
        if text.is_empty() {
            return Err(invalid());
        }
        let mut total: u128 = 0;
        let mut rest = text;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 12 {
                return Err(invalid());
            }
            let (number, after) = rest.split_at(digits);
            let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
            let (unit, after) = after.split_at(unit_len);
            let millis_per_unit: u128 = match unit {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(invalid()),
            };
            let number: u128 = number.parse().map_err(|_| invalid())?;
            total += number * millis_per_unit;
            rest = after;
        }
        let millis = u64::try_from(total).map_err(|_| invalid())?;
        Ok(Self(std::time::Duration::from_millis(millis)))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut millis = self.0.as_millis();
        if millis == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)] {
            if millis >= size {
                write!(f, "{}{unit}", millis / size)?;
                millis %= size;
            }
        }
        Ok(())
    }
}

/// A byte count written as a Kubernetes quantity: a plain integer, or a number with one of the
/// suffixes `Ki Mi Gi Ti` (powers of 1024) or `k M G T` (powers of 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity(u64);

impl Quantity {
    pub const fn from_bytes(bytes: u64) -> Self {
        Self(bytes)
    }

    pub const fn mebibytes(count: u64) -> Self {
        Self(count << 20)
    }

    pub const fn gibibytes(count: u64) -> Self {
        Self(count << 30)
    }

    pub const fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for Quantity {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            UnitError(format!(
                "invalid quantity {text:?}: expected bytes or a number with Ki, Mi, Gi, Ti, k, M, G or T (like 512Mi)"
            ))
        };
        let number_len = text.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        let (number, suffix) = text.split_at(number_len);
        let multiplier: u64 = match suffix {
            "" => 1,
            "Ki" => 1 << 10,
            "Mi" => 1 << 20,
            "Gi" => 1 << 30,
            "Ti" => 1 << 40,
            "k" => 1_000,
            "M" => 1_000_000,
            "G" => 1_000_000_000,
            "T" => 1_000_000_000_000,
            _ => return Err(invalid()),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() || whole.len() > 15 || fraction.len() > 6 || fraction.contains('.') {
            return Err(invalid());
        }
        let whole: u128 = whole.parse().map_err(|_| invalid())?;
        let scale = 10u128.pow(fraction.len() as u32);
        let fraction: u128 = if fraction.is_empty() { 0 } else { fraction.parse().map_err(|_| invalid())? };
        let scaled = (whole * scale + fraction) * u128::from(multiplier);
        if !scaled.is_multiple_of(scale) {
            return Err(UnitError(format!("invalid quantity {text:?}: not a whole number of bytes")));
        }
        let bytes = u64::try_from(scaled / scale).map_err(|_| invalid())?;
        Ok(Self(bytes))
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
            let size = 1u64 << shift;
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{suffix}", self.0 / size);
            }
        }
        write!(f, "{}", self.0)
    }
}

/// A CPU allowance in thousandths of a CPU, written as a number (`2`, `0.5`) or millicores (`500m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cpus(u32);

impl Cpus {
    pub const fn whole(count: u32) -> Self {
        Self(count * 1000)
    }

    pub const fn from_millis(millis: u32) -> Self {
        Self(millis)
    }

    pub const fn millis(self) -> u32 {
        self.0
    }

    /// The value for Docker's `NanoCpus`.
    pub const fn nanos(self) -> u64 {
        self.0 as u64 * 1_000_000
    }
}

impl FromStr for Cpus {
    type Err = UnitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            UnitError(format!("invalid CPU count {text:?}: expected a number like 2 or 0.5, or millicores like 500m"))
        };
        if let Some(millis) = text.strip_suffix('m') {
            if millis.is_empty() || millis.len() > 7 || !millis.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            return millis.parse().map(Self).map_err(|_| invalid());
        }
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty() || whole.len() > 4 || fraction.len() > 3 || !digits_only(whole) || !digits_only(fraction) {
            return Err(invalid());
        }
        let whole: u32 = whole.parse().map_err(|_| invalid())?;
        let padded = format!("{fraction:0<3}");
        let fraction: u32 = padded.parse().map_err(|_| invalid())?;
        Ok(Self(whole * 1000 + fraction))
    }
}

impl fmt::Display for Cpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) { write!(f, "{}", self.0 / 1000) } else { write!(f, "{}m", self.0) }
    }
}

// === serde and schema plumbing shared by the three unit types ===

/// Reads a unit as the exact text written. A YAML scalar is asked for as a string, so a plain
/// `2` or `0.5` arrives as written (never through a float that could round it, or an integer
/// form like `0x10` or `1e3` YAML would reinterpret); formats that hand numbers anyway (JSON)
/// give integers and floats, accepted only where `numbers` allows them.
struct UnitVisitor<T> {
    numbers: bool,
    expecting: &'static str,
    marker: std::marker::PhantomData<T>,
}

impl<T> UnitVisitor<T>
where
    T: FromStr<Err = UnitError>,
{
    fn parse<E: serde::de::Error>(text: &str) -> Result<T, E> {
        text.parse().map_err(E::custom)
    }

    fn number<E: serde::de::Error>(&self, number: String) -> Result<T, E> {
        if self.numbers {
            Self::parse(&number)
        } else {
            Err(E::custom(format!("expected a string like 30s, not the number {number}")))
        }
    }
}

impl<T> serde::de::Visitor<'_> for UnitVisitor<T>
where
    T: FromStr<Err = UnitError>,
{
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.expecting)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        Self::parse(text)
    }

    fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<T, E> {
        self.number(number.to_string())
    }

    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<T, E> {
        self.number(number.to_string())
    }

    fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<T, E> {
        self.number(number.to_string())
    }
}

macro_rules! unit_serde {
    ($type:ident, $name:literal, $schema:tt, numbers: $numbers:literal, expecting: $expecting:literal) => {
        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let visitor =
                    UnitVisitor { numbers: $numbers, expecting: $expecting, marker: std::marker::PhantomData };
                deserializer.deserialize_str(visitor)
            }
        }

        impl JsonSchema for $type {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

unit_serde!(Duration, "Duration", {
    "type": "string",
    "pattern": "^([0-9]+(ms|s|m|h|d))+$",
    "description": "A duration such as 30s, 20m, 24h or 1h30m."
}, numbers: false, expecting: "a duration like 30s");

unit_serde!(Quantity, "Quantity", {
    "type": ["string", "integer"],
    "pattern": "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$",
    "minimum": 0,
    "description": "A byte count as a Kubernetes quantity such as 512Mi or 2Gi."
}, numbers: true, expecting: "a quantity like 512Mi");

unit_serde!(Cpus, "Cpus", {
    "type": ["string", "number"],
    "pattern": "^([0-9]+(\\.[0-9]{1,3})?|[0-9]+m)$",
    "minimum": 0,
    "description": "A CPU allowance such as 2, 0.5 or 500m."
}, numbers: true, expecting: "a CPU count like 2 or 500m");

/// `n` with the noun that agrees with it: `1 file`, `3 files`, `0 files`.
pub fn count(n: impl fmt::Display, one: &str, many: &str) -> String {
    let n = n.to_string();
    let noun = if n == "1" { one } else { many };
    format!("{n} {noun}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print_canonically() {
        for (text, secs, canonical) in [
            ("30s", 30, "30s"),
            ("20m", 1200, "20m"),
            ("24h", 86_400, "1d"),
            ("1h30m", 5400, "1h30m"),
            ("90s", 90, "1m30s"),
        ] {
            let parsed: Duration = text.parse().expect(text);
            assert_eq!(parsed.as_std().as_secs(), secs, "{text}");
            assert_eq!(parsed.to_string(), canonical, "{text}");
        }
    }

    #[test]
    fn durations_reject_what_they_do_not_understand() {
        for text in ["", "30", "s", "1.5h", "-5s", "5 s", "5sec", "1w", "99999999999999999h"] {
            assert!(text.parse::<Duration>().is_err(), "{text:?} should not parse");
        }
    }

    #[test]
    fn quantities_follow_kubernetes_suffixes() {
        for (text, bytes) in [
            ("512Mi", 512 << 20),
            ("2Gi", 2 << 30),
            ("1.5Gi", 3 << 29),
            ("1k", 1000),
            ("4096", 4096),
            ("1M", 1_000_000),
        ] {
            assert_eq!(text.parse::<Quantity>().expect(text).bytes(), bytes, "{text}");
        }
        assert_eq!(Quantity::gibibytes(2).to_string(), "2Gi");
        assert_eq!(Quantity::from_bytes(1500).to_string(), "1500");
    }

    #[test]
    fn quantities_reject_nonsense() {
        for text in ["", "Mi", "2GB", "1.2.3Gi", "-1Gi", "0.5", "1e9", "2 Gi"] {
            assert!(text.parse::<Quantity>().is_err(), "{text:?} should not parse");
        }
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Units {
        #[serde(default)]
        cpus: Option<Cpus>,
        #[serde(default)]
        memory: Option<Quantity>,
        #[serde(default)]
        timeout: Option<Duration>,
    }

    fn read(text: &str) -> Result<Units, String> {
        crate::yaml::split_documents(text)[0].deserialize::<Units>().map_err(|problem| problem.message)
    }

    #[test]
    fn units_are_read_exactly_as_written() {
        // Plain YAML numbers arrive as written: never rounded through a float, never reinterpreted
        // as YAML integers (hex, octal, exponents, underscores).
        let units = read("cpus: 0.5\nmemory: 512Mi\ntimeout: 90s\n").expect("valid");
        assert_eq!(units.cpus.map(Cpus::millis), Some(500));
        assert_eq!(units.memory.map(Quantity::bytes), Some(512 << 20));
        assert_eq!(units.timeout.map(|t| t.as_std().as_secs()), Some(90));
        assert_eq!(read("memory: 4096\ncpus: 2\n").expect("valid").memory.map(Quantity::bytes), Some(4096));
        for (text, echoed) in [
            ("cpus: 0.1000000000000000055511151231257827\n", "\"0.1000000000000000055511151231257827\""),
            ("cpus: 1e3\n", "\"1e3\""),
            ("cpus: 0x10\n", "\"0x10\""),
            ("memory: 0o17\n", "\"0o17\""),
            ("memory: 1_000\n", "\"1_000\""),
            ("memory: 18446744073709551616\n", "\"18446744073709551616\""),
            ("timeout: 5\n", "\"5\""),
        ] {
            let message = read(text).expect_err(text);
            assert!(message.contains(echoed), "{text:?}: {message}");
        }
    }

    #[test]
    fn cpus_accept_numbers_and_millicores() {
        assert_eq!("2".parse::<Cpus>().expect("2").millis(), 2000);
        assert_eq!("0.5".parse::<Cpus>().expect("0.5").millis(), 500);
        assert_eq!("250m".parse::<Cpus>().expect("250m").millis(), 250);
        assert_eq!(Cpus::whole(2).nanos(), 2_000_000_000);
        for text in ["", "m", "two", "0.0005", "-1", "1.5m"] {
            assert!(text.parse::<Cpus>().is_err(), "{text:?} should not parse");
        }
    }
}
