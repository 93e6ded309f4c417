//! fluxcd/pkg's own envsubst test tables, and the steps of its kustomize varsub test that reach
//! envsubst, run against the port under the rules of every kustomize-controller release.
//!
//! The tables are data under `tests/data/flux-envsubst/` (see its README for their provenance
//! and licence); this file only says which table is the expectation for which release, and how
//! each Go assertion reads through the port's API. A failure names the upstream file, tag,
//! test and case.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use cellbridge::pure::envsubst::{self, Dialect, EnvsubstError, Item, Strict};
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

#[test]
fn eval_test_tables_hold_for_every_release() {
    each_case("eval_test", |release, case: &EvalCase, at, failures| {
        let failure = if !case.strict {
            let got = envsubst::substitute(&case.input, every_name_set(&case.params), release.dialect);
            let agrees = got.as_ref().ok() == case.output.as_ref();
            if agrees == case.differs.is_none() {
                None
            } else {
                Some(format!("want {:?}, got {}", case.output, show(&got)))
            }
        } else if release.dialect.strict == Strict::Off {
            // Strict mode off, the controller's mapper says every name exists: the unset
            // ones read as empty, and nothing fails.
            let lax = envsubst::substitute(&case.input, every_name_set(&case.params), release.dialect);
            let got = envsubst::substitute(&case.input, keys_set(&case.params), release.dialect);
            let agrees =
                got.is_ok() && got == lax && (case.output.is_none() || got.as_ref().ok() == case.output.as_ref());
            if agrees == case.differs.is_none() {
                None
            } else {
                Some(format!(
                    "strict off: want Ok and the same as every name set ({}), upstream output {:?}, got {}",
                    show(&lax),
                    case.output,
                    show(&got)
                ))
            }
        } else {
            let got = envsubst::substitute(&case.input, keys_set(&case.params), release.dialect);
            let agrees = match (&got, case.error) {
                (Err(e), Some(want)) => class(e) == Some(want),
                (Ok(s), None) => Some(s) == case.output.as_ref(),
                _ => false,
            };
            if agrees == case.differs.is_none() {
                None
            } else {
                Some(format!(
                    "want {}, got {}",
                    case.error
                        .map_or_else(|| format!("{:?}", case.output), |e| format!("{e:?}")),
                    show(&got)
                ))
            }
        };
        if let Some(why) = failure {
            let marked = case
                .differs
                .map_or(String::new(), |d| format!(" (marked {d:?}, but agrees)"));
            failures.0.push(format!("{}: {why}{marked}", at()));
        }
    });
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "lowercase")]
enum Node {
    Text(String),
    Func(FuncNode),
    List(Vec<Node>),
}

#[derive(Deserialize, Debug, Clone)]
struct FuncNode {
    param: String,
    name: String,
    args: Vec<Node>,
}

impl UpstreamCase for ParseCase {
    fn origin(&self) -> (&str, usize, &str, &str) {
        (&self.test, self.index, &self.label, &self.text)
    }
}

#[derive(Deserialize)]
struct ParseCase {
    test: String,
    index: usize,
    label: String,
    text: String,
    tree: Node,
}

/// The functions of a tree in the order of their `${` in the text (the tree's pre-order).
fn funcs_in_order<'n>(node: &'n Node, out: &mut Vec<(&'n str, &'n str)>) {
    match node {
        Node::Text(_) => {}
        Node::List(nodes) => nodes.iter().for_each(|n| funcs_in_order(n, out)),
        Node::Func(f) => {
            out.push((f.param.as_str(), f.name.as_str()));
            f.args.iter().for_each(|n| funcs_in_order(n, out));
        }
    }
}

/// What Go's `Template.Execute` makes of the tree when every variable exists and is empty
/// (funcs.go on an empty value: the length is 0, a default is its joined arguments, a replace
/// of an empty pattern inserts the replacement, everything else is empty). The port's output
/// must be the same, which pins down the tree's text nodes (escapes resolved) and its arguments.
fn eval_all_empty(node: &Node) -> String {
    match node {
        Node::Text(v) => v.clone(),
        Node::List(nodes) => nodes.iter().map(eval_all_empty).collect(),
        Node::Func(f) => {
            let args: Vec<String> = f.args.iter().map(eval_all_empty).collect();
            match (f.name.as_str(), args.as_slice()) {
                ("#", []) => "0".to_owned(),
                ("", _) | (",", _) | (",,", _) | ("^", _) | ("^^", _) | (":", _) => String::new(),
                ("#" | "##" | "%" | "%%", _) => String::new(),
                ("/" | "//" | "/#" | "/%", [pat, rep, ..]) if pat.is_empty() => rep.clone(),
                ("/" | "//" | "/#" | "/%", _) => String::new(),
                // lookupFunc's default, and every default operator: toDefault.
                _ => args.concat(),
            }
        }
    }
}

/// A replace function whose arguments are text: with the value equal to its pattern, Go's
/// output is the replacement, which pins down both arguments (escapes resolved).
fn replace_witness(node: &Node) -> Option<(String, String, String)> {
    let Node::Func(f) = node else { return None };
    if !matches!(f.name.as_str(), "/" | "//" | "/#" | "/%") {
        return None;
    }
    match f.args.as_slice() {
        [Node::Text(pat), Node::Text(rep)] => Some((f.param.clone(), pat.clone(), rep.clone())),
        _ => None,
    }
}

#[test]
fn parse_test_tables_hold_for_every_release() {
    each_case("parse_test", |release, case: &ParseCase, at, failures| {
        let mut want = Vec::new();
        funcs_in_order(&case.tree, &mut want);
        let mut got = Vec::new();
        let mut malformed = Vec::new();
        envsubst::scan(&case.text, |item| match item {
            Item::Reference(r) => got.push((r.name, r.op)),
            Item::Malformed(m) => malformed.push(m),
        });
        failures.check(malformed.is_empty(), || format!("{}: Parse fails: {malformed:?}", at()));
        failures.check(got == want, || {
            format!("{}: references (name, op) want {want:?}, scan found {got:?}", at())
        });

        let none = BTreeMap::new();
        let output = envsubst::substitute(&case.text, every_name_set(&none), release.dialect);
        let expected = eval_all_empty(&case.tree);
        failures.check(output.as_ref() == Ok(&expected), || {
            format!(
                "{}: every variable empty, the tree gives {expected:?}, got {}",
                at(),
                show(&output)
            )
        });
        if let Some((param, pat, rep)) = replace_witness(&case.tree) {
            let vars = BTreeMap::from([(param, pat.clone())]);
            let output = envsubst::substitute(&case.text, every_name_set(&vars), release.dialect);
            failures.check(output.as_ref() == Ok(&rep), || {
                format!(
                    "{}: the value {pat:?} (the pattern) gives the replacement {rep:?}, got {}",
                    at(),
                    show(&output)
                )
            });
        }
    });
}

#[derive(Deserialize)]
struct KustomizeCase {
    test: String,
    step: String,
    input: String,
    params: BTreeMap<String, String>,
    strict: bool,
    expect: KustomizeExpect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KustomizeExpect {
    /// Absent: the substitution succeeds.
    error: Option<ErrorClass>,
    name: Option<String>,
    yaml: Option<String>,
    #[serde(default)]
    contains: Vec<String>,
    #[serde(default)]
    not_contains: Vec<String>,
    same_output_as: Option<SameAs>,
}

#[derive(Deserialize)]
struct SameAs {
    params: BTreeMap<String, String>,
    strict: bool,
}

/// `varSubstitution`: the key check, then envsubst with the strict or the lax mapper.
fn var_substitution(
    input: &str,
    params: &BTreeMap<String, String>,
    strict: bool,
    release: &Release,
) -> Result<String, String> {
    if let Some(bad) = params.keys().find(|k| !envsubst::valid_name(k)) {
        return Err(format!(
            "'{bad}' var name is invalid, must match '{}'",
            envsubst::NAME_PATTERN
        ));
    }
    let got = if strict {
        envsubst::substitute(input, keys_set(params), release.dialect)
    } else {
        envsubst::substitute(input, every_name_set(params), release.dialect)
    };
    got.map_err(|e| format!("{e:?}"))
}

fn yaml(text: &str) -> Result<serde_json::Value, String> {
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}

/// The cases use only bare references and `:=`, which every release with a strict mode fails
/// or accepts alike, so each runs on every release whose strict setting it names.
#[test]
fn kustomize_varsub_steps_hold_for_every_release() {
    let table: Table<KustomizeCase> = load("kustomize_varsub_test.v1.39.0.json");
    let mut failures = Failures::default();
    let mut ran = 0;
    for release in RELEASES {
        for case in &table.cases {
            if case.strict == (release.dialect.strict == Strict::Off) {
                continue;
            }
            ran += 1;
            let at = || {
                format!(
                    "{} {} ({}) under {}",
                    table.upstream.at(),
                    case.test,
                    case.step,
                    release.name
                )
            };
            let want = &case.expect;
            let got = var_substitution(&case.input, &case.params, case.strict, release);
            match (&got, want.error) {
                (Err(e), Some(class)) => {
                    let name = want.name.as_deref().unwrap_or_default();
                    let matches = match class {
                        ErrorClass::NotSet => e.starts_with("NotSet") && e.contains(&format!("{name:?}")),
                        ErrorClass::NegativeLength => e.starts_with("NegativeLength"),
                    };
                    failures.check(matches, || format!("{}: want {class:?} {name:?}, got {e}", at()));
                }
                (Ok(out), None) => {
                    for s in &want.contains {
                        failures.check(out.contains(s.as_str()), || format!("{}: want {s:?} in {out:?}", at()));
                    }
                    for s in &want.not_contains {
                        failures.check(!out.contains(s.as_str()), || {
                            format!("{}: want no {s:?} in {out:?}", at())
                        });
                    }
                    if let Some(expected) = &want.yaml {
                        let (got_doc, want_doc) = (yaml(out), yaml(expected));
                        failures.check(got_doc.is_ok() && got_doc == want_doc, || {
                            format!("{}: YAML after substitution {got_doc:?}, want {want_doc:?}", at())
                        });
                    }
                    if let Some(same) = &want.same_output_as {
                        let other = var_substitution(&case.input, &same.params, same.strict, release);
                        failures.check(other.as_ref() == Ok(out), || {
                            format!(
                                "{}: want the same output as {:?}: {other:?}, got {out:?}",
                                at(),
                                same.params
                            )
                        });
                    }
                }
                _ => failures.check(false, || {
                    format!(
                        "{}: want {}, got {got:?}",
                        at(),
                        want.error.map_or("success".to_owned(), |e| format!("{e:?}"))
                    )
                }),
            }
        }
    }
    failures.finish(ran);
}

#[derive(Deserialize)]
struct NegativeLengthCase {
    origin: String,
    params: BTreeMap<String, String>,
    input: String,
    fixed: Outcome,
    before_fix: Outcome,
}

#[derive(Deserialize, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
struct Outcome {
    output: Option<String>,
    error: Option<ErrorClass>,
}

fn outcome(r: &Result<String, EnvsubstError>) -> Outcome {
    match r {
        Ok(s) => Outcome {
            output: Some(s.clone()),
            error: None,
        },
        Err(e) => Outcome {
            output: None,
            error: class(e),
        },
    }
}

#[derive(Deserialize)]
struct HandWritten<C> {
    cases: Vec<C>,
}

/// fluxcd/pkg PR 1275 (backport PR 1287, kustomize-controller v1.9.5): the mirror predates it,
/// so these cases are written from its description and from bash.
#[test]
fn negative_substring_length_before_and_after_the_fix() {
    let table: HandWritten<NegativeLengthCase> = load("negative_length.json");
    let mut failures = Failures::default();
    let mut ran = 0;
    for release in RELEASES {
        for case in &table.cases {
            ran += 1;
            let want = if release.dialect.negative_length_fails {
                &case.before_fix
            } else {
                &case.fixed
            };
            let got = envsubst::substitute(&case.input, keys_set(&case.params), release.dialect);
            failures.check(outcome(&got) == *want, || {
                format!(
                    "negative_length.json {:?} ({}) under {}: want {want:?}, got {}",
                    case.input,
                    case.origin,
                    release.name,
                    show(&got)
                )
            });
        }
    }
    failures.finish(ran);
}

#[derive(Deserialize)]
struct DifferenceCase {
    label: String,
    params: BTreeMap<String, String>,
    input: String,
    go_output: String,
    differs: Option<Differs>,
}

/// The documented differences of the port, each with Go's result: a marked case must still
/// differ (else the mark, and mod.rs, are stale), an unmarked one must agree.
#[test]
fn port_differences_are_exactly_the_documented_ones() {
    let table: HandWritten<DifferenceCase> = load("port_differences.json");
    let mut failures = Failures::default();
    let mut ran = 0;
    let mut kinds = BTreeSet::new();
    for release in RELEASES {
        for case in &table.cases {
            ran += 1;
            let got = envsubst::substitute(&case.input, keys_set(&case.params), release.dialect);
            let agrees = got.as_ref() == Ok(&case.go_output);
            if let Some(d) = case.differs {
                kinds.insert(format!("{d:?}"));
            }
            failures.check(agrees == case.differs.is_none(), || {
                format!(
                    "port_differences.json {:?} ({}) under {}: Go gives {:?}, the port {}{}",
                    case.input,
                    case.label,
                    release.name,
                    case.go_output,
                    show(&got),
                    case.differs.map_or(" (unmarked, must agree)".to_owned(), |d| format!(
                        " (marked {d:?}, must differ)"
                    ))
                )
            });
        }
    }
    assert_eq!(kinds.len(), 3, "every documented difference has a case: {kinds:?}");
    failures.finish(ran);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    const DIALECTS: [Dialect; 5] = [
        dialect(Strict::Off, true),
        dialect(Strict::Off, false),
        dialect(Strict::Bare, true),
        dialect(Strict::Operators, true),
        dialect(Strict::Operators, false),
    ];

    /// A template and whether a substring in it takes its offset or length from a nested
    /// expression (whose value `scan` cannot know, so a negative length there is found only
    /// when substituting).
    #[derive(Debug, Clone)]
    struct Template {
        text: String,
        computed_substring: bool,
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::sample::select(vec!["a", "b", "c", "ab", "b_1"]).prop_map(str::to_owned),
            1 => prop::sample::select(vec!["1x", "_", "é"]).prop_map(str::to_owned),
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z0-9 ._-]{0,6}",
            prop::sample::select(vec![
                "$$", "$${a}", "$", "$a", "\\\\", "\\/", "\n", ":", "#", "%", "/", "é", "*", "?", "[a]", "[",
            ])
            .prop_map(str::to_owned),
        ]
    }

    /// Text for inside an argument: no `}` or `/`, which would end it.
    fn arg_text() -> impl Strategy<Value = String> {
        prop_oneof!["[a-zA-Z0-9 ._*?-]{0,4}", Just("\\/".to_owned()), Just("é".to_owned())]
    }

    fn number() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["0", "1", "2", "5", "-1", "-2", "-20", "x", "", " -1", "+1"]).prop_map(str::to_owned)
    }

    fn malformed() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "${", "${}", "${a", "${a-b}", "${a+b}", "${a?b}", "${a^x}", "${a/#/x}", "${ a}",
        ])
        .prop_map(str::to_owned)
    }

    /// A few pieces side by side, so that one text mixes references, failures and plain text.
    fn template() -> impl Strategy<Value = Template> {
        prop::collection::vec(piece(), 1..6).prop_map(|parts| Template {
            computed_substring: parts.iter().any(|p| p.computed_substring),
            text: parts.into_iter().map(|p| p.text).collect(),
        })
    }

    fn piece() -> impl Strategy<Value = Template> {
        let leaf = prop_oneof![
            4 => text().prop_map(|text| Template { text, computed_substring: false }),
            3 => name().prop_map(|n| Template { text: format!("${{{n}}}"), computed_substring: false }),
            1 => malformed().prop_map(|text| Template { text, computed_substring: false }),
        ];
        leaf.prop_recursive(4, 48, 4, |inner| {
            let arg = prop_oneof![
                2 => arg_text().prop_map(|text| Template { text, computed_substring: false }),
                1 => inner.clone(),
            ]
            .boxed();
            let num = prop_oneof![
                3 => number().prop_map(|text| (text, false)),
                1 => name().prop_map(|n| (format!("${{{n}}}"), true)),
            ]
            .boxed();
            let default_op = prop::sample::select(vec![":=", "=", ":-", ":+", ":?"]);
            let casing_op = prop::sample::select(vec!["^", "^^", ",", ",,"]);
            let trim_op = prop::sample::select(vec!["#", "##", "%", "%%"]);
            let replace_op = prop::sample::select(vec!["/", "//", "/#", "/%"]);
            prop_oneof![
                (name(), default_op, prop::collection::vec(arg.clone(), 0..3)).prop_map(|(n, op, args)| {
                    let computed_substring = args.iter().any(|a| a.computed_substring);
                    let args: String = args.into_iter().map(|a| a.text).collect();
                    Template {
                        text: format!("${{{n}{op}{args}}}"),
                        computed_substring,
                    }
                }),
                (name(), casing_op).prop_map(|(n, op)| Template {
                    text: format!("${{{n}{op}}}"),
                    computed_substring: false
                }),
                name().prop_map(|n| Template {
                    text: format!("${{#{n}}}"),
                    computed_substring: false
                }),
                (name(), trim_op, arg.clone()).prop_map(|(n, op, a)| Template {
                    text: format!("${{{n}{op}{}}}", a.text),
                    computed_substring: a.computed_substring
                }),
                (name(), num.clone(), proptest::option::of(num)).prop_map(|(n, (pos, p), len)| {
                    let (len, l) = len.map_or((String::new(), false), |(t, l)| (format!(":{t}"), l));
                    Template {
                        text: format!("${{{n}:{pos}{len}}}"),
                        computed_substring: p || l,
                    }
                }),
                (name(), replace_op, arg.clone(), proptest::option::of(arg)).prop_map(|(n, op, pat, rep)| {
                    let computed_substring =
                        pat.computed_substring || rep.as_ref().is_some_and(|r| r.computed_substring);
                    let rep = rep.map_or(String::new(), |r| r.text);
                    Template {
                        text: format!("${{{n}{op}{}/{rep}}}", pat.text),
                        computed_substring,
                    }
                }),
                prop::collection::vec(inner, 1..4).prop_map(|parts| Template {
                    computed_substring: parts.iter().any(|p| p.computed_substring),
                    text: parts.into_iter().map(|p| p.text).collect(),
                }),
            ]
        })
    }

    fn vars() -> impl Strategy<Value = BTreeMap<String, String>> {
        let value = prop::sample::select(vec!["", "abc", "A.b/c", "héllo", "-3", "2", "x*y", "straße"]);
        prop::collection::btree_map(name(), value.prop_map(str::to_owned), 0..8)
    }

    fn describe(out: &mut String, items: &[Item<'_>]) {
        for i in items {
            let _ = writeln!(out, "  {i:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn strict_failures_are_what_scan_reports(t in template(), vars in vars()) {
            let text = &t.text;
            let lookup = keys_set(&vars);
            let mut items = Vec::new();
            envsubst::scan(text, |i| items.push(i));
            let mut again = Vec::new();
            envsubst::scan(text, |i| again.push(i));
            prop_assert_eq!(&items, &again, "scan is deterministic");
            let malformed: Vec<_> = items.iter().filter_map(|i| match i {
                Item::Malformed(m) => Some(*m),
                Item::Reference(_) => None,
            }).collect();
            let refs: Vec<_> = items.iter().filter_map(|i| match i {
                Item::Reference(r) => Some(*r),
                Item::Malformed(_) => None,
            }).collect();

            for d in DIALECTS {
                let got = envsubst::substitute(text, &lookup, d);
                prop_assert_eq!(&got, &envsubst::substitute(text, &lookup, d), "substitute is deterministic");
                let mut ctx = format!("{text:?} with {vars:?} under {d:?}: {}\nscan:\n", show(&got));
                describe(&mut ctx, &items);

                if d.strict == Strict::Off {
                    prop_assert!(!matches!(got, Err(EnvsubstError::NotSet { .. })), "{}", ctx);
                }
                match &got {
                    Err(EnvsubstError::Parse { kind, offset, .. }) => {
                        let first = malformed.first();
                        prop_assert!(
                            first.is_some_and(|m| m.kind == *kind && m.offset == *offset),
                            "a parse error is scan's first malformed expression: {}", ctx
                        );
                    }
                    Err(EnvsubstError::NotSet { name, offset, .. }) => {
                        prop_assert!(
                            refs.iter().any(|r| r.offset == *offset
                                && r.name == name
                                && r.fails_unset(d.strict)
                                && lookup(r.name).is_none()),
                            "NotSet is a reference scan reports as failing: {}", ctx
                        );
                    }
                    Err(EnvsubstError::NegativeLength { offset, .. }) => {
                        prop_assert!(d.negative_length_fails, "{}", ctx);
                        prop_assert!(
                            refs.iter().any(|r| r.offset == *offset
                                && r.op == ":"
                                && (r.negative_length || t.computed_substring)),
                            "a negative length is at a substring scan flags (or one with a computed argument): {}", ctx
                        );
                    }
                    Ok(_) => {}
                }
                prop_assert_eq!(
                    malformed.is_empty(),
                    !matches!(got, Err(EnvsubstError::Parse { .. })),
                    "scan finds a malformed expression exactly when substitute refuses the text: {}", ctx
                );
                let failing_unset = refs.iter().any(|r| r.fails_unset(d.strict) && lookup(r.name).is_none());
                // Every node is evaluated (arguments too, defaults or not), so a failing
                // reference fails the text, unless a negative length fails it first.
                if malformed.is_empty() && failing_unset {
                    prop_assert!(
                        matches!(got, Err(EnvsubstError::NotSet { .. } | EnvsubstError::NegativeLength { .. })),
                        "scan reports an unset variable strict mode fails on, so substitute fails: {}", ctx
                    );
                }
                let negative = d.negative_length_fails && refs.iter().any(|r| r.negative_length);
                if malformed.is_empty() && !failing_unset && !negative {
                    prop_assert!(
                        got.is_ok()
                            || (t.computed_substring && matches!(got, Err(EnvsubstError::NegativeLength { .. }))),
                        "nothing scan reports can fail, so substitute succeeds: {}", ctx
                    );
                }
            }
        }
    }
}
