//! The rules over the ports: what cellbridge does with GitHub and a cluster, written once against
//! the traits of [`crate::ports`], so the in-memory doubles and the real services run the same
//! sequence. A pull request's life ([`proposal`] decides which kind takes a cell's branch:
//! [`pull_request`] or [`decommission`]; [`branch`] whose branch it is; [`automerge`]; [`report`]
//! what a status and an issue say; [`dashboard`]; `signing`: how commits reach a base that requires
//! signed ones); which cell a cluster is ([`cells`]); a
//! bootstrap ([`bootstrap`]).

pub mod automerge;
pub mod bootstrap;
pub mod branch;
pub mod cells;
pub mod dashboard;
pub mod decommission;
pub mod proposal;
pub mod pull_request;
pub mod report;
mod signing;
