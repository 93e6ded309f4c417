use super::*;

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
