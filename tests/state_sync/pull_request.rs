//! state-sync end to end: the cell's pull request from real Terraform states through moto S3 and its
//! events to the fake GitHub (github.com and GitHub Enterprise Server): new cell, update, no change
//! and revert; files `export-ignore` leaves out of the archive stay in a new cell's pull request; a key
//! added without a schema bump fails the status; a workspace's state (its key URL-encoded in the
//! notification) maps to its cell; on `examples/teams-fleet/`, the status and body computed from
//! GitHub's archive say what `check` says on a checkout.

use crate::support::*;
use cellbridge_tests::github::FakeGithub;
use cellbridge_tests::process;
use serde_json::{Value, json};

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
    // 10 API requests (docs/github.md's table: with the listing of refused issues and the base
    // tree's id), plus once per process: the default branch's name and, with a token, whether
    // main requires signed commits (its rules, then its classic protection).
    assert!(
        api <= 13 && total <= 14,
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
    let operations = &bed.gh.conformance()["operations"];
    assert_eq!(
        (&operations["graphql/cellReading"], &operations["git/get-commit"]),
        (&serde_json::json!(1), &serde_json::Value::Null),
        "the base tree is read from GitHub, once, in the cell's reading: {operations}"
    );
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
