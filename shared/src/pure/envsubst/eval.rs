//! Follows `envsubst/eval.go` of fluxcd/pkg: its `Eval` (parse, then execute the template) is
//! [`substitute`].

use super::parse::Parser;
use super::template::Eval;
use super::{Dialect, EnvsubstError, line_at};

/// Substitutes `text` as Flux's post-build does under `dialect`: `lookup` gives a variable's
/// value, `None` when unset (the empty string unless the dialect's strict mode fails on it).
pub fn substitute<'v>(
    text: &str,
    lookup: impl Fn(&str) -> Option<&'v str>,
    dialect: Dialect,
) -> Result<String, EnvsubstError> {
    // Fast path: without `${` nothing but the `$$` escape can change, and without `$` nothing.
    let buf = text.as_bytes();
    if !buf.contains(&b'$') && !buf.contains(&0) {
        return Ok(text.to_owned());
    }
    let mut p = Parser::new(buf, 0);
    if let Err(kind) = p.parse_all() {
        let at = p.expr_at;
        let end = (at + 40).min(buf.len());
        return Err(EnvsubstError::Parse {
            kind,
            line: line_at(buf, 0, 1, at),
            offset: at,
            snippet: String::from_utf8_lossy(&buf[at.min(end)..end]).into_owned(),
        });
    }
    let ev = Eval {
        text,
        tree: &p.tree,
        lookup: &lookup,
        dialect,
    };
    let mut out = String::with_capacity(text.len());
    for &id in &p.tree.top {
        ev.eval(id, &mut out)?;
    }
    Ok(out)
}
