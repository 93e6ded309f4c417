use std::collections::BTreeMap;
use std::time::Instant;

use super::merges::three_way;
use crate::doubles::github::*;
use crate::pure::fleet::{FileMode, FileWrite, Keep};

fn files(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(p, t)| (p.to_string(), t.to_string())).collect()
}

/// main with `a` and `b`, and pull request #1 from `topic` (cut from it) adding `cell`.
fn repo_with_pull() -> MemGithub {
    let gh = MemGithub::new("main", &files(&[("a", "a\n"), ("b", "b\n")]));
    gh.commit("topic", &[("cell", "vpc: 1\n")], "the cell");
    gh.with(|s| s.pulls.push(MemPull::opened(1, "topic", "main", "cell", "")));
    gh
}

#[tokio::test]
async fn trees_keep_modes_and_symlinks() {
    use crate::pure::fleet::FleetRead as _;
    let gh = repo_with_pull();
    let d = Instant::now() + std::time::Duration::from_secs(5);
    let main = gh.head("main").unwrap();
    let files = [
        FileWrite {
            path: "run.sh".into(),
            mode: FileMode::Executable,
            content: "#!/bin/sh\n".into(),
        },
        FileWrite {
            path: "docs".into(),
            mode: FileMode::Symlink,
            content: "a".into(),
        },
    ];
    let tree = gh.create_tree(&main, None, &files, &[], d).await.unwrap();
    let commit = gh
        .create_commit(&tree, std::slice::from_ref(&main), "modes", d)
        .await
        .unwrap();
    assert!(gh.create_branch("modes", &commit, d).await.unwrap());
    gh.commit(
        "modes",
        &[("run.sh", "#!/bin/sh\nexit 0\n")],
        "a person edits the script",
    );
    let modes = gh.modes("modes");
    assert_eq!(
        (modes["run.sh"], modes["docs"], modes["a"]),
        (FileMode::Executable, FileMode::Symlink, FileMode::Regular)
    );
    assert_eq!(gh.files("modes")["docs"], "a");
    let snap = gh.read_base(&Keep::all(), d).await.unwrap();
    assert_eq!(snap.fleet.mode("a").unwrap(), Some(FileMode::Regular));
}

#[test]
fn a_pull_request_behind_its_base_merges_both_sides_in_a_merge_commit() {
    let gh = repo_with_pull();
    let base = gh.commit("main", &[("OWNERS", "platform\n")], "main moves");
    let head = gh.head("topic").unwrap();
    let sha = gh.merge(1);
    assert_eq!(gh.with(|s| s.commits[&sha].parents.clone()), [base, head]);
    let main = gh.files("main");
    assert_eq!(main.keys().collect::<Vec<_>>(), ["OWNERS", "a", "b", "cell"]);
    assert!(gh.pulls()[0].merged && !gh.pulls()[0].open);
}

#[test]
fn identical_changes_merge_and_different_ones_conflict() {
    let gh = repo_with_pull();
    gh.commit("main", &[("a", "A\n"), ("b", "main\n")], "main");
    gh.commit("topic", &[("a", "A\n"), ("b", "topic\n")], "topic");
    let before = (gh.head("main"), gh.files("main"));
    let refused = gh.try_merge(1).unwrap_err();
    assert_eq!(
        (refused.status, refused.conflicts.as_slice()),
        (405, ["b".to_owned()].as_slice())
    );
    assert_eq!(refused.message, "Pull Request is not mergeable");
    assert_eq!((gh.head("main"), gh.files("main")), before, "nothing moved");
    assert!(gh.pulls()[0].open && !gh.pulls()[0].merged);
}

#[test]
fn deleting_a_file_one_side_edits_conflicts_and_one_left_alone_is_deleted() {
    let base = BTreeMap::from([("a".to_owned(), "a".to_owned()), ("b".to_owned(), "b".to_owned())]);
    let ours = BTreeMap::from([("b".to_owned(), "b".to_owned())]);
    let theirs = BTreeMap::from([("a".to_owned(), "a".to_owned()), ("b".to_owned(), "B".to_owned())]);
    assert_eq!(
        three_way(&base, &ours, &theirs),
        Ok(BTreeMap::from([("b".to_owned(), "B".to_owned())]))
    );
    let edited = BTreeMap::from([("a".to_owned(), "A".to_owned()), ("b".to_owned(), "b".to_owned())]);
    assert_eq!(three_way(&base, &ours, &edited), Err(vec!["a".to_owned()]));
}

#[test]
fn a_closed_or_missing_pull_request_is_refused() {
    let gh = repo_with_pull();
    assert_eq!(gh.try_merge(7).unwrap_err().status, 404);
    gh.merge(1);
    assert_eq!(gh.try_merge(1).unwrap_err().status, 405);
}

#[test]
fn the_merge_base_is_the_newest_common_ancestor() {
    let gh = repo_with_pull();
    gh.commit("main", &[("OWNERS", "platform\n")], "main moves");
    let merged_head = gh.head("topic").unwrap();
    gh.merge(1);
    let cut = gh.commit("topic", &[("cell", "vpc: 2\n")], "the cell again");
    let main = gh.commit("main", &[("a", "A\n")], "main moves again");
    assert_eq!(gh.with(|s| s.merge_base(&main, &cut)), Some(merged_head));
}

/// The reading pages on as the adapter does: only while a full page of the head name held no
/// pull request of the repository's own (forks' newer ones), so request counts match GitHub's.
#[tokio::test]
async fn the_cells_reading_pages_past_forks_only_while_none_of_a_page_was_its_own() {
    use crate::ports::github::Pulls as _;
    let gh = repo_with_pull();
    let d = Instant::now() + std::time::Duration::from_secs(5);
    let main = gh.head("main").unwrap();
    let pages = |gh: &MemGithub| gh.calls().iter().filter(|c| **c == "graphql/branchPulls").count();
    for _ in 0..9 {
        gh.fork_pull("someone/fleet", "topic", true);
    }
    let reading = gh.cell_reading("topic", "refused", "main", &main, d).await.unwrap();
    assert_eq!(
        (reading.latest.map(|p| p.number), pages(&gh)),
        (Some(1), 0),
        "nine forks: the own is on the first page"
    );
    gh.fork_pull("someone/fleet", "topic", false);
    let reading = gh.cell_reading("topic", "refused", "main", &main, d).await.unwrap();
    assert_eq!(
        (reading.latest.map(|p| p.number), pages(&gh)),
        (Some(1), 1),
        "ten: the own is on the next page"
    );
    assert_eq!(
        gh.cell_reading("other", "refused", "main", &main, d)
            .await
            .unwrap()
            .latest,
        None
    );
    assert_eq!(pages(&gh), 1, "no pull request of the name: no further page");
}
