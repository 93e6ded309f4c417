//! A laptop's `--kubeconfig` bootstrap leaves a record too: the daily sweep bootstraps every
//! cluster with no record of a completed bootstrap, so an unrecorded laptop run would be driven
//! again every day. The run, which skipped EKS to apply, writes its outcome on the cluster's
//! tags when the AWS credentials at hand allow it (DescribeCluster for the ARN, then
//! TagResource, as a function's run does); otherwise it says which tag to set: the record, or the
//! sweep's opt-out.

use super::{Bootstrapper, Request, follow, report::Report};
use crate::ports::cluster::{Accounts, ClusterApi as _, KubeConnect};
use crate::ports::secrets::SecretStore;
use crate::pure::bootstrap::record::{FluxRecord, OPT_OUT_TAG, OPT_OUT_VALUE, parse_time};

impl<A: Accounts, K: KubeConnect, S: SecretStore> Bootstrapper<A, K, S> {
    /// Records a kubeconfig run's outcome on the EKS cluster `req` names, or sets
    /// [`Report::record_hint`] to the tag to set by hand. A dry run records nothing.
    pub async fn record_after_kubeconfig(&self, req: &Request, report: &mut Report) {
        if req.dry_run {
            return;
        }
        let opt_out = format!(
            "or opt the cluster out of the sweep with the tag {OPT_OUT_TAG}={OPT_OUT_VALUE}, set where the cluster is defined"
        );
        let Some(flux) = report.flux.as_mut() else {
            report.record_hint = Some(format!(
                "no outcome to record (the run did not wait for Flux): the daily sweep will bootstrap cluster {} through the function unless it is recorded; run again without --no-wait, {opt_out}",
                req.cluster
            ));
            return;
        };
        let why = match self.role_for(req, None).await {
            Err(e) => e.to_string(),
            Ok(role) => match self.accounts.open(&req.region, role.as_deref()).await {
                Err(e) => e.to_string(),
                Ok(api) => match api.describe_cluster(&req.cluster).await {
                    Err(e) => e.to_string(),
                    Ok(None) => format!("EKS has no cluster {} in {}", req.cluster, req.region),
                    Ok(Some(info)) => {
                        follow::record_on(&api, &info, flux).await;
                        if flux.recorded {
                            return;
                        }
                        "TagResource was refused".to_owned()
                    }
                },
            },
        };
        let since = parse_time(&flux.since).unwrap_or_else(std::time::SystemTime::now);
        let tags = FluxRecord {
            outcome: flux.outcome,
            since,
        }
        .to_tags()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
        let (cluster, region) = (&req.cluster, &req.region);
        tracing::warn!(cluster, error = %why, "the outcome could not be recorded on the cluster's tags");
        report.record_hint = Some(format!(
            "the outcome could not be recorded on the cluster ({why}): the daily sweep bootstraps every cluster without a record. Set it: aws eks tag-resource --resource-arn $(aws eks describe-cluster --name {cluster} --region {region} --query cluster.arn --output text) --tags {tags}; {opt_out}"
        ));
    }
}
