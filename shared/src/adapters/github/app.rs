//! A GitHub App installation's credentials, minted by cellbridge itself: the App's JWT, and the
//! installation token narrowed to the fleet repository and to cellbridge's permissions
//! ([`permissions::REQUIRED`]), kept until shortly before it expires.
//!
//! octocrab's `installation()` asks for a token with every permission and repository the
//! installation has, and signs its JWT with the numeric App ID only; a token narrowed to what
//! cellbridge writes with is what "Create an installation access token for an app" offers
//! (`repositories`, `permissions`;
//! <https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app>), and
//! a leaked one can do no more than cellbridge does.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use octocrab::jsonwebtoken::{self, Algorithm, EncodingKey, Header};
use serde::Serialize;
use serde_json::{Value, json};

use super::Issuer;
use super::permissions;
use crate::pure::redact::Secret;

/// A token is minted again this long before GitHub's `expires_at`: a request sent with it must
/// still be answered (a sync's requests take seconds, retries up to a minute).
pub(crate) const RENEW_BEFORE: Duration = Duration::from_secs(5 * 60);

/// One GitHub App installation, as the fleet's client acts for it.
pub(crate) struct App {
    issuer: Issuer,
    pub(crate) installation_id: u64,
    key: EncodingKey,
    /// The installation token, once minted.
    token: std::sync::Mutex<Option<Minted>>,
    /// One mint at a time: concurrent requests wait for the token the first one asks for.
    pub(crate) minting: tokio::sync::Mutex<()>,
    /// The installation does not grant [`permissions::CHECKS`]: learnt when GitHub refused a
    /// token asking for it, and the token is asked for without it from then on.
    pub(crate) no_checks: std::sync::atomic::AtomicBool,
}

/// An installation token and what GitHub said of it.
#[derive(Clone)]
pub(crate) struct Minted {
    pub(crate) token: Secret<String>,
    pub(crate) expires_at: SystemTime,
    /// The permissions the token was granted (the 201's `permissions`).
    pub(crate) permissions: Value,
}

impl App {
    /// The App for `issuer` and `installation_id`; the key is parsed now, and its error never
    /// quotes it.
    pub(crate) fn new(issuer: Issuer, installation_id: u64, private_key: &Secret<String>) -> Result<Self, String> {
        let key = EncodingKey::from_rsa_pem(private_key.expose().as_bytes())
            .map_err(|_| "the GitHub App private_key is not an RSA private key in PEM form".to_owned())?;
        Ok(Self {
            issuer,
            installation_id,
            key,
            token: std::sync::Mutex::new(None),
            minting: tokio::sync::Mutex::new(()),
            no_checks: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The App's JWT: RS256, `iat` 60 s in the past and `exp` 9 minutes ahead ("To protect
    /// against clock drift, we recommend that you set this 60 seconds in the past"; `exp` "must
    /// be no more than 10 minutes into the future"), `iss` the client ID or the App ID
    /// ("Generating a JSON Web Token (JWT) for a GitHub App",
    /// <https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app>).
    pub(crate) fn jwt(&self, now: SystemTime) -> Result<Secret<String>, String> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Iss<'a> {
            Number(u64),
            Text(&'a str),
        }
        #[derive(Serialize)]
        struct Claims<'a> {
            iat: u64,
            exp: u64,
            iss: Iss<'a>,
        }
        let now = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let claims = Claims {
            iat: now.saturating_sub(60),
            exp: now + 9 * 60,
            iss: match &self.issuer {
                Issuer::AppId(id) => Iss::Number(*id),
                Issuer::ClientId(id) => Iss::Text(id),
            },
        };
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .map(Secret::new)
            .map_err(|e| format!("signing the GitHub App's JWT: {e}"))
    }

    /// The installation token while it is good for [`RENEW_BEFORE`] more.
    pub(crate) fn cached(&self, now: SystemTime) -> Option<Minted> {
        let slot = self.token.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().filter(|m| fresh(m.expires_at, now)).cloned()
    }

    pub(crate) fn store(&self, minted: Minted) {
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = Some(minted);
    }

    /// Forgets the token (GitHub refused it: revoked, or the installation changed).
    pub(crate) fn forget_token(&self) {
        *self.token.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Whether a token expiring at `expires_at` is still good to send at `now`: not within
/// [`RENEW_BEFORE`] of its expiry.
pub(crate) fn fresh(expires_at: SystemTime, now: SystemTime) -> bool {
    now + RENEW_BEFORE < expires_at
}

/// The body of "Create an installation access token for an app": the fleet repository alone
/// ("List of repository names that the token should have access to", names without the owner)
/// and exactly the permissions cellbridge writes with, and [`permissions::CHECKS`] when `checks`
/// (the installation grants it, or is not known not to).
pub(crate) fn token_request(repo: &str, checks: bool) -> Value {
    let permissions: serde_json::Map<String, Value> = permissions::REQUIRED
        .iter()
        .chain(checks.then_some(&permissions::CHECKS))
        .map(|(name, level)| ((*name).to_owned(), json!(level)))
        .collect();
    json!({"repositories": [repo], "permissions": permissions})
}

/// GitHub's 422 to a token asking for permissions the installation was not granted ("The
/// permissions requested are not granted to this installation.", the message clients meet:
/// <https://github.com/peter-murray/workflow-application-token-action/issues/48>).
pub(crate) fn permissions_refused(message: &str) -> bool {
    message.contains("permissions requested are not granted")
}

/// GitHub's 422 to a token asking for a repository the installation cannot see ("There is at
/// least one repository that does not exist or is not accessible to the parent installation.",
/// as clients quote it; the operation documents 422 "Validation failed").
pub(crate) fn repository_refused(message: &str) -> bool {
    message.contains("repository") && (message.contains("not accessible") || message.contains("does not exist"))
}

/// GitHub's timestamps, ISO 8601 in UTC (`2026-12-05T23:40:00Z`; "Timezones and the REST API",
/// <https://docs.github.com/rest/using-the-rest-api/timezones-and-the-rest-api>).
pub(crate) fn parse_time(v: &str) -> Option<SystemTime> {
    crate::ports::cluster::access::parse_rfc3339(v.trim())
}

/// `GitHub-Authentication-Token-Expiration`: when the token a request carried expires, sent with
/// every answer to a token that has an expiry, absent for one without ("Expiration options for
/// personal access tokens", <https://github.blog/changelog/2021-07-26-expiration-options-for-personal-access-tokens/>).
/// Its value reads `2021-10-07 19:07:53 UTC` (as GitHub sends it: curl output quoted in
/// <https://github.com/github/gh-aw/issues/20097>); a numeric zone (`+0000`, `-0700`) is read as
/// well, as go-github's parser does (<https://github.com/google/go-github/pull/2031>).
pub(crate) fn parse_token_expiration(v: &str) -> Option<SystemTime> {
    let v = v.trim();
    let (date, rest) = v.split_once(' ')?;
    let (time, zone) = rest.split_once(' ').unwrap_or((rest, "UTC"));
    let local = crate::ports::cluster::access::parse_rfc3339(&format!("{date}T{time}Z"))?;
    // Local time minus the zone's offset is UTC.
    let offset = match zone.trim() {
        "UTC" | "GMT" | "Z" => 0i64,
        z if z.len() == 5 && (z.starts_with('+') || z.starts_with('-')) => {
            let hours: i64 = z[1..3].parse().ok()?;
            let minutes: i64 = z[3..].parse().ok()?;
            let secs = hours * 3600 + minutes * 60;
            if z.starts_with('-') { -secs } else { secs }
        }
        _ => return None,
    };
    if offset >= 0 {
        local.checked_sub(Duration::from_secs(offset as u64))
    } else {
        local.checked_add(Duration::from_secs(offset.unsigned_abs()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_expiration_header_reads_as_github_writes_it() {
        let t = parse_token_expiration("2021-10-07 19:07:53 UTC").unwrap();
        assert_eq!(t, UNIX_EPOCH + Duration::from_secs(1_633_633_673));
        assert_eq!(parse_token_expiration("2021-10-07 21:07:53 +0200"), Some(t));
        assert_eq!(parse_token_expiration("2021-10-07 12:07:53 -0700"), Some(t));
        assert_eq!(parse_token_expiration("soon"), None);
        assert_eq!(parse_time("2021-10-07T19:07:53Z"), Some(t));
    }

    #[test]
    fn the_token_asks_for_the_fleet_repository_and_cellbridges_permissions_only() {
        let body = token_request("fleet", false);
        assert_eq!(body["repositories"], json!(["fleet"]));
        assert_eq!(
            body["permissions"].as_object().unwrap().len(),
            permissions::REQUIRED.len()
        );
        assert!(permissions::missing(&body["permissions"]).is_empty());
        assert!(!permissions::reads_checks(&body["permissions"]));
        let body = token_request("fleet", true);
        assert!(
            permissions::missing(&body["permissions"]).is_empty() && permissions::reads_checks(&body["permissions"])
        );
    }

    #[test]
    fn a_token_is_renewed_five_minutes_before_it_expires() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert!(fresh(now + Duration::from_secs(3600), now));
        assert!(fresh(now + Duration::from_secs(301), now));
        assert!(!fresh(now + Duration::from_secs(300), now));
        assert!(!fresh(now - Duration::from_secs(1), now));
    }

    #[test]
    fn refusals_are_told_apart() {
        assert!(permissions_refused(
            "The permissions requested are not granted to this installation."
        ));
        assert!(repository_refused(
            "There is at least one repository that does not exist or is not accessible to the parent installation."
        ));
        assert!(!repository_refused(
            "The permissions requested are not granted to this installation."
        ));
    }
}
