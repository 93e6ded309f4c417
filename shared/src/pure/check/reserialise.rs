//! Whether a substituted value leaves the resource YAML that Flux can read back.
//!
//! kustomize-controller substitutes the resource as kustomize re-serialises it
//! (`resource.AsYAML`: JSON, then sigs.k8s.io/yaml's `JSONToYAML`, that is yaml.v2), so every
//! quote the author wrote is gone and yaml.v2 picks each string's style itself; then envsubst
//! runs on that text, and `yaml.YAMLToJSON` must parse the result (fluxcd/pkg
//! `kustomize/kustomize_varsub.go`), or the whole layer fails. So `url: "${host}:${port}"` with an
//! empty `port` is `url: db:` after substitution, a mapping where a value was: refused.
//!
//! The rules below are libyaml's, which yaml.v2 ports: the emitter's choice of style
//! (`yaml_emitter_analyze_scalar`, `yaml_emitter_select_scalar_style` in `emitterc.go`) and
//! what the scanner refuses at the start of a value and inside a plain, single-quoted or
//! double-quoted scalar (`scannerc.go`).

/// How yaml.v2 writes a string value in a block mapping or sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    /// A value with a newline: `|-` and indented lines, where no one-line value can break out.
    Literal,
}

/// libyaml's `is_printable` (with yaml.v2's `unicode` output on).
fn printable(c: char) -> bool {
    matches!(c, '\n' | '\u{20}'..='\u{7e}' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
        && c != '\u{feff}'
}

fn blank_or_end(c: Option<char>) -> bool {
    matches!(c, None | Some(' ' | '\t' | '\n'))
}

/// The style yaml.v2 gives `s` (a string that resolves as a string, as one with `${` does).
pub(super) fn style(s: &str) -> Style {
    if s.chars().any(|c| !printable(c)) {
        return Style::DoubleQuoted;
    }
    if s.contains('\n') {
        return Style::Literal;
    }
    if s.is_empty() || s.starts_with(' ') || s.ends_with(' ') {
        return Style::SingleQuoted;
    }
    let chars: Vec<char> = s.chars().collect();
    let block_indicator = chars.iter().enumerate().any(|(i, &c)| {
        let followed_by_blank = blank_or_end(chars.get(i + 1).copied());
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@' | '`' => true,
                '?' | ':' | '-' => followed_by_blank,
                _ => false,
            }
        } else {
            match c {
                ':' => followed_by_blank,
                '#' => chars[i - 1] == ' ',
                _ => false,
            }
        }
    });
    if block_indicator {
        Style::SingleQuoted
    } else {
        Style::Plain
    }
}

/// The text yaml.v2 writes for `s` in `style`, quotes included.
pub(super) fn emit(s: &str, style: Style) -> String {
    match style {
        Style::Plain | Style::Literal => s.to_owned(),
        Style::SingleQuoted => format!("'{}'", s.replace('\'', "''")),
        Style::DoubleQuoted => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    c if !printable(c) => out.push_str(&format!("\\u{:04X}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
    }
}

/// Why libyaml refuses `text` written as a value after `key: `: the byte offset of the
/// offending character and the reason, or `None` when it parses.
pub(super) fn refused(text: &str, style: Style) -> Option<(usize, &'static str)> {
    match style {
        Style::Literal => None,
        Style::Plain => value(text, 0),
        Style::SingleQuoted | Style::DoubleQuoted => quoted(text, 0),
    }
}

/// A value starting at `from` (after `key: `, an anchor or a tag).
fn value(text: &str, from: usize) -> Option<(usize, &'static str)> {
    let rest = &text[from..];
    let skipped = rest.len() - rest.trim_start_matches(' ').len();
    let at = from + skipped;
    let mut chars = text[at..].chars();
    let Some(first) = chars.next() else {
        return None; // nothing: a null value
    };
    let next = chars.next();
    match first {
        '#' => None,
        '*' => Some((
            at,
            "`*` starts an alias, and the re-serialised resource defines no anchor",
        )),
        ',' | ']' | '}' => Some((at, "a flow indicator cannot start a value")),
        '%' | '@' | '`' => Some((at, "this character is reserved: no value may start with it")),
        '[' | '{' => flow(text, at),
        '\'' | '"' => quoted(text, at),
        '|' | '>' => {
            let header = &text[at + 1..];
            let indicators = header.trim_start_matches(|c: char| c == '+' || c == '-' || c.is_ascii_digit());
            let trailing = indicators.trim_start_matches(' ');
            (!(trailing.is_empty() || (trailing.len() < indicators.len() && trailing.starts_with('#'))))
                .then_some((at, "a block scalar header (`|`, `>`) followed by text"))
        }
        '&' | '!' => {
            let end = text[at..].find(' ').map_or(text.len(), |i| at + i);
            value(text, end)
        }
        '-' if blank_or_end(next) => Some((
            at,
            "`- ` starts a sequence entry, which is not allowed where a value is",
        )),
        '?' if blank_or_end(next) => Some((at, "`? ` starts a mapping key, which is not allowed where a value is")),
        ':' if blank_or_end(next) => Some((at, "`: ` starts a mapping, which is not allowed where a value is")),
        _ => plain(text, at),
    }
}

/// A plain scalar from `at`: `: ` (or a final `:`) would start a mapping; ` #` starts a comment.
fn plain(text: &str, at: usize) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    for i in at..bytes.len() {
        match bytes[i] {
            b':' if blank_or_end(bytes.get(i + 1).map(|&b| b as char)) => {
                return Some((
                    i,
                    "`:` followed by a space or the end starts a mapping, which is not allowed where a value is",
                ));
            }
            b'#' if i > at && bytes[i - 1] == b' ' => return None,
            _ => {}
        }
    }
    None
}

/// After a complete token: only spaces and a comment may follow on the line.
fn after(text: &str, end: usize) -> Option<(usize, &'static str)> {
    let rest = &text[end..];
    let trimmed = rest.trim_start_matches(' ');
    if trimmed.is_empty() || (trimmed.len() < rest.len() && trimmed.starts_with('#')) {
        None
    } else {
        Some((text.len() - trimmed.len(), "text after a closed quote or bracket"))
    }
}

fn quoted(text: &str, at: usize) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let Some(&quote) = bytes.get(at) else {
        return None; // nothing at all: a null value
    };
    let mut i = at + 1;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            (b'\'', b'\'') if bytes.get(i + 1) == Some(&b'\'') => i += 2,
            (b'\'', b'\'') | (b'"', b'"') => return after(text, i + 1),
            (b'"', b'\\') => {
                let len = match bytes.get(i + 1) {
                    Some(
                        b'0' | b'a' | b'b' | b't' | b'\t' | b'n' | b'v' | b'f' | b'r' | b'e' | b' ' | b'"' | b'/'
                        | b'\\' | b'N' | b'_' | b'L' | b'P',
                    ) => 0,
                    Some(b'x') => 2,
                    Some(b'u') => 4,
                    Some(b'U') => 8,
                    _ => {
                        return Some((
                            i,
                            "`\\` followed by a character that is no escape in a double-quoted string",
                        ));
                    }
                };
                let digits = text.get(i + 2..i + 2 + len);
                if !digits.is_some_and(|d| d.bytes().all(|b| b.is_ascii_hexdigit())) {
                    return Some((i, "`\\` escape without its hexadecimal digits"));
                }
                i += 2 + len;
            }
            _ => i += 1,
        }
    }
    Some((at, "a quote that is never closed"))
}

/// A flow collection from `at`: brackets must balance (quotes skipped), then only a comment.
fn flow(text: &str, at: usize) -> Option<(usize, &'static str)> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = at;
    while i < bytes.len() {
        match bytes[i] {
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return after(text, i + 1);
                }
            }
            b'\'' | b'"' => {
                let close = text[i + 1..].find(bytes[i] as char)?;
                i += close + 1;
            }
            _ => {}
        }
        i += 1;
    }
    Some((at, "a flow collection (`[`, `{`) that is never closed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `key: <original>` with `${x}` set to `x`, as Flux meets it: refused or not.
    fn breaks(original: &str, x: &str) -> bool {
        let st = style(original);
        let emitted = emit(original, st);
        let text = crate::pure::envsubst::substitute(
            &emitted,
            |k| (k == "x").then_some(x),
            crate::pure::envsubst::Dialect::LAX,
        )
        .expect("substitutes");
        refused(&text, st).is_some()
    }

    #[test]
    fn yaml_v2_picks_the_style_from_the_string_not_from_the_author() {
        assert_eq!(style("${host}:${port}"), Style::Plain);
        assert_eq!(style("repo/${name}:1"), Style::Plain);
        assert_eq!(style("a: ${x}"), Style::SingleQuoted);
        assert_eq!(style("${x} #1"), Style::SingleQuoted);
        assert_eq!(style("- ${x}"), Style::SingleQuoted);
        assert_eq!(style("-${x}"), Style::Plain);
        assert_eq!(style(" ${x}"), Style::SingleQuoted);
        assert_eq!(style("${x}\tend"), Style::DoubleQuoted);
        assert_eq!(style("a\n${x}"), Style::Literal);
        assert_eq!(emit("it's ${x}", Style::SingleQuoted), "'it''s ${x}'");
        assert_eq!(emit("a\\${x}\t", Style::DoubleQuoted), "\"a\\\\${x}\\t\"");
    }

    #[test]
    fn values_that_break_a_plain_scalar_as_libyaml_reads_it() {
        for (value, broken) in [
            ("db:5432", false),
            ("db:", true),
            ("a: b", true),
            ("[a", true),
            ("[a, b]", false),
            ("{a: 1}", false),
            ("*a", true),
            ("'", true),
            ("'quoted'", false),
            ("'quoted' tail", true),
            ("\"a\\qb\"", true),
            ("\"a\\x4", true),
            ("\"ok\\x41\"", false),
            ("- a", true),
            ("-a", false),
            ("? a", true),
            ("@home", true),
            ("`cmd`", true),
            ("%x", true),
            ("|", false),
            ("| x", true),
            ("a #comment: x", false),
            ("#all comment", false),
            ("&anchor value", false),
            ("&anchor a: b", true),
            ("", false),
            ("plain text, with [brackets] and {braces}", false),
        ] {
            assert_eq!(refused(value, Style::Plain).is_some(), broken, "{value:?}");
        }
    }

    #[test]
    fn a_quote_in_a_value_ends_a_quoted_scalar_early() {
        assert!(breaks("a: ${x}", "it's"));
        assert!(!breaks("a: ${x}", "it''s"));
        assert!(!breaks("a: ${x}", "b: c"));
        assert!(breaks("${x}\tend", "say \"hi\""));
        assert!(breaks("${x}\tend", "c:\\dir"));
        assert!(!breaks("${x}\tend", "c:/dir"));
        // The author's quotes are gone: a plain re-serialisation meets the value bare.
        assert!(breaks("${x}", "a: b"));
        assert!(breaks("${host}:${x}", ""));
        assert!(!breaks("${x}", "eu-west-1"));
        assert!(!breaks("line\n${x}", "a: b"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// What yaml.v2 writes it reads back: a string emitted in the style the emitter
            /// picks is never refused, so a refusal is always the substituted value's doing.
            #[test]
            fn an_emitted_string_is_never_refused(s in "[ -~\t\u{a0}-\u{2fff}]{0,40}") {
                let st = style(&s);
                prop_assert_eq!(refused(&emit(&s, st), st), None, "{:?} as {:?}", s, st);
            }

            #[test]
            fn any_text_is_judged_without_panicking(s in "\\PC{0,40}") {
                for st in [Style::Plain, Style::SingleQuoted, Style::DoubleQuoted, Style::Literal] {
                    let _ = refused(&s, st);
                }
            }
        }
    }
}
