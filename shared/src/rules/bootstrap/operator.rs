//! A Flux Operator cell's bootstrap, prepared before anything is applied: the operator's install
//! manifest and the FluxInstance read from the fleet repo and checked
//! ([`crate::pure::bootstrap::operator`]), and the Git credentials checked against the
//! GitRepository the operator will make from `spec.sync` (its URL and provider), with the same
//! rules as a `gotk-sync.yaml`'s ([`gitsecret::parse`]). The apply itself is the same as for any
//! cell ([`Bootstrapper::run`]); its owner, whose presence means Flux is there, is the FluxInstance,
//! and the checks after it read the FluxInstance, the operator's Deployment and the sync objects
//! the operator makes.

use super::{BootstrapError, Bootstrapper, Prepared};
use crate::ports::cluster::kube::Observe;
use crate::ports::cluster::{Accounts, KubeConnect};
use crate::ports::secrets::SecretStore;
use crate::pure::bootstrap::gitsecret::{self, FluxGitRepository, GitCredentials};
use crate::pure::bootstrap::{operator, plan};
use crate::pure::fleet::FleetRead;

impl<A: Accounts, K: KubeConnect, S: SecretStore> Bootstrapper<A, K, S> {
    /// A Flux Operator cell's plan; `None` when the cell's directory (or, for a cell without a
    /// `flux-system/` of its own, the template) holds no FluxInstance.
    pub(super) async fn prepare_operator(
        &self,
        fleet: &dyn FleetRead,
        base_branch: Option<&str>,
        cell: &str,
    ) -> Result<Option<Prepared>, BootstrapError> {
        let Some(op) = operator::read(fleet, cell, &self.settings.flux_git(base_branch))? else {
            return Ok(None);
        };
        let credentials = self.git_credentials(&op.repository()).await?;
        tracing::debug!(cell, instance = %op.instance_file, operator = %op.operator_file, secret = op.pull_secret(), "a Flux Operator cell");
        let owner = op.owner();
        let components_file = op.operator_file.clone();
        let sync_file = op.instance_file.clone();
        let sync_name = op.sync_name().to_owned();
        let kind = credentials.kind;
        let secrets = credentials
            .values()
            .map(|v| crate::pure::redact::Secret::new(v.to_owned()))
            .collect();
        let steps = op.build(&credentials);
        let git_secret = plan::git_secret_of(&steps);
        let controllers = steps
            .iter()
            .filter(|s| s.target.kind == "Deployment" && s.target.namespace.as_deref() == Some(plan::FLUX_NAMESPACE))
            .map(|s| s.target.name.clone())
            .collect();
        Ok(Some(Prepared {
            steps,
            components_file,
            sync_file,
            credentials: Some(kind),
            observe: Observe {
                namespace: plan::FLUX_NAMESPACE.into(),
                controllers,
                git_repository: sync_name.clone(),
                kustomization: sync_name,
                flux_instance: Some(operator::NAME.into()),
                git_secret,
            },
            secrets,
            owner: Some(owner),
            prior: super::Start::now(),
        }))
    }

    /// Flux's Git credentials from Secrets Manager (`CELLBRIDGE_FLUX_GIT_SECRET`), validated for
    /// the GitRepository that will use them.
    pub(super) async fn git_credentials(&self, repo: &FluxGitRepository) -> Result<GitCredentials, BootstrapError> {
        let secret_name = self
            .settings
            .flux_git_secret
            .as_deref()
            .ok_or(BootstrapError::NoGitSecret)?;
        let secret_text = self.secrets.secret_string(secret_name).await?;
        Ok(gitsecret::parse(secret_name, secret_text.expose(), repo)?)
    }
}
