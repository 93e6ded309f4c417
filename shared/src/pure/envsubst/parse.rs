//! Follows `envsubst/parse/parse.go` of fluxcd/pkg: the parser and its errors.
//!
//! Builds a flat tree (one Vec of nodes, one Vec of argument links) per parse.

use super::node::Node;
use super::scan::{Accept, ESC_ALL, ESC_DOLLAR, SCAN_ESCAPE, SCAN_IDENT, SCAN_LBRACK, SCAN_RBRACK, Scanner, Tok};

/// Deepest nesting of `${...}` inside arguments that is parsed; deeper input is refused
/// (the Go parser recurses without limit; a fixed limit keeps a fuzzer from blowing the stack).
pub const MAX_DEPTH: usize = 64;

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

pub(super) struct Tree {
    pub(super) nodes: Vec<Node>,
    /// Argument node ids of functions, contiguous per function.
    pub(super) args: Vec<usize>,
    /// Top-level node ids in order.
    pub(super) top: Vec<usize>,
}

pub(super) struct Parser<'a> {
    s: Scanner<'a>,
    pub(super) tree: Tree,
    depth: usize,
    /// Offset of the `${` of the top-level expression being parsed.
    pub(super) expr_at: usize,
}

type PResult<T> = Result<T, ParseErrorKind>;

impl<'a> Parser<'a> {
    pub(super) fn new(buf: &'a [u8], from: usize) -> Self {
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
    pub(super) fn parse_all(&mut self) -> PResult<()> {
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
        // The pattern is read with acceptNotSlash, as Go's parseReplaceFunc does: an empty one
        // (`${v/#/x}`, `${v/%/x}`, `${v///}`) is no token at all, and Flux fails the layer with
        // "unable to parse substitution within function" where bash would prepend or append.
        args.push(self.parse_param(Accept::NotSlash, SCAN_IDENT | SCAN_ESCAPE)?);
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
