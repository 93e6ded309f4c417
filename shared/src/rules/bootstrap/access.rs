//! Temporary cluster access through an EKS access entry for our own role.
//!
//! The entry is tagged when cellbridge creates it, so a run that died before deleting it is
//! recognised by the next run, which then deletes it; an entry someone else made is used as it
//! is and never touched.

use std::time::{Duration, SystemTime};

use crate::ports::cluster::eks::EksError;
use crate::ports::cluster::{AccessEntry, AccessError, ClusterApi};
use crate::shell::config::ConfigError;

/// `CELLBRIDGE_ACCESS_ENTRY_TTL_SECS`: a temporary entry older than this is a leftover (the run
/// that made it is over: longer than any invocation, whose limit is 900 s) and is deleted.
pub const TTL_ENV: &str = "CELLBRIDGE_ACCESS_ENTRY_TTL_SECS";
pub const DEFAULT_TTL: Duration = Duration::from_secs(1800);

/// The longest a Lambda invocation runs (its timeout's maximum, 900 s:
/// <https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html>). A temporary entry
/// younger than this may be held by a run at work right now (two runs on one cluster: a
/// `CreateCluster` event and a sweep's catch-up, a manual run): a run that finds one uses it
/// but never deletes it, so that it is never deleted under the run that made it. Older, the run
/// that made it is over, and the run that finds it deletes it after its own work.
pub const RUN_LONGEST: Duration = Duration::from_secs(900);

/// The TTL from the environment; unset or empty: [`DEFAULT_TTL`]; anything but a whole number
/// of seconds of at least 900 (a run's longest) is refused.
pub fn ttl_from_env() -> Result<Duration, ConfigError> {
    match crate::shell::config::optional(TTL_ENV) {
        Some(v) => parse_ttl(&v).map_err(|reason| ConfigError::Invalid {
            name: TTL_ENV,
            value: v,
            reason,
        }),
        None => Ok(DEFAULT_TTL),
    }
}

pub fn parse_ttl(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<u64>() {
        Ok(secs) if secs >= 900 => Ok(Duration::from_secs(secs)),
        Ok(_) => Err("at least 900 s (a Lambda run's longest), or a live run's entry could be swept".into()),
        Err(e) => Err(format!("a whole number of seconds: {e}")),
    }
}

/// How old the entry is at `now`; an entry without a time counts as expired (`None`).
pub fn age(entry: &AccessEntry, now: SystemTime) -> Option<Duration> {
    entry.created_at.map(|t| now.duration_since(t).unwrap_or_default())
}

/// Whether cellbridge's temporary entry outlived `ttl` (no time known: it predates the tag,
/// so it is old).
pub fn expired(entry: &AccessEntry, now: SystemTime, ttl: Duration) -> bool {
    entry.temporary && age(entry, now).is_none_or(|a| a > ttl)
}

/// How we hold access to the cluster for this run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    pub principal_arn: String,
    /// True when the entry is cellbridge's (created now, or left by a run that died) and is
    /// deleted at the end, unless `adopted`.
    pub temporary: bool,
    /// cellbridge's temporary entry, found younger than [`RUN_LONGEST`]: another run may hold
    /// it, so this run leaves it (to that run, or to the next run and the sweep once it is older).
    pub adopted: bool,
}

/// The grant an existing entry gives, if there is one: cellbridge's own (tagged) entry gets
/// its policy made sure of and is deleted after the run; anyone else's is used as it is. `run`:
/// this run's token, when its own CreateAccessEntry may have made the entry (an answer lost and
/// retried): its own entry, however young, is no other run's and is deleted after.
async fn existing(
    api: &impl ClusterApi,
    cluster: &str,
    principal: &str,
    run: Option<&str>,
) -> Result<Option<Grant>, AccessError> {
    let Some(entry) = api.access_entry(cluster, principal).await? else {
        return Ok(None);
    };
    // An expired leftover of cellbridge's (a run that died long ago) is deleted rather than
    // reused: its age would let a concurrent sweep delete it under this run, and a fresh
    // entry starts a fresh clock. A bad TTL setting keeps the default here; the sweep reports it.
    let ttl = ttl_from_env().unwrap_or(DEFAULT_TTL);
    if expired(&entry, SystemTime::now(), ttl) {
        tracing::info!(
            cluster,
            principal,
            "deleting an expired temporary access entry a run left"
        );
        api.delete_access_entry(cluster, principal).await?;
        return Ok(None);
    }
    if entry.temporary {
        // Another run's, or one a run that died left: make sure its policy is there.
        api.associate_admin_policy(cluster, principal).await?;
    }
    let mine = run.is_some() && entry.run.as_deref() == run;
    let adopted = entry.temporary && !mine && age(&entry, SystemTime::now()).is_some_and(|a| a <= RUN_LONGEST);
    tracing::info!(
        cluster,
        principal,
        temporary = entry.temporary,
        adopted,
        "access entry exists"
    );
    Ok(Some(Grant {
        principal_arn: principal.into(),
        temporary: entry.temporary,
        adopted,
    }))
}

/// Makes sure `principal` has an access entry with cluster-admin rights.
pub async fn ensure(api: &impl ClusterApi, cluster: &str, principal: &str) -> Result<Grant, AccessError> {
    if let Some(grant) = existing(api, cluster, principal, None).await? {
        return Ok(grant);
    }
    // This run's mark on the entry it makes (`RUN_TAG`): random, so that no other run has it.
    let run = uuid::Uuid::new_v4().to_string();
    let created = match api.create_access_entry(cluster, principal, &run).await {
        Ok(created) => created,
        Err(e) => {
            discard_lost(api, cluster, principal, &run).await;
            return Err(e.into());
        }
    };
    if !created {
        // Created in between: by someone else, by another run, or by this very call (an attempt
        // that worked but whose answer was lost, retried by the SDK). The tags tell: this run's
        // own is deleted after it, another run's young one is left to it.
        return match existing(api, cluster, principal, Some(&run)).await? {
            Some(grant) => Ok(grant),
            // Gone again already: let a later run sort it out.
            None => Err(EksError::Api {
                operation: "CreateAccessEntry",
                cluster: cluster.into(),
                reason: "the access entry was created and deleted again by someone else meanwhile".into(),
                retryable: true,
            }
            .into()),
        };
    }
    tracing::info!(cluster, principal, "created a temporary access entry");
    let grant = Grant {
        principal_arn: principal.into(),
        temporary: true,
        adopted: false,
    };
    if let Err(e) = api.associate_admin_policy(cluster, principal).await {
        // Do not leave a useless entry behind.
        let _ = release(api, cluster, &grant).await;
        return Err(e.into());
    }
    Ok(grant)
}

/// A CreateAccessEntry that failed may have made the entry all the same: an attempt whose answer
/// was lost (timed out) and that the SDK retried until it gave up. Tagged with this `run`'s mark,
/// the entry is this run's and is deleted now rather than left holding cluster-admin until the
/// next run or the sweep; another run's (made meanwhile) is that run's. Best effort: the
/// create's error is the one the run reports.
async fn discard_lost(api: &impl ClusterApi, cluster: &str, principal: &str, run: &str) {
    if let Ok(Some(entry)) = api.access_entry(cluster, principal).await
        && entry.temporary
        && entry.run.as_deref() == Some(run)
    {
        match api.delete_access_entry(cluster, principal).await {
            Ok(_) => tracing::info!(
                cluster,
                principal,
                "deleted the temporary access entry a failed CreateAccessEntry made"
            ),
            Err(e) => tracing::warn!(
                cluster,
                principal,
                error = %e,
                "could not delete the temporary access entry a failed CreateAccessEntry made; the next run or the sweep deletes it"
            ),
        }
    }
}

/// Deletes the entry when it is ours; an entry someone else made, or one another run may hold
/// (`adopted`), stays. `Ok(true)`: it is gone.
pub async fn release(api: &impl ClusterApi, cluster: &str, grant: &Grant) -> Result<bool, AccessError> {
    if !grant.temporary {
        return Ok(false);
    }
    if grant.adopted {
        tracing::info!(cluster, principal = %grant.principal_arn, "the temporary access entry was another run's: left to it");
        return Ok(false);
    }
    let existed = api.delete_access_entry(cluster, &grant.principal_arn).await?;
    if existed {
        tracing::info!(cluster, principal = %grant.principal_arn, "deleted the temporary access entry");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_and_expiry() {
        assert_eq!(parse_ttl(" 3600 ").unwrap(), Duration::from_secs(3600));
        assert!(parse_ttl("60").is_err());
        assert!(parse_ttl("1h").is_err());
        let now = SystemTime::now();
        let entry = |temporary, ago: Option<u64>| AccessEntry {
            temporary,
            created_at: ago.map(|s| now - Duration::from_secs(s)),
            run: None,
        };
        let ttl = DEFAULT_TTL;
        assert!(expired(&entry(true, Some(1801)), now, ttl));
        assert!(!expired(&entry(true, Some(1800)), now, ttl));
        assert!(expired(&entry(true, None), now, ttl));
        // Not cellbridge's: never expired, however old.
        assert!(!expired(&entry(false, Some(86_400)), now, ttl));
        assert!(!expired(&entry(false, None), now, ttl));
    }
}
