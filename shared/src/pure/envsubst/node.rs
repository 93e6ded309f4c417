//! Follows `envsubst/parse/node.go` of fluxcd/pkg: the nodes of the parse tree.

#[derive(Debug, Clone, Copy)]
pub(super) enum Node {
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
