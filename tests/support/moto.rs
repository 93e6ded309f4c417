//! moto_server, one per test binary, and AWS SDK configuration that points at it.

use std::sync::OnceLock;

use crate::process::Service;

static MOTO: OnceLock<Service> = OnceLock::new();

/// The endpoint URL of this test binary's moto_server, started on first use. Tests isolate
/// themselves by naming their own buckets, secrets and clusters.
pub fn endpoint() -> String {
    MOTO.get_or_init(|| Service::start("moto_server.py", &[])).url()
}

/// Sets the process environment the AWS SDK reads, exactly as a user would for a local run.
/// Call before building any client; idempotent.
pub fn configure_env() -> String {
    let url = endpoint();
    // SAFETY: set once per process before the tests' runtimes read the environment; every
    // test sets the same values.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", &url);
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        std::env::set_var("AWS_REGION", "eu-west-1");
        std::env::remove_var("AWS_PROFILE");
    }
    url
}

/// An SDK config for moto (path-style S3 is needed for bucket names on 127.0.0.1).
pub async fn sdk_config() -> aws_config::SdkConfig {
    configure_env();
    aws_config::defaults(aws_config::BehaviorVersion::latest()).load().await
}

pub async fn s3() -> aws_sdk_s3::Client {
    let conf = sdk_config().await;
    aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&conf).force_path_style(true).build())
}

/// Creates `bucket` in eu-west-1 (the region of every test's configuration). An existing one is
/// an error: each test names its own.
pub async fn create_bucket(s3: &aws_sdk_s3::Client, bucket: &str) {
    s3.create_bucket()
        .bucket(bucket)
        .create_bucket_configuration(
            aws_sdk_s3::types::CreateBucketConfiguration::builder()
                .location_constraint(aws_sdk_s3::types::BucketLocationConstraint::EuWest1)
                .build(),
        )
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating bucket {bucket}: {e:?}"));
}

/// Credentials of `role` as moto gives them: moto is multi-account, and AssumeRole of a role in
/// another account mints a key moto attributes to that account, whose resources it then reads and
/// makes (https://docs.getmoto.org/en/latest/docs/multi_account.html; moto/sts/models.py
/// `assume_role`: "the role does not need to exist. The ARN can point to another account").
pub async fn assumed(base: &aws_config::SdkConfig, role: &str, session: &str) -> aws_config::SdkConfig {
    let out = aws_sdk_sts::Client::new(base)
        .assume_role()
        .role_arn(role)
        .role_session_name(session)
        .send()
        .await
        .unwrap();
    let c = out.credentials().unwrap();
    let creds = aws_credential_types::Credentials::new(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_owned()),
        None,
        "test",
    );
    base.to_builder()
        .credentials_provider(aws_credential_types::provider::SharedCredentialsProvider::new(creds))
        .build()
}

/// A queue in moto's SQS, created with `attributes`: its URL and ARN.
pub async fn queue(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    attributes: &[(aws_sdk_sqs::types::QueueAttributeName, String)],
) -> (String, String) {
    use aws_sdk_sqs::types::QueueAttributeName;
    let mut create = sqs.create_queue().queue_name(name);
    for (k, v) in attributes {
        create = create.attributes(k.clone(), v.clone());
    }
    let url = create.send().await.unwrap().queue_url.unwrap();
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap();
    let arn = attrs.attributes().unwrap()[&QueueAttributeName::QueueArn].clone();
    (url, arn)
}

/// Creates EKS cluster `name` in moto with `conf`'s region and identity, tagged `tags` (moto
/// needs a role and a subnet, neither of which it checks).
pub async fn create_cluster(conf: &aws_config::SdkConfig, name: &str, tags: &[(&str, &str)]) {
    let mut create = aws_sdk_eks::Client::new(conf)
        .create_cluster()
        .name(name)
        .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
        .resources_vpc_config(
            aws_sdk_eks::types::VpcConfigRequest::builder()
                .subnet_ids("subnet-1")
                .build(),
        );
    for (k, v) in tags {
        create = create.tags(*k, *v);
    }
    create
        .send()
        .await
        .unwrap_or_else(|e| panic!("creating EKS cluster {name} in moto: {e:?}"));
}
