//! The end-to-end bed of state-sync, shared by every file of the suite: real Terraform (or its kept
//! fixtures) writing states to moto's S3, the notifications moto delivers through SQS, the product's
//! handler, and the HTTP fake GitHub.

use cellbridge::adapters::github::{GithubConfig, GithubFleet};
use cellbridge::adapters::s3::S3States;
use cellbridge::jobs::sync::{KeyPattern, SyncConfig, Syncer};
use cellbridge_tests::github::{FakeGithub, TOKEN};
use cellbridge_tests::{leak, moto, process};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub(crate) const REPO: &str = "acme/fleet";

pub(crate) type Service = Syncer<S3States, GithubFleet>;

/// Every variable the example fleet's layers substitute, so the strict check passes.
pub(crate) fn base_data(cell: &str, vpc: &str) -> Vec<(String, String)> {
    let mut d: Vec<(String, String)> = [
        ("cell_name", cell),
        ("schema", "1"),
        ("aws_region", "eu-west-1"),
        ("cluster_name", cell),
        ("dns_zone", "example.internal"),
        ("external_dns_role_arn", "arn:aws:iam::123456789012:role/external-dns"),
        ("karpenter_queue_name", "karpenter-q"),
        ("karpenter_role_arn", "arn:aws:iam::123456789012:role/karpenter"),
        ("kms_key_id", "1234abcd-12ab-34cd-56ef-1234567890ab"),
        ("podinfo_replicas", "2"),
        ("not_a_flux_variable", "x"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    d.push(("vpc_id".into(), vpc.into()));
    d
}

pub(crate) struct Bed {
    pub(crate) name: String,
    pub(crate) gh: FakeGithub,
    pub(crate) bucket: String,
    pub(crate) queue_url: String,
    pub(crate) queue_arn: String,
    pub(crate) s3: aws_sdk_s3::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) service: Service,
    pub(crate) work: tempfile::TempDir,
    pub(crate) terraform: bool,
    pub(crate) step: AtomicUsize,
}

pub(crate) fn terraform_available() -> bool {
    Command::new("terraform")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

pub(crate) fn fixture_dir() -> PathBuf {
    process::repo_root().join("tests/fixtures/state_sync")
}

impl Bed {
    /// A bucket notifying a queue, a fleet repo on a fake GitHub, a credentials secret, and
    /// the state-sync service configured for them. `app` selects GitHub App credentials.
    pub(crate) async fn new(name: &str, app: bool) -> Bed {
        Bed::on(name, app, FakeGithub::start()).await
    }

    /// The same against a given fake GitHub (github.com or GitHub Enterprise Server).
    pub(crate) async fn on(name: &str, app: bool, gh: FakeGithub) -> Bed {
        leak::init();
        let conf = moto::sdk_config().await;
        let s3 = moto::s3().await;
        let sqs = aws_sdk_sqs::Client::new(&conf);
        let secrets = aws_sdk_secretsmanager::Client::new(&conf);
        let bucket = format!("tfstate-{name}");
        moto::create_bucket(&s3, &bucket).await;
        s3.put_bucket_versioning()
            .bucket(&bucket)
            .versioning_configuration(
                aws_sdk_s3::types::VersioningConfiguration::builder()
                    .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let (queue_url, queue_arn) = moto::queue(&sqs, &format!("state-sync-{name}"), &[]).await;
        s3.put_bucket_notification_configuration()
            .bucket(&bucket)
            .notification_configuration(
                aws_sdk_s3::types::NotificationConfiguration::builder()
                    .queue_configurations(
                        aws_sdk_s3::types::QueueConfiguration::builder()
                            .id("cellbridge-state-sync")
                            .queue_arn(&queue_arn)
                            .events(aws_sdk_s3::types::Event::S3ObjectCreated)
                            .build()
                            .unwrap(),
                    )
                    .build(),
            )
            .send()
            .await
            .unwrap();

        gh.seed_example_fleet(REPO);
        let secret_name = format!("cellbridge/github-{name}");
        let secret = if app {
            let a = gh.app();
            assert!(
                a["private_key"].is_string(),
                "the fake GitHub needs the `cryptography` package to act as a GitHub App"
            );
            leak::secret(
                &format!("state-sync {name}: GitHub App private key"),
                a["private_key"].as_str().unwrap(),
            );
            // By its client ID, as GitHub recommends (cluster-bootstrap's teams fleet keeps `app_id`).
            json!({"client_id": a["client_id"], "installation_id": a["installation_id"], "private_key": a["private_key"]})
        } else {
            leak::secret("state-sync: GitHub token", TOKEN);
            json!({"token": TOKEN})
        };
        secrets
            .create_secret()
            .name(&secret_name)
            .secret_string(secret.to_string())
            .send()
            .await
            .unwrap();

        let config = SyncConfig {
            // No base branch: the adapter asks GitHub for the default branch, once per process.
            github: GithubConfig::checked("acme".into(), "fleet".into(), None, secret_name, gh.url()).unwrap(),
            state_bucket: bucket.clone(),
            key_pattern: KeyPattern::parse(cellbridge::jobs::sync::DEFAULT_KEY_PATTERN).unwrap(),
            flux_git_url: None,
            flux_git_branch: None,
        };
        let service = cellbridge::jobs::sync::service_for(config, &conf);
        let terraform = terraform_available();
        if !terraform {
            println!(
                "terraform is not installed: test {name} uses the recorded state fixtures under tests/fixtures/state_sync/"
            );
        }
        Bed {
            name: name.into(),
            gh,
            bucket,
            queue_url,
            queue_arn,
            s3,
            sqs,
            service,
            work: tempfile::tempdir().unwrap(),
            terraform,
            step: AtomicUsize::new(0),
        }
    }

    pub(crate) fn key(cell: &str) -> String {
        format!("cells/{cell}/terraform.tfstate")
    }

    /// `terraform apply` of a providerless config whose `cell_metadata` output is `data`.
    pub(crate) async fn apply(&self, cell: &str, data: &[(String, String)], sensitive: bool) {
        self.apply_in(cell, None, data, sensitive).await
    }

    /// The same in a Terraform workspace: the S3 backend stores it at `env:/<workspace>/<key>`.
    pub(crate) async fn apply_in(
        &self,
        cell: &str,
        workspace: Option<&str>,
        data: &[(String, String)],
        sensitive: bool,
    ) {
        let stored_key = match workspace {
            Some(ws) => format!("env:/{ws}/{}", Self::key(cell)),
            None => Self::key(cell),
        };
        let Some(fixture) = self.next_step(&stored_key).await else {
            return;
        };
        let dir = self
            .work
            .path()
            .join(format!("{cell}-{}", workspace.unwrap_or("default")));
        std::fs::create_dir_all(&dir).unwrap();
        let map: BTreeMap<&str, &str> = data.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        std::fs::write(
            dir.join("terraform.tfvars.json"),
            json!({ "cell_metadata": map }).to_string(),
        )
        .unwrap();
        std::fs::write(
            dir.join("main.tf"),
            format!(
                "terraform {{\n  backend \"s3\" {{}}\n}}\n\nvariable \"cell_metadata\" {{\n  type = map(string)\n}}\n\n\
                 resource \"terraform_data\" \"cell\" {{\n  input = var.cell_metadata\n}}\n\n\
                 output \"cell_metadata\" {{\n  value     = var.cell_metadata\n  sensitive = {sensitive}\n}}\n"
            ),
        )
        .unwrap();
        let endpoint = moto::endpoint();
        if !dir.join(".terraform").exists() {
            std::fs::write(
                dir.join("backend.hcl"),
                format!(
                    "bucket = \"{}\"\nkey = \"{}\"\nregion = \"eu-west-1\"\nuse_path_style = true\nuse_lockfile = true\n\
                     access_key = \"testing\"\nsecret_key = \"testing\"\n\
                     skip_credentials_validation = true\nskip_requesting_account_id = true\nskip_metadata_api_check = true\n\
                     skip_region_validation = true\nskip_s3_checksum = true\n\
                     endpoints = {{ s3 = \"{endpoint}\", sts = \"{endpoint}\", iam = \"{endpoint}\" }}\n",
                    self.bucket,
                    Self::key(cell)
                ),
            )
            .unwrap();
            terraform(
                &dir,
                &["init", "-input=false", "-no-color", "-backend-config=backend.hcl"],
            );
        }
        if let Some(ws) = workspace {
            terraform(&dir, &["workspace", "select", "-or-create", "-no-color", ws]);
        }
        terraform(&dir, &["apply", "-input=false", "-no-color", "-auto-approve"]);
        self.record(&stored_key, &fixture).await;
    }

    /// The next Terraform step's fixture; without Terraform, the recorded state is uploaded to
    /// `key` in its place and `None` says the step is done.
    pub(crate) async fn next_step(&self, key: &str) -> Option<PathBuf> {
        let step = self.step.fetch_add(1, Ordering::SeqCst);
        let fixture = fixture_dir().join(format!("{}-{step}.tfstate", self.name));
        if self.terraform {
            return Some(fixture);
        }
        let body = std::fs::read(&fixture)
            .unwrap_or_else(|e| panic!("no terraform and no fixture {}: {e}", fixture.display()));
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(body.into())
            .send()
            .await
            .unwrap();
        None
    }

    /// With `CELLBRIDGE_RECORD_FIXTURES` set, what Terraform wrote at `key` becomes `fixture`.
    pub(crate) async fn record(&self, key: &str, fixture: &Path) {
        if std::env::var_os("CELLBRIDGE_RECORD_FIXTURES").is_none() {
            return;
        }
        let obj = self.s3.get_object().bucket(&self.bucket).key(key).send().await.unwrap();
        let bytes = obj.body.collect().await.unwrap().into_bytes();
        std::fs::create_dir_all(fixture_dir()).unwrap();
        std::fs::write(fixture, &bytes).unwrap();
    }

    /// `terraform destroy` of the cell's stack (applied before): what it leaves in the bucket is
    /// a state with no outputs and no resources.
    pub(crate) async fn destroy(&self, cell: &str) {
        let Some(fixture) = self.next_step(&Self::key(cell)).await else {
            return;
        };
        let dir = self.work.path().join(format!("{cell}-default"));
        terraform(&dir, &["destroy", "-input=false", "-no-color", "-auto-approve"]);
        self.record(&Self::key(cell), &fixture).await;
    }

    /// What the Lambda SQS poller would hand the function: every message on the queue now.
    pub(crate) async fn receive(&self) -> Value {
        let mut records = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(if records.is_empty() { 1 } else { 0 })
                .send()
                .await
                .unwrap();
            let msgs = out.messages.unwrap_or_default();
            if msgs.is_empty() && (!records.is_empty() || Instant::now() > deadline) {
                break;
            }
            for m in msgs {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
                records.push(json!({
                    "messageId": m.message_id(), "receiptHandle": m.receipt_handle(), "body": m.body(),
                    "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {}, "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn, "awsRegion": "eu-west-1",
                }));
            }
        }
        assert!(!records.is_empty(), "moto sent no notification to the queue");
        json!({ "Records": records })
    }

    /// One message as Lambda's event source mapping receives it: left in flight (not deleted),
    /// with its real receipt handle and `ApproximateReceiveCount`; `None` when none is visible
    /// within `wait`.
    pub(crate) async fn poll_once(&self, wait: Duration) -> Option<Value> {
        let until = Instant::now() + wait;
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.queue_url)
                .max_number_of_messages(1)
                .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                .send()
                .await
                .unwrap();
            if let Some(m) = out.messages.unwrap_or_default().into_iter().next() {
                // S3's test notification, sent when the notification was configured, and the
                // notifications of Terraform's lock file: not this test's record.
                if m.body()
                    .is_some_and(|b| b.contains("s3:TestEvent") || b.contains(".tflock"))
                {
                    let handle = m.receipt_handle().unwrap();
                    self.sqs
                        .delete_message()
                        .queue_url(&self.queue_url)
                        .receipt_handle(handle)
                        .send()
                        .await
                        .unwrap();
                    continue;
                }
                let count = m
                    .attributes()
                    .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount))
                    .cloned()
                    .unwrap_or_else(|| "1".into());
                return Some(json!({"Records": [{
                    "messageId": m.message_id(), "receiptHandle": m.receipt_handle(), "body": m.body(),
                    "attributes": {"ApproximateReceiveCount": count}, "messageAttributes": {}, "md5OfBody": m.md5_of_body(),
                    "eventSource": "aws:sqs", "eventSourceARN": self.queue_arn, "awsRegion": "eu-west-1",
                }]}));
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The Lambda handler, as the runtime calls it, with `secs` before the deadline.
    pub(crate) async fn invoke_with(&self, event: Value, secs: u64) -> Result<Value, String> {
        let mut ctx = lambda_runtime::Context::default();
        ctx.request_id = format!("test-{}", self.name);
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        ctx.deadline = now_ms + secs * 1000;
        let r = cellbridge_tests::lambda_handler(&self.service, lambda_runtime::LambdaEvent::new(event, ctx))
            .await
            .map_err(|e| format!("{}: {}", e.error_type, e.error_message));
        let text = match &r {
            Ok(v) => v.to_string(),
            Err(e) => format!("error: {e}"),
        };
        leak::capture(&format!("state-sync handler ({})", self.name), &text);
        r
    }

    pub(crate) async fn invoke(&self, event: Value) -> Value {
        self.invoke_with(event, 60)
            .await
            .unwrap_or_else(|e| panic!("handler failed: {e}"))
    }

    pub(crate) fn pulls(&self) -> Vec<Value> {
        self.gh.state(REPO)["pulls"].as_array().cloned().unwrap_or_default()
    }

    /// API requests (not the archive download) and writes since the log was last cleared.
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        let r = self.gh.requests();
        let reqs = r["requests"].as_array().unwrap();
        // A GitHub App's installation token is fetched once an hour, not once a sync: not
        // counted, neither as a request nor as a write.
        let reqs: Vec<&Value> = reqs
            .iter()
            .filter(|q| !q["path"].as_str().unwrap().starts_with("/app/installations/"))
            .collect();
        let api = reqs
            .iter()
            .filter(|q| !q["path"].as_str().unwrap().starts_with("/_codeload/"))
            .count();
        let writes = reqs.iter().filter(|q| q["write"].as_bool().unwrap()).count();
        (api, reqs.len(), writes)
    }
}

pub(crate) fn terraform(dir: &Path, args: &[&str]) {
    let out = Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .env("TF_IN_AUTOMATION", "1")
        .env("TF_DATA_DIR", dir.join(".terraform"))
        .env("CHECKPOINT_DISABLE", "1")
        .output()
        .expect("run terraform");
    assert!(
        out.status.success(),
        "terraform {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn cells(resp: &Value) -> Vec<Value> {
    resp["cells"].as_array().cloned().unwrap_or_default()
}

pub(crate) fn only_cell(resp: &Value) -> Value {
    let c = cells(resp);
    assert_eq!(c.len(), 1, "one cell expected: {resp}");
    c[0].clone()
}
