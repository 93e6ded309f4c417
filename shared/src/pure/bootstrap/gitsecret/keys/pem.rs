//! PEM framing as lenient as Go's `encoding/pem` (text before the block, `Key: value` headers, any
//! line width), which Flux's key parsing goes through, and the legacy PEM encryption as Go's
//! `x509.DecryptPEMBlock` undoes it, which no crate of the dependency tree does.

use base64::Engine as _;
use pkcs8::der::Decode as _;
use zeroize::Zeroizing;

use super::{KeyError, NO_PASSPHRASE, WRONG_PASSPHRASE, identity_err, password_err};

/// One PEM block, read as Go's `encoding/pem` `Decode` reads it: text before the BEGIN line
/// is skipped, `Key: value` headers follow it, the base64 body may be wrapped at any width.
pub(super) struct Pem {
    pub label: String,
    headers: Vec<(String, String)>,
    pub der: Zeroizing<Vec<u8>>,
}

impl Pem {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The legacy PEM encryption (RFC 1423), as x/crypto `encryptedBlock` tells it.
    pub(super) fn encrypted(&self) -> bool {
        self.header("Proc-Type").is_some_and(|v| v.contains("ENCRYPTED"))
    }
}

/// A label fit for a message: only the usual upper-case names, never arbitrary text.
pub(super) fn shown_label(label: &str) -> String {
    if !label.is_empty() && label.len() <= 40 && label.bytes().all(|b| b.is_ascii_uppercase() || b == b' ') {
        format!("`{label}`")
    } else {
        "with an unusual label".to_owned()
    }
}

pub(super) fn decode_pem(text: &str) -> Result<Pem, String> {
    const BEGIN: &str = "-----BEGIN ";
    let start = text
        .find(BEGIN)
        .ok_or("holds no PEM block (no `-----BEGIN ...-----` line)")?;
    let mut lines = text[start + BEGIN.len()..]
        .split('\n')
        .map(|l| l.trim_end_matches([' ', '\t', '\r']));
    let label = lines
        .next()
        .and_then(|l| l.strip_suffix("-----"))
        .filter(|l| !l.contains("-----"))
        .ok_or("its BEGIN line goes on after the label (were the line breaks lost when it was pasted?)")?
        .to_owned();
    let mut headers = Vec::new();
    let mut body = Zeroizing::new(String::new());
    let mut in_headers = true;
    let mut end = None;
    for line in lines {
        if line.starts_with("-----END ") {
            end = Some(line);
            break;
        }
        if in_headers {
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_owned(), v.trim().to_owned()));
                continue;
            }
            in_headers = false;
        }
        body.extend(line.chars().filter(|c| !c.is_ascii_whitespace()));
    }
    if end != Some(format!("-----END {label}-----").as_str()) {
        return Err(format!(
            "has no `-----END ...-----` line closing its PEM block {}",
            shown_label(&label)
        ));
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|_| "its PEM body is not valid base64".to_owned())?;
    Ok(Pem {
        label,
        headers,
        der: Zeroizing::new(der),
    })
}

/// The legacy PEM encryption (`Proc-Type: 4,ENCRYPTED`, `DEK-Info: CIPHER,IV`) as Go's
/// `x509.DecryptPEMBlock` undoes it, with the ciphers it knows (its `rfc1423Algos`) and
/// OpenSSL's `EVP_BytesToKey` (MD5, one round, the IV's first 8 bytes as salt).
pub(super) fn legacy_decrypt(pem: &Pem, passphrase: Option<&str>) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    let passphrase = passphrase.ok_or_else(|| password_err(NO_PASSPHRASE))?;
    let (cipher, iv) = pem
        .header("DEK-Info")
        .and_then(|v| v.split_once(','))
        .ok_or_else(|| identity_err("is encrypted but has no valid `DEK-Info` header"))?;
    let (cipher, iv) = (cipher.trim(), iv.trim());
    let (key_len, block_len) = match cipher {
        "DES-CBC" => (8, 8),
        "DES-EDE3-CBC" => (24, 8),
        "AES-128-CBC" => (16, 16),
        "AES-192-CBC" => (24, 16),
        "AES-256-CBC" => (32, 16),
        other => {
            let shown = if other.len() <= 24 && other.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                other
            } else {
                "an unknown cipher"
            };
            return Err(identity_err(format!(
                "is encrypted with {shown}, which Flux cannot decrypt: convert it with `ssh-keygen -p -f FILE` (OpenSSH format)"
            )));
        }
    };
    let iv = hex(iv)
        .filter(|iv| iv.len() == block_len)
        .ok_or_else(|| identity_err("is encrypted but its `DEK-Info` IV is not valid"))?;
    let key = evp_bytes_to_key(passphrase.as_bytes(), &iv[..8], key_len);
    let mut buf = pem.der.clone();
    if buf.is_empty() || !buf.len().is_multiple_of(block_len) {
        return Err(identity_err(
            "is encrypted but its body is not a whole number of cipher blocks",
        ));
    }
    let plain_len = match cipher {
        "DES-CBC" => cbc_decrypt::<des::Des>(&key, &iv, &mut buf),
        "DES-EDE3-CBC" => cbc_decrypt::<des::TdesEde3>(&key, &iv, &mut buf),
        "AES-128-CBC" => cbc_decrypt::<aes::Aes128>(&key, &iv, &mut buf),
        "AES-192-CBC" => cbc_decrypt::<aes::Aes192>(&key, &iv, &mut buf),
        _ => cbc_decrypt::<aes::Aes256>(&key, &iv, &mut buf),
    }
    .ok_or_else(|| password_err(WRONG_PASSPHRASE))?;
    buf.truncate(plain_len);
    // A wrong passphrase can still end in valid padding; what it cannot make is DER (Go
    // turns the ASN.1 structural error into `IncorrectPasswordError` the same way).
    if pkcs8::der::Document::from_der(&buf).is_err() {
        return Err(password_err(WRONG_PASSPHRASE));
    }
    Ok(buf)
}

fn cbc_decrypt<C>(key: &[u8], iv: &[u8], buf: &mut [u8]) -> Option<usize>
where
    C: cbc::cipher::BlockDecryptMut + cbc::cipher::BlockCipher + cbc::cipher::KeyInit,
{
    use cbc::cipher::{BlockDecryptMut as _, KeyIvInit as _, block_padding::Pkcs7};
    let decryptor = cbc::Decryptor::<C>::new_from_slices(key, iv).ok()?;
    decryptor.decrypt_padded_mut::<Pkcs7>(buf).ok().map(|plain| plain.len())
}

fn evp_bytes_to_key(passphrase: &[u8], salt: &[u8], len: usize) -> Zeroizing<Vec<u8>> {
    use md5::Digest as _;
    let mut out = Zeroizing::new(Vec::with_capacity(len + 16));
    let mut digest: Vec<u8> = Vec::new();
    while out.len() < len {
        let mut h = md5::Md5::new();
        h.update(&digest);
        h.update(passphrase);
        h.update(salt);
        digest = h.finalize().to_vec();
        out.extend_from_slice(&digest);
    }
    out.truncate(len);
    out
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
