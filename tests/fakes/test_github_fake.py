"""Tests of github_fake's merge rule: `PUT /pulls/{n}/merge` merges three ways as GitHub does
(https://docs.github.com/rest/pulls/pulls#merge-a-pull-request), refusing with 405 only when
both sides changed a path differently since their merge base
(https://docs.github.com/pull-requests/collaborating-with-pull-requests/addressing-merge-conflicts/about-merge-conflicts).

They drive the fake's functions directly, without a server or GitHub's description.
"""
import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import github_fake as gf  # noqa: E402

_REPOS = itertools.count()


def files(full, branch):
    repo = gf.REPOS[full]
    sha = repo["refs"]["heads/" + branch]
    return {p: gf.get_obj(s, "blob").decode() for p, (_, s) in gf.tree_files(gf.get_obj(sha, "commit")["tree"]).items()}


def commit(full, branch, changes, message="a commit"):
    """Lays `changes` ({path: text or None}) over `branch`, created from main when missing."""
    repo = gf.REPOS[full]
    ref = "heads/" + branch
    if ref not in repo["refs"]:
        repo["refs"][ref] = repo["refs"]["heads/main"]
    return gf.seed({"repo": full, "branch": branch, "files": changes, "replace": False, "message": message})["sha"]


@pytest.fixture
def pull():
    """A repository whose main holds two files and a pull request from `topic`, cut from that
    main; its name and the pull request."""
    full = f"acme/merge-{next(_REPOS)}"
    gf.seed({"repo": full, "branch": "main", "files": {"a.txt": "a\n", "b.txt": "b\n"}})
    commit(full, "topic", {"cell/meta.yaml": "vpc: 1\n"}, "the cell")
    repo = gf.REPOS[full]
    pr = {"id": gf.new_id(), "number": 1, "state": "open", "title": "cell", "body": "", "head": "topic",
          "base": "main", "labels": [], "merged": False}
    repo["pulls"][1] = pr
    return full, pr


def merge(full, pr, **body):
    return gf.merge_pull(full, gf.REPOS[full], pr, body)


def refused(full, pr, status, **body):
    before = dict(gf.REPOS[full]["refs"])
    with pytest.raises(gf.ApiError) as e:
        merge(full, pr, **body)
    assert e.value.status == status
    assert gf.REPOS[full]["refs"] == before, "nothing moves"
    assert pr["state"] == "open" and not pr["merged"]
    return e.value


def test_a_pull_request_behind_main_merges_keeping_both_sides(pull):
    full, pr = pull
    base = commit(full, "main", {"OWNERS": "platform\n"}, "main moves")
    head = gf.REPOS[full]["refs"]["heads/topic"]
    assert gf.mergeable(gf.REPOS[full], pr)
    sha = merge(full, pr)
    assert gf.get_obj(sha, "commit")["parents"] == [base, head], "a merge commit of base and head"
    assert files(full, "main") == {"a.txt": "a\n", "b.txt": "b\n", "OWNERS": "platform\n", "cell/meta.yaml": "vpc: 1\n"}
    assert pr["state"] == "closed" and pr["merged"]


def test_identical_changes_on_both_sides_merge(pull):
    full, pr = pull
    commit(full, "main", {"a.txt": "A\n"})
    commit(full, "topic", {"a.txt": "A\n"})
    merge(full, pr)
    assert files(full, "main")["a.txt"] == "A\n"


def test_a_deletion_on_one_side_is_kept(pull):
    full, pr = pull
    commit(full, "topic", {"b.txt": None})
    commit(full, "main", {"a.txt": "A\n"})
    merge(full, pr)
    assert files(full, "main") == {"a.txt": "A\n", "cell/meta.yaml": "vpc: 1\n"}


@pytest.mark.parametrize("main_side, topic_side", [
    ({"a.txt": "main\n"}, {"a.txt": "topic\n"}),  # both edit
    ({"a.txt": None}, {"a.txt": "topic\n"}),  # delete vs edit
    ({"a.txt": "main\n"}, {"a.txt": None}),  # edit vs delete
    ({"cell/meta.yaml": "by hand\n"}, {}),  # both add the same path, differently
])
def test_a_path_changed_differently_on_both_sides_is_not_mergeable(pull, main_side, topic_side):
    full, pr = pull
    commit(full, "main", main_side)
    if topic_side:
        commit(full, "topic", topic_side)
    assert not gf.mergeable(gf.REPOS[full], pr)
    for method in ("merge", "squash", "rebase"):
        e = refused(full, pr, 405, merge_method=method)
        assert e.message == "Pull Request is not mergeable"


def test_a_file_where_the_other_side_has_a_directory_is_not_mergeable(pull):
    full, pr = pull
    commit(full, "main", {"cell": "a file\n"})
    refused(full, pr, 405)


def test_squash_makes_one_commit_on_the_base_with_the_merged_tree(pull):
    full, pr = pull
    commit(full, "topic", {"b.txt": "B\n"}, "second")
    base = commit(full, "main", {"OWNERS": "platform\n"})
    sha = merge(full, pr, merge_method="squash")
    c = gf.get_obj(sha, "commit")
    assert c["parents"] == [base]
    assert c["message"] == "cell (#1)"
    assert files(full, "main") == {"a.txt": "a\n", "b.txt": "B\n", "OWNERS": "platform\n", "cell/meta.yaml": "vpc: 1\n"}


def test_rebase_replays_each_commit_on_the_base(pull):
    full, pr = pull
    commit(full, "topic", {"b.txt": "B\n"}, "second")
    base = commit(full, "main", {"OWNERS": "platform\n"})
    sha = merge(full, pr, merge_method="rebase")
    second = gf.get_obj(sha, "commit")
    first = gf.get_obj(second["parents"][0], "commit")
    assert (first["message"], second["message"]) == ("the cell", "second")
    assert first["parents"] == [base] and len(second["parents"]) == 1
    assert files(full, "main") == {"a.txt": "a\n", "b.txt": "B\n", "OWNERS": "platform\n", "cell/meta.yaml": "vpc: 1\n"}


def test_a_sha_that_is_not_the_head_is_409(pull):
    full, pr = pull
    e = refused(full, pr, 409, sha="0" * 40)
    assert e.message == "Head branch was modified. Review and try the merge again."
    merge(full, pr, sha=gf.REPOS[full]["refs"]["heads/topic"])
    assert pr["merged"]


def test_a_closed_pull_request_is_not_mergeable(pull):
    full, pr = pull
    pr["state"] = "closed"
    before = dict(gf.REPOS[full]["refs"])
    with pytest.raises(gf.ApiError) as e:
        merge(full, pr)
    assert (e.value.status, gf.REPOS[full]["refs"]) == (405, before)


def test_the_merge_base_is_the_newest_common_ancestor(pull):
    full, pr = pull
    commit(full, "main", {"OWNERS": "platform\n"})
    merge(full, pr)
    # The topic branch goes on from the merged pull request's head; main moves again.
    cut = commit(full, "topic", {"cell/meta.yaml": "vpc: 2\n"})
    main = commit(full, "main", {"a.txt": "A\n"})
    assert gf.merge_base(main, cut) == gf.get_obj(cut, "commit")["parents"][0]
