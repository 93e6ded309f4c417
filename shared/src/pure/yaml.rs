//! A YAML document tree with the source position of every node, from serde-saphyr's own parser
//! (granit). One tree for both readers that need positions: the strict check maps every `${`
//! back to its line in the fleet repo's file, and a new cell's `gotk-sync.yaml` is written by
//! splicing values into the template's own text at the byte ranges of the scalars they replace.

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, StructureStyle};

#[derive(Debug, Clone)]
pub struct Scalar {
    pub value: String,
    /// Plain, quoted or block, as written.
    pub style: ScalarStyle,
    /// 1-based line where the scalar starts.
    pub line: usize,
    /// Byte range of the scalar's source text, quotes included.
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone)]
pub enum Node {
    Scalar(Scalar),
    /// The items, and the line the sequence starts on.
    Seq(Vec<Node>, usize),
    /// The entries, the line the mapping starts on, and whether it is a block or a flow mapping.
    Map(Vec<(Node, Node)>, usize, StructureStyle),
    /// `*alias`: its content is where the anchor defines it.
    Alias(usize),
}

impl Node {
    /// The entry of `key`, when this is a mapping that has one.
    pub fn entry(&self, key: &str) -> Option<&(Node, Node)> {
        match self {
            Node::Map(entries, ..) => entries.iter().find(|(k, _)| k.str() == Some(key)),
            _ => None,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The key scalar of `key`'s entry.
    pub fn key(&self, key: &str) -> Option<&Scalar> {
        match self.entry(key) {
            Some((Node::Scalar(s), _)) => Some(s),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.value),
            _ => None,
        }
    }

    /// The scalar's value, unless it is empty or null.
    pub fn non_empty(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) if !s.is_null() => Some(&s.value),
            _ => None,
        }
    }

    pub fn items(&self) -> Vec<&Node> {
        match self {
            Node::Seq(items, _) => items.iter().collect(),
            _ => Vec::new(),
        }
    }

    pub fn line(&self) -> usize {
        match self {
            Node::Scalar(s) => s.line,
            Node::Seq(_, l) | Node::Map(_, l, _) | Node::Alias(l) => *l,
        }
    }

    pub fn walk_scalars(&self, f: &mut dyn FnMut(&Scalar)) {
        match self {
            Node::Scalar(s) => f(s),
            Node::Seq(items, _) => items.iter().for_each(|n| n.walk_scalars(f)),
            Node::Map(entries, ..) => entries.iter().for_each(|(k, v)| {
                k.walk_scalars(f);
                v.walk_scalars(f);
            }),
            Node::Alias(_) => {}
        }
    }
}

impl Scalar {
    /// Empty, or a plain null (the parser reports an empty value as `~` with no source text).
    pub fn is_null(&self) -> bool {
        self.value.is_empty()
            || (self.style == ScalarStyle::Plain
                && (self.start == self.end || matches!(self.value.as_str(), "~" | "null" | "Null" | "NULL")))
    }
}

enum Frame {
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize, StructureStyle),
}

fn attach(stack: &mut [Frame], doc: &mut Option<Node>, n: Node) {
    match stack.last_mut() {
        None => *doc = Some(n),
        Some(Frame::Seq(items, _)) => items.push(n),
        Some(Frame::Map(entries, pending, ..)) => match pending.take() {
            Some(k) => entries.push((k, n)),
            None => *pending = Some(n),
        },
    }
}

/// Every document of a multi-document YAML text; the error says what and where.
pub fn documents(text: &str) -> Result<Vec<Node>, String> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut doc: Option<Node> = None;
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| format!("not valid YAML: {e}"))?;
        let line = span.start.line();
        match ev {
            Event::DocumentStart(..) => doc = None,
            Event::DocumentEnd => docs.extend(doc.take()),
            Event::MappingStart(style, ..) => stack.push(Frame::Map(Vec::new(), None, line, style)),
            Event::SequenceStart(..) => stack.push(Frame::Seq(Vec::new(), line)),
            Event::MappingEnd | Event::SequenceEnd => {
                let n = match stack.pop() {
                    Some(Frame::Map(entries, _, l, style)) => Node::Map(entries, l, style),
                    Some(Frame::Seq(items, l)) => Node::Seq(items, l),
                    None => return Err(format!("not valid YAML: unbalanced collection at line {line}")),
                };
                attach(&mut stack, &mut doc, n);
            }
            Event::Scalar(value, style, ..) => {
                // A parser over a `&str` gives every span its byte offsets (granit's
                // `Parser::new_from_str`); none would be a broken promise, not a position 0.
                let (Some(start), Some(end)) = (span.start.byte_offset(), span.end.byte_offset()) else {
                    return Err("not valid YAML: a scalar without a source position".into());
                };
                let s = Scalar {
                    value: value.into_owned(),
                    style,
                    line,
                    start,
                    end: end.max(start),
                };
                attach(&mut stack, &mut doc, Node::Scalar(s));
            }
            Event::Alias(_) => attach(&mut stack, &mut doc, Node::Alias(line)),
            _ => {}
        }
    }
    Ok(docs)
}
