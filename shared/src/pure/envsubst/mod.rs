//! Flux's variable substitution, as kustomize-controller runs it in post-build
//! (`github.com/fluxcd/pkg/envsubst`, a fork of drone/envsubst).
//!
//! This is a port of that parser's state machine, not a re-imagining of shell expansion, so the
//! check says what Flux would do, including its surprises:
//!
//! - `${var}`, `${var:=default}`, `${var=default}`, `${var:-default}`, `${var:?x}`, `${var:+x}`
//!   all parse. Every default operator means "the value if it is non-empty, else the default"
//!   (`:+` and `:?` included: Flux does not implement bash's alternate-value or error forms).
//! - `${var-default}`, `${var+x}` and `${var?x}` do **not** parse: after the name only `:`, `=`,
//!   `,`, `^`, `/`, `#`, `%` or `}` may follow, so Flux fails with "missing closing brace".
//! - `$$` is an escape for `$` in plain text, so `$${var}` is the literal `${var}`; a bare `$var`
//!   is plain text and never substituted.
//! - The name is any run of letters, digits and `_` (Unicode letters too, leading digits too):
//!   `${1abc}` parses, and then fails in strict mode because no key can have that name (Flux
//!   validates the *keys* against `^[_[:alpha:]][_[:alpha:][:digit:]]*$`, see [`valid_name`]).
//! - Strict mode fails on an unset variable unless the operator supplies a default; the other
//!   operators (`${#var}`, `${var^^}`, `${var:1:2}`, `${var/a/b}`, `${var#p}`, ...) fail too.
//!   Arguments are evaluated before the variable itself, so `${set:=${unset}}` fails as well.
//! - `${`, `${}` and other malformed expressions fail the whole resource ("bad substitution").
//! - A NUL character ends the input, as it does in the Go scanner.
//!
//! - A name's characters are Go's `unicode.IsLetter`/`IsDigit` and `_`, by Unicode general
//!   category (letters and decimal digits only): `${a²}`, `${a½}`, `${Ⅰ}` and a combining mark
//!   end or refuse the name as Flux does.
//!
//! Known differences, all outside what a Kubernetes manifest with identifier values meets:
//! upper/lower-casing uses Rust's full Unicode mappings; pattern trimming (`#`, `%`) of
//! non-ASCII values cuts at character boundaries where Go cuts bytes (a substring cuts the
//! same bytes as Go, a broken character shown as U+FFFD); nesting deeper than [`MAX_DEPTH`] is
//! refused instead of recursing. `tests/data/flux-envsubst/port_differences.json` has a case
//! of each, with Go's result.
//!
//! The files follow the upstream package's (`envsubst/` in fluxcd/pkg), one for each Go file
//! ported: `scan.rs` (`parse/scan.go`), `node.rs` (`parse/node.go`), `parse.rs`
//! (`parse/parse.go`), `template.rs` (`template.go`), `eval.rs` (`eval.go`), `funcs.rs`
//! (`funcs.go`) and `glob.rs` (`path/match.go`). This file, the package documentation
//! (`doc.go`), also holds what has no upstream counterpart: the error type, [`scan()`] (which
//! reports the references instead of substituting them) and Flux's key-name rule
//! [`valid_name`].

mod eval;
mod funcs;
mod glob;
mod node;
mod parse;
mod scan;
mod template;
/// fluxcd/pkg's own test tables, run under every release's rules.
#[cfg(test)]
mod upstream;

pub use eval::substitute;
pub use parse::{MAX_DEPTH, ParseErrorKind};

/// What strict post-build substitution fails on, which depends on the release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strict {
    /// Strict mode off (the `StrictPostBuildSubstitutions` gate off, or a kustomize-controller
    /// before v1.3.0, which had no strict mode): an unset variable is the empty string.
    Off,
    /// envsubst before v1.6.0 (kustomize-controller v1.3.0 to v1.8.x): only a bare `${name}` of
    /// an unset variable fails (`node.Name == "" && !exists` in `template.go`).
    Bare,
    /// envsubst v1.6.0 and later (kustomize-controller v1.9.0 on): every operator but the
    /// defaults fails on an unset variable (fluxcd/pkg commit 8c54c729, fluxcd/flux2#5836).
    Operators,
}

/// The rules of one envsubst release, as kustomize-controller runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dialect {
    pub strict: Strict,
    /// `${v:pos:-n}` fails the layer: `toSubstr` sliced with the negative length and panicked,
    /// which the controller recovers as a reconcile error, until fluxcd/pkg#1275 gave it bash's
    /// meaning (backported as fluxcd/pkg#1287, shipped in kustomize-controller v1.9.5).
    pub negative_length_fails: bool,
}

impl Dialect {
    /// The newest release's rules.
    pub const NEWEST: Dialect = Dialect {
        strict: Strict::Operators,
        negative_length_fails: false,
    };
    /// The newest release's rules, strict mode off.
    pub const LAX: Dialect = Dialect {
        strict: Strict::Off,
        negative_length_fails: false,
    };
}

use node::Node;
use parse::Parser;

/// The regular expression Flux applies to the variable names it substitutes (its keys).
pub const NAME_PATTERN: &str = "^[_[:alpha:]][_[:alpha:][:digit:]]*$";

/// Whether `name` is a name Flux accepts as a substitution key (`NAME_PATTERN`, ASCII classes).
pub fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvsubstError {
    /// The text does not parse; nothing of it would be substituted.
    #[error("line {line}: {} in {snippet:?}", kind.message())]
    Parse {
        kind: ParseErrorKind,
        line: usize,
        offset: usize,
        snippet: String,
    },
    /// Strict mode: a variable without a value and without a default.
    #[error("line {line}: variable not set (strict mode): {name:?}")]
    NotSet { name: String, line: usize, offset: usize },
    /// A substring with a negative length, on a release where that panics.
    #[error("line {line}: substring with a negative length (the controller panics before v1.9.5)")]
    NegativeLength { line: usize, offset: usize },
}

/// One `${...}` expression (nested ones are reported separately).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference<'a> {
    pub name: &'a str,
    /// The operator after the name (`""`, `":="`, `"^^"`, `"#"` for `${#var}`, ...).
    pub op: &'a str,
    /// Byte offset of the `$` of `${`.
    pub offset: usize,
    /// 1-based line of the `$` of `${`.
    pub line: usize,
    /// `${v:pos:len}` with a literal negative `len`.
    pub negative_length: bool,
}

impl Reference<'_> {
    /// The operator supplies a value of its own when the variable is unset, so strict mode
    /// accepts it.
    pub fn has_default(&self) -> bool {
        template::is_default_op(self.op)
    }

    /// Whether strict mode `strict` fails this reference when its variable is unset.
    pub fn fails_unset(&self, strict: Strict) -> bool {
        template::fails_unset(strict, self.op)
    }
}

/// A malformed expression found by [`scan()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed {
    pub kind: ParseErrorKind,
    /// Byte offset of the `${` that starts the expression Flux refuses.
    pub offset: usize,
    pub line: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Reference(Reference<'a>),
    Malformed(Malformed),
}

/// A function's `${` offset, name range, operator range and whether its length is negative.
type FuncAt = (usize, (usize, usize), (usize, usize), bool);

/// 1-based line of byte `offset`, counting from `from` (at line `line_at_from`).
fn line_at(buf: &[u8], from: usize, line_at_from: usize, offset: usize) -> usize {
    let end = offset.min(buf.len());
    line_at_from + buf[from.min(end)..end].iter().filter(|&&b| b == b'\n').count()
}

/// Reports every `${...}` of `text` the way Flux's parser sees it (nested ones included, in
/// source order of their `${`), and every expression Flux would refuse. Flux stops at the first
/// malformed expression and substitutes nothing in that resource; the scan carries on after
/// its `${` so that one mistake does not hide the rest.
pub fn scan<'a>(text: &'a str, mut on: impl FnMut(Item<'a>)) {
    let buf = text.as_bytes();
    let mut from = 0;
    // Line bookkeeping is incremental: offsets only grow between reports of one parse.
    let (mut line_pos, mut line) = (0usize, 1usize);
    let mut line_of = |offset: usize| {
        if offset < line_pos {
            line_pos = 0;
            line = 1;
        }
        line = line_at(buf, line_pos, line, offset);
        line_pos = offset;
        line
    };
    loop {
        let mut p = Parser::new(buf, from);
        let result = p.parse_all();
        let mut funcs: Vec<FuncAt> = p
            .tree
            .nodes
            .iter()
            .filter_map(|n| match *n {
                Node::Func { at, param, op, args } => {
                    let negative = template::negative_length(text, &p.tree, op, args);
                    Some((at, param, op, negative))
                }
                Node::Text { .. } => None,
            })
            .collect();
        if result.is_err() {
            // The resumed parse finds what the refused expression contains.
            funcs.retain(|f| f.0 < p.expr_at);
        }
        funcs.sort_by_key(|f| f.0);
        for (at, param, op, negative_length) in funcs {
            let name = text.get(param.0..param.1).unwrap_or("");
            let op = text.get(op.0..op.1).unwrap_or("");
            on(Item::Reference(Reference {
                name,
                op,
                offset: at,
                line: line_of(at),
                negative_length,
            }));
        }
        match result {
            Ok(()) => return,
            Err(kind) => {
                let at = p.expr_at;
                on(Item::Malformed(Malformed {
                    kind,
                    offset: at,
                    line: line_of(at),
                }));
                // Resume right after the refused `${`.
                from = at + 2;
                if from >= buf.len() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sub(text: &str, pairs: &[(&str, &str)], strict: bool) -> Result<String, EnvsubstError> {
        sub_in(text, pairs, if strict { Dialect::NEWEST } else { Dialect::LAX })
    }

    fn sub_in(text: &str, pairs: &[(&str, &str)], dialect: Dialect) -> Result<String, EnvsubstError> {
        let v = vars(pairs);
        substitute(text, |k| v.get(k).map(String::as_str), dialect)
    }

    fn refs(text: &str) -> Vec<(String, String, usize, bool)> {
        let mut out = Vec::new();
        scan(text, |i| match i {
            Item::Reference(r) => out.push((r.name.to_owned(), r.op.to_owned(), r.line, r.has_default())),
            Item::Malformed(m) => out.push((String::new(), m.kind.message().to_owned(), m.line, false)),
        });
        out
    }

    #[test]
    fn default_forms_substitute_like_flux() {
        let set = [("var", "abc"), ("empty", "")];
        for (input, want) in [
            ("${var}", "abc"),
            ("${var:=xyz}", "abc"),
            ("${var=xyz}", "abc"),
            ("${var:-xyz}", "abc"),
            ("${unset:=xyz}", "xyz"),
            ("${unset=xyz}", "xyz"),
            ("${unset:-xyz}", "xyz"),
            // Flux's `toDefault`: an empty value takes the default for every operator...
            ("${empty=xyz}", "xyz"),
            // ...and `:+` / `:?` are defaults too, not bash's alternate value or error.
            ("${var:+xyz}", "abc"),
            ("${unset:?xyz}", "xyz"),
            ("${unset:=}", ""),
            ("a ${unset:=pre-${var}-post} b", "a pre-abc-post b"),
        ] {
            assert_eq!(sub(input, &set, true).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn dash_default_without_colon_is_refused_as_flux_does() {
        for input in ["${var-default}", "${var+x}", "${var?x}"] {
            let err = sub(input, &[("var", "abc")], true).unwrap_err();
            assert!(
                matches!(
                    err,
                    EnvsubstError::Parse {
                        kind: ParseErrorKind::MissingClosingBrace,
                        ..
                    }
                ),
                "{input}: {err}"
            );
        }
    }

    #[test]
    fn dollar_escapes_and_bare_dollar_names() {
        let set = [("var01", "abcdEFGH28ij")];
        assert_eq!(sub("$${var01}", &set, true).unwrap(), "${var01}");
        assert_eq!(sub("$$var01 and $var01", &set, true).unwrap(), "$var01 and $var01");
        assert_eq!(
            sub("some text ${var01}$${var$${var01}$var01${var01}", &set, true).unwrap(),
            "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij"
        );
        // A `$$` escape is plain text: nothing inside it is required in strict mode.
        assert_eq!(sub("$${missing}", &[], true).unwrap(), "${missing}");
        assert_eq!(
            sub(r"\\something ${var01}", &set, true).unwrap(),
            r"\\something abcdEFGH28ij"
        );
        assert_eq!(sub("price: 5$", &[], true).unwrap(), "price: 5$");
    }

    #[test]
    fn other_operators_follow_flux() {
        let set = [
            ("v", "abcdEFGH28ij"),
            ("path", "/home/bozo/ideas/thoughts.for.today"),
            ("z", "abcABC123ABCabc"),
            ("f", "bash.string.txt"),
            ("p", "/path/to/file"),
            ("s", "foo/bar/baz"),
        ];
        for (input, want) in [
            ("${#v}", "12"),
            ("${v^}", "AbcdEFGH28ij"),
            ("${v^^}", "ABCDEFGH28IJ"),
            ("${v,,}", "abcdefgh28ij"),
            ("${path:11}", "ideas/thoughts.for.today"),
            ("${path:11:5}", "ideas"),
            ("${path:-5}", "/home/bozo/ideas/thoughts.for.today"),
            ("${z/%abc/XYZ}", "abcABC123ABCXYZ"),
            ("${z/#abc/XYZ}", "XYZABC123ABCabc"),
            ("${z//abc/xyz}", "xyzABC123ABCxyz"),
            ("${z/abc/xyz}", "xyzABC123ABCabc"),
            ("${f#*.}", "string.txt"),
            ("${f##*.}", "txt"),
            ("${f%.*}", "bash.string"),
            ("${f%%.*}", "bash"),
            ("${p##*/}", "file"),
            (r"${s//\//-}", "foo-bar-baz"),
            ("${unset=${v^^}}", "ABCDEFGH28IJ"),
        ] {
            assert_eq!(sub(input, &set, false).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn strict_mode_names_the_variable_and_line() {
        let err = sub("a: 1\nb: ${cluster_name}\n", &[("x", "1")], true).unwrap_err();
        assert_eq!(
            err,
            EnvsubstError::NotSet {
                name: "cluster_name".into(),
                line: 2,
                offset: 8
            }
        );
        assert!(err.to_string().contains("cluster_name") && err.to_string().contains("line 2"));
        // Not strict: empty string.
        assert_eq!(sub("b: ${cluster_name}", &[], false).unwrap(), "b: ");
        // Transformations of an unset variable fail too; arguments are always evaluated.
        for input in [
            "${#missing}",
            "${missing^^}",
            "${missing:0:1}",
            "${missing/a/b}",
            "${set:=${missing}}",
        ] {
            assert!(
                matches!(sub(input, &[("set", "1")], true), Err(EnvsubstError::NotSet { .. })),
                "{input}"
            );
        }
        // `${1abc}` parses but can never be set.
        assert!(matches!(sub("${1abc}", &[], true), Err(EnvsubstError::NotSet { .. })));
    }

    #[test]
    fn strict_mode_before_envsubst_1_6_fails_only_a_bare_reference() {
        let bare = Dialect {
            strict: Strict::Bare,
            negative_length_fails: false,
        };
        assert!(matches!(
            sub_in("${missing}", &[], bare),
            Err(EnvsubstError::NotSet { .. })
        ));
        assert!(matches!(
            sub_in("${set:=${missing}}", &[("set", "1")], bare),
            Err(EnvsubstError::NotSet { .. })
        ));
        for (input, want) in [
            ("${#missing}", "0"),
            ("${missing^^}", ""),
            ("${missing:0:1}", ""),
            ("${missing/a/b}", ""),
            ("${missing%.*}", ""),
        ] {
            assert_eq!(sub_in(input, &[], bare).unwrap(), want, "{input}");
        }
        let mut seen = Vec::new();
        scan("${a} ${#b} ${c:=x} ${d^^}", |i| {
            if let Item::Reference(r) = i {
                seen.push((
                    r.name,
                    r.fails_unset(Strict::Bare),
                    r.fails_unset(Strict::Operators),
                    r.fails_unset(Strict::Off),
                ));
            }
        });
        assert_eq!(
            seen,
            [
                ("a", true, true, false),
                ("b", false, true, false),
                ("c", false, false, false),
                ("d", false, true, false)
            ]
        );
    }

    #[test]
    fn negative_substring_length_fails_before_the_fix_and_counts_from_the_end_after() {
        let old = Dialect {
            strict: Strict::Operators,
            negative_length_fails: true,
        };
        let set = [("region", "eu-west-1")];
        assert_eq!(sub("${region:0:-2}", &set, true).unwrap(), "eu-west");
        assert_eq!(
            sub_in("a\n${region:0:-2}", &set, old),
            Err(EnvsubstError::NegativeLength { line: 2, offset: 2 })
        );
        // Go's toSubstr returns "" before slicing when pos+length >= len(s).
        assert_eq!(sub_in("${region:12:-1}", &set, old).unwrap(), "");
        // Not a negative length: an offset Go's Atoi refuses (bash's `${v: -3}` space), and an
        // unparsable length; toSubstr returns the value for both.
        assert_eq!(sub_in("${region: -3:-2}", &set, old).unwrap(), "eu-west-1");
        assert_eq!(sub_in("${region:0:x}", &set, old).unwrap(), "eu-west-1");
        let mut negative = Vec::new();
        scan("${a:0:-1} ${a:1:2} ${a:-1} ${a:0:${n}} ${a: -1:-1}", |i| {
            if let Item::Reference(r) = i {
                negative.push((r.name, r.negative_length));
            }
        });
        assert_eq!(
            negative,
            [
                ("a", true),
                ("a", false),
                ("a", false),
                ("a", false),
                ("n", false),
                ("a", false)
            ]
        );
    }

    #[test]
    fn malformed_input_is_a_parse_error_with_line() {
        for (input, kind) in [
            ("x\n${", ParseErrorKind::ParseVariableName),
            ("x\n${}", ParseErrorKind::ParseVariableName),
            ("x\n${a", ParseErrorKind::MissingClosingBrace),
            ("x\n${a b}", ParseErrorKind::MissingClosingBrace),
            ("x\n${a:=b", ParseErrorKind::ParseFuncSubstitution),
            ("x\n${a^x}", ParseErrorKind::BadSubstitution),
            // An empty pattern is bash's, not Flux's: fluxcd/pkg's parseReplaceFunc reads the
            // pattern with acceptNotSlash, which accepts no first `/` (envsubst/parse/parse.go).
            ("x\n${a/#/prod-}", ParseErrorKind::ParseFuncSubstitution),
            ("x\n${a/%/-svc}", ParseErrorKind::ParseFuncSubstitution),
            ("x\n${a///}", ParseErrorKind::ParseFuncSubstitution),
            // A name is Go's unicode.IsLetter / IsDigit / `_` (parse/scan.go, isAlphaNumeric):
            // letter numbers (Nl), other numbers (No) and marks end it, where Rust's
            // is_alphabetic / is_numeric would read on.
            ("x\n${a\u{b2}:-x}", ParseErrorKind::MissingClosingBrace),
            ("x\n${a\u{bd}:-x}", ParseErrorKind::MissingClosingBrace),
            ("x\n${\u{2160}:-x}", ParseErrorKind::ParseVariableName),
            ("x\n${\u{915}\u{93f}:-x}", ParseErrorKind::MissingClosingBrace),
        ] {
            match sub(input, &[("a", "1")], false) {
                Err(EnvsubstError::Parse { kind: k, line, .. }) => {
                    assert_eq!((k, line), (kind, 2), "{input}")
                }
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    #[test]
    fn nul_ends_the_input_like_the_go_scanner() {
        assert_eq!(sub("a\0${b}", &[], true).unwrap(), "a");
    }

    #[test]
    fn scan_reports_nested_references_defaults_lines_and_recovers() {
        let text = "a: ${x}\nb: ${y:=${z}} $${no} $bare\nc: ${bad-default} ${w}\n";
        let want: Vec<(String, String, usize, bool)> = vec![
            ("x".into(), "".into(), 1, false),
            ("y".into(), ":=".into(), 2, true),
            ("z".into(), "".into(), 2, false),
            ("".into(), "missing closing brace".into(), 3, false),
            ("w".into(), "".into(), 3, false),
        ];
        assert_eq!(refs(text), want);
        // A reference nested in a refused expression is reported once.
        assert_eq!(refs("${a:=${b} x").iter().filter(|r| r.0 == "b").count(), 1);
    }

    #[test]
    fn valid_name_is_flux_key_regex() {
        assert!(valid_name("cluster_name") && valid_name("_x1"));
        assert!(!valid_name("1abc") && !valid_name("a-b") && !valid_name("a.b") && !valid_name(""));
        assert!(!valid_name("naïve"));
    }

    #[test]
    fn glob_classes_and_bad_patterns() {
        let set = [("v", "abc123")];
        assert_eq!(sub("${v#[a-c]}", &set, false).unwrap(), "bc123");
        assert_eq!(sub("${v##[a-c]*[0-9]}", &set, false).unwrap(), "");
        assert_eq!(sub("${v#[}", &set, false).unwrap(), "abc123");
        assert_eq!(sub("${v#*}", &set, false).unwrap(), "bc123");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn name() -> impl Strategy<Value = String> {
            "[a-z_][a-z0-9_]{0,8}"
        }

        fn template() -> impl Strategy<Value = (Vec<String>, String)> {
            let piece = prop_oneof![
                "[a-zA-Z0-9 :\n\"'#{}-]{0,12}".prop_map(|t| (None, t)),
                name().prop_map(|n| (Some(n.clone()), format!("${{{n}}}"))),
                (name(), "[a-z0-9 ]{0,6}", prop_oneof![Just(":="), Just("="), Just(":-")])
                    .prop_map(|(n, d, op)| (Some(n.clone()), format!("${{{n}{op}{d}}}"))),
                name().prop_map(|n| (None, format!("$${{{n}}}"))),
                name().prop_map(|n| (None, format!("${n}"))),
            ];
            proptest::collection::vec(piece, 0..12).prop_map(|pieces| {
                let names = pieces.iter().filter_map(|(n, _)| n.clone()).collect();
                let text = pieces.into_iter().map(|(_, t)| t).collect();
                (names, text)
            })
        }

        proptest! {
            #[test]
            fn all_variables_set_never_reports_missing((names, text) in template()) {
                let vars: BTreeMap<String, String> =
                    names.iter().map(|n| (n.clone(), format!("value-of-{n}"))).collect();
                let result = substitute(&text, |k| vars.get(k).map(String::as_str), Dialect::NEWEST);
                prop_assert!(!matches!(result, Err(EnvsubstError::NotSet { .. })), "{result:?} for {text:?}");
                let mut missing = Vec::new();
                scan(&text, |i| match i {
                    Item::Reference(r) if !r.has_default() && !vars.contains_key(r.name) => missing.push(r.name.to_owned()),
                    _ => {}
                });
                prop_assert!(missing.is_empty(), "{missing:?} in {text:?}");
            }

            #[test]
            fn text_without_dollar_is_unchanged(text in "[^$\u{0}]{0,200}") {
                prop_assert_eq!(substitute(&text, |_| None, Dialect::NEWEST).unwrap(), text);
            }

            #[test]
            fn arbitrary_input_never_panics(text in "\\PC{0,64}|[${}:=#%/^,\\\\a-c-]{0,64}") {
                let _ = substitute(&text, |k| (k == "a").then_some("v"), Dialect::NEWEST);
                scan(&text, |_| {});
            }
        }
    }
}
