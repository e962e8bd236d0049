//! Types whose wire form is one string: serialised through `Display`, deserialised through
//! `FromStr`, from a string only (so they can be JSON map keys too). One mechanism for every
//! such type (gateway reasons, address classes, close reasons, proposal flags).

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use serde::de::{self, Visitor};

/// Implements `Serialize` and `Deserialize` for `$type` through its `Display` and `FromStr`.
macro_rules! wire_string {
    ($type:ident) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_str($crate::wire::WireVisitor::new(stringify!($type)))
            }
        }
    };
}
pub(crate) use wire_string;

/// Reads a `T` from a string through `FromStr`.
pub(crate) struct WireVisitor<T>(PhantomData<T>, &'static str);

impl<T> WireVisitor<T> {
    pub(crate) fn new(name: &'static str) -> Self {
        Self(PhantomData, name)
    }
}

impl<T: FromStr<Err: fmt::Display>> Visitor<'_> for WireVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} string", self.1)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        text.parse().map_err(E::custom)
    }
}
