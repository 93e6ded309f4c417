//! Auto-merge, opted into in Git, over the in-memory GitHub: a value-only change
//! of an opted-in cell gets GitHub's auto-merge (or is merged with its head's sha when GitHub
//! refuses to wait), while a schema change, a new cell, a failing check, a person's push and a
//! cell not opted in never do; GitHub's protections always decide.

use std::collections::BTreeMap;

use cellbridge::adapters::github::operations as ops;
use cellbridge::doubles::github::{MemGithub, Protection, VIEWER};
use cellbridge::ports::github::{CheckState, MergeMethod};
use serde_json::{Value, json};

use crate::support::sync::{BUCKET, Bed, LINEAGE, apply, bed, branch, sync};

const CELL: &str = "eu-c1";
const OPT_IN: &str = ".cellbridge/auto-merge.yaml";
const STRICT: &str = "cellbridge/strict-substitution";
const CI: &str = "ci/build";
/// The fleet workflow's check (`examples/github-actions/cellbridge-check.yml`): what the docs
/// say a merge queue requires, as the Lambda's status is never posted on a merge group.
const FLEET: &str = "cellbridge fleet check";

fn metadata_path(cell: &str) -> String {
    format!("clusters/{cell}/cell-metadata.yaml")
}

/// A state whose metadata is the example fleet's, `vpc_id` = `vpc`, with `extra` keys and
/// `schema`.
fn put_state(bed: &Bed, cell: &str, serial: u64, vpc: &str, extra: &[(&str, &str)], schema: &str) {
    let mut meta = json!({
        "cell_name": cell, "schema": schema, "aws_region": "eu-west-1", "cluster_name": cell,
        "dns_zone": "example.internal",
        "external_dns_role_arn": "arn:aws:iam::123456789012:role/external-dns",
        "karpenter_queue_name": "karpenter-q",
        "karpenter_role_arn": "arn:aws:iam::123456789012:role/karpenter",
        "kms_key_id": "1234abcd-12ab-34cd-56ef-1234567890ab", "podinfo_replicas": "2",
        "vpc_id": vpc,
    });
    for (k, v) in extra {
        meta[*k] = json!(v);
    }
    let state = json!({
        "version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE,
        "outputs": {"cell_metadata": {"type": ["map", "string"], "value": meta}},
        "resources": [],
    });
    bed.states
        .put(BUCKET, &format!("cells/{cell}/terraform.tfstate"), state.to_string());
}

/// A fleet where `cell` exists on main (its first pull request merged), `.cellbridge/auto-merge.yaml`
/// holds `opt_in`, and the repository allows auto-merge.
async fn fleet_with(cell: &str, opt_in: Option<&str>) -> Bed {
    let bed = bed();
    apply(&bed, cell, 1, "vpc-1");
    assert_eq!(sync(&bed, cell).await["action"], "opened");
    let first = bed.fleet.pulls().last().unwrap().number;
    bed.fleet.merge(first);
    if let Some(yaml) = opt_in {
        bed.fleet.commit("main", &[(OPT_IN, yaml)], "opt cells in");
    }
    bed.fleet.allow_auto_merge(true);
    bed.fleet.clear_calls();
    bed
}

fn protect(gh: &MemGithub, contexts: &[&str], approvals: u32, strict: bool) {
    gh.protect_branch(
        "main",
        Some(Protection {
            contexts: contexts.iter().map(|c| c.to_string()).collect(),
            strict,
            approvals,
        }),
    );
}

/// The auto-merge requests sent (GraphQL's merge state and auto-merge mutations; a branch's
/// deletion, also GraphQL, is not one).
fn graphql_calls(gh: &MemGithub) -> Vec<&'static str> {
    gh.calls()
        .into_iter()
        // Every cell's one reading before it converges is GraphQL too; auto-merge's are the others.
        .filter(|c| {
            c.starts_with("graphql/")
                && !["graphql/updateRefs", "graphql/cellReading", "graphql/labelledIssues"].contains(c)
        })
        .collect()
}

fn open_pull(gh: &MemGithub, cell: &str) -> cellbridge::doubles::github::MemPull {
    gh.pulls()
        .into_iter()
        .rev()
        .find(|p| p.head == branch(cell))
        .expect("the cell's pull request")
}

fn done(r: &Value) -> &str {
    r["auto_merge"]["done"].as_str().unwrap_or("-")
}

#[tokio::test]
async fn an_opted_in_value_only_change_gets_githubs_auto_merge_and_merges_once_its_checks_pass() {
    let bed = fleet_with(CELL, Some("cells:\n  - eu-*\n")).await;
    protect(&bed.fleet, &[STRICT, CI], 0, true);
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(r["auto_merge"]["eligible"], true, "{r}");
    assert_eq!(r["auto_merge"]["opted_in_by"], "eu-*", "{r}");
    assert_eq!(done(&r), "enabled", "{r}");
    let pr = open_pull(&bed.fleet, CELL);
    assert_eq!(pr.auto_merge.as_ref().map(|a| a.enabled_by.as_str()), Some(VIEWER));
    assert!(
        pr.body
            .contains("**Auto-merge: eligible.** The cell is opted in by `eu-*`"),
        "{}",
        pr.body
    );
    assert!(pr.open && !pr.merged, "ci/build has not reported");

    // A replayed event writes nothing: auto-merge is on for this head already.
    let writes = bed.fleet.writes();
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), done(&r)),
        (Some("unchanged"), "already-enabled"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), writes, "{:?}", bed.fleet.calls());

    // The last required check passes: GitHub merges it, as whoever enabled auto-merge.
    let head = bed.fleet.head(&branch(CELL)).unwrap();
    bed.fleet.post_check(&head, CI, CheckState::Passed);
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.merged, "{pr:?}");
    assert_eq!(pr.merged_by.as_deref(), Some(VIEWER));
    assert!(bed.fleet.files("main")[&metadata_path(CELL)].contains("vpc-2"));
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "in-sync", "{r}");
}

#[tokio::test]
async fn without_protection_github_refuses_to_wait_and_cellbridge_merges_with_the_heads_sha() {
    let bed = fleet_with(CELL, Some("cells: [eu-c1]\nmerge_method: squash\n")).await;
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!((r["action"].as_str(), done(&r)), (Some("opened"), "merged"), "{r}");
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.merged && pr.merged_by.as_deref() == Some(VIEWER), "{pr:?}");
    // Squashed: one commit on main holding the new value, its only parent main's old head.
    let main = bed.fleet.head("main").unwrap();
    assert_eq!(bed.fleet.parents(&main).len(), 1);
    assert_eq!(bed.fleet.changed_paths(&main), [metadata_path(CELL)]);
    assert!(bed.fleet.calls().contains(&ops::PULLS_MERGE.id));
    assert!(
        !bed.fleet.calls().contains(&ops::GRAPHQL_ENABLE_AUTO_MERGE.id),
        "the merge state said CLEAN: nothing to wait for, no mutation sent"
    );
    // The body written before the merge says it was eligible.
    assert!(pr.body.contains("**Auto-merge: eligible.**"), "{}", pr.body);
}

#[tokio::test]
async fn a_required_check_still_pending_waits_for_the_next_event() {
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    // Protected by a required review only: mergeable once approved; the CI check is required
    // by nobody but the head's state is what the merge needs.
    protect(&bed.fleet, &[STRICT], 1, false);
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    // A reviewer approves: every requirement is met, GitHub's auto-merge merges it.
    let n = open_pull(&bed.fleet, CELL).number;
    bed.fleet.approve(n, "alice");
    assert!(open_pull(&bed.fleet, CELL).merged);
}

#[tokio::test]
async fn a_schema_change_a_new_cell_and_a_failing_check_are_never_enabled_and_the_body_says_why() {
    // A new cell, opted in by its pattern: never without a person, and no GitHub request for it.
    let bed = bed();
    bed.fleet
        .commit("main", &[(OPT_IN, "cells: ['*']\n")], "opt everyone in");
    bed.fleet.allow_auto_merge(true);
    apply(&bed, "eu-c9", 1, "vpc-1");
    let r = sync(&bed, "eu-c9").await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(r["auto_merge"]["eligible"], false, "{r}");
    let reasons = r["auto_merge"]["reasons"].to_string();
    assert!(reasons.contains("This is a new cell"), "{reasons}");
    assert!(graphql_calls(&bed.fleet).is_empty(), "{:?}", bed.fleet.calls());
    let pr = open_pull(&bed.fleet, "eu-c9");
    assert!(pr.body.contains("**Auto-merge: not eligible.**"), "{}", pr.body);
    assert!(pr.body.contains("This is a new cell"), "{}", pr.body);
    assert!(pr.auto_merge.is_none());

    // A key added (with its schema bump): a schema change needs a person.
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    put_state(&bed, CELL, 2, "vpc-1", &[("queue_url", "q-1")], "2");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(
        (r["auto_merge"]["eligible"].as_bool(), done(&r)),
        (Some(false), "nothing"),
        "{r}"
    );
    assert!(
        r["auto_merge"]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("The key set changes (added: `queue_url`"),
        "{r}"
    );
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.auto_merge.is_none() && pr.open);
    assert!(pr.body.contains("a schema change needs a person"), "{}", pr.body);
    assert!(!pr.body.contains("q-1\n- "), "values are never reasons");

    // A failing strict check (main's layer now needs a variable no state sets).
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    let deployment = bed.fleet.files("main")["apps/base/podinfo/deployment.yaml"]
        .replace("${podinfo_replicas}", "${podinfo_replica_count}");
    bed.fleet.commit(
        "main",
        &[("apps/base/podinfo/deployment.yaml", &deployment)],
        "a layer needs a new variable",
    );
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["auto_merge"]["eligible"], false, "{r}");
    assert!(
        r["auto_merge"]["reasons"]
            .to_string()
            .contains("strict substitution check failed"),
        "{r}"
    );
    assert!(!bed.fleet.calls().contains(&ops::GRAPHQL_ENABLE_AUTO_MERGE.id));
    assert!(open_pull(&bed.fleet, CELL).auto_merge.is_none());
}

#[tokio::test]
async fn a_cell_not_opted_in_costs_no_request_and_the_body_says_why() {
    let bed = fleet_with(CELL, Some("cells: [us-*]\n")).await;
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(
        r["auto_merge"]["reasons"][0],
        "Cell `eu-c1` is not opted in: no pattern of `.cellbridge/auto-merge.yaml` on the base branch matches it."
    );
    assert!(graphql_calls(&bed.fleet).is_empty(), "{:?}", bed.fleet.calls());
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.body.contains("Cell `eu-c1` is not opted in"), "{}", pr.body);

    // Replayed and updated, still no GraphQL request.
    sync(&bed, CELL).await;
    apply(&bed, CELL, 3, "vpc-3");
    assert_eq!(sync(&bed, CELL).await["action"], "updated");
    assert!(graphql_calls(&bed.fleet).is_empty(), "{:?}", bed.fleet.calls());

    // The file opts the cell in: the next event enables auto-merge on the head as it is.
    bed.fleet
        .commit("main", &[(OPT_IN, "cells: [us-*, eu-c1]\n")], "opt eu-c1 in");
    protect(&bed.fleet, &[STRICT, CI], 0, false);
    let r = sync(&bed, CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    assert!(open_pull(&bed.fleet, CELL).body.contains("opted in by `eu-c1`"));
}

#[tokio::test]
async fn a_reviewers_push_of_a_layer_change_disables_cellbridges_auto_merge_before_its_status() {
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    protect(&bed.fleet, &[STRICT, CI], 0, false);
    apply(&bed, CELL, 2, "vpc-2");
    assert_eq!(done(&sync(&bed, CELL).await), "enabled");
    let n = open_pull(&bed.fleet, CELL).number;

    let pushed = bed.fleet.commit(
        &branch(CELL),
        &[("clusters/eu-c1/extra-layer.yaml", "# a reviewer's layer\n")],
        "a reviewer adds a layer",
    );
    bed.fleet.post_check(&pushed, CI, CheckState::Passed);
    assert!(
        open_pull(&bed.fleet, CELL).open,
        "its strict-substitution status is missing"
    );
    bed.fleet.note("-- next event".into());
    let r = sync(&bed, CELL).await;
    assert_eq!((r["action"].as_str(), done(&r)), (Some("unchanged"), "disabled"), "{r}");
    assert!(
        r["auto_merge"]["reasons"]
            .to_string()
            .contains("clusters/eu-c1/extra-layer.yaml"),
        "{r}"
    );
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.open && pr.auto_merge.is_none(), "{pr:?}");
    assert!(
        pr.body.contains("turned off the auto-merge it had enabled"),
        "{}",
        pr.body
    );
    // The status that makes the head mergeable came after the auto-merge was off.
    let journal = bed.fleet.journal();
    let from = journal.iter().position(|l| l == "-- next event").unwrap();
    let disabled = journal[from..]
        .iter()
        .position(|l| *l == format!("#{n} auto-merge disabled by {VIEWER}"))
        .expect("disabled");
    let status = journal[from..]
        .iter()
        .position(|l| l == ops::REPOS_CREATE_COMMIT_STATUS.id)
        .expect("the new head's status");
    assert!(disabled < status, "{:?}", &journal[from..]);
    assert!(bed.fleet.statuses(&pushed).iter().all(|s| s.success));
    assert!(!open_pull(&bed.fleet, CELL).merged, "nothing merged it");

    // Replayed: nothing more to write.
    let writes = bed.fleet.writes();
    sync(&bed, CELL).await;
    assert_eq!(bed.fleet.writes(), writes, "{:?}", bed.fleet.calls());
}

#[tokio::test]
async fn a_person_who_enabled_auto_merge_on_an_ineligible_pull_request_keeps_it() {
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    protect(&bed.fleet, &[STRICT], 1, false);
    put_state(&bed, CELL, 2, "vpc-1", &[("queue_url", "q-1")], "2");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["auto_merge"]["eligible"], false, "{r}");
    let n = open_pull(&bed.fleet, CELL).number;
    assert_eq!(
        bed.fleet.enable_auto_merge_as(n, "alice").unwrap(),
        cellbridge::ports::github::AutoMergeAnswer::Enabled
    );
    // New values: a new head, checked again; alice's auto-merge stays.
    put_state(&bed, CELL, 3, "vpc-3", &[("queue_url", "q-1")], "2");
    let r = sync(&bed, CELL).await;
    assert_eq!((r["action"].as_str(), done(&r)), (Some("updated"), "left-alone"), "{r}");
    assert_eq!(r["auto_merge"]["detail"], "enabled by alice", "{r}");
    let pr = open_pull(&bed.fleet, CELL);
    assert_eq!(pr.auto_merge.as_ref().map(|a| a.enabled_by.as_str()), Some("alice"));
    assert!(pr.body.contains("turned on by `alice`"), "{}", pr.body);
    // Her reviewer approves: GitHub merges it, as her choice.
    bed.fleet.approve(n, "bob");
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.merged && pr.merged_by.as_deref() == Some("alice"), "{pr:?}");
}

#[tokio::test]
async fn a_repository_that_does_not_allow_auto_merge_is_said_and_the_sync_succeeds() {
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    bed.fleet.allow_auto_merge(false);
    protect(&bed.fleet, &[STRICT, CI], 0, false);
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!((r["action"].as_str(), done(&r)), (Some("opened"), "not-allowed"), "{r}");
    assert_eq!(r["retryable"], false);
    assert!(r.get("error").is_none(), "{r}");
    let pr = open_pull(&bed.fleet, CELL);
    assert!(pr.body.contains("**Allow auto-merge**"), "{}", pr.body);
    assert!(
        !bed.fleet.calls().contains(&ops::GRAPHQL_ENABLE_AUTO_MERGE.id),
        "the query told"
    );
    let writes = bed.fleet.writes();
    let r = sync(&bed, CELL).await;
    assert_eq!(
        (r["action"].as_str(), done(&r)),
        (Some("unchanged"), "not-allowed"),
        "{r}"
    );
    assert_eq!(bed.fleet.writes(), writes, "said once");

    // An administrator allows it: the next event enables it and drops the note.
    bed.fleet.allow_auto_merge(true);
    let r = sync(&bed, CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    assert!(!open_pull(&bed.fleet, CELL).body.contains("**Allow auto-merge**"));
}

#[tokio::test]
async fn a_broken_opt_in_file_never_blocks_the_sync_and_says_which_entry() {
    let bed = fleet_with(CELL, Some("cells:\n  - eu-c1\n  - Prod-*\n")).await;
    apply(&bed, CELL, 2, "vpc-2");
    let r = sync(&bed, CELL).await;
    assert_eq!(r["action"], "opened", "{r}");
    assert_eq!(r["auto_merge"]["eligible"], false, "{r}");
    let reason = r["auto_merge"]["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with(".cellbridge/auto-merge.yaml in the fleet repo: cells[1] \"Prod-*\""),
        "{reason}"
    );
    assert!(graphql_calls(&bed.fleet).is_empty(), "{:?}", bed.fleet.calls());
    let pr = open_pull(&bed.fleet, CELL);
    assert!(
        pr.body.contains("cells[1]") && pr.body.contains("auto-merge is off"),
        "{}",
        pr.body
    );
}

#[tokio::test]
async fn the_cell_taken_out_of_the_opt_in_file_loses_cellbridges_auto_merge() {
    let bed = fleet_with(CELL, Some("cells: ['*']\n")).await;
    protect(&bed.fleet, &[STRICT, CI], 0, false);
    apply(&bed, CELL, 2, "vpc-2");
    assert_eq!(done(&sync(&bed, CELL).await), "enabled");
    bed.fleet.commit("main", &[(OPT_IN, "cells: [us-*]\n")], "opt eu out");
    let r = sync(&bed, CELL).await;
    assert_eq!(done(&r), "disabled", "{r}");
    assert!(open_pull(&bed.fleet, CELL).auto_merge.is_none());
    // From then on the cell costs no GraphQL request.
    bed.fleet.clear_calls();
    sync(&bed, CELL).await;
    assert!(graphql_calls(&bed.fleet).is_empty(), "{:?}", bed.fleet.calls());
}

/// Reviewers pushing, checks arriving, approvals, main moving and events replayed, in many
/// seeded interleavings, a third of them with a merge queue required (its checks reporting
/// too, CI required in place of cellbridge's status): cellbridge never merges (nor enables GitHub's auto-merge into a merge of, nor queues)
/// anything but a value-only change of `clusters/<cell>/cell-metadata.yaml`, and nothing merges
/// with a protection unmet.
#[tokio::test]
async fn in_many_interleavings_nothing_ineligible_merges_and_nothing_bypasses_protection() {
    let (mut merged_by_cellbridge, mut refused_ineligible, mut merged_by_a_queue) = (0, 0, 0);
    for seed in 1..=60u64 {
        let mut dice = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut roll = move |sides: u64| {
            dice ^= dice << 13;
            dice ^= dice >> 7;
            dice ^= dice << 17;
            dice % sides
        };
        let bed = fleet_with(CELL, Some("cells: [eu-*]\n")).await;
        let strict = roll(2) == 0;
        let approvals = roll(2) as u32;
        let mut contexts: Vec<&str> = if roll(2) == 0 { vec![STRICT, CI] } else { vec![STRICT] };
        // Every third schedule, main requires a merge queue (chosen from the seed, not the dice,
        // so the other schedules stay as they were), and the fleet workflow's check instead of
        // the Lambda's status.
        let queue = seed % 3 == 0;
        if queue {
            contexts[0] = FLEET;
        }
        protect(&bed.fleet, &contexts, approvals, strict);
        bed.fleet.allow_auto_merge(roll(4) != 0);
        if queue {
            let method = [MergeMethod::Merge, MergeMethod::Squash, MergeMethod::Rebase][(seed / 3 % 3) as usize];
            bed.fleet.require_merge_queue("main", Some(method));
        }
        // The cell's first pull request merged before the branch was protected.
        let earlier = bed.fleet.merges().len();
        bed.fleet.jitter(seed);
        let mut serial = 2;
        let mut schema = 1;
        let mut extra: Vec<(String, String)> = Vec::new();
        for step in 0..14u64 {
            let open = bed
                .fleet
                .pulls()
                .into_iter()
                .rev()
                .find(|p| p.open && p.head == branch(CELL));
            let queued = open.as_ref().map(|p| p.number);
            match roll(9) {
                0 | 1 => {
                    serial += 1;
                    let e: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    put_state(
                        &bed,
                        CELL,
                        serial,
                        &format!("vpc-{seed}-{step}"),
                        &e,
                        &schema.to_string(),
                    );
                }
                2 => {
                    // A schema change: a key added with its bump.
                    serial += 1;
                    schema += 1;
                    extra.push((format!("key_{step}"), "v".into()));
                    let e: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    put_state(&bed, CELL, serial, "vpc-x", &e, &schema.to_string());
                }
                3 if open.is_some() => {
                    bed.fleet.commit(
                        &branch(CELL),
                        &[(&format!("clusters/{CELL}/review-{step}.yaml"), "# reviewer\n")],
                        "a reviewer",
                    );
                }
                4 => {
                    if let Some(head) = bed.fleet.head(&branch(CELL)) {
                        let state = if roll(3) == 0 {
                            CheckState::Failed
                        } else {
                            CheckState::Passed
                        };
                        bed.fleet.post_check(&head, CI, state);
                        if queue {
                            bed.fleet.post_check(&head, FLEET, state);
                        }
                    }
                }
                5 if open.is_some() => bed.fleet.approve(open.unwrap().number, "alice"),
                6 => {
                    bed.fleet
                        .commit("main", &[(&format!("docs/{step}.md"), "x\n")], "main moves");
                }
                7 if open.is_some() => {
                    let _ = bed.fleet.update_branch(open.unwrap().number);
                }
                _ => {}
            }
            let queue_checks = async {
                // The queue's checks of an entry report while the deliveries run (nothing when
                // it is not queued); only the queued schedules roll for it.
                if queue && let Some(number) = queued {
                    tokio::task::yield_now().await;
                    if roll(2) == 0
                        && let Some(group) = bed.fleet.merge_group(number)
                    {
                        // The queue's CI on the entry's merge group: every required check.
                        let state = if roll(4) != 0 {
                            CheckState::Passed
                        } else {
                            CheckState::Failed
                        };
                        for context in &contexts {
                            bed.fleet.post_check(&group.head_sha, context, state);
                        }
                    }
                }
            };
            let (a, b, ()) = tokio::join!(sync(&bed, CELL), sync(&bed, CELL), queue_checks);
            for r in [a, b] {
                assert!(
                    r["action"] != "failed" || r["retryable"] == true,
                    "seed {seed} step {step}: {r}"
                );
            }
        }
        assert_only_eligible_merges(&bed.fleet, seed, earlier, &contexts, approvals);
        let ours = bed.fleet.merges().iter().filter(|m| m.by == VIEWER).count();
        merged_by_cellbridge += ours;
        if queue {
            merged_by_a_queue += ours;
        }
        refused_ineligible += bed.fleet.pulls().iter().filter(|p| p.open).count();
    }
    // The schedules exercised both sides: merges happened, and pull requests stayed for a person.
    assert!(merged_by_cellbridge > 10, "{merged_by_cellbridge} merges by cellbridge");
    assert!(refused_ineligible > 5, "{refused_ineligible} left open");
    assert!(
        merged_by_a_queue > 0,
        "{merged_by_a_queue} merges of what cellbridge queued"
    );
}

/// Every pull request merged by cellbridge or by the auto-merge it enabled changed only the
/// cell's metadata on main, keeping its key set; and every merge, whoever made it, met the
/// protection the test set.
fn assert_only_eligible_merges(gh: &MemGithub, seed: u64, earlier: usize, contexts: &[&str], approvals: u32) {
    let cm = metadata_path(CELL);
    for m in gh.merges().into_iter().skip(earlier) {
        for ctx in contexts {
            assert_eq!(
                m.checks.get(*ctx),
                Some(&CheckState::Passed),
                "seed {seed}: #{} merged by {} without {ctx}: {m:?}",
                m.number,
                m.by
            );
        }
        assert!(m.approvals >= approvals as usize, "seed {seed}: {m:?}");
        if m.by != VIEWER {
            continue;
        }
        let (before, after) = (gh.files_at(&m.base_before), gh.files_at(&m.commit));
        let changed: Vec<&String> = before
            .keys()
            .chain(after.keys())
            .filter(|p| before.get(*p) != after.get(*p))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // (Empty is possible: a delivery that read the base before a merge opened a pull request
        // of the values that merge brought; merging it changes nothing.)
        assert!(
            changed.iter().all(|p| **p == cm),
            "seed {seed}: #{} changed more than its metadata: {changed:?}",
            m.number
        );
        let keys = configmap_keys(&before[&cm]);
        assert!(keys.contains(&"vpc_id".to_owned()), "{keys:?}");
        assert_eq!(
            keys,
            configmap_keys(&after[&cm]),
            "seed {seed}: #{} changed the key set",
            m.number
        );
    }
}

/// The keys of a `cell-metadata.yaml` ConfigMap's `data`.
fn configmap_keys(text: &str) -> Vec<String> {
    let mut in_data = false;
    let mut keys: BTreeMap<String, ()> = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with("data:") {
            in_data = true;
            continue;
        }
        if in_data {
            if !line.starts_with("  ") {
                in_data = false;
                continue;
            }
            if let Some((k, _)) = line.trim().split_once(':') {
                keys.insert(k.to_owned(), ());
            }
        }
    }
    keys.into_keys().collect()
}
