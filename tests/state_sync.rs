//! state-sync end to end: real Terraform writes real state into moto's S3, the notification
//! moto sends to SQS is received and handed to the real Lambda handler, which reads the latest
//! state and talks to the fake GitHub. Assertions look at what a user would see on GitHub.
//!
//! Where `terraform` is absent, each apply uploads the state file recorded from a real run
//! (`tests/fixtures/state_sync/`) instead, and the test says so. Set
//! `CELLBRIDGE_RECORD_FIXTURES=1` with Terraform installed to re-record them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cellbridge::adapters::github::{GithubConfig, GithubFleet};
use cellbridge::jobs::sync::{KeyPattern, SyncConfig, Syncer};
use cellbridge::{adapters::s3::S3States, ports::state::StateSource};
use cellbridge_tests::github::{FakeGithub, TOKEN};
use cellbridge_tests::{leak, moto, process};
use serde_json::{Value, json};

const REPO: &str = "acme/fleet";

type Service = Syncer<S3States, GithubFleet>;

/// Every variable the example fleet's layers substitute, so the strict check passes.
fn base_data(cell: &str, vpc: &str) -> Vec<(String, String)> {
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

struct Bed {
    name: String,
    gh: FakeGithub,
    bucket: String,
    queue_url: String,
    queue_arn: String,
    s3: aws_sdk_s3::Client,
    sqs: aws_sdk_sqs::Client,
    service: Service,
    work: tempfile::TempDir,
    terraform: bool,
    step: AtomicUsize,
}

fn terraform_available() -> bool {
    Command::new("terraform")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn fixture_dir() -> PathBuf {
    process::repo_root().join("tests/fixtures/state_sync")
}

impl Bed {
    /// A bucket notifying a queue, a fleet repo on a fake GitHub, a credentials secret, and
    /// the state-sync service configured for them. `app` selects GitHub App credentials.
    async fn new(name: &str, app: bool) -> Bed {
        Bed::on(name, app, FakeGithub::start()).await
    }

    /// The same against a given fake GitHub (github.com or GitHub Enterprise Server).
    async fn on(name: &str, app: bool, gh: FakeGithub) -> Bed {
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
            json!({"app_id": a["app_id"], "installation_id": a["installation_id"], "private_key": a["private_key"]})
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

    fn key(cell: &str) -> String {
        format!("cells/{cell}/terraform.tfstate")
    }

    /// `terraform apply` of a providerless config whose `cell_metadata` output is `data`.
    async fn apply(&self, cell: &str, data: &[(String, String)], sensitive: bool) {
        self.apply_in(cell, None, data, sensitive).await
    }

    /// The same in a Terraform workspace: the S3 backend stores it at `env:/<workspace>/<key>`.
    async fn apply_in(&self, cell: &str, workspace: Option<&str>, data: &[(String, String)], sensitive: bool) {
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
    async fn next_step(&self, key: &str) -> Option<PathBuf> {
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
    async fn record(&self, key: &str, fixture: &Path) {
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
    async fn destroy(&self, cell: &str) {
        let Some(fixture) = self.next_step(&Self::key(cell)).await else {
            return;
        };
        let dir = self.work.path().join(format!("{cell}-default"));
        terraform(&dir, &["destroy", "-input=false", "-no-color", "-auto-approve"]);
        self.record(&Self::key(cell), &fixture).await;
    }

    /// What the Lambda SQS poller would hand the function: every message on the queue now.
    async fn receive(&self) -> Value {
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
    async fn poll_once(&self, wait: Duration) -> Option<Value> {
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
    async fn invoke_with(&self, event: Value, secs: u64) -> Result<Value, String> {
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

    async fn invoke(&self, event: Value) -> Value {
        self.invoke_with(event, 60)
            .await
            .unwrap_or_else(|e| panic!("handler failed: {e}"))
    }

    fn pulls(&self) -> Vec<Value> {
        self.gh.state(REPO)["pulls"].as_array().cloned().unwrap_or_default()
    }

    /// API requests (not the archive download) and writes since the log was last cleared.
    fn counts(&self) -> (usize, usize, usize) {
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

fn terraform(dir: &Path, args: &[&str]) {
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

fn cells(resp: &Value) -> Vec<Value> {
    resp["cells"].as_array().cloned().unwrap_or_default()
}

fn only_cell(resp: &Value) -> Value {
    let c = cells(resp);
    assert_eq!(c.len(), 1, "one cell expected: {resp}");
    c[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_cell_update_no_change_and_revert() {
    lifecycle(Bed::new("lifecycle", false).await).await;
}

/// The same life on GitHub Enterprise Server (the API below `/api/v3`, the archive redirected to
/// `/_codeload/`), as a GitHub App, checked against the newest GHES description.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_cell_update_no_change_and_revert_on_github_enterprise_server() {
    lifecycle(Bed::on("lifecycle-ghes", true, FakeGithub::start_enterprise()).await).await;
}

async fn lifecycle(bed: Bed) {
    let cell = "eu-c1";

    // New cell: one pull request with the whole directory, in one commit.
    bed.apply(cell, &base_data(cell, "vpc-111"), false).await;
    let event = bed.receive().await;
    bed.gh.clear_requests();
    let resp = bed.invoke(event.clone()).await;
    assert_eq!(resp["batchItemFailures"], json!([]), "{resp}");
    let c = only_cell(&resp);
    assert_eq!(c["action"], "opened", "{resp}");
    let (api, total, _) = bed.counts();
    println!("new cell: {api} API requests, {total} with the archive download");
    // 10 API requests (the README's table: with the listing of refused issues and the base
    // tree's id), plus one once per process: the default branch's name.
    assert!(
        api <= 11 && total <= 12,
        "new cell took {api} API requests ({total} in all)"
    );
    let state = bed.gh.state(REPO);
    let pulls = state["pulls"].as_array().unwrap();
    assert_eq!(pulls.len(), 1);
    let pr = &pulls[0];
    assert_eq!(pr["state"], "open");
    assert_eq!(pr["head"]["ref"], format!("cellbridge/{cell}"));
    assert_eq!(c["pull_request"]["number"], pr["number"]);
    for l in ["cellbridge", "new-cell"] {
        assert!(pr["labels"].as_array().unwrap().contains(&json!(l)), "{pr}");
    }
    assert_eq!(
        pr["commits"].as_array().unwrap().len(),
        1,
        "one commit for the whole directory: {pr}"
    );
    let branch = &state["files"][format!("cellbridge/{cell}")];
    for f in [
        "cell-metadata.yaml",
        "kustomization.yaml",
        "layers.yaml",
        "flux-system/gotk-sync.yaml",
        "flux-system/gotk-components.yaml",
        "flux-system/kustomization.yaml",
    ] {
        assert!(
            branch[format!("clusters/{cell}/{f}")].is_string(),
            "clusters/{cell}/{f} missing from the branch"
        );
    }
    assert!(
        branch[format!("clusters/{cell}/cell-metadata.yaml")]
            .as_str()
            .unwrap()
            .contains("vpc-111")
    );
    assert!(
        branch[format!("clusters/{cell}/flux-system/gotk-sync.yaml")]
            .as_str()
            .unwrap()
            .contains(&format!("./clusters/{cell}"))
    );
    let statuses = pr["statuses"].as_array().unwrap();
    assert_eq!(statuses.len(), 1, "{pr}");
    assert_eq!(statuses[0]["context"], "cellbridge/strict-substitution");
    assert_eq!(
        statuses[0]["state"],
        "success",
        "{}\n{}",
        statuses[0],
        pr["body"].as_str().unwrap()
    );
    assert!(
        pr["body"]
            .as_str()
            .unwrap()
            .contains(&format!("s3://{}/cells/{cell}/terraform.tfstate", bed.bucket))
    );

    // A value changes: the same pull request is updated in place.
    bed.apply(cell, &base_data(cell, "vpc-222"), false).await;
    let event2 = bed.receive().await;
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(event2).await);
    assert_eq!(c["action"], "updated", "{c}");
    let (api, total, _) = bed.counts();
    println!("update: {api} API requests, {total} with the archive download");
    for q in bed.gh.requests()["requests"].as_array().unwrap() {
        println!("  {} {}", q["method"], q["path"]);
    }
    assert!(
        api <= 8 && total <= 9,
        "update took {api} API requests ({total} in all)"
    );
    let state = bed.gh.state(REPO);
    assert_eq!(state["pulls"].as_array().unwrap().len(), 1);
    let pr = &state["pulls"][0];
    assert_eq!(pr["state"], "open");
    assert_eq!(c["pull_request"]["number"], pr["number"]);
    let cm = state["files"][format!("cellbridge/{cell}")][format!("clusters/{cell}/cell-metadata.yaml")]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(cm.contains("vpc-222") && !cm.contains("vpc-111"), "{cm}");
    // The body compares with the base branch, which does not have the cell yet.
    assert!(
        pr["body"].as_str().unwrap().contains("vpc-222") && !pr["body"].as_str().unwrap().contains("vpc-111"),
        "the body is rewritten"
    );
    assert_eq!(
        pr["statuses"][0]["state"], "success",
        "the status is set on the new head"
    );

    // The same event again (SQS redelivers, S3 notifies twice): nothing is written.
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(event.clone()).await);
    assert_eq!(c["action"], "unchanged", "{c}");
    let (api, _, writes) = bed.counts();
    assert_eq!(writes, 0, "no write for no change");
    assert!(api <= 3);

    // Merge it: the base branch now holds vpc-222 and the branch is gone.
    let number = pr["number"].as_u64().unwrap();
    let (status, merged) = bed
        .gh
        .call("PUT", &format!("/repos/{REPO}/pulls/{number}/merge"), Some(&json!({})));
    assert_eq!(status, 200, "{merged}");
    bed.gh.call(
        "DELETE",
        &format!("/repos/{REPO}/git/refs/heads/cellbridge/{cell}"),
        None,
    );
    let c = only_cell(&bed.invoke(event.clone()).await);
    assert_eq!(c["action"], "in-sync", "the merged state is in sync: {c}");

    // Change, then revert to what the base holds: the pull request is closed, the branch deleted.
    bed.apply(cell, &base_data(cell, "vpc-333"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");
    bed.apply(cell, &base_data(cell, "vpc-222"), false).await;
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "closed", "{c}");
    let state = bed.gh.state(REPO);
    let open: Vec<&Value> = state["pulls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["state"] == "open")
        .collect();
    assert!(open.is_empty(), "{state}");
    assert!(
        state["branches"][format!("cellbridge/{cell}")].is_null(),
        "the branch is deleted"
    );

    // A dry run returns the plan and writes nothing; sync-all finds the cell and agrees.
    bed.apply(cell, &base_data(cell, "vpc-444"), false).await;
    let _ = bed.receive().await;
    bed.gh.clear_requests();
    let c = only_cell(
        &bed.invoke(json!({"action": "sync", "cell": cell, "dry_run": true}))
            .await,
    );
    assert_eq!(c["action"], "planned", "{c}");
    assert!(
        c["plan"]["diff"].as_str().unwrap().contains("+  vpc_id: \"vpc-444\""),
        "{c}"
    );
    assert_eq!(bed.counts().2, 0, "a dry run writes nothing");
    bed.apply(cell, &base_data(cell, "vpc-222"), false).await;
    let _ = bed.receive().await;
    let resp = bed.invoke(json!({"action": "sync-all"})).await;
    let c = only_cell(&resp);
    assert_eq!(
        (c["cell"].as_str(), c["action"].as_str()),
        (Some(cell), Some("in-sync")),
        "{resp}"
    );
}

/// GitHub builds its archives with `git archive`, which leaves out what `.gitattributes` marks
/// `export-ignore`: a tree computed from the archive is then not the branch's real tree. Here it
/// is even one GitHub knows (the commit before the docs came, whose tree the archive's files
/// match exactly), which GitHub would accept as a base and so delete the docs. cellbridge builds
/// on the tree GitHub gives for the base commit, and the pull request keeps every file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_left_out_of_the_archive_stay_in_the_pull_request() {
    let bed = Bed::new("export-ignore", false).await;
    bed.gh.commit(
        REPO,
        "main",
        &[(".gitattributes", Some("docs/** export-ignore\n"))],
        "docs will not ship in archives",
    );
    bed.gh.commit(
        REPO,
        "main",
        &[("docs/runbook.md", Some("# What to do when a cell is on fire\n"))],
        "docs",
    );
    let cell = "eu-x1";
    bed.apply(cell, &base_data(cell, "vpc-x1"), false).await;
    let resp = bed.invoke(bed.receive().await).await;
    assert_eq!(only_cell(&resp)["action"], "opened", "{resp}");
    let state = bed.gh.state(REPO);
    let branch = &state["files"][format!("cellbridge/{cell}")];
    assert_eq!(
        branch["docs/runbook.md"], "# What to do when a cell is on fire\n",
        "the pull request would delete a file the archive left out"
    );
    assert!(branch[format!("clusters/{cell}/cell-metadata.yaml")].is_string());
    assert_eq!(
        bed.gh.conformance()["operations"]["git/get-commit"],
        1,
        "the base tree is read from GitHub, once"
    );
}

/// `cellbridge invoke state-sync --event FILE` reads its configuration from the environment
/// like the Lambda does; a missing variable is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_from_file_uses_the_environment() {
    let bed = Bed::new("invoke", false).await;
    let cell = "eu-c6";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("event.json");
    std::fs::write(&event, bed.receive().await.to_string()).unwrap();
    // SAFETY: only this test reads these variables.
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_FLEET_REPO");
    }
    let err = cellbridge::jobs::sync::invoke_from_file(&event)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("CELLBRIDGE_FLEET_REPO"), "{err}");
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_FLEET_REPO", REPO);
        std::env::set_var("CELLBRIDGE_GITHUB_SECRET", "cellbridge/github-invoke");
        std::env::set_var("CELLBRIDGE_STATE_BUCKET", &bed.bucket);
        std::env::set_var("GITHUB_API_URL", bed.gh.url());
        std::env::set_var("CELLBRIDGE_STATE_KEY_PATTERN", "cells/{cell}/terraform.tfstate");
    }
    let inv = cellbridge::jobs::sync::invoke_from_file(&event).await.unwrap();
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(only_cell(&inv.response)["action"], "opened", "{}", inv.response);
    assert_eq!(bed.pulls().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secret_looking_or_sensitive_output_opens_nothing() {
    let bed = Bed::new("refused", false).await;
    let cell = "eu-c2";
    let mut data = base_data(cell, "vpc-1");
    data.push(("db_password".into(), "hunter2-Zx8q".into()));
    bed.apply(cell, &data, false).await;
    bed.gh.clear_requests();
    let resp = bed.invoke(bed.receive().await).await;
    let c = only_cell(&resp);
    assert_eq!(c["action"], "refused", "{resp}");
    let err = c["error"].as_str().unwrap();
    assert!(err.contains("db_password"), "{err}");
    assert!(!resp.to_string().contains("hunter2"), "the value leaked: {resp}");
    // Redelivering cannot help: the record is not handed back to SQS.
    assert_eq!(resp["batchItemFailures"], json!([]));
    assert!(bed.pulls().is_empty());
    // Nothing of the cell is written; the refusal is reported in one issue, naming the key.
    assert_eq!(bed.counts().2, 1, "the report's issue, and no other write");
    let issues = bed.gh.issues(REPO);
    assert_eq!(issues.len(), 1, "{issues:?}");
    let body = issues[0]["body"].as_str().unwrap();
    assert!(body.contains("db_password") && !body.contains("hunter2"), "{body}");

    // A sensitive output, through a direct invocation: a final failure naming the output,
    // answered as handled (not a Lambda error, which an asynchronous invocation would retry).
    bed.apply(cell, &base_data(cell, "vpc-1"), true).await;
    let _ = bed.receive().await;
    let direct = json!({"action": "sync", "cell": cell});
    let resp = bed.invoke_with(direct, 60).await.unwrap();
    assert_eq!(resp["class"], "final", "{resp}");
    let text = resp.to_string();
    assert!(text.contains("sensitive") && text.contains("cell_metadata"), "{resp}");
    assert!(bed.pulls().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn key_added_without_schema_bump_fails_the_status() {
    let bed = Bed::new("schema", false).await;
    let cell = "eu-c3";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    let number = c["pull_request"]["number"].as_u64().unwrap();
    let (status, _) = bed
        .gh
        .call("PUT", &format!("/repos/{REPO}/pulls/{number}/merge"), Some(&json!({})));
    assert_eq!(status, 200);
    bed.gh.call(
        "DELETE",
        &format!("/repos/{REPO}/git/refs/heads/cellbridge/{cell}"),
        None,
    );

    let mut data = base_data(cell, "vpc-1");
    data.push((
        "new_queue_url".into(),
        "https://sqs.eu-west-1.amazonaws.com/123456789012/q".into(),
    ));
    bed.apply(cell, &data, false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");
    let pulls = bed.pulls();
    let pr = pulls.iter().find(|p| p["state"] == "open").unwrap();
    assert!(
        pr["labels"].as_array().unwrap().contains(&json!("schema-change")),
        "{pr}"
    );
    let st = &pr["statuses"][0];
    assert_eq!(st["context"], "cellbridge/strict-substitution");
    assert_eq!(st["state"], "failure", "{st}");
    assert!(st["description"].as_str().unwrap().contains("schema"), "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_invocations_make_one_pull_request() {
    use cellbridge::adapters::github::pacing::{Limit, Pacing};
    let mut bed = Bed::new("race", false).await;
    // The race is what is tested here, not GitHub's write limits: twenty racing invocations send
    // more than the 80 content-creating requests a minute the default pacing keeps to, and one
    // paced past its deadline fails retryably (as it should, `tests/github_scenarios.rs` tests
    // that) instead of racing. This process gets a larger share.
    let Syncer {
        config,
        states,
        fleet,
        queue,
        clusters,
    } = bed.service;
    let fleet = fleet.with_pacing(Pacing {
        limits: vec![Limit {
            count: 10_000,
            window: Duration::from_secs(60),
        }],
    });
    bed.service = Syncer {
        config,
        states,
        fleet,
        queue,
        clusters,
    };
    let cell = "eu-c4";
    let mut events = Vec::new();
    for vpc in ["vpc-a", "vpc-b", "vpc-c"] {
        bed.apply(cell, &base_data(cell, vpc), false).await;
        events.push(bed.receive().await);
    }
    let serial = bed
        .service
        .states
        .read_latest(&bed.bucket, &Bed::key(cell))
        .await
        .unwrap()
        .0
        .serial;
    let runs = (0..20).map(|i| bed.invoke(events[i % events.len()].clone()));
    let results = futures::future::join_all(runs).await;
    for r in &results {
        assert_eq!(r["batchItemFailures"], json!([]), "{r}");
        let c = only_cell(r);
        assert!(
            ["opened", "unchanged", "updated", "stale"].contains(&c["action"].as_str().unwrap()),
            "{c}"
        );
    }
    let opened = results.iter().filter(|r| only_cell(r)["action"] == "opened").count();
    assert_eq!(opened, 1, "exactly one invocation opens the pull request");
    let state = bed.gh.state(REPO);
    let pulls = state["pulls"].as_array().unwrap();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert!(
        pulls[0]["body"]
            .as_str()
            .unwrap()
            .contains(&format!("cellbridge:serial={serial} ")),
        "the pull request holds the latest serial {serial}"
    );
    let cm = state["files"][format!("cellbridge/{cell}")][format!("clusters/{cell}/cell-metadata.yaml")]
        .as_str()
        .unwrap();
    assert!(cm.contains("vpc-c"), "{cm}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn github_faults_are_retried_or_fail_cleanly() {
    // This bed authenticates as a GitHub App: every sync starts with an installation token.
    let bed = Bed::new("faults", true).await;
    let cell = "eu-c5";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let event = bed.receive().await;

    // 5xx on the branch creation and a secondary rate limit on the pull request: retried.
    bed.gh
        .fault(json!({"match": "POST /repos/*/git/refs", "status": 502, "times": 2}));
    bed.gh
        .fault(json!({"match": "POST /repos/*/pulls", "secondary_rate_limit": true, "retry_after": 1, "times": 1}));
    bed.gh.clear_requests();
    let t = Instant::now();
    let c = only_cell(&bed.invoke(event.clone()).await);
    assert_eq!(c["action"], "opened", "{c}");
    assert!(t.elapsed() >= Duration::from_secs(1), "Retry-After was honoured");
    let log = bed.gh.requests();
    let reqs = log["requests"].as_array().unwrap();
    assert!(
        reqs.iter()
            .any(|r| r["path"].as_str().unwrap().starts_with("/app/installations/")),
        "an installation token was minted"
    );
    let app_calls = |suffix: &str| {
        reqs.iter()
            .filter(|r| {
                let p = r["path"].as_str().unwrap();
                p.starts_with("/app/installations/") && p.ends_with(suffix)
            })
            .count()
    };
    assert_eq!(
        app_calls("/access_tokens"),
        1,
        "one installation token, reused by every request"
    );
    assert_eq!(
        app_calls("/777"),
        1,
        "the installation's permissions, read once before the first write"
    );
    assert_eq!(
        reqs.iter()
            .filter(|r| r["method"] == "POST" && r["path"].as_str().unwrap().ends_with("/git/refs"))
            .count(),
        3
    );
    assert_eq!(bed.pulls().len(), 1);

    // GitHub down for longer than the function has: a clean, retryable failure, no write.
    bed.apply(cell, &base_data(cell, "vpc-2"), false).await;
    let event2 = bed.receive().await;
    bed.gh
        .fault(json!({"match": "GET /repos/*/tarball/*", "status": 503, "times": 1000}));
    bed.gh.clear_requests();
    let resp = bed.invoke_with(event2.clone(), 6).await.unwrap();
    let c = only_cell(&resp);
    assert_eq!(c["action"], "failed", "{resp}");
    assert_eq!(c["retryable"], true);
    let failed = resp["batchItemFailures"].as_array().unwrap();
    assert!(!failed.is_empty(), "the record goes back to SQS: {resp}");
    assert_eq!(bed.counts().2, 0, "nothing written: {}", bed.gh.requests());
    bed.gh.clear_faults();

    // GitHub hangs: the request is abandoned before the deadline, the record goes back.
    bed.gh
        .fault(json!({"match": "GET /repos/*/pulls", "delay_ms": 8000, "times": 1}));
    let t = Instant::now();
    let resp = bed.invoke_with(event2.clone(), 5).await.unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "answered within the deadline");
    assert_eq!(only_cell(&resp)["retryable"], true, "{resp}");
    assert!(!resp["batchItemFailures"].as_array().unwrap().is_empty(), "{resp}");
    bed.gh.clear_faults();

    // Another writer moves the cell's branch just before the update: redone on the fresh base.
    bed.gh.fault(json!({"match": "PATCH /repos/*/git/refs/heads/cellbridge/*", "times": 1, "lose_race": {"ref": format!("heads/cellbridge/{cell}"), "files": {"NOTE.md": "someone else\n"}}}));
    let c = only_cell(&bed.invoke(event2.clone()).await);
    assert_eq!(c["action"], "updated", "{c}");
    assert!(c["attempts"].as_u64().unwrap() >= 2, "{c}");

    // The base branch moves too: the next sync still converges, one pull request, latest data.
    bed.gh.commit(
        REPO,
        "main",
        &[("apps/base/NOTE.md", Some("unrelated\n"))],
        "unrelated change",
    );
    bed.apply(cell, &base_data(cell, "vpc-3"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "updated", "{c}");
    let state = bed.gh.state(REPO);
    let pulls = state["pulls"].as_array().unwrap();
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0]["state"], "open");
    let branch = &state["files"][format!("cellbridge/{cell}")];
    assert!(
        branch[format!("clusters/{cell}/cell-metadata.yaml")]
            .as_str()
            .unwrap()
            .contains("vpc-3")
    );
    assert!(
        branch["apps/base/NOTE.md"].is_string(),
        "the branch carries the fresh base"
    );
}

/// A workspace's state (`env:/<workspace>/cells/<cell>/terraform.tfstate`, URL-encoded in the
/// notification) maps to its cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_state_maps_to_its_cell() {
    let bed = Bed::new("workspace", false).await;
    let cell = "stg-c7";
    bed.apply_in(cell, Some("staging"), &base_data(cell, "vpc-7"), false)
        .await;
    let event = bed.receive().await;
    assert!(
        event.to_string().contains("env%3A") || event.to_string().contains("env:"),
        "{event}"
    );
    let c = only_cell(&bed.invoke(event).await);
    assert_eq!(c["key"], format!("env:/staging/cells/{cell}/terraform.tfstate"));
    assert_eq!(c["action"], "opened", "{c}");
}

/// A token rotated in Secrets Manager while the function was warm: the refused token is
/// dropped, the secret read again, and the sync goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_token_is_read_again() {
    let bed = Bed::new("rotation", false).await;
    let cell = "eu-c8";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");

    let rotated = "ghp_rotated_token_9876543210";
    leak::secret("state-sync: rotated GitHub token", rotated);
    bed.gh.token(rotated, false);
    bed.gh.token(TOKEN, true);
    let conf = moto::sdk_config().await;
    aws_sdk_secretsmanager::Client::new(&conf)
        .put_secret_value()
        .secret_id("cellbridge/github-rotation")
        .secret_string(json!({"token": rotated}).to_string())
        .send()
        .await
        .unwrap();
    bed.apply(cell, &base_data(cell, "vpc-2"), false).await;
    let resp = bed.invoke(bed.receive().await).await;
    assert_eq!(only_cell(&resp)["action"], "updated", "{resp}");
    assert!(!resp.to_string().contains(rotated) && !resp.to_string().contains(TOKEN));
}

/// `examples/teams-fleet/` on GitHub: a new cell's pull request is the template as written
/// (its gotk-sync.yaml but for the path, its script still executable), and the commit status
/// computed from GitHub's archive says what `cellbridge check` says on a checkout of the branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teams_fleet_new_cell_is_the_template_and_its_status_matches_a_checkout() {
    let bed = Bed::new("teams-fleet", false).await;
    let teams = process::repo_root().join("examples/teams-fleet");
    bed.gh.seed_dir(REPO, &teams);
    let cell = "payments-us-east-2";
    let data: Vec<(String, String)> = [
        ("cell_name", cell),
        ("schema", "1"),
        ("aws_region", "us-east-2"),
        ("aws_account_id", "345678901234"),
        ("cluster_name", cell),
        ("vpc_id", "vpc-0c2d4e6f8a1b3c5d7"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    bed.apply(cell, &data, false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");

    let state = bed.gh.state(REPO);
    let branch = format!("cellbridge/{cell}");
    let files = state["files"][&branch].as_object().unwrap();
    let modes = &state["modes"][&branch];
    let template = std::fs::read_to_string(teams.join("clusters/_template/flux-system/gotk-sync.yaml")).unwrap();
    assert_eq!(
        files[&format!("clusters/{cell}/flux-system/gotk-sync.yaml")],
        template.replace("path: ./clusters/_template", &format!("path: ./clusters/{cell}")),
        "the template's gotk-sync.yaml but for the path"
    );
    assert_eq!(
        modes[format!("clusters/{cell}/scripts/rotate-age-key.sh")],
        "100755",
        "{modes}"
    );
    assert_eq!(
        modes["apps/overlays/canary"], "120000",
        "the base's symlink is untouched"
    );

    // A checkout of the pull request's branch, symlinks and modes included.
    let checkout = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let f = cellbridge::pure::fleet::FileWrite {
            path: path.clone(),
            mode: cellbridge::pure::fleet::FileMode::from_git_mode(modes[path].as_str().unwrap_or("100644")).unwrap(),
            content: text.as_str().unwrap().to_owned(),
        };
        f.write_at(&checkout.path().join(path)).unwrap();
    }
    let fleet = cellbridge::pure::fleet::LocalFleet::open(checkout.path()).unwrap();
    let report = cellbridge::pure::check::check_fleet(&fleet, Some(cell))
        .unwrap()
        .remove(0);
    let pulls = bed.pulls();
    let pr = pulls.iter().find(|p| p["head"]["ref"] == branch.as_str()).unwrap();
    let st = &pr["statuses"][0];
    assert_eq!(st["context"], "cellbridge/strict-substitution");
    assert_eq!(st["state"], if report.passed() { "success" } else { "failure" }, "{st}");
    assert_eq!(
        report.findings.len(),
        2,
        "the typo and the symlinked overlay: {:?}",
        report.findings
    );
    let body = pr["body"].as_str().unwrap();
    assert!(
        body.contains(&format!("❌ {} findings", report.findings.len())),
        "{body}"
    );
    for f in &report.findings {
        assert!(
            body.contains(&format!("| `{}:{}` |", f.file, f.line)),
            "{}:{} missing from the pull request body:\n{body}",
            f.file,
            f.line
        );
        assert!(st["description"].as_str().unwrap().contains(if f.variable.is_empty() {
            "symlink"
        } else {
            &f.variable
        }));
    }
    assert_eq!(report.unverified.len(), 1);
    let u = &report.unverified[0];
    assert!(
        body.contains(&format!("| `{}:{}` | `{}` |", u.file, u.line, u.variable)),
        "{body}"
    );
}

/// state-sync asks EKS in a cell's account through the cell's role, which is cluster-bootstrap's
/// (a role that may make itself a cluster's administrator), narrowed by a session policy to
/// `eks:DescribeCluster` alone: moto's record of the assumed session holds that policy, and a
/// cluster of that account is found through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_sync_reaches_a_cells_account_narrowed_to_describe_cluster() {
    use cellbridge::{adapters::probe::EksProbe, ports::probe::ClusterProbe, ports::probe::Presence};
    const ROLE: &str = "arn:aws:iam::333333333333:role/cellbridge-bootstrap";
    leak::init();
    let conf = moto::sdk_config().await;
    let theirs = moto::assumed(&conf, "arn:aws:iam::333333333333:role/terraform", "test-account-c").await;
    moto::create_cluster(&theirs, "eks-narrow", &[]).await;
    let probe = EksProbe::new(conf.clone(), "cellbridge-state-sync");
    let presence = probe.presence("eks-narrow", "eu-west-1", Some(ROLE)).await.unwrap();
    assert!(matches!(presence, Presence::Exists { .. }), "{presence:?}");
    let (_, moto_data) =
        cellbridge_tests::kube::http_json("GET", &format!("{}/moto-api/data.json", moto::endpoint()), None);
    let sessions: Vec<&Value> = moto_data["sts"]["AssumedRole"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["role_arn"] == ROLE && r["session_name"] == "cellbridge-state-sync")
        .collect();
    assert!(!sessions.is_empty(), "{}", moto_data["sts"]);
    for s in sessions {
        let policy: Value = serde_json::from_str(s["policy"].as_str().unwrap_or("null")).unwrap_or(Value::Null);
        assert_eq!(
            policy["Statement"][0]["Action"], "eks:DescribeCluster",
            "the session may do nothing else: {s}"
        );
    }
}

/// The state bucket in another account, read through
/// `CELLBRIDGE_STATE_ROLE_ARN`. moto is multi-account: the bucket is made with account B's
/// credentials, and moto's own record of assumed roles (`/moto-api/data.json`) shows the role
/// state-sync assumed, with its session name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_bucket_in_another_account_is_read_through_the_configured_role() {
    const ROLE: &str = "arn:aws:iam::222222222222:role/cellbridge-state-reader";
    leak::init();
    let conf = moto::sdk_config().await;
    let b = moto::assumed(&conf, "arn:aws:iam::222222222222:role/terraform", "test-account-b").await;
    let s3b = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&b).force_path_style(true).build());
    let bucket = "tfstate-account-b";
    moto::create_bucket(&s3b, bucket).await;
    let cell = "eu-x1";
    let data: serde_json::Map<String, Value> = base_data(cell, "vpc-b")
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    let state = json!({
        "version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "0000-b",
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": data}}, "resources": [],
    });
    s3b.put_object()
        .bucket(bucket)
        .key(Bed::key(cell))
        .body(state.to_string().into_bytes().into())
        .send()
        .await
        .unwrap();

    let gh = FakeGithub::start();
    gh.seed_example_fleet(REPO);
    leak::secret("state-sync cross-account: GitHub token", TOKEN);
    let fleet = GithubFleet::new(
        &gh.url(),
        "acme",
        "fleet",
        None,
        &cellbridge::adapters::github::Credentials::Token(cellbridge::pure::redact::Secret::new(TOKEN.to_owned())),
    )
    .unwrap();
    let config = SyncConfig {
        github: GithubConfig::checked("acme".into(), "fleet".into(), None, "unused".into(), gh.url()).unwrap(),
        state_bucket: bucket.into(),
        key_pattern: KeyPattern::parse(cellbridge::jobs::sync::DEFAULT_KEY_PATTERN).unwrap(),
        flux_git_url: None,
        flux_git_branch: None,
    };
    let service = Syncer::new(
        config,
        cellbridge::jobs::sync::state_source(&conf, Some(ROLE)).await,
        fleet,
    );
    let inv = cellbridge_tests::handle(
        &service,
        &json!({"action": "sync", "cell": cell}),
        Instant::now() + Duration::from_secs(60),
    )
    .await
    .unwrap();
    leak::capture("state-sync cross-account: answer", &inv.response.to_string());
    assert_eq!(only_cell(&inv.response)["action"], "opened", "{}", inv.response);
    assert!(
        gh.state(REPO)["files"][format!("cellbridge/{cell}")][format!("clusters/{cell}/cell-metadata.yaml")]
            .as_str()
            .unwrap()
            .contains("vpc-b")
    );
    let (_, moto_data) =
        cellbridge_tests::kube::http_json("GET", &format!("{}/moto-api/data.json", moto::endpoint()), None);
    let assumed: Vec<(&str, &str)> = moto_data["sts"]["AssumedRole"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["role_arn"].as_str().unwrap(), r["session_name"].as_str().unwrap()))
        .collect();
    assert!(assumed.contains(&(ROLE, "cellbridge-state-sync")), "{assumed:?}");

    // A value that is no role ARN fails the cold start, naming the variable.
    // SAFETY: only this test reads this variable.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_STATE_ROLE_ARN", "arn:aws:iam::222222222222:user/someone");
    }
    let err = cellbridge::jobs::sync::state_role_from_env().unwrap_err().to_string();
    assert!(err.starts_with("CELLBRIDGE_STATE_ROLE_ARN="), "{err}");
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_STATE_ROLE_ARN");
    }
}

/// A record that failed retryably comes back after a backoff that doubles
/// with each delivery (`ChangeMessageVisibility` on the in-flight message, before the answer),
/// not after the queue's visibility timeout (moto's default, 30 s, here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_failure_comes_back_after_a_backoff_that_doubles() {
    // SAFETY: read by the handler only when a record is handed back; set before this test's
    // first invocation, and the other tests' handed-back records are already deleted.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("CELLBRIDGE_RETRY_BASE_SECS", "2");
        std::env::set_var("CELLBRIDGE_RETRY_MAX_SECS", "4");
    }
    let bed = Bed::new("backoff", false).await;
    let cell = "eu-b1";
    bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    let mut event = bed.poll_once(Duration::from_secs(10)).await.expect("the notification");
    for (count, delay) in [("1", 2u64), ("2", 4)] {
        assert_eq!(event["Records"][0]["attributes"]["ApproximateReceiveCount"], count);
        // Too little time left to start: a retryable failure, handed back.
        let resp = bed.invoke_with(event.clone(), 3).await.unwrap();
        assert_eq!(
            resp["batchItemFailures"].as_array().unwrap().len(),
            1,
            "{resp} for {event}"
        );
        let answered = Instant::now();
        assert!(bed.poll_once(Duration::ZERO).await.is_none(), "not visible at once");
        event = bed.poll_once(Duration::from_secs(12)).await.expect("redelivered");
        let after = answered.elapsed();
        assert!(
            after >= Duration::from_secs(delay) - Duration::from_millis(300) && after < Duration::from_secs(delay + 5),
            "delivery {count}: back after {after:?}, expected {delay} s"
        );
    }
    // The third delivery syncs; the event source mapping then deletes the message.
    let resp = bed.invoke(event.clone()).await;
    assert_eq!(resp["batchItemFailures"], json!([]), "{resp}");
    assert_eq!(only_cell(&resp)["action"], "opened", "{resp}");
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("CELLBRIDGE_RETRY_BASE_SECS");
        std::env::remove_var("CELLBRIDGE_RETRY_MAX_SECS");
    }
}

/// Through moto's SQS: sync-all sends one message per state to state-sync's
/// own queue (SendMessageBatch); delivered back, each message syncs its cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_all_fans_out_through_the_queue_and_each_message_syncs_its_cell() {
    let bed = Bed::new("fanout", false).await;
    for cell in ["eu-f1", "eu-f2"] {
        bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
    }
    // The S3 notifications are not this test's subject.
    let _ = bed.receive().await;
    let conf = moto::sdk_config().await;
    let fanning = cellbridge::jobs::sync::service_for(bed.service.config.clone(), &conf).with_queue(
        cellbridge::jobs::sync::fanout::SqsQueue::new(&conf, bed.queue_url.clone()),
    );
    let ctx = cellbridge_tests::lambda_context(60);
    let resp = cellbridge_tests::lambda_handler(
        &fanning,
        lambda_runtime::LambdaEvent::new(json!({"action": "sync-all"}), ctx),
    )
    .await
    .unwrap();
    leak::capture("state-sync fan-out", &resp.to_string());
    assert_eq!(resp["enqueued"], 2, "{resp}");
    assert!(bed.pulls().is_empty(), "nothing synced by the sync-all itself");

    let event = bed.receive().await;
    let bodies: Vec<Value> = event["Records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    assert!(
        bodies.contains(&json!({"action": "sync", "bucket": bed.bucket, "key": "cells/eu-f1/terraform.tfstate"})),
        "{bodies:?}"
    );
    let resp = bed.invoke(event).await;
    let mut actions: Vec<String> = cells(&resp)
        .iter()
        .map(|c| c["action"].as_str().unwrap().to_owned())
        .collect();
    actions.sort();
    assert_eq!(actions, ["opened", "opened"], "{resp}");
    assert_eq!(bed.pulls().len(), 2);
}

/// End to end: after a sync-all over a fleet with a cell in sync, one with its
/// pull request open, a refused one (a planted secret), two destroyed by a real `terraform
/// destroy` (one's cluster gone from moto's EKS, so decommissioned; one's still there) and a
/// fleet cell no state names, the fleet dashboard lists exactly the cells that
/// need attention, the cell in sync in its compact list, and never the secret; a second sync-all
/// with nothing changed writes nothing; a racing run's duplicate is closed; thousands of cells
/// needing attention stay within GitHub's 65,536 characters and are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_fleet_dashboard_after_a_sync_all_lists_every_cell_needing_attention() {
    const SECRET: &str = "D4shb0ard-pl4nted-Zx8q";
    leak::secret("state-sync dashboard: a secret planted in cell_metadata", SECRET);
    let bed = Bed::new("dashboard", false).await;
    let merge = |number: u64| {
        let (status, out) = bed
            .gh
            .call("PUT", &format!("/repos/{REPO}/pulls/{number}/merge"), Some(&json!({})));
        assert_eq!(status, 200, "{out}");
    };
    // One destroyed stack's cluster still runs in moto's EKS; the other's was never there.
    let conf = moto::sdk_config().await;
    moto::create_cluster(&conf, "eu-dash-kept", &[]).await;
    // In sync: proposed and merged. Destroyed: merged, then `terraform destroy`.
    for cell in ["eu-in-sync", "eu-dash-gone", "eu-dash-kept"] {
        bed.apply(cell, &base_data(cell, "vpc-1"), false).await;
        let c = only_cell(&bed.invoke(json!({"action": "sync", "cell": cell})).await);
        merge(c["pull_request"]["number"].as_u64().unwrap());
    }
    bed.destroy("eu-dash-gone").await;
    bed.destroy("eu-dash-kept").await;
    // Pending: a new cell whose pull request is open.
    bed.apply("eu-pending", &base_data("eu-pending", "vpc-1"), false).await;
    // Refused: a value that looks like a credential.
    let mut secret = base_data("eu-refused", "vpc-1");
    secret.push(("db_password".into(), SECRET.into()));
    bed.apply("eu-refused", &secret, false).await;
    let _ = bed.receive().await;

    let resp = bed.invoke(json!({"action": "sync-all"})).await;
    let d = &resp["dashboard"];
    assert_eq!(d["action"], "created", "{resp}");
    assert!(!resp.to_string().contains(SECRET), "{resp}");
    let issues: Vec<Value> = bed
        .gh
        .issues(REPO)
        .into_iter()
        .filter(|i| {
            i["labels"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l == "cellbridge-dashboard")
        })
        .collect();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(d["issue"]["number"], issues[0]["number"]);
    let body = issues[0]["body"].as_str().unwrap().to_owned();
    assert!(!body.contains(SECRET), "a value reached the dashboard:\n{body}");
    let rows: BTreeMap<String, (String, String)> = body
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cols: Vec<&str> = l.split(" | ").collect();
            (
                cols[0].trim_start_matches("| `").trim_end_matches('`').to_owned(),
                (cols[1].to_owned(), cols[2].to_owned()),
            )
        })
        .collect();
    assert_eq!(
        rows.iter()
            .map(|(c, (what, _))| (c.as_str(), what.as_str()))
            .collect::<Vec<_>>(),
        [
            ("eu-dash-gone", "destroyed"),
            ("eu-dash-kept", "destroyed"),
            ("eu-pending", "pending"),
            ("eu-refused", "refused"),
            ("prod-eu-west-1", "state missing"),
        ],
        "exactly the cells needing attention:\n{body}"
    );
    let pull = bed
        .pulls()
        .into_iter()
        .find(|p| p["head"]["ref"] == "cellbridge/eu-pending" && p["state"] == "open")
        .expect("the sync-all opened the pending cell's pull request");
    assert!(
        rows["eu-pending"].1.starts_with(&format!(
            "new cell (12 keys); pull request #{} opened today; strict check passes",
            pull["number"]
        )),
        "{body}"
    );
    assert!(rows["eu-refused"].1.contains("`db_password`"), "{body}");
    // Its cluster gone, the sync-all proposed the cell's decommission; the other's runs.
    let decommission = bed
        .pulls()
        .into_iter()
        .find(|p| {
            p["head"]["ref"] == "cellbridge/eu-dash-gone"
                && p["state"] == "open"
                && p["labels"].as_array().unwrap().iter().any(|l| l == "decommission")
        })
        .expect("the sync-all opened the decommission");
    assert!(
        rows["eu-dash-gone"].1.starts_with(&format!(
            "decommission pending (#{}, opened today)",
            decommission["number"]
        )),
        "{body}"
    );
    assert!(rows["eu-dash-kept"].1.contains("nothing is proposed"), "{body}");
    assert!(body.contains("\n**In sync** (1): `eu-in-sync`\n"), "{body}");

    // A second sync-all, nothing changed: nothing written, the dashboard included.
    bed.gh.clear_requests();
    let resp = bed.invoke(json!({"action": "sync-all"})).await;
    assert_eq!(resp["dashboard"]["action"], "unchanged", "{resp}");
    assert_eq!(bed.counts().2, 0, "writes: {}", bed.gh.requests());

    // A run that raced this one opened a second dashboard: closed as a duplicate of the first.
    let (status, dup) = bed.gh.call(
        "POST",
        &format!("/repos/{REPO}/issues"),
        Some(&json!({"title": issues[0]["title"], "body": body, "labels": ["cellbridge-dashboard"]})),
    );
    assert_eq!(status, 201, "{dup}");
    let resp = bed.invoke(json!({"action": "dashboard"})).await;
    assert_eq!(resp["dashboard"]["closed_duplicates"], json!([dup["number"]]), "{resp}");
    let closed = bed
        .gh
        .issues(REPO)
        .into_iter()
        .find(|i| i["number"] == dup["number"])
        .unwrap();
    assert_eq!(
        (&closed["state"], &closed["state_reason"]),
        (&json!("closed"), &json!("duplicate"))
    );

    // Thousands of cells needing attention: within the limit, what does not fit counted.
    // The refused cell's state as Terraform wrote it, once per cell.
    let obj = bed
        .s3
        .get_object()
        .bucket(&bed.bucket)
        .key(Bed::key("eu-refused"))
        .send()
        .await
        .unwrap();
    let template = String::from_utf8(obj.body.collect().await.unwrap().into_bytes().to_vec()).unwrap();
    // Not this part's subject, and moto is slow to notify 2,000 times.
    bed.s3
        .put_bucket_notification_configuration()
        .bucket(&bed.bucket)
        .notification_configuration(aws_sdk_s3::types::NotificationConfiguration::builder().build())
        .send()
        .await
        .unwrap();
    let many = 2000;
    use futures::StreamExt as _;
    futures::stream::iter((0..many).map(|i| {
        let cell = format!("eu-many-{i:04}");
        let text = template.replace("eu-refused", &cell);
        let (s3, bucket) = (bed.s3.clone(), bed.bucket.clone());
        async move {
            s3.put_object()
                .bucket(bucket)
                .key(Bed::key(&cell))
                .body(text.into_bytes().into())
                .send()
                .await
                .unwrap();
        }
    }))
    .buffer_unordered(16)
    .collect::<Vec<_>>()
    .await;
    let resp = bed.invoke_with(json!({"action": "dashboard"}), 120).await.unwrap();
    assert_eq!(resp["dashboard"]["action"], "updated", "{}", resp["dashboard"]);
    assert_eq!(
        resp["dashboard"]["summary"]["refused"],
        many + 1,
        "{}",
        resp["dashboard"]
    );
    let body = bed
        .gh
        .issues(REPO)
        .into_iter()
        .find(|i| i["number"] == issues[0]["number"])
        .unwrap()["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(body.chars().count() <= 65_536, "{}", body.chars().count());
    let shown = body.lines().filter(|l| l.starts_with("| `")).count();
    assert!(
        body.contains(&format!(
            "… and {} more cells needing attention not shown",
            many + 5 - shown
        )),
        "{}",
        &body[body.len() - 300..]
    );
    assert!(!body.contains(SECRET));
}

/// A real `terraform destroy` of a cell's stack leads through
/// moto (S3, its notification to SQS, EKS) and the fake GitHub to one decommission pull request
/// removing exactly `clusters/<cell>/`, but only once EKS no longer knows the cluster (its
/// DeleteCluster, as CloudTrail reports it through EventBridge, brings the cell back); a re-apply
/// closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroyed_stack_is_decommissioned_once_its_cluster_is_gone_and_a_reapply_closes_it() {
    let bed = Bed::new("decommission", false).await;
    let cell = "eu-dc1";
    let conf = moto::sdk_config().await;
    moto::create_cluster(&conf, cell, &[]).await;
    let eks = aws_sdk_eks::Client::new(&conf);

    // The cell, merged.
    bed.apply(cell, &base_data(cell, "vpc-111"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "opened", "{c}");
    let number = c["pull_request"]["number"].as_u64().unwrap();
    let (status, merged) = bed
        .gh
        .call("PUT", &format!("/repos/{REPO}/pulls/{number}/merge"), Some(&json!({})));
    assert_eq!(status, 200, "{merged}");
    let main_before: BTreeMap<String, Value> =
        serde_json::from_value(bed.gh.state(REPO)["files"]["main"].clone()).unwrap();
    let cell_dir: Vec<&String> = main_before
        .keys()
        .filter(|p| p.starts_with(&format!("clusters/{cell}/")))
        .collect();
    assert!(cell_dir.len() >= 6, "{cell_dir:?}");

    // `terraform destroy` while the cluster still runs (a state that looks destroyed is no proof).
    bed.destroy(cell).await;
    let destroyed_event = bed.receive().await;
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(destroyed_event.clone()).await);
    assert_eq!(c["action"], "destroyed", "{c}");
    assert_eq!(c["decommission"]["eks"]["presence"], "exists", "{c}");
    assert_eq!(bed.counts().2, 0, "nothing written while the cluster exists");
    assert!(bed.pulls().iter().all(|p| p["state"] != "open"));

    // The cluster is deleted: CloudTrail's DeleteCluster, through EventBridge and SQS.
    eks.delete_cluster().name(cell).send().await.unwrap();
    let sample =
        std::fs::read_to_string(process::repo_root().join("events/sqs-cloudtrail-delete-cluster.json")).unwrap();
    let event: Value = serde_json::from_str(&sample.replace("prod-eu-west-1", cell)).unwrap();
    let resp = bed.invoke(event).await;
    assert_eq!(resp["batchItemFailures"], json!([]), "{resp}");
    let c = only_cell(&resp);
    assert_eq!(c["action"], "decommission-opened", "{c}");
    assert_eq!(c["decommission"]["eks"]["presence"], "gone", "{c}");
    let state = bed.gh.state(REPO);
    let pr = state["pulls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["number"] == c["pull_request"]["number"])
        .unwrap()
        .clone();
    assert_eq!(pr["state"], "open");
    assert_eq!(pr["head"]["ref"], format!("cellbridge/{cell}"));
    let labels: Vec<&str> = pr["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        labels.contains(&"decommission") && labels.contains(&"cellbridge"),
        "{labels:?}"
    );
    assert_eq!(pr["commits"].as_array().unwrap().len(), 1, "{pr}");
    let branch: BTreeMap<String, Value> =
        serde_json::from_value(state["files"][format!("cellbridge/{cell}")].clone()).unwrap();
    let mut expected = main_before.clone();
    expected.retain(|p, _| !p.starts_with(&format!("clusters/{cell}/")));
    assert_eq!(branch, expected, "exactly clusters/{cell}/ is removed");
    let body = pr["body"].as_str().unwrap();
    assert!(
        body.contains("region `eu-west-1`") && body.contains("never merges it"),
        "{body}"
    );

    // The state event replayed: the same single pull request, nothing written.
    bed.gh.clear_requests();
    let c = only_cell(&bed.invoke(destroyed_event).await);
    assert_eq!(c["action"], "decommission-unchanged", "{c}");
    assert_eq!(bed.counts().2, 0);

    // A re-apply brings the cell back with the values main holds: the decommission is closed.
    bed.apply(cell, &base_data(cell, "vpc-111"), false).await;
    let c = only_cell(&bed.invoke(bed.receive().await).await);
    assert_eq!(c["action"], "closed", "{c}");
    let state = bed.gh.state(REPO);
    let pr = state["pulls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["number"] == c["pull_request"]["number"])
        .unwrap();
    assert_eq!(
        (pr["state"].as_str(), pr["merged"].as_bool()),
        (Some("closed"), Some(false)),
        "{pr}"
    );
    assert!(state["pulls"].as_array().unwrap().iter().all(|p| p["state"] != "open"));
    assert!(state["files"]["main"][format!("clusters/{cell}/cell-metadata.yaml")].is_string());
}
