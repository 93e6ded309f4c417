//! cluster-bootstrap: the Git secret and the sync objects. Git credentials are checked before the
//! cluster is touched, and against the GitRepository they serve; the template's sync objects reach
//! the cluster unchanged but for the path; a merged cell's own `gotk-sync.yaml` is applied as it is;
//! a cell found by its tag that the fleet read kept out is read again and its own files applied; the
//! branch Flux follows is the file's, else the base branch, never a guess.

use crate::support::bootstrap::*;
use cellbridge::doubles::cluster::{MemAws, MemCluster, MemKube, MemSource};
use cellbridge::doubles::secrets::MemSecrets;
use cellbridge::pure::fleet::MemFleet;
use cellbridge::shell::error::{Class, Classify};
use cellbridge::{
    rules::bootstrap::BootstrapError, rules::bootstrap::Bootstrapper, rules::bootstrap::config::Settings,
    rules::bootstrap::report::BootstrapOutcome,
};
use serde_json::{Value, json};

/// A team's template: Flux authenticates as a GitHub App (`provider: github`), decrypts SOPS
/// secrets, syncs on its own intervals, and keeps its comments and a further object.
const SYNC_GITHUB_APP: &str = r#"# Flux's own sync objects; cellbridge writes a copy for each new cell.
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 5m0s
  provider: github # GitHub App, see the flux-system Secret
  ref:
    branch: main
  secretRef:
    name: flux-system
  timeout: 90s
  url: https://github.com/acme/fleet.git
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  decryption:
    provider: sops
    secretRef:
      name: sops-age
  interval: 30m0s
  path: "./clusters/_template"
  prune: true
  retryInterval: 2m0s
  sourceRef:
    kind: GitRepository
    name: flux-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: fleet-settings
  namespace: flux-system
data:
  owner: platform-team
"#;

/// Made with `openssl genrsa -traditional 2048` (OpenSSL 3.0) for these tests only; it guards
/// nothing.
pub(crate) const GITHUB_APP_KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\n\
MIIEowIBAAKCAQEAySRD2pY9XsVnObK1tHKXcjip59+MP1gnAr76e8GRbkRuh505\n\
JKYVtHyqVneBGQRB3R5F5uxsqf/EJoo9Dc01JCXp77qwNcGgjY+i6QuOoc+HPLrO\n\
lj9H0IGsyM30VBpL9LQB3QB0pTuKzIOHWJUlzNLBZpCYJ8g8pEniOrDqgmuHmB5Y\n\
ifsAPDex/MMuRjCMcy6OHv8itEoGqwlyVOfczy81HmF+o5iY0aRkVSHVHi3u1/FM\n\
8dEA5MkyCKgKZntlIxJ0B3bHHdQ6juWtp5xiVtaA1zfATVKzB45SPW2e96BWs9PX\n\
QBv1l1aWaVBfIk4qH2SzamFBQvwUJUHja1LoIwIDAQABAoIBAGEnQhsHrHblNHnb\n\
Bwc0vk/ubKrSAGTsSFN8OXKjSYKQTS710w8PpbY67O+84z9ZHhMWtz7V/ZqTLoRL\n\
CzhqYPun0Hn5m3kroEggE9kquucPXUwJExXhVOeyaunHCPfCh+OXOrsrqCvTObSU\n\
5z/zMoHfXokS2FuGzTuxcDNXFr6NJITybwqwVy95kk0LcbQqEJkfITV2KTIc7yXs\n\
SB3mXvi0+Jn71T7rcvSCnPitJtjQ+WpCNQgkRLQZbQIgywL90j5Hc9pvz7ULLpG/\n\
I9KcPU0NFET6q7QmNCxt+H3fyc95DAgowoc2hXAJNKCj0EekXk07Rqju6VU2crVn\n\
EjQd9tkCgYEA5WTvP2HHam3Kr5Z7DixGJpjXGQ/DUb4Pz5LU5Tc4QdrJttOT8yic\n\
wLsIhSbgB31VRO6bWdboOPFHaHJ35TJgx9i1jVHnYeq56R/4eptjr5umZSe1L4Hn\n\
xXUM7qkGY/RWnMjxFa/GTxD8mex46+32r1EIcUhBlkSzcSfuUztJhq0CgYEA4Hh3\n\
oeLb3UxxP7YtWcpSx/kn8T3acwK+zXX5B3lC6AqIFGpCMU9rqJnFOc2rtXbLXdNG\n\
5aMabfhbtktTmTMou5WTg096bqFllKNwZK5L3ZMlKeDNSzbAakN32MOrrMoWpLo3\n\
/2P9+ubsbHr2OPDO9db6BixVTM8SjusZhD3IlA8CgYEAtmdcFnoZp3dGA/kUQGDU\n\
JzzBTRxLo2QODnAi+WC/Sx495zK2IlPY0SfnznjrCwmOFBHnVbidTyoMLfFXhNha\n\
PI8FTioiYqnSypyxaEzHJ4wM88JvQCd7tHcuoVelzTUs6d6eVTA/7/8B3SM7w96k\n\
mSNGI03hWSunxAKMb4JlJMECgYA5BkGWDbS/NnE6t0Q0IFMBXEmKXqVFPHhOZ974\n\
yBR4MFy7mvbv4fY+obnZ4mbxtZkaX9cN9W58a3CZEe/N5pI9fVU5MZKv0i6lIRQn\n\
b6P0STJSvjpJFkKxfCxRE/xj6/7uoCQjrDpUaB+9u0sb0gkxqQhhUxfkaGKVjiIw\n\
VyXCfwKBgDHAMlAdDxkozrr/5iUE9dOXCIT11MqlEyzRYv1Y8BV0GNnSHv//kH+C\n\
nZ1nFULsFlVeT6/jQy2m01FsuI/Wlk31A0vY70draty2cI3pzL4HvEvDhiK5Mkiw\n\
uprvSFGx/DdsZvx+9QaN2ggGST2To/m/JCw2dhZLaH3twxo8UrSn\n\
-----END RSA PRIVATE KEY-----";

#[tokio::test]
async fn git_credentials_are_checked_before_the_cluster_is_touched() {
    // Missing: final; Secrets Manager failing: retryable; malformed: final, naming the field.
    let bed = bed();
    bed.secrets().put(GIT_SECRET, json!({"username": "git"}).to_string());
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains(GIT_SECRET), "{err}");

    let bed = self::bed();
    bed.secrets().fail(1);
    assert_eq!(run(&bed, &fleet(&[])).await.unwrap_err().class(), Class::Retryable);

    let bed = Bootstrapper::with_ports(
        MemAws::new(FUNCTION_ROLE),
        MemKube::new(&MemAws::new(FUNCTION_ROLE)),
        MemSecrets::new(),
        settings(),
    );
    bed.accounts().add_cluster(MemCluster::active(CLUSTER, REGION));
    let err = run(&bed, &fleet(&[])).await.unwrap_err();
    assert_eq!(err.class(), Class::Final, "{err}");
    assert!(err.to_string().contains("ResourceNotFoundException"), "{err}");
    let calls = bed.accounts().calls();
    assert!(!calls.iter().any(|c| c.contains("AccessEntry")), "{calls:?}");
}

/// Every document of a sync object file, as applied.
fn documents(text: &str) -> Vec<Value> {
    cellbridge::pure::bootstrap::plan::parse_objects(text, "gotk-sync.yaml")
        .unwrap()
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

fn applied_object(bed: &Bed, kind: &str, name: &str) -> Value {
    bed.kube()
        .get(REGION, CLUSTER, kind, Some("flux-system"), name)
        .unwrap_or_else(|| panic!("{kind} {name} was not applied: {:?}", bed.kube().applied()))
}

fn with_template_sync(text: &str) -> MemFleet {
    let mut f = fleet(&[]);
    f.insert("clusters/_template/flux-system/gotk-sync.yaml", text);
    f
}

#[tokio::test]
async fn the_templates_sync_objects_reach_the_cluster_unchanged_but_for_the_path() {
    let bed = bed();
    bed.secrets().put(
        GIT_SECRET,
        json!({"githubAppID": "1234", "githubAppInstallationID": "5678", "githubAppPrivateKey": GITHUB_APP_KEY})
            .to_string(),
    );
    let report = run(&bed, &with_template_sync(SYNC_GITHUB_APP)).await.unwrap();
    assert_eq!(report.outcome, BootstrapOutcome::Bootstrapped);
    assert_eq!(
        report.sync_file.as_deref(),
        Some("clusters/_template/flux-system/gotk-sync.yaml (written for prod-eu-west-1)")
    );
    // Every document, in the file's order, after the Git secret.
    assert_eq!(
        bed.kube().applied()[4..],
        [
            "Secret flux-system/flux-system",
            "GitRepository flux-system/flux-system",
            "Kustomization flux-system/flux-system",
            "ConfigMap flux-system/fleet-settings",
        ]
    );
    let want = documents(SYNC_GITHUB_APP);
    let repo = applied_object(&bed, "GitRepository", "flux-system");
    assert_eq!(repo, want[0], "the GitRepository as the template has it");
    assert_eq!(repo["spec"]["provider"], "github");
    let ks = applied_object(&bed, "Kustomization", "flux-system");
    assert_eq!(ks["spec"]["path"], format!("./clusters/{CELL}"));
    assert_eq!(
        ks["spec"]["decryption"],
        json!({"provider": "sops", "secretRef": {"name": "sops-age"}})
    );
    let mut template_ks = want[1].clone();
    template_ks["spec"]["path"] = json!(format!("./clusters/{CELL}"));
    assert_eq!(
        ks, template_ks,
        "the Kustomization as the template has it but for the path"
    );
    assert_eq!(applied_object(&bed, "ConfigMap", "fleet-settings"), want[2]);
    assert_eq!(
        report.credentials,
        Some(cellbridge::rules::bootstrap::CredentialKind::GithubApp)
    );
}

#[tokio::test]
async fn the_git_secret_is_checked_against_the_gitrepository_it_serves() {
    // `provider: github` authenticates with a GitHub App only: a username and password would
    // leave Flux unable to pull while the bootstrap reported success.
    let bed = bed();
    let err = run(&bed, &with_template_sync(SYNC_GITHUB_APP)).await.unwrap_err();
    assert!(matches!(err, BootstrapError::GitSecret(_)), "{err}");
    assert_eq!(err.class(), Class::Final);
    assert!(err.to_string().contains("github"), "{err}");
    assert!(bed.kube().applied().is_empty());
    assert!(
        !bed.accounts()
            .calls()
            .iter()
            .any(|c| c.starts_with("CreateAccessEntry")),
        "the cluster was not touched"
    );

    // A GitRepository that reads its credentials from another Secret than the one written.
    let other = SYNC.replace(
        "  secretRef:\n    name: flux-system\n",
        "  secretRef:\n    name: github-app\n",
    );
    let err = run(&bed, &with_template_sync(&other)).await.unwrap_err();
    assert!(err.to_string().contains("Secret `github-app`"), "{err}");
    assert!(bed.kube().applied().is_empty());
}

#[tokio::test]
async fn a_merged_cells_own_gotk_sync_is_applied_as_it_is() {
    // The configured URL and branch are for files cellbridge writes; the cell's own file is what
    // Flux reconciles from then on, so it is what the bootstrap applies.
    let own = SYNC
        .replace("branch: main", "branch: cell-pinned")
        .replace("interval: 10m0s", "interval: 3m0s")
        .replace("./clusters/_template", "./clusters/prod-eu-west-1/overlay")
        + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: flux-system\n";
    let mut f = fleet(&[]);
    f.insert(format!("clusters/{CELL}/flux-system/gotk-sync.yaml"), own.as_str());
    let bed = bed_with(Settings {
        flux_git_url: Some("https://github.com/acme/other".into()),
        flux_git_branch: Some("override".into()),
        ..settings()
    });
    let report = run(&bed, &f).await.unwrap();
    assert_eq!(
        report.sync_file.as_deref(),
        Some("clusters/prod-eu-west-1/flux-system/gotk-sync.yaml")
    );
    let want = documents(&own);
    assert_eq!(applied_object(&bed, "GitRepository", "flux-system"), want[0]);
    assert_eq!(applied_object(&bed, "Kustomization", "flux-system"), want[1]);
    assert_eq!(applied_object(&bed, "ConfigMap", "extra"), want[2]);
}

#[tokio::test]
async fn a_cell_found_by_its_tag_that_the_fleet_read_kept_out_is_read_again_and_its_own_files_applied() {
    // The renamed cluster's tag names CELL, whose metadata names another cluster: the first read
    // (index, and the cell naming the cluster) keeps CELL's directory out.
    let own = SYNC.replace("./clusters/_template", "./clusters/prod-eu-west-1/overlay");
    let mut f = fleet(&[]);
    f.insert(format!("clusters/{CELL}/flux-system/gotk-sync.yaml"), own.as_str());
    f.insert("clusters/other/flux-system/gotk-components.yaml", COMPONENTS);
    let bed = bed();
    bed.accounts()
        .add_cluster(MemCluster::active("renamed", REGION).tag("cellbridge.dev/cell", CELL));
    // The fleet as GitHub's archive is read: what each read's keep keeps, the rest of each cell
    // read past (no cell found by its metadata in the same pass: the cluster here is found by
    // its tag).
    let source = MemSource::new(f).on_branch("main").as_archive();
    let svc = service(bed, source.clone());
    let inv = crate::support::handle(&svc, &created("renamed"), deadline())
        .await
        .unwrap();
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(inv.response["outcome"], "bootstrapped", "{}", inv.response);
    assert_eq!(inv.response["cell"], CELL, "{}", inv.response);
    let applied = svc
        .bootstrapper
        .kube()
        .get(REGION, "renamed", "Kustomization", Some("flux-system"), "flux-system");
    assert_eq!(
        applied,
        Some(documents(&own)[1].clone()),
        "the cell's own gotk-sync.yaml, not the template's"
    );
    let keeps = source.reads();
    assert_eq!(keeps.len(), 2, "read again once: {keeps:?}");
    assert!(keeps[0].index && !keeps[0].cells.contains(CELL), "{keeps:?}");
    assert!(
        keeps[1].cells.contains(CELL) && !keeps[1].cells.contains("other"),
        "{keeps:?}"
    );
}

#[tokio::test]
async fn the_branch_flux_follows_is_the_files_else_the_base_branch_never_a_guess() {
    let branch_of = |bed: &Bed| applied_object(bed, "GitRepository", "flux-system")["spec"]["ref"]["branch"].clone();
    let no_ref = SYNC.replace("  ref:\n    branch: main\n", "");

    // No branch in the template: the base branch the handler read the fleet from.
    let svc = service(bed(), MemSource::new(with_template_sync(&no_ref)).on_branch("trunk"));
    let inv = crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert!(!inv.failed(), "{}", inv.response);
    assert_eq!(branch_of(&svc.bootstrapper), "trunk");

    // The template's branch wins over the base branch.
    let svc = service(bed(), MemSource::new(with_template_sync(SYNC)).on_branch("trunk"));
    crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert_eq!(branch_of(&svc.bootstrapper), "main");

    // A configured branch wins over both.
    let configured = bed_with(Settings {
        flux_git_branch: Some("release".into()),
        ..settings()
    });
    let svc = service(configured, MemSource::new(with_template_sync(SYNC)).on_branch("trunk"));
    crate::support::handle(&svc, &created(CLUSTER), deadline())
        .await
        .unwrap();
    assert_eq!(branch_of(&svc.bootstrapper), "release");

    // No branch anywhere and the base branch unknown: refused before the cluster is touched,
    // never a guessed `main` (Flux itself would follow `master`).
    let bed = bed();
    let err = run(&bed, &with_template_sync(&no_ref)).await.unwrap_err();
    assert_eq!(err.class(), Class::Final);
    assert!(err.to_string().contains("CELLBRIDGE_FLUX_GIT_BRANCH"), "{err}");
    assert!(bed.kube().applied().is_empty());
    assert!(entries(&bed).is_empty());
}
