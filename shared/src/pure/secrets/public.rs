//! Public material: an X.509 certificate or a public key, as PEM or as base64 (of PEM, or of
//! the DER itself). Each is parsed by its ASN.1 structure (`x509-cert`, `spki`), so a random
//! blob that merely carries a `CERTIFICATE` label does not pass.

use base64::Engine;
use x509_cert::der::Decode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Material {
    /// Only certificates and public keys.
    Public,
    /// A private key somewhere in it.
    Private,
    /// Anything else.
    Other,
}

/// PEM text: one or more blocks (a CA bundle has several).
pub(super) fn pem(text: &str) -> Material {
    let mut blocks = 0;
    let mut all_public = true;
    for (i, _) in text.match_indices("-----BEGIN ") {
        let block = &text[i..];
        let end = block
            .find("-----END ")
            .and_then(|e| block[e + 9..].find("-----").map(|d| e + 9 + d + 5))
            .unwrap_or(block.len());
        let block = &block[..end];
        let label = block["-----BEGIN ".len()..].split("-----").next().unwrap_or("");
        if label.contains("PRIVATE KEY") {
            return Material::Private;
        }
        blocks += 1;
        all_public &= match pem_rfc7468::decode_vec(block.as_bytes()) {
            Ok((label, der)) => public_der(label, &der),
            Err(_) => false,
        };
    }
    if blocks > 0 && all_public {
        Material::Public
    } else {
        Material::Other
    }
}

/// A base64 value: of PEM text, or of a certificate's or public key's DER.
pub(super) fn base64(value: &str) -> Material {
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let Ok(bytes) = engine.decode(value) else {
        return Material::Other;
    };
    if let Ok(text) = std::str::from_utf8(&bytes)
        && text.contains("-----BEGIN ")
    {
        return pem(text);
    }
    if public_der("CERTIFICATE", &bytes) || public_der("PUBLIC KEY", &bytes) {
        Material::Public
    } else {
        Material::Other
    }
}

fn public_der(label: &str, der: &[u8]) -> bool {
    match label {
        "CERTIFICATE" => x509_cert::Certificate::from_der(der).is_ok(),
        "PUBLIC KEY" => x509_cert::spki::SubjectPublicKeyInfoOwned::from_der(der).is_ok(),
        _ => false,
    }
}
