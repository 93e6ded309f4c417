//! The orchestration rules over the in-memory ports (feature `test-support`), in one test binary:
//! state-sync's (`sync.rs`) and cluster-bootstrap's (`bootstrap.rs`).

mod bootstrap;
mod sync;
