//! state-sync: the seeded schedules (`CELLBRIDGE_RACE_SEEDS` sets how many). Terraform applies,
//! destroys and duplicate deliveries race with people pushing, merging, closing, updating the branch,
//! rewriting main's history, EKS deleting the cluster and GitHub's auto-merge; in every schedule no
//! person's change is lost, merging never undoes main, cellbridge writes only its own file after a
//! pull request's first commit, there is never more than one open pull request, and nothing is
//! decommissioned without EKS confirming the cluster gone.

use crate::support::Dice;
use crate::support::sync::*;
use serde_json::{Value, json};

/// What a schedule's world is: the cell's account, and whether it is opted into auto-merge.
#[derive(Clone, Copy)]
struct World {
    /// The cell's cluster is in another account, which no role reaches.
    other_account: bool,
    auto_merge: bool,
    /// main requires the strict check and branches up to date (GitHub reads a head that lacks
    /// main's newest commit `BEHIND`).
    strict: bool,
}

const OTHER_ACCOUNT: &str = "210987654321";

/// What people did in one schedule, to check that none of it was lost.
#[derive(Default)]
struct Done {
    /// Files a person committed on main (and did not rewrite away since).
    on_main: Vec<(String, String)>,
    /// Files a reviewer committed on a pull request's branch: (pull request, path, text).
    on_branch: Vec<(u64, String, String)>,
    /// Binary files a reviewer committed on a pull request's branch: (pull request, path).
    binary_on_branch: Vec<(u64, String)>,
    /// Files a reviewer deleted on a pull request's branch: (pull request, path).
    deleted_on_branch: Vec<(u64, String)>,
    /// Files someone pushed to the cell's branch while no pull request was open.
    pushed_without_pull: Vec<(String, String)>,
    /// Pull requests a person merged, with their title and body as merged.
    merged: Vec<(u64, String, String)>,
    /// EKS deleted the cell's cluster.
    cluster_deleted: bool,
    /// Commits a person rewrote away from main's history: (commit, the file it added).
    rewritten_away: Vec<(String, String)>,
}

const HOME: &str = "arn:aws:iam::123456789012:role/cellbridge";

/// The cell's state at `serial`: `vpc`, or destroyed (`None`: no outputs, no resources).
fn schedule_state(world: World, serial: u64, vpc: Option<&str>) -> String {
    let Some(vpc) = vpc else {
        return json!({"version": 4, "terraform_version": "1.11.4", "serial": serial, "lineage": LINEAGE, "outputs": {}, "resources": []})
            .to_string();
    };
    let mut s: Value = serde_json::from_str(&state("eu-c1", serial, vpc)).unwrap();
    if world.other_account {
        s["outputs"]["cell_metadata"]["value"]["aws_account_id"] = json!(OTHER_ACCOUNT);
    }
    s.to_string()
}

/// One schedule: Terraform applies (then, in some, destroys and applies again) and duplicate
/// deliveries race with reviewers pushing to and deleting files on the pull request, people
/// pushing to main, rewriting its history, merging, closing and updating the branch, someone
/// pushing to the cell's branch with no pull request, EKS deleting the cluster, and GitHub's
/// auto-merge; every GitHub call of cellbridge yields a `seed`-drawn number of times, so the seed
/// is the interleaving.
async fn one_schedule(seed: u64) -> (Bed, Done, Vec<Value>, cellbridge::doubles::cluster::MemAws, World) {
    use cellbridge::doubles::cluster::{MemAws, MemCluster};
    let mut dice = Dice(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let world = World {
        other_account: dice.roll(4) == 0,
        auto_merge: dice.roll(2) == 0,
        strict: dice.roll(2) == 0,
    };
    let destroys = dice.roll(2) == 0;
    let aws = MemAws::new(HOME);
    let cluster = MemCluster::active("eu-c1", "eu-west-1");
    aws.add_cluster(if world.other_account {
        cluster.in_account(OTHER_ACCOUNT)
    } else {
        cluster
    });
    let bed = bed().with_clusters(cellbridge::jobs::sync::ClusterAccess {
        probe: aws.clone().into(),
        describe_roles: Default::default(),
    });
    if world.auto_merge {
        bed.fleet.commit(
            "main",
            &[(".cellbridge/auto-merge.yaml", "cells: ['*']\n")],
            "opt cells in",
        );
        bed.fleet.allow_auto_merge(true);
    }
    if world.strict {
        bed.fleet.protect_branch(
            "main",
            Some(cellbridge::doubles::github::Protection {
                contexts: vec![cellbridge::pure::plan::STATUS_CONTEXT.to_owned()],
                strict: true,
                approvals: 0,
            }),
        );
    }
    bed.fleet.jitter(seed);
    let done = std::cell::RefCell::new(Done::default());
    let results = std::cell::RefCell::new(Vec::new());
    let terraform = async {
        let mut serials: Vec<(u64, Option<&str>)> = vec![
            (1, Some("vpc-1")),
            (2, Some("vpc-2")),
            (3, Some("vpc-2")),
            (4, Some("vpc-3")),
        ];
        if destroys {
            // `terraform destroy`, then (the cell back) an apply.
            serials.extend([(5, None), (6, Some("vpc-3"))]);
        }
        for (serial, vpc) in serials {
            bed.states.put(
                BUCKET,
                "cells/eu-c1/terraform.tfstate",
                schedule_state(world, serial, vpc),
            );
            let (a, b) = tokio::join!(sync(&bed, "eu-c1"), sync(&bed, "eu-c1"));
            results.borrow_mut().extend([a, b]);
        }
    };
    let people = async {
        let mut dice = Dice(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        // The person's own commits on main, newest last, to rewrite away.
        let mut theirs_on_main: Vec<(String, String)> = Vec::new();
        for step in 0..10 {
            for _ in 0..dice.roll(6) {
                tokio::task::yield_now().await;
            }
            let open = bed.fleet.pulls().into_iter().find(|p| p.open).map(|p| p.number);
            match (dice.roll(15), open) {
                (0..=2, _) => {
                    let (path, text) = (format!("docs/main-{step}.md"), format!("seed {seed} step {step}\n"));
                    let c = bed.fleet.commit("main", &[(&path, &text)], "a person on main");
                    bed.fleet.note(format!("PERSON main {path} -> {}", &c[..7]));
                    done.borrow_mut().on_main.push((path.clone(), text));
                    theirs_on_main.push((c, path));
                }
                (3..=4, Some(n)) => {
                    let (path, text) = (
                        format!("clusters/eu-c1/review-{step}.yaml"),
                        format!("# seed {seed} step {step}\n"),
                    );
                    let c = bed.fleet.commit(&branch("eu-c1"), &[(&path, &text)], "a reviewer");
                    bed.fleet.note(format!("PERSON #{n} {path} -> {}", &c[..7]));
                    done.borrow_mut().on_branch.push((n, path, text));
                }
                (5, Some(n)) => {
                    // A reviewer deletes a file of the cell's directory on the pull request.
                    let files = bed.fleet.files(&branch("eu-c1"));
                    let Some(path) = files
                        .keys()
                        .find(|p| p.ends_with("/kustomization.yaml") && p.starts_with("clusters/eu-c1/"))
                        .cloned()
                    else {
                        continue;
                    };
                    let c = bed
                        .fleet
                        .delete_files(&branch("eu-c1"), &[&path], "a reviewer deletes a file");
                    bed.fleet.note(format!("PERSON #{n} delete {path} -> {}", &c[..7]));
                    let mut d = done.borrow_mut();
                    d.on_branch.retain(|(m, p, _)| !(*m == n && *p == path));
                    d.deleted_on_branch.push((n, path));
                }
                (6, Some(n)) => {
                    let r = bed.fleet.try_merge(n);
                    bed.fleet.note(format!("PERSON merge #{n}: {r:?}"));
                    if r.is_ok() {
                        let p = bed.fleet.pulls().into_iter().find(|p| p.number == n).unwrap();
                        done.borrow_mut().merged.push((n, p.title, p.body));
                    }
                }
                (7, Some(n)) => {
                    let r = bed.fleet.update_branch(n);
                    bed.fleet.note(format!("PERSON update-branch #{n}: {r:?}"));
                }
                (8, Some(n)) if dice.roll(3) == 0 => {
                    bed.fleet.close(n);
                    bed.fleet.note(format!("PERSON close #{n}"));
                }
                (9, _) if destroys => {
                    let account = world.other_account.then_some(OTHER_ACCOUNT);
                    aws.remove_cluster(account, "eu-west-1", "eu-c1");
                    bed.fleet.note("EKS DeleteCluster eu-c1".into());
                    done.borrow_mut().cluster_deleted = true;
                }
                (10, None) if dice.roll(4) == 0 => {
                    let (path, text) = (format!("clusters/eu-c1/own-{step}.md"), format!("seed {seed}\n"));
                    let c = bed
                        .fleet
                        .commit(&branch("eu-c1"), &[(&path, &text)], "someone's own work");
                    bed.fleet.note(format!(
                        "PERSON push cellbridge/eu-c1 without a pull request {path} -> {}",
                        &c[..7]
                    ));
                    done.borrow_mut().pushed_without_pull.push((path, text));
                }
                (12, Some(n)) => {
                    // A reviewer's image: bytes that are not UTF-8.
                    let path = format!("clusters/eu-c1/diagram-{step}.png");
                    let c = bed.fleet.commit_bytes(
                        &branch("eu-c1"),
                        &path,
                        &[0x89, b'P', b'N', b'G', 0xff, 0xfe, step as u8],
                        "a reviewer's diagram",
                    );
                    bed.fleet.note(format!("PERSON #{n} binary {path} -> {}", &c[..7]));
                    done.borrow_mut().binary_on_branch.push((n, path));
                }
                (11, _) => {
                    // History rewritten: main's last commit, when it is the person's own, dropped.
                    let head = bed.fleet.head("main");
                    if let Some((sha, path)) = theirs_on_main.pop()
                        && head.as_deref() == Some(sha.as_str())
                    {
                        let parent = bed.fleet.parents(&sha)[0].clone();
                        bed.fleet.force_push("main", &parent);
                        bed.fleet
                            .note(format!("PERSON force-push main {} -> {}", &sha[..7], &parent[..7]));
                        let mut d = done.borrow_mut();
                        d.on_main.retain(|(p, _)| *p != path);
                        d.rewritten_away.push((sha, path));
                    }
                }
                _ => {}
            }
        }
    };
    tokio::join!(terraform, people);
    // Quiet again: the last state delivered once more.
    let last = sync(&bed, "eu-c1").await;
    results.borrow_mut().push(last);
    (bed, done.into_inner(), results.into_inner(), aws, world)
}

#[test]
fn in_thousands_of_interleavings_no_persons_change_is_lost_and_cellbridge_writes_only_its_file() {
    let seeds: u64 = std::env::var("CELLBRIDGE_RACE_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        // `make test` runs 300; `make bench` runs 3000 of these (and of the bootstrap's).
        .unwrap_or(300);
    // The schedules are independent: spread them over the machine's cores, each thread with a
    // single-threaded runtime (a seed's interleaving depends on that).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let outcomes: Vec<std::collections::BTreeMap<String, usize>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || check_schedules((1..=seeds).filter(|s| s % threads == t))))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut total: std::collections::BTreeMap<String, usize> = Default::default();
    for (k, v) in outcomes.into_iter().flatten() {
        *total.entry(k).or_default() += v;
    }
    println!("{seeds} schedules; outcomes: {total:?}");
}

/// The keys of a `cell-metadata.yaml`'s `data`.
fn data_keys(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .skip_while(|l| *l != "data:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k.to_owned()))
        .collect()
}

/// Runs the schedules of these seeds and checks what people and cellbridge did in each; the
/// outcomes seen, counted.
fn check_schedules(seeds: impl Iterator<Item = u64>) -> std::collections::BTreeMap<String, usize> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut outcomes: std::collections::BTreeMap<String, usize> = Default::default();
    for seed in seeds {
        let (bed, done, results, aws, world) = rt.block_on(one_schedule(seed));
        let gh = &bed.fleet;
        let why = |what: &str| {
            let pulls: Vec<String> = gh
                .pulls()
                .iter()
                .map(|p| {
                    format!(
                        "#{} open={} merged={} closed_by={:?}",
                        p.number, p.open, p.merged, p.closed_by
                    )
                })
                .collect();
            let actions: Vec<String> = results
                .iter()
                .map(|r| format!("{}:{}", r["action"], r["attempts"]))
                .collect();
            let mut log = Vec::new();
            let mut c = gh.head(&branch("eu-c1"));
            while let Some(sha) = c {
                let parents = gh.parents(&sha);
                log.push(format!(
                    "{} parents={:?} changed={:?}",
                    &sha[..7],
                    parents.iter().map(|p| &p[..7]).collect::<Vec<_>>(),
                    gh.changed_paths(&sha)
                ));
                c = parents.first().cloned();
                if log.len() > 12 {
                    break;
                }
            }
            format!(
                "seed {seed} (other account: {}, auto-merge: {}, strict: {}): {what}\n  results: {actions:?}\n  pulls: {pulls:?}\n  branch log: {log:#?}\n  created: {:?}\n  journal: {:#?}",
                world.other_account,
                world.auto_merge,
                world.strict,
                gh.created_commits().iter().map(|c| &c[..7]).collect::<Vec<_>>(),
                gh.journal()
            )
        };
        for r in &results {
            let foreign = r["error"]
                .as_str()
                .is_some_and(|e| e.contains("a commit cellbridge did not write"));
            let key = if foreign {
                "failed: foreign branch"
            } else {
                r["action"].as_str().unwrap()
            };
            *outcomes.entry(key.to_owned()).or_default() += 1;
            // The one final failure people can cause: someone's commit on the cell's branch that
            // no pull request shows, which cellbridge neither builds on nor deletes.
            assert!(
                r["action"] != "failed" || r["retryable"] == true || foreign,
                "{}",
                why(&format!("a final failure: {r}"))
            );
            if foreign {
                let files = gh.files(&branch("eu-c1"));
                let theirs = done.on_branch.iter().map(|(_, p, t)| (p, t));
                let pushed = done.pushed_without_pull.iter().map(|(p, t)| (p, t));
                // A commit main no longer has (its history rewritten) that the branch had when
                // it was read is someone else's on the branch too (the refusal names it).
                let error = r["error"].as_str().unwrap_or_default();
                let rewritten = done.rewritten_away.iter().any(|(sha, _)| error.contains(&sha[..12]));
                assert!(
                    rewritten || theirs.chain(pushed).any(|(p, t)| files.get(p) == Some(t)),
                    "{}",
                    why(&format!(
                        "a foreign branch reported, but no person's commit is on it: {r}"
                    ))
                );
            }
            // A decommission opens, and a destroyed new cell's pull request is closed, only once
            // EKS, asked in the cell's own account, no longer knows the cluster.
            if r["action"] == "decommission-opened" || !r["decommission"]["closed"].is_null() {
                assert!(
                    !world.other_account && done.cluster_deleted,
                    "{}",
                    why(&format!("a decommission without EKS's confirmation: {r}"))
                );
                assert!(
                    aws.calls_in("123456789012")
                        .iter()
                        .any(|c| c.starts_with("DescribeCluster")),
                    "{}",
                    why("a decommission, but EKS was never asked in the cell's account")
                );
            }
        }
        let last = results.last().unwrap();
        let last_foreign = last["error"]
            .as_str()
            .is_some_and(|e| e.contains("a commit cellbridge did not write"));
        assert!(
            last["action"] != "failed" || last_foreign,
            "{}",
            why(&format!("quiet again, the last delivery still fails: {last}"))
        );
        let pulls = gh.pulls();
        assert!(
            pulls.iter().filter(|p| p.open).count() <= 1,
            "{}",
            why("two open pull requests")
        );
        let main = gh.files("main");
        for (path, text) in &done.on_main {
            assert_eq!(main.get(path), Some(text), "{}", why(&format!("main lost {path}")));
        }
        for (n, path, text) in &done.on_branch {
            let pr = &pulls[*n as usize - 1];
            if pr.merged {
                assert_eq!(
                    main.get(path),
                    Some(text),
                    "{}",
                    why(&format!("merging #{n} lost {path}"))
                );
            } else if pr.open {
                // A branch holding a person's commit is never deleted or reset while its pull
                // request is open (a closed one keeps its commits on GitHub).
                let files = gh.files(&branch("eu-c1"));
                assert_eq!(
                    files.get(path),
                    Some(text),
                    "{}",
                    why(&format!("#{n}'s branch lost {path}"))
                );
            }
        }
        for (n, path) in &done.binary_on_branch {
            let pr = &pulls[*n as usize - 1];
            let (on, held) = if pr.merged {
                ("main", main.contains_key(path))
            } else {
                ("its branch", !pr.open || gh.files(&branch("eu-c1")).contains_key(path))
            };
            assert!(held, "{}", why(&format!("#{n}'s binary file {path} is gone from {on}")));
        }
        for (n, path) in &done.deleted_on_branch {
            if pulls[*n as usize - 1].open {
                assert!(
                    !gh.files(&branch("eu-c1")).contains_key(path),
                    "{}",
                    why(&format!("#{n}: the reviewer's deletion of {path} was undone"))
                );
            }
        }
        if !pulls.iter().any(|p| p.open) {
            let files = gh.files(&branch("eu-c1"));
            for (path, text) in &done.pushed_without_pull {
                if !files.is_empty() && files.get(path) != Some(text) && !main.contains_key(path) {
                    panic!("{}", why(&format!("someone's push of {path} was deleted or reset")));
                }
            }
        }
        for (n, title, body) in &done.merged {
            let p = &pulls[*n as usize - 1];
            assert_eq!(
                (&p.title, &p.body),
                (title, body),
                "{}",
                why(&format!("merged #{n}'s text was rewritten"))
            );
        }
        // What cellbridge merged (itself, or by the auto-merge it enabled) was eligible at its
        // head, computed here from what the merge brought to main: only the cell's
        // `cell-metadata.yaml`, with the same keys.
        for m in gh
            .merges()
            .iter()
            .filter(|m| m.by == cellbridge::doubles::github::VIEWER)
        {
            let (before, after) = (gh.files_at(&m.base_before), gh.files_at(&m.commit));
            let changed: Vec<&String> = before
                .keys()
                .chain(after.keys())
                .filter(|p| before.get(*p) != after.get(*p))
                .collect();
            assert!(
                changed.iter().all(|p| **p == CM),
                "{}",
                why(&format!("cellbridge merged #{} changing {changed:?}", m.number))
            );
            let keys = |files: &std::collections::BTreeMap<String, String>| files.get(CM).map(|t| data_keys(t));
            assert_eq!(
                keys(&before),
                keys(&after),
                "{}",
                why(&format!("cellbridge merged #{}, which changed the key set", m.number))
            );
        }
        let main_head = gh.head("main").unwrap();
        for c in gh.created_commits() {
            let parents = gh.parents(&c);
            let was_main = |c: &str| {
                gh.is_ancestor(c, &main_head) || done.rewritten_away.iter().any(|(r, _)| gh.is_ancestor(c, r))
            };
            let first_commit = parents.len() == 1 && was_main(&parents[0]);
            let changed = gh.changed_paths(&c);
            if first_commit || parents.len() == 2 {
                // A pull request's first commit (or a cut-off run's branch made whole again):
                // the cell's directory.
                assert!(
                    changed.iter().all(|p| p.starts_with("clusters/eu-c1/")),
                    "{}",
                    why(&format!("{c} wrote {changed:?}"))
                );
            } else {
                // An update: cellbridge's file; a decommission's update: what is left of the
                // cell's directory.
                assert!(
                    changed.iter().all(|p| p == CM
                        || (p.starts_with("clusters/eu-c1/")
                            && gh.message(&c).contains("Cellbridge-Kind: decommission"))),
                    "{}",
                    why(&format!("{c}, an update, wrote {changed:?}"))
                );
            }
        }
    }
    outcomes
}
