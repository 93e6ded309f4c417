//! `cargo bench -p cellbridge-tests --bench github`: GitHub requests per sync and the latency
//! from the S3 event to the pull request, against moto and the fake GitHub, for a new cell
//! with its whole directory, a changed value, an unchanged replay and a revert to the base.
//! Each outcome's requests are held to its row of docs/github.md's table "GitHub requests per
//! outcome", read at run time: the bench prints the whole report, then exits 1 when any measured
//! outcome needs more API requests or writes than its row (`make bench` fails with it).

use std::io::Write;
use std::time::{Duration, Instant};

use cellbridge::adapters::github::GithubConfig;
use cellbridge::jobs::sync::{KeyPattern, SyncConfig};
use cellbridge_tests::fleetgen;
use cellbridge_tests::github::{FakeGithub, TOKEN};
use cellbridge_tests::moto;
use serde_json::{Value, json};

fn state(cell: &str, serial: u64, vpc: &str) -> String {
    json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": "bench-lineage",
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": {
            "cell_name": cell, "schema": "1", "cluster_name": cell, "aws_region": "eu-west-1", "vpc_id": vpc,
            "dns_zone": "example.internal", "external_dns_role_arn": "arn:aws:iam::123456789012:role/x",
            "karpenter_queue_name": "q", "karpenter_role_arn": "arn:aws:iam::123456789012:role/k",
            "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "podinfo_replicas": "2", "not_a_flux_variable": "x"}}},
        "resources": [], "check_results": null
    })
    .to_string()
}

/// Where the report goes: the process's stdout as it was. The handler writes its metric records
/// (CloudWatch's embedded format, one JSON line per outcome) on stdout, as Lambda's log wants
/// them; here they would bury the report, so fd 1 goes to /dev/null from now on.
#[allow(unsafe_code)]
fn report_out() -> std::fs::File {
    use std::os::fd::{AsRawFd, FromRawFd};
    std::io::stdout().flush().unwrap();
    let devnull = std::fs::OpenOptions::new().write(true).open("/dev/null").unwrap();
    // SAFETY: dup and dup2 on descriptors this process owns; the File owns the duplicate.
    unsafe {
        let saved = libc::dup(1);
        assert!(saved >= 0, "dup(1)");
        assert!(libc::dup2(devnull.as_raw_fd(), 1) == 1, "dup2");
        std::fs::File::from_raw_fd(saved)
    }
}

#[tokio::main]
async fn main() {
    let conf = moto::sdk_config().await;
    let s3 = moto::s3().await;
    let secrets = aws_sdk_secretsmanager::Client::new(&conf);
    let bucket = "bench-tfstate";
    moto::create_bucket(&s3, bucket).await;
    let gh = FakeGithub::start();
    gh.seed_example_fleet("acme/fleet");
    let _ = secrets
        .create_secret()
        .name("bench/github")
        .secret_string(json!({"token": TOKEN}).to_string())
        .send()
        .await;
    let config = SyncConfig {
        github: GithubConfig::checked(
            "acme".into(),
            "fleet".into(),
            Some("main".into()),
            "bench/github".into(),
            gh.url(),
        )
        .unwrap(),
        state_bucket: bucket.into(),
        key_pattern: KeyPattern::parse(cellbridge::jobs::sync::DEFAULT_KEY_PATTERN).unwrap(),
        flux_git_url: None,
        flux_git_branch: None,
    };
    let service = cellbridge::jobs::sync::service_for(config, &conf);
    let mut out = report_out();

    writeln!(out, "== GitHub requests per sync and event-to-pull-request latency ==").unwrap();
    // The budget is docs/github.md's table, read now: the bench fails when a measured outcome
    // needs more requests than its row says.
    let budget = fleetgen::documented_budget();
    match &budget {
        Ok(rows) => writeln!(
        out,
            "goal: docs/github.md's table \"GitHub requests per outcome\" ({}); `download` is the fleet archive the API redirects to codeload",
            ["opened", "updated", "unchanged", "in-sync"]
                .iter()
                .filter_map(|w| fleetgen::budget_row(rows, w).map(|r| (w, r)))
                .map(|(w, r)| format!(
                    "{w}: {} API, {} writes",
                    r.api.map_or("?".into(), |a| a.to_string()),
                    r.writes.map_or("?".into(), |a| a.to_string())
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ).unwrap(),
        Err(e) => writeln!(out, "goal: docs/github.md's table \"GitHub requests per outcome\", which cannot be read: {e}").unwrap(),
    }
    let rounds = 5;
    // Per step: the requests of the last round (every round makes the same) and each latency.
    let mut rows: Vec<(String, usize, usize, usize, Vec<f64>)> = Vec::new();
    for round in 0..rounds {
        let cell = format!("bench-c{round}");
        let key = format!("cells/{cell}/terraform.tfstate");
        let steps: [(&str, u64, &str); 4] = [
            ("new cell (whole directory)", 1, "vpc-1"),
            ("value changed", 2, "vpc-2"),
            ("replayed event, no change", 2, "vpc-2"),
            ("merged, then in sync", 3, "vpc-2"),
        ];
        for (step, (label, serial, vpc)) in steps.into_iter().enumerate() {
            if label.starts_with("merged") {
                let number = gh.state("acme/fleet")["pulls"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|p| p["state"] == "open" && p["head"]["ref"] == format!("cellbridge/{cell}"))
                    .unwrap()["number"]
                    .as_u64()
                    .unwrap();
                gh.call(
                    "PUT",
                    &format!("/repos/acme/fleet/pulls/{number}/merge"),
                    Some(&json!({})),
                );
                gh.call(
                    "DELETE",
                    &format!("/repos/acme/fleet/git/refs/heads/cellbridge/{cell}"),
                    None,
                );
            }
            if serial > 0 {
                s3.put_object()
                    .bucket(bucket)
                    .key(&key)
                    .body(state(&cell, serial, vpc).into_bytes().into())
                    .send()
                    .await
                    .unwrap();
            }
            let event = json!({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": bucket}, "object": {"key": key}}}]});
            gh.clear_requests();
            let t = Instant::now();
            let mut ctx = lambda_runtime::Context::default();
            ctx.deadline = (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                + Duration::from_secs(60))
            .as_millis() as u64;
            let resp = cellbridge_tests::lambda_handler(&service, lambda_runtime::LambdaEvent::new(event, ctx))
                .await
                .expect("sync");
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            let log = gh.requests();
            let reqs = log["requests"].as_array().unwrap();
            let download = reqs
                .iter()
                .filter(|r| r["path"].as_str().unwrap().starts_with("/_codeload/"))
                .count();
            let writes = reqs.iter().filter(|r| r["write"].as_bool().unwrap()).count();
            let action = resp["cells"][0]["action"].as_str().unwrap_or("?").to_owned();
            let row = (
                format!("{label} [{action}]"),
                reqs.len() - download,
                download,
                writes,
                Vec::new(),
            );
            if round == 0 {
                rows.push(row);
            } else {
                let r = &mut rows[step];
                (r.0, r.1, r.2, r.3) = (row.0, row.1, row.2, row.3);
            }
            rows[step].4.push(ms);
            let _: &Value = &resp;
        }
    }
    writeln!(
        out,
        "{:<40} {:>5} {:>9} {:>7} {:>18}  budget (docs/github.md's table)",
        "sync", "API", "download", "writes", "median latency ms"
    )
    .unwrap();
    let mut failed = Vec::new();
    for (label, api, download, writes, mut ms) in rows {
        ms.sort_by(f64::total_cmp);
        let action = label.rsplit_once('[').map_or("?", |(_, a)| a.trim_end_matches(']'));
        let check = match &budget {
            Ok(rows) => {
                let (verdict, text) = fleetgen::check_budget(rows, action, api, writes);
                if verdict != "OK" {
                    failed.push(format!("{label}: {verdict} ({text})"));
                }
                format!("{verdict} ({text})")
            }
            Err(e) => {
                failed.push(format!("{label}: not checked ({e})"));
                "NOT CHECKED".into()
            }
        };
        writeln!(
            out,
            "{label:<40} {api:>5} {download:>9} {writes:>7} {:>18.1}  {check}",
            ms[ms.len() / 2]
        )
        .unwrap();
    }
    writeln!(
        out,
        "(median of {rounds} cells; the first sync of the process also reads the GitHub secret)"
    )
    .unwrap();
    if !failed.is_empty() {
        writeln!(
            out,
            "BUDGET CHECK FAILED: {} outcome(s) not within docs/github.md's table \"GitHub requests per outcome\":",
            failed.len()
        )
        .unwrap();
        for f in &failed {
            writeln!(out, "  {f}").unwrap();
        }
        // The fake's own check (every request conformed to GitHub's description) runs first.
        drop(service);
        drop(gh);
        std::process::exit(1);
    }
}
