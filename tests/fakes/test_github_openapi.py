"""Tests of github_openapi: GitHub's OpenAPI description as the fake GitHub's checker.

The description comes from the npm package @octokit/openapi that `make testbed` installs under
.testbed/openapi (or from $CELLBRIDGE_GITHUB_OPENAPI_DIR); without it these tests fail.
"""
import copy
import json
import os
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import github_openapi as ga  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / ".testbed" / "openapi" / "node_modules" / "@octokit" / "openapi" / "generated"
FILES = {"api.github.com": "api.github.com.json", "ghes": "ghes-3.19.json"}
FLAVORS = list(FILES)
SHA = "3a0f86fb8db8eea7ccbb9a95f325ddbedfb25e15"
SHA2 = "aa218f56b14c9653891f9e74264a383fa43fefbd"
REF = "heads/cellbridge/prod-eu-west-1"
TOKEN = "not-a-real-credential-4242"

LOAD_SECONDS: dict = {}


def description_file(flavor: str) -> Path:
    d = Path(os.environ.get("CELLBRIDGE_GITHUB_OPENAPI_DIR") or DEFAULT_DIR)
    f = d / FILES[flavor]
    if not f.is_file():
        pytest.fail(f"GitHub's OpenAPI description is missing: {f} does not exist. Run `make testbed` "
                    f"(it installs @octokit/openapi under .testbed/openapi) or point "
                    f"CELLBRIDGE_GITHUB_OPENAPI_DIR at the package's generated/ folder.")
    return f


@pytest.fixture(scope="module")
def descriptions():
    out = {}
    for flavor in FLAVORS:
        f = description_file(flavor)
        t = time.perf_counter()
        out[flavor] = ga.Description.load(str(f), flavor)
        LOAD_SECONDS[flavor] = time.perf_counter() - t
    return out


@pytest.fixture(params=FLAVORS)
def desc(request, descriptions):
    return descriptions[request.param]


def headers(accept="application/vnd.github+json", version="2022-11-28", body=False, extra=()):
    """The header lines octocrab sends (plus an Authorization, never to be echoed)."""
    h = [("Host", "127.0.0.1:1234"), ("User-Agent", "cellbridge/0.1"), ("Authorization", f"Bearer {TOKEN}")]
    if accept is not None:
        h.append(("Accept", accept))
    if version is not None:
        h.append(("X-GitHub-Api-Version", version))
    if body:
        h.append(("Content-Type", "application/json"))
    return h + list(extra)


def checks(violations):
    return [v.check for v in violations]


# Every request cellbridge makes: method, path (after the prefix), query, body, Accept,
# expected operation id and path parameters.
CELLBRIDGE_REQUESTS = [
    ("GET", "/repos/o/r", "", None, None, "repos/get", {"owner": "o", "repo": "r"}),
    ("GET", "/repos/o/r/tarball/main", "", None, None, "repos/download-tarball-archive", {"ref": "main"}),
    ("GET", f"/repos/o/r/tarball/{SHA}", "", None, None, "repos/download-tarball-archive", {"ref": SHA}),
    ("GET", f"/repos/o/r/git/ref/{REF}", "", None, None, "git/get-ref", {"ref": REF}),
    ("POST", "/repos/o/r/git/refs", "", {"ref": "refs/heads/cellbridge/prod-eu-west-1", "sha": SHA}, None,
     "git/create-ref", {}),
    ("PATCH", f"/repos/o/r/git/refs/{REF}", "", {"sha": SHA, "force": False}, None, "git/update-ref", {"ref": REF}),
    ("DELETE", f"/repos/o/r/git/refs/{REF}", "", None, None, "git/delete-ref", {"ref": REF}),
    ("POST", "/repos/o/r/git/trees", "",
     {"base_tree": SHA, "tree": [{"path": "cells/prod-eu-west-1.yaml", "mode": "100644", "type": "blob", "content": "a: 1\n"},
                                 {"path": "cells/old.yaml", "mode": "100644", "type": "blob", "sha": None}]},
     None, "git/create-tree", {}),
    ("GET", f"/repos/o/r/git/trees/{SHA}", "recursive=1", None, None, "git/get-tree", {"tree_sha": SHA}),
    ("POST", "/repos/o/r/git/commits", "", {"message": "cellbridge: prod-eu-west-1", "tree": SHA, "parents": [SHA2]}, None,
     "git/create-commit", {}),
    ("GET", f"/repos/o/r/git/commits/{SHA}", "", None, None, "git/get-commit", {"commit_sha": SHA}),
    ("GET", "/repos/o/r/commits/main", "", None, "application/vnd.github.sha", "repos/get-commit", {"ref": "main"}),
    ("GET", "/repos/o/r/pulls", "state=open&head=o%3Acellbridge%2Fx&base=main&per_page=100", None, None, "pulls/list", {}),
    ("GET", "/repos/o/r/pulls", "state=open&head=o:cellbridge/x&base=main&per_page=100", None, None, "pulls/list", {}),
    ("POST", "/repos/o/r/pulls", "", {"title": "cellbridge: prod", "head": "cellbridge/x", "base": "main", "body": "b"}, None,
     "pulls/create", {}),
    ("PATCH", "/repos/o/r/pulls/3", "", {"title": "t", "body": "b", "state": "open"}, None, "pulls/update", {"pull_number": "3"}),
    ("GET", "/repos/o/r/pulls/3", "", None, None, "pulls/get", {"pull_number": "3"}),
    ("PATCH", "/repos/o/r/issues/3", "", {"title": "t", "body": "b", "labels": ["cellbridge", "new-cell"]}, None,
     "issues/update", {"issue_number": "3"}),
    ("POST", "/repos/o/r/issues/3/labels", "", {"labels": ["cellbridge"]}, None, "issues/add-labels", {"issue_number": "3"}),
    ("PUT", "/repos/o/r/issues/3/labels", "", {"labels": ["cellbridge"]}, None, "issues/set-labels", {"issue_number": "3"}),
    ("POST", f"/repos/o/r/statuses/{SHA}", "",
     {"state": "pending", "context": "cellbridge/plan", "description": "planning", "target_url": None}, None,
     "repos/create-commit-status", {"sha": SHA}),
    ("GET", f"/repos/o/r/commits/{SHA}/status", "", None, None, "repos/get-combined-status-for-ref", {"ref": SHA}),
    ("PUT", "/repos/o/r/pulls/3/merge", "", {"merge_method": "merge", "sha": SHA}, None, "pulls/merge", {"pull_number": "3"}),
    ("PUT", "/repos/o/r/pulls/3/merge", "", None, None, "pulls/merge", {"pull_number": "3"}),
    ("POST", "/app/installations/7/access_tokens", "", None, None, "apps/create-installation-access-token",
     {"installation_id": "7"}),
]


def encode(body):
    return None if body is None else json.dumps(body).encode()


@pytest.mark.parametrize("method,path,query,body,accept,op_id,params", CELLBRIDGE_REQUESTS,
                         ids=[f"{r[0]} {r[1]}?{r[2]}" for r in CELLBRIDGE_REQUESTS])
def test_every_request_cellbridge_makes_is_documented_and_conforms(desc, method, path, query, body, accept, op_id, params):
    m = desc.match(method, path)
    assert m is not None, f"{method} {path} matches no operation in {desc.flavor}"
    op, got = m
    assert op.id == op_id
    assert op.method == method
    assert op.doc_url.startswith("https://docs.github.com/")
    for k, v in params.items():
        assert got[k] == v
    h = headers(accept=accept or "application/vnd.github+json", body=body is not None)
    op2, violations = desc.check_request(method, path, query, h, encode(body))
    assert op2 is op
    assert violations == []


def test_load_is_quick_and_prefix_comes_from_servers(descriptions):
    assert descriptions["api.github.com"].prefix == ""
    assert descriptions["ghes"].prefix == "/api/v3"
    for flavor, secs in LOAD_SECONDS.items():
        print(f"Description.load({FILES[flavor]}): {secs:.2f} s")
        assert secs < 5, f"loading {flavor} took {secs:.1f} s"


def test_path_parameters_are_percent_decoded_and_multi_segment(desc):
    op, params = desc.match("PATCH", "/repos/o/r/git/refs/heads%2Fcellbridge%2Fprod-eu-west-1")
    assert op.id == "git/update-ref" and params["ref"] == REF
    op, params = desc.match("GET", "/repos/o/r/tarball/cellbridge%2Fx")
    assert op.id == "repos/download-tarball-archive" and params["ref"] == "cellbridge/x"
    # The most specific template wins over a multi-segment parameter.
    op, params = desc.match("GET", "/repos/o/r/commits/cellbridge/x/status")
    assert op.id == "repos/get-combined-status-for-ref" and params["ref"] == "cellbridge/x"
    op, _ = desc.match("PUT", "/repos/o/r/pulls/3/merge")
    assert op.id == "pulls/merge"
    assert desc.match("HEAD", "/repos/o/r")[0].id == "repos/get"
    assert desc.operation("git/update-ref").template == "/repos/{owner}/{repo}/git/refs/{ref}"
    assert desc.operation("no/such-op") is None


def test_missing_accept_and_version_are_allowed(desc):
    op, v = desc.check_request("GET", "/repos/o/r", "", headers(accept=None, version=None), None)
    assert op.id == "repos/get" and v == []
    for accept in ("application/json", "application/vnd.github.v3+json", "*/*", "text/html, application/json;q=0.9"):
        assert desc.check_request("GET", "/repos/o/r", "", headers(accept=accept), None)[1] == []


def test_duplicated_api_version_is_400(desc):
    h = headers(extra=[("x-github-api-version", "2022-11-28")])
    _, v = desc.check_request("GET", "/repos/o/r", "", h, None)
    assert checks(v) == ["api-version"]
    assert v[0].status == 400
    assert "2022-11-28, 2022-11-28" in v[0].message and "2022-11-28, 2022-11-28" in v[0].detail


def test_unsupported_api_version_is_400(descriptions):
    dotcom, ghes = descriptions["api.github.com"], descriptions["ghes"]
    for d in (dotcom, ghes):
        _, v = d.check_request("GET", "/repos/o/r", "", headers(version="2021-01-01"), None)
        assert checks(v) == ["api-version"] and v[0].status == 400 and "2021-01-01" in v[0].message
    # 2026-03-10 is github.com's newest version; GHES 3.19 knows only 2022-11-28.
    assert dotcom.check_request("GET", "/repos/o/r", "", headers(version="2026-03-10"), None)[1] == []
    _, v = ghes.check_request("GET", "/repos/o/r", "", headers(version="2026-03-10"), None)
    assert checks(v) == ["api-version"]


def test_user_agent_is_required_once(desc):
    h = [x for x in headers() if x[0] != "User-Agent"]
    _, v = desc.check_request("GET", "/repos/o/r", "", h, None)
    assert checks(v) == ["user-agent"] and v[0].status == 403
    _, v = desc.check_request("GET", "/repos/o/r", "", headers(extra=[("user-agent", "other")]), None)
    assert checks(v) == ["user-agent"] and v[0].status == 403


def test_undocumented_body_field_is_422(desc):
    _, v = desc.check_request("PATCH", f"/repos/o/r/git/refs/{REF}", "", headers(body=True),
                              encode({"sha": SHA, "bogus": 1}))
    assert checks(v) == ["body"]
    assert v[0].status == 422 and v[0].message == "Validation Failed"
    assert "git/update-ref" in v[0].detail and '"bogus"' in v[0].detail


def test_undocumented_field_in_a_nested_object_is_422(desc):
    body = {"tree": [{"path": "a", "mode": "100644", "type": "blob", "content": "x", "encoding": "utf-8"}]}
    _, v = desc.check_request("POST", "/repos/o/r/git/trees", "", headers(body=True), encode(body))
    assert checks(v) == ["body"] and "$.tree[0]" in v[0].detail and '"encoding"' in v[0].detail


def test_missing_required_body_field_is_422(desc):
    _, v = desc.check_request("PATCH", f"/repos/o/r/git/refs/{REF}", "", headers(body=True), encode({"force": True}))
    assert checks(v) == ["body"] and v[0].status == 422 and '"sha"' in v[0].detail
    _, v = desc.check_request("POST", "/repos/o/r/git/refs", "", headers(body=True), None)
    assert checks(v) == ["body"] and v[0].status == 422


def test_wrong_body_values(desc):
    _, v = desc.check_request("POST", f"/repos/o/r/statuses/{SHA}", "", headers(body=True), encode({"state": "done"}))
    assert checks(v) == ["body"] and "$.state" in v[0].detail
    _, v = desc.check_request("POST", "/repos/o/r/issues/3/labels", "", headers(body=True), encode({"labels": []}))
    assert checks(v) == ["body"] and "$.labels" in v[0].detail


def test_unparseable_or_wrongly_typed_json_is_400(desc):
    _, v = desc.check_request("POST", "/repos/o/r/git/refs", "", headers(body=True), b'{"ref": ')
    assert checks(v) == ["body"] and (v[0].status, v[0].message) == (400, "Problems parsing JSON")
    _, v = desc.check_request("POST", "/repos/o/r/git/refs", "", headers(body=True), b'["refs/heads/x"]')
    assert checks(v) == ["body"] and (v[0].status, v[0].message) == (400, "Body should be a JSON object")
    _, v = desc.check_request("POST", "/repos/o/r/git/refs", "", headers(body=True), b'{"ref": NaN, "sha": "x"}')
    assert v[0].message == "Problems parsing JSON"


def test_body_needs_json_content_type(desc):
    body = encode({"ref": "refs/heads/x", "sha": SHA})
    h = [x for x in headers() if x[0] != "Content-Type"]
    _, v = desc.check_request("POST", "/repos/o/r/git/refs", "", h, body)
    assert checks(v) == ["content-type"] and v[0].status == 415
    _, v = desc.check_request("POST", "/repos/o/r/git/refs", "", h + [("Content-Type", "text/plain")], body)
    assert checks(v) == ["content-type"]
    ok = h + [("Content-Type", "application/json; charset=utf-8")]
    assert desc.check_request("POST", "/repos/o/r/git/refs", "", ok, body)[1] == []


def test_wrong_path_and_wrong_method_are_404(desc):
    op, v = desc.check_request("GET", "/repos/o/r/git/refz/heads/x", "", headers(), None)
    assert op is None and checks(v) == ["route"] and (v[0].status, v[0].message) == (404, "Not Found")
    op, v = desc.check_request("GET", "/repos/o/r/git/refs/heads/x", "", headers(), None)
    assert op is None and checks(v) == ["route"] and "PATCH" in v[0].detail
    assert desc.match("POST", "/repos/o/r/pulls/3") is None


def test_undocumented_or_invalid_query_parameter(desc):
    _, v = desc.check_request("GET", "/repos/o/r/pulls", "state=open&bogus=1", headers(), None)
    assert checks(v) == ["query"] and "'bogus'" in v[0].detail
    _, v = desc.check_request("GET", "/repos/o/r/pulls", "state=merged", headers(), None)
    assert checks(v) == ["query"] and "state" in v[0].detail
    _, v = desc.check_request("GET", "/repos/o/r/pulls", "per_page=many", headers(), None)
    assert checks(v) == ["query"] and "per_page" in v[0].detail


def test_non_integer_pull_number(desc):
    op, v = desc.check_request("GET", "/repos/o/r/pulls/abc", "", headers(), None)
    assert op.id == "pulls/get" and checks(v) == ["path-param"] and "pull_number" in v[0].detail
    assert v[0].status == 404


def test_body_on_a_get(desc):
    _, v = desc.check_request("GET", "/repos/o/r", "", headers(body=True), b'{"a": 1}')
    assert checks(v) == ["body"] and "repos/get" in v[0].detail


def test_bad_accept_is_415(desc):
    _, v = desc.check_request("GET", "/repos/o/r", "", headers(accept="application/xml"), None)
    assert checks(v) == ["accept"] and v[0].status == 415
    # A custom media type one operation documents is no good for another.
    _, v = desc.check_request("GET", "/repos/o/r", "", headers(accept="application/vnd.github.sha"), None)
    assert checks(v) == ["accept"]
    assert desc.check_request("GET", "/repos/o/r/pulls/3", "", headers(accept="application/vnd.github.diff"), None)[1] == []


def test_details_never_carry_the_authorization_value(desc):
    h = [x for x in headers(version="bogus", accept="text/csv") if x[0] != "User-Agent"]
    _, v = desc.check_request("PATCH", "/repos/o/r/pulls/x", "q=1", h, b"{")
    assert len(v) >= 4
    for x in v:
        assert TOKEN not in x.detail and TOKEN not in x.message


def test_api_version_2026_03_10_checks_its_own_shapes(descriptions):
    dotcom = descriptions["api.github.com"]
    body = encode({"assignee": "octocat"})  # removed in 2026-03-10 (x-github-breaking-changes)
    assert dotcom.check_request("PATCH", "/repos/o/r/issues/3", "", headers(body=True), body)[1] == []
    _, v = dotcom.check_request("PATCH", "/repos/o/r/issues/3", "", headers(body=True, version="2026-03-10"), body)
    assert checks(v) == ["body"] and '"assignee"' in v[0].detail
    op = dotcom.operation("pulls/get")
    new = op.complete_response(200, {"number": 3}, api_version="2026-03-10")
    assert "merge_commit_sha" not in new and "assignee" not in new
    assert op.check_response(200, "application/json", new, api_version="2026-03-10") == []
    old = op.complete_response(200, {"number": 3})
    assert "merge_commit_sha" in old and "assignee" in old


def contains(full, part, path="$"):
    """Every value of `part` is in `full`, unchanged (recursively)."""
    if isinstance(part, dict):
        assert isinstance(full, dict), path
        for k, v in part.items():
            assert k in full, f"{path}.{k} lost"
            contains(full[k], v, f"{path}.{k}")
    elif isinstance(part, list):
        assert isinstance(full, list) and len(full) == len(part), path
        for i, (a, b) in enumerate(zip(full, part)):
            contains(a, b, f"{path}[{i}]")
    else:
        assert full == part, f"{path}: {full!r} != {part!r}"


def minimal_pull():
    return {"id": 1001, "number": 3, "state": "open", "title": "cellbridge: prod", "body": "b", "merged": False,
            "draft": False, "html_url": "https://github.example/o/r/pull/3", "url": "/repos/o/r/pulls/3",
            "labels": [{"name": "cellbridge", "id": 7}],
            "head": {"ref": "cellbridge/x", "sha": SHA, "label": "o:cellbridge/x"},
            "base": {"ref": "main", "sha": SHA2, "label": "o:main"},
            "user": {"login": "cellbridge[bot]", "id": 2}}


def test_complete_response_of_a_minimal_pull_request_passes_and_keeps_the_fakes_values(desc):
    op = desc.operation("pulls/get")
    pr = minimal_pull()
    before = copy.deepcopy(pr)
    assert any(v.check == "response" for v in op.check_response(200, "application/json", pr))
    full = op.complete_response(200, pr)
    assert pr == before, "complete_response must not modify its argument"
    contains(full, pr)
    assert op.check_response(200, "application/json; charset=utf-8", full) == []
    # Filled recursively: inside head, the labels the fake gave, and the user.
    assert "repo" in full["head"] and "user" in full["head"]
    assert "node_id" in full["labels"][0] and "color" in full["labels"][0]
    assert "avatar_url" in full["user"]
    assert full["milestone"] is None  # nullable: null
    assert full["created_at"] == "1970-01-01T00:00:00Z"


FAKE_ANSWERS = [
    ("repos/get", 200, {"id": 1, "name": "r", "full_name": "o/r", "owner": {"login": "o", "id": 1},
                        "default_branch": "main", "private": True, "html_url": "https://github.example/o/r"}),
    ("pulls/list", 200, [minimal_pull()]),
    ("pulls/create", 201, minimal_pull()),
    ("pulls/update", 200, minimal_pull()),
    ("issues/update", 200, dict(minimal_pull(), pull_request={"url": "/repos/o/r/pulls/3"})),
    ("git/get-ref", 200, {"ref": "refs/heads/main", "object": {"sha": SHA, "type": "commit"}}),
    ("git/create-ref", 201, {"ref": "refs/heads/main", "object": {"sha": SHA, "type": "commit"}}),
    ("git/update-ref", 200, {"ref": "refs/heads/main", "object": {"sha": SHA, "type": "commit"}}),
    ("git/create-tree", 201, {"sha": SHA, "tree": [{"path": "a", "mode": "100644", "sha": SHA2, "type": "blob"}], "truncated": False}),
    ("git/get-tree", 200, {"sha": SHA, "tree": [{"path": "a", "mode": "100644", "sha": SHA2, "type": "blob"}], "truncated": False}),
    ("git/create-commit", 201, {"sha": SHA, "tree": {"sha": SHA2}, "message": "m", "parents": [{"sha": SHA2}],
                                "author": {"name": "n", "email": "e@example.invalid", "date": ""}}),
    ("git/get-commit", 200, {"sha": SHA, "tree": {"sha": SHA2}, "message": "m", "parents": [], "author": {"name": "n"}}),
    ("repos/get-commit", 200, {"sha": SHA, "node_id": "C_1", "parents": [{"sha": SHA2}], "url": "/repos/o/r/commits/x",
                               "commit": {"message": "m", "tree": {"sha": SHA2},
                                          "author": {"name": "n", "email": "e", "date": "2024-01-01T00:00:00Z"}}}),
    ("repos/get-combined-status-for-ref", 200, {"sha": SHA, "state": "pending", "total_count": 1, "statuses": [
        {"state": "pending", "context": "cellbridge/plan", "description": "", "target_url": None, "id": 9}]}),
    ("repos/create-commit-status", 201, {"state": "pending", "context": "c", "description": "", "target_url": None, "id": 9}),
    ("pulls/merge", 200, {"sha": SHA, "merged": True, "message": "Pull Request successfully merged"}),
    ("issues/add-labels", 200, [{"name": "cellbridge", "id": 7}]),
    ("issues/set-labels", 200, [{"name": "cellbridge", "id": 7}]),
    ("apps/create-installation-access-token", 201, {"token": "ghs_x", "expires_at": "2030-01-01T00:00:00Z",
                                                    "permissions": {"contents": "write", "pull_requests": "write"}}),
]


@pytest.mark.parametrize("op_id,status,body", FAKE_ANSWERS, ids=[a[0] for a in FAKE_ANSWERS])
def test_completed_fake_answers_conform(desc, op_id, status, body):
    op = desc.operation(op_id)
    full = op.complete_response(status, body)
    contains(full, body)
    assert op.check_response(status, "application/json; charset=utf-8", full) == []


CELLBRIDGE_OPS = sorted({r[5] for r in CELLBRIDGE_REQUESTS})


@pytest.mark.parametrize("op_id", CELLBRIDGE_OPS)
def test_every_documented_json_answer_of_cellbridges_operations_can_be_completed(desc, op_id):
    op = desc.operation(op_id)
    for version in desc.versions:
        for status in op.documented_statuses(version):
            if op.response_schema(int(status), "application/json", version) is None:
                continue
            start = [] if "array" in desc.types_of(op.response_schema(int(status), "application/json", version)) else {}
            full = op.complete_response(int(status), start, api_version=version)
            assert op.check_response(int(status), "application/json", full, api_version=version) == [], (status, version)


def test_check_response(desc):
    get_repo = desc.operation("repos/get")
    v = get_repo.check_response(401, "application/json", {"message": "Bad credentials"})
    assert checks(v) == ["response"] and "401" in v[0].detail  # not documented for repos/get
    assert get_repo.check_response(404, "application/json", {"message": "Not Found", "documentation_url": "x"}) == []
    v = get_repo.check_response(200, "text/html", b"<html/>")
    assert checks(v) == ["response"]
    delete = desc.operation("git/delete-ref")
    assert delete.check_response(204, None, None) == []
    assert checks(delete.check_response(204, "application/json", {"a": 1})) == ["response"]
    assert delete.check_response(422, "application/json", {"message": "Reference does not exist"}) == []
    tarball = desc.operation("repos/download-tarball-archive")
    assert tarball.check_response(302, None, None, headers=[("Location", "http://h/_codeload/x")]) == []
    assert checks(tarball.check_response(302, None, None, headers={})) == ["response"]
    commit = desc.operation("repos/get-commit")
    assert commit.check_response(200, "application/vnd.github.sha", SHA.encode()) == []
    v = desc.operation("git/get-ref").check_response(200, "application/json", {"ref": 5, "object": {}})
    assert v and all(x.check == "response" for x in v) and any("$.ref" in x.detail for x in v)


def test_check_request_is_fast_once_warm(desc):
    body = encode({"title": "t", "body": "b", "labels": ["cellbridge"]})
    desc.check_request("PATCH", "/repos/o/r/issues/3", "", headers(body=True), body)
    t = time.perf_counter()
    for _ in range(50):
        desc.check_request("PATCH", "/repos/o/r/issues/3", "", headers(body=True), body)
    per = (time.perf_counter() - t) / 50
    assert per < 0.05, f"check_request takes {per * 1000:.1f} ms"
