//! Follows `envsubst/template.go` of fluxcd/pkg: executing the parse tree (`Template.eval`,
//! `evalText`, `evalFunc`) and `isDefaultOp`.

use std::borrow::Cow;

use super::funcs::apply;
use super::node::Node;
use super::parse::Tree;
use super::scan::{ESC_BACKSLASH, ESC_DOLLAR};
use super::{EnvsubstError, line_at};

pub(super) fn is_default_op(op: &str) -> bool {
    matches!(op, "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?")
}

pub(super) struct Eval<'t, 'l, 'v> {
    pub(super) text: &'t str,
    pub(super) tree: &'t Tree,
    pub(super) lookup: &'l dyn Fn(&str) -> Option<&'v str>,
    pub(super) strict: bool,
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
                if value.is_none() && self.strict && !is_default_op(&op) {
                    return Err(EnvsubstError::NotSet {
                        name: name.into_owned(),
                        line: line_at(self.text.as_bytes(), 0, 1, at),
                        offset: at,
                    });
                }
                apply(&op, value.unwrap_or(""), &values, out);
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
