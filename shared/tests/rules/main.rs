//! The orchestration rules over the in-memory ports (feature `test-support`), in one test binary:
//! state-sync's (`sync.rs`), cluster-bootstrap's (`bootstrap.rs`) and its access-entry sweep
//! (`sweep.rs`), a destroyed cell's decommission (`decommission.rs`) and auto-merge (`auto_merge.rs`).

mod auto_merge;
mod bootstrap;
mod decommission;
mod sweep;
mod sync;
