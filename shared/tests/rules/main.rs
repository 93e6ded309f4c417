//! The orchestration rules over the in-memory ports (feature `test-support`), in one test binary:
//! state-sync's (`sync.rs`), cluster-bootstrap's (`bootstrap.rs`) and its access-entry sweep
//! (`sweep.rs`), and a destroyed cell's decommission (`decommission.rs`).

mod bootstrap;
mod decommission;
mod sweep;
mod sync;
