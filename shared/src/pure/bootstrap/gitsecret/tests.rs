use super::credentials::validate_known_hosts;
use super::fixtures::*;
use crate::pure::bootstrap::gitsecret::*;

const HOSTS: &str = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

fn generic(url: &str) -> FluxGitRepository {
    FluxGitRepository {
        url: url.into(),
        provider: None,
    }
}

fn with_provider(url: &str, provider: &str) -> FluxGitRepository {
    FluxGitRepository {
        url: url.into(),
        provider: Some(provider.into()),
    }
}

const SSH_URL: &str = "ssh://git@github.com/o/fleet";
const HTTPS_URL: &str = "https://github.com/o/fleet";

fn ssh_secret(identity: &str, password: Option<&str>) -> String {
    let mut s = json!({"identity": identity, "known_hosts": HOSTS});
    if let Some(p) = password {
        s["password"] = p.into();
    }
    s.to_string()
}

/// `identity.pub` as the Secret will carry it: key type and key, without the comment.
fn public_of(c: &GitCredentials) -> String {
    c.data["identity.pub"]
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

fn accepted(identity: &str, password: Option<&str>) -> GitCredentials {
    parse("flux-git", &ssh_secret(identity, password), &generic(SSH_URL)).unwrap_or_else(|e| panic!("{e}"))
}

fn refused(text: &str, repo: &FluxGitRepository) -> String {
    let e = parse("flux-git", text, repo).unwrap_err();
    assert_eq!(e.class(), Class::Final, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("flux-git"), "{msg}");
    msg
}

#[test]
fn the_keys_flux_create_secret_git_generates_are_accepted() {
    // fluxcd/pkg ssh/key_pair.go: PKCS#8 for all three algorithms; ECDSA P-384 by default.
    for (name, identity, public) in [
        ("ecdsa p384 (default)", EC384_PKCS8, EC384_PUB),
        ("rsa", RSA_PKCS8, RSA_PUB),
        ("ed25519", ED25519_PKCS8, ED25519_PKCS8_PUB),
    ] {
        let c = accepted(identity, None);
        assert_eq!(c.kind, CredentialKind::Ssh, "{name}");
        assert_eq!(public_of(&c), public, "{name}");
        assert_eq!(c.data["identity"], identity, "{name}: stored as given");
    }
}

#[test]
fn private_key_files_in_every_encoding_flux_reads_are_accepted() {
    for (name, identity, public) in [
        ("rsa pkcs1", RSA_PKCS1, RSA_PUB),
        ("rsa openssh", RSA_OPENSSH, RSA_PUB),
        ("p256 sec1", EC256_SEC1, EC256_PUB),
        ("p384 sec1", EC384_SEC1, EC384_PUB),
        ("p384 openssh", EC384_OPENSSH, EC384_PUB),
        ("p521 sec1", EC521_SEC1, EC521_PUB),
        ("ed25519 openssh", ED25519_OPENSSH, ED25519_PUB),
    ] {
        assert_eq!(public_of(&accepted(identity, None)), public, "{name}");
    }
    // The OpenSSH key's comment stays on the derived public key.
    assert_eq!(
        accepted(ED25519_OPENSSH, None).data["identity.pub"],
        format!("{ED25519_PUB} flux@test\n")
    );
}

#[test]
fn pem_is_read_as_go_reads_it() {
    // Any line width and CRLF line ends, as Go's encoding/pem takes them.
    let body: String = RSA_OPENSSH.lines().filter(|l| !l.starts_with("-----")).collect();
    let rewrapped = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
        body.as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(public_of(&accepted(&rewrapped, None)), RSA_PUB);
    assert_eq!(public_of(&accepted(&EC256_SEC1.replace('\n', "\r\n"), None)), EC256_PUB);
    // A key whose line breaks were lost when pasted does not parse in Go either.
    let one_line = ED25519_OPENSSH.replace('\n', " ");
    let msg = refused(&ssh_secret(&one_line, None), &generic(SSH_URL));
    assert!(msg.contains("`identity`") && msg.contains("line breaks"), "{msg}");
}

#[test]
fn identity_pub_is_checked_against_the_key() {
    let text = json!({"identity": EC384_PKCS8, "identity.pub": format!("{EC384_PUB} me"), "known_hosts": HOSTS});
    let c = parse("s", &text.to_string(), &generic(SSH_URL)).unwrap();
    assert_eq!(c.data["identity.pub"], format!("{EC384_PUB} me\n"));
    let text = json!({"identity": EC384_PKCS8, "identity.pub": RSA_PUB, "known_hosts": HOSTS});
    let msg = refused(&text.to_string(), &generic(SSH_URL));
    assert!(msg.contains("`identity.pub`: does not belong to `identity`"), "{msg}");
}

#[test]
fn encrypted_keys_need_their_passphrase_in_password() {
    for (name, identity, public) in [
        ("openssh aes256-ctr", ED25519_OPENSSH_ENCRYPTED, ED25519_PUB),
        ("pkcs1 aes-128-cbc", RSA_PKCS1_AES128, RSA_PUB),
        ("sec1 des-ede3-cbc", EC256_SEC1_DES3, EC256_PUB),
        ("sec1 aes-256-cbc", EC521_SEC1_AES256, EC521_PUB),
    ] {
        let c = accepted(identity, Some(PASSPHRASE));
        assert_eq!(public_of(&c), public, "{name}");
        assert_eq!(c.data["password"], PASSPHRASE, "{name}");
        assert_eq!(c.data["identity"], identity, "{name}: stored encrypted, as given");
        assert!(!format!("{c:?}").contains(PASSPHRASE), "{name}");

        let msg = refused(&ssh_secret(identity, None), &generic(SSH_URL));
        assert!(msg.contains("`password`: is missing"), "{name}: {msg}");
        let msg = refused(&ssh_secret(identity, Some("not-the-passphrase")), &generic(SSH_URL));
        assert!(msg.contains("`password`: does not decrypt"), "{name}: {msg}");
        assert!(!msg.contains("not-the-passphrase"), "{name}: {msg}");
    }
    // A passphrase for a key that has none is what Flux ignores too.
    assert_eq!(public_of(&accepted(ED25519_OPENSSH, Some(PASSPHRASE))), ED25519_PUB);
}

#[test]
fn keys_flux_cannot_read_are_refused_before_anything_is_applied() {
    let repo = generic(SSH_URL);
    let msg = refused(&ssh_secret(ED25519_PKCS8_ENCRYPTED, Some(PASSPHRASE)), &repo);
    assert!(
        msg.contains("`identity`") && msg.contains("ENCRYPTED PRIVATE KEY"),
        "{msg}"
    );
    let dsa = "-----BEGIN DSA PRIVATE KEY-----\nMIIBuwIBAAKBgQ==\n-----END DSA PRIVATE KEY-----\n";
    assert!(refused(&ssh_secret(dsa, None), &repo).contains("DSA"));
    let cert = "-----BEGIN CERTIFICATE-----\nMIIBuwIBAAKBgQ==\n-----END CERTIFICATE-----\n";
    assert!(refused(&ssh_secret(cert, None), &repo).contains("`CERTIFICATE`, not a private key"));
    let truncated: String = RSA_PKCS1.lines().take(10).collect::<Vec<_>>().join("\n");
    assert!(refused(&ssh_secret(&truncated, None), &repo).contains("`identity`: has no `-----END"));
    assert!(refused(&ssh_secret("just-a-password", None), &repo).contains("holds no PEM block"));
    // Base64 that decodes, but to no key of the label's kind.
    for label in [
        "OPENSSH PRIVATE KEY",
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "PRIVATE KEY",
    ] {
        let garbage = format!("-----BEGIN {label}-----\nU0VDUkVUQllURVNTRUNSRVRCWVRFUw==\n-----END {label}-----\n");
        let msg = refused(&ssh_secret(&garbage, None), &repo);
        assert!(msg.contains("`identity`: is not a valid"), "{label}: {msg}");
        assert!(!msg.contains("U0VDUkVU") && !msg.contains("SECRETBYTES"), "{msg}");
    }
    // A body that is no base64 at all.
    let text = format!(
        r#"{{"identity":"-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-key-SECRETBYTES\n-----END OPENSSH PRIVATE KEY-----\n","known_hosts":"{HOSTS}"}}"#
    );
    let msg = refused(&text, &repo);
    assert!(msg.contains("`identity`") && !msg.contains("SECRETBYTES"), "{msg}");
}

#[test]
fn https_credentials_become_secret_data() {
    let c = parse(
        "git",
        r#"{"username":"flux","password":"hunter2-very-secret"}"#,
        &generic(HTTPS_URL),
    )
    .unwrap();
    assert_eq!(c.kind, CredentialKind::Https);
    assert_eq!(c.keys(), vec!["password", "username"]);
    let s = c.to_secret();
    assert_eq!(
        s["data"]["password"],
        base64::engine::general_purpose::STANDARD.encode("hunter2-very-secret")
    );
    assert!(!format!("{c:?}").contains("hunter2"));
    // Flux sends credentials over plain HTTP too (source-controller sets
    // `WithInsecureCredentialsOverHTTP` for an http:// URL).
    let c = parse(
        "git",
        r#"{"username":"u","password":"p"}"#,
        &generic("http://git.local/fleet"),
    )
    .unwrap();
    assert_eq!(c.kind, CredentialKind::Https);
}

#[test]
fn a_bearer_token_is_https_credentials_of_its_own() {
    let c = parse(
        "git",
        r#"{"bearerToken":"tok-very-secret","ca.crt":"-----BEGIN CERTIFICATE-----"}"#,
        &generic(HTTPS_URL),
    )
    .unwrap();
    assert_eq!(c.kind, CredentialKind::BearerToken);
    assert_eq!(c.keys(), vec!["bearerToken", "ca.crt"]);
    assert!(!format!("{c:?}").contains("tok-very"));
    let msg = refused(
        r#"{"bearerToken":"tok-very-secret","username":"u","password":"p"}"#,
        &generic(HTTPS_URL),
    );
    assert!(
        msg.contains("`bearerToken`: is set together with `username`/`password`"),
        "{msg}"
    );
    let msg = refused(r#"{"bearerToken":"tok-very-secret"}"#, &generic(SSH_URL));
    assert!(
        msg.contains("HTTPS bearer token credentials") && msg.contains("https://"),
        "{msg}"
    );
    assert!(!msg.contains("tok-very"), "{msg}");
}

fn app_secret(key: &str, installation: serde_json::Value) -> serde_json::Value {
    let mut s = json!({"githubAppID": 12345, "githubAppPrivateKey": key});
    for (k, v) in installation.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

#[test]
fn a_github_app_needs_provider_github_and_provider_github_needs_a_github_app() {
    let github = with_provider(HTTPS_URL, "github");
    let by_id = app_secret(RSA_PKCS1, json!({"githubAppInstallationID": "678"}));
    let c = parse("s", &by_id.to_string(), &github).unwrap();
    assert_eq!(c.kind, CredentialKind::GithubApp);
    assert_eq!(
        c.keys(),
        vec!["githubAppID", "githubAppInstallationID", "githubAppPrivateKey"]
    );
    assert_eq!(c.data["githubAppID"], "12345");
    let mut by_owner = app_secret(RSA_PKCS8, json!({"githubAppInstallationOwner": "acme"}));
    by_owner["githubAppBaseURL"] = "https://ghe.example.com/api/v3".into();
    let c = parse("s", &by_owner.to_string(), &github).unwrap();
    assert_eq!(
        c.keys(),
        vec![
            "githubAppBaseURL",
            "githubAppID",
            "githubAppInstallationOwner",
            "githubAppPrivateKey"
        ]
    );

    // Exactly one of the installation's ID and owner.
    let both = app_secret(
        RSA_PKCS1,
        json!({"githubAppInstallationID": "678", "githubAppInstallationOwner": "acme"}),
    );
    assert!(refused(&both.to_string(), &github).contains("exactly one"));
    let neither = app_secret(RSA_PKCS1, json!({}));
    assert!(refused(&neither.to_string(), &github).contains("`githubAppInstallationID`: is missing"));
    let bad_id = app_secret(RSA_PKCS1, json!({"githubAppInstallationID": "x"}));
    assert!(refused(&bad_id.to_string(), &github).contains("`githubAppInstallationID`: is not a number"));

    // The default provider does not use GitHub App data: Flux fails the GitRepository.
    for repo in [generic(HTTPS_URL), with_provider(HTTPS_URL, "generic")] {
        let msg = refused(&by_id.to_string(), &repo);
        assert!(
            msg.contains("`spec.provider: generic`") && msg.contains("set it there"),
            "{msg}"
        );
    }
    // Provider github with anything but a GitHub App.
    for other in [
        ssh_secret(ED25519_OPENSSH, None),
        json!({"username": "u", "password": "p"}).to_string(),
        json!({"bearerToken": "t"}).to_string(),
    ] {
        let msg = refused(&other, &github);
        assert!(
            msg.contains("`spec.provider: github`") && msg.contains("`githubAppID`, `githubAppPrivateKey`"),
            "{msg}"
        );
        assert!(!msg.contains("BEGIN"), "{msg}");
    }
    // A GitHub App's token is for HTTPS.
    let msg = refused(&by_id.to_string(), &with_provider(SSH_URL, "github"));
    assert!(
        msg.contains("GitHub App credentials") && msg.contains("https://"),
        "{msg}"
    );
}

#[test]
fn a_github_app_key_is_an_rsa_key_flux_can_read() {
    let github = with_provider(HTTPS_URL, "github");
    for (name, key) in [
        ("ecdsa", EC384_PKCS8),
        ("encrypted", RSA_PKCS1_AES128),
        (
            "garbage",
            "-----BEGIN RSA PRIVATE KEY-----\nU0VDUkVUQllURVM=\n-----END RSA PRIVATE KEY-----\n",
        ),
        ("no pem", "SECRETBYTES"),
    ] {
        let text = app_secret(key, json!({"githubAppInstallationID": 1})).to_string();
        let msg = refused(&text, &github);
        assert!(msg.contains("`githubAppPrivateKey`"), "{name}: {msg}");
        assert!(
            !msg.contains("U0VDUkVU") && !msg.contains("SECRETBYTES"),
            "{name}: {msg}"
        );
    }
}

#[test]
fn workload_identity_providers_take_no_secret_credentials() {
    for provider in ["azure", "aws"] {
        let msg = refused(
            r#"{"username":"u","password":"p"}"#,
            &with_provider(HTTPS_URL, provider),
        );
        assert!(
            msg.contains(&format!("`spec.provider: {provider}`")) && msg.contains("workload identity"),
            "{msg}"
        );
    }
    let msg = refused(
        r#"{"username":"u","password":"p"}"#,
        &with_provider(HTTPS_URL, "gitlab"),
    );
    assert!(
        msg.contains("takes only `generic`, `aws`, `azure` or `github`"),
        "{msg}"
    );
}

#[test]
fn wrong_scheme_and_missing_fields_are_named() {
    let e = parse(
        "s",
        r#"{"username":"u","password":"p"}"#,
        &generic("ssh://git@github.com/o/f"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("https://"), "{e}");
    let msg = refused(&ssh_secret(ED25519_OPENSSH, None), &generic(HTTPS_URL));
    assert!(msg.contains("holds SSH credentials") && msg.contains("ssh://"), "{msg}");
    let e = parse("s", r#"{"username":"u"}"#, &generic("https://x/y")).unwrap_err();
    assert!(e.to_string().contains("`password`: is missing"), "{e}");
    let e = parse("s", r#"{"password":"p"}"#, &generic("https://x/y")).unwrap_err();
    assert!(e.to_string().contains("`username`: is missing"), "{e}");
    let e = parse("s", r#"{"token":"abc"}"#, &generic("https://x/y")).unwrap_err();
    assert!(
        e.to_string().contains("keys present: token") && !e.to_string().contains("abc"),
        "{e}"
    );
    let e = parse("s", r#"{"password": "p@ss"#, &generic("https://x/y")).unwrap_err();
    assert!(
        e.to_string().contains("truncated") && !e.to_string().contains("p@ss"),
        "{e}"
    );
    let e = parse(
        "s",
        &ssh_secret(ED25519_OPENSSH, None).replace(HOSTS, ""),
        &generic(SSH_URL),
    )
    .unwrap_err();
    assert!(e.to_string().contains("`known_hosts`: is empty"), "{e}");
}

#[test]
fn urls_flux_does_not_take_are_refused_and_url_passwords_never_shown() {
    let msg = refused(
        &ssh_secret(ED25519_OPENSSH, None),
        &generic("git@github.com:o/fleet.git"),
    );
    assert!(msg.contains("scp-like"), "{msg}");
    let msg = refused(
        &ssh_secret(ED25519_OPENSSH, None),
        &generic("https://flux:url-secret@github.com/o/fleet"),
    );
    assert!(msg.contains("https://flux:[redacted]@github.com/o/fleet"), "{msg}");
    assert!(!msg.contains("url-secret"), "{msg}");
}

#[test]
fn known_hosts_lines_must_parse() {
    assert!(validate_known_hosts(HOSTS).is_ok());
    assert!(validate_known_hosts("# only a comment\n").is_err());
    assert_eq!(
        validate_known_hosts(&format!("{HOSTS}\ngithub.com ssh-ed25519 !!!"))
            .unwrap_err()
            .0,
        2
    );
}
