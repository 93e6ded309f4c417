use super::*;

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
