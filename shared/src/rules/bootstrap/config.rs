//! The bootstrap's configuration, from the environment (the same names as state-sync for the
//! fleet repo and GitHub, plus Flux's Git URL and credentials secret).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::ports::cluster::eks::{Network, is_cidr};
use crate::ports::cluster::kube::Tuning;
use crate::pure::template::{self, FluxGit};
use crate::shell::config::{ConfigError, optional};

/// Settings of one deployment; read once at cold start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `CELLBRIDGE_FLUX_GIT_URL`: the URL a cell's `gotk-sync.yaml` written from the template
    /// gets. Unset: the template's.
    pub flux_git_url: Option<String>,
    /// `CELLBRIDGE_FLUX_GIT_BRANCH`: the branch a cell's `gotk-sync.yaml` written from the
    /// template gets. Unset: the template's `ref.branch`, else the fleet's base branch.
    pub flux_git_branch: Option<String>,
    /// `CELLBRIDGE_FLUX_GIT_SECRET`: Secrets Manager name or ARN of Flux's Git credentials.
    pub flux_git_secret: Option<String>,
    /// `CELLBRIDGE_CLUSTER_WAIT_SECS`: how long one invocation waits for a CREATING cluster
    /// before handing the event back (default 600).
    pub cluster_wait: Duration,
    /// `CELLBRIDGE_CLUSTER_POLL_SECS`: DescribeCluster interval while waiting (default 20).
    pub cluster_poll: Duration,
    /// `CELLBRIDGE_ACCESS_PRINCIPAL_ARN`: the function role's full ARN (with its path) for the
    /// access entry. Unset: derived from STS GetCallerIdentity (path-less).
    pub access_principal_arn: Option<String>,
    /// `CELLBRIDGE_ACCOUNT_ROLES`: the role to assume for a cluster in each other account
    /// (account id → role ARN in that account). An event from an account that is neither
    /// cellbridge's own nor listed here is refused.
    pub account_roles: BTreeMap<String, String>,
    pub tuning: Tuning,
    pub confirm: Confirm,
}

/// How a bootstrap is followed after the apply, until Flux has taken over or the deadline.
/// The first check is the bootstrap's own: it keeps looking for up to
/// [`Tuning::ready_timeout`] (`CELLBRIDGE_READY_TIMEOUT_SECS`, default 120) while it holds the
/// cluster; the re-checks after it are queued ([`crate::pure::bootstrap::record::next_delay`]).
#[derive(Debug, Clone)]
pub struct Confirm {
    /// `CELLBRIDGE_CONFIRM_DEADLINE_SECS` (default 1200): after it, whatever is seen is final
    /// (`timed-out` when nothing explains it).
    pub deadline: Duration,
    /// `CELLBRIDGE_CONFIRM_GRACE_SECS` (default 300, at most the deadline): `git-auth`,
    /// `image-pull` and `build-failed` are final after it, the races of a fresh apply being over.
    pub grace: Duration,
    /// Between two checks within one run.
    pub poll: Duration,
    /// Stop after the apply (`cellbridge bootstrap --no-wait`): no check at all.
    pub skip: bool,
}

impl Default for Confirm {
    fn default() -> Self {
        Confirm {
            deadline: Duration::from_secs(1200),
            grace: Duration::from_secs(300),
            poll: Duration::from_secs(5),
            skip: false,
        }
    }
}

fn secs(name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
    match optional(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s < 86_400.0)
            .map(Duration::from_secs_f64)
            .ok_or(ConfigError::Invalid {
                name,
                value: v,
                reason: "expected a number of seconds".into(),
            }),
    }
}

impl Settings {
    pub fn from_env() -> Result<Settings, ConfigError> {
        let d = Tuning::default();
        let tuning = Tuning {
            request_timeout: secs("CELLBRIDGE_KUBE_TIMEOUT_SECS", d.request_timeout)?,
            crd_timeout: secs("CELLBRIDGE_CRD_TIMEOUT_SECS", d.crd_timeout)?,
            ready_timeout: secs("CELLBRIDGE_READY_TIMEOUT_SECS", d.ready_timeout)?,
            ..d
        };
        let flux_git_url = optional("CELLBRIDGE_FLUX_GIT_URL");
        if let Some(u) = &flux_git_url
            && !(u.starts_with("https://") || u.starts_with("ssh://") || u.starts_with("http://"))
        {
            return Err(ConfigError::Invalid {
                name: "CELLBRIDGE_FLUX_GIT_URL",
                value: u.clone(),
                reason: "expected an ssh:// or https:// URL (Flux does not take scp-style git@host:path)".into(),
            });
        }
        let flux_git_branch = crate::shell::config::optional_branch("CELLBRIDGE_FLUX_GIT_BRANCH")?;
        let account_roles = crate::rules::cells::account_roles_from_env()?;
        let c = Confirm::default();
        let deadline = secs("CELLBRIDGE_CONFIRM_DEADLINE_SECS", c.deadline)?;
        let confirm = Confirm {
            deadline,
            grace: secs("CELLBRIDGE_CONFIRM_GRACE_SECS", c.grace)?.min(deadline),
            ..c
        };
        Ok(Settings {
            flux_git_url,
            flux_git_branch,
            flux_git_secret: optional("CELLBRIDGE_FLUX_GIT_SECRET"),
            cluster_wait: secs("CELLBRIDGE_CLUSTER_WAIT_SECS", Duration::from_secs(600))?,
            cluster_poll: secs("CELLBRIDGE_CLUSTER_POLL_SECS", Duration::from_secs(20))?,
            access_principal_arn: optional("CELLBRIDGE_ACCESS_PRINCIPAL_ARN"),
            account_roles,
            tuning,
            confirm,
        })
    }

    /// What cellbridge sets in the sync objects it writes from the template, `base_branch` being
    /// the branch the fleet was read from when known.
    pub fn flux_git(&self, base_branch: Option<&str>) -> FluxGit {
        FluxGit {
            url: self.flux_git_url.clone(),
            branch: self.flux_git_branch.clone(),
            base_branch: base_branch.map(str::to_owned),
        }
    }
}

/// Where cluster-bootstrap runs, as the module declares it, to decide before anything is
/// created whether the cluster's endpoint can be reached ([`crate::ports::cluster::eks::EndpointAccess`]):
/// `CELLBRIDGE_VPC_ID` (the function's VPC; `none` outside any VPC), `CELLBRIDGE_REACHABLE_VPCS`
/// (comma-separated VPCs connected by peering or a transit gateway whose private endpoints it
/// reaches), `CELLBRIDGE_EGRESS_CIDRS` (comma-separated public CIDRs its traffic leaves from).
/// `None` when `CELLBRIDGE_VPC_ID` is unset (the command line on a laptop, whose network
/// cellbridge cannot know): no decision then, only the bounded connect.
pub fn network_from_env() -> Result<Option<Network>, ConfigError> {
    let Some(vpc) = std::env::var("CELLBRIDGE_VPC_ID").ok().map(|v| v.trim().to_owned()) else {
        return Ok(None);
    };
    let list = |name: &'static str| -> Vec<String> {
        optional(name)
            .map(|v| {
                v.split(',')
                    .map(|x| x.trim().to_owned())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let vpc_id = (!vpc.is_empty() && vpc != "none").then_some(vpc);
    let egress_cidrs = list("CELLBRIDGE_EGRESS_CIDRS");
    if let Some(bad) = egress_cidrs.iter().find(|c| !is_cidr(c)) {
        return Err(ConfigError::Invalid {
            name: "CELLBRIDGE_EGRESS_CIDRS",
            value: bad.clone(),
            reason: "expected comma-separated CIDRs, e.g. 203.0.113.7/32".into(),
        });
    }
    Ok(Some(Network {
        vpc_id,
        reachable_vpcs: list("CELLBRIDGE_REACHABLE_VPCS"),
        egress_cidrs,
    }))
}

/// The base branch of a fleet checkout, the local stand-in for GitHub's answer:
/// `CELLBRIDGE_BASE_BRANCH` when set (as for the functions), else the remote's default branch
/// as the clone recorded it (`refs/remotes/origin/HEAD`, which `git clone` writes from the
/// remote's HEAD). Not the checked-out branch: that is often a working branch Flux must not
/// follow. `None` when neither is there (no Git repository with its top level at `root`, no
/// `origin`, a clone without that ref); a `gotk-sync.yaml` that names its branch needs none.
pub fn checkout_base_branch(root: &Path) -> Option<String> {
    if let Some(b) = optional("CELLBRIDGE_BASE_BRANCH") {
        return Some(b);
    }
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        String::from_utf8(out.stdout).ok().map(|s| s.trim().to_owned())
    };
    // A directory inside some other repository (a test fixture, say) is no fleet checkout.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if std::fs::canonicalize(top).ok()? != std::fs::canonicalize(root).ok()? {
        return None;
    }
    git(&["symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"])?
        .strip_prefix("origin/")
        .filter(|b| template::check_branch(b).is_ok())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_checkouts_base_branch_is_origins_head_never_the_checked_out_branch() {
        if optional("CELLBRIDGE_BASE_BRANCH").is_some() {
            return; // the variable decides, whatever the checkout says
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert_eq!(checkout_base_branch(root), None, "no repository");
        git(root, &["init", "--quiet", "--initial-branch", "feature-x"]);
        assert_eq!(checkout_base_branch(root), None, "no origin/HEAD");
        git(
            root,
            &["symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/trunk"],
        );
        assert_eq!(checkout_base_branch(root).as_deref(), Some("trunk"));
        // A directory below the repository's top level is no checkout of its own.
        std::fs::create_dir(root.join("fleet")).unwrap();
        assert_eq!(checkout_base_branch(&root.join("fleet")), None);
    }
}
