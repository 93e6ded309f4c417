//! Telling events apart by shape: what triggered an invocation, for each function.

pub mod bootstrap;
pub mod sync;
