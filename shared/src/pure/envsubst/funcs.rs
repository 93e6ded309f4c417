//! Follows `envsubst/funcs.go` of fluxcd/pkg: the functions the operators apply (and the
//! dispatch of `lookupFunc` in `template.go` that picks them).

use super::glob::glob;

/// Flux's `lookupFunc` and the functions behind it.
pub(super) fn apply(op: &str, v: &str, args: &[String], out: &mut String) {
    match op {
        "," => first_mapped(v, |c| c.to_lowercase().collect::<String>(), out),
        ",," => out.push_str(&v.to_lowercase()),
        "^" => first_mapped(v, |c| c.to_uppercase().collect::<String>(), out),
        "^^" => out.push_str(&v.to_uppercase()),
        "#" if args.is_empty() => out.push_str(&v.len().to_string()),
        "#" => out.push_str(trim_prefix(v, &args[0], false)),
        "##" => out.push_str(trim_prefix(v, &args[0], true)),
        "%" => out.push_str(&trim_suffix(v, &args[0], false)),
        "%%" => out.push_str(&trim_suffix(v, &args[0], true)),
        ":" => out.push_str(&substr(v, args)),
        "/#" => match args {
            [pat, rep] if v.starts_with(pat.as_str()) => {
                out.push_str(rep);
                out.push_str(&v[pat.len()..]);
            }
            _ => out.push_str(v),
        },
        "/%" => match args {
            [pat, rep] if v.ends_with(pat.as_str()) => {
                out.push_str(&v[..v.len() - pat.len()]);
                out.push_str(rep);
            }
            _ => out.push_str(v),
        },
        "/" => match args {
            [] => out.push_str(v),
            [pat] => out.push_str(&v.replacen(pat.as_str(), "", 1)),
            [pat, rep, ..] => out.push_str(&v.replacen(pat.as_str(), rep, 1)),
        },
        "//" => match args {
            [] => out.push_str(v),
            [pat] => out.push_str(&v.replace(pat.as_str(), "")),
            [pat, rep, ..] => out.push_str(&v.replace(pat.as_str(), rep)),
        },
        // Every default operator, and anything unknown: the value, or the joined arguments when
        // the value is empty.
        _ => {
            if v.is_empty() {
                for a in args {
                    out.push_str(a);
                }
            } else {
                out.push_str(v);
            }
        }
    }
}

fn first_mapped(v: &str, f: impl Fn(char) -> String, out: &mut String) {
    let mut it = v.chars();
    if let Some(c) = it.next() {
        out.push_str(&f(c));
        out.push_str(it.as_str());
    }
}

/// Go's `strconv.Atoi`: optional sign, ASCII digits, 64-bit range.
pub(super) fn atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn substr(s: &str, args: &[String]) -> String {
    let cut = |a: i128, b: i128| -> String {
        let b = b.min(s.len() as i128);
        if a >= b {
            return String::new();
        }
        String::from_utf8_lossy(&s.as_bytes()[a as usize..b as usize]).into_owned()
    };
    let Some(first) = args.first() else {
        return s.to_owned();
    };
    let Some(pos) = atoi(first) else {
        return s.to_owned();
    };
    let len = s.len() as i128;
    let mut pos = pos as i128;
    if pos < 0 {
        pos = (len + pos).max(0);
    }
    let Some(second) = args.get(1) else {
        return if pos < len { cut(pos, len) } else { String::new() };
    };
    let Some(length) = atoi(second) else {
        return s.to_owned();
    };
    let length = length as i128;
    if length < 0 {
        let end = len + length;
        return if end < pos { String::new() } else { cut(pos, end) };
    }
    if pos + length >= len {
        return if pos < len { cut(pos, len) } else { String::new() };
    }
    cut(pos, pos + length)
}

/// `${v#pat}` / `${v##pat}`: remove the shortest / longest non-empty prefix matching `pat`.
fn trim_prefix<'s>(s: &'s str, pat: &str, longest: bool) -> &'s str {
    let pat: Vec<char> = pat.chars().collect();
    let mut ends: Vec<usize> = s.char_indices().map(|(i, _)| i).skip(1).chain([s.len()]).collect();
    if s.is_empty() {
        ends.clear();
    }
    if longest {
        ends.reverse();
    }
    for end in ends {
        let cand: Vec<char> = s[..end].chars().collect();
        match glob(&pat, &cand) {
            Err(()) => return s,
            Ok(true) => return &s[end..],
            Ok(false) => {}
        }
    }
    s
}

/// `${v%pat}` / `${v%%pat}`: Flux reverses the value and the pattern and trims a prefix.
fn trim_suffix(s: &str, pat: &str, longest: bool) -> String {
    let rs: String = s.chars().rev().collect();
    let rp: String = pat.chars().rev().collect();
    trim_prefix(&rs, &rp, longest).chars().rev().collect()
}
