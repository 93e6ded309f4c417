//! One fleet repository, two views of it: the checkout the command line reads
//! (`LocalFleet`) and the GitHub archive of the same commit the Lambda functions read
//! (`read_archive` → `MemFleet`). Both must show what Flux's source artifact holds (no
//! symlinks; see `cellbridge::pure::fleet`), so `check` and `plan` say the same through either, and
//! a new cell copies the template's executable bit and symlinks.
//!
//! The archive is made by `git archive --format=tar.gz` of the commit, which is what GitHub
//! serves: a pax global header whose `comment` is the commit id, entries under one
//! `owner-repo-<short sha>/` directory, files 0664 or 0775, symlinks as symlink entries.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cellbridge::doubles::github::MemGithub;
use cellbridge::pure::check;
use cellbridge::pure::configmap;
use cellbridge::pure::fleet::{FileMode, FleetError, FleetRead, Keep, LocalFleet, MemFleet};
use cellbridge::pure::metadata::CellMetadata;
use cellbridge::pure::plan::{self, FileChange, PlanOptions, StateRef};
use cellbridge::pure::template::{SyncSource, render_gotk_sync};
use cellbridge::rules::proposal::{self, Proposal, Proposed};
use cellbridge::{
    adapters::github::ArchiveError, adapters::github::read_archive, adapters::github::read_archive_from,
    ports::github::GitData as _, ports::github::Published,
};

const CELL: &str = "prod-eu";

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=views", "-c", "user.email=views@example.com"])
        .args(["-c", "core.symlinks=true", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn git_text(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(git(dir, args)).unwrap().trim().to_owned()
}

fn has_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn meta(cell: &str, serial: u64, vpc: &str) -> CellMetadata {
    let data: BTreeMap<String, String> = [
        ("cell_name", cell),
        ("cluster_name", "prod"),
        ("vpc_id", vpc),
        ("schema", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    CellMetadata {
        cell: cell.into(),
        schema: 1,
        data,
        serial,
        lineage: "0e0e0e0e-0000-4000-8000-000000000001".into(),
        terraform_version: "1.11.4".into(),
    }
}

const LAYERS: &str = "---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  path: ./apps/prod
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substituteFrom:
      - kind: ConfigMap
        name: cell-metadata
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: infra
  namespace: flux-system
spec:
  path: ./infrastructure
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substituteFrom:
      - kind: ConfigMap
        name: cell-metadata
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: plain
  namespace: flux-system
spec:
  path: ./plain
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substituteFrom:
      - kind: ConfigMap
        name: cell-metadata
";

/// Writes the fleet into `dir` and commits it; the commit's id.
fn make_fleet(dir: &Path) -> String {
    let src = SyncSource {
        url: "ssh://git@github.com/acme/fleet".into(),
        branch: "main".into(),
    };
    let cell_kustomization = "resources:\n  - cell-metadata.yaml\n  - layers.yaml\n  - flux-system\n";
    let flux_kustomization = "resources:\n  - gotk-components.yaml\n  - gotk-sync.yaml\n";
    let files: Vec<(String, FileMode, String)> = [
        (
            "clusters/_template/kustomization.yaml",
            FileMode::Regular,
            cell_kustomization.to_owned(),
        ),
        ("clusters/_template/layers.yaml", FileMode::Regular, LAYERS.to_owned()),
        (
            "clusters/_template/flux-system/kustomization.yaml",
            FileMode::Regular,
            flux_kustomization.to_owned(),
        ),
        (
            "clusters/_template/flux-system/gotk-components.yaml",
            FileMode::Regular,
            "# components\n".to_owned(),
        ),
        (
            "clusters/_template/flux-system/gotk-sync.yaml",
            FileMode::Regular,
            render_gotk_sync("_template", &src),
        ),
        (
            "clusters/_template/scripts/bootstrap.sh",
            FileMode::Executable,
            "#!/bin/sh\necho \"${cluster_name}\"\n".to_owned(),
        ),
        (
            "clusters/_template/README.md",
            FileMode::Symlink,
            "../../docs/cell.md".to_owned(),
        ),
        ("docs/cell.md", FileMode::Regular, "# A cell\n".to_owned()),
        (
            &format!("clusters/{CELL}/kustomization.yaml"),
            FileMode::Regular,
            cell_kustomization.to_owned(),
        ),
        (
            &format!("clusters/{CELL}/layers.yaml"),
            FileMode::Regular,
            LAYERS.to_owned(),
        ),
        (
            &format!("clusters/{CELL}/flux-system/kustomization.yaml"),
            FileMode::Regular,
            flux_kustomization.to_owned(),
        ),
        (
            &format!("clusters/{CELL}/flux-system/gotk-components.yaml"),
            FileMode::Regular,
            "# components\n".to_owned(),
        ),
        (
            &format!("clusters/{CELL}/flux-system/gotk-sync.yaml"),
            FileMode::Regular,
            render_gotk_sync(CELL, &src),
        ),
        (
            &format!("clusters/{CELL}/cell-metadata.yaml"),
            FileMode::Regular,
            configmap::render(&meta(CELL, 3, "vpc-1")),
        ),
        (
            "apps/base/kustomization.yaml",
            FileMode::Regular,
            "resources:\n  - deploy.yaml\n".to_owned(),
        ),
        (
            "apps/base/deploy.yaml",
            FileMode::Regular,
            "kind: Deployment\nmetadata:\n  name: ${cluster_name}\n".to_owned(),
        ),
        // The overlay every cell shares, through a link: Flux never sees it.
        ("apps/prod", FileMode::Symlink, "base".to_owned()),
        (
            "infrastructure/kustomization.yaml",
            FileMode::Regular,
            "resources:\n  - ns.yaml\n  - shared.yaml\npatches:\n  - path: patch.yaml\n".to_owned(),
        ),
        (
            "infrastructure/ns.yaml",
            FileMode::Regular,
            "kind: Namespace\nmetadata:\n  name: ${vpc_id}\n".to_owned(),
        ),
        (
            "infrastructure/shared.yaml",
            FileMode::Symlink,
            "../common/shared.yaml".to_owned(),
        ),
        (
            "infrastructure/patch.yaml",
            FileMode::Symlink,
            "../common/patch.yaml".to_owned(),
        ),
        (
            "common/shared.yaml",
            FileMode::Regular,
            "kind: S\nmetadata:\n  name: ${unset_in_common}\n".to_owned(),
        ),
        (
            "common/patch.yaml",
            FileMode::Regular,
            "kind: P\nmetadata:\n  name: ${also_unset}\n".to_owned(),
        ),
        (
            "plain/a.yaml",
            FileMode::Regular,
            "kind: A\nmetadata:\n  name: ${cell_name}\n".to_owned(),
        ),
        ("plain/b.yaml", FileMode::Symlink, "../common/shared.yaml".to_owned()),
    ]
    .into_iter()
    .map(|(p, m, c)| (p.to_owned(), m, c))
    .collect();
    for (p, mode, content) in &files {
        let f = cellbridge::pure::fleet::FileWrite {
            path: p.clone(),
            mode: *mode,
            content: content.to_string(),
        };
        f.write_at(&dir.join(p)).unwrap();
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "fleet"]);
    git_text(dir, &["rev-parse", "HEAD"])
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[tokio::test]
async fn the_checkout_and_the_github_archive_agree_and_new_cells_keep_modes() {
    if !has_git() {
        eprintln!("skipped: no `git` binary to commit the fleet and archive it");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let head = make_fleet(dir.path());
    let tarball = git(
        dir.path(),
        &[
            "archive",
            "--format=tar.gz",
            &format!("--prefix=acme-fleet-{}/", &head[..7]),
            &head,
        ],
    );
    let archive = read_archive(&tarball).unwrap();
    assert_eq!(archive.sha, head);
    // Read keeping no cell: the cell's directory is read past, known to be there but never
    // mistaken for empty; the shared part is kept whole.
    let shared = read_archive_from(&tarball[..], &Keep::default(), u64::MAX).unwrap();
    assert!(shared.kept_bytes < archive.kept_bytes);
    let cells = shared.fleet.list("clusters").unwrap().unwrap();
    assert!(cells.iter().any(|e| e.name == CELL), "{cells:?}");
    let inside = format!("clusters/{CELL}/kustomization.yaml");
    match shared.fleet.read(&inside) {
        Err(FleetError::NotKept { path, dir }) => {
            assert_eq!(
                (path.as_str(), dir.as_str()),
                (inside.as_str(), format!("clusters/{CELL}").as_str())
            )
        }
        other => panic!("a read-past file must not read as absent: {other:?}"),
    }
    assert_eq!(shared.fleet.not_kept(), vec![CELL.to_owned()]);
    assert_eq!(
        shared.fleet.read("clusters/_template/kustomization.yaml").unwrap(),
        archive.fleet.read("clusters/_template/kustomization.yaml").unwrap()
    );
    // Over the memory limit: refused, naming the limit, before holding more.
    let err = read_archive_from(&tarball[..], &Keep::all(), archive.kept_bytes - 1).unwrap_err();
    assert!(matches!(err, ArchiveError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("CELLBRIDGE_FLEET_MEMORY_MB"), "{err}");
    let local = LocalFleet::open(dir.path()).unwrap();
    let views: [(&str, &dyn FleetRead); 2] = [("checkout", &local), ("archive", &archive.fleet)];

    // The check: the same report through both, and it says why the links fail in Flux.
    let reports: Vec<_> = views
        .iter()
        .map(|(name, f)| check::check_fleet(*f, None).unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect();
    assert_eq!(reports[0], reports[1]);
    let r = &reports[0][0];
    assert_eq!(r.cell, CELL);
    let found: Vec<String> = r
        .findings
        .iter()
        .map(|f| format!("{}:{} [{}] {}", f.file, f.line, f.layer, f.message))
        .collect();
    let symlinked = |needle: &str| {
        assert!(
            found
                .iter()
                .any(|f| f.contains(needle) && f.contains("Flux leaves symlinks out of its source artifact")),
            "{needle} in {found:#?}"
        )
    };
    symlinked(&format!(
        "clusters/{CELL}/layers.yaml:8 [apps] spec.path `apps/prod` is a symlink (→ base)"
    ));
    symlinked("infrastructure/kustomization.yaml:3 [infra] kustomize build fails: `shared.yaml` is a symlink");
    symlinked("infrastructure/kustomization.yaml:5 [infra] kustomize build fails: `patch.yaml` is a symlink");
    // What is behind a link is never read: its unset variables are no findings.
    assert!(
        !found
            .iter()
            .any(|f| f.contains("unset_in_common") || f.contains("also_unset")),
        "{found:#?}"
    );
    assert!(
        r.not_checked
            .iter()
            .any(|n| n.starts_with("`plain/b.yaml` is a symlink")),
        "{:?}",
        r.not_checked
    );

    // The plans: a change to the existing cell, and a new cell from the template.
    for m in [meta(CELL, 4, "vpc-2"), meta("c2", 1, "vpc-9")] {
        let plans: Vec<_> = views
            .iter()
            .map(|(_, f)| plan::plan(&m, StateRef::default(), *f, &PlanOptions::default()).unwrap())
            .collect();
        assert_eq!(plans[0], plans[1], "cell {}", m.cell);
    }
    let new_cell = plan::plan(
        &meta("c2", 1, "vpc-9"),
        StateRef::default(),
        &local,
        &PlanOptions::default(),
    )
    .unwrap();
    let file = |p: &str| -> &FileChange { new_cell.files.iter().find(|f| f.path == p).unwrap() };
    assert_eq!(file("clusters/c2/scripts/bootstrap.sh").mode, FileMode::Executable);
    assert_eq!(file("clusters/c2/README.md").mode, FileMode::Symlink);
    assert_eq!(file("clusters/c2/README.md").new, "../../docs/cell.md");
    assert_eq!(file("clusters/c2/layers.yaml").mode, FileMode::Regular);
    assert!(
        new_cell
            .unified_diff()
            .contains("new file mode 100755\n--- /dev/null\n+++ b/clusters/c2/scripts/bootstrap.sh")
    );
    assert!(
        new_cell
            .body
            .contains("`clusters/c2/scripts/bootstrap.sh` (executable)"),
        "{}",
        new_cell.body
    );
    // The new cell's layers are checked as Flux would build them: the links fail there too.
    assert!(
        new_cell
            .check
            .findings
            .iter()
            .any(|f| f.message.contains("spec.path `apps/prod` is a symlink"))
    );

    // Published through GitHub's primitives: the tree keeps 100755 and 120000.
    let gh = MemGithub::from_fleet("main", &archive.fleet);
    let snap = gh.read_base(&Keep::all(), deadline()).await.unwrap();
    let p = plan::plan(
        &meta("c2", 1, "vpc-9"),
        StateRef::default(),
        &snap.fleet,
        &PlanOptions::default(),
    )
    .unwrap();
    assert_eq!(p, new_cell);
    let published = proposal::converge(&gh, &snap, Proposal::Values(&p), &Default::default(), deadline())
        .await
        .unwrap();
    assert!(
        matches!(&published, Proposed::Values(c) if matches!(c.published, Published::Opened { .. })),
        "{published:?}"
    );
    let modes = gh.modes(&p.branch);
    assert_eq!(modes["clusters/c2/scripts/bootstrap.sh"], FileMode::Executable);
    assert_eq!(modes["clusters/c2/README.md"], FileMode::Symlink);
    assert_eq!(modes["clusters/c2/cell-metadata.yaml"], FileMode::Regular);
    assert_eq!(modes["apps/prod"], FileMode::Symlink, "the base keeps its links");
    assert_eq!(gh.files(&p.branch)["clusters/c2/README.md"], "../../docs/cell.md");
    // And what the branch holds reads back as it was written.
    let on_branch: MemFleet = gh
        .files(&p.branch)
        .into_iter()
        .map(|(path, text)| {
            let mode = modes[&path];
            (path, mode, text.into_bytes())
        })
        .collect();
    assert_eq!(
        on_branch.mode("clusters/c2/scripts/bootstrap.sh").unwrap(),
        Some(FileMode::Executable)
    );
}
