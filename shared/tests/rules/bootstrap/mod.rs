//! cluster-bootstrap's orchestration rules over the in-memory ports (feature `test-support`): the
//! product's own sequence (`Bootstrapper`) and handler, with EKS, STS, Secrets Manager and the
//! cluster's Kubernetes API in memory (the bed: `crate::support::bootstrap`). Each rule in
//! milliseconds; `tests/bootstrap` runs the same code against moto and the fake Kubernetes API
//! server. One file per rule:

/// The temporary access entry: given back, never someone else's, swept.
mod access_entries;
/// Cells in other accounts and the roles that reach them.
mod accounts;
/// What Lambda and SQS are answered.
mod answers;
/// Confirming Flux took over: each outcome from what the cluster reports.
mod confirm;
/// A laptop's kubeconfig run records its outcome, or says which tag to set.
mod laptop;
/// One cell per cluster: the cluster's tag or the merged metadata decides, never the request.
mod one_cell;
/// A Flux Operator cell: the operator, its Git secret and the FluxInstance; its refusals.
mod operator;
/// The order of the apply and what it writes.
mod order;
/// The pause switch and the outcome metrics.
mod pause_and_metrics;
/// Which clusters are bootstrapped, and when (status, authentication mode, endpoint reach).
mod readiness;
/// Following a bootstrap after its invocation: the queued re-checks.
mod rechecks;
/// A Git credential changed in Secrets Manager, applied by the next check without `force`.
mod rekey;
/// Seeded schedules of everything that touches one cluster's bootstrap.
mod schedules;
/// The Git secret and the sync objects applied to the cluster.
mod sync_objects;
