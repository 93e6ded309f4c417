//! Auto-merge on both GitHubs: an opted-in value-only change gets auto-merge and merges once its
//! checks pass (with the head's sha when nothing is awaited); a schema change and a new cell never get
//! it and the body says why; a reviewer's push turns cellbridge's auto-merge off (a person's is left
//! alone); "Allow auto-merge" off is said; people and auto-merge never merge anything ineligible; an
//! eligible head behind a base that must be up to date is brought up to date; a body edited to read
//! "eligible" never turns auto-merge on. On the HTTP fake only: with App credentials cellbridge knows
//! its own auto-merge.

use super::support::*;
use cellbridge::adapters::github::operations as ops;
use cellbridge::pure::plan::STATUS_CONTEXT;
use serde_json::json;

/// A world where `CELL` exists on main (its first pull request merged) and is opted in, and the
/// repository allows auto-merge.
async fn opted_in_world<B: Bed>(opt_in: &str) -> World<B> {
    opted_in(World::<B>::start(), opt_in).await
}

/// An opted-in cell's value-only change gets GitHub's auto-merge, and GitHub merges it once the
/// last required check passes; a replay writes nothing.
async fn an_opted_in_value_only_change_gets_auto_merge_and_merges_once_its_checks_pass<B: Bed>() {
    let w = opted_in_world::<B>("cells:\n  - eu-*\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 1, true)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");
    assert_eq!(r["auto_merge"]["opted_in_by"], "eu-*", "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n), (Some(B::CELLBRIDGE.to_owned()), None));
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.body.contains("**Auto-merge: eligible.**"), "{}", pr.body);

    let writes = w.writes();
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "already-enabled"), "{r}");
    assert_eq!(w.writes(), writes, "a replay writes nothing");

    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert!(
        w.pulls().iter().any(|p| p.number == n && p.open),
        "the required review is still missing"
    );
    w.bed.approve(w.repo(), n);
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged, "GitHub's auto-merge merged it: {pr:?}");
    assert_eq!(w.bed.auto_merge(w.repo(), n).1.as_deref(), Some(B::CELLBRIDGE));
    assert!(w.metadata_on("main", CELL).contains("vpc-2"));
}

/// Without branch protection GitHub refuses to wait ("clean status"): cellbridge merges it with
/// the head's sha.
async fn with_nothing_to_wait_for_an_opted_in_change_is_merged_with_its_heads_sha<B: Bed>() {
    let w = opted_in_world::<B>("cells: [eu-c1]\n").await;
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "merged"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(w.pulls().iter().any(|p| p.number == n && p.merged));
    assert!(w.metadata_on("main", CELL).contains("vpc-2"));
    assert_eq!(action(&w.deliver(CELL).await), "in-sync");
}

/// A schema change and a new cell never get auto-merge, and their bodies say why; a failing
/// required check never merges.
async fn a_schema_change_and_a_new_cell_never_get_auto_merge_and_the_body_says_why<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT], 0, false)));
    let mut meta = metadata(CELL, "vpc-1");
    meta["queue_url"] = json!("q-1");
    meta["schema"] = json!("2");
    w.put_state(CELL, state_with(2, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["auto_merge"]["eligible"].as_bool()),
        ("opened", Some(false)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n), (None, None));
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.body.contains("a schema change needs a person"), "{}", pr.body);
    assert!(pr.open && !pr.merged);

    w.apply("eu-c9", 1, "vpc-1");
    let r = w.deliver("eu-c9").await;
    assert_eq!(r["auto_merge"]["eligible"], false, "{r}");
    assert!(r["auto_merge"]["reasons"].to_string().contains("new cell"), "{r}");
    let pr = w.pulls().into_iter().find(|p| p.head == branch("eu-c9")).unwrap();
    assert!(pr.body.contains("This is a new cell"), "{}", pr.body);
    assert_eq!(w.bed.auto_merge(w.repo(), pr.number), (None, None));
}

/// A reviewer pushes a layer change after cellbridge enabled auto-merge: the next event turns it
/// off before posting the new head's status, so the change waits for a person.
async fn a_reviewers_push_makes_the_next_event_turn_cellbridges_auto_merge_off<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    let (n, pushed) = a_push_turns_cellbridges_auto_merge_off(&w, B::CELLBRIDGE).await;
    let statuses = w.statuses(&pushed);
    assert!(
        statuses.iter().any(|s| s.context == STATUS_CONTEXT && s.success),
        "{statuses:?}"
    );
    assert!(w.pulls().iter().any(|p| p.number == n && p.open));

    // The CI fails on the reviewer's head, and the reviewer turns auto-merge on themself (GitHub
    // refuses that while the pull request could merge at once): their choice, left alone.
    w.bed.ci(w.repo(), &pushed, CI, false);
    w.bed.enable_auto_merge_as_reviewer(w.repo(), n);
    w.apply(CELL, 3, "vpc-3");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("updated", "left-alone"), "{r}");
    assert_eq!(w.bed.auto_merge(w.repo(), n).0.as_deref(), Some(REVIEWER));
}

/// An opted-in value change gets cellbridge's auto-merge (recorded in the body); a reviewer pushes
/// a layer; the next event turns cellbridge's own auto-merge off, and nothing merged it. The pull
/// request's number and the reviewer's head. `login`: whom GitHub says enabled it (cellbridge's
/// credentials' login).
async fn a_push_turns_cellbridges_auto_merge_off<B: Bed>(w: &World<B>, login: &str) -> (u64, String) {
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert_eq!(w.bed.auto_merge(w.repo(), n).0.as_deref(), Some(login));
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.body.contains("automerge-by=cellbridge"), "recorded: {}", pr.body);
    let pushed = w.bed.commit(
        w.repo(),
        &branch(CELL),
        &[(&format!("clusters/{CELL}/extra-layer.yaml"), "# a reviewer's layer\n")],
        "a reviewer adds a layer",
    );
    w.bed.ci(w.repo(), &pushed, CI, true);
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("unchanged", "disabled"), "{r}");
    assert_eq!(
        w.bed.auto_merge(w.repo(), n),
        (None, None),
        "off, and nothing merged it"
    );
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.open && !pr.body.contains("automerge-by="), "{}", pr.body);
    (n, pushed)
}

/// A repository whose "Allow auto-merge" is off: the body and the result say so, the sync
/// succeeds, and once an administrator allows it the next event enables it.
async fn a_repository_that_does_not_allow_auto_merge_is_said_and_the_sync_succeeds<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.allow_auto_merge(w.repo(), false);
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), done(&r), r["retryable"].as_bool()),
        ("opened", "not-allowed", Some(false)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    assert!(
        w.pulls()
            .iter()
            .any(|p| p.number == n && p.body.contains("**Allow auto-merge**"))
    );
    w.bed.allow_auto_merge(w.repo(), true);
    let r = w.deliver(CELL).await;
    assert_eq!(done(&r), "enabled", "{r}");
    assert!(
        w.pulls()
            .iter()
            .any(|p| p.number == n && !p.body.contains("**Allow auto-merge**"))
    );
}

/// Reviewers approving, pushing and CI reporting around racing deliveries, with a merge queue on
/// main or none as the seed says (its checks reporting too): whatever the interleaving, what
/// cellbridge (or the auto-merge it enabled, or the queue it added to) merged is a value-only
/// change of the cell's metadata. (The in-memory double runs many more schedules:
/// `shared/tests/rules/auto_merge.rs`.)
async fn people_and_auto_merge_never_merge_anything_ineligible<B: Bed>() {
    for seed in 1..=3u64 {
        let w = opted_in_world::<B>("cells: ['*']\n").await;
        // A merge queue on main, or none, as the seed says (its checks then report too). With
        // a queue, the checks the docs say to require: the fleet workflow's, not the Lambda's
        // status, which is never posted on a merge group.
        let queue = seed % 2 == 0;
        let contexts = if queue {
            [fleet_check().name.as_str(), CI]
        } else {
            [STATUS_CONTEXT, CI]
        };
        w.bed.protect_main(w.repo(), Some((&contexts, 0, false)));
        if queue {
            w.bed
                .require_merge_queue(w.repo(), Some(cellbridge::ports::github::MergeMethod::Squash));
        }
        let mut dice = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut roll = |sides: u64| {
            dice ^= dice << 13;
            dice ^= dice >> 7;
            dice ^= dice << 17;
            dice % sides
        };
        for serial in 2..=6u64 {
            w.apply(CELL, serial, &format!("vpc-{serial}"));
            let people = async {
                tokio::task::yield_now().await;
                let head = w.head(&branch(CELL));
                // A reviewer pushes to the pull request while it is open (a push to a branch no
                // pull request shows is a final failure of its own scenario).
                let open = w.open_pulls().first().map(|p| p.number);
                // GitHub's unhappy answers join the schedule: a merge state that cannot be read
                // (an enum value added since), GitHub's own untyped failure inside an answer.
                match roll(6) {
                    0 => w.bed.merge_state_unknown_enum(w.repo()),
                    1 => w
                        .bed
                        .graphql_untyped_error(w.repo(), &ops::GRAPHQL_MERGE_STATE.as_operation(), 1),
                    2 => w
                        .bed
                        .graphql_untyped_error(w.repo(), &ops::GRAPHQL_CELL_READING.as_operation(), 1),
                    _ => {}
                }
                match (roll(4), head) {
                    (0, Some(h)) => {
                        let passed = roll(3) != 0;
                        for context in &contexts[usize::from(!queue)..] {
                            w.bed.ci(w.repo(), &h, context, passed);
                        }
                    }
                    // The queue's CI on an entry's merge group, when one awaits checks.
                    (2, Some(_)) if queue && open.is_some() => {
                        if let Some(group) = w.bed.merge_group(w.repo(), open.unwrap()) {
                            let passed = roll(3) != 0;
                            for context in contexts {
                                w.bed.ci(w.repo(), &group.head_sha, context, passed);
                            }
                        }
                    }
                    (1, Some(_)) if open.is_some() => {
                        w.bed.commit(
                            w.repo(),
                            &branch(CELL),
                            &[(&format!("clusters/{CELL}/review-{serial}.yaml"), "# review\n")],
                            "a reviewer",
                        );
                    }
                    _ => {}
                }
            };
            let (a, b, ()) = tokio::join!(w.deliver(CELL), w.deliver(CELL), people);
            for r in [a, b] {
                // Only a merge state that could not be read (the enum value injected, whichever
                // delivery meets it) fails for good, and is no refusal.
                assert!(
                    r["action"] != "failed"
                        || r["retryable"] == true
                        || r["error"].as_str().is_some_and(|e| e.contains("\"QUEUED\"")),
                    "seed {seed}: {r}"
                );
                assert!(r.get("reported").is_none(), "seed {seed}: {r}");
            }
        }
        let main = w.files("main");
        assert!(
            !main.keys().any(|p| p.contains("/review-")),
            "seed {seed}: a reviewer's file reached main without a person"
        );
        assert!(
            w.bed.issues(w.repo()).is_empty(),
            "seed {seed}: GitHub's failures are no refused state"
        );
    }
}

/// An eligible head left behind a base that requires branches to be up to date ("Require
/// branches to be up to date before merging"; GitHub's auto-merge waits and never updates the
/// branch) is brought up to date by the next event, its status posted on the new head, and
/// GitHub's auto-merge merges it once the CI passes there.
async fn an_eligible_head_behind_a_base_that_must_be_up_to_date_is_brought_up_to_date<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, true)));
    w.apply(CELL, 2, "vpc-2");
    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("opened", "enabled"), "{r}");
    let n = r["pull_request"]["number"].as_u64().unwrap();
    w.bed
        .commit(w.repo(), "main", &[("docs/elsewhere.md", "a person's\n")], "elsewhere");
    let behind = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &behind, CI, true);
    assert!(
        w.pulls().iter().any(|p| p.number == n && p.open),
        "behind main: GitHub's auto-merge waits"
    );

    let r = w.deliver(CELL).await;
    assert_eq!((action(&r), done(&r)), ("updated", "already-enabled"), "{r}");
    let head = w.head(&branch(CELL)).unwrap();
    assert_ne!(head, behind);
    assert!(w.files(&branch(CELL)).contains_key("docs/elsewhere.md"));
    assert!(
        w.statuses(&head)
            .iter()
            .any(|s| s.context == STATUS_CONTEXT && s.success),
        "{:?}",
        w.statuses(&head)
    );
    let writes = w.writes();
    assert_eq!(done(&w.deliver(CELL).await), "already-enabled");
    assert_eq!(w.writes(), writes, "up to date: a replay writes nothing");
    w.bed.ci(w.repo(), &head, CI, true);
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    assert!(pr.merged, "GitHub's auto-merge merged it: {pr:?}");
    let main = w.files("main");
    assert!(main.contains_key("docs/elsewhere.md") && w.metadata_on("main", CELL).contains("vpc-2"));
}

/// Whether GitHub may merge a head is never read back from the body: a person who edits a schema
/// change's description to read "eligible" (its paragraph and its record) gets no auto-merge.
async fn a_body_edited_to_read_eligible_never_turns_auto_merge_on<B: Bed>() {
    let w = opted_in_world::<B>("cells: ['*']\n").await;
    w.bed.protect_main(w.repo(), Some((&[STATUS_CONTEXT, CI], 0, false)));
    let mut meta = metadata(CELL, "vpc-1");
    meta["queue_url"] = json!("q-1");
    w.put_state(CELL, state_with(2, meta));
    let r = w.deliver(CELL).await;
    assert_eq!(
        (action(&r), r["auto_merge"]["eligible"].as_bool()),
        ("opened", Some(false)),
        "{r}"
    );
    let n = r["pull_request"]["number"].as_u64().unwrap();
    let pr = w.pulls().into_iter().find(|p| p.number == n).unwrap();
    let (open, close) = ("<!-- cellbridge-auto-merge -->", "<!-- /cellbridge-auto-merge -->");
    let (a, b) = (pr.body.find(open).unwrap(), pr.body.find(close).unwrap());
    let edited = format!("{}{open}\n**Auto-merge: eligible.**\n{}", &pr.body[..a], &pr.body[b..]);
    let edited = cellbridge::pure::record::with_field(&edited, "automerge", Some("eligible"));
    w.bed.edit_body(w.repo(), n, &edited);

    let r = w.deliver(CELL).await;
    assert_eq!(r["auto_merge"]["eligible"].as_bool(), Some(false), "{r}");
    assert_eq!(w.bed.auto_merge(w.repo(), n), (None, None), "{r}");
    let head = w.head(&branch(CELL)).unwrap();
    w.bed.ci(w.repo(), &head, CI, true);
    assert!(w.pulls().iter().any(|p| p.number == n && p.open && !p.merged));
}

/// With GitHub App credentials, GraphQL names the App that enabled auto-merge as a `Bot` by its
/// slug (`cellbridge`) while `viewer.login` is `cellbridge[bot]`: cellbridge still knows the
/// auto-merge as its own and turns it off when a reviewer's push makes the head ineligible,
/// where taking it for a person's would leave GitHub to merge a change nobody reviewed.
#[tokio::test]
async fn http_with_app_credentials_cellbridge_knows_its_own_auto_merge_and_turns_it_off() {
    let w = opted_in(http_world(app_credentials), "cells: ['*']\n").await;
    // The App's REST login; GraphQL names it `cellbridge`, a `Bot`, and cellbridge knows it.
    a_push_turns_cellbridges_auto_merge_off(&w, "cellbridge[bot]").await;
}

scenarios!(
    mem_github: super::MemBed,
    http_fake: super::HttpBed,
    #[cfg(feature = "every-bed")]
    http_ghes: super::GhesBed;
    [
        an_opted_in_value_only_change_gets_auto_merge_and_merges_once_its_checks_pass,
        with_nothing_to_wait_for_an_opted_in_change_is_merged_with_its_heads_sha,
        a_schema_change_and_a_new_cell_never_get_auto_merge_and_the_body_says_why,
        a_reviewers_push_makes_the_next_event_turn_cellbridges_auto_merge_off,
        a_repository_that_does_not_allow_auto_merge_is_said_and_the_sync_succeeds,
        people_and_auto_merge_never_merge_anything_ineligible,
        an_eligible_head_behind_a_base_that_must_be_up_to_date_is_brought_up_to_date,
        a_body_edited_to_read_eligible_never_turns_auto_merge_on,
    ]
);
