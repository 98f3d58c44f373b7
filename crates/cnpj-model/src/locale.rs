//! The three response locales: pt-br (the default), en, es.

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Locale {
    #[default]
    PtBr,
    En,
    Es,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown locale {0:?}: use pt-br, en or es")]
pub struct UnknownLocale(pub String);

impl Locale {
    pub const ALL: [Locale; 3] = [Locale::PtBr, Locale::En, Locale::Es];

    pub fn code(self) -> &'static str {
        match self {
            Locale::PtBr => "pt-br",
            Locale::En => "en",
            Locale::Es => "es",
        }
    }

    /// The language's own name.
    pub fn language(self) -> &'static str {
        match self {
            Locale::PtBr => "Português (Brasil)",
            Locale::En => "English",
            Locale::Es => "Español",
        }
    }
}

impl FromStr for Locale {
    type Err = UnknownLocale;

    fn from_str(s: &str) -> Result<Locale, UnknownLocale> {
        Locale::ALL.into_iter().find(|l| l.code() == s).ok_or_else(|| UnknownLocale(s.to_owned()))
    }
}

impl fmt::Display for Locale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        for l in Locale::ALL {
            assert_eq!(l.code().parse::<Locale>(), Ok(l));
        }
        assert!("pt_BR".parse::<Locale>().is_err());
        assert!("PT-BR".parse::<Locale>().is_err());
    }
}
