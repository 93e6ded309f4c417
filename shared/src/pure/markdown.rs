//! Markdown that a value cannot break: pull request bodies, the auto-merge verdict and the
//! dashboard issue put paths, keys, patterns and messages into inline code and table cells, and
//! a stray backtick or `|` there would end the code span or the cell early.

/// Inline code: a backtick in `s` cannot close the span early.
pub(crate) fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

/// Inline code inside a table cell, where a `|` would end the cell as well.
pub(crate) fn table_code(s: &str) -> String {
    code(&s.replace('|', "\\|"))
}

/// Text of a table cell: a `|` would end the cell, a line break the row.
pub(crate) fn table_text(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// `items` as inline code, comma-separated; `none` when there are none.
pub(crate) fn code_list(items: &[&str]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.iter().map(|k| code(k)).collect::<Vec<_>>().join(", ")
    }
}

/// `s` at most `max` characters long: one cut ends in `…`.
pub(crate) fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max - 1).collect();
    t.push('…');
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_and_cells_cannot_be_broken_out_of() {
        assert_eq!(code("a"), "`a`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(table_code("a|b"), "`a\\|b`");
        assert_eq!(table_code("a`b"), "`` a`b ``");
        assert_eq!(table_text("a | b\nc"), "a \\| b c");
        assert_eq!(code_list(&[]), "none");
        assert_eq!(code_list(&["a", "b`c"]), "`a`, `` b`c ``");
    }

    #[test]
    fn cut_keeps_the_limit_in_characters() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("éééé", 3).chars().count(), 3);
    }
}
