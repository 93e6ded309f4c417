//! Bootstrap bench (being written).
fn main() {}
