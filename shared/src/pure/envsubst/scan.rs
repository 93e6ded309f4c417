//! Follows `envsubst/parse/scan.go` of fluxcd/pkg: the scanner (lexer).
//!
//! The Go scanner's modes, accept functions and its exact read/unread bookkeeping.

pub(super) const SCAN_IDENT: u8 = 1;
pub(super) const SCAN_LBRACK: u8 = 2;
pub(super) const SCAN_RBRACK: u8 = 4;
pub(super) const SCAN_ESCAPE: u8 = 8;
pub(super) const ESC_DOLLAR: u8 = 1;
pub(super) const ESC_BACKSLASH: u8 = 2;
pub(super) const ESC_ALL: u8 = ESC_DOLLAR | ESC_BACKSLASH;
/// Go's scanner uses rune 0 as its end-of-input marker, so a NUL in the text ends it too.
const EOF: char = '\0';

#[derive(Clone, Copy)]
pub(super) enum Accept {
    Rune,
    Ident,
    Colon,
    OneHash,
    NotClosing,
    HashFunc,
    PercentFunc,
    DefaultFunc,
    ReplaceFunc,
    OneEqual,
    OneColon,
    RejectColonClose,
    Slash,
    NotSlash,
    CasingFunc,
}

fn accepts(a: Accept, r: char, i: usize) -> bool {
    match a {
        Accept::Rune => true,
        Accept::Ident => is_alpha_numeric(r),
        Accept::Colon => r == ':',
        Accept::OneHash => r == '#' && i == 1,
        Accept::NotClosing => r != '}',
        Accept::HashFunc => r == '#' && i < 3,
        Accept::PercentFunc => r == '%' && i < 3,
        Accept::DefaultFunc => (i == 1 && r == ':') || (i == 2 && matches!(r, '=' | '-' | '?' | '+')),
        Accept::ReplaceFunc => (i == 1 && r == '/') || (i == 2 && matches!(r, '/' | '#' | '%')),
        Accept::OneEqual => i == 1 && r == '=',
        Accept::OneColon => i == 1 && r == ':',
        Accept::RejectColonClose => r != ':' && r != '}',
        Accept::Slash => r == '/',
        Accept::NotSlash => r != '/',
        Accept::CasingFunc => (r == ',' || r == '^') && i < 3,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tok {
    Illegal,
    Eof,
    Ident,
    Lbrack,
    Rbrack,
}

pub(super) struct Scanner<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) start: usize,
    pub(super) width: usize,
    pub(super) mode: u8,
    pub(super) esc: u8,
    pub(super) accept: Accept,
}

/// Decodes the character at `b[0..]` like Go's `utf8.DecodeRune`: invalid → U+FFFD, width 1.
fn decode(b: &[u8]) -> (char, usize) {
    let w = match b[0] {
        0x00..=0x7f => return (b[0] as char, 1),
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return ('\u{fffd}', 1),
    };
    match b
        .get(..w)
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.chars().next())
    {
        Some(c) => (c, w),
        None => ('\u{fffd}', 1),
    }
}

impl<'a> Scanner<'a> {
    pub(super) fn read(&mut self) -> char {
        if self.pos >= self.buf.len() {
            self.width = 0;
            return EOF;
        }
        let (c, w) = decode(&self.buf[self.pos..]);
        self.width = w;
        self.pos += w;
        c
    }

    pub(super) fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(self.width);
    }

    pub(super) fn peek(&mut self) -> char {
        let r = self.read();
        self.unread();
        r
    }

    /// Go's `skip` deletes the escape character from the buffer and so consumes the character
    /// after it; texts keep their original range and drop escapes when rendered.
    fn skip(&mut self) {
        if self.pos < self.buf.len() {
            let (_, w) = decode(&self.buf[self.pos..]);
            self.pos += w;
        }
    }

    pub(super) fn scan(&mut self) -> Tok {
        self.start = self.pos;
        let r = self.read();
        if r == EOF {
            Tok::Eof
        } else if self.scan_lbrack(r) {
            Tok::Lbrack
        } else if self.scan_rbrack(r) {
            Tok::Rbrack
        } else if self.scan_ident(r) {
            Tok::Ident
        } else {
            Tok::Illegal
        }
    }

    fn scan_ident(&mut self, r: char) -> bool {
        if self.mode & SCAN_IDENT == 0 {
            return false;
        }
        if self.scan_escaped(r) {
            self.skip();
        } else if !accepts(self.accept, r, self.pos - self.start) {
            return false;
        }
        loop {
            let r = self.read();
            if r == EOF {
                self.unread();
                break;
            }
            if self.scan_lbrack(r) {
                self.unread();
                self.unread();
                break;
            }
            if self.scan_escaped(r) {
                self.skip();
                continue;
            }
            if !accepts(self.accept, r, self.pos - self.start) {
                self.unread();
                break;
            }
        }
        true
    }

    fn scan_lbrack(&mut self, r: char) -> bool {
        if self.mode & SCAN_LBRACK == 0 {
            return false;
        }
        if r == '$' {
            if self.read() == '{' {
                return true;
            }
            self.unread();
        }
        false
    }

    fn scan_rbrack(&self, r: char) -> bool {
        self.mode & SCAN_RBRACK != 0 && r == '}'
    }

    fn scan_escaped(&mut self, r: char) -> bool {
        if self.mode & SCAN_ESCAPE == 0 {
            return false;
        }
        if r == '$' && self.esc & ESC_DOLLAR != 0 && self.peek() == '$' {
            return true;
        }
        r == '\\' && self.esc & ESC_BACKSLASH != 0 && matches!(self.peek(), '/' | '\\')
    }

    /// The escape set active for a text token scanned in the current mode.
    pub(super) fn text_escapes(&self) -> u8 {
        if self.mode & SCAN_ESCAPE != 0 { self.esc } else { 0 }
    }
}

/// Go's `isAlphaNumeric` (parse/scan.go): `_`, `unicode.IsLetter` (general category L) or
/// `unicode.IsDigit` (Nd). Not Rust's `is_alphabetic`/`is_numeric`, which also take letter
/// numbers, other numbers and alphabetic marks.
fn is_alpha_numeric(r: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    r == '_'
        || matches!(
            get_general_category(r),
            G::UppercaseLetter
                | G::LowercaseLetter
                | G::TitlecaseLetter
                | G::ModifierLetter
                | G::OtherLetter
                | G::DecimalNumber
        )
}
