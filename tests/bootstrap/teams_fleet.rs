//! cluster-bootstrap end to end on `examples/teams-fleet/`: a new cell's cluster gets the
//! template's GitHub-App sync objects and SOPS decryption unchanged but for the path; SSH or password
//! credentials for that GitRepository are refused before anything is applied; the merged cell gets
//! exactly its own `gotk-sync.yaml`.

use crate::support::*;
use cellbridge::{
    rules::bootstrap::Bootstrapper,
    rules::bootstrap::config::Settings,
    rules::bootstrap::{self},
};
use cellbridge_tests::leak;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

const NEW_CELL: &str = "payments-us-east-2";

const NEW_CELL_REGION: &str = "us-east-2";

/// The fake GitHub with `examples/teams-fleet` as `acme/teams-fleet`'s main, its trimmed
/// `gotk-components.yaml` (a Namespace only) replaced by Flux's full set from the fixtures, as a
/// team's fleet holds it: without Flux's CRDs no cluster takes a GitRepository.
fn teams_github() -> cellbridge_tests::github::FakeGithub {
    let gh = cellbridge_tests::github::FakeGithub::start();
    gh.seed_dir(TEAMS_REPO, &teams_fleet());
    let full =
        std::fs::read_to_string(fixture_fleet().join("clusters/_template/flux-system/gotk-components.yaml")).unwrap();
    let template = "clusters/_template/flux-system/gotk-components.yaml".to_owned();
    let merged = format!("clusters/{MERGED_CELL}/flux-system/gotk-components.yaml");
    gh.commit(
        TEAMS_REPO,
        "main",
        &[
            (template.as_str(), Some(full.as_str())),
            (merged.as_str(), Some(full.as_str())),
        ],
        "flux install --export",
    );
    gh
}

/// The fake's GitHub App as Flux's Git secret holds it (`flux create secret githubapp`'s keys).
fn flux_app_secret(gh: &cellbridge_tests::github::FakeGithub) -> Value {
    let app = gh.app();
    let key = app["private_key"]
        .as_str()
        .expect("the fake GitHub generates its App's key (needs Python's `cryptography`)");
    json!({
        "githubAppID": app["app_id"].to_string(),
        "githubAppInstallationID": app["installation_id"].to_string(),
        "githubAppPrivateKey": key,
    })
}

/// The cluster-bootstrap service as the Lambda builds it for the teams' fleet: cellbridge reads
/// `acme/teams-fleet` from the fake GitHub as the same GitHub App, and no Flux Git URL or branch
/// is configured (the template's own are used).
async fn teams_service(
    bed: &Bed,
    gh: &cellbridge_tests::github::FakeGithub,
) -> cellbridge::jobs::bootstrap::handler::BootstrapService {
    use cellbridge::adapters::github::GithubConfig;
    use cellbridge::jobs::bootstrap::handler::{BootstrapService, GithubSource};
    let app = gh.app();
    let secret = format!("{}-github", bed.cluster);
    aws_sdk_secretsmanager::Client::new(&bed.aws)
        .create_secret()
        .name(&secret)
        .secret_string(
            json!({"app_id": app["app_id"], "installation_id": app["installation_id"], "private_key": app["private_key"]})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let (owner, repo) = TEAMS_REPO.split_once('/').unwrap();
    let github = GithubConfig::checked(owner.into(), repo.into(), None, secret, gh.url()).unwrap();
    let settings = Settings {
        flux_git_url: None,
        ..settings(&bed.secret)
    };
    BootstrapService {
        bootstrapper: Bootstrapper::new(bed.aws.clone(), settings),
        fleets: GithubSource::new(github, &bed.aws).into(),
        rechecks: None,
    }
}

/// CloudTrail's `eks:CreateCluster` for `bed`'s cluster, in its region, through the handler.
async fn handle_create(
    bed: &Bed,
    service: &cellbridge::jobs::bootstrap::handler::BootstrapService,
) -> cellbridge::shell::lambda::Invocation {
    let mut event = create_cluster_event(&bed.cluster);
    event["region"] = json!(bed.region);
    event["detail"]["awsRegion"] = json!(bed.region);
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let inv = cellbridge_tests::handle(service, &event, deadline).await.unwrap();
    leak::capture(&format!("bootstrap of {}", bed.cluster), &inv.response.to_string());
    logs().clone().write_all(inv.response.to_string().as_bytes()).unwrap();
    inv
}

/// The documents of a fleet file on the fake GitHub's main.
fn documents_on_main(gh: &cellbridge_tests::github::FakeGithub, path: &str) -> Vec<(bootstrap::KubeRef, Value)> {
    let state = gh.state(TEAMS_REPO);
    let text = main_files(&state)[path]
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not on main"))
        .to_owned();
    cellbridge::pure::bootstrap::plan::parse_objects(&text, path).unwrap()
}

/// path → text of every file on main, from the fake's state.
fn main_files(state: &Value) -> &Value {
    &state["files"]["main"]
}

/// What an applied object holds of its manifest: identity, labels, annotations and spec (the
/// server adds its own metadata and a status).
fn as_manifest(o: &Value) -> Value {
    json!({
        "apiVersion": o["apiVersion"],
        "kind": o["kind"],
        "metadata": {
            "name": o["metadata"]["name"],
            "namespace": o["metadata"]["namespace"],
            "labels": o["metadata"]["labels"],
            "annotations": o["metadata"]["annotations"],
        },
        "spec": o["spec"],
    })
}

fn decoded(secret: &Value, key: &str) -> String {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(secret["data"][key].as_str().unwrap_or_else(|| panic!("no {key}")))
        .unwrap();
    String::from_utf8(raw).unwrap()
}

/// A new cluster for the cell whose pull request is still open: Flux gets the template's sync
/// objects (GitHub App provider, SOPS decryption) unchanged but for the cell's path, and the
/// GitHub App in its Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_cell_of_the_teams_fleet_gets_the_templates_github_app_sync_and_sops_decryption() {
    let gh = teams_github();
    let flux_secret = flux_app_secret(&gh);
    let bed = Bed::new_in(
        NEW_CELL_REGION,
        NEW_CELL,
        &[("cellbridge.dev/cell", NEW_CELL)],
        Some(flux_secret.clone()),
    )
    .await;
    let service = teams_service(&bed, &gh).await;
    // The cell's pull request is not merged: main has no clusters/payments-us-east-2/.
    let state = gh.state(TEAMS_REPO);
    let on_main: Vec<&String> = main_files(&state).as_object().unwrap().keys().collect();
    assert!(
        on_main
            .iter()
            .any(|p| p.starts_with(&format!("clusters/{MERGED_CELL}/")))
    );
    assert!(
        !on_main.iter().any(|p| p.starts_with(&format!("clusters/{NEW_CELL}/"))),
        "{on_main:?}"
    );

    let inv = handle_create(&bed, &service).await;
    let r = &inv.response;
    assert!(!inv.failed(), "{r}");
    assert_eq!(r["outcome"], "bootstrapped", "{r}");
    assert_eq!(r["cell"], NEW_CELL);
    assert_eq!(r["region"], NEW_CELL_REGION);
    assert_eq!(
        r["components_file"],
        "clusters/_template/flux-system/gotk-components.yaml"
    );
    assert_eq!(
        r["sync_file"],
        format!("clusters/_template/flux-system/gotk-sync.yaml (written for {NEW_CELL})")
    );
    assert_eq!(r["credentials"], "github_app");

    // The sync objects: the template's documents, the Kustomization's path aside.
    let template = documents_on_main(&gh, "clusters/_template/flux-system/gotk-sync.yaml");
    assert_eq!(template.len(), 2);
    let repo = flux_object(&bed.kube, "GitRepository");
    let ks = flux_object(&bed.kube, "Kustomization");
    assert_eq!(repo["spec"]["provider"], "github");
    assert_eq!(repo["spec"]["url"], "https://github.com/acme/teams-fleet.git");
    assert_eq!(repo["spec"]["ref"], json!({"branch": "main"}));
    assert_eq!(repo["spec"]["interval"], "1m0s");
    assert_eq!(repo["spec"]["secretRef"]["name"], "flux-system");
    assert_eq!(
        ks["spec"]["decryption"],
        json!({"provider": "sops", "secretRef": {"name": "sops-age"}})
    );
    assert_eq!(ks["spec"]["path"], format!("./clusters/{NEW_CELL}"));
    for (target, doc) in &template {
        let applied = flux_object(&bed.kube, &target.kind);
        let mut expected = as_manifest(doc);
        if target.kind == "Kustomization" {
            expected["spec"]["path"] = json!(format!("./clusters/{NEW_CELL}"));
        }
        assert_eq!(as_manifest(&applied), expected, "{}", target.kind);
    }

    // Flux's Secret holds the GitHub App, nothing else.
    let secret = flux_object(&bed.kube, "Secret");
    let keys: BTreeSet<&str> = secret["data"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["githubAppID", "githubAppInstallationID", "githubAppPrivateKey"])
    );
    for key in keys {
        assert_eq!(
            decoded(&secret, key).trim(),
            flux_secret[key].as_str().unwrap().trim(),
            "{key}"
        );
    }

    // GitHub was only read (the one POST is the App's installation token); access was given
    // back in the cluster's region.
    let writes: Vec<Value> = gh.requests()["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["write"] == true)
        .map(|q| json!([q["method"], q["path"]]))
        .collect();
    let token = format!(
        "/app/installations/{}/access_tokens",
        flux_secret["githubAppInstallationID"].as_str().unwrap()
    );
    assert_eq!(writes, [json!(["POST", token])]);
    let access = &r["access_entry"];
    assert_eq!(access["principal_arn"], ROLE);
    assert_eq!(access["removed"], true);
    assert_eq!(
        access_log(&bed.cluster),
        ["CreateAccessEntry", "AssociateAccessPolicy", "DeleteAccessEntry"]
    );
    assert!(access_entries_in(&bed.aws, &bed.region, &bed.cluster).await.is_empty());
    assert!(!r.to_string().contains("PRIVATE KEY"), "{r}");
}

/// The same new cell with SSH, then HTTPS, credentials in Flux's secret: the template's
/// GitRepository says `provider: github`, which Flux authenticates only with a GitHub App. The
/// run stops before it touches EKS access or the cluster, says what the secret needs, and
/// shows none of its values; with the App in the secret, the next run bootstraps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_teams_cell_with_ssh_or_password_credentials_is_refused_before_anything_is_applied() {
    use cellbridge::shell::error::Class;
    let gh = teams_github();
    // A second cluster of the cell (blue/green): found by its tag, as the first.
    let bed = Bed::new_in(
        NEW_CELL_REGION,
        &format!("{NEW_CELL}-blue"),
        &[("cellbridge.dev/cell", NEW_CELL)],
        None,
    )
    .await;
    let service = teams_service(&bed, &gh).await;
    let sm = aws_sdk_secretsmanager::Client::new(&bed.aws);
    let password = "gho-3f9c1e7a5d2b80461c";
    leak::secret("bootstrap: HTTPS password of the teams fleet", password);
    let private = key().0.clone();
    let key_body: Vec<&str> = private.lines().filter(|l| !l.starts_with("-----")).collect();

    for (what, held) in [
        ("SSH", None),
        ("HTTPS", Some(json!({"username": "git", "password": password}))),
    ] {
        if let Some(v) = held {
            sm.put_secret_value()
                .secret_id(&bed.secret)
                .secret_string(v.to_string())
                .send()
                .await
                .unwrap();
        }
        let inv = handle_create(&bed, &service).await;
        assert!(inv.failed(), "{what}: {}", inv.response);
        assert_eq!(
            inv.class,
            Some(Class::Final),
            "{what}: only a person changing the secret helps"
        );
        let msg = inv.response["error"].as_str().unwrap();
        for needed in [
            bed.secret.as_str(),
            "spec.provider: github",
            "GitHub App",
            "githubAppID",
            "githubAppPrivateKey",
            "githubAppInstallationID",
        ] {
            assert!(msg.contains(needed), "{what}: {needed:?} not in: {msg}");
        }
        for value in key_body.iter().copied().chain([password]) {
            assert!(!msg.contains(value), "{what}: a secret value in: {msg}");
        }
        // Nothing reached the cluster, and no access entry was made.
        assert!(calls(&bed.kube).is_empty(), "{what}: {:?}", calls(&bed.kube));
        assert!(access_log(&bed.cluster).is_empty(), "{what}");
        assert!(access_entries_in(&bed.aws, &bed.region, &bed.cluster).await.is_empty());
    }
    let out = String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned();
    for value in key_body.iter().copied().chain([password]) {
        assert!(!out.contains(value), "secret material in the output");
    }

    // The secret fixed: the next run installs Flux.
    let app = flux_app_secret(&gh);
    sm.put_secret_value()
        .secret_id(&bed.secret)
        .secret_string(app.to_string())
        .send()
        .await
        .unwrap();
    let inv = handle_create(&bed, &service).await;
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(inv.response["outcome"], "bootstrapped");
    assert_eq!(inv.response["credentials"], "github_app");
    assert_eq!(
        flux_object(&bed.kube, "Kustomization")["spec"]["path"],
        format!("./clusters/{NEW_CELL}")
    );
    assert!(access_entries_in(&bed.aws, &bed.region, &bed.cluster).await.is_empty());
}

/// The merged cell: its own `gotk-sync.yaml` on main is applied exactly as it is, even after the
/// template has moved on (Flux applies that very file at its first reconciliation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merged_teams_cell_gets_exactly_its_own_gotk_sync_yaml() {
    let gh = teams_github();
    // The template changed since the cell was merged: that must not reach the cell.
    let template_path = "clusters/_template/flux-system/gotk-sync.yaml";
    let template = std::fs::read_to_string(teams_fleet().join(template_path)).unwrap();
    let moved_on = template.replace("interval: 1m0s", "interval: 5m0s");
    assert_ne!(moved_on, template);
    gh.commit(
        TEAMS_REPO,
        "main",
        &[(template_path, Some(moved_on.as_str()))],
        "template: poll every 5 minutes",
    );
    // No tag: clusters/payments-eu-west-1/cell-metadata.yaml names the cluster and its region.
    let bed = Bed::new(MERGED_CELL, &[], Some(flux_app_secret(&gh))).await;
    let service = teams_service(&bed, &gh).await;
    let inv = handle_create(&bed, &service).await;
    let r = &inv.response;
    assert!(!inv.failed(), "{r}");
    assert_eq!(r["outcome"], "bootstrapped", "{r}");
    assert_eq!(r["cell"], MERGED_CELL);
    let own = format!("clusters/{MERGED_CELL}/flux-system/gotk-sync.yaml");
    assert_eq!(
        r["components_file"],
        format!("clusters/{MERGED_CELL}/flux-system/gotk-components.yaml")
    );
    assert_eq!(r["sync_file"], own);
    assert_eq!(r["credentials"], "github_app");

    // Exactly the file's documents, in its order, and nothing else of theirs.
    let docs = documents_on_main(&gh, &own);
    let synced: Vec<Value> = r["objects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["phase"] == "sync")
        .map(|o| {
            let mut t = o.clone();
            t.as_object_mut().unwrap().remove("phase");
            t
        })
        .collect();
    let expected: Vec<Value> = docs.iter().map(|(t, _)| serde_json::to_value(t).unwrap()).collect();
    assert_eq!(synced, expected);
    for (target, doc) in &docs {
        assert_eq!(
            as_manifest(&flux_object(&bed.kube, &target.kind)),
            as_manifest(doc),
            "{}",
            target.kind
        );
    }
    assert_eq!(bed.kube.objects(Some("GitRepository")).len(), 1);
    assert_eq!(bed.kube.objects(Some("Kustomization")).len(), 1);
    let repo = flux_object(&bed.kube, "GitRepository");
    assert_eq!(repo["spec"]["interval"], "1m0s", "the cell's, not the template's");
    assert_eq!(repo["spec"]["provider"], "github");
    let ks = flux_object(&bed.kube, "Kustomization");
    assert_eq!(ks["spec"]["path"], format!("./clusters/{MERGED_CELL}"));
    assert_eq!(ks["spec"]["decryption"]["secretRef"]["name"], "sops-age");
    assert!(access_entries(&bed.aws, &bed.cluster).await.is_empty());
}
