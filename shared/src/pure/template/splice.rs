//! Values written into the template's own text in place: over the scalar that holds one, in a
//! style that reads back as the same string, or as a new entry at the head of its block mapping
//! with the document's indentation. Shared by a new cell's `gotk-sync.yaml` (`gotk_sync/`) and
//! its `FluxInstance` (`flux_instance.rs`): each splices, then reads the result back.

use std::ops::Range;

use serde_saphyr::granit_parser::{ScalarStyle, StructureStyle};

use crate::pure::yaml::{Node, Scalar};

/// Where a value goes: over the scalar that holds it, or a new entry before the first key of its
/// block mapping.
#[derive(Debug, Clone)]
pub(super) enum Slot {
    Value {
        span: Range<usize>,
        style: ScalarStyle,
    },
    Insert {
        at: usize,
        /// The mapping's indentation, and one level of the document's indentation.
        indent: String,
        step: String,
    },
}

pub(super) type Edit = (Range<usize>, String);

impl Slot {
    pub(super) fn edit(&self, key: &str, value: &str) -> Edit {
        match self {
            Slot::Value { span, style } => (span.clone(), scalar(value, *style)),
            Slot::Insert { at, indent, .. } => (
                *at..*at,
                format!("{key}: {}\n{indent}", scalar(value, ScalarStyle::Plain)),
            ),
        }
    }

    /// `ref:` with `branch:` below it, as a new entry.
    pub(super) fn edit_ref(&self, branch: &str) -> Edit {
        match self {
            Slot::Insert { at, indent, step } => (
                *at..*at,
                format!(
                    "ref:\n{indent}{step}branch: {}\n{indent}",
                    scalar(branch, ScalarStyle::Plain)
                ),
            ),
            Slot::Value { .. } => unreachable!("a `ref` slot is always an insertion"),
        }
    }
}

/// `value` as a YAML scalar in (about) the style of the one it replaces: plain when plain reads
/// back as this very string, single-quoted for a single-quoted one, else a double-quoted JSON
/// string (valid YAML).
fn scalar(value: &str, style: ScalarStyle) -> String {
    match style {
        ScalarStyle::Plain if plain_ok(value) => value.to_owned(),
        ScalarStyle::SingleQuoted if !value.chars().any(char::is_control) => {
            format!("'{}'", value.replace('\'', "''"))
        }
        _ => serde_json::to_string(value).expect("a string serializes"),
    }
}

fn plain_ok(value: &str) -> bool {
    let simple = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || "./_".contains(c))
        && !value.ends_with(':')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@~+=".contains(c));
    // `true`, `1.0`, `null`, `0x1f`, `.inf` are plain too, but not strings.
    simple
        && serde_saphyr::from_str::<serde_json::Value>(&format!("v: {value}"))
            .is_ok_and(|v| v["v"].as_str() == Some(value))
}

/// The slot of `key` in `map`, the value of `parent` (whose key scalar is given). `owner` names
/// the object in errors ("the GitRepository `flux-system`"), and `at` the path of `parent`
/// ("spec", "spec.sync").
pub(super) fn slot(
    text: &str,
    parent: &Scalar,
    map: &Node,
    key: &str,
    (owner, at): (&str, &str),
) -> Result<Slot, String> {
    let field = format!("{owner}'s `{at}.{key}`");
    match map.get(key) {
        Some(Node::Scalar(s)) if s.is_null() => Err(format!("{field} is empty: give it a value")),
        Some(Node::Scalar(s)) => match s.style {
            ScalarStyle::Plain | ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => Ok(Slot::Value {
                span: s.start..s.end,
                style: s.style,
            }),
            _ => Err(format!("{field} is a block scalar: write it on one line")),
        },
        Some(_) => Err(format!("{field} is not a string")),
        None => {
            let Node::Map(entries, _, StructureStyle::Block) = map else {
                return Err(format!(
                    "{field} is missing and `{at}` is not a block mapping to add it to"
                ));
            };
            let Some((Node::Scalar(first), _)) = entries.first() else {
                return Err(format!("{field} is missing and `{at}` has no entries"));
            };
            let indent =
                line_prefix(text, first.start).ok_or_else(|| format!("{field} is missing and cannot be added"))?;
            let outer = line_prefix(text, parent.start).map_or(0, str::len);
            let step = indent.len().checked_sub(outer).filter(|s| *s > 0).unwrap_or(2);
            Ok(Slot::Insert {
                at: first.start,
                indent: indent.to_owned(),
                step: " ".repeat(step),
            })
        }
    }
}

/// `text` with every edit made; edits never overlap, and two insertions at one place keep the
/// order they are given in.
pub(super) fn apply(text: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(text.len() + 64);
    let mut pos = 0;
    for (range, with) in &edits {
        out.push_str(&text[pos..range.start]);
        out.push_str(with);
        pos = range.end;
    }
    out.push_str(&text[pos..]);
    out
}

/// The spaces before `at` on its line; `None` when anything else is there.
fn line_prefix(text: &str, at: usize) -> Option<&str> {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &text[start..at];
    prefix.bytes().all(|b| b == b' ').then_some(prefix)
}
