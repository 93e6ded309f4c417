//! The bootstrap's outside services in memory (feature `test-support`): AWS accounts with EKS
//! clusters and their access entries ([`MemAws`]), the clusters' Kubernetes APIs
//! ([`MemKube`]), and the fleet repo's base branch as a run reads it ([`MemSource`]). They keep
//! the rules of the real services that the bootstrap sequence relies on, each with its source
//! beside the code that keeps it (`aws`: EKS and STS; `kube`: the Kubernetes API), and inject
//! faults; the sequence itself ([`crate::rules::bootstrap::Bootstrapper`]) is the product's.

mod aws;
mod kube;
mod source;

pub use aws::{MemAws, MemCluster, MemEks, MemEntry};
pub use kube::{MemKube, MemKubeApi, SYNCED_REVISION};
pub use source::MemSource;
