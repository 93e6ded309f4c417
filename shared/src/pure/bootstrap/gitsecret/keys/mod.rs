//! Private keys as Flux's Go libraries read them. Every message names the field to blame and
//! says what is wrong with it; none carries a byte of the key.
//!
//! The encodings are the RustCrypto crates' (`ssh-key` for OpenSSH keys and their encryption,
//! `rsa`, `pkcs8`, `sec1`, `p256`/`p384`/`p521`, `ed25519-dalek`); what is decided here is which
//! keys Flux can sign with, and how each refusal is worded.

mod pem;

use pkcs8::ObjectIdentifier;
use pkcs8::der::Decode as _;
use rsa::pkcs1::DecodeRsaPrivateKey as _;
use rsa::pkcs8::DecodePrivateKey as _;
use rsa::traits::PublicKeyParts as _;
use ssh_key::private::KeypairData;
use ssh_key::public::{EcdsaPublicKey, Ed25519PublicKey, KeyData, RsaPublicKey};
use ssh_key::{Cipher, EcdsaCurve, Kdf, Mpint};
use zeroize::Zeroizing;

use pem::{decode_pem, legacy_decrypt, shown_label};

pub(super) struct KeyError {
    pub field: &'static str,
    pub reason: String,
}

fn identity_err(reason: impl Into<String>) -> KeyError {
    KeyError {
        field: "identity",
        reason: reason.into(),
    }
}

fn password_err(reason: &str) -> KeyError {
    KeyError {
        field: "password",
        reason: reason.into(),
    }
}

const WRONG_PASSPHRASE: &str = "does not decrypt `identity` (wrong passphrase)";
const NO_PASSPHRASE: &str = "is missing: `identity` is encrypted, and Flux reads its passphrase from `password`";
const USABLE: &str = "Flux's SSH client signs only with Ed25519, ECDSA (P-256, P-384, P-521) or RSA keys";

/// The most bcrypt rounds x/crypto decrypts (`passphraseProtectedOpenSSHKey`, `maxRounds`;
/// `ssh-keygen` uses 16 unless told otherwise).
const MAX_BCRYPT_ROUNDS: u32 = 1 << 11;

/// Go 1.24's crypto/rsa refuses keys under 1024 bits (go.dev/doc/go1.24, "crypto/rsa";
/// golang/go#68762), so Flux cannot sign with them.
const MIN_RSA_BITS: usize = 1024;

const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const OID_EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
const OID_DSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10040.4.1");
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const OID_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const OID_P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");

/// The SSH private key of `identity`: its public key and comment.
pub(super) struct SshKey {
    pub public: KeyData,
    pub comment: String,
}

/// Reads `identity` in every encoding x/crypto `ssh.ParseRawPrivateKey` and
/// `ParseRawPrivateKeyWithPassphrase` read, and derives its public key from the private one.
pub(super) fn identity(text: &str, passphrase: Option<&str>) -> Result<SshKey, KeyError> {
    let pem = decode_pem(text).map_err(identity_err)?;
    let public = match pem.label.as_str() {
        "OPENSSH PRIVATE KEY" => return openssh(&pem.der, passphrase),
        "RSA PRIVATE KEY" | "EC PRIVATE KEY" => {
            let decrypted;
            let der: &[u8] = if pem.encrypted() {
                decrypted = legacy_decrypt(&pem, passphrase)?;
                &decrypted
            } else {
                &pem.der
            };
            if pem.label == "RSA PRIVATE KEY" {
                let key = rsa::RsaPrivateKey::from_pkcs1_der(der)
                    .map_err(|_| identity_err("is not a valid PKCS#1 RSA private key"))?;
                rsa_public(&key)?
            } else {
                let ec = sec1::EcPrivateKey::from_der(der)
                    .map_err(|_| identity_err("is not a valid SEC1 EC private key"))?;
                let curve = ec
                    .parameters
                    .and_then(|p| p.named_curve())
                    .ok_or_else(|| identity_err("is an EC private key that names no curve"))?;
                ec_public(curve_of(curve)?, ec.private_key)?
            }
        }
        "PRIVATE KEY" => pkcs8_public(&pem.der)?,
        "ENCRYPTED PRIVATE KEY" => {
            return Err(identity_err(
                "is an encrypted PKCS#8 key (`ENCRYPTED PRIVATE KEY`), which Flux's SSH library cannot read: convert it with `ssh-keygen -p -f FILE` (OpenSSH format) and keep the passphrase in `password`",
            ));
        }
        "DSA PRIVATE KEY" => return Err(identity_err(format!("is a DSA key; {USABLE}"))),
        other => {
            return Err(identity_err(format!(
                "is a PEM block {}, not a private key Flux reads (`OPENSSH PRIVATE KEY`, `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`)",
                shown_label(other)
            )));
        }
    };
    Ok(SshKey {
        public,
        comment: String::new(),
    })
}

fn openssh(der: &[u8], passphrase: Option<&str>) -> Result<SshKey, KeyError> {
    // ssh-key's errors describe the encoding problem, never the key bytes.
    let key = ssh_key::PrivateKey::from_bytes(der)
        .map_err(|e| identity_err(format!("is not a valid OpenSSH private key ({e})")))?;
    let key = if key.is_encrypted() {
        let passphrase = passphrase.ok_or_else(|| password_err(NO_PASSPHRASE))?;
        // x/crypto `passphraseProtectedOpenSSHKey`: bcrypt, aes256-ctr or aes256-cbc.
        if !matches!(key.cipher(), Cipher::Aes256Ctr | Cipher::Aes256Cbc) {
            return Err(identity_err(format!(
                "is encrypted with {}, and Flux's SSH library decrypts only aes256-ctr and aes256-cbc: re-encrypt it with `ssh-keygen -p -Z aes256-ctr`",
                key.cipher()
            )));
        }
        match key.kdf() {
            Kdf::Bcrypt { rounds, .. } if *rounds > MAX_BCRYPT_ROUNDS => {
                return Err(identity_err(format!(
                    "is encrypted with {rounds} bcrypt rounds, more than the {MAX_BCRYPT_ROUNDS} Flux's SSH library accepts: re-encrypt it with `ssh-keygen -p` (16 rounds by default)"
                )));
            }
            Kdf::Bcrypt { .. } => {}
            _ => return Err(identity_err("is encrypted without bcrypt, the only KDF Flux reads")),
        }
        key.decrypt(passphrase).map_err(|_| password_err(WRONG_PASSPHRASE))?
    } else {
        key
    };
    let public = match key.key_data() {
        KeypairData::Ed25519(kp) => {
            let derived = ed25519_dalek::SigningKey::from_bytes(&kp.private.to_bytes()).verifying_key();
            KeyData::Ed25519(Ed25519PublicKey(derived.to_bytes()))
        }
        KeypairData::Rsa(kp) => {
            let int = |m: &Mpint| rsa::BigUint::from_bytes_be(m.as_positive_bytes().unwrap_or_default());
            let rsa_key = rsa::RsaPrivateKey::from_components(
                int(&kp.public.n),
                int(&kp.public.e),
                int(&kp.private.d),
                vec![int(&kp.private.p), int(&kp.private.q)],
            )
            .map_err(|_| identity_err("is not a valid RSA private key (its numbers do not agree)"))?;
            rsa_public(&rsa_key)?
        }
        KeypairData::Ecdsa(kp) => ec_public(kp.curve(), kp.private_key_bytes())?,
        other => {
            let name = other
                .algorithm()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "unknown".into());
            return Err(identity_err(format!("is a {name} key; {USABLE}")));
        }
    };
    if &public != key.public_key().key_data() {
        return Err(identity_err(
            "is not a valid OpenSSH private key (its public key does not match its private key)",
        ));
    }
    Ok(SshKey {
        public,
        comment: key.comment().to_owned(),
    })
}

fn pkcs8_public(der: &[u8]) -> Result<KeyData, KeyError> {
    let info = pkcs8::PrivateKeyInfo::from_der(der).map_err(|_| identity_err("is not a valid PKCS#8 private key"))?;
    match info.algorithm.oid {
        OID_RSA => {
            let key = rsa::RsaPrivateKey::try_from(info)
                .map_err(|_| identity_err("is not a valid PKCS#8 RSA private key"))?;
            rsa_public(&key)
        }
        OID_EC => {
            let curve = info
                .algorithm
                .parameters_oid()
                .map_err(|_| identity_err("is a PKCS#8 EC private key that names no curve"))?;
            let ec = sec1::EcPrivateKey::from_der(info.private_key)
                .map_err(|_| identity_err("is not a valid PKCS#8 EC private key"))?;
            if ec.parameters.and_then(|p| p.named_curve()).is_some_and(|c| c != curve) {
                return Err(identity_err(
                    "is a PKCS#8 EC private key that names two different curves",
                ));
            }
            ec_public(curve_of(curve)?, ec.private_key)
        }
        OID_ED25519 => {
            // RFC 8410: the private key is an OCTET STRING of the 32-byte seed.
            let seed = pkcs8::der::asn1::OctetStringRef::from_der(info.private_key)
                .ok()
                .and_then(|s| <[u8; 32]>::try_from(s.as_bytes()).ok())
                .map(Zeroizing::new)
                .ok_or_else(|| identity_err("is not a valid PKCS#8 Ed25519 private key"))?;
            let public = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
            Ok(KeyData::Ed25519(Ed25519PublicKey(public.to_bytes())))
        }
        OID_DSA => Err(identity_err(format!("is a DSA key; {USABLE}"))),
        other => Err(identity_err(format!("is a PKCS#8 key of algorithm {other}; {USABLE}"))),
    }
}

fn rsa_public(key: &rsa::RsaPrivateKey) -> Result<KeyData, KeyError> {
    let bits = key.n().bits();
    if bits < MIN_RSA_BITS {
        return Err(identity_err(format!(
            "is a {bits}-bit RSA key, and Flux (Go 1.24 and later) refuses RSA keys under {MIN_RSA_BITS} bits"
        )));
    }
    let mpint = |v: &rsa::BigUint| {
        Mpint::from_positive_bytes(&v.to_bytes_be()).map_err(|_| identity_err("is not a valid RSA private key"))
    };
    Ok(KeyData::Rsa(RsaPublicKey {
        e: mpint(key.e())?,
        n: mpint(key.n())?,
    }))
}

/// The curves x/crypto's SSH client signs with (`NewSignerFromKey`: P-256, P-384, P-521).
fn curve_of(oid: ObjectIdentifier) -> Result<EcdsaCurve, KeyError> {
    match oid {
        OID_P256 => Ok(EcdsaCurve::NistP256),
        OID_P384 => Ok(EcdsaCurve::NistP384),
        OID_P521 => Ok(EcdsaCurve::NistP521),
        other => Err(identity_err(format!("is an EC key on curve {other}; {USABLE}"))),
    }
}

/// The public point of an ECDSA private scalar, as OpenSSH encodes it (uncompressed SEC1).
fn ec_public(curve: EcdsaCurve, scalar: &[u8]) -> Result<KeyData, KeyError> {
    use p256::elliptic_curve::sec1::ToEncodedPoint as _;
    let point = match curve {
        EcdsaCurve::NistP256 => {
            p256::SecretKey::from_slice(scalar).map(|k| k.public_key().to_encoded_point(false).as_bytes().to_vec())
        }
        EcdsaCurve::NistP384 => {
            p384::SecretKey::from_slice(scalar).map(|k| k.public_key().to_encoded_point(false).as_bytes().to_vec())
        }
        EcdsaCurve::NistP521 => {
            p521::SecretKey::from_slice(scalar).map(|k| k.public_key().to_encoded_point(false).as_bytes().to_vec())
        }
    }
    .map_err(|_| identity_err(format!("is not a valid {curve} private key")))?;
    EcdsaPublicKey::from_sec1_bytes(&point)
        .map(KeyData::Ecdsa)
        .map_err(|_| identity_err(format!("is not a valid {curve} private key")))
}

/// A GitHub App key as golang-jwt `ParseRSAPrivateKeyFromPEM` reads it (fluxcd/pkg
/// `auth/githubapp`): the first PEM block, PKCS#1 or else PKCS#8, RSA, unencrypted.
pub(super) fn github_app_key(text: &str) -> Result<(), String> {
    let pem = decode_pem(text)?;
    if pem.encrypted() {
        return Err("is encrypted, and Flux reads a GitHub App key unencrypted".into());
    }
    rsa::RsaPrivateKey::from_pkcs1_der(&pem.der)
        .or_else(|_| rsa::RsaPrivateKey::from_pkcs8_der(&pem.der))
        .map(drop)
        .map_err(|_| "is not an RSA private key in PKCS#1 or PKCS#8 PEM (GitHub App keys are RSA)".into())
}
