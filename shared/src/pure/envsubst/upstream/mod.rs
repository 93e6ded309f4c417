//! fluxcd/pkg's own envsubst test tables, and the steps of its kustomize varsub test that reach
//! envsubst, run against the port under the rules of every kustomize-controller release.
//!
//! The tables are data under `shared/tests/data/flux-envsubst/` (see its README for their provenance
//! and licence); this file only says which table is the expectation for which release, and how
//! each Go assertion reads through the port's API. A failure names the upstream file, tag,
//! test and case.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::pure::envsubst::{self, Dialect, EnvsubstError, Item, Strict};
use serde::Deserialize;

/// One kustomize-controller release range with strict substitution on or off, and the envsubst
/// tag whose tables hold for it.
struct Release {
    name: &'static str,
    dialect: Dialect,
    tag: &'static str,
}

const fn dialect(strict: Strict, negative_length_fails: bool) -> Dialect {
    Dialect {
        strict,
        negative_length_fails,
    }
}

/// drone/envsubst v1.0.3 is not mirrored; fluxcd/pkg forked it, and the fork's tables did not
/// change until strict mode grew operators in v1.6.0, so v1.1.0 stands for it with strict off.
/// envsubst v1.1.0 to v1.5.0 carry the same cases (v1.5.0 only reworded a log call).
const RELEASES: &[Release] = &[
    Release {
        name: "kustomize-controller v1.0.0-v1.2.x (drone/envsubst v1.0.3, no strict mode)",
        dialect: dialect(Strict::Off, true),
        tag: "v1.1.0",
    },
    Release {
        name: "kustomize-controller v1.3.0-v1.8.x, strict (envsubst v1.1.0-v1.5.0)",
        dialect: dialect(Strict::Bare, true),
        tag: "v1.1.0",
    },
    Release {
        name: "kustomize-controller v1.3.0-v1.8.x, strict off (envsubst v1.1.0-v1.5.0)",
        dialect: dialect(Strict::Off, true),
        tag: "v1.1.0",
    },
    Release {
        name: "kustomize-controller v1.9.0-v1.9.4, strict (envsubst v1.7.0)",
        dialect: dialect(Strict::Operators, true),
        tag: "v1.7.0",
    },
    Release {
        name: "kustomize-controller v1.9.0-v1.9.4, strict off (envsubst v1.7.0)",
        dialect: dialect(Strict::Off, true),
        tag: "v1.7.0",
    },
    Release {
        name: "kustomize-controller v1.9.5 on, strict (envsubst v1.7.0 with PR 1287)",
        dialect: Dialect::NEWEST,
        tag: "v1.7.0",
    },
    Release {
        name: "kustomize-controller v1.9.5 on, strict off (envsubst v1.7.0 with PR 1287)",
        dialect: Dialect::LAX,
        tag: "v1.7.0",
    },
];

fn data_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/flux-envsubst"))
}

fn load<T: for<'de> Deserialize<'de>>(file: &str) -> T {
    let path = data_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[derive(Deserialize)]
struct Upstream {
    file: String,
    tag: String,
    commit: String,
}

impl Upstream {
    fn at(&self) -> String {
        format!("{}@{} ({})", self.file, self.tag, &self.commit[..10])
    }
}

#[derive(Deserialize)]
struct Table<C> {
    upstream: Upstream,
    cases: Vec<C>,
}

/// What a port difference is about; mod.rs documents each.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Differs {
    UnicodeCasing,
    ByteCuts,
    MaxDepth,
}

impl UpstreamCase for EvalCase {
    fn origin(&self) -> (&str, usize, &str, &str) {
        (&self.test, self.index, &self.label, &self.input)
    }
}

#[derive(Deserialize)]
struct EvalCase {
    test: String,
    index: usize,
    label: String,
    strict: bool,
    params: BTreeMap<String, String>,
    input: String,
    output: Option<String>,
    error: Option<ErrorClass>,
    differs: Option<Differs>,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum ErrorClass {
    NotSet,
    NegativeLength,
}

fn class(e: &EnvsubstError) -> Option<ErrorClass> {
    match e {
        EnvsubstError::NotSet { .. } => Some(ErrorClass::NotSet),
        EnvsubstError::NegativeLength { .. } => Some(ErrorClass::NegativeLength),
        EnvsubstError::Parse { .. } => None,
    }
}

/// The mapper of kustomize's `varSubstitution` without strict mode, and of `TestExpand`: every
/// name exists, an unknown one with the empty value.
fn every_name_set<'p>(params: &'p BTreeMap<String, String>) -> impl Fn(&str) -> Option<&'p str> + 'p {
    |k| Some(params.get(k).map_or("", String::as_str))
}

/// The mapper with strict mode (and of `TestExpandStrict`): a name exists if it is a key.
fn keys_set<'p>(params: &'p BTreeMap<String, String>) -> impl Fn(&str) -> Option<&'p str> + 'p {
    |k| params.get(k).map(String::as_str)
}

fn show(r: &Result<String, EnvsubstError>) -> String {
    match r {
        Ok(s) => format!("Ok({s:?})"),
        Err(e) => format!("Err({e:?})"),
    }
}

/// Collects every failure of a table so that one run shows them all.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    fn finish(self, ran: usize) {
        assert!(ran > 0, "no case ran");
        assert!(
            self.0.is_empty(),
            "{} of {ran} checks failed:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

/// A case of an upstream Go test table.
trait UpstreamCase: for<'de> Deserialize<'de> {
    /// The Go test, the case's index in its table, its label and the template it runs.
    fn origin(&self) -> (&str, usize, &str, &str);
}

/// Runs `check` on every case of the table `<file>.<tag>.json` under each release's rules, with
/// where the case comes from (upstream's file, tag and commit, the Go test and index, its label
/// and input, and the release) for its failures; one run shows them all.
fn each_case<C: UpstreamCase>(file: &str, mut check: impl FnMut(&Release, &C, &dyn Fn() -> String, &mut Failures)) {
    let mut failures = Failures::default();
    let mut ran = 0;
    for release in RELEASES {
        let table: Table<C> = load(&format!("{file}.{}.json", release.tag));
        for case in &table.cases {
            ran += 1;
            let (test, index, label, input) = case.origin();
            let at = || {
                format!(
                    "{} {test}[{index}] {label:?}: {input:?} under {}",
                    table.upstream.at(),
                    release.name
                )
            };
            check(release, case, &at, &mut failures);
        }
    }
    failures.finish(ran);
}

mod cases;
mod props;
mod tables;
