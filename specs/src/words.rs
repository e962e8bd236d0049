//! Enums whose wire form is one fixed word per variant (`words!`), and the error a word no
//! variant has reads as. Every such enum of this crate is declared through it.

/// Declares a unit-variant enum serialised as one fixed word per variant, with `as_str`,
/// `Display`, `FromStr`, `ALL` and `WORDS` (every variant's word, in the same order).
macro_rules! words {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $word:literal $(| $alias:literal)*,)+ }) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash,
            ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema,
        )]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word $(, alias = $alias)*)] $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];
            pub const WORDS: &'static [&'static str] = &[$($word,)+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::words::UnknownWord;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($word $(| $alias)* => Ok($name::$variant),)+
                    _ => Err($crate::words::UnknownWord { what: stringify!($name), word: text.to_owned() }),
                }
            }
        }
    };
}
pub(crate) use words;

/// A stored word that no variant has (a newer controller wrote it, or the row was edited).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {word:?}")]
pub struct UnknownWord {
    pub what: &'static str,
    pub word: String,
}
