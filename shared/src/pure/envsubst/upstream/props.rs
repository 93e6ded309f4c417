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
                let computed_substring = pat.computed_substring || rep.as_ref().is_some_and(|r| r.computed_substring);
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
