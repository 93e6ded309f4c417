//! The record cellbridge keeps in what it writes on GitHub: `<!-- cellbridge:field=value ... -->`
//! lines in a pull request's body (invisible once rendered). Every field cellbridge reads back
//! (kind, serial and lineage, values digest, base, head, state key, auto-merge coverage and
//! verdict, who enabled auto-merge, refused, conflict, closed by cellbridge) is read and written
//! here, and only here.
//!
//! - Read: the fields of every record line of the body, in any order; where a field stands on two
//!   lines, the later one wins (a line appended later says what happened later).
//! - Write: one field set or removed, every other field and every other character of the body
//!   left as it is: fields this release does not know (written by a later release, or by an
//!   earlier one) are kept, and so is whatever a person wrote around the record.
//!
//! Bodies written by earlier releases carry the same fields in other orders and on other lines
//! (`serial`/`lineage` on the plan's line, the rest on the last line, `kind` first, `conflict`
//! and `refused` put first when set): all of them read the same way.
//!
//! A body is text a person can edit. What the head itself can tell (which files it changes, who
//! enabled auto-merge) is decided from the head, never from here; the record holds what only
//! cellbridge knows (what it proposed, from which state, on which base).

use std::collections::BTreeMap;

/// How a record line starts.
pub const OPEN: &str = "<!-- cellbridge:";
const CLOSE: &str = "-->";

/// Which kind of proposal a pull request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The cell's `cell-metadata` values (a new cell's whole directory, or changed values).
    Metadata,
    /// The removal of a destroyed cell's directory.
    Decommission,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Metadata => "metadata",
            Kind::Decommission => "decommission",
        }
    }
}

/// The fields of a body's record lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    fields: BTreeMap<String, String>,
}

impl Record {
    /// Every field of every record line of `body` (a later line's value wins).
    pub fn read(body: &str) -> Self {
        let mut fields = BTreeMap::new();
        for (_, inner) in lines(body) {
            for (k, v) in words(&body[inner.clone()]) {
                fields.insert(k.to_owned(), v.to_owned());
            }
        }
        Self { fields }
    }

    /// A field's value; `None` when absent or empty.
    pub fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }

    /// Every field, by name.
    pub fn fields(&self) -> &BTreeMap<String, String> {
        &self.fields
    }

    /// The proposal's kind: a body without `kind` (every metadata pull request of earlier
    /// releases) is a metadata one.
    pub fn kind(&self) -> Kind {
        match self.get("kind") {
            Some("decommission") => Kind::Decommission,
            _ => Kind::Metadata,
        }
    }

    /// The state's serial and lineage the body was written from.
    pub fn serial(&self) -> Option<(u64, String)> {
        Some((self.get("serial")?.parse().ok()?, self.get("lineage")?.to_owned()))
    }

    /// Whether cellbridge closed it itself (never a person's close).
    pub fn closed_by_cellbridge(&self) -> bool {
        self.get(CLOSED).is_some()
    }
}

/// The field cellbridge sets when it closes a pull request itself.
pub const CLOSED: &str = "closed";

/// `field` of `body`'s record.
pub fn field(body: &str, field: &str) -> Option<String> {
    Record::read(body).get(field).map(str::to_owned)
}

/// A record line holding `fields` (names and values hold no white space).
pub fn line(fields: &[(&str, &str)]) -> String {
    let words: Vec<String> = fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{OPEN}{} {CLOSE}", words.join(" "))
}

/// A value as a record field holds it: no space (a state key may have spaces), as every release
/// wrote it.
pub fn value(s: &str) -> String {
    s.replace(' ', "%20")
}

/// A field's value as it was given to [`value`].
pub fn unvalue(s: &str) -> String {
    s.replace("%20", " ")
}

/// `body` with `field` set to `value` (`None`: removed), nothing else changed. A field already
/// there is replaced where it stands (on every line that has it); a new one goes at the end of
/// the last record line; a body without a record line gets one.
pub fn with_field(body: &str, field: &str, value: Option<&str>) -> String {
    let value = value.filter(|v| !v.is_empty());
    let found = lines(body);
    let has = found
        .iter()
        .any(|(_, inner)| words(&body[inner.clone()]).any(|(k, _)| k == field));
    let Some(last) = found.last().map(|(_, inner)| inner.clone()) else {
        return match value {
            Some(v) => format!("{}\n{}\n", body.trim_end(), line(&[(field, v)])),
            None => body.to_owned(),
        };
    };
    let mut out = String::with_capacity(body.len() + field.len() + 16);
    let mut at = 0;
    for (whole, inner) in &found {
        let text = &body[inner.clone()];
        let mut kept: Vec<String> = Vec::new();
        for w in text.split_whitespace() {
            match w.split_once('=') {
                Some((k, _)) if k == field => {
                    if let Some(v) = value {
                        kept.push(format!("{field}={v}"));
                    }
                }
                _ => kept.push(w.to_owned()),
            }
        }
        if !has
            && *inner == last
            && let Some(v) = value
        {
            kept.push(format!("{field}={v}"));
        }
        out.push_str(&body[at..whole.start]);
        if kept.is_empty() {
            // A line left with no field goes, with its line break.
            at = whole.end;
            if body[at..].starts_with('\n') {
                at += 1;
            }
            continue;
        }
        out.push_str(OPEN);
        out.push_str(&kept.join(" "));
        out.push(' ');
        out.push_str(CLOSE);
        at = whole.end;
    }
    out.push_str(&body[at..]);
    out
}

/// Each record line of `text`: (the whole line's span, its fields' span).
fn lines(text: &str) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(OPEN) {
        let start = from + i;
        let inner = start + OPEN.len();
        // A record line never spans lines: an unclosed one is not a record.
        let Some(len) = text[inner..]
            .find(CLOSE)
            .filter(|len| !text[inner..inner + len].contains('\n'))
        else {
            from = inner;
            continue;
        };
        let end = inner + len + CLOSE.len();
        found.push((start..end, inner..inner + len));
        from = end;
    }
    found
}

/// The `name=value` words of a record line's inside (words without `=`, or with an empty
/// value, are no field).
fn words(inner: &str) -> impl Iterator<Item = (&str, &str)> {
    inner
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_layout_of_earlier_releases_reads_the_same() {
        let layouts = [
            // The metadata body: the plan's serial line, then the last line.
            "text\n<!-- cellbridge:serial=3 lineage=L -->\n<!-- cellbridge:digest=d base=b head=h values=v key=k optin=- -->\n",
            // A conflict or a refusal, put first on the last line.
            "text\n<!-- cellbridge:serial=3 lineage=L -->\n<!-- cellbridge:conflict=asked refused=r digest=d base=b head=h values=v key=k -->\n",
            // Closed by cellbridge: a line of its own after the rest.
            "text\n<!-- cellbridge:serial=3 lineage=L -->\n<!-- cellbridge:digest=d base=b head=h values=v key=k -->\n<!-- cellbridge:closed=in-sync -->\n",
        ];
        for body in layouts {
            let r = Record::read(body);
            assert_eq!(r.serial(), Some((3, "L".into())), "{body}");
            assert_eq!(
                (r.get("digest"), r.get("base"), r.get("values")),
                (Some("d"), Some("b"), Some("v"))
            );
            assert_eq!(r.kind(), Kind::Metadata);
        }
        assert!(Record::read(layouts[2]).closed_by_cellbridge());
        assert!(!Record::read(layouts[0]).closed_by_cellbridge());
    }

    #[test]
    fn a_decommission_is_one_whatever_field_was_set_first_since() {
        let body =
            "gone\n<!-- cellbridge:serial=4 lineage=L -->\n<!-- cellbridge:kind=decommission digest=d base=b -->\n";
        for (f, v) in [("conflict", "asked"), ("refused", "r"), ("automerge", "x")] {
            let set = with_field(body, f, Some(v));
            assert_eq!(Record::read(&set).kind(), Kind::Decommission, "{set}");
            // What earlier releases wrote: the new field first on the line.
            let first = body.replace("cellbridge:kind=", &format!("cellbridge:{f}={v} kind="));
            assert_eq!(Record::read(&first).kind(), Kind::Decommission, "{first}");
        }
    }

    #[test]
    fn a_field_is_set_in_place_and_removed_everywhere() {
        let body =
            "a\n<!-- cellbridge:serial=1 lineage=L -->\n<!-- cellbridge:digest=d refused=r future=7 -->\nafter\n";
        let set = with_field(body, "refused", Some("s"));
        assert_eq!(
            set,
            "a\n<!-- cellbridge:serial=1 lineage=L -->\n<!-- cellbridge:digest=d refused=s future=7 -->\nafter\n"
        );
        let added = with_field(body, "conflict", Some("asked"));
        assert!(added.contains("future=7 conflict=asked -->\nafter\n"), "{added}");
        let removed = with_field(body, "refused", None);
        assert_eq!(Record::read(&removed).get("refused"), None);
        assert_eq!(
            Record::read(&removed).get("future"),
            Some("7"),
            "an unknown field is kept"
        );
        let only = "x\n<!-- cellbridge:closed=in-sync -->\ny";
        assert_eq!(with_field(only, "closed", None), "x\ny");
        assert_eq!(
            with_field("plain", "kind", Some("metadata")),
            "plain\n<!-- cellbridge:kind=metadata -->\n"
        );
        assert_eq!(with_field("plain", "kind", None), "plain");
    }

    #[test]
    fn values_with_spaces_round_trip() {
        let key = "cells/eu 1/terraform.tfstate";
        let body = line(&[("key", &value(key))]);
        assert_eq!(unvalue(Record::read(&body).get("key").unwrap()), key);
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z][a-z-]{0,8}"
    }

    fn val() -> impl Strategy<Value = String> {
        "[A-Za-z0-9%._/:-]{1,12}"
    }

    /// Text a person may write around the record: anything but the record's own delimiters.
    fn prose() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                "[ -~]{0,20}".prop_filter("no record delimiters", |s| !s.contains("<!--") && !s.contains("-->")),
                Just("\n".to_owned()),
                Just("| key | old | new |\n".to_owned()),
                Just("<!-- a person's comment -->".to_owned()),
            ],
            0..6,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        /// Any edit a person makes outside the record, and setting any one field, leaves every
        /// other field as it was.
        #[test]
        fn a_persons_edit_and_one_field_set_leave_every_other_field(
            lines_fields in proptest::collection::vec(proptest::collection::btree_map(name(), val(), 1..5), 1..4),
            around in proptest::collection::vec(prose(), 4),
            target in name(),
            new in proptest::option::of(val()),
        ) {
            let mut body = around[0].clone();
            let mut expected = BTreeMap::new();
            for (i, fields) in lines_fields.iter().enumerate() {
                let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                body.push('\n');
                body.push_str(&line(&pairs));
                body.push('\n');
                body.push_str(&around[1 + i.min(2)]);
                for (k, v) in fields {
                    expected.insert(k.clone(), v.clone());
                }
            }
            // A person's edit outside the record: text before, between and after its lines.
            let edited = format!("{}{body}{}", around[3], around[1]);
            prop_assert_eq!(Record::read(&edited).fields().clone(), expected.clone());
            let set = with_field(&edited, &target, new.as_deref());
            match &new {
                Some(v) => { expected.insert(target.clone(), v.clone()); }
                None => { expected.remove(&target); }
            }
            prop_assert_eq!(Record::read(&set).fields().clone(), expected.clone());
            // Outside the record, the person's text is as they left it.
            let strip = |s: &str| {
                let mut out = String::new();
                let mut at = 0;
                for (whole, _) in lines(s) {
                    out.push_str(&s[at..whole.start]);
                    at = whole.end;
                }
                out.push_str(&s[at..]);
                out.replace('\n', "")
            };
            prop_assert_eq!(strip(&set), strip(&edited));
        }
    }
}
