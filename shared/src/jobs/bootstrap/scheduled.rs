//! The sweep `{"action":"sweep"}` asks for (the module's daily schedule, or by hand), in pages
//! bounded by the invocation's deadline: each page reads the fleet's base branch, goes through
//! the clusters after its cursor ([`Page`]), sweeps cellbridge's expired access, queues each
//! catch-up as soon as it decides it, and, out of time, hands the rest to the next page with one
//! message on the function's own queue (`{"action":"sweep","from":"<cell>/<region>/<cluster>"}`).
//! Every page records one `AccessSweeps` heartbeat with `OldestTemporaryAccessSeconds` (the
//! module alarms when the age passes its limit, or when the heartbeat stops) and what it
//! visited and left. The pause switch does not stop the sweep of cellbridge's own expired
//! access; paused, nothing is caught up.

use std::time::{Duration, Instant, SystemTime};

use super::handler::BootstrapService;
use super::sweep::{CatchUps, Page, SweepReport, Swept, discover, sweep, targets};
use crate::ports::cluster::Accounts;
use crate::ports::queue::Enqueue as _;
use crate::pure::fleet::{FleetRead, Keep};
use crate::rules::bootstrap::access;
use crate::rules::cells as cell;
use crate::shell::error::{Class, Classify};

/// What a page keeps of the invocation's time for its heartbeat and its hand-over: it stops
/// going through clusters this long before the deadline (one cluster's visit, an assumed role
/// and three EKS calls with the SDK's retries, fits in it).
pub const PAGE_MARGIN: Duration = Duration::from_secs(30);

impl<A: Accounts, K: crate::ports::cluster::KubeConnect, S: crate::ports::secrets::SecretStore>
    BootstrapService<A, K, S>
{
    /// One page of the sweep over `fleet`'s cells and the tagged clusters no merged cell names
    /// yet; with `catch_up`, each cluster's record decides whether it is bootstrapped.
    pub async fn sweep_fleet(
        &self,
        fleet: &dyn FleetRead,
        ttl: Duration,
        catch_up: bool,
        page: Page<'_>,
    ) -> Result<SweepReport, cell::CellError> {
        let settings = self.bootstrapper.settings();
        let accounts = self.bootstrapper.accounts();
        let home = accounts
            .home_account()
            .await
            .map_err(|e| (e.class(), format!("STS GetCallerIdentity: {e}")));
        let targets = targets(fleet, &settings.account_roles, home.as_deref())?;
        // AWS_REGION: the function's own region, where its own account's new clusters may be.
        let region = std::env::var("AWS_REGION").ok();
        let (found, discovery_errors) = discover(
            accounts,
            &targets,
            &settings.account_roles,
            region.as_deref(),
            home.as_deref().ok(),
        )
        .await;
        for e in &discovery_errors {
            tracing::error!(error = %e, "sweep: cannot list the clusters there");
        }
        let targets = targets.into_iter().chain(found).collect();
        let catch_ups = catch_up.then_some(CatchUps {
            deadline: settings.confirm.deadline,
            queue: self.rechecks.as_ref(),
        });
        let mut report = sweep(
            accounts,
            targets,
            settings.access_principal_arn.as_deref(),
            SystemTime::now(),
            ttl,
            catch_ups,
            page,
        )
        .await;
        report.discovery_errors = discovery_errors;
        Ok(report)
    }

    /// The sweep's heartbeat metric and log line.
    pub fn record_sweep(&self, report: &SweepReport, metrics: &crate::shell::metrics::Metrics<'_>) {
        let deleted = report.count(|s| matches!(s, Swept::Deleted { .. })).to_string();
        let failed = (report.failed() + report.discovery_errors.len()).to_string();
        let unreachable = report.count(|s| matches!(s, Swept::Unreachable { .. })).to_string();
        let queued = report.clusters.iter().filter(|c| c.queued).count().to_string();
        let (visited, left) = (report.visited.to_string(), report.left.to_string());
        metrics.sweep(
            report.oldest_remaining_secs,
            &[
                ("deleted", Some(&deleted)),
                ("failed", Some(&failed)),
                ("unreachable", Some(&unreachable)),
                ("queued", Some(&queued)),
                ("visited", Some(&visited)),
                ("left", Some(&left)),
            ],
        );
        tracing::info!(
            deleted,
            failed,
            unreachable,
            queued,
            visited,
            left,
            next = report.next.as_deref().unwrap_or(""),
            oldest_remaining_secs = report.oldest_remaining_secs,
            "sweep done"
        );
    }

    /// One page of the daily sweep (run in [`super::sweep::span`]) from `from`: the expired
    /// access, and, unless cellbridge is paused (`paused`: by the environment; the fleet's
    /// settings are read here), every cluster with no record of a completed bootstrap
    /// bootstrapped through the queue. The rest, out of time, is handed on through the queue.
    pub async fn sweep(
        &self,
        deadline: Instant,
        paused: bool,
        metrics: &crate::shell::metrics::Metrics<'_>,
        from: Option<&str>,
    ) -> Result<(SweepReport, Option<Class>), crate::rules::bootstrap::BootstrapError> {
        let failure = |class: Class| {
            metrics.count(
                crate::shell::metrics::Outcome::of_failure(class),
                &[("action", Some("sweep"))],
            )
        };
        let ttl = match access::ttl_from_env() {
            Ok(ttl) => ttl,
            Err(e) => {
                failure(Class::Final);
                return Err(e.into());
            }
        };
        // Which cells are merged is all a sweep reads: every cell's `cell-metadata.yaml`.
        let keep = Keep::default().with_index();
        let base = match crate::ports::fleet::FleetSource::fleet(&self.fleets, &keep, deadline).await {
            Ok(base) => base,
            Err(e) => {
                // No heartbeat: the module's alarm on the missing sweep metric tells.
                tracing::error!(error = %e, "sweep: cannot read the fleet repo");
                failure(e.class());
                return Err(crate::rules::bootstrap::BootstrapError::from(e));
            }
        };
        let paused = paused || matches!(crate::shell::pause::from_fleet(base.fleet.as_ref()), Ok(Some(_)));
        if paused {
            tracing::warn!("sweep: cellbridge is paused; no cluster is caught up");
        }
        let page = Page {
            from,
            stop: Some(deadline.checked_sub(PAGE_MARGIN).unwrap_or_else(Instant::now)),
        };
        let mut report = match self.sweep_fleet(base.fleet.as_ref(), ttl, !paused, page).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "sweep: cannot list the fleet's cells");
                let e = crate::rules::bootstrap::BootstrapError::from(e);
                failure(e.class());
                return Err(e);
            }
        };
        self.hand_on(&mut report).await;
        self.record_sweep(&report, metrics);
        let classes: Vec<Class> = report
            .clusters
            .iter()
            .filter_map(|c| match &c.swept {
                Swept::Failed { class, .. } => Some(*class),
                _ => None,
            })
            .collect();
        // Retryable only when every failure is (Lambda then runs the page again; its catch-ups
        // already queued are not queued twice: their clusters are recorded `queued`).
        let class = match classes.as_slice() {
            [] => None,
            all if all.iter().all(|c| *c == Class::Retryable) => Some(Class::Retryable),
            _ => Some(Class::Final),
        };
        Ok((report, class))
    }

    /// The rest of a page that ran out of time, handed to the next page: one message on the
    /// function's own queue, starting after the last cluster this page went through.
    async fn hand_on(&self, report: &mut SweepReport) {
        let Some(next) = &report.next else { return };
        let body = serde_json::json!({"action": "sweep", "from": next}).to_string();
        match &self.rechecks {
            Some(queue) => match queue.enqueue(&[body], Duration::ZERO).await {
                Ok(()) => {
                    report.handed_on = true;
                    tracing::info!(%next, left = report.left, "sweep: the next page is queued");
                }
                Err(e) => {
                    tracing::error!(%next, left = report.left, error = %e, "sweep: could not queue the next page; the next schedule starts from the beginning")
                }
            },
            None => {
                tracing::warn!(%next, left = report.left, "sweep: CELLBRIDGE_CONFIRM_QUEUE_URL is not set: the rest waits for the next schedule, which starts from the beginning")
            }
        }
    }
}
