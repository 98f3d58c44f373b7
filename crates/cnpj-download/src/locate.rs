//! Where things are in a listing: the month folders (in the prefix, or else found by a bounded
//! walk of the share from its root), the month's files (for `latest`, the newest complete month)
//! and the tax-regime zips (found by name in a bounded walk from the month folders' folder). The
//! two searches share one breadth-first walk.

use std::collections::{BTreeMap, VecDeque};
use std::ops::ControlFlow;

use cnpj_model::FileKind;

use crate::listing::{Folder, ListingError, RemoteFile, Site, complete, is_month, join};

/// How deep below the month folders' folder the tax-regime zips are looked for.
const TAX_REGIME_DEPTH: usize = 3;
/// How deep below a share's root its month folders are looked for, when the prefix holds none.
const MONTHS_DEPTH: usize = 4;
/// At most this many folders are listed by a walk.
const WALK_FOLDERS: usize = 64;
/// At most this many of the folders a fruitless search listed are named in its error.
const NAMED_FOLDERS: usize = 24;

/// The month folders found: the site whose prefix holds them, and the months, newest first.
#[derive(Debug)]
pub(crate) struct Offer {
    pub site: Site,
    pub months: Vec<String>,
}

impl Site {
    /// The month folders: in the prefix, as given, when it holds any; else, for a share whose
    /// prefix is missing or holds none, where a walk of the share finds them (`search_months`).
    pub(crate) fn offer(self, agent: &ureq::Agent) -> Result<Offer, ListingError> {
        let here = match self.list(agent, "") {
            Err(ListingError::Missing { .. }) if matches!(self, Site::Share { .. }) => None,
            listed => Some(listed?),
        };
        let months = here.as_ref().map_or_else(Vec::new, |h| months_of(&h.folders));
        if !months.is_empty() {
            return Ok(Offer { site: self, months });
        }
        let Site::Share { base, token, prefix } = self else {
            let seen = here.map(|h| h.folders).unwrap_or_default();
            return Err(ListingError::NoMonths { place: format!("at {}", self.folder_url("")), seen: named(&seen) });
        };
        let why = if here.is_some() { "holds no month folder" } else { "is missing" };
        search_months(agent, base, token, &format!("/{prefix} {why}"))
    }

    /// A breadth-first walk of the listing from the prefix: each folder listed is handed to
    /// `visit` (its path relative to the prefix, `""` for the prefix itself, and what it holds),
    /// which answers the subfolders to walk into, in order, or stops the walk. Nothing deeper than
    /// `depth` levels is listed, nor more than `WALK_FOLDERS` folders in all (a warning names
    /// `search` when that cuts the walk short, and `true` is returned); a subfolder that cannot
    /// be listed is left out, the prefix must be.
    fn walk(
        &self,
        agent: &ureq::Agent,
        depth: usize,
        search: &str,
        mut visit: impl FnMut(&str, Folder) -> ControlFlow<(), Vec<String>>,
    ) -> Result<bool, ListingError> {
        let mut queue = VecDeque::from([(String::new(), 0)]);
        let mut listed = 0;
        while let Some((folder, level)) = queue.pop_front() {
            if listed == WALK_FOLDERS {
                tracing::warn!(folder = %folder, "{search} stopped: {WALK_FOLDERS} folders listed");
                return Ok(true);
            }
            listed += 1;
            let here = match self.list(agent, &folder) {
                Ok(here) => here,
                Err(e) if level > 0 => {
                    tracing::warn!(error = %e, "{search}: folder left out");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let ControlFlow::Continue(subfolders) = visit(&folder, here) else { return Ok(false) };
            if level < depth {
                queue.extend(subfolders.into_iter().map(|sub| (join(&join("", &folder), &sub), level + 1)));
            }
        }
        Ok(false)
    }

    /// The tax-regime zips (recognised by name: `Lucro Real.zip`, `Imunes e Isentas.zip`, …)
    /// wherever the listing shows them: a walk from the prefix down to three levels, the month's
    /// own folder first among each folder's subfolders, other months' folders left out; the first
    /// zip of a name wins.
    pub(crate) fn tax_regime_files(&self, agent: &ureq::Agent, month: &str) -> Result<Vec<RemoteFile>, ListingError> {
        let mut found: BTreeMap<String, RemoteFile> = BTreeMap::new();
        self.walk(agent, TAX_REGIME_DEPTH, "tax-regime search", |_, here| {
            for file in here.files {
                if FileKind::recognise(&file.name, None) == Some(FileKind::TaxRegime) {
                    found.entry(file.name.clone()).or_insert(file);
                }
            }
            let mut subfolders: Vec<String> = here.folders.into_iter().filter(|f| !is_month(f) || f == month).collect();
            subfolders.sort_by_key(|f| f != month);
            ControlFlow::Continue(subfolders)
        })?;
        Ok(found.into_values().collect())
    }

    /// Whether one of the two newest of `months` (in `folder`) holds a zip of the dump's tables:
    /// a share also holds other registries' month folders.
    fn holds_the_dump(&self, agent: &ureq::Agent, folder: &str, months: &[String]) -> bool {
        months.iter().take(2).any(|month| {
            self.list(agent, &join(&join("", folder), month)).is_ok_and(|m| {
                m.files.iter().any(|f| FileKind::recognise(&f.name, None).is_some_and(|k| k != FileKind::TaxRegime))
            })
        })
    }
}

/// The month folders of a share whose prefix holds none (`why` says how): a walk from the share's
/// root, month folders not walked into, down to `MONTHS_DEPTH` levels, stops at the first folder
/// whose month folders hold the dump, which becomes the prefix. None found is an error naming the
/// folders the walk listed.
fn search_months(agent: &ureq::Agent, base: String, token: String, why: &str) -> Result<Offer, ListingError> {
    let share = Site::Share { base: base.clone(), token: token.clone(), prefix: String::new() };
    let mut found = None;
    let mut searched = Vec::new();
    let cut = share.walk(agent, MONTHS_DEPTH, "month-folder search", |folder, here| {
        let months = months_of(&here.folders);
        let others: Vec<String> = here.folders.into_iter().filter(|f| !is_month(f)).collect();
        if months.is_empty() {
            searched.push(format!("/{}", join("", folder)));
        } else if share.holds_the_dump(agent, folder, &months) {
            found = Some((join("", folder), months));
            return ControlFlow::Break(());
        } else {
            searched.push(format!("/{} (month folders without the dump's zips)", join("", folder)));
        }
        ControlFlow::Continue(others)
    })?;
    let Some((prefix, months)) = found else {
        let bound = if cut { format!(", stopped at {WALK_FOLDERS} folders") } else { String::new() };
        let place = format!(
            "in share {token} at {base}: {why}, and a search of the share from its root \
             ({MONTHS_DEPTH} levels down{bound}) found none"
        );
        return Err(ListingError::NoMonths { place, seen: named(&searched) });
    };
    tracing::info!(folder = %format!("/{prefix}"), share = %token, "month folders found by a search of the share: {why}");
    Ok(Offer { site: Site::Share { base, token, prefix }, months })
}

/// The `YYYY-MM` names among `folders`, newest first.
fn months_of(folders: &[String]) -> Vec<String> {
    let mut months: Vec<String> = folders.iter().filter(|f| is_month(f)).cloned().collect();
    months.sort();
    months.reverse();
    months
}

/// The first `NAMED_FOLDERS` of `folders`, and how many more there are.
fn named(folders: &[String]) -> String {
    let mut out = folders.iter().take(NAMED_FOLDERS).cloned().collect::<Vec<_>>().join(", ");
    if folders.is_empty() {
        out.push_str("none");
    } else if folders.len() > NAMED_FOLDERS {
        out.push_str(&format!(" and {} more", folders.len() - NAMED_FOLDERS));
    }
    out
}

impl Offer {
    /// The requested month's files, or (for `latest`) those of the newest month in which every
    /// required table of the dump is present.
    pub(crate) fn month_files(
        &self,
        agent: &ureq::Agent,
        month: &str,
    ) -> Result<(String, Vec<RemoteFile>), ListingError> {
        if month != "latest" {
            if !self.months.iter().any(|m| m == month) {
                return Err(ListingError::NoMonth { month: month.to_owned(), source_url: self.site.folder_url("") });
            }
            return Ok((month.to_owned(), self.site.list(agent, month)?.files));
        }
        for m in &self.months {
            let files = self.site.list(agent, m)?.files;
            if complete(&files) {
                return Ok((m.clone(), files));
            }
            tracing::info!(month = %m, "incomplete month skipped");
        }
        Err(ListingError::NoCompleteMonth(self.site.folder_url("")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `folders` folders `/f0/`, `/f1/`, … named: the list ends with `tail`, its length in names.
    fn check(folders: usize, tail: &str, names: usize) {
        let folders: Vec<String> = (0..folders).map(|i| format!("/f{i}/")).collect();
        let out = named(&folders);
        assert!(out.ends_with(tail), "{out}");
        assert_eq!(out.matches("/f").count(), names, "{out}");
    }

    #[test]
    fn folders_named_in_an_error() {
        check(0, "none", 0);
        check(2, "/f0/, /f1/", 2);
        check(NAMED_FOLDERS, &format!(", /f{}/", NAMED_FOLDERS - 1), NAMED_FOLDERS);
        check(NAMED_FOLDERS + 5, &format!(", /f{}/ and 5 more", NAMED_FOLDERS - 1), NAMED_FOLDERS);
        assert_eq!(months_of(&["b".into(), "2026-08".into(), "2026-10".into()]), ["2026-10", "2026-08"]);
    }
}
