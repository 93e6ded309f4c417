//! Scanning what a layer builds for `${...}`: each YAML document scalar by scalar (or a
//! generator file as a whole), with every `${` mapped back to its line; the findings are made
//! here.

use std::collections::BTreeSet;

use crate::pure::envsubst::{self, Dialect, Item, ParseErrorKind, Strict};
use crate::pure::fleet::FleetRead;

use super::build::{Role, Unit};
use super::layers::FluxLayer;
use super::release::FluxRelease;
use super::reserialise::{self, Style};
use super::sources::{LayerVars, Verdict};
use super::yaml;
use super::{CheckError, CheckReport, Finding, FindingKind, SUBSTITUTE_KEY, Unverified, invalid, read};

pub(super) fn scan_unit(
    fleet: &dyn FleetRead,
    unit: &Unit,
    (layer, release): (&FluxLayer, &FluxRelease),
    vars: &LayerVars,
    used: &mut BTreeSet<String>,
    out: &mut CheckReport,
) -> Result<(), CheckError> {
    let mut sink = Sink {
        file: unit.path(),
        layer,
        release,
        vars,
        used,
        findings: &mut out.findings,
        unverified: &mut out.unverified,
        warnings: &mut out.warnings,
        not_checked: &mut out.not_checked,
    };
    match unit {
        Unit::File {
            path,
            role: Role::Manifest,
        } => {
            let text = read(fleet, path)?;
            // A file with no `${` is skipped unless a double-quoted escape (`\x24`, `\u0024`,
            // `\u007b`...) could write one: kustomize hands envsubst the parsed value
            // re-serialised, where the escape is gone.
            if !text.contains("${") && !["\\x", "\\u", "\\U"].iter().any(|e| text.contains(e)) {
                return Ok(());
            }
            let lines = LineIndex::new(&text);
            for doc in yaml::documents(&text).map_err(|r| invalid(path, r))? {
                if substitution_disabled(&doc) {
                    continue;
                }
                doc.walk_scalars(&mut |s| sink.scalar(&text, &lines, s));
            }
        }
        Unit::File { path, role } => {
            let text = read(fleet, path)?;
            let env = *role == Role::Env;
            let text = flux_view(&text);
            envsubst::scan(&text, |item| {
                let line = match item {
                    Item::Reference(r) => r.line,
                    Item::Malformed(m) => m.line,
                };
                // kustomize drops comment lines of env files.
                let comment = env
                    && text
                        .lines()
                        .nth(line - 1)
                        .is_some_and(|l| l.trim_start().starts_with('#'));
                if !comment {
                    sink.item(&text, item, &|_| line);
                }
            });
        }
        Unit::Inline { path, scalar } => {
            let text = read(fleet, path)?;
            let lines = LineIndex::new(&text);
            sink.scalar(&text, &lines, scalar);
        }
    }
    Ok(())
}

/// A value as envsubst meets it in kustomize-controller: yaml.v2 re-serialises it first, writing
/// a NUL as the escape `\0`, so the Go scanner's end-of-input at a NUL never comes. One byte for
/// one keeps every offset where it was.
fn flux_view(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains('\0') {
        value.replace('\0', " ").into()
    } else {
        value.into()
    }
}

/// `kustomize.toolkit.fluxcd.io/substitute: disabled` as a label or an annotation.
fn substitution_disabled(doc: &yaml::Node) -> bool {
    let meta = doc.get("metadata");
    ["labels", "annotations"].iter().any(|f| {
        meta.and_then(|m| m.get(f))
            .and_then(|m| m.get(SUBSTITUTE_KEY))
            .and_then(yaml::Node::str)
            == Some("disabled")
    })
}

struct Sink<'a> {
    file: &'a str,
    layer: &'a FluxLayer,
    release: &'a FluxRelease,
    vars: &'a LayerVars,
    used: &'a mut BTreeSet<String>,
    findings: &'a mut Vec<Finding>,
    unverified: &'a mut Vec<Unverified>,
    /// Unset variables the cell's release substitutes as empty.
    warnings: &'a mut Vec<Finding>,
    not_checked: &'a mut Vec<String>,
}

impl Sink<'_> {
    fn scalar(&mut self, text: &str, lines: &LineIndex, s: &yaml::Scalar) {
        if !s.value.contains("${") {
            return;
        }
        // The n-th `${` of the value is the n-th `${` of its source text, unless YAML escapes
        // or folding changed it; then fall back to the scalar's line plus the newlines before.
        let raw = text.get(s.start..s.end).unwrap_or("");
        let raw_at: Vec<usize> = raw.match_indices("${").map(|(i, _)| s.start + i).collect();
        let value_at: Vec<usize> = s.value.match_indices("${").map(|(i, _)| i).collect();
        let line_of = |offset: usize| -> usize {
            match value_at.binary_search(&offset) {
                Ok(n) if raw_at.len() == value_at.len() => lines.line(raw_at[n]),
                _ => s.line + s.value[..offset.min(s.value.len())].matches('\n').count(),
            }
        };
        let value = flux_view(&s.value);
        // One scan serves both checks: the references one by one, then the value as a whole.
        let mut names: Vec<(&str, bool)> = Vec::new();
        let mut malformed = false;
        envsubst::scan(&value, |item| {
            match item {
                Item::Reference(r) => names.push((r.name, r.has_default())),
                Item::Malformed(_) => malformed = true,
            }
            self.item(&value, item, &line_of)
        });
        if let Some(first) = value.find("${")
            && !malformed
        {
            self.reserialised(&value, &names, line_of(first));
        }
    }

    /// With every value it references known, is the scalar still YAML once substituted the way
    /// kustomize-controller substitutes it (see `reserialise.rs`)?
    /// `names`: the value's references and whether each has a default; a malformed value is
    /// refused by Flux's parser before any YAML is read, and never comes here.
    fn reserialised(&mut self, value: &str, names: &[(&str, bool)], line: usize) {
        if self.vars.values.is_empty() && self.vars.unread_values.is_empty() {
            return;
        }
        let mut unread = Vec::new();
        for &(name, has_default) in names {
            match self.vars.values.get(name) {
                Some(Some(_)) => {}
                Some(None) => unread.push(name),
                None if has_default => {}
                // Unset: already a finding or a warning of its own.
                None => return,
            }
        }
        if !unread.is_empty() {
            for name in unread {
                // Once per layer and variable: the same sentence for every use says nothing new.
                self.not_checked.push(format!(
                    "layer {}: whether `${{{name}}}` keeps each resource YAML once substituted: its value may come from {}, which the check does not read",
                    self.layer.name,
                    self.vars.unread_values.join(" or ")
                ));
            }
            return;
        }
        let style = reserialise::style(value);
        if style == Style::Literal {
            return;
        }
        let emitted = reserialise::emit(value, style);
        let substituted = |only: Option<&str>| {
            envsubst::substitute(
                &emitted,
                |k| match only {
                    // The others set to a value that cannot break anything, to find the culprit.
                    Some(o) if o != k => Some("x"),
                    _ => self.vars.values.get(k).and_then(|v| v.as_deref()),
                },
                Dialect::LAX,
            )
            .ok()
        };
        let Some(text) = substituted(None) else { return };
        let Some((at, why)) = reserialise::refused(&text, style) else {
            return;
        };
        let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        let mut culprits: Vec<&str> = all
            .iter()
            .copied()
            .filter(|n| substituted(Some(n)).is_some_and(|t| reserialise::refused(&t, style).is_some()))
            .collect();
        if culprits.is_empty() {
            // No one value breaks it alone: they do together.
            culprits = all;
        }
        culprits.sort_unstable();
        culprits.dedup();
        let c = text[at..].chars().next().unwrap_or(' ');
        let message = format!(
            "with the value of {} substituted, this value is no longer YAML Flux can read: {why} (at `{}`); Flux fails the whole layer (YAMLToJSON). kustomize re-serialises the resource without the quotes written here, so change the value",
            culprits
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(" and "),
            c.escape_default()
        );
        self.push(line, culprits[0].to_owned(), message, FindingKind::Value);
    }

    fn item(&mut self, text: &str, item: Item<'_>, line_of: &dyn Fn(usize) -> usize) {
        match item {
            Item::Reference(r) => {
                self.used.insert(r.name.to_owned());
                if empty_flows_through(r.op) && self.vars.values.get(r.name) == Some(&Some(String::new())) {
                    self.warnings.push(Finding {
                        file: self.file.to_owned(),
                        line: line_of(r.offset),
                        variable: r.name.to_owned(),
                        layer: self.layer.name.clone(),
                        message: format!(
                            "`{}` is set to an empty string, so Flux writes `\"\"` here (it accepts an empty value: a warning, not a failure); give it a value in Terraform, or a default the empty value takes (`${{{}:=...}}`)",
                            r.name, r.name
                        ),
                        kind: FindingKind::Empty,
                    });
                }
                let dialect = self.release.dialect();
                if r.negative_length && dialect.negative_length_fails {
                    let expr = expression_at(text, r.offset);
                    let message = format!(
                        "`{expr}`: a negative substring length makes {} panic, and the layer fails (bash's meaning, counting from the end, came with v1.9.5)",
                        self.release.describe()
                    );
                    self.push(line_of(r.offset), r.name.to_owned(), message, FindingKind::Release);
                }
                if r.has_default() {
                    return;
                }
                let did_you_mean = match self.vars.verdict(r.name) {
                    Verdict::Set => return,
                    Verdict::Unverified(sources) => {
                        self.unverified.push(Unverified {
                            file: self.file.to_owned(),
                            line: line_of(r.offset),
                            variable: r.name.to_owned(),
                            layer: self.layer.name.clone(),
                            sources: sources.to_vec(),
                        });
                        return;
                    }
                    Verdict::NotSet { did_you_mean } => did_you_mean,
                };
                let sources = LayerVars::describe(self.layer);
                let mut message = if sources.is_empty() {
                    format!(
                        "variable not set (strict mode): `{}` has no inline substitute and no default, and the layer substitutes from no ConfigMap or Secret",
                        r.name
                    )
                } else {
                    format!(
                        "variable not set (strict mode): `{}` is a key of none of the layer's sources ({sources}), has no inline substitute and no default",
                        r.name
                    )
                };
                if let Some(k) = did_you_mean {
                    message.push_str(&format!("; did you mean `{k}`?"));
                }
                if !envsubst::valid_name(r.name) {
                    message.push_str(&format!(
                        "; `{}` can never be a key (names match {})",
                        r.name,
                        envsubst::NAME_PATTERN
                    ));
                }
                if r.fails_unset(dialect.strict) {
                    self.push(line_of(r.offset), r.name.to_owned(), message, FindingKind::Unset);
                } else {
                    // The release applies it with an empty string: worth knowing, not a failure.
                    let why = if dialect.strict == Strict::Off {
                        String::new()
                    } else {
                        format!(" (only a bare `${{{}}}` fails before v1.9.0)", r.name)
                    };
                    let message = format!(
                        "{}; Flux substitutes an empty string: {}{why}",
                        message.replacen("variable not set (strict mode)", "variable not set", 1),
                        self.release.describe()
                    );
                    self.warnings.push(Finding {
                        file: self.file.to_owned(),
                        line: line_of(r.offset),
                        variable: r.name.to_owned(),
                        layer: self.layer.name.clone(),
                        message,
                        kind: FindingKind::Unset,
                    });
                }
            }
            Item::Malformed(m) => {
                let rest = &text[m.offset..];
                let end = rest.find('\n').unwrap_or(rest.len()).min(40);
                let end = (0..=end).rev().find(|&i| rest.is_char_boundary(i)).unwrap_or(0);
                let snippet = &rest[..end];
                let mut message = format!(
                    "bad substitution: {} in `{snippet}`; Flux refuses the whole resource",
                    m.kind.message()
                );
                if m.kind == ParseErrorKind::MissingClosingBrace
                    && let Some(c) = rest[2..]
                        .trim_start_matches(|c: char| c.is_alphanumeric() || c == '_')
                        .chars()
                        .next()
                    && matches!(c, '-' | '+' | '?')
                {
                    message.push_str(&format!(
                        " (Flux has no `${{name{c}word}}` form: write `${{name:{c}word}}`)"
                    ));
                }
                self.push(line_of(m.offset), String::new(), message, FindingKind::Malformed);
            }
        }
    }

    fn push(&mut self, line: usize, variable: String, message: String, kind: FindingKind) {
        self.findings.push(Finding {
            file: self.file.to_owned(),
            line,
            variable,
            layer: self.layer.name.clone(),
            message,
            kind,
        });
    }
}

/// Whether an empty value reaches the output through this operator: the plain form, `=` (a
/// default only when unset) and the case changes do; `:=`, `:-` take their default for an empty
/// value too, `:+`/`+` write their alternative, and `#` a length.
fn empty_flows_through(op: &str) -> bool {
    matches!(op, "" | "=" | "-" | "^" | "^^" | "," | ",,")
}

/// The first `${...}` reference Flux would substitute in what a layer builds (file, line, name
/// and expression), for a layer whose substitution kustomize-controller skips.
pub(super) fn first_reference(
    fleet: &dyn FleetRead,
    units: &[Unit],
) -> Result<Option<(String, usize, String, String)>, CheckError> {
    for unit in units {
        let found = match unit {
            Unit::File {
                path,
                role: Role::Manifest,
            } => {
                let text = read(fleet, path)?;
                if !text.contains("${") {
                    continue;
                }
                let lines = LineIndex::new(&text);
                let mut first = None;
                for doc in yaml::documents(&text).map_err(|r| invalid(path, r))? {
                    if first.is_some() || substitution_disabled(&doc) {
                        continue;
                    }
                    doc.walk_scalars(&mut |s| {
                        if first.is_none() {
                            first = first_in_value(&s.value).map(|(at, name, expr)| {
                                // The n-th `${` of the value is the n-th of its source text unless
                                // escapes or folding changed it (as in `Sink::scalar`).
                                let raw = text.get(s.start..s.end).unwrap_or("");
                                let n = s.value[..at].matches("${").count();
                                let line = match raw.match_indices("${").nth(n) {
                                    Some((i, _)) if raw.matches("${").count() == s.value.matches("${").count() => {
                                        lines.line(s.start + i)
                                    }
                                    _ => s.line + s.value[..at].matches('\n').count(),
                                };
                                (line, name, expr)
                            });
                        }
                    });
                }
                first
            }
            Unit::File { path, .. } => {
                let text = read(fleet, path)?;
                first_in_value(&text).map(|(at, name, expr)| (1 + text[..at].matches('\n').count(), name, expr))
            }
            Unit::Inline { scalar, .. } => first_in_value(&scalar.value)
                .map(|(at, name, expr)| (scalar.line + scalar.value[..at].matches('\n').count(), name, expr)),
        };
        if let Some((line, name, expr)) = found {
            return Ok(Some((unit.path().to_owned(), line, name, expr)));
        }
    }
    Ok(None)
}

/// The first reference of a value: its offset, variable and expression.
fn first_in_value(value: &str) -> Option<(usize, String, String)> {
    if !value.contains("${") {
        return None;
    }
    let value = flux_view(value);
    let mut first = None;
    envsubst::scan(&value, |item| {
        if let (None, Item::Reference(r)) = (&first, item) {
            first = Some((r.offset, r.name.to_owned(), expression_at(&value, r.offset).to_owned()));
        }
    });
    first
}

/// The `${...}` starting at `offset`, up to its closing brace (nesting counted), for a message.
fn expression_at(text: &str, offset: usize) -> &str {
    let rest = &text[offset..];
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &rest[..=i];
                }
            }
            '\n' => break,
            _ => {}
        }
    }
    rest.lines().next().unwrap_or(rest)
}

struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    /// 1-based line of a byte offset.
    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}
