//! What a secret looks like in a `cell_metadata` key or value, in context.
//!
//! The platform's rule is "a database endpoint is fine; its password is not". A secret reaches
//! a Terraform output by its name (`db_password`), by a shape of its own (a private key, an
//! access token, a JWT, a high-entropy blob), or inside an identifier: the user info of a URL,
//! a field of a connection string, the signature of a shared-access URL, a webhook URL that is
//! its own credential. Each is recognised here and named by its kind, never by its value.
//!
//! Public material is not a secret: base64 or PEM that decodes to an X.509 `CERTIFICATE` or a
//! `PUBLIC KEY` passes (an EKS cluster's `certificate_authority` data is base64 of a PEM
//! certificate), where anything else high-entropy is refused.
//!
//! Used by the contract (`metadata.rs`, which refuses) and by the strict check on what a fleet
//! repo already holds (`check`, which can only warn: it reads Git).

mod connection;
mod public;
mod url;

#[cfg(test)]
mod tests;

/// What to do instead, said with every refusal.
pub const HINT: &str = "output the endpoint and the ARN of the secret (Secrets Manager or SSM) instead, and let the workload read the secret itself";

/// Why `key`/`value` looks like a secret, in words naming its kind (never the value); `None`
/// for an identifier.
pub fn shape(key: &str, value: &str) -> Option<&'static str> {
    key_reason(key, value).or_else(|| value_reason(value))
}

/// Words that make a key secret-looking, unless the key names a reference to a secret (an ARN,
/// a name, a path) rather than the secret itself: `db_password` is refused, `db_password_secret_arn` is not.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "credential",
    "credentials",
    "privatekey",
    "passphrase",
];
const SECRET_PAIRS: &[(&str, &str)] = &[
    ("private", "key"),
    ("api", "key"),
    ("access", "key"),
    ("secret", "key"),
    ("client", "secret"),
    ("signing", "key"),
];
const REFERENCE_SUFFIXES: &[&str] = &[
    "arn", "arns", "name", "names", "path", "prefix", "url", "uri", "version", "ttl", "region", "kms",
];

fn key_reason(key: &str, value: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    let words: Vec<&str> = lower.split('_').filter(|w| !w.is_empty()).collect();
    let last = words.last().copied().unwrap_or_default();
    // `cert_manager_role_arn`-style keys and ARN values name a secret, they do not hold one.
    if REFERENCE_SUFFIXES.contains(&last) || value.starts_with("arn:") {
        return None;
    }
    let hit = words.iter().any(|w| SECRET_WORDS.contains(w))
        || words.windows(2).any(|p| SECRET_PAIRS.contains(&(p[0], p[1])));
    hit.then_some("its name says it holds a credential")
}

fn value_reason(value: &str) -> Option<&'static str> {
    let v = value.trim();
    if v.contains("-----BEGIN") {
        return match public::pem(v) {
            public::Material::Public => None,
            public::Material::Private => Some("its value is a private key"),
            public::Material::Other => {
                Some("its value is PEM-encoded material that is not a certificate or a public key")
            }
        };
    }
    let is_aws_key = |p: &str| {
        v.len() == 20 && v.starts_with(p) && v[4..].bytes().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    if is_aws_key("AKIA") || is_aws_key("ASIA") {
        return Some("its value is an AWS access key id");
    }
    for prefix in [
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "sk_live_",
        "npm_",
    ] {
        if v.starts_with(prefix) && v.len() >= prefix.len() + 16 {
            return Some("its value is an access token");
        }
    }
    if v.starts_with("eyJ") && v.split('.').count() == 3 && v.len() > 40 {
        return Some("its value is a JSON Web Token");
    }
    if let Some(why) = url::secret(v).or_else(|| connection::secret(v)) {
        return Some(why);
    }
    if looks_high_entropy(v) {
        return match public::base64(v) {
            public::Material::Public => None,
            public::Material::Private => Some("its value is a private key (base64)"),
            public::Material::Other => Some("its value is a high-entropy blob"),
        };
    }
    None
}

/// A long run of base64/base62 characters with mixed case and digits and near-random symbol
/// distribution. Hex (commit SHAs, UUIDs, KMS key ids) stays under 4 bits per symbol and passes.
fn looks_high_entropy(v: &str) -> bool {
    if v.len() < 32
        || !v
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-'))
    {
        return false;
    }
    let has = |f: fn(&u8) -> bool| v.as_bytes().iter().any(f);
    if !(has(u8::is_ascii_uppercase) && has(u8::is_ascii_lowercase) && has(u8::is_ascii_digit)) {
        return false;
    }
    shannon_bits(v) >= 4.2
}

fn shannon_bits(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|&c| {
            let p = c as f64 / n;
            -p * p.log2()
        })
        .sum()
}
