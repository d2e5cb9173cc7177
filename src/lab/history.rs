//! The grader's view of the lab's Git history, read from the pushed (bare) repository: every
//! check runs and reports on its own, so one report shows everything that is wrong.

use crate::config::Config;
use crate::lab::git::{file_at, parse_sha, subtree_id};
use crate::lab::manifests::{
    self, json_diff, APP_DIR, BAD_READINESS_PATH, READINESS_PATH_POINTER, RELEASE_PATH,
};
use anyhow::Result;
use git2::{Oid, Repository};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct HistoryReport {
    pub checks: Vec<Check>,
}

/// Every check the grader makes of Git history.
pub const CHECK_NAMES: [&str; 9] = [
    "baseline release matches step 1",
    "bad is a child of baseline",
    "bad differs only in the readiness path",
    "recovered is a child of bad",
    "recovered message reverts bad",
    "recovered app/ tree equals baseline",
    "baseline reachable from branch",
    "bad reachable from branch",
    "recovered reachable from branch",
];

impl HistoryReport {
    /// Passes only when every known check ran and held: a report that evaluated nothing fails.
    pub fn passed(&self) -> bool {
        CHECK_NAMES
            .iter()
            .all(|n| self.checks.iter().any(|c| c.name == *n))
            && self.checks.iter().all(|c| c.ok)
    }
    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.ok).collect()
    }
    pub fn failed(&self, name: &str) -> bool {
        self.checks.iter().any(|c| c.name == name && !c.ok)
    }
    pub fn render(&self) -> String {
        self.checks
            .iter()
            .map(|c| {
                format!(
                    "{} {}: {}",
                    if c.ok { "ok  " } else { "FAIL" },
                    c.name,
                    c.detail
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

struct Report(Vec<Check>);

impl Report {
    fn add(&mut self, name: &'static str, result: Result<(bool, String)>) {
        let (ok, detail) = result.unwrap_or_else(|e| (false, format!("could not check: {e:#}")));
        self.0.push(Check { name, ok, detail });
    }
}

/// `app/release.json` at commit `oid` of `repo`, parsed strictly.
pub fn release_at(repo: &Repository, oid: Oid) -> Result<Value> {
    let bytes = file_at(repo, oid, RELEASE_PATH)?
        .ok_or_else(|| anyhow::anyhow!("{oid} has no {RELEASE_PATH}"))?;
    crate::release_gate::strict_json::parse_value(&bytes)
        .map_err(|e| anyhow::anyhow!("{RELEASE_PATH} at {oid}: {e}"))
}

/// Whether `rec`'s `app/` tree is exactly the baseline's (the revert restored it byte for byte).
pub fn same_app_tree(repo: &Repository, base: Oid, rec: Oid) -> Result<(bool, String)> {
    let (a, b) = (
        subtree_id(repo, base, APP_DIR)?,
        subtree_id(repo, rec, APP_DIR)?,
    );
    Ok((
        a.is_some() && a == b,
        format!("baseline app/ {a:?}, recovered app/ {b:?}"),
    ))
}

fn parents(repo: &Repository, oid: Oid) -> Result<Vec<Oid>> {
    Ok(repo.find_commit(oid)?.parent_ids().collect())
}

fn reachable(repo: &Repository, tip: Option<Oid>, oid: Oid) -> Result<(bool, String)> {
    let Some(tip) = tip else {
        return Ok((false, "the branch does not exist".into()));
    };
    let ok = tip == oid || repo.graph_descendant_of(tip, oid)?;
    Ok((
        ok,
        if ok {
            format!("{oid} is in the history of {tip}")
        } else {
            format!("{oid} is NOT reachable from {tip} (force-push?)")
        },
    ))
}

/// Checks the history in `repo` (the pushed, bare repository) for the three recorded SHAs.
pub fn check(
    repo: &Repository,
    cfg: &Config,
    baseline: &str,
    bad: &str,
    recovered: &str,
) -> HistoryReport {
    let mut r = Report(Vec::new());
    let ids = (parse_sha(baseline), parse_sha(bad), parse_sha(recovered));
    let (base, bad, rec) = match ids {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (a, b, c) => {
            let why = [a.err(), b.err(), c.err()]
                .into_iter()
                .flatten()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ");
            for name in CHECK_NAMES {
                r.add(
                    name,
                    Ok((false, format!("recorded SHAs are malformed: {why}"))),
                );
            }
            return HistoryReport { checks: r.0 };
        }
    };

    r.add(
        CHECK_NAMES[0],
        (|| {
            let want = serde_json::to_value(manifests::baseline_release(cfg))?;
            let diff = json_diff(&want, &release_at(repo, base)?);
            Ok((
                diff.is_empty(),
                if diff.is_empty() {
                    "every field as step 1 asks".into()
                } else {
                    format!("differs at {diff:?}")
                },
            ))
        })(),
    );
    r.add(
        CHECK_NAMES[1],
        (|| {
            let p = parents(repo, bad)?;
            Ok((p == [base], format!("parents of {bad}: {p:?}")))
        })(),
    );
    r.add(
        CHECK_NAMES[2],
        (|| {
            let diff = json_diff(&release_at(repo, base)?, &release_at(repo, bad)?);
            let new = release_at(repo, bad)?
                .pointer(READINESS_PATH_POINTER)
                .cloned();
            // No other file of the commit may change either.
            let (bt, nt) = (
                repo.find_commit(base)?.tree()?,
                repo.find_commit(bad)?.tree()?,
            );
            let files: Vec<String> = repo
                .diff_tree_to_tree(Some(&bt), Some(&nt), None)?
                .deltas()
                .filter_map(|d| {
                    d.new_file()
                        .path()
                        .or(d.old_file().path())
                        .map(|p| p.display().to_string())
                })
                .collect();
            let ok = diff == [READINESS_PATH_POINTER]
                && new == Some(Value::from(BAD_READINESS_PATH))
                && files == [RELEASE_PATH];
            Ok((
                ok,
                format!(
                    "changed files {files:?}; changed fields {diff:?}; readiness path now {new:?}"
                ),
            ))
        })(),
    );
    r.add(
        CHECK_NAMES[3],
        (|| {
            let p = parents(repo, rec)?;
            Ok((p == [bad], format!("parents of {rec}: {p:?}")))
        })(),
    );
    r.add(
        CHECK_NAMES[4],
        (|| {
            let msg = repo.find_commit(rec)?.message().unwrap_or("").to_string();
            let ok =
                msg.starts_with("Revert ") && msg.contains(&format!("This reverts commit {bad}"));
            Ok((
                ok,
                format!("message {:?}", msg.lines().collect::<Vec<_>>().join(" / ")),
            ))
        })(),
    );
    r.add(CHECK_NAMES[5], same_app_tree(repo, base, rec));
    let tip = repo
        .find_reference(&format!("refs/heads/{}", cfg.branch))
        .ok()
        .and_then(|r| r.target());
    r.add(CHECK_NAMES[6], reachable(repo, tip, base));
    r.add(CHECK_NAMES[7], reachable(repo, tip, bad));
    r.add(CHECK_NAMES[8], reachable(repo, tip, rec));
    HistoryReport { checks: r.0 }
}
