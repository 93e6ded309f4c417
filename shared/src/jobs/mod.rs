//! The two jobs, each a [`crate::shell::lambda::Job`] the one Lambda handler runs: [`sync`]
//! (state-sync: a state event becomes a pull request; sync-all, the dashboard) and [`bootstrap`]
//! (cluster-bootstrap: a new cluster gets Flux; the sweep of expired access). Each composes the
//! rules with the adapters it builds once per process.

pub mod bootstrap;
pub mod queue;
pub mod sync;
