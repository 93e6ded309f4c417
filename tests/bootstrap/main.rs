//! cluster-bootstrap end to end: moto for EKS, STS and Secrets Manager (with the access-entry
//! extension), the fake Kubernetes API server over TLS with its own CA, and the Flux-sized
//! fixture fleet. Each test has its own API server and its own cluster name.
//!
//! One file per rule (each file's doc says which it holds); the bed they share is `support`.

mod accounts;
mod apply;
mod confirm;
mod eks_access;
mod faults;
mod handler;
mod one_cell;
mod operator;
mod rekey;
mod support;
mod teams_fleet;
