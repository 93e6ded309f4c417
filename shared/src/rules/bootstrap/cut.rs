//! A bootstrap run the invocation's deadline stopped: what it answers, by what was done.

use super::follow::{FluxReport, Start};
use super::report::{BootstrapOutcome, Report};
use super::{BootstrapError, Request, config};

/// The answer of an install the deadline stopped: everything applied and only the first check
/// not finished is a bootstrap (still confirming: the re-checks follow); a Flux found there
/// whose check was stopped is checked, not finished (nothing was left to apply); otherwise a
/// retryable error naming what is left, for the next delivery to complete.
pub(super) fn cut_short(
    req: &Request,
    cell: &str,
    steps: &[String],
    report: &mut Report,
    prior: Start,
    confirm: &config::Confirm,
) -> Result<(), BootstrapError> {
    if report.outcome == BootstrapOutcome::Bootstrapped {
        tracing::warn!(cluster = %req.cluster, cell, "deadline reached during the first check; everything is applied");
        return Ok(());
    }
    // Flux was there and nothing was to be applied: the check, not an install, was cut short.
    if report.outcome == BootstrapOutcome::AlreadyBootstrapped {
        tracing::warn!(cluster = %req.cluster, cell, "deadline reached while checking a cluster Flux already owns: checked, not finished");
        report.flux = Some(FluxReport::cut(prior, confirm.deadline));
        return Ok(());
    }
    let done = report.objects.len().min(steps.len());
    let rest = &steps[done..];
    const NAMED: usize = 5;
    let mut left = rest.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
    if rest.len() > NAMED {
        left.push_str(&format!(" and {} more", rest.len() - NAMED));
    }
    if rest.is_empty() {
        left = "none".into();
    }
    Err(BootstrapError::Apply {
        cluster: req.cluster.clone(),
        cell: cell.to_owned(),
        source: Box::new(crate::ports::cluster::kube::ApplyError::OutOfTime {
            applied: done,
            total: steps.len(),
            left,
        }),
    })
}
