"""GitHub's GraphQL limits as the fake models them (`github_graphql.limits`, `pagination_refusal`,
and the fake's rate limit, node limit, timeouts and field permissions over HTTP): the docs' worked
examples reproduced exactly, and every document the product sends held to them.

Source of the rules: "Rate limits and query limits for the GraphQL API",
https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api (cited
next to the code in github_graphql.py and github_fake.py)."""
import os
import re
import sys
from pathlib import Path

import graphql
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import github_fake as gf  # noqa: E402
import github_graphql as gq  # noqa: E402

OPENAPI = Path(os.environ.get("CELLBRIDGE_GITHUB_OPENAPI_DIR") or Path(__file__).resolve().parents[2] / ".testbed" / "openapi"
               / "node_modules" / "@octokit" / "openapi" / "generated")
OPERATIONS = Path(__file__).resolve().parents[2] / "shared" / "src" / "adapters" / "github" / "operations.rs"


@pytest.fixture(scope="module")
def schema():
    path = gq.schema_path(str(OPENAPI))
    if not os.path.isfile(path):
        pytest.fail(f"GitHub's GraphQL schema is missing: {path}. Run `make testbed`.")
    return gq.schema(path)


def limits(schema, query, variables=None):
    doc = graphql.parse(query)
    assert graphql.validate(schema, doc) == [], "the example is not valid against GitHub's schema"
    return gq.limits(schema, doc, variables)


# "Predicting the point value of a query": the docs' example query and its numbers.
DOCS_POINTS = """query {
  viewer {
    login
    repositories(first: 100) {
      edges {
        node {
          id

          issues(first: 50) {
            edges {
              node {
                id

                labels(first: 60) {
                  edges {
                    node {
                      id
                      name
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}"""

# "Calculating nodes in a call": the docs' two examples.
DOCS_SIMPLE = """query {
  viewer {
    repositories(first: 50) {
      edges {
        repository:node {
          name

          issues(first: 10) {
            totalCount
            edges {
              node {
                title
                bodyHTML
              }
            }
          }
        }
      }
    }
  }
}"""
DOCS_COMPLEX = """query {
  viewer {
    repositories(first: 50) {
      edges {
        repository:node {
          name

          pullRequests(first: 20) {
            edges {
              pullRequest:node {
                title

                comments(first: 10) {
                  edges {
                    comment:node {
                      bodyHTML
                    }
                  }
                }
              }
            }
          }

          issues(first: 20) {
            totalCount
            edges {
              issue:node {
                title
                bodyHTML

                comments(first: 10) {
                  edges {
                    comment:node {
                      bodyHTML
                    }
                  }
                }
              }
            }
          }
        }
      }
    }

    followers(first: 10) {
      edges {
        follower:node {
          login
        }
      }
    }
  }
}"""


def test_the_docs_point_example_is_5101_requests_and_51_points(schema):
    # "This query requires 5,101 requests to fulfill ... Dividing by 100 and rounding gives us the
    # final score of the query: **51**"
    c = limits(schema, DOCS_POINTS)
    assert (c.requests, c.points) == (5101, 51)
    assert c.nodes == 100 + 100 * 50 + 100 * 50 * 60


def test_the_docs_node_examples_are_550_and_22060_nodes(schema):
    assert limits(schema, DOCS_SIMPLE).nodes == 550
    assert limits(schema, DOCS_COMPLEX).nodes == 22_060
    # Their requests by the same rule: 1 + 50, and 1 + 50 + 50*20 + 50 + 50*20 + 1.
    assert limits(schema, DOCS_SIMPLE).requests == 51
    assert limits(schema, DOCS_COMPLEX).requests == 2102


def fleet(n, labels=10, fragment=False):
    """The fleet dashboard's read: one aliased `pullRequests(headRefName:)` per cell."""
    body = ("...cell" if fragment else
            f"pullRequests(headRefName: $h, first: 1) {{ nodes {{ number headRefOid labels(first: {labels}) {{ nodes {{ name }} }} "
            "commits(last: 1) { nodes { commit { statusCheckRollup { state } } } } } }")
    cells = "\n".join(f"  c{i}: repository(owner: $o, name: $n) {{ {body} }}" for i in range(n))
    frag = ("\nfragment cell on Repository { pullRequests(headRefName: $h, first: 1) { nodes { number headRefOid "
            f"labels(first: {labels}) {{ nodes {{ name }} }} commits(last: 1) {{ nodes {{ commit {{ statusCheckRollup {{ state }} }} }} }} }} }} }}"
            if fragment else "")
    return f"query fleet($o: String!, $n: String!, $h: String!) {{\n{cells}\n}}{frag}"


def test_aliases_are_each_a_connection_of_their_own(schema):
    # 100 aliases of a first-1 page: 100 requests, one point.
    one = "query fleet($o: String!, $n: String!) {\n" + "\n".join(
        f"  c{i}: repository(owner: $o, name: $n) {{ pullRequests(first: 1) {{ nodes {{ number }} }} }}" for i in range(100)) + "\n}"
    c = limits(schema, one)
    assert (c.requests, c.nodes, c.points) == (100, 100, 1)
    # With each pull request's labels and head commit: three connections per cell.
    c = limits(schema, fleet(100))
    assert (c.requests, c.nodes, c.points) == (300, 100 * (1 + 10 + 1), 3)
    assert limits(schema, fleet(100, fragment=True)).__dict__ == c.__dict__, "a fragment counts as its fields"


def test_nested_connections_multiply_and_a_field_asked_twice_counts_once(schema):
    q = """query { viewer { repositories(first: 100) { nodes { pullRequests(first: 100) { nodes {
      labels(first: 100) { nodes { name } } } } } } } }"""
    c = limits(schema, q)
    assert (c.requests, c.nodes) == (1 + 100 + 100 * 100, 100 + 100 * 100 + 100 * 100 * 100)
    assert c.nodes > gq.MAX_NODES
    twice = """query { viewer { repositories(first: 10) { totalCount } repositories(first: 10) { nodes { name } }
      other: repositories(first: 10) { totalCount } } }"""
    assert limits(schema, twice).requests == 2, "one merged field and one alias"


def test_variables_set_the_page_and_points_round_to_the_nearest_whole_number(schema):
    q = "query p($n: Int!) { viewer { repositories(first: $n) { nodes { issues(first: 1) { totalCount } } } } }"
    assert limits(schema, q, {"n": 100}).requests == 101
    assert limits(schema, q, {"n": 100}).points == 1
    assert gq.Limits(149, 0).points == 1 and gq.Limits(150, 0).points == 2 and gq.Limits(5151, 0).points == 52
    # "The minimum point value of a call to the GraphQL API is **1**", a mutation's too (its 5
    # points are the secondary rate limit's).
    assert limits(schema, "query { viewer { login } }").points == 1
    m = "mutation m($id: ID!) { disablePullRequestAutoMerge(input: {pullRequestId: $id}) { clientMutationId } }"
    assert (limits(schema, m).requests, limits(schema, m).points) == (0, 1)


def test_a_refused_page_is_known_before_the_call_runs_with_its_path(schema):
    q = "query p($n: Int) { viewer { a: repositories(first: $n) { nodes { issues(last: 101) { totalCount } } } } }"
    pages = limits(schema, q, {"n": None}).pages
    assert [(at, kind) for at, kind, _ in pages] == [(["viewer", "a"], "MISSING_PAGINATION_BOUNDARIES"),
                                                      (["viewer", "a", "nodes", "issues"], "EXCESSIVE_PAGINATION")]
    assert limits(schema, q, {"n": 5}).pages[0][0] == ["viewer", "a", "nodes", "issues"]
    assert limits(schema, q, {"n": -5}).nodes == 0, "a negative page counts no node"


def test_pages_outside_1_to_100_and_missing_pages_are_refused_as_github_words_them():
    assert gq.pagination_refusal("teams", {"first": 101}) == (
        "EXCESSIVE_PAGINATION", "Requesting 101 records on the `teams` connection exceeds the `first` limit of 100 records.")
    assert gq.pagination_refusal("repositories", {"last": 1000})[1].endswith("exceeds the `last` limit of 100 records.")
    assert gq.pagination_refusal("history", {"first": -1}) == (
        "INVALID_PAGINATION", "`first` on the connection cannot be less than zero.")
    assert gq.pagination_refusal("labels", {"first": 0})[0] == "INVALID_PAGINATION"
    assert gq.pagination_refusal("releases", {}) == (
        "MISSING_PAGINATION_BOUNDARIES", "You must provide a `first` or `last` value to properly paginate the `releases` connection.")
    assert gq.pagination_refusal("labels", {"first": 1}) is None and gq.pagination_refusal("labels", {"last": 100}) is None


def product_documents():
    """Every GraphQL document the product sends: the `*_QUERY` / `*_MUTATION` constants of
    operations.rs, read as text."""
    text = OPERATIONS.read_text(encoding="utf-8")
    found = dict(re.findall(r'const (\w+_(?:QUERY|MUTATION)): &str =\s*"((?:[^"\\]|\\.)*)";', text))
    # Every constant the operation table names is read, none missed by the pattern.
    named = set(re.findall(r"const (\w+_(?:QUERY|MUTATION)): &str", text))
    assert found and set(found) == named, sorted(named - set(found))
    return found


def test_every_document_the_product_sends_passes_and_costs_what_the_formula_says(schema):
    docs = product_documents()
    expected = {
        "MERGE_STATE_QUERY": (2, 101),  # commits(last: 1) once, contexts(first: 100) once
        # commits(last: 1) once; `Status.contexts` is a list, no connection.
        "MERGE_STATE_WITHOUT_CHECK_RUNS_QUERY": (1, 1),
        # pullRequests(first: 10) once and labels(first: 100) for each of its 10; issues(first:
        # 100) once and labels(first: 100) for each of its 100; the base's rules(first: 100)
        # once: 113 requests, 1 point.
        "CELL_READING_QUERY": (113, 11210),
        "LABELLED_ISSUES_QUERY": (101, 10100),  # issues(first: 100), labels(first: 100) for each
        # pullRequests(first: 10) once, labels(first: 100) for each of its 10.
        "BRANCH_PULLS_QUERY": (11, 1010),
        # pullRequests(first: 5) once, labels(first: 20) for each of its 5: the adapter's
        # hundred aliases are 600 requests (6 points) and 10,500 nodes.
        "NEWEST_PULLS_QUERY": (6, 105),
        # pullRequests(first: 100) once, labels(first: 20) and commits(last: 1) for each of its
        # 100: 201 requests, 2 points, 2,200 nodes a page.
        "OPEN_CELL_PULLS_QUERY": (201, 2200),
    }
    points = {"OPEN_CELL_PULLS_QUERY": 2}
    for name, text in docs.items():
        doc = graphql.parse(text)
        assert graphql.validate(schema, doc) == [], name
        c = gq.limits(schema, doc)
        assert (c.requests, c.nodes) == expected.get(name, (0, 0)), (name, c)
        assert c.points == points.get(name, 1) and c.nodes <= gq.MAX_NODES, (name, c)
        # Every connection it asks for has a page GitHub accepts (each is a literal).
        assert c.pages == [], (name, c.pages)


# Over HTTP: the fake's GraphQL endpoint holds every call to these limits. -----------------------

from test_github_fake import app, as_token, call, gh, open_pull, server  # noqa: E402,F401
from test_github_fake import graphql as post  # noqa: E402


@pytest.fixture
def fresh(gh):
    """A fresh repository (`gh`), the GraphQL limits at their defaults and every budget full."""
    call(gh.url, "DELETE", "/_fake/graphql_limits")
    yield gh
    call(gh.url, "DELETE", "/_fake/graphql_limits")


def limits_set(gh, **body):
    r = call(gh.url, "POST", "/_fake/graphql_limits", body)
    assert r.status == 200, r
    return r.body


def header(r, name):
    return {k.lower(): v for k, v in r.headers.items()}.get(name)


RATE = "query fleetRate { viewer { login } rateLimit { cost limit remaining used resetAt nodeCount } }"
GHES = lambda: gf.SPEC["description"].flavor == "ghes"  # noqa: E731


def test_the_answer_says_what_the_call_cost_in_its_headers_and_rate_limit(fresh):
    r = post(fresh, RATE, {})
    assert r.status == 200 and "errors" not in r.body, r
    if GHES():
        # "Rate limits are disabled by default for GitHub Enterprise Server".
        assert r.body["data"]["rateLimit"] is None and header(r, "x-ratelimit-limit") is None, r
        return
    rl = r.body["data"]["rateLimit"]
    assert (rl["cost"], rl["limit"], rl["used"], rl["remaining"], rl["nodeCount"]) == (1, 5000, 1, 4999, 0), rl
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", rl["resetAt"]), rl
    assert (header(r, "x-ratelimit-resource"), header(r, "x-ratelimit-limit"), header(r, "x-ratelimit-remaining"),
            header(r, "x-ratelimit-used")) == ("graphql", "5000", "4999", "1"), r.headers
    assert int(header(r, "x-ratelimit-reset")) > gf.time.time()
    # A call of 300 requests costs 3 points, its nodes counted.
    owner, name = fresh.full.split("/")
    q = fleet(100).replace("query fleet(", "query fleetCost(").replace("\n}", "\n  rateLimit { cost used nodeCount }\n}", 1)
    r = post(fresh, q, {"o": owner, "n": name, "h": "none"})
    assert r.body["data"]["rateLimit"] == {"cost": 3, "used": 4, "nodeCount": 1200}, r.body.get("errors")


def test_a_spent_budget_is_refused_with_200_rate_limited_and_no_points_left(fresh):
    limits_set(fresh, points_per_hour=2)
    for used in (1, 2):
        r = post(fresh, RATE, {})
        assert r.status == 200 and r.body["data"]["rateLimit"]["used"] == used, r
    r = post(fresh, RATE, {})
    assert r.status == 200, r
    assert r.body == {"errors": [{"type": "RATE_LIMITED",
                                  "message": f"API rate limit already exceeded for user ID {gf.zlib.crc32(gf.DEFAULT_LOGIN.encode()) % 10**8}."}]}
    assert (header(r, "x-ratelimit-remaining"), header(r, "x-ratelimit-used")) == ("0", "2"), r.headers
    assert int(header(r, "x-ratelimit-reset")) > gf.time.time()
    # The newer shape GitHub has been seen sending.
    limits_set(fresh, rate_limited_type="RATE_LIMIT")
    err = post(fresh, RATE, {}).body["errors"][0]
    assert (err["type"], err["code"]) == ("RATE_LIMIT", "graphql_rate_limit"), err
    # The window over, the budget is whole again.
    for b in gf.BUDGETS.values():
        b["reset"] = int(gf.time.time()) - 1
    assert post(fresh, RATE, {}).body["data"]["rateLimit"]["used"] == 1


def test_an_installation_has_its_own_budget_raised_by_its_repositories(fresh, app):
    if GHES():
        limits_set(fresh, points_per_hour=5000)
    tok = app.token().body["token"]
    r = call(fresh.url, "POST", gf.graphql_path(), {"query": RATE, "variables": {}}, headers=as_token(tok))
    assert r.status == 200 and "errors" not in r.body, r
    repos = len(gf.REPOS)
    assert r.body["data"]["rateLimit"]["limit"] == (5000 if GHES() else min(12_500, 5000 + (50 * repos if repos > 20 else 0)))
    assert r.body["data"]["rateLimit"]["used"] == 1, "not the user's budget"
    limits_set(fresh, points_per_hour=None)
    for n, limit in ((20, 5000), (21, 5000 + 50 * 21), (300, 12_500)):
        gf.APP["repositories"] = [f"acme/r{i}" for i in range(n)]
        assert gf.graphql_budget(tok)[1:] == ((None if GHES() else limit), f"installation ID {gf.APP['installation_id']}")


def test_a_call_over_500000_nodes_is_refused_before_it_runs(fresh):
    q = """query fleetHuge { viewer { repositories(first: 100) { nodes { pullRequests(first: 100) { nodes {
      labels(first: 100) { nodes { name } } } } } } } }"""
    r = post(fresh, q, {})
    assert (r.status, r.body) == (200, {"errors": [{
        "type": "MAX_NODE_LIMIT_EXCEEDED",
        "message": "This query requests up to 1,010,100 possible nodes which exceeds the maximum limit of 500,000."}]}), r
    if not GHES():
        assert header(r, "x-ratelimit-used") == "0", "nothing charged"
    planted(fresh, ["graphql/fleetHuge: This query requests up to 1,010,100 possible nodes which exceeds the maximum limit of 500,000."])


def planted(gh, details):
    """The violations a test planted on purpose, recorded for the conformance report; then cleared."""
    v = call(gh.url, "GET", "/_fake/conformance").body["violations"]
    assert [(x["check"], x["detail"]) for x in v] == [("graphql", d) for d in details], v
    call(gh.url, "DELETE", "/_fake/conformance")


def test_a_page_outside_1_to_100_or_missing_is_a_field_error_with_its_path(fresh):
    owner, name = fresh.full.split("/")
    q = """query fleetPage($o: String!, $n: String!, $p: Int) {
      viewer { login }
      repository(owner: $o, name: $n) { pullRequests(first: $p) { totalCount } } }"""
    r = post(fresh, q, {"o": owner, "n": name, "p": 101})
    assert r.status == 200, r
    assert r.body["data"] == {"viewer": {"login": gf.DEFAULT_LOGIN}, "repository": None}, "the non-null connection nulls its parent"
    (err,) = r.body["errors"]
    assert (err["type"], err["path"], err["message"]) == (
        "EXCESSIVE_PAGINATION", ["repository", "pullRequests"],
        "Requesting 101 records on the `pullRequests` connection exceeds the `first` limit of 100 records."), err
    err = post(fresh, q, {"o": owner, "n": name, "p": None}).body["errors"][0]
    assert (err["type"], err["message"]) == (
        "MISSING_PAGINATION_BOUNDARIES", "You must provide a `first` or `last` value to properly paginate the `pullRequests` connection.")
    assert post(fresh, q, {"o": owner, "n": name, "p": 0}).body["errors"][0]["type"] == "INVALID_PAGINATION"
    assert post(fresh, q, {"o": owner, "n": name, "p": 100}).body == {
        "data": {"viewer": {"login": gf.DEFAULT_LOGIN}, "repository": {"pullRequests": {"totalCount": 0}}}}
    planted(fresh, [
        "graphql/fleetPage: repository.pullRequests: EXCESSIVE_PAGINATION: "
        "Requesting 101 records on the `pullRequests` connection exceeds the `first` limit of 100 records.",
        "graphql/fleetPage: repository.pullRequests: MISSING_PAGINATION_BOUNDARIES: "
        "You must provide a `first` or `last` value to properly paginate the `pullRequests` connection.",
        "graphql/fleetPage: repository.pullRequests: INVALID_PAGINATION: "
        "`first` on the `pullRequests` connection must be within 1-100."])


def test_an_oversized_page_times_out_and_a_smaller_one_passes(fresh):
    limits_set(fresh, timeout_nodes=50)
    owner, name = fresh.full.split("/")
    number = open_pull(fresh, "cell-a")
    fresh("POST", f"/repos/{{repo}}/issues/{number}/labels", {"labels": ["drift"]})
    q = """query fleetPage($o: String!, $n: String!, $p: Int!) { repository(owner: $o, name: $n) {
      pullRequests(headRefName: "cell-a", first: $p) { nodes { number headRefName labels(first: 10) { nodes { name } } } } } }"""
    r = post(fresh, q, {"o": owner, "n": name, "p": 10})  # 10 + 10 x 10 nodes
    assert r.status == 502, r
    assert r.body["data"] is None and r.body["errors"][0]["message"].startswith(
        "Something went wrong while executing your query. This may be the result of a timeout"), r
    if not GHES():
        assert call(fresh.url, "GET", "/_fake/graphql_limits").body["budgets"][f"user:{gf.DEFAULT_LOGIN}"]["used"] == 1, \
            "a timeout is charged"
    r = post(fresh, q, {"o": owner, "n": name, "p": 4})  # 4 + 4 x 10 nodes
    assert r.status == 200 and r.body["data"]["repository"]["pullRequests"]["nodes"] == [
        {"number": number, "headRefName": "cell-a", "labels": {"nodes": [{"name": "drift"}]}}], r
    limits_set(fresh, timeout_nodes=None, timeout_status=504)
    assert post(fresh, q, {"o": owner, "n": name, "p": 10}).status == 200


CHECKS = """query fleetChecks($o: String!, $n: String!, $number: Int!) { repository(owner: $o, name: $n) {
  pullRequest(number: $number) { number commits(last: 1) { nodes { commit { oid checkSuites(first: 1) { totalCount } } } } } } }"""


def test_a_field_the_installation_cannot_read_is_null_with_a_forbidden_error(fresh, app):
    owner, name = fresh.full.split("/")
    number = open_pull(fresh, "cell-b")
    app.set(permissions={k: v for k, v in gf.DEFAULT_APP_PERMISSIONS.items() if k != "checks"})
    tok = app.token().body["token"]
    r = call(fresh.url, "POST", gf.graphql_path(), {"query": CHECKS, "variables": {"o": owner, "n": name, "number": number}},
             headers=as_token(tok))
    assert r.status == 200, r
    commit = r.body["data"]["repository"]["pullRequest"]["commits"]["nodes"][0]["commit"]
    assert commit["checkSuites"] is None and commit["oid"] == gf.REPOS[fresh.full]["refs"]["heads/cell-b"], r
    (err,) = r.body["errors"]
    assert err == {"type": "FORBIDDEN", "message": "Resource not accessible by integration",
                   "path": ["repository", "pullRequest", "commits", "nodes", 0, "commit", "checkSuites"],
                   "extensions": {"saml_failure": False}, "locations": err["locations"]}, err
    app.set(permissions={"checks": "read"})
    r = call(fresh.url, "POST", gf.graphql_path(), {"query": CHECKS, "variables": {"o": owner, "n": name, "number": number}},
             headers=as_token(tok))
    assert "errors" not in r.body, r


def test_an_issue_field_without_issues_read_is_forbidden_for_a_fine_grained_token(fresh):
    owner, name = fresh.full.split("/")
    tok = "fake-fine-grained-no-issues"
    assert call(fresh.url, "POST", "/_fake/tokens", {"token": tok, "permissions": {"pull_requests": "read"}}).status in (200, 201)
    try:
        q = """query fleetIssues($o: String!, $n: String!) { viewer { login }
          repository(owner: $o, name: $n) { pullRequests(first: 1) { totalCount } issues(first: 1) { totalCount } } }"""
        r = call(fresh.url, "POST", gf.graphql_path(), {"query": q, "variables": {"o": owner, "n": name}}, headers=as_token(tok))
        assert r.status == 200 and r.body["data"]["repository"] is None, r
        (err,) = r.body["errors"]
        assert (err["type"], err["path"], err["message"]) == (
            "FORBIDDEN", ["repository", "issues"], "Resource not accessible by personal access token"), err
    finally:
        call(fresh.url, "DELETE", "/_fake/tokens", {"token": tok})


def test_an_answer_patched_keeps_the_rest_of_data_and_adds_the_errors(fresh):
    # A field GitHub refused is null beside the rest of `data`, its error at its path; an enum
    # value added since the client was written is answered as it is.
    owner, name = fresh.full.split("/")
    number = open_pull(fresh, "cell-d")
    text = product_documents()["MERGE_STATE_QUERY"]
    refused = {"type": "FORBIDDEN", "message": "Resource not accessible by integration",
               "path": ["repository", "pullRequest", "commits", "nodes", 0, "commit", "statusCheckRollup"]}
    for patch, errors in [({"path": ["repository", "pullRequest", "mergeStateStatus"], "value": "QUEUED"}, None),
                          ({"path": refused["path"], "value": None, "errors": [refused]}, [refused])]:
        assert call(fresh.url, "POST", "/_fake/faults", {"match": "POST /graphql", "operation": "pullRequestMergeState",
                                                          "times": 1, "answer_patch": patch}).status in (200, 201)
        r = post(fresh, text, {"owner": owner, "name": name, "number": number})
        pr = r.body["data"]["repository"]["pullRequest"]
        node = r.body["data"]
        for key in patch["path"]:
            node = node[key]
        assert r.status == 200 and node == patch["value"] and pr["headRefOid"], r
        assert r.body.get("errors") == errors, r


def test_the_product_merge_state_document_passes_over_http_and_is_charged_its_points(fresh):
    owner, name = fresh.full.split("/")
    number = open_pull(fresh, "cell-c")
    text = product_documents()["MERGE_STATE_QUERY"]
    r = post(fresh, text, {"owner": owner, "name": name, "number": number})
    assert r.status == 200 and "errors" not in r.body, r
    if not GHES():
        assert header(r, "x-ratelimit-used") == "1", "2 requests: 1 point"


def test_an_aliased_read_of_many_repositories_answers_each_and_nulls_one_outside_the_selection(fresh, app):
    owner, name = fresh.full.split("/")
    number = open_pull(fresh, "cell-d")
    other = fresh.full + "-unselected"
    gf.seed({"repo": other, "branch": "main", "files": {"a.txt": "a\n"}})
    app.set(repositories=[fresh.full])
    tok = app.token().body["token"]
    q = """query fleetCells($o: String!, $n: String!, $other: String!) {
      a: repository(owner: $o, name: $n) { pullRequests(headRefName: "cell-d", first: 1) { nodes { number } } }
      b: repository(owner: $o, name: $other) { pullRequests(headRefName: "cell-d", first: 1) { nodes { number } } } }"""
    r = call(fresh.url, "POST", gf.graphql_path(), {"query": q, "variables": {"o": owner, "n": name, "other": other.split("/")[1]}},
             headers=as_token(tok))
    assert r.status == 200, r
    assert r.body["data"] == {"a": {"pullRequests": {"nodes": [{"number": number}]}}, "b": None}, r
    (err,) = r.body["errors"]
    assert (err["type"], err["path"], err["message"]) == (
        "NOT_FOUND", ["b"], f"Could not resolve to a Repository with the name '{other}'."), err


def test_the_request_log_gives_each_graphql_call_the_points_it_cost(fresh):
    owner, name = fresh.full.split("/")
    call(fresh.url, "DELETE", "/_fake/requests")
    assert post(fresh, fleet(100), {"o": owner, "n": name, "h": "none"}).status == 200
    assert post(fresh, RATE, {}).status == 200
    log = call(fresh.url, "GET", "/_fake/requests").body["requests"]
    assert [(r["graphql"], r["points"]) for r in log if "graphql" in r] == [("graphql/fleet", 3), ("graphql/fleetRate", 1)], log
