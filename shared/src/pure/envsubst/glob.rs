//! Follows `envsubst/path/match.go` of fluxcd/pkg: `path.Match`, for the `#` and `%` patterns.

/// Shell pattern match in the manner of Go's `path.Match`, where `*` also crosses `/` (Flux's
/// fork): `*`, `?`, `[...]` with ranges and `^` negation, `\` escapes. `Err` on a bad pattern.
pub(super) fn glob(p: &[char], s: &[char]) -> Result<bool, ()> {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    loop {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, si));
                    pi += 1;
                    continue;
                }
                '?' if si < s.len() => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                '[' => {
                    let (matched, next) = class(p, pi, s.get(si).copied())?;
                    if matched && si < s.len() {
                        pi = next;
                        si += 1;
                        continue;
                    }
                }
                '\\' => {
                    let c = *p.get(pi + 1).ok_or(())?;
                    if s.get(si) == Some(&c) {
                        pi += 2;
                        si += 1;
                        continue;
                    }
                }
                c if c != '?' && s.get(si) == Some(&c) => {
                    pi += 1;
                    si += 1;
                    continue;
                }
                _ => {}
            }
        } else if si == s.len() {
            return Ok(true);
        }
        match star {
            Some((sp, ss)) if ss < s.len() => {
                star = Some((sp, ss + 1));
                pi = sp + 1;
                si = ss + 1;
            }
            _ => {
                // Go validates the rest of the pattern even on a mismatch.
                validate(&p[pi.min(p.len())..])?;
                return Ok(false);
            }
        }
    }
}

fn validate(p: &[char]) -> Result<(), ()> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => {
                if i + 1 >= p.len() {
                    return Err(());
                }
                i += 2;
            }
            '[' => i = class(p, i, None)?.1,
            _ => i += 1,
        }
    }
    Ok(())
}

/// Matches `c` against the class starting at `p[at] == '['`; returns (matched, index after `]`).
fn class(p: &[char], at: usize, c: Option<char>) -> Result<(bool, usize), ()> {
    let mut i = at + 1;
    let negated = p.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    loop {
        let lo = match p.get(i) {
            None => return Err(()),
            Some(']') if !first => {
                i += 1;
                break;
            }
            Some('\\') => {
                i += 1;
                *p.get(i).ok_or(())?
            }
            Some(&ch) => ch,
        };
        first = false;
        i += 1;
        let mut hi = lo;
        if p.get(i) == Some(&'-') && p.get(i + 1).is_some_and(|&n| n != ']') {
            i += 1;
            hi = match p[i] {
                '\\' => {
                    i += 1;
                    *p.get(i).ok_or(())?
                }
                ch => ch,
            };
            i += 1;
        }
        if let Some(c) = c
            && lo <= c
            && c <= hi
        {
            matched = true;
        }
    }
    Ok((matched != negated, i))
}
