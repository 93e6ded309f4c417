//! The EKS bearer token: what `aws eks get-token` prints. A presigned STS `GetCallerIdentity`
//! URL, signed with SigV4 in the query string, with the cluster name in the signed header
//! `x-k8s-aws-id`; EKS (aws-iam-authenticator) replays it against STS to learn who we are.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign};
use aws_sigv4::sign::v4;
use base64::Engine as _;

pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// What the signature says; EKS itself accepts a token for 15 minutes from its signing time.
pub const PRESIGN_EXPIRY: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot sign the EKS token for cluster {cluster}: {reason}")]
    Sign { cluster: String, reason: String },
}

/// The STS endpoint the token is signed for: the one the SDK would call (an `AWS_ENDPOINT_URL`
/// override included), else the regional endpoint `aws eks get-token` uses.
pub fn sts_endpoint(region: &str, override_url: Option<&str>) -> String {
    match override_url {
        Some(u) => u.trim_end_matches('/').to_owned(),
        None if region.starts_with("cn-") => format!("https://sts.{region}.amazonaws.com.cn"),
        None => format!("https://sts.{region}.amazonaws.com"),
    }
}

/// Signs the token for `cluster` at `time`.
pub fn eks_token(
    creds: &Credentials,
    region: &str,
    cluster: &str,
    sts_endpoint: &str,
    time: SystemTime,
) -> Result<String, TokenError> {
    let err = |reason: String| TokenError::Sign {
        cluster: cluster.to_owned(),
        reason,
    };
    let url = format!("{sts_endpoint}/?Action=GetCallerIdentity&Version=2011-06-15");
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(PRESIGN_EXPIRY);
    let identity = creds.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| err(e.to_string()))?
        .into();
    let headers = [("x-k8s-aws-id", cluster)];
    let signable = SignableRequest::new("GET", url.as_str(), headers.into_iter(), SignableBody::Bytes(&[]))
        .map_err(|e| err(e.to_string()))?;
    let (instructions, _sig) = sign(signable, &params).map_err(|e| err(e.to_string()))?.into_parts();
    let mut req = http::Request::builder()
        .uri(&url)
        .body(())
        .map_err(|e| err(e.to_string()))?;
    instructions.apply_to_request_http1x(&mut req);
    let presigned = req.uri().to_string();
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(presigned)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(token: &str) -> String {
        let b = token.strip_prefix(TOKEN_PREFIX).unwrap();
        assert!(!b.contains('='), "no padding");
        String::from_utf8(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(b).unwrap()).unwrap()
    }

    #[test]
    fn token_is_a_presigned_get_caller_identity_url() {
        let creds = Credentials::new(
            "AKIDEXAMPLE",
            "secret-key-value",
            Some("session-token-value".into()),
            None,
            "t",
        );
        let t = eks_token(
            &creds,
            "eu-west-1",
            "prod-eu",
            &sts_endpoint("eu-west-1", None),
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        )
        .unwrap();
        let url = decode(&t);
        assert!(url.starts_with("https://sts.eu-west-1.amazonaws.com/?"), "{url}");
        for part in [
            "Action=GetCallerIdentity",
            "Version=2011-06-15",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Expires=60",
            "X-Amz-SignedHeaders=host%3Bx-k8s-aws-id",
            "X-Amz-Credential=AKIDEXAMPLE%2F20270115%2Feu-west-1%2Fsts%2Faws4_request",
            "X-Amz-Security-Token=session-token-value",
            "X-Amz-Signature=",
        ] {
            assert!(url.contains(part), "{part} missing from {url}");
        }
        assert!(!url.contains("secret-key-value"));
    }

    #[test]
    fn endpoint_override_is_signed_for() {
        assert_eq!(
            sts_endpoint("us-east-1", Some("http://127.0.0.1:5000/")),
            "http://127.0.0.1:5000"
        );
        assert_eq!(
            sts_endpoint("cn-north-1", None),
            "https://sts.cn-north-1.amazonaws.com.cn"
        );
    }
}
