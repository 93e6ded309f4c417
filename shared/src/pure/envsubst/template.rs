//! Follows `envsubst/template.go` of fluxcd/pkg: executing the parse tree (`Template.eval`,
//! `evalText`, `evalFunc`) and `isDefaultOp`.

use std::borrow::Cow;

use super::funcs::{apply, atoi};
use super::node::Node;
use super::parse::Tree;
use super::scan::{ESC_BACKSLASH, ESC_DOLLAR};
use super::{Dialect, EnvsubstError, Strict, line_at};

pub(super) fn is_default_op(op: &str) -> bool {
    matches!(op, "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?")
}

/// `evalFunc`'s unset check, by release: from envsubst v1.6.0 `!exists && !isDefaultOp(name)`,
/// before it `node.Name == "" && !exists`.
pub(super) fn fails_unset(strict: Strict, op: &str) -> bool {
    match strict {
        Strict::Off => false,
        Strict::Bare => op.is_empty(),
        Strict::Operators => !is_default_op(op),
    }
}

/// `${v:pos:len}` whose `len` is written as a negative integer (`toSubstr`'s `strconv.Atoi`);
/// a length computed by a nested `${...}` is not known before the values are.
pub(super) fn negative_length(text: &str, tree: &Tree, op: (usize, usize), args: (usize, usize)) -> bool {
    if text.get(op.0..op.1) != Some(":") || args.1 - args.0 != 2 {
        return false;
    }
    let literal = |i: usize| match tree.nodes[tree.args[args.0 + i]] {
        Node::Text { start, end, .. } => text.get(start..end).and_then(atoi),
        Node::Func { .. } => None,
    };
    // An offset Atoi refuses returns the value before the length is read.
    literal(0).is_some() && literal(1).is_some_and(|n| n < 0)
}

pub(super) struct Eval<'t, 'l, 'v> {
    pub(super) text: &'t str,
    pub(super) tree: &'t Tree,
    pub(super) lookup: &'l dyn Fn(&str) -> Option<&'v str>,
    pub(super) dialect: Dialect,
}

impl Eval<'_, '_, '_> {
    fn slice(&self, start: usize, end: usize) -> Cow<'_, str> {
        match self.text.get(start..end) {
            Some(s) => Cow::Borrowed(s),
            None => String::from_utf8_lossy(self.text.as_bytes().get(start..end).unwrap_or_default()),
        }
    }

    pub(super) fn eval(&self, id: usize, out: &mut String) -> Result<(), EnvsubstError> {
        match self.tree.nodes[id] {
            Node::Text { start, end, esc } => {
                render_text(&self.slice(start, end), esc, out);
                Ok(())
            }
            Node::Func { at, param, op, args } => {
                let mut values: Vec<String> = Vec::with_capacity(args.1 - args.0);
                for &a in &self.tree.args[args.0..args.1] {
                    let mut s = String::new();
                    self.eval(a, &mut s)?;
                    values.push(s);
                }
                let name = self.slice(param.0, param.1);
                let op = self.slice(op.0, op.1);
                let value = (self.lookup)(&name);
                let line = || line_at(self.text.as_bytes(), 0, 1, at);
                if value.is_none() && fails_unset(self.dialect.strict, &op) {
                    return Err(EnvsubstError::NotSet {
                        name: name.into_owned(),
                        line: line(),
                        offset: at,
                    });
                }
                let v = value.unwrap_or("");
                if self.dialect.negative_length_fails && &*op == ":" && panics_on_negative_length(v, &values) {
                    return Err(EnvsubstError::NegativeLength {
                        line: line(),
                        offset: at,
                    });
                }
                apply(&op, v, &values, out);
                Ok(())
            }
        }
    }
}

/// Writes a text token with its escape pairs (`$$`, and `\/` `\\` inside replace arguments)
/// reduced to their second character.
fn render_text(s: &str, esc: u8, out: &mut String) {
    if esc == 0 {
        out.push_str(s);
        return;
    }
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let escaped = (c == '$' && esc & ESC_DOLLAR != 0 && next == Some('$'))
            || (c == '\\' && esc & ESC_BACKSLASH != 0 && matches!(next, Some('/' | '\\')));
        if escaped {
            out.push(next.unwrap_or(c));
            chars.next();
        } else {
            out.push(c);
        }
    }
}

/// Whether the `toSubstr` of envsubst before the fix slices backwards (Go panics): a parsable
/// negative length that does not first hit the `pos+length >= len(s)` branch.
fn panics_on_negative_length(s: &str, args: &[String]) -> bool {
    let [pos, length] = args else { return false };
    let (Some(pos), Some(length)) = (atoi(pos), atoi(length)) else {
        return false;
    };
    if length >= 0 {
        return false;
    }
    let len = s.len() as i128;
    let mut pos = pos as i128;
    if pos < 0 {
        pos = (len + pos).max(0);
    }
    pos + (length as i128) < len
}
