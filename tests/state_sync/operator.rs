//! state-sync end to end on a fleet whose Flux the Flux Operator runs
//! (`tests/fixtures/operator-fleet/`: a `FluxInstance` in `clusters/_template/flux-system/`, no
//! gotk-components.yaml or gotk-sync.yaml): a new cell's pull request holds the template's
//! FluxInstance with only `spec.sync.path` written for the cell, and no gotk-sync.yaml of its own.

use crate::support::*;
use cellbridge_tests::process;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_cell_from_a_flux_instance_template_gets_the_instance_spliced_and_no_gotk_sync() {
    let bed = Bed::new("operator", false).await;
    let fleet = process::repo_root().join("tests/fixtures/operator-fleet");
    bed.gh.seed_dir(REPO, &fleet);
    let cell = "prod-us-east-2";
    let data: Vec<(String, String)> = [
        ("cell_name", cell),
        ("schema", "1"),
        ("aws_region", "us-east-2"),
        ("cluster_name", cell),
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
    let template = std::fs::read_to_string(fleet.join("clusters/_template/flux-system/flux-instance.yaml")).unwrap();
    assert_eq!(
        files[&format!("clusters/{cell}/flux-system/flux-instance.yaml")],
        template.replace("path: \"clusters/_template\"", &format!("path: \"clusters/{cell}\"")),
        "the template's FluxInstance, comments and quotes kept, but for spec.sync.path"
    );
    let cell_files: Vec<&String> = files
        .keys()
        .filter(|p| p.starts_with(&format!("clusters/{cell}/")))
        .collect();
    assert_eq!(
        cell_files,
        [
            &format!("clusters/{cell}/cell-metadata.yaml"),
            &format!("clusters/{cell}/flux-system/flux-instance.yaml"),
            &format!("clusters/{cell}/flux-system/kustomization.yaml"),
            &format!("clusters/{cell}/kustomization.yaml"),
            &format!("clusters/{cell}/layers.yaml"),
        ],
        "no gotk-sync.yaml competing with the FluxInstance"
    );

    // The strict check followed the cell's tree with its FluxInstance's release.
    let pulls = bed.pulls();
    let pr = pulls.iter().find(|p| p["head"]["ref"] == branch.as_str()).unwrap();
    let st = &pr["statuses"][0];
    assert_eq!(st["context"], "cellbridge/strict-substitution");
    assert_eq!(st["state"], "success", "{st}");
    let body = pr["body"].as_str().unwrap();
    assert!(
        body.contains(&format!(
            "Checked with the rules of kustomize-controller v1.8.5 (clusters/{cell}/flux-system/flux-instance.yaml, FluxInstance distribution 2.8.x)"
        )),
        "{body}"
    );
}
