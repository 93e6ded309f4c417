//! The orchestration rules over the in-memory ports (feature `test-support`), in one test binary,
//! one file per rule (each file's doc says which rules it holds):
//!
//! - `sync/`: state-sync's rules (the pull request, people and races, the seeded schedules,
//!   failures, refusals, pause and metrics, what is read, the fan-out);
//! - `dashboard.rs`: the fleet dashboard; `dashboard_flux.rs`: its Flux column;
//!   `dashboard_retry.rs`: a scheduled sync-all's delayed retry of it;
//! - `decommission.rs`: a destroyed cell's decommission;
//! - `auto_merge.rs`: auto-merge under branch protection; `fail_closed.rs`: what cellbridge does
//!   when GitHub's answers cannot be read or GitHub fails; `fault_matrix.rs`: every request of
//!   every phase given GitHub's unhappy answers; `pacing.rs`: the cap on cellbridge's pull
//!   requests queued or auto-merging at once;
//! - `bootstrap/`: cluster-bootstrap's rules (the order of the apply, the access entry, readiness,
//!   other accounts, the Git secret and sync objects, the answers, pause and metrics, confirming
//!   Flux took over);
//! - `sweep.rs`: the temporary access-entry sweep; `sweep_pages.rs`: the sweep in pages over a
//!   large fleet, and cells of accounts no role reaches;
//! - `chains.rs`: the two chains `lib.rs` documents, as the handlers take them;
//! - `support/`: the beds and helpers they share.

mod auto_merge;
mod bootstrap;
mod chains;
mod dashboard;
mod dashboard_flux;
mod dashboard_retry;
mod decommission;
mod fail_closed;
mod fault_matrix;
mod pacing;
mod support;
mod sweep;
mod sweep_pages;
mod sync;
