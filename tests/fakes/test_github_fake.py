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


# --- over HTTP, checked against GitHub's description ----------------------------------------------
#
# The tests below drive the fake as the product does: requests over HTTP, each checked against
# GitHub's OpenAPI description, and the fake's answers completed and checked against its schemas.
# A well-formed call must leave no violation in GET /_fake/conformance.

import base64  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

import github_graphql  # noqa: E402
import github_openapi  # noqa: E402

OPENAPI = Path(os.environ.get("CELLBRIDGE_GITHUB_OPENAPI_DIR") or Path(__file__).resolve().parents[2] / ".testbed" / "openapi"
               / "node_modules" / "@octokit" / "openapi" / "generated")
TOKEN = "fake-test-token-not-a-credential"


class Answer:
    def __init__(self, status, body, headers):
        self.status, self.body, self.headers = status, body, headers

    def __repr__(self):
        return f"Answer({self.status}, {self.body!r})"


FLAVORS = {"api.github.com": "api.github.com.json", "ghes": "ghes-3.19.json"}


@pytest.fixture(scope="module", params=list(FLAVORS))
def server(request):
    """The fake serving on a free port of 127.0.0.1, checking github.com's description or GitHub
    Enterprise Server's (whose API lives below /api/v3)."""
    source = OPENAPI / FLAVORS[request.param]
    if not source.is_file():
        pytest.fail(f"GitHub's OpenAPI description is missing: {source}. Run `make testbed`.")
    gf.SPEC["description"] = github_openapi.Description.load(str(source), request.param)
    gf.SPEC["graphql"] = github_graphql.schema_path(str(OPENAPI))
    gf.TOKENS[TOKEN] = None
    httpd = gf.ThreadingHTTPServer(("127.0.0.1", 0), gf.Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    gf.SPEC["description"] = None


def call(url, method, path, body=None, agent="cellbridge-tests", headers=None):
    """One request with the headers a well-behaved client sends."""
    data = None if body is None else json.dumps(body).encode()
    h = {"User-Agent": agent, "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
         "Authorization": f"Bearer {TOKEN}"}
    if data is not None:
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    req = urllib.request.Request(url + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req) as r:
            status, raw, hdrs = r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as e:
        status, raw, hdrs = e.code, e.read(), dict(e.headers)
    return Answer(status, json.loads(raw) if raw else None, hdrs)


@pytest.fixture
def gh(server):
    """(call, repository name): a fresh repository whose main holds a.txt and b.txt, and a call
    that also asserts, when the test ends, that nothing broke GitHub's description."""
    call(server, "DELETE", "/_fake/conformance")
    full = f"acme/http-{next(_REPOS)}"
    gf.seed({"repo": full, "branch": "main", "files": {"a.txt": "a\n", "b.txt": "b\n"}})

    prefix = gf.SPEC["description"].prefix

    def api(method, path, body=None, **kw):
        return call(server, method, prefix + path.replace("{repo}", full), body, **kw)

    api.full = full
    api.url = server
    yield api
    gf.RULESETS.clear()
    violations = call(server, "GET", "/_fake/conformance").body["violations"]
    assert violations == [], "a well-formed call broke GitHub's description"


def sha_of(gh, branch):
    return gf.REPOS[gh.full]["refs"]["heads/" + branch]


def open_pull(gh, head, title="cell", changes=None):
    commit(gh.full, head, changes or {f"{head}.yaml": "vpc: 1\n"}, f"{head}'s change")
    r = gh("POST", "/repos/{repo}/pulls", {"title": title, "head": head, "base": "main", "body": "b"})
    assert r.status == 201, r
    return r.body["number"]


def state(gh):
    return call(gh.url, "GET", f"/_fake/state?repo={gh.full}").body


# compare ------------------------------------------------------------------------------------------

def test_compare_identical_ahead_behind_diverged(gh):
    r = gh("GET", "/repos/{repo}/compare/main...main")
    assert r.status == 200
    assert (r.body["status"], r.body["ahead_by"], r.body["behind_by"], r.body["commits"], r.body["files"]) == \
        ("identical", 0, 0, [], [])
    cut = sha_of(gh, "main")
    c1 = commit(gh.full, "topic", {"a.txt": "A\n"}, "one")
    c2 = commit(gh.full, "topic", {"new.txt": "n\n"}, "two")
    r = gh("GET", "/repos/{repo}/compare/main...topic")
    assert (r.body["status"], r.body["ahead_by"], r.body["behind_by"], r.body["total_commits"]) == ("ahead", 2, 0, 2)
    assert [c["sha"] for c in r.body["commits"]] == [c1, c2], "oldest first"
    assert r.body["merge_base_commit"]["sha"] == cut and r.body["base_commit"]["sha"] == cut
    r = gh("GET", "/repos/{repo}/compare/topic...main")
    assert (r.body["status"], r.body["ahead_by"], r.body["behind_by"], r.body["files"]) == ("behind", 0, 2, [])
    commit(gh.full, "main", {"OWNERS": "platform\n"})
    r = gh("GET", "/repos/{repo}/compare/main...topic")
    assert (r.body["status"], r.body["ahead_by"], r.body["behind_by"]) == ("diverged", 2, 1)
    assert r.body["merge_base_commit"]["sha"] == cut
    assert r.body["base_commit"]["sha"] == sha_of(gh, "main")


def test_compare_files_are_the_three_dot_diff_with_head_blobs(gh):
    cut = sha_of(gh, "main")
    head = commit(gh.full, "cellbridge/x", {"a.txt": "A\nmore\n", "b.txt": None, "cell/meta.yaml": "vpc: 1\n"})
    commit(gh.full, "main", {"OWNERS": "platform\n"})  # on BASE only: not in the three-dot diff
    # The product percent-encodes the branch names; shas work too.
    r = gh("GET", "/repos/{repo}/compare/main...cellbridge%2Fx")
    assert r.status == 200
    files = {f["filename"]: f for f in r.body["files"]}
    assert sorted(files) == ["a.txt", "b.txt", "cell/meta.yaml"]
    head_files, base_files = gf.commit_files(head), gf.commit_files(cut)
    assert files["a.txt"]["status"] == "modified" and files["a.txt"]["sha"] == head_files["a.txt"][1]
    assert (files["a.txt"]["additions"], files["a.txt"]["deletions"], files["a.txt"]["changes"]) == (2, 1, 3)
    assert files["b.txt"]["status"] == "removed" and files["b.txt"]["sha"] == base_files["b.txt"][1]
    assert files["cell/meta.yaml"]["status"] == "added" and files["cell/meta.yaml"]["sha"] == head_files["cell/meta.yaml"][1]
    r2 = gh("GET", f"/repos/{{repo}}/compare/{sha_of(gh, 'main')}...{head}")
    assert r2.body["files"] == r.body["files"] and r2.body["status"] == "diverged"
    r3 = gh("GET", f"/repos/{{repo}}/compare/acme:main...acme:cellbridge%2Fx")
    assert r3.status == 200 and r3.body["ahead_by"] == 1


def test_compare_caps_commits_at_250_keeping_the_newest(gh):
    shas = [commit(gh.full, "long", {"n.txt": f"{i}\n"}, f"c{i}") for i in range(260)]
    r = gh("GET", "/repos/{repo}/compare/main...long")
    assert r.body["total_commits"] == 260 and len(r.body["commits"]) == 250
    assert r.body["commits"][-1]["sha"] == shas[-1] and r.body["commits"][0]["sha"] == shas[10]
    r = gh("GET", "/repos/{repo}/compare/main...long?per_page=100&page=1")
    assert [c["sha"] for c in r.body["commits"]] == shas[:100]
    r = gh("GET", "/repos/{repo}/compare/main...long?per_page=100&page=3")
    assert [c["sha"] for c in r.body["commits"]] == shas[200:] and r.body["files"] == []


def test_compare_unknown_ref_is_404(gh):
    assert gh("GET", "/repos/{repo}/compare/main...nope").status == 404
    assert gh("GET", "/repos/{repo}/compare/nope...main").status == 404
    assert gh("GET", "/repos/{repo}/compare/main..." + "0" * 40).status == 404
    assert gh("GET", "/repos/{repo}/compare/main..main").status == 404, "two dots: not modelled"


# blobs --------------------------------------------------------------------------------------------

def test_blob_round_trip_in_lines_of_60(gh):
    text = "x: 1\n" * 40  # 200 bytes: 268 base64 characters
    r = gh("POST", "/repos/{repo}/git/blobs", {"content": text, "encoding": "utf-8"})
    assert r.status == 201
    sha = r.body["sha"]
    r = gh("GET", f"/repos/{{repo}}/git/blobs/{sha}")
    assert r.status == 200
    assert (r.body["sha"], r.body["encoding"], r.body["size"]) == (sha, "base64", 200)
    lines = r.body["content"].split("\n")
    assert lines[-1] == "" and all(len(x) == 60 for x in lines[:-2]) and 0 < len(lines[-2]) <= 60
    assert base64.b64decode("".join(lines)).decode() == text
    assert r.body["url"].endswith(f"/git/blobs/{sha}") and r.body["node_id"]
    assert gh("GET", "/repos/{repo}/git/blobs/" + "0" * 40).status == 404


# trees and archives -------------------------------------------------------------------------------

def test_tree_modes_are_kept_and_archived_as_git_archive_writes_them(gh):
    """`POST /git/trees` takes 100755 (executable) and 120000 ("a blob that specifies the path of
    a symlink", https://docs.github.com/rest/git/trees#create-a-tree); the tarball holds the link
    as a symlink entry and the executable as 0775, as `git archive` does."""
    import io
    import tarfile
    main = sha_of(gh, "main")
    tree = gf.get_obj(main, "commit")["tree"]
    r = gh("POST", "/repos/{repo}/git/trees", {"base_tree": tree, "tree": [
        {"path": "bin/run.sh", "mode": "100755", "type": "blob", "content": "#!/bin/sh\n"},
        {"path": "docs", "mode": "120000", "type": "blob", "content": "a.txt"},
    ]})
    assert r.status == 201, r
    modes = {e["path"]: e["mode"] for e in r.body["tree"]}
    assert (modes["docs"], modes["a.txt"]) == ("120000", "100644")
    r = gh("POST", "/repos/{repo}/git/commits", {"message": "modes", "tree": r.body["sha"], "parents": [main]})
    assert r.status == 201, r
    head = r.body["sha"]
    assert {p: m for p, (m, _) in gf.commit_files(head).items()} == \
        {"a.txt": "100644", "b.txt": "100644", "bin/run.sh": "100755", "docs": "120000"}
    with tarfile.open(fileobj=io.BytesIO(gf.tarball(gh.full, head)), mode="r:gz") as tar:
        entries = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name.rstrip("/")}
        assert entries["docs"].issym() and entries["docs"].linkname == "a.txt"
        assert entries["bin/run.sh"].isfile() and entries["bin/run.sh"].mode == 0o775
        assert entries["a.txt"].mode == 0o664
        assert tar.pax_headers["comment"] == head

def test_seed_takes_modes_and_state_reports_them(gh):
    """The control API seeds executables and symlinks; `GET /_fake/state` lists every mode but
    100644 per branch, so tests see what a commit did to modes."""
    gf.seed({"repo": gh.full, "branch": "main", "replace": False, "files": {
        "bin/run.sh": {"text": "#!/bin/sh\n", "mode": "100755"},
        "link": {"text": "a.txt", "mode": "120000"},
    }})
    modes = {p: m for p, (m, _) in gf.commit_files(sha_of(gh, "main")).items()}
    assert (modes["bin/run.sh"], modes["link"], modes["a.txt"]) == ("100755", "120000", "100644")
    assert call(gh.url, "GET", f"/_fake/state?repo={gh.full}").body["modes"]["main"] == \
        {"bin/run.sh": "100755", "link": "120000"}

# merging a branch ---------------------------------------------------------------------------------

def test_merge_creates_a_merge_commit_on_base(gh):
    base = commit(gh.full, "main", {"OWNERS": "platform\n"})
    head = commit(gh.full, "topic", {"cell.yaml": "vpc: 1\n"})
    r = gh("POST", "/repos/{repo}/merges", {"base": "main", "head": "topic", "commit_message": "cellbridge: merge"})
    assert r.status == 201, r
    assert r.body["sha"] == sha_of(gh, "main")
    assert [p["sha"] for p in r.body["parents"]] == [base, head]
    assert r.body["commit"]["message"] == "cellbridge: merge"
    assert files(gh.full, "main") == {"a.txt": "a\n", "b.txt": "b\n", "OWNERS": "platform\n", "cell.yaml": "vpc: 1\n"}
    # A SHA as head, and the default message.
    head2 = commit(gh.full, "topic", {"cell.yaml": "vpc: 2\n"})
    r = gh("POST", "/repos/{repo}/merges", {"base": "main", "head": head2})
    assert r.status == 201 and r.body["commit"]["message"] == f"Merge {head2} into main"


def test_merge_of_what_base_contains_is_204_and_moves_nothing(gh):
    commit(gh.full, "topic", {"cell.yaml": "vpc: 1\n"})
    before = sha_of(gh, "main")
    r = gh("POST", "/repos/{repo}/merges", {"base": "topic", "head": "main"})
    assert (r.status, r.body) == (204, None)
    r = gh("POST", "/repos/{repo}/merges", {"base": "main", "head": before})
    assert r.status == 204 and sha_of(gh, "main") == before


def test_merge_conflict_is_409(gh):
    commit(gh.full, "topic", {"a.txt": "topic\n"})
    commit(gh.full, "main", {"a.txt": "main\n"})
    before = dict(gf.REPOS[gh.full]["refs"])
    r = gh("POST", "/repos/{repo}/merges", {"base": "main", "head": "topic"})
    assert (r.status, r.body["message"]) == (409, "Merge conflict")
    assert gf.REPOS[gh.full]["refs"] == before


def test_merge_of_a_missing_base_or_head_is_404(gh):
    r = gh("POST", "/repos/{repo}/merges", {"base": "nope", "head": "main"})
    assert (r.status, r.body["message"]) == (404, "Base does not exist")
    r = gh("POST", "/repos/{repo}/merges", {"base": "main", "head": "nope"})
    assert (r.status, r.body["message"]) == (404, "Head does not exist")


# rulesets ---------------------------------------------------------------------------------------

RULE = "Repository rule violations found\n\nChanges must be made through a pull request.\n\n"


def test_a_ruleset_refuses_every_ref_update_of_matching_branches(gh):
    r = call(gh.url, "POST", "/_fake/rulesets", {"repo": gh.full, "branch": "main",
                                                "message": "Changes must be made through a pull request."})
    assert r.status == 201
    main = sha_of(gh, "main")
    ahead = commit(gh.full, "topic", {"cell.yaml": "vpc: 1\n"})
    before = dict(gf.REPOS[gh.full]["refs"])
    r = gh("PATCH", "/repos/{repo}/git/refs/heads/main", {"sha": ahead, "force": False})
    assert (r.status, r.body["message"]) == (422, RULE)
    r = gh("POST", "/repos/{repo}/merges", {"base": "main", "head": "topic"})
    assert (r.status, r.body["message"]) == (422, RULE)
    assert gf.REPOS[gh.full]["refs"] == before
    # A non-fast-forward update keeps GitHub's own answer.
    commit(gh.full, "other", {"x": "1\n"})
    r = gh("PATCH", "/repos/{repo}/git/refs/heads/other", {"sha": main, "force": False})
    assert (r.status, r.body["message"]) == (422, "Update is not a fast forward")
    # Other branches are not protected; a pull request still merges into main.
    number = open_pull(gh, "cellbridge/y")
    assert gh("PUT", f"/repos/{{repo}}/pulls/{number}/merge", {"merge_method": "merge"}).status == 200


def test_a_ruleset_on_a_head_branch_refuses_updating_it(gh):
    number = open_pull(gh, "cellbridge/r")
    commit(gh.full, "main", {"OWNERS": "platform\n"})
    call(gh.url, "POST", "/_fake/rulesets", {"repo": gh.full, "branch": "cellbridge/**/*"})
    before = dict(gf.REPOS[gh.full]["refs"])
    r = gh("PUT", f"/repos/{{repo}}/pulls/{number}/update-branch")
    assert (r.status, r.body["message"]) == (422, RULE)
    assert gf.REPOS[gh.full]["refs"] == before
    r = gh("GET", "/repos/{repo}/pulls?state=all&head=acme%3Acellbridge%2Fr&per_page=1")
    assert [p["number"] for p in r.body] == [number]


def test_ruleset_patterns_follow_fnmatch_pathname(gh):
    call(gh.url, "POST", "/_fake/rulesets", {"repo": gh.full, "branch": "release/*", "message": "No."})
    refused = "Repository rule violations found\n\nNo.\n\n"
    main = sha_of(gh, "main")
    r = gh("POST", "/repos/{repo}/git/refs", {"ref": "refs/heads/release/1", "sha": main})
    assert (r.status, r.body["message"]) == (422, refused)
    r = gh("POST", "/repos/{repo}/git/refs", {"ref": "refs/heads/release/1/hotfix", "sha": main})
    assert r.status == 201, "* does not match /"
    call(gh.url, "DELETE", "/_fake/rulesets", {})
    call(gh.url, "POST", "/_fake/rulesets", {"repo": gh.full, "branch": "release/**/*"})
    r = gh("DELETE", "/repos/{repo}/git/refs/heads/release/1/hotfix")
    assert (r.status, r.body["message"]) == (422, RULE)
    call(gh.url, "DELETE", "/_fake/rulesets", {"repo": gh.full})
    assert gh("DELETE", "/repos/{repo}/git/refs/heads/release/1/hotfix").status == 204
    assert gf.branch_rule(gh.full, gf.REPOS[gh.full], "heads/release/1") is None


# comments ---------------------------------------------------------------------------------------

def test_comments_are_created_listed_and_in_the_state(gh):
    number = open_pull(gh, "cellbridge/c")
    r = gh("POST", f"/repos/{{repo}}/issues/{number}/comments", {"body": "first"}, agent="cellbridge/0.1")
    assert r.status == 201
    assert r.body["body"] == "first" and r.body["id"] and r.body["issue_url"].endswith(f"/issues/{number}")
    assert r.headers.get("Location") == r.body["url"]
    gh("POST", f"/repos/{{repo}}/issues/{number}/comments", {"body": "second"})
    r = gh("GET", f"/repos/{{repo}}/issues/{number}/comments")
    assert [c["body"] for c in r.body] == ["first", "second"]
    assert r.body[0]["id"] < r.body[1]["id"]
    r = gh("GET", f"/repos/{{repo}}/issues/{number}/comments?per_page=1&page=2")
    assert [c["body"] for c in r.body] == ["second"] and 'rel="prev"' in r.headers.get("Link", "")
    assert state(gh)["pulls"][0]["comments"] == ["first", "second"]
    assert gh("POST", "/repos/{repo}/issues/999/comments", {"body": "x"}).status == 404


# statuses ---------------------------------------------------------------------------------------

def test_statuses_are_listed_newest_first(gh):
    sha = sha_of(gh, "main")
    for st, ctx in (("pending", "cellbridge/plan"), ("success", "cellbridge/plan"), ("failure", "other")):
        r = gh("POST", f"/repos/{{repo}}/statuses/{sha}", {"state": st, "context": ctx, "description": st})
        assert r.status == 201
    r = gh("GET", f"/repos/{{repo}}/commits/{sha}/statuses?per_page=100")
    assert r.status == 200
    assert [(s["state"], s["context"]) for s in r.body] == [("failure", "other"), ("success", "cellbridge/plan"),
                                                           ("pending", "cellbridge/plan")]
    first = r.body[0]
    assert first["target_url"] is None and first["description"] == "failure"
    assert {"id", "node_id", "url", "created_at", "updated_at", "creator", "avatar_url"} <= set(first)
    # By branch name too; the combined status keeps the latest per context.
    assert len(gh("GET", "/repos/{repo}/commits/main/statuses").body) == 3
    combined = gh("GET", f"/repos/{{repo}}/commits/{sha}/status").body
    assert (combined["state"], combined["total_count"]) == ("failure", 2)
    assert gh("GET", "/repos/{repo}/commits/main/statuses?per_page=1").headers.get("Link")


# listing pull requests ------------------------------------------------------------------------------

def test_pulls_state_all_closed_sorted_with_merged_at(gh):
    one = open_pull(gh, "cellbridge/p", "one")
    r = gh("PUT", f"/repos/{{repo}}/pulls/{one}/merge", {"merge_method": "merge"})
    assert r.status == 200
    two = open_pull(gh, "cellbridge/p", "two")
    r = gh("PATCH", f"/repos/{{repo}}/pulls/{two}", {"state": "closed"}, agent="cellbridge/0.1")
    assert r.status == 200 and r.body["state"] == "closed" and r.body["closed_at"] and r.body["merged_at"] is None
    three = open_pull(gh, "cellbridge/p", "three")
    q = "state=all&head=acme%3Acellbridge%2Fp&sort=created&direction=desc&per_page=1"
    r = gh("GET", f"/repos/{{repo}}/pulls?{q}")
    assert [p["number"] for p in r.body] == [three]
    assert (r.body[0]["state"], r.body[0]["merged_at"], r.body[0]["closed_at"]) == ("open", None, None)
    assert 'rel="next"' in r.headers.get("Link", "")
    r = gh("GET", "/repos/{repo}/pulls?state=all&head=acme:cellbridge/p")
    assert [p["number"] for p in r.body] == [three, two, one], "created, desc by default"
    r = gh("GET", "/repos/{repo}/pulls?state=all&direction=asc")
    assert [p["number"] for p in r.body] == [one, two, three]
    r = gh("GET", "/repos/{repo}/pulls?state=closed")
    assert [p["number"] for p in r.body] == [two, one]
    merged = r.body[1]
    assert merged["state"] == "closed" and merged["merged_at"] and merged["closed_at"]
    assert [p["number"] for p in gh("GET", "/repos/{repo}/pulls").body] == [three]
    # sort=updated is ascending unless asked: the latest touched comes last.
    gh("PATCH", f"/repos/{{repo}}/pulls/{one}", {"title": "one again"})
    r = gh("GET", "/repos/{repo}/pulls?state=all&sort=updated")
    assert [p["number"] for p in r.body][-1] == one
    pulls = {p["number"]: p for p in state(gh)["pulls"]}
    assert pulls[two]["closed_by"] == "cellbridge/0.1"
    assert pulls[one]["closed_by"] == "cellbridge-tests"
    assert pulls[three]["closed_by"] is None


def test_closing_by_a_person_is_recorded(gh):
    number = open_pull(gh, "cellbridge/q")
    gh("PATCH", f"/repos/{{repo}}/pulls/{number}", {"state": "closed"})
    assert state(gh)["pulls"][0]["closed_by"] == "cellbridge-tests"
    gh("PATCH", f"/repos/{{repo}}/pulls/{number}", {"state": "open"})
    assert state(gh)["pulls"][0]["closed_by"] is None


# updating a pull request's branch ---------------------------------------------------------------

def test_update_branch_merges_base_into_head(gh):
    number = open_pull(gh, "cellbridge/u")
    head = sha_of(gh, "cellbridge/u")
    base = commit(gh.full, "main", {"OWNERS": "platform\n"})
    r = gh("PUT", f"/repos/{{repo}}/pulls/{number}/update-branch", {"expected_head_sha": head})
    assert r.status == 202
    assert r.body == {"message": "Updating pull request branch.",
                      "url": f"https://github.example/repos/{gh.full}/pulls/{number}"}
    new = gf.get_obj(sha_of(gh, "cellbridge/u"), "commit")
    assert new["parents"] == [head, base]
    assert new["message"] == "Merge branch 'main' into cellbridge/u"
    assert files(gh.full, "cellbridge/u")["OWNERS"] == "platform\n"
    r = gh("PUT", f"/repos/{{repo}}/pulls/{number}/update-branch")
    assert (r.status, r.body["message"]) == (422, "There are no new commits on the base branch.")


def test_update_branch_refusals(gh):
    number = open_pull(gh, "cellbridge/v", changes={"a.txt": "topic\n"})
    commit(gh.full, "main", {"a.txt": "main\n"})
    before = dict(gf.REPOS[gh.full]["refs"])
    r = gh("PUT", f"/repos/{{repo}}/pulls/{number}/update-branch", {"expected_head_sha": "0" * 40})
    assert (r.status, r.body["message"]) == (422, "expected head sha didn't match current head ref.")
    r = gh("PUT", f"/repos/{{repo}}/pulls/{number}/update-branch", {})
    assert (r.status, r.body["message"]) == (422, "merge conflict between base and head")
    assert gf.REPOS[gh.full]["refs"] == before
    assert gh("PUT", "/repos/{repo}/pulls/999/update-branch").status == 404


def test_a_person_updates_the_branch_through_the_control_api(gh):
    number = open_pull(gh, "cellbridge/w")
    head = sha_of(gh, "cellbridge/w")
    commit(gh.full, "main", {"OWNERS": "platform\n"})
    r = call(gh.url, "POST", "/_fake/update_branch", {"repo": gh.full, "number": number})
    assert r.status == 202 and r.body["sha"] == sha_of(gh, "cellbridge/w")
    assert gf.get_obj(r.body["sha"], "commit")["parents"][0] == head
    r = call(gh.url, "POST", "/_fake/update_branch", {"repo": gh.full, "number": number})
    assert (r.status, r.body["message"]) == (422, "There are no new commits on the base branch.")
    # A pull request now ahead of main and compared as the product does.
    r = gh("GET", "/repos/{repo}/compare/main...cellbridge%2Fw")
    assert (r.body["status"], r.body["behind_by"]) == ("ahead", 0)


def test_a_badly_formed_call_is_recorded(gh):
    """The conformance check itself still bites (then forgotten, so the fixture's check holds)."""
    r = gh("POST", "/repos/{repo}/merges", {"base": "main"})
    assert r.status == 422
    seen = call(gh.url, "GET", "/_fake/conformance").body
    assert any(v["op"] == "repos/merge" and v["check"] == "body" for v in seen["violations"])
    assert seen["operations"].get("repos/merge") == 1
    call(gh.url, "DELETE", "/_fake/conformance")


# plain issues ---------------------------------------------------------------------------------------

def header(answer, name):
    return next((v for k, v in answer.headers.items() if k.lower() == name.lower()), None)


def new_issue(gh, title="drift", **fields):
    r = gh("POST", "/repos/{repo}/issues", dict({"title": title}, **fields))
    assert r.status == 201, r
    return r.body


def test_issues_share_numbers_with_pull_requests_and_are_listed_with_them(gh):
    pull = open_pull(gh, "cellbridge/i")
    issue = new_issue(gh, "cell drifted", body="details", labels=["drift", {"name": "cell:eu-1"}])
    assert (pull, issue["number"]) == (1, 2), "one sequence of numbers per repository"
    assert (issue["state"], issue["title"], issue["body"]) == ("open", "cell drifted", "details")
    assert sorted(label["name"] for label in issue["labels"]) == ["cell:eu-1", "drift"]
    assert issue["html_url"].endswith(f"/{gh.full}/issues/2") and "pull_request" not in issue
    r = gh("GET", "/repos/{repo}/issues")
    assert r.status == 200
    assert [i["number"] for i in r.body] == [2, 1], "created, newest first"
    assert "pull_request" in r.body[1] and "pull_request" not in r.body[0]
    assert gh("GET", "/repos/{repo}/issues/2").body["title"] == "cell drifted"
    assert gh("GET", "/repos/{repo}/pulls/2").status == 404, "a plain issue is no pull request"
    assert state(gh)["issues"] == [{"number": 2, "title": "cell drifted", "body": "details",
                                    "labels": ["cell:eu-1", "drift"], "state": "open", "state_reason": None,
                                    "comments": []}]
    assert [p["number"] for p in state(gh)["pulls"]] == [1]


def test_issue_list_filters_by_state_and_every_label_and_pages(gh):
    for n in range(5):
        new_issue(gh, f"drift report {n}", labels=["drift"] + (["cell:a"] if n % 2 == 0 else []))
    r = gh("GET", "/repos/{repo}/issues?labels=drift,cell:a")
    assert [i["title"] for i in r.body] == ["drift report 4", "drift report 2", "drift report 0"], "every label, newest first"
    r = gh("GET", "/repos/{repo}/issues?per_page=2&direction=asc")
    assert [i["title"] for i in r.body] == ["drift report 0", "drift report 1"]
    link = header(r, "Link")
    assert 'rel="next"' in link and "page=3" in link and 'rel="last"' in link
    r = gh("GET", "/repos/{repo}/issues?per_page=2&page=3&direction=asc")
    assert [i["title"] for i in r.body] == ["drift report 4"] and 'rel="prev"' in header(r, "Link")
    assert gh("PATCH", "/repos/{repo}/issues/1", {"state": "closed"}).status == 200
    assert [i["number"] for i in gh("GET", "/repos/{repo}/issues?state=closed").body] == [1]
    assert len(gh("GET", "/repos/{repo}/issues?state=all").body) == 5
    assert len(gh("GET", "/repos/{repo}/issues").body) == 4, "open by default"


def test_an_issue_is_updated_closed_reopened_and_commented(gh):
    number = new_issue(gh, "old", labels=["a", "b"])["number"]
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"title": "new", "body": "text", "labels": ["c"]})
    assert r.status == 200 and (r.body["title"], r.body["body"]) == ("new", "text")
    assert [label["name"] for label in r.body["labels"]] == ["c"], "labels are replaced"
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"state": "closed"})
    assert (r.body["state"], r.body["state_reason"]) == ("closed", "completed") and r.body["closed_at"]
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"state": "open"})
    assert (r.body["state"], r.body["state_reason"], r.body["closed_at"]) == ("open", "reopened", None)
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"state": "closed", "state_reason": "not_planned"})
    assert r.body["state_reason"] == "not_planned"
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"state_reason": "completed"})
    assert r.body["state_reason"] == "not_planned", "ignored unless the state changes"
    r = gh("POST", f"/repos/{{repo}}/issues/{number}/comments", {"body": "seen"})
    assert r.status == 201 and f"/issues/{number}#issuecomment-" in r.body["html_url"]
    assert gh("POST", f"/repos/{{repo}}/issues/{number}/labels", {"labels": ["d"]}).status == 200
    assert state(gh)["issues"][0] == {"number": number, "title": "new", "body": "text", "labels": ["c", "d"],
                                      "state": "closed", "state_reason": "not_planned", "comments": ["seen"]}
    assert gh("PATCH", "/repos/{repo}/issues/99", {"state": "closed"}).status == 404


def test_issue_refusals(gh):
    r = gh("POST", "/repos/{repo}/issues", {"title": " "})
    assert (r.status, r.body["message"]) == (422, "Validation Failed")
    gf.seed({"repo": gh.full, "branch": "main", "files": {"a.txt": "a\n"}, "has_issues": False})
    r = gh("POST", "/repos/{repo}/issues", {"title": "x"})
    assert (r.status, r.body["message"]) == (410, "Issues are disabled for this repo")
    gf.seed({"repo": gh.full, "branch": "main", "files": {"a.txt": "a\n"}, "has_issues": True})
    assert new_issue(gh)["number"] == 1, "refused ones take no number"


def test_an_issue_body_is_at_most_65536_characters_and_issues_turned_off_refuse_updates(gh):
    # Characters, not bytes: 65,536 two-byte characters are taken, one more is not.
    number = new_issue(gh, "dashboard", body="é" * 65536)["number"]
    r = gh("POST", "/repos/{repo}/issues", {"title": "x", "body": "a" * 65537})
    assert r.status == 422 and r.body["errors"][0]["message"] == "body is too long (maximum is 65536 characters)", r
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"body": "a" * 65537})
    assert r.status == 422 and r.body["errors"][0]["field"] == "body", r
    assert gf.REPOS[gh.full]["issues"][number]["body"] == "é" * 65536, "nothing written"
    r = gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"state": "closed", "state_reason": "duplicate"})
    assert (r.body["state"], r.body["state_reason"]) == ("closed", "duplicate")
    gf.seed({"repo": gh.full, "branch": "main", "files": {"a.txt": "a\n"}, "has_issues": False})
    assert gh("PATCH", f"/repos/{{repo}}/issues/{number}", {"body": "x"}).status == 410
    assert [i["number"] for i in gh("GET", "/repos/{repo}/issues?state=all").body] == [number], "still listed"


def test_open_pull_requests_are_listed_oldest_first_with_their_head_and_time(gh):
    first, second = open_pull(gh, "cellbridge/a"), open_pull(gh, "people/b")
    r = gh("GET", "/repos/{repo}/pulls?state=open&sort=created&direction=asc&per_page=1&page=2")
    assert [p["number"] for p in r.body] == [second], r
    r = gh("GET", "/repos/{repo}/pulls?state=open&sort=created&direction=asc&per_page=100")
    assert [p["number"] for p in r.body] == [first, second]
    owner = gh.full.split("/")[0]
    assert r.body[0]["head"]["label"] == f"{owner}:cellbridge/a" and r.body[0]["created_at"].endswith("Z")


# permissions of fine-grained actors -----------------------------------------------------------------

def app_jwt(iss=None):
    """A JWT of the fake's App (signed with its key when the fake has one), issued by its id or
    `iss`."""
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    now = int(gf.time.time())
    iss = gf.APP["app_id"] if iss is None else iss
    signed = enc({"alg": "RS256", "typ": "JWT"}) + "." + enc({"iat": now - 60, "exp": now + 540, "iss": iss})
    sig = b"not-verified"
    if gf.APP["private_key"] is not None:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        key = serialization.load_pem_private_key(gf.APP["private_key"].encode(), None)
        sig = key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signed + "." + base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


@pytest.fixture
def app(gh):
    """The App's installation, restored after the test; `set(...)` drives POST /_fake/app."""
    saved = dict(permissions=dict(gf.APP["permissions"]), repositories=gf.APP["repositories"])

    def as_app(method, path, body=None):
        return gh(method, path, body, headers={"Authorization": f"Bearer {app_jwt()}"})

    def set_app(**body):
        r = call(gh.url, "POST", "/_fake/app", body)
        assert r.status == 200, r
        return r.body

    def token(**body):
        r = as_app("POST", f"/app/installations/{gf.APP['installation_id']}/access_tokens", body or None)
        return r

    as_app.set, as_app.token = set_app, token
    yield as_app
    gf.APP.update(saved)


def as_token(tok):
    return {"Authorization": f"Bearer {tok}"}


def test_the_installation_and_its_tokens_carry_its_permissions(gh, app):
    r = app("GET", f"/app/installations/{gf.APP['installation_id']}")
    assert r.status == 200, r
    assert r.body["permissions"] == gf.DEFAULT_APP_PERMISSIONS
    assert (r.body["id"], r.body["repository_selection"]) == (gf.APP["installation_id"], "all")
    assert app("GET", f"/app/installations/{gf.APP['installation_id'] + 1}").status == 404
    assert gh("GET", f"/app/installations/{gf.APP['installation_id']}").status == 401, "a token is no JWT"
    body = app.set(permissions={"metadata": "read", "contents": "read"}, repositories=[gh.full])
    assert (body["permissions"], body["repositories"]) == ({"metadata": "read", "contents": "read"}, [gh.full])
    r = app("GET", f"/app/installations/{gf.APP['installation_id']}")
    assert (r.body["permissions"], r.body["repository_selection"]) == ({"metadata": "read", "contents": "read"}, "selected")
    r = app.token()
    assert r.status == 201 and r.body["permissions"] == {"metadata": "read", "contents": "read"}
    assert r.body["repository_selection"] == "selected"
    assert call(gh.url, "GET", "/_fake/app").body["repositories"] == [gh.full]


def test_an_installation_token_without_the_permission_is_403_with_the_accepted_ones(gh, app):
    number = open_pull(gh, "cellbridge/p")
    sha = sha_of(gh, "cellbridge/p")
    app.set(permissions={"metadata": "read", "contents": "write", "pull_requests": "write"})
    tok = app.token().body["token"]
    r = gh("POST", f"/repos/{{repo}}/statuses/{sha}", {"state": "success", "context": "cellbridge"}, headers=as_token(tok))
    assert (r.status, r.body["message"]) == (403, "Resource not accessible by integration")
    assert r.body["documentation_url"].startswith("https://docs.github.com/")
    assert header(r, "X-Accepted-GitHub-Permissions") == "statuses=write"
    r = gh("GET", "/repos/{repo}", headers=as_token(tok))
    assert r.status == 200 and header(r, "X-Accepted-GitHub-Permissions") == "metadata=read"
    # Either permission of the issue endpoints will do for a pull request's conversation.
    r = gh("POST", f"/repos/{{repo}}/issues/{number}/comments", {"body": "hi"}, headers=as_token(tok))
    assert r.status == 201 and header(r, "X-Accepted-GitHub-Permissions") == "issues=write; pull_requests=write"
    r = gh("POST", "/repos/{repo}/issues", {"title": "x"}, headers=as_token(tok))
    assert (r.status, header(r, "X-Accepted-GitHub-Permissions")) == (403, "issues=write")
    assert gh("GET", "/repos/{repo}/issues", headers=as_token(tok)).status == 403
    # The installation's permissions at the time of each request.
    app.set(permissions=dict(gf.DEFAULT_APP_PERMISSIONS))
    r = gh("POST", f"/repos/{{repo}}/statuses/{sha}", {"state": "success", "context": "cellbridge"}, headers=as_token(tok))
    assert r.status == 201, r
    app.set(permissions={"metadata": "read", "contents": "read"})
    r = gh("POST", "/repos/{repo}/git/refs", {"ref": "refs/heads/x", "sha": sha}, headers=as_token(tok))
    assert (r.status, header(r, "X-Accepted-GitHub-Permissions")) == (403, "contents=write")
    assert "heads/x" not in gf.REPOS[gh.full]["refs"]


def test_a_token_asks_for_fewer_permissions_never_more(gh, app):
    app.set(permissions={"metadata": "read", "contents": "write"})
    r = app.token(permissions={"issues": "write"})
    assert (r.status, r.body["message"]) == (422, "The permissions requested are not granted to this installation.")
    r = app.token(permissions={"contents": "read"})
    assert r.status == 201 and r.body["permissions"] == {"contents": "read"}
    tok = r.body["token"]
    assert gh("GET", "/repos/{repo}/git/ref/heads/main", headers=as_token(tok)).status == 200
    r = gh("POST", "/repos/{repo}/git/refs", {"ref": "refs/heads/y", "sha": sha_of(gh, "main")}, headers=as_token(tok))
    assert r.status == 403
    r = app.token(repositories=["no-such-repo"])
    assert r.status == 422


def test_a_fine_grained_personal_access_token_is_checked_too(gh):
    tok = "github_pat_fake_not_a_credential"
    assert call(gh.url, "POST", "/_fake/tokens", {"token": tok, "permissions": {"contents": "read"}}).status == 201
    try:
        r = gh("GET", "/repos/{repo}/git/ref/heads/main", headers=as_token(tok))
        assert r.status == 200 and header(r, "X-Accepted-GitHub-Permissions") == "contents=read"
        r = gh("POST", "/repos/{repo}/git/refs", {"ref": "refs/heads/z", "sha": sha_of(gh, "main")}, headers=as_token(tok))
        assert (r.status, r.body["message"]) == (403, "Resource not accessible by personal access token")
        assert header(r, "X-Accepted-GitHub-Permissions") == "contents=write"
        assert gh("GET", "/repos/{repo}", headers=as_token(tok)).status == 200, "any repository permission reads metadata"
    finally:
        call(gh.url, "DELETE", "/_fake/tokens", {"token": tok})
    assert gh("GET", "/repos/{repo}", headers=as_token(tok)).status == 401


def test_a_repository_outside_the_selection_is_404_for_an_installation_token(gh, app):
    other = f"acme/other-{next(_REPOS)}"
    gf.seed({"repo": other, "branch": "main", "files": {"x": "x\n"}})
    app.set(repositories=[other])
    tok = app.token().body["token"]
    for method, path, body in (("GET", "/repos/{repo}", None), ("GET", "/repos/{repo}/pulls", None),
                               ("POST", "/repos/{repo}/issues", {"title": "x"})):
        r = gh(method, path, body, headers=as_token(tok))
        assert (r.status, r.body["message"]) == (404, "Not Found"), (method, path)
    assert gh("GET", f"/repos/{other}", headers=as_token(tok)).status == 200
    assert state(gh)["issues"] == []
    app.set(repositories=None)
    assert gh("GET", "/repos/{repo}", headers=as_token(tok)).status == 200, "all repositories again"


def test_the_apps_jwt_may_be_issued_by_its_client_id_or_its_id_and_no_other(gh, app):
    path = f"/app/installations/{gf.APP['installation_id']}"
    for iss in (gf.APP["client_id"], gf.APP["app_id"]):
        assert gh("GET", path, headers={"Authorization": f"Bearer {app_jwt(iss)}"}).status == 200, iss
    r = gh("GET", path, headers={"Authorization": f"Bearer {app_jwt('Iv23liSomeoneElse')}"})
    assert r.status == 401 and "client id" in r.body["message"]
    assert call(gh.url, "GET", "/_fake/app").body["client_id"] == gf.APP["client_id"]


def test_a_token_with_an_expiry_is_named_in_every_answer_and_refused_after_it(gh):
    tok, forever = "ghp_fake_expiring_not_a_credential", "ghp_fake_forever_not_a_credential"
    assert call(gh.url, "POST", "/_fake/tokens", {"token": tok, "expires_at": "2099-12-19T08:30:00Z"}).status == 201
    assert call(gh.url, "POST", "/_fake/tokens", {"token": forever}).status == 201
    try:
        r = gh("GET", "/repos/{repo}", headers=as_token(tok))
        assert r.status == 200 and header(r, "GitHub-Authentication-Token-Expiration") == "2099-12-19 08:30:00 UTC"
        r = gh("GET", "/repos/{repo}/pulls/99999", headers=as_token(tok))
        assert r.status == 404 and header(r, "GitHub-Authentication-Token-Expiration") == "2099-12-19 08:30:00 UTC"
        assert header(gh("GET", "/repos/{repo}", headers=as_token(forever)), "GitHub-Authentication-Token-Expiration") is None
        call(gh.url, "POST", "/_fake/tokens", {"token": tok, "expires_at": "2001-01-01T00:00:00Z"})
        assert gh("GET", "/repos/{repo}", headers=as_token(tok)).status == 401
    finally:
        call(gh.url, "DELETE", "/_fake/tokens", {"token": tok})
        call(gh.url, "DELETE", "/_fake/tokens", {"token": forever})


def test_a_classic_token_is_not_checked(gh, app):
    app.set(permissions={"metadata": "read"}, repositories=[])
    r = gh("POST", "/repos/{repo}/issues", {"title": "by a person"})
    assert r.status == 201 and header(r, "X-Accepted-GitHub-Permissions") is None


def test_every_operation_of_the_permission_table_is_in_the_description_and_counted(gh, app):
    desc = gf.SPEC["description"]
    assert [op for op in gf.PERMISSIONS if desc.operation(op) is None] == []
    new_issue(gh)
    gh("GET", "/repos/{repo}/issues")
    app("GET", f"/app/installations/{gf.APP['installation_id']}")
    ops = call(gh.url, "GET", "/_fake/conformance").body["operations"]
    assert {"issues/create", "issues/list-for-repo", "apps/get-installation"} <= set(ops)


def test_a_cut_download_announces_the_whole_body_and_sends_part_of_it(gh):
    """`cut_after`: the archive's headers say how long it is, the connection closes sooner."""
    import http.client
    from urllib.parse import urlsplit
    sha = sha_of(gh, "main")
    call(gh.url, "POST", "/_fake/faults", {"cut_after": 100, "match": "GET /_codeload/*", "times": 1})
    host = urlsplit(gh.url).netloc
    # The download URL is the API's redirect (it carries a token).
    conn = http.client.HTTPConnection(host)
    prefix = gf.SPEC["description"].prefix
    conn.request("GET", f"{prefix}/repos/{gh.full}/tarball/{sha}", headers={
        "User-Agent": "cellbridge-tests", "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28", "Authorization": f"Bearer {TOKEN}"})
    r = conn.getresponse()
    r.read()
    assert r.status == 302, r.status
    path = urlsplit(r.headers["Location"]).path + "?" + urlsplit(r.headers["Location"]).query
    conn.close()
    conn = http.client.HTTPConnection(host)
    conn.request("GET", path, headers={"User-Agent": "cellbridge-tests"})
    r = conn.getresponse()
    announced = int(r.headers["Content-Length"])
    with pytest.raises(http.client.IncompleteRead) as cut:
        r.read()
    assert len(cut.value.partial) == 100 < announced
    conn.close()
    # Once only: the next download is whole.
    conn = http.client.HTTPConnection(host)
    conn.request("GET", path, headers={"User-Agent": "cellbridge-tests"})
    r = conn.getresponse()
    assert len(r.read()) == int(r.headers["Content-Length"])
    call(gh.url, "DELETE", "/_fake/faults")


# auto-merge: GraphQL checked against GitHub's schema, branch protection, auto-merge --

MERGE_STATE = """query pullRequestMergeState($owner: String!, $name: String!, $number: Int!) {
  viewer { login }
  repository(owner: $owner, name: $name) {
    autoMergeAllowed
    pullRequest(number: $number) {
      id state headRefOid mergeStateStatus
      autoMergeRequest { enabledBy { login } mergeMethod }
      commits(last: 1) { nodes { commit { oid statusCheckRollup { contexts(first: 100) {
        nodes { __typename ... on StatusContext { context state isRequired(pullRequestNumber: $number) } } } } } } }
    }
  }
}"""
ENABLE = """mutation enablePullRequestAutoMerge($pullRequestId: ID!, $expectedHeadOid: GitObjectID!) {
  enablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) {
    pullRequest { autoMergeRequest { enabledBy { login } mergeMethod } }
  }
}"""


def graphql(gh, query, variables, name=None):
    path = gf.graphql_path()
    body = {"query": query, "variables": variables}
    if name:
        body["operationName"] = name
    return call(gh.url, "POST", path, body)


def test_a_site_lacking_a_field_refuses_the_whole_document_as_github_does(gh):
    owner, name = gh.full.split("/")
    query = ("query baseRules($owner: String!, $name: String!) { repository(owner: $owner, name: $name) {"
             " ref(qualifiedName: \"refs/heads/main\") { refUpdateRule { requiresSignatures }"
             " rules(first: 100) { nodes { type } } } } }")
    assert call(gh.url, "POST", "/_fake/schema", {"lacks": ["Ref.rules"]}).status == 200
    try:
        r = graphql(gh, query, {"owner": owner, "name": name})
        assert r.status == 200 and r.body["data"] is None, r
        assert r.body["errors"] == [{
            "path": ["query baseRules", "repository", "ref", "rules"],
            "extensions": {"code": "undefinedField", "typeName": "Ref", "fieldName": "rules"},
            "locations": [{"line": 1, "column": query.index("rules(") + 1}],
            "message": "Field 'rules' doesn't exist on type 'Ref'",
        }], r.body
        # Without the field, the same site answers.
        short = query.replace(" rules(first: 100) { nodes { type } }", "")
        r = graphql(gh, short, {"owner": owner, "name": name})
        assert r.status == 200 and "errors" not in r.body, r
    finally:
        call(gh.url, "POST", "/_fake/schema", {"lacks": []})
    r = graphql(gh, query, {"owner": owner, "name": name})
    assert r.status == 200 and "errors" not in r.body, r


def merge_state_of(gh, number):
    owner, name = gh.full.split("/")
    r = graphql(gh, MERGE_STATE, {"owner": owner, "name": name, "number": number})
    assert r.status == 200 and "errors" not in r.body, r
    return r.body["data"]


def protect(gh, contexts, approvals=0, strict=False):
    body = {"required_status_checks": {"strict": strict, "contexts": contexts}, "enforce_admins": True,
            "required_pull_request_reviews": {"required_approving_review_count": approvals} if approvals else None,
            "restrictions": None}
    r = gh("PUT", "/repos/{repo}/branches/main/protection", body)
    assert r.status == 200, r


def allow(gh, on=True):
    if gf.SPEC["description"].flavor == "ghes":
        r = call(gh.url, "POST", "/_fake/settings", {"repo": gh.full, "allow_auto_merge": on})
    else:
        r = gh("PATCH", "/repos/{repo}", {"allow_auto_merge": on})
    assert r.status == 200 and r.body["allow_auto_merge"] is on, r


def test_auto_merge_waits_for_the_required_status_and_merges_as_who_enabled_it(gh):
    protect(gh, ["ci/build"])
    allow(gh)
    n = open_pull(gh, "topic")
    data = merge_state_of(gh, n)
    pr = data["repository"]["pullRequest"]
    assert (data["viewer"]["login"], data["repository"]["autoMergeAllowed"]) == (gf.DEFAULT_LOGIN, True)
    assert (pr["state"], pr["mergeStateStatus"], pr["autoMergeRequest"]) == ("OPEN", "BLOCKED", None)
    assert pr["commits"]["nodes"][0]["commit"] == {"oid": sha_of(gh, "topic"), "statusCheckRollup": None}
    r = graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": sha_of(gh, "topic")})
    assert r.body == {"data": {"enablePullRequestAutoMerge": {"pullRequest": {"autoMergeRequest": {
        "enabledBy": {"login": gf.DEFAULT_LOGIN}, "mergeMethod": "MERGE"}}}}}, r
    # A status no rule requires: still blocked on ci/build, listed as not required.
    assert gh("POST", f"/repos/{{repo}}/statuses/{sha_of(gh, 'topic')}", {"state": "pending", "context": "lint"}).status == 201
    contexts = merge_state_of(gh, n)["repository"]["pullRequest"]["commits"]["nodes"][0]["commit"]["statusCheckRollup"]["contexts"]["nodes"]
    assert contexts == [{"__typename": "StatusContext", "context": "lint", "state": "PENDING", "isRequired": False}]
    assert state(gh)["pulls"][0]["state"] == "open"
    # The required status turns success: GitHub's auto-merge merges it (UNSTABLE: lint pending).
    assert gh("POST", f"/repos/{{repo}}/statuses/{sha_of(gh, 'topic')}", {"state": "success", "context": "ci/build"}).status == 201
    pull = state(gh)["pulls"][0]
    assert (pull["state"], pull["merged"], pull["merged_by"], pull["auto_merge"]) == ("closed", True, gf.DEFAULT_LOGIN, None)
    assert merge_state_of(gh, n)["repository"]["pullRequest"]["state"] == "MERGED"


def test_enabling_is_refused_for_a_pull_request_that_can_merge_now_or_a_repository_that_does_not_allow_it(gh):
    n = open_pull(gh, "topic")
    pr = merge_state_of(gh, n)["repository"]["pullRequest"]
    r = graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert r.body["data"] == {"enablePullRequestAutoMerge": None}
    assert (r.body["errors"][0]["type"], r.body["errors"][0]["message"]) == (
        "UNPROCESSABLE", "Auto merge is not allowed for this repository"), r
    allow(gh)
    assert pr["mergeStateStatus"] == "CLEAN"
    r = graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert r.body["errors"][0]["message"] == "Pull request Pull request is in clean status", r
    protect(gh, ["ci/build"])
    r = graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": "0" * 40})
    assert "expected head oid" in r.body["errors"][0]["message"], r
    assert r.body["errors"][0]["path"] == ["enablePullRequestAutoMerge"]


# merge queues ---------------------------------------------------------------------------------

QUEUE_STATE = """query queueState($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      id headRefOid isInMergeQueue isMergeQueueEnabled autoMergeRequest { mergeMethod }
      mergeQueue { configuration { mergeMethod } }
      mergeQueueEntry { state enqueuer { __typename login } }
    }
  }
}"""
ENABLE_WITH_METHOD = """mutation enableWithMethod($pullRequestId: ID!) {
  enablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId, mergeMethod: SQUASH}) { clientMutationId }
}"""
ENQUEUE = """mutation enqueuePullRequest($pullRequestId: ID!, $expectedHeadOid: GitObjectID!) {
  enqueuePullRequest(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) { mergeQueueEntry { state } }
}"""
DEQUEUE = """mutation dequeuePullRequest($id: ID!) { dequeuePullRequest(input: {id: $id}) { mergeQueueEntry { state } } }"""


def queue_state(gh, number):
    owner, name = gh.full.split("/")
    r = graphql(gh, QUEUE_STATE, {"owner": owner, "name": name, "number": number})
    assert r.status == 200 and "errors" not in r.body, r
    return r.body["data"]["repository"]["pullRequest"]


def require_queue(gh, method):
    r = call(gh.url, "POST", "/_fake/merge_queue", {"repo": gh.full, "branch": "main", "merge_method": method})
    assert r.status == 200, r


def merge_group(gh, number):
    """The `merge_group` event GitHub sends for pull request `number`'s queue entry, or None."""
    pull = next(p for p in state(gh)["pulls"] if p["number"] == number)
    return (pull["merge_queue_entry"] or {}).get("merge_group")


def queue_ci(gh, number, passed, context="ci/build"):
    """The CI reports `context` on the entry's merge group commit as a CI would (a commit
    status); whether the queue merged the pull request."""
    group = merge_group(gh, number)
    if group is None:
        return False
    st = "success" if passed else "failure"
    r = gh("POST", f"/repos/{{repo}}/statuses/{group['head_sha']}", {"state": st, "context": context})
    assert r.status == 201, r
    return next(p for p in state(gh)["pulls"] if p["number"] == number)["merged"]


def test_with_a_queue_auto_merge_takes_no_method_and_queues_once_requirements_are_met(gh):
    protect(gh, ["ci/build"], strict=True)
    allow(gh)
    require_queue(gh, "squash")
    n = open_pull(gh, "topic")
    pr = queue_state(gh, n)
    assert (pr["isMergeQueueEnabled"], pr["mergeQueue"], pr["mergeQueueEntry"]) == (
        True, {"configuration": {"mergeMethod": "SQUASH"}}, None)
    r = graphql(gh, ENABLE_WITH_METHOD, {"pullRequestId": pr["id"]})
    assert r.body["errors"][0]["message"] == "The merge strategy for main is set by the merge queue", r
    r = graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert "errors" not in r.body and queue_state(gh, n)["autoMergeRequest"] == {"mergeMethod": "SQUASH"}, r
    # Main moves (the head is behind a strict base): the queue, not the author, sees to that.
    commit(gh.full, "main", {"c.txt": "c\n"})
    assert gh("POST", f"/repos/{{repo}}/statuses/{sha_of(gh, 'topic')}", {"state": "success", "context": "ci/build"}).status == 201
    pr = queue_state(gh, n)
    assert (pr["isInMergeQueue"], pr["autoMergeRequest"], pr["mergeQueueEntry"]) == (
        True, None, {"state": "AWAITING_CHECKS", "enqueuer": {"__typename": "User", "login": gf.DEFAULT_LOGIN}}), pr
    # Nobody merges it outside the queue.
    assert refused_merge(gh, n).body["message"] == "Changes must be made through the merge queue."
    # The head's own checks are not the queue's: it waits for them on the merge group's commit.
    assert queue_state(gh, n)["mergeQueueEntry"] is not None and not state(gh)["pulls"][0]["merged"]
    assert queue_ci(gh, n, True)
    pull = state(gh)["pulls"][0]
    assert (pull["merged"], pull["merged_by"], pull["merge_queue_entry"]) == (True, gf.DEFAULT_LOGIN, None)
    main = files(gh.full, "main")
    assert main.get("topic.yaml") == "vpc: 1\n" and main.get("c.txt") == "c\n"


def refused_merge(gh, n):
    r = gh("PUT", f"/repos/{{repo}}/pulls/{n}/merge", {"merge_method": "merge"})
    assert r.status == 405, r
    return r


def test_enqueue_needs_every_requirement_and_a_push_or_failed_checks_take_the_entry_out(gh):
    protect(gh, ["ci/build"])
    require_queue(gh, "merge")
    n = open_pull(gh, "topic")
    pr = queue_state(gh, n)
    r = graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert r.body["errors"][0]["message"] == 'Pull request Required status check "ci/build" is expected.', r
    assert gh("POST", f"/repos/{{repo}}/statuses/{sha_of(gh, 'topic')}", {"state": "success", "context": "ci/build"}).status == 201
    # Nothing to wait for: auto-merge is refused as without a queue, enqueueing is the way.
    allow(gh)
    r = graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert r.body["errors"][0]["message"] == "Pull request Pull request is in clean status", r
    r = graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": "0" * 40})
    assert "expected head oid" in r.body["errors"][0]["message"], r
    r = graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert r.body == {"data": {"enqueuePullRequest": {"mergeQueueEntry": {"state": "AWAITING_CHECKS"}}}}, r
    r = graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]})
    assert r.body["errors"][0]["message"] == "Pull request is already in the queue", r
    # A push: the entry was for the old head.
    commit(gh.full, "topic", {"more.yaml": "x\n"})
    assert queue_state(gh, n)["mergeQueueEntry"] is None
    assert merge_group(gh, n) is None
    # Queued again, the queue's checks fail: out, not merged.
    assert gh("POST", f"/repos/{{repo}}/statuses/{sha_of(gh, 'topic')}", {"state": "success", "context": "ci/build"}).status == 201
    head = sha_of(gh, "topic")
    assert "errors" not in graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": head}).body
    assert not queue_ci(gh, n, False)
    assert (queue_state(gh, n)["mergeQueueEntry"], state(gh)["pulls"][0]["state"]) == (None, "open")
    # Dequeued by its enqueuer; dequeuing what is not queued is refused.
    assert "errors" not in graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": head}).body
    assert graphql(gh, DEQUEUE, {"id": pr["id"]}).body == {"data": {"dequeuePullRequest": {"mergeQueueEntry": {"state": "AWAITING_CHECKS"}}}}
    r = graphql(gh, DEQUEUE, {"id": pr["id"]})
    assert r.body["errors"][0]["message"] == "Pull request is not in the merge queue", r
    assert merge_group(gh, n) is None and not [b for b in state(gh)["branches"] if b.startswith("gh-readonly-queue/")]


def test_a_queue_entry_is_a_merge_group_commit_the_base_required_checks_judge(gh):
    protect(gh, ["ci/build"])
    require_queue(gh, "merge")
    n = open_pull(gh, "topic")
    head = sha_of(gh, "topic")
    assert gh("POST", f"/repos/{{repo}}/statuses/{head}", {"state": "success", "context": "ci/build"}).status == 201
    commit(gh.full, "main", {"c.txt": "c\n"})
    base = sha_of(gh, "main")
    pr = queue_state(gh, n)
    assert "errors" not in graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": head}).body
    group = merge_group(gh, n)
    ref = f"refs/heads/gh-readonly-queue/main/pr-{n}-{base}"
    assert (group["head_ref"], group["base_sha"], group["base_ref"]) == (ref, base, "refs/heads/main"), group
    assert not gf.schema_errors("merge-group", group)  # the merge_group event's object
    assert gf.schema_errors("merge-group", {k: v for k, v in group.items() if k != "head_commit"})
    # The group's commit is the head merged with the latest base, read like any commit.
    r = gh("GET", f"/repos/{{repo}}/git/ref/{ref[len('refs/'):]}")
    assert r.status == 200 and r.body["object"]["sha"] == group["head_sha"], r
    c = gh("GET", f"/repos/{{repo}}/git/commits/{group['head_sha']}")
    assert [p["sha"] for p in c.body["parents"]] == [base, head], c
    tree = gh("GET", f"/repos/{{repo}}/git/trees/{c.body['tree']['sha']}?recursive=1").body["tree"]
    assert {"c.txt", "topic.yaml"} <= {t["path"] for t in tree}, tree
    blob = next(t for t in tree if t["path"] == "topic.yaml")["sha"]
    assert gh("GET", f"/repos/{{repo}}/git/blobs/{blob}").status == 200
    # The base moves before CI reports: a new group on the new base, the old one's branch gone.
    commit(gh.full, "main", {"d.txt": "d\n"})
    again = merge_group(gh, n)
    assert again["base_sha"] == sha_of(gh, "main") and again["head_sha"] != group["head_sha"], again
    assert gh("GET", f"/repos/{{repo}}/git/ref/{group['head_ref'][len('refs/'):]}").status == 404
    # A status on the old group's commit is not the new group's.
    assert gh("POST", f"/repos/{{repo}}/statuses/{group['head_sha']}", {"state": "success", "context": "ci/build"}).status == 201
    assert not state(gh)["pulls"][0]["merged"]
    assert queue_ci(gh, n, True)
    assert sha_of(gh, "main") == again["head_sha"], "the base fast-forwarded to the group's commit"
    assert not [b for b in state(gh)["branches"] if b.startswith("gh-readonly-queue/")]


def test_a_merge_group_that_conflicts_with_the_base_leaves_the_queue(gh):
    protect(gh, ["ci/build"])
    require_queue(gh, "squash")
    n = open_pull(gh, "topic", changes={"shared.txt": "theirs\n"})
    head = sha_of(gh, "topic")
    assert gh("POST", f"/repos/{{repo}}/statuses/{head}", {"state": "success", "context": "ci/build"}).status == 201
    pr = queue_state(gh, n)
    assert "errors" not in graphql(gh, ENQUEUE, {"pullRequestId": pr["id"], "expectedHeadOid": head}).body
    assert merge_group(gh, n) is not None
    commit(gh.full, "main", {"shared.txt": "ours\n"})
    pull = state(gh)["pulls"][0]
    assert (pull["merge_queue_entry"], pull["state"], pull["merged"]) == (None, "open", False), pull


def test_a_document_or_variables_github_would_refuse_are_violations(gh):
    r = graphql(gh, "query pullRequestMergeState { viewer { login nonsense } }", {})
    assert r.status == 200 and "data" not in r.body and "nonsense" in r.body["errors"][0]["message"], r
    r = graphql(gh, ENABLE, {"pullRequestId": 7, "expectedHeadOid": None})
    assert "data" not in r.body, r
    r = graphql(gh, "{ viewer { login } }", {})
    v = call(gh.url, "GET", "/_fake/conformance").body["violations"]
    checks = [(x["check"], x["op"]) for x in v]
    assert checks[0] == ("graphql", "graphql/pullRequestMergeState"), v
    assert ("graphql", "graphql/enablePullRequestAutoMerge") in checks, v
    assert any("anonymous" in x["detail"] for x in v), v
    assert any("variables" in x["detail"] for x in v), v
    call(gh.url, "DELETE", "/_fake/conformance")


def test_merging_is_held_to_the_protection_and_the_head(gh):
    protect(gh, ["ci/build"], approvals=1)
    n = open_pull(gh, "topic")
    head = sha_of(gh, "topic")
    r = gh("PUT", f"/repos/{{repo}}/pulls/{n}/merge", {"sha": head})
    assert (r.status, r.body["message"]) == (405, 'Required status check "ci/build" is expected.'), r
    gh("POST", f"/repos/{{repo}}/statuses/{head}", {"state": "success", "context": "ci/build"})
    r = gh("PUT", f"/repos/{{repo}}/pulls/{n}/merge", {"sha": head})
    assert (r.status, r.body["message"]) == (405, "At least 1 approving review is required by reviewers with write access."), r
    assert gh("POST", f"/repos/{{repo}}/pulls/{n}/reviews", {"event": "APPROVE"}).status == 200
    r = gh("PUT", f"/repos/{{repo}}/pulls/{n}/merge", {"sha": "0" * 40})
    assert r.status == 409, r
    r = gh("PUT", f"/repos/{{repo}}/pulls/{n}/merge", {"sha": head})
    assert r.status == 200 and r.body["merged"], r


def test_a_strict_base_blocks_a_head_behind_it(gh):
    protect(gh, ["ci/build"], strict=True)
    n = open_pull(gh, "topic")
    gh("POST", f"/repos/{{repo}}/statuses/{sha_of(gh, 'topic')}", {"state": "success", "context": "ci/build"})
    commit(gh.full, "main", {"OWNERS": "platform\n"})
    assert merge_state_of(gh, n)["repository"]["pullRequest"]["mergeStateStatus"] == "BEHIND"
    r = gh("PUT", f"/repos/{{repo}}/pulls/{n}/merge", {})
    assert (r.status, r.body["message"]) == (405, "1 of 1 required status checks are expected."), r


def test_closing_cancels_auto_merge_and_disabling_is_fine_twice(gh):
    protect(gh, ["ci/build"])
    allow(gh)
    n = open_pull(gh, "topic")
    pr = merge_state_of(gh, n)["repository"]["pullRequest"]
    assert "errors" not in graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]}).body
    disable = """mutation disablePullRequestAutoMerge($pullRequestId: ID!) {
      disablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId}) { pullRequest { autoMergeRequest { mergeMethod } } } }"""
    for _ in range(2):
        r = graphql(gh, disable, {"pullRequestId": pr["id"]})
        assert r.body == {"data": {"disablePullRequestAutoMerge": {"pullRequest": {"autoMergeRequest": None}}}}, r
    assert "errors" not in graphql(gh, ENABLE, {"pullRequestId": pr["id"], "expectedHeadOid": pr["headRefOid"]}).body
    assert gh("PATCH", f"/repos/{{repo}}/pulls/{n}", {"state": "closed"}).status == 200
    assert state(gh)["pulls"][0]["auto_merge"] is None
    gh("POST", f"/repos/{{repo}}/statuses/{pr['headRefOid']}", {"state": "success", "context": "ci/build"})
    assert not state(gh)["pulls"][0]["merged"]


# GraphQL's actors, compare-and-swap ref deletion, pinned heads ----------------------------------

ENABLE_ACTOR = """mutation enablePullRequestAutoMerge($pullRequestId: ID!, $expectedHeadOid: GitObjectID!) {
  enablePullRequestAutoMerge(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) {
    pullRequest { autoMergeRequest { enabledBy { __typename login } mergeMethod } }
  }
}"""

UPDATE_REFS = """mutation updateRefs($repositoryId: ID!, $refUpdates: [RefUpdate!]!) {
  updateRefs(input: {repositoryId: $repositoryId, refUpdates: $refUpdates}) { clientMutationId }
}"""


def test_an_apps_auto_merge_names_the_bot_by_its_slug_while_viewer_carries_the_suffix(gh):
    protect(gh, ["ci/build"])
    allow(gh)
    n = open_pull(gh, "topic")
    gf.LOGINS[TOKEN] = gf.APP_BOT
    try:
        data = merge_state_of(gh, n)
        assert data["viewer"]["login"] == "cellbridge[bot]"
        r = graphql(gh, ENABLE_ACTOR, {"pullRequestId": data["repository"]["pullRequest"]["id"],
                                       "expectedHeadOid": sha_of(gh, "topic")})
        # GraphQL names an App as a `Bot` by its slug, without REST's `[bot]` (palantir/policy-bot#44).
        assert r.body["data"]["enablePullRequestAutoMerge"]["pullRequest"]["autoMergeRequest"]["enabledBy"] == {
            "__typename": "Bot", "login": "cellbridge"}, r
    finally:
        del gf.LOGINS[TOKEN]


def test_update_refs_deletes_a_branch_only_where_it_still_points(gh):
    n = open_pull(gh, "topic")
    repo_id = gh("GET", "/repos/{repo}").body["node_id"]
    head = sha_of(gh, "topic")
    update = lambda before: graphql(gh, UPDATE_REFS, {"repositoryId": repo_id, "refUpdates": [
        {"name": "refs/heads/topic", "beforeOid": before, "afterOid": "0" * 40}]})
    r = update(sha_of(gh, "main"))
    assert r.body["data"] == {"updateRefs": None} and r.body["errors"][0]["type"] == "UNPROCESSABLE", r
    assert sha_of(gh, "topic") == head, "a refused update changes nothing"
    r = update(head)
    assert "errors" not in r.body, r
    assert "heads/topic" not in gf.REPOS[gh.full]["refs"]
    pull = gh("GET", f"/repos/{{repo}}/pulls/{n}").body
    assert (pull["state"], pull["head"]["sha"]) == ("closed", head), "closed with its branch, its head kept"


def test_a_closed_pull_request_keeps_its_head_and_cannot_be_reopened_once_the_branch_moved(gh):
    n = open_pull(gh, "topic")
    head = sha_of(gh, "topic")
    assert gh("PATCH", f"/repos/{{repo}}/pulls/{n}", {"state": "closed"}).status == 200
    commit(gh.full, "main", {"other.txt": "x\n"})
    gf.REPOS[gh.full]["refs"]["heads/topic"] = sha_of(gh, "main")
    assert gh("GET", f"/repos/{{repo}}/pulls/{n}").body["head"]["sha"] == head, "a push after the close is not the pull request's"
    r = gh("PATCH", f"/repos/{{repo}}/pulls/{n}", {"state": "open"})
    assert r.status == 422, r


# --- signed commits (see the fake's "signed commits") ---------------------------------------------

@pytest.fixture(autouse=False)
def github_com(monkeypatch):
    """github.com's rules, whatever flavor a server fixture of this module left in place."""
    monkeypatch.setitem(gf.SPEC, "description", None)


def signed_repo(pull, how):
    """`pull`'s main requiring signatures by a ruleset or classic protection."""
    full, pr = pull
    if how == "ruleset":
        gf.RULESETS.append({"repo": full, "branch": "main", "required_signatures": True})
    else:
        gf.set_protection(gf.REPOS[full], "main", {})
        gf.protection_of(gf.REPOS[full], "main")["signatures"] = True
    return full, pr


@pytest.mark.parametrize("how", ["ruleset", "protection"])
def test_one_unsigned_commit_blocks_the_pull_request_with_every_check_green(github_com, pull, how):
    full, pr = signed_repo(pull, how)
    repo = gf.REPOS[full]
    assert gf.signature_rule(full, repo, "main") == how
    unsigned = repo["refs"]["heads/topic"]
    assert gf.verification_json(unsigned) == {"verified": False, "reason": "unsigned", "signature": None,
                                              "payload": None, "verified_at": None}
    assert gf.merge_state(repo, pr) == "BLOCKED"
    assert refused(full, pr, 405).message == gf.UNSIGNED_MESSAGE
    assert gf.unsigned_in_pull(full, repo, pr) == unsigned
    if how == "ruleset":
        assert [r["type"] for r in gf.branch_rules_json(full, repo, "main")] == ["required_signatures"]
        assert gf.branch_rules_json(full, repo, "topic") == []
        # A rule requiring signatures refuses no update of the branch itself.
        gf.check_rules(full, repo, "heads/main")
    gf.RULESETS[:] = [r for r in gf.RULESETS if r.get("repo") != full]


def test_signed_commits_pass_and_a_rebase_merge_is_refused(github_com, pull):
    full, pr = signed_repo(pull, "ruleset")
    repo = gf.REPOS[full]
    # The branch holds only a commit GitHub signed (as createCommitOnBranch makes it).
    base = repo["refs"]["heads/main"]
    tree = gf.get_obj(repo["refs"]["heads/topic"], "commit")["tree"]
    signed = gf.put_commit(tree, [base], "the cell", signed=True)
    repo["refs"]["heads/topic"] = signed
    assert gf.verification_json(signed)["verified"] is True
    assert gf.merge_state(repo, pr) == "CLEAN"
    assert refused(full, pr, 405, merge_method="rebase").message == gf.REBASE_UNSIGNABLE
    sha = merge(full, pr, merge_method="squash")
    assert gf.verification_json(sha)["verified"] is True, "GitHub signs the squash it makes"
    gf.RULESETS[:] = [r for r in gf.RULESETS if r.get("repo") != full]


def test_an_apps_git_data_commits_are_signed_a_tokens_are_not(github_com):
    assert gf.signs_git_data("ghs_installation", {"message": "m", "tree": "t", "parents": []})
    assert not gf.signs_git_data("ghs_installation", {"author": {"name": "x", "email": "x@example.invalid"}})
    assert not gf.signs_git_data("ghp_personal", {})
    gf.SPEC["description"], before = type("D", (), {"flavor": "ghes"})(), gf.SPEC["description"]
    try:
        assert not gf.signs_git_data("ghs_installation", {}), "GHES without web commit signing signs nothing"
        gf.SETTINGS["web_commit_signing"] = True
        assert gf.signs_git_data("ghs_installation", {})
    finally:
        gf.SPEC["description"], gf.SETTINGS["web_commit_signing"] = before, False


def test_update_branch_makes_a_signed_merge_commit(github_com, pull):
    full, pr = pull
    commit(full, "main", {"OWNERS": "platform\n"}, "main moves")
    sha = gf.update_pull_branch(full, gf.REPOS[full], pr, {})
    assert gf.verification_json(sha)["verified"] is True


CREATE_COMMIT = """mutation createCommitOnBranch($input: CreateCommitOnBranchInput!) {
  createCommitOnBranch(input: $input) { commit { oid } }
}"""

REQUIRES_SIGNATURES = """query branchRequiresSignatures($owner: String!, $name: String!, $ref: String!) {
  repository(owner: $owner, name: $name) { ref(qualifiedName: $ref) { refUpdateRule { requiresSignatures } } }
}"""


def test_create_commit_on_branch_is_signed_writes_regular_files_and_checks_the_head(gh):
    import base64 as b64
    head = sha_of(gh, "main")
    ghes = gf.SPEC["description"].flavor == "ghes"

    def create(expected, additions=(), deletions=()):
        return graphql(gh, CREATE_COMMIT, {"input": {
            "branch": {"repositoryNameWithOwner": gh.full, "branchName": "main"}, "expectedHeadOid": expected,
            "message": {"headline": "a commit", "body": "its body"},
            "fileChanges": {"additions": [{"path": p, "contents": b64.b64encode(t.encode()).decode()} for p, t in additions],
                            "deletions": [{"path": p} for p in deletions]}}})

    r = create(head, [("run.sh", "#!/bin/sh\n")], ["a.txt"])
    assert "errors" not in r.body, r
    oid = r.body["data"]["createCommitOnBranch"]["commit"]["oid"]
    assert sha_of(gh, "main") == oid
    got = gh("GET", f"/repos/{{repo}}/git/commits/{oid}").body
    assert (got["message"], [p["sha"] for p in got["parents"]]) == ("a commit\n\nits body", [head])
    # GitHub Enterprise Server signs only with web commit signing on (off here).
    assert got["verification"]["verified"] is (not ghes), got["verification"]
    entries = {e["path"]: e["mode"] for e in gh("GET", f"/repos/{{repo}}/git/trees/{oid}?recursive=1").body["tree"]}
    assert entries == {"b.txt": "100644", "run.sh": "100644"}, "every file regular, a.txt deleted"
    # Unhappy paths: a head that moved, a deletion of a file that is not there; nothing moves.
    for bad in (create(head, [("x", "x")]), create(oid, deletions=["nope.txt"])):
        assert bad.body["data"] == {"createCommitOnBranch": None} and bad.body["errors"], bad
    assert sha_of(gh, "main") == oid


def test_rules_and_classic_protection_tell_whether_signatures_are_required(gh):
    owner, name = gh.full.split("/")
    ask = lambda: graphql(gh, REQUIRES_SIGNATURES, {"owner": owner, "name": name, "ref": "refs/heads/main"}).body
    assert gh("GET", "/repos/{repo}/rules/branches/main").body == []
    assert ask()["data"]["repository"]["ref"] == {"refUpdateRule": None}, "no protection: no rule"
    call(gh.url, "POST", "/_fake/rulesets", {"repo": gh.full, "branch": "~DEFAULT_BRANCH", "required_signatures": True})
    rules = gh("GET", "/repos/{repo}/rules/branches/main").body
    assert [r["type"] for r in rules] == ["required_signatures"], rules
    # Classic protection's "Require signed commits" needs the branch protected first.
    assert gh("POST", "/repos/{repo}/branches/main/protection/required_signatures").status == 404
    assert gh("PUT", "/repos/{repo}/branches/main/protection", {
        "required_status_checks": None, "enforce_admins": True, "required_pull_request_reviews": None,
        "restrictions": None}).status == 200
    assert ask()["data"]["repository"]["ref"]["refUpdateRule"] == {"requiresSignatures": False}
    assert gh("POST", "/repos/{repo}/branches/main/protection/required_signatures").body["enabled"] is True
    assert ask()["data"]["repository"]["ref"]["refUpdateRule"] == {"requiresSignatures": True}


def test_every_installation_token_can_be_revoked_at_once(gh, app):
    tok = app.token().body["token"]
    assert gh("GET", "/repos/{repo}", headers=as_token(tok)).status == 200
    assert call(gh.url, "DELETE", "/_fake/tokens", {"installation": True}).status == 200
    assert gh("GET", "/repos/{repo}", headers=as_token(tok)).status == 401


def test_pulls_seeded_in_bulk_read_as_pulls_opened_and_closed_through_the_api(gh):
    r = call(gh.url, "POST", "/_fake/pulls", {"repo": gh.full, "pulls": [
        {"head": "cellbridge/c1", "files": {"clusters/c1/meta.yaml": "v: 1\n"}, "title": "c1",
         "statuses": {"cellbridge/strict-substitution": "success"}},
        {"head": "cellbridge/c2", "files": {"clusters/c2/meta.yaml": "v: 2\n"}, "body": "declined", "state": "closed"},
    ]})
    assert r.status == 201, r
    (one, two) = r.body["pulls"]
    open_ = gh("GET", "/repos/{repo}/pulls?state=open").body
    assert [(p["number"], p["head"]["ref"], p["head"]["sha"]) for p in open_] == [(one["number"], "cellbridge/c1", one["sha"])]
    closed = gh("GET", f"/repos/{{repo}}/pulls/{two['number']}").body
    assert (closed["state"], closed["merged"], closed["body"], closed["head"]["sha"]) == ("closed", False, "declined", two["sha"])
    status = gh("GET", f"/repos/{{repo}}/commits/{one['sha']}/status").body
    assert [(s["context"], s["state"]) for s in status["statuses"]] == [("cellbridge/strict-substitution", "success")]
    # The branch holds the base's files and the seeded one.
    tree = gh("GET", f"/repos/{{repo}}/git/trees/{one['sha']}?recursive=1").body["tree"]
    assert {"a.txt", "b.txt", "clusters/c1/meta.yaml"} <= {e["path"] for e in tree}
