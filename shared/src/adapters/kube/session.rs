//! The client: it trusts the cluster's CA, signs a fresh EKS token before the 15 minutes EKS
//! allows, and bounds every request with the tuning's timeouts.

use std::time::{Duration, Instant, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use base64::Engine as _;
use http::{HeaderName, HeaderValue};
use kube::Client;

use super::token;
use crate::ports::cluster::kube::{ApplyError, ClusterAuth, Tuning};

/// How long a connection to the API server may take: the request timeout, at most 10 s.
pub(super) fn connect_timeout(tuning: &Tuning) -> Duration {
    tuning.request_timeout.min(Duration::from_secs(10))
}

/// PEM certificates → DER, what `kube::Config::root_cert` takes.
pub fn pem_to_der(pem: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "CA is not PEM text".to_owned())?;
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line == "-----BEGIN CERTIFICATE-----" {
            cur = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            let b64 = cur.take().ok_or("CA PEM has END without BEGIN")?;
            out.push(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| "CA PEM is not base64".to_owned())?,
            );
        } else if let Some(c) = cur.as_mut() {
            c.push_str(line);
        }
    }
    if out.is_empty() {
        return Err("CA PEM holds no certificate".into());
    }
    Ok(out)
}

/// A Kubernetes client that renews its EKS token before the 15 minutes EKS allows.
pub struct Session {
    pub(super) auth: ClusterAuth,
    pub(super) tuning: Tuning,
    pub(super) client: Client,
    pub(super) default_namespace: String,
    pub(super) issued: Instant,
    /// Until when 401/403 may still be the access entry propagating.
    pub(super) auth_grace_until: Option<Instant>,
    /// The API server's URL, for errors.
    pub(super) endpoint: String,
    /// The API server has answered once in this session: a later connect timeout is a bad
    /// moment of the network, not an endpoint this function cannot reach.
    pub(super) answered: std::sync::atomic::AtomicBool,
}

impl Session {
    pub async fn connect(auth: ClusterAuth, tuning: Tuning, fresh_access_entry: bool) -> Result<Session, ApplyError> {
        crate::shell::telemetry::install_crypto_provider();
        let (client, default_namespace, endpoint) = build_client(&auth, &tuning).await?;
        let auth_grace_until = fresh_access_entry.then(|| Instant::now() + tuning.auth_grace);
        Ok(Session {
            auth,
            tuning,
            client,
            default_namespace,
            issued: Instant::now(),
            auth_grace_until,
            endpoint,
            answered: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// The client, rebuilt with a new token when the current one is close to expiry.
    pub async fn client(&mut self) -> Result<Client, ApplyError> {
        if matches!(self.auth, ClusterAuth::Eks { .. }) && self.issued.elapsed() >= self.tuning.token_refresh {
            tracing::info!("renewing the EKS token");
            self.client = build_client(&self.auth, &self.tuning).await?.0;
            self.issued = Instant::now();
        }
        Ok(self.client.clone())
    }

    pub(super) fn in_auth_grace(&self) -> bool {
        self.auth_grace_until.is_some_and(|t| Instant::now() < t)
    }
}

/// The client, its default namespace and the API server's URL.
pub(super) async fn build_client(auth: &ClusterAuth, tuning: &Tuning) -> Result<(Client, String, String), ApplyError> {
    let connect = |reason: String| ApplyError::Connect { reason };
    let mut config = match auth {
        ClusterAuth::Kubeconfig(path) => {
            let kerr = |reason: String| ApplyError::Kubeconfig {
                path: path.display().to_string(),
                reason,
            };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| kerr(e.to_string()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| kerr(e.to_string()))?
        }
        ClusterAuth::Eks {
            credentials,
            region,
            cluster,
            sts_endpoint,
            url,
            ca_pem,
        } => {
            let creds = credentials
                .provide_credentials()
                .await
                .map_err(|e| connect(format!("no AWS credentials to sign the EKS token: {e}")))?;
            let tok = token::eks_token(&creds, region, cluster, sts_endpoint, SystemTime::now())
                .map_err(|e| connect(e.to_string()))?;
            let uri: http::Uri = url
                .parse()
                .map_err(|_| connect(format!("cluster endpoint {url:?} is not a URL")))?;
            let mut c = kube::Config::new(uri);
            c.root_cert = Some(pem_to_der(ca_pem).map_err(|e| connect(format!("cluster {cluster}: {e}")))?);
            let mut value = HeaderValue::from_str(&format!("Bearer {tok}"))
                .map_err(|_| connect("token is not a header value".into()))?;
            value.set_sensitive(true);
            c.headers.push((HeaderName::from_static("authorization"), value));
            c
        }
    };
    // Our own retry loop knows which errors are worth retrying and bounds them.
    config.default_retry = false;
    config.read_timeout = Some(tuning.request_timeout);
    config.write_timeout = Some(tuning.request_timeout);
    // The connection (TCP and TLS: kube's timeout wraps the TLS connector) is bounded on its
    // own: an endpoint this function cannot reach (a private endpoint from elsewhere, a public
    // one whose CIDRs exclude it, a security group that drops) answers nothing at all.
    config.connect_timeout = Some(connect_timeout(tuning));
    let ns = config.default_namespace.clone();
    let endpoint = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| connect(e.to_string()))?;
    Ok((client, ns, endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_bundles_become_der() {
        let pem = b"-----BEGIN CERTIFICATE-----\nAAEC\nAw==\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nBAU=\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_to_der(pem).unwrap(), vec![vec![0, 1, 2, 3], vec![4, 5]]);
        assert!(pem_to_der(b"junk").is_err());
    }
}
