//! Flux's variable substitution, as kustomize-controller runs it in post-build
//! (`github.com/fluxcd/pkg/envsubst`, a fork of drone/envsubst).
//!
//! This is a port of that parser's state machine, not a re-imagining of shell expansion, so the
//! check says what Flux would do, including its surprises:
//!
//! - `${var}`, `${var:=default}`, `${var=default}`, `${var:-default}`, `${var:?x}`, `${var:+x}`
//!   all parse. Every default operator means "the value if it is non-empty, else the default"
//!   (`:+` and `:?` included: Flux does not implement bash's alternate-value or error forms).
//! - `${var-default}`, `${var+x}` and `${var?x}` do **not** parse: after the name only `:`, `=`,
//!   `,`, `^`, `/`, `#`, `%` or `}` may follow, so Flux fails with "missing closing brace".
//! - `$$` is an escape for `$` in plain text, so `$${var}` is the literal `${var}`; a bare `$var`
//!   is plain text and never substituted.
//! - The name is any run of letters, digits and `_` (Unicode letters too, leading digits too):
//!   `${1abc}` parses, and then fails in strict mode because no key can have that name (Flux
//!   validates the *keys* against `^[_[:alpha:]][_[:alpha:][:digit:]]*$`, see [`valid_name`]).
//! - Strict mode fails on an unset variable unless the operator supplies a default; the other
//!   operators (`${#var}`, `${var^^}`, `${var:1:2}`, `${var/a/b}`, `${var#p}`, ...) fail too.
//!   Arguments are evaluated before the variable itself, so `${set:=${unset}}` fails as well.
//! - `${`, `${}` and other malformed expressions fail the whole resource ("bad substitution").
//! - A NUL character ends the input, as it does in the Go scanner.
//!
//! Known differences, all outside what a Kubernetes manifest with identifier values meets: name
//! characters use Rust's `is_alphabetic`/`is_numeric` rather than Go's `IsLetter`/`IsDigit`;
//! upper/lower-casing uses Rust's full Unicode mappings; substring and pattern trimming of
//! non-ASCII values cut at character boundaries where Go cuts bytes; nesting deeper than
//! [`MAX_DEPTH`] is refused instead of recursing.

use std::borrow::Cow;

/// The regular expression Flux applies to the variable names it substitutes (its keys).
pub const NAME_PATTERN: &str = "^[_[:alpha:]][_[:alpha:][:digit:]]*$";

/// Deepest nesting of `${...}` inside arguments that is parsed; deeper input is refused
/// (the Go parser recurses without limit; a fixed limit keeps a fuzzer from blowing the stack).
pub const MAX_DEPTH: usize = 64;

/// Whether `name` is a name Flux accepts as a substitution key (`NAME_PATTERN`, ASCII classes).
pub fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

/// Why the parser refused the text; the messages are Flux's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ParseErrorKind {
    BadSubstitution,
    MissingClosingBrace,
    ParseVariableName,
    ParseFuncSubstitution,
    ParseDefaultFunction,
    TooDeep,
}

impl ParseErrorKind {
    pub fn message(self) -> &'static str {
        match self {
            Self::BadSubstitution => "bad substitution",
            Self::MissingClosingBrace => "missing closing brace",
            Self::ParseVariableName => "unable to parse variable name",
            Self::ParseFuncSubstitution => "unable to parse substitution within function",
            Self::ParseDefaultFunction => "unable to parse default function",
            Self::TooDeep => "substitutions nested too deeply",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvsubstError {
    /// The text does not parse; nothing of it would be substituted.
    #[error("line {line}: {} in {snippet:?}", kind.message())]
    Parse {
        kind: ParseErrorKind,
        line: usize,
        offset: usize,
        snippet: String,
    },
    /// Strict mode: a variable without a value and without a default.
    #[error("line {line}: variable not set (strict mode): {name:?}")]
    NotSet { name: String, line: usize, offset: usize },
}

/// One `${...}` expression (nested ones are reported separately).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference<'a> {
    pub name: &'a str,
    /// The operator after the name (`""`, `":="`, `"^^"`, `"#"` for `${#var}`, ...).
    pub op: &'a str,
    /// Byte offset of the `$` of `${`.
    pub offset: usize,
    /// 1-based line of the `$` of `${`.
    pub line: usize,
}

impl Reference<'_> {
    /// The operator supplies a value of its own when the variable is unset, so strict mode
    /// accepts it.
    pub fn has_default(&self) -> bool {
        is_default_op(self.op)
    }
}

/// A malformed expression found by [`scan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed {
    pub kind: ParseErrorKind,
    /// Byte offset of the `${` that starts the expression Flux refuses.
    pub offset: usize,
    pub line: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Reference(Reference<'a>),
    Malformed(Malformed),
}

fn is_default_op(op: &str) -> bool {
    matches!(op, "-" | "+" | "=" | "?" | ":-" | ":+" | ":=" | ":?")
}

// ---------------------------------------------------------------------------------------------
// Scanner: the Go scanner's modes, accept functions and its exact read/unread bookkeeping.

const SCAN_IDENT: u8 = 1;
const SCAN_LBRACK: u8 = 2;
const SCAN_RBRACK: u8 = 4;
const SCAN_ESCAPE: u8 = 8;
const ESC_DOLLAR: u8 = 1;
const ESC_BACKSLASH: u8 = 2;
const ESC_ALL: u8 = ESC_DOLLAR | ESC_BACKSLASH;
/// Go's scanner uses rune 0 as its end-of-input marker, so a NUL in the text ends it too.
const EOF: char = '\0';

#[derive(Clone, Copy)]
enum Accept {
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
        Accept::Ident => r.is_alphabetic() || r.is_numeric() || r == '_',
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
enum Tok {
    Illegal,
    Eof,
    Ident,
    Lbrack,
    Rbrack,
}

struct Scanner<'a> {
    buf: &'a [u8],
    pos: usize,
    start: usize,
    width: usize,
    mode: u8,
    esc: u8,
    accept: Accept,
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
    fn read(&mut self) -> char {
        if self.pos >= self.buf.len() {
            self.width = 0;
            return EOF;
        }
        let (c, w) = decode(&self.buf[self.pos..]);
        self.width = w;
        self.pos += w;
        c
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(self.width);
    }

    fn peek(&mut self) -> char {
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

    fn scan(&mut self) -> Tok {
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
    fn text_escapes(&self) -> u8 {
        if self.mode & SCAN_ESCAPE != 0 { self.esc } else { 0 }
    }
}

// ---------------------------------------------------------------------------------------------
// Parser: builds a flat tree (one Vec of nodes, one Vec of argument links) per parse.

#[derive(Debug, Clone, Copy)]
enum Node {
    /// `buf[start..end]`, with the escapes in `esc` still to be removed.
    Text { start: usize, end: usize, esc: u8 },
    /// A `${...}`; `args` indexes `Tree::args`.
    Func {
        at: usize,
        param: (usize, usize),
        op: (usize, usize),
        args: (usize, usize),
    },
}

struct Tree {
    nodes: Vec<Node>,
    /// Argument node ids of functions, contiguous per function.
    args: Vec<usize>,
    /// Top-level node ids in order.
    top: Vec<usize>,
}

struct Parser<'a> {
    s: Scanner<'a>,
    tree: Tree,
    depth: usize,
    /// Offset of the `${` of the top-level expression being parsed.
    expr_at: usize,
}

type PResult<T> = Result<T, ParseErrorKind>;

impl<'a> Parser<'a> {
    fn new(buf: &'a [u8], from: usize) -> Self {
        Parser {
            s: Scanner {
                buf,
                pos: from,
                start: from,
                width: 0,
                mode: 0,
                esc: 0,
                accept: Accept::Rune,
            },
            tree: Tree {
                nodes: Vec::new(),
                args: Vec::new(),
                top: Vec::new(),
            },
            depth: 0,
            expr_at: from,
        }
    }

    fn push(&mut self, n: Node) -> usize {
        self.tree.nodes.push(n);
        self.tree.nodes.len() - 1
    }

    fn text(&mut self) -> usize {
        let n = Node::Text {
            start: self.s.start,
            end: self.s.pos,
            esc: self.s.text_escapes(),
        };
        self.push(n)
    }

    /// The Go `parseAny`, as a loop instead of right recursion.
    fn parse_all(&mut self) -> PResult<()> {
        loop {
            self.s.accept = Accept::Rune;
            self.s.mode = SCAN_IDENT | SCAN_LBRACK | SCAN_ESCAPE;
            self.s.esc = ESC_DOLLAR;
            match self.s.scan() {
                Tok::Ident => {
                    let id = self.text();
                    self.tree.top.push(id);
                }
                Tok::Eof => return Ok(()),
                Tok::Lbrack => {
                    self.expr_at = self.s.start;
                    let id = self.parse_func()?;
                    self.tree.top.push(id);
                }
                _ => return Err(ParseErrorKind::BadSubstitution),
            }
        }
    }

    fn func(&mut self, at: usize, param: (usize, usize), op: (usize, usize), args: Vec<usize>) -> usize {
        let a0 = self.tree.args.len();
        self.tree.args.extend(args);
        let a1 = self.tree.args.len();
        self.push(Node::Func {
            at,
            param,
            op,
            args: (a0, a1),
        })
    }

    fn parse_func(&mut self) -> PResult<usize> {
        if self.depth >= MAX_DEPTH {
            return Err(ParseErrorKind::TooDeep);
        }
        self.depth += 1;
        let r = self.parse_func_inner();
        self.depth -= 1;
        r
    }

    fn parse_func_inner(&mut self) -> PResult<usize> {
        // The `$` of `${` is two bytes before the current position.
        let at = self.s.pos.saturating_sub(2);
        self.s.esc = ESC_ALL;
        if self.s.peek() == '#' {
            return self.parse_len_func(at);
        }
        self.s.accept = Accept::Ident;
        self.s.mode = SCAN_IDENT;
        let name = match self.s.scan() {
            Tok::Ident => (self.s.start, self.s.pos),
            _ => return Err(ParseErrorKind::ParseVariableName),
        };
        match self.s.peek() {
            ':' => return self.parse_default_or_substr(at, name),
            '=' => return self.parse_default_func(at, name),
            ',' | '^' => return self.parse_casing_func(at, name),
            '/' => return self.parse_replace_func(at, name),
            '#' => return self.parse_remove_func(at, name, Accept::HashFunc),
            '%' => return self.parse_remove_func(at, name, Accept::PercentFunc),
            _ => {}
        }
        self.s.accept = Accept::Ident;
        self.s.mode = SCAN_RBRACK;
        match self.s.scan() {
            Tok::Rbrack => Ok(self.func(at, name, (0, 0), Vec::new())),
            _ => Err(ParseErrorKind::MissingClosingBrace),
        }
    }

    fn parse_param(&mut self, accept: Accept, mode: u8) -> PResult<usize> {
        self.s.accept = accept;
        self.s.mode = mode | SCAN_LBRACK;
        match self.s.scan() {
            Tok::Lbrack => self.parse_func(),
            Tok::Ident | Tok::Rbrack => Ok(self.text()),
            _ => Err(ParseErrorKind::ParseFuncSubstitution),
        }
    }

    fn parse_default_or_substr(&mut self, at: usize, name: (usize, usize)) -> PResult<usize> {
        // Go reads the ':' and peeks past it, then unreads with the *peeked* width: kept as is.
        self.s.read();
        let r = self.s.peek();
        self.s.unread();
        match r {
            '=' | '-' | '?' | '+' => self.parse_default_func(at, name),
            _ => self.parse_substr_func(at, name),
        }
    }

    fn op_token(&mut self, accept: Accept, err: ParseErrorKind) -> PResult<(usize, usize)> {
        self.s.accept = accept;
        self.s.mode = SCAN_IDENT;
        match self.s.scan() {
            Tok::Ident => Ok((self.s.start, self.s.pos)),
            _ => Err(err),
        }
    }

    fn parse_substr_func(&mut self, at: usize, name: (usize, usize)) -> PResult<usize> {
        let op = self.op_token(Accept::OneColon, ParseErrorKind::BadSubstitution)?;
        let mut args = vec![self.parse_param(Accept::RejectColonClose, SCAN_IDENT)?];
        self.s.accept = Accept::Colon;
        self.s.mode = SCAN_IDENT | SCAN_RBRACK;
        match self.s.scan() {
            Tok::Rbrack => return Ok(self.func(at, name, op, args)),
            Tok::Ident => {}
            _ => return Err(ParseErrorKind::BadSubstitution),
        }
        args.push(self.parse_param(Accept::NotClosing, SCAN_IDENT)?);
        self.consume_rbrack()?;
        Ok(self.func(at, name, op, args))
    }

    fn parse_remove_func(&mut self, at: usize, name: (usize, usize), accept: Accept) -> PResult<usize> {
        let op = self.op_token(accept, ParseErrorKind::BadSubstitution)?;
        let args = vec![self.parse_param(Accept::NotClosing, SCAN_IDENT)?];
        self.consume_rbrack()?;
        Ok(self.func(at, name, op, args))
    }

    fn parse_replace_func(&mut self, at: usize, name: (usize, usize)) -> PResult<usize> {
        let op = self.op_token(Accept::ReplaceFunc, ParseErrorKind::BadSubstitution)?;
        let mut args = Vec::with_capacity(2);
        if self.s.peek() == '/' {
            // An empty pattern (`${v/#/x}`): the next rune is already the delimiter.
            let p = self.s.pos;
            args.push(self.push(Node::Text {
                start: p,
                end: p,
                esc: 0,
            }));
        } else {
            args.push(self.parse_param(Accept::NotSlash, SCAN_IDENT | SCAN_ESCAPE)?);
        }
        self.s.accept = Accept::Slash;
        self.s.mode = SCAN_IDENT;
        if self.s.scan() != Tok::Ident {
            return Err(ParseErrorKind::BadSubstitution);
        }
        if self.s.peek() != '}' {
            args.push(self.parse_param(Accept::NotClosing, SCAN_IDENT | SCAN_ESCAPE)?);
        }
        self.consume_rbrack()?;
        Ok(self.func(at, name, op, args))
    }

    fn parse_default_func(&mut self, at: usize, name: (usize, usize)) -> PResult<usize> {
        let accept = if self.s.peek() == '=' {
            Accept::OneEqual
        } else {
            Accept::DefaultFunc
        };
        let op = self.op_token(accept, ParseErrorKind::ParseDefaultFunction)?;
        let mut args = Vec::new();
        loop {
            if self.s.peek() == '}' {
                self.consume_rbrack()?;
                return Ok(self.func(at, name, op, args));
            }
            args.push(self.parse_param(Accept::NotClosing, SCAN_IDENT)?);
        }
    }

    fn parse_casing_func(&mut self, at: usize, name: (usize, usize)) -> PResult<usize> {
        let op = self.op_token(Accept::CasingFunc, ParseErrorKind::BadSubstitution)?;
        self.consume_rbrack()?;
        Ok(self.func(at, name, op, Vec::new()))
    }

    fn parse_len_func(&mut self, at: usize) -> PResult<usize> {
        let op = self.op_token(Accept::OneHash, ParseErrorKind::BadSubstitution)?;
        let name = self.op_token(Accept::Ident, ParseErrorKind::BadSubstitution)?;
        self.consume_rbrack()?;
        Ok(self.func(at, name, op, Vec::new()))
    }

    fn consume_rbrack(&mut self) -> PResult<()> {
        self.s.mode = SCAN_RBRACK;
        if self.s.scan() != Tok::Rbrack {
            return Err(ParseErrorKind::BadSubstitution);
        }
        Ok(())
    }
}

/// A function's `${` offset, name range and operator range.
type FuncAt = (usize, (usize, usize), (usize, usize));

/// 1-based line of byte `offset`, counting from `from` (at line `line_at_from`).
fn line_at(buf: &[u8], from: usize, line_at_from: usize, offset: usize) -> usize {
    let end = offset.min(buf.len());
    line_at_from + buf[from.min(end)..end].iter().filter(|&&b| b == b'\n').count()
}

/// Reports every `${...}` of `text` the way Flux's parser sees it (nested ones included, in
/// source order of their `${`), and every expression Flux would refuse. Flux stops at the first
/// malformed expression and substitutes nothing in that resource; the scan carries on after
/// its `${` so that one mistake does not hide the rest.
pub fn scan<'a>(text: &'a str, mut on: impl FnMut(Item<'a>)) {
    let buf = text.as_bytes();
    let mut from = 0;
    // Line bookkeeping is incremental: offsets only grow between reports of one parse.
    let (mut line_pos, mut line) = (0usize, 1usize);
    let mut line_of = |offset: usize| {
        if offset < line_pos {
            line_pos = 0;
            line = 1;
        }
        line = line_at(buf, line_pos, line, offset);
        line_pos = offset;
        line
    };
    loop {
        let mut p = Parser::new(buf, from);
        let result = p.parse_all();
        let mut funcs: Vec<FuncAt> = p
            .tree
            .nodes
            .iter()
            .filter_map(|n| match *n {
                Node::Func { at, param, op, .. } => Some((at, param, op)),
                Node::Text { .. } => None,
            })
            .collect();
        if result.is_err() {
            // The resumed parse finds what the refused expression contains.
            funcs.retain(|f| f.0 < p.expr_at);
        }
        funcs.sort_by_key(|f| f.0);
        for (at, param, op) in funcs {
            let name = text.get(param.0..param.1).unwrap_or("");
            let op = text.get(op.0..op.1).unwrap_or("");
            on(Item::Reference(Reference {
                name,
                op,
                offset: at,
                line: line_of(at),
            }));
        }
        match result {
            Ok(()) => return,
            Err(kind) => {
                let at = p.expr_at;
                on(Item::Malformed(Malformed {
                    kind,
                    offset: at,
                    line: line_of(at),
                }));
                // Resume right after the refused `${`.
                from = at + 2;
                if from >= buf.len() {
                    return;
                }
            }
        }
    }
}

/// Substitutes `text` as Flux's post-build does: `lookup` gives a variable's value, `None` when
/// unset (an unset variable is the empty string unless `strict`).
pub fn substitute<'v>(
    text: &str,
    lookup: impl Fn(&str) -> Option<&'v str>,
    strict: bool,
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
        strict,
    };
    let mut out = String::with_capacity(text.len());
    for &id in &p.tree.top {
        ev.eval(id, &mut out)?;
    }
    Ok(out)
}

struct Eval<'t, 'l, 'v> {
    text: &'t str,
    tree: &'t Tree,
    lookup: &'l dyn Fn(&str) -> Option<&'v str>,
    strict: bool,
}

impl Eval<'_, '_, '_> {
    fn slice(&self, start: usize, end: usize) -> Cow<'_, str> {
        match self.text.get(start..end) {
            Some(s) => Cow::Borrowed(s),
            None => String::from_utf8_lossy(self.text.as_bytes().get(start..end).unwrap_or_default()),
        }
    }

    fn eval(&self, id: usize, out: &mut String) -> Result<(), EnvsubstError> {
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

/// Flux's `lookupFunc` and the functions behind it.
fn apply(op: &str, v: &str, args: &[String], out: &mut String) {
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
fn atoi(s: &str) -> Option<i64> {
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

/// Shell pattern match in the manner of Go's `path.Match`, where `*` also crosses `/` (Flux's
/// fork): `*`, `?`, `[...]` with ranges and `^` negation, `\` escapes. `Err` on a bad pattern.
fn glob(p: &[char], s: &[char]) -> Result<bool, ()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sub(text: &str, pairs: &[(&str, &str)], strict: bool) -> Result<String, EnvsubstError> {
        let v = vars(pairs);
        substitute(text, |k| v.get(k).map(String::as_str), strict)
    }

    fn refs(text: &str) -> Vec<(String, String, usize, bool)> {
        let mut out = Vec::new();
        scan(text, |i| match i {
            Item::Reference(r) => out.push((r.name.to_owned(), r.op.to_owned(), r.line, r.has_default())),
            Item::Malformed(m) => out.push((String::new(), m.kind.message().to_owned(), m.line, false)),
        });
        out
    }

    #[test]
    fn default_forms_substitute_like_flux() {
        let set = [("var", "abc"), ("empty", "")];
        for (input, want) in [
            ("${var}", "abc"),
            ("${var:=xyz}", "abc"),
            ("${var=xyz}", "abc"),
            ("${var:-xyz}", "abc"),
            ("${unset:=xyz}", "xyz"),
            ("${unset=xyz}", "xyz"),
            ("${unset:-xyz}", "xyz"),
            // Flux's `toDefault`: an empty value takes the default for every operator...
            ("${empty=xyz}", "xyz"),
            // ...and `:+` / `:?` are defaults too, not bash's alternate value or error.
            ("${var:+xyz}", "abc"),
            ("${unset:?xyz}", "xyz"),
            ("${unset:=}", ""),
            ("a ${unset:=pre-${var}-post} b", "a pre-abc-post b"),
        ] {
            assert_eq!(sub(input, &set, true).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn dash_default_without_colon_is_refused_as_flux_does() {
        for input in ["${var-default}", "${var+x}", "${var?x}"] {
            let err = sub(input, &[("var", "abc")], true).unwrap_err();
            assert!(
                matches!(
                    err,
                    EnvsubstError::Parse {
                        kind: ParseErrorKind::MissingClosingBrace,
                        ..
                    }
                ),
                "{input}: {err}"
            );
        }
    }

    #[test]
    fn dollar_escapes_and_bare_dollar_names() {
        let set = [("var01", "abcdEFGH28ij")];
        assert_eq!(sub("$${var01}", &set, true).unwrap(), "${var01}");
        assert_eq!(sub("$$var01 and $var01", &set, true).unwrap(), "$var01 and $var01");
        assert_eq!(
            sub("some text ${var01}$${var$${var01}$var01${var01}", &set, true).unwrap(),
            "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij"
        );
        // A `$$` escape is plain text: nothing inside it is required in strict mode.
        assert_eq!(sub("$${missing}", &[], true).unwrap(), "${missing}");
        assert_eq!(
            sub(r"\\something ${var01}", &set, true).unwrap(),
            r"\\something abcdEFGH28ij"
        );
        assert_eq!(sub("price: 5$", &[], true).unwrap(), "price: 5$");
    }

    #[test]
    fn other_operators_follow_flux() {
        let set = [
            ("v", "abcdEFGH28ij"),
            ("path", "/home/bozo/ideas/thoughts.for.today"),
            ("z", "abcABC123ABCabc"),
            ("f", "bash.string.txt"),
            ("p", "/path/to/file"),
            ("s", "foo/bar/baz"),
        ];
        for (input, want) in [
            ("${#v}", "12"),
            ("${v^}", "AbcdEFGH28ij"),
            ("${v^^}", "ABCDEFGH28IJ"),
            ("${v,,}", "abcdefgh28ij"),
            ("${path:11}", "ideas/thoughts.for.today"),
            ("${path:11:5}", "ideas"),
            ("${path:-5}", "/home/bozo/ideas/thoughts.for.today"),
            ("${z/%abc/XYZ}", "abcABC123ABCXYZ"),
            ("${z/#abc/XYZ}", "XYZABC123ABCabc"),
            ("${z/#/pre-}", "pre-abcABC123ABCabc"),
            ("${z//abc/xyz}", "xyzABC123ABCxyz"),
            ("${z/abc/xyz}", "xyzABC123ABCabc"),
            ("${f#*.}", "string.txt"),
            ("${f##*.}", "txt"),
            ("${f%.*}", "bash.string"),
            ("${f%%.*}", "bash"),
            ("${p##*/}", "file"),
            (r"${s//\//-}", "foo-bar-baz"),
            ("${unset=${v^^}}", "ABCDEFGH28IJ"),
        ] {
            assert_eq!(sub(input, &set, false).unwrap(), want, "{input}");
        }
    }

    #[test]
    fn strict_mode_names_the_variable_and_line() {
        let err = sub("a: 1\nb: ${cluster_name}\n", &[("x", "1")], true).unwrap_err();
        assert_eq!(
            err,
            EnvsubstError::NotSet {
                name: "cluster_name".into(),
                line: 2,
                offset: 8
            }
        );
        assert!(err.to_string().contains("cluster_name") && err.to_string().contains("line 2"));
        // Not strict: empty string.
        assert_eq!(sub("b: ${cluster_name}", &[], false).unwrap(), "b: ");
        // Transformations of an unset variable fail too; arguments are always evaluated.
        for input in [
            "${#missing}",
            "${missing^^}",
            "${missing:0:1}",
            "${missing/a/b}",
            "${set:=${missing}}",
        ] {
            assert!(
                matches!(sub(input, &[("set", "1")], true), Err(EnvsubstError::NotSet { .. })),
                "{input}"
            );
        }
        // `${1abc}` parses but can never be set.
        assert!(matches!(sub("${1abc}", &[], true), Err(EnvsubstError::NotSet { .. })));
    }

    #[test]
    fn malformed_input_is_a_parse_error_with_line() {
        for (input, kind) in [
            ("x\n${", ParseErrorKind::ParseVariableName),
            ("x\n${}", ParseErrorKind::ParseVariableName),
            ("x\n${a", ParseErrorKind::MissingClosingBrace),
            ("x\n${a b}", ParseErrorKind::MissingClosingBrace),
            ("x\n${a:=b", ParseErrorKind::ParseFuncSubstitution),
            ("x\n${a^x}", ParseErrorKind::BadSubstitution),
        ] {
            match sub(input, &[("a", "1")], false) {
                Err(EnvsubstError::Parse { kind: k, line, .. }) => {
                    assert_eq!((k, line), (kind, 2), "{input}")
                }
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    #[test]
    fn nul_ends_the_input_like_the_go_scanner() {
        assert_eq!(sub("a\0${b}", &[], true).unwrap(), "a");
    }

    #[test]
    fn scan_reports_nested_references_defaults_lines_and_recovers() {
        let text = "a: ${x}\nb: ${y:=${z}} $${no} $bare\nc: ${bad-default} ${w}\n";
        let want: Vec<(String, String, usize, bool)> = vec![
            ("x".into(), "".into(), 1, false),
            ("y".into(), ":=".into(), 2, true),
            ("z".into(), "".into(), 2, false),
            ("".into(), "missing closing brace".into(), 3, false),
            ("w".into(), "".into(), 3, false),
        ];
        assert_eq!(refs(text), want);
        // A reference nested in a refused expression is reported once.
        assert_eq!(refs("${a:=${b} x").iter().filter(|r| r.0 == "b").count(), 1);
    }

    #[test]
    fn valid_name_is_flux_key_regex() {
        assert!(valid_name("cluster_name") && valid_name("_x1"));
        assert!(!valid_name("1abc") && !valid_name("a-b") && !valid_name("a.b") && !valid_name(""));
        assert!(!valid_name("naïve"));
    }

    #[test]
    fn glob_classes_and_bad_patterns() {
        let set = [("v", "abc123")];
        assert_eq!(sub("${v#[a-c]}", &set, false).unwrap(), "bc123");
        assert_eq!(sub("${v##[a-c]*[0-9]}", &set, false).unwrap(), "");
        assert_eq!(sub("${v#[}", &set, false).unwrap(), "abc123");
        assert_eq!(sub("${v#*}", &set, false).unwrap(), "bc123");
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn name() -> impl Strategy<Value = String> {
            "[a-z_][a-z0-9_]{0,8}"
        }

        fn template() -> impl Strategy<Value = (Vec<String>, String)> {
            let piece = prop_oneof![
                "[a-zA-Z0-9 :\n\"'#{}-]{0,12}".prop_map(|t| (None, t)),
                name().prop_map(|n| (Some(n.clone()), format!("${{{n}}}"))),
                (name(), "[a-z0-9 ]{0,6}", prop_oneof![Just(":="), Just("="), Just(":-")])
                    .prop_map(|(n, d, op)| (Some(n.clone()), format!("${{{n}{op}{d}}}"))),
                name().prop_map(|n| (None, format!("$${{{n}}}"))),
                name().prop_map(|n| (None, format!("${n}"))),
            ];
            proptest::collection::vec(piece, 0..12).prop_map(|pieces| {
                let names = pieces.iter().filter_map(|(n, _)| n.clone()).collect();
                let text = pieces.into_iter().map(|(_, t)| t).collect();
                (names, text)
            })
        }

        proptest! {
            #[test]
            fn all_variables_set_never_reports_missing((names, text) in template()) {
                let vars: BTreeMap<String, String> =
                    names.iter().map(|n| (n.clone(), format!("value-of-{n}"))).collect();
                let result = substitute(&text, |k| vars.get(k).map(String::as_str), true);
                prop_assert!(!matches!(result, Err(EnvsubstError::NotSet { .. })), "{result:?} for {text:?}");
                let mut missing = Vec::new();
                scan(&text, |i| match i {
                    Item::Reference(r) if !r.has_default() && !vars.contains_key(r.name) => missing.push(r.name.to_owned()),
                    _ => {}
                });
                prop_assert!(missing.is_empty(), "{missing:?} in {text:?}");
            }

            #[test]
            fn text_without_dollar_is_unchanged(text in "[^$\u{0}]{0,200}") {
                prop_assert_eq!(substitute(&text, |_| None, true).unwrap(), text);
            }

            #[test]
            fn arbitrary_input_never_panics(text in "\\PC{0,64}|[${}:=#%/^,\\\\a-c-]{0,64}") {
                let _ = substitute(&text, |k| (k == "a").then_some("v"), true);
                scan(&text, |_| {});
            }
        }
    }
}
