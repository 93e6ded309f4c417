use super::*;

/// The EKS cluster's `certificate_authority[0].data` as Terraform outputs it: base64 of a PEM
/// certificate (a throwaway self-signed CA, `tests/fixtures/secrets/eks-ca.crt`).
fn eks_ca() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(include_str!("../../../../tests/fixtures/secrets/eks-ca.crt"))
}

fn refused(value: &str) -> Option<&'static str> {
    shape("some_value", value)
}

#[test]
fn userinfo_passwords_in_any_scheme_and_with_any_characters_are_refused() {
    for v in [
        "postgres://admin:S3cr3tP4ss@db.internal:5432/app",
        "redis://:hunter2pass@cache:6379/0",
        "mongodb+srv://app:Pa55word!@cluster0.example.net/db",
        "mysql://shop:p@ss/w0rd:x@db.example.com:3306/shop",
        "jdbc:postgresql://app:a:b@c@db:5432/app",
        "amqps://u:%2Fpw%40@mq",
        "x-custom+proto://u:💥pw@host",
        "https://flux:8443@github.com/o/fleet",
        "see postgres://u:my pass@db/app for the endpoint",
        "primary https://a.example.com, replica https://r:pw@b.example.com",
        "://u:p@host",
    ] {
        assert_eq!(
            refused(v),
            Some("its value is a URL with a password in its user info"),
            "{v}"
        );
    }
}

#[test]
fn a_user_alone_or_an_at_sign_past_the_host_is_an_identifier() {
    for v in [
        "postgres://app@db.internal:5432/app",
        "ssh://git@github.com/example/fleet.git",
        "https://registry.example.com:5000/v2/@sha256",
        "https://medium.com/@platform/cells",
        "https://example.com/a?x=1:2@3",
        "https://h:/path@x",
        "postgres://u:@db/app",
        "s3://bucket/key@v1",
        "git@github.com:example/fleet.git",
        "platform-alerts@example.com",
    ] {
        assert_eq!(refused(v), None, "{v}");
    }
}

#[test]
fn connection_string_fields_that_carry_keys_are_refused_by_name() {
    for (v, field) in [
        (
            "Server=tcp:db,1433;Database=app;User ID=app;Password=Tr0ub4dor&3;",
            "`Password=`",
        ),
        ("Driver={ODBC Driver 18};Server=db;Uid=app;PWD={x!y};", "`Pwd=`"),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net",
            "`AccountKey=`",
        ),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=abc=",
            "`SharedAccessKey=`",
        ),
        (
            "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&sig=abc",
            "`SharedAccessSignature=`",
        ),
        (
            "https://a.blob.core.windows.net/c/f?sv=2022-11-02&sp=r&sig=abc%2Bd",
            "`sig=`",
        ),
        ("jdbc:mysql://db:3306/shop?user=app&password=x", "`Password=`"),
    ] {
        let why = refused(v).unwrap_or_else(|| panic!("{v} passed"));
        assert!(why.contains(field), "{v}: {why}");
    }
    // Names, not secrets: the key's name, an empty field, a field whose name only starts so.
    for v in [
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey",
        "Server=db;Password=;",
        "https://example.com/?password_policy=strict&signature=v2",
    ] {
        assert_eq!(refused(v), None, "{v}");
    }
}

#[test]
fn webhook_urls_are_credentials() {
    for (v, kind) in [
        (
            "https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/abcdefghijklmnopqrstuvwx",
            "Slack",
        ),
        (
            "https://discord.com/api/webhooks/123456789012345678/abc-DEF_ghi",
            "Discord",
        ),
        ("https://canary.discordapp.com/api/v10/webhooks/1/abc", "Discord"),
        (
            "https://contoso.webhook.office.com/webhookb2/0a1b@2c3d/IncomingWebhook/abc/4e5f",
            "Microsoft Teams",
        ),
        (
            "https://outlook.office.com/webhook/0a1b@2c3d/IncomingWebhook/abc/4e5f",
            "Microsoft Teams",
        ),
    ] {
        let why = refused(v).unwrap_or_else(|| panic!("{v} passed"));
        assert!(why.contains(kind), "{v}: {why}");
    }
    for v in [
        "https://hooks.slack.com/",
        "https://discord.com/invite/flux",
        "https://api.slack.com/apps",
    ] {
        assert_eq!(refused(v), None, "{v}");
    }
}

#[test]
fn certificates_and_public_keys_pass_private_keys_do_not() {
    use base64::Engine;
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    let pem = include_str!("../../../../tests/fixtures/secrets/eks-ca.crt");
    assert_eq!(shape("cluster_certificate_authority_data", &eks_ca()), None);
    assert_eq!(refused(pem), None, "a PEM certificate is public");
    let der = pem_rfc7468::decode_vec(pem.as_bytes()).unwrap().1;
    assert_eq!(refused(&b64(&der)), None, "base64 of the DER");
    // A bundle of two certificates passes; with a key in it, it does not.
    assert_eq!(refused(&b64(format!("{pem}{pem}").as_bytes())), None);
    let key =
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
    assert_eq!(refused(&format!("{pem}{key}")), Some("its value is a private key"));
    assert_eq!(
        refused(&b64(key.as_bytes())),
        Some("its value is a private key (base64)")
    );
    // A label is not enough: the DER must be a certificate.
    let fake = "-----BEGIN CERTIFICATE-----\nq8Zr4Lx2Vb7Nw1Ps9Tk3Yd6Hf0Jg5MaCeWuXo2Ri\n-----END CERTIFICATE-----\n";
    assert!(refused(fake).is_some());
    assert_eq!(refused(&b64(fake.as_bytes())), Some("its value is a high-entropy blob"));
    assert_eq!(
        refused("q8Zr4Lx2Vb7Nw1Ps9Tk3Yd6Hf0Jg5MaCeWuXo2Ri"),
        Some("its value is a high-entropy blob")
    );
}
