//! The orchestration rules over the in-memory ports (feature `test-support`), in one test binary:
//! state-sync's (`sync.rs`) and its fleet dashboard's (`dashboard.rs`), cluster-bootstrap's
//! (`bootstrap.rs`) and its access-entry sweep (`sweep.rs`), a destroyed cell's decommission
//! (`decommission.rs`) and auto-merge (`auto_merge.rs`).

mod auto_merge;
mod bootstrap;
mod dashboard;
mod decommission;
mod sweep;
mod sync;
