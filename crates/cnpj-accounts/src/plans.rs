//! Plans: what each plan gives a user (a monthly allowance of credits, requests per minute, the
//! most tokens and watched CNPJs), read from the operator's TOML file, or the built-in `free`.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One plan.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Credits given at the first charge of each UTC month (never carried over).
    #[serde(default)]
    pub monthly_allowance: i64,
    #[serde(default = "default_per_minute")]
    pub requests_per_minute: u32,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    #[serde(default = "default_max_watched")]
    pub max_watched: u32,
}

fn default_per_minute() -> u32 {
    100
}

fn default_max_tokens() -> u32 {
    10
}

fn default_max_watched() -> u32 {
    10_000
}

/// The plans by name, and the one a user without a plan has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plans {
    default: String,
    plans: BTreeMap<String, Plan>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlansFile {
    default: String,
    plans: BTreeMap<String, Plan>,
}

#[derive(Debug, thiserror::Error)]
pub enum PlansError {
    #[error("the plans file is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("the plans file names {0:?} as its default plan, but has no such plan")]
    NoDefault(String),
    #[error("plan {0:?}: {1}")]
    Invalid(String, &'static str),
}

impl Default for Plans {
    /// The built-in plan `free`: no allowance, 100 requests a minute, 10,000 CNPJs watched.
    fn default() -> Plans {
        Plans::free(default_per_minute(), default_max_watched())
    }
}

impl Plans {
    /// The built-in plan `free` alone: no allowance, `requests_per_minute`, `max_watched`.
    pub fn free(requests_per_minute: u32, max_watched: u32) -> Plans {
        let free = Plan { monthly_allowance: 0, requests_per_minute, max_tokens: default_max_tokens(), max_watched };
        Plans { default: "free".into(), plans: BTreeMap::from([("free".into(), free)]) }
    }

    /// A plans file: `default = "NAME"` and a table `[plans.NAME]` per plan (`monthly_allowance`,
    /// `requests_per_minute`, `max_tokens`, `max_watched`).
    pub fn parse(text: &str) -> Result<Plans, PlansError> {
        let file: PlansFile = toml::from_str(text)?;
        if !file.plans.contains_key(&file.default) {
            return Err(PlansError::NoDefault(file.default));
        }
        for (name, plan) in &file.plans {
            if plan.monthly_allowance < 0 {
                return Err(PlansError::Invalid(name.clone(), "monthly_allowance is negative"));
            }
            if plan.requests_per_minute == 0 {
                return Err(PlansError::Invalid(name.clone(), "requests_per_minute is 0"));
            }
        }
        Ok(Plans { default: file.default, plans: file.plans })
    }

    /// The default plan's name.
    pub fn default_name(&self) -> &str {
        &self.default
    }

    /// The plan of a user (`None`, or a plan no longer in the file: the default), and its name.
    pub fn of<'a>(&'a self, plan: Option<&'a str>) -> (&'a str, &'a Plan) {
        match plan.and_then(|p| self.plans.get_key_value(p)) {
            Some((name, plan)) => (name, plan),
            None => (&self.default, &self.plans[&self.default]),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.plans.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.plans.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<(&str, i64, u32), &str>) {
        let got = Plans::parse(text).map(|p| {
            let (name, plan) = p.of(None);
            (name.to_owned(), plan.monthly_allowance, plan.requests_per_minute)
        });
        match (got, expected) {
            (Ok((name, allowance, rpm)), Ok(want)) => assert_eq!((name.as_str(), allowance, rpm), want),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{e}"),
            (got, want) => panic!("{text}: {got:?} vs {want:?}"),
        }
    }

    #[test]
    fn plans_files() {
        let two = "default = \"free\"\n[plans.free]\nmonthly_allowance = 100\n[plans.pro]\nmonthly_allowance = 10000\nrequests_per_minute = 600\n";
        check(two, Ok(("free", 100, 100)));
        check("default = \"gold\"\n[plans.free]\n", Err("no such plan"));
        check("default = \"free\"\n[plans.free]\nmonthly_allowance = -1\n", Err("negative"));
        check("default = \"free\"\n[plans.free]\nrequests_per_minute = 0\n", Err("is 0"));
        check("default = \"free\"\n[plans.free]\ncolour = 1\n", Err("unknown field"));
        check("default = ", Err("not valid"));
        let plans = Plans::parse(two).unwrap();
        assert_eq!(plans.of(Some("pro")).1.requests_per_minute, 600);
        assert_eq!(plans.of(Some("gone")).0, "free", "a plan no longer in the file is the default");
        assert_eq!(Plans::default().of(None).0, "free");
        assert_eq!((plans.of(None).1.max_watched, Plans::free(100, 7).of(None).1.max_watched), (10_000, 7));
    }
}
