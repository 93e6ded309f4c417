//! A YAML document tree with source positions, from serde-saphyr's own parser (granit).

use serde_saphyr::granit_parser::{Event, Parser};

#[derive(Debug, Clone)]
pub struct Scalar {
    pub value: String,
    /// 1-based line where the scalar starts.
    pub line: usize,
    /// Byte range of the scalar's source text.
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone)]
pub enum Node {
    Scalar(Scalar),
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, usize),
    /// `*alias`: its content is scanned where the anchor defines it.
    Alias(usize),
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries, _) => entries.iter().find(|(k, _)| k.str() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) => Some(&s.value),
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
            Node::Seq(_, l) | Node::Map(_, l) | Node::Alias(l) => *l,
        }
    }

    pub fn walk_scalars(&self, f: &mut dyn FnMut(&Scalar)) {
        match self {
            Node::Scalar(s) => f(s),
            Node::Seq(items, _) => items.iter().for_each(|n| n.walk_scalars(f)),
            Node::Map(entries, _) => entries.iter().for_each(|(k, v)| {
                k.walk_scalars(f);
                v.walk_scalars(f);
            }),
            Node::Alias(_) => {}
        }
    }
}

enum Frame {
    Seq(Vec<Node>, usize),
    Map(Vec<(Node, Node)>, Option<Node>, usize),
}

fn attach(stack: &mut [Frame], doc: &mut Option<Node>, n: Node) {
    match stack.last_mut() {
        None => *doc = Some(n),
        Some(Frame::Seq(items, _)) => items.push(n),
        Some(Frame::Map(entries, pending, _)) => match pending.take() {
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
            Event::DocumentEnd => {
                if let Some(d) = doc.take() {
                    docs.push(d);
                }
            }
            Event::MappingStart(..) => stack.push(Frame::Map(Vec::new(), None, line)),
            Event::SequenceStart(..) => stack.push(Frame::Seq(Vec::new(), line)),
            Event::MappingEnd | Event::SequenceEnd => {
                let n = match stack.pop() {
                    Some(Frame::Map(entries, _, l)) => Node::Map(entries, l),
                    Some(Frame::Seq(items, l)) => Node::Seq(items, l),
                    None => return Err(format!("not valid YAML: unbalanced collection at line {line}")),
                };
                attach(&mut stack, &mut doc, n);
            }
            Event::Scalar(value, ..) => {
                let start = span.start.byte_offset().unwrap_or(0);
                let end = span.end.byte_offset().unwrap_or(text.len()).max(start);
                let s = Scalar {
                    value: value.into_owned(),
                    line,
                    start,
                    end,
                };
                attach(&mut stack, &mut doc, Node::Scalar(s));
            }
            Event::Alias(_) => attach(&mut stack, &mut doc, Node::Alias(line)),
            _ => {}
        }
    }
    Ok(docs)
}
