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
    assert found, "no document found in operations.rs"
    return found


def test_every_document_the_product_sends_passes_and_costs_what_the_formula_says(schema):
    docs = product_documents()
    expected = {"MERGE_STATE_QUERY": (2, 101)}  # commits(last: 1) once, contexts(first: 100) once
    for name, text in docs.items():
        doc = graphql.parse(text)
        assert graphql.validate(schema, doc) == [], name
        c = gq.limits(schema, doc)
        assert (c.requests, c.nodes) == expected.get(name, (0, 0)), (name, c)
        assert c.points == 1 and c.nodes <= gq.MAX_NODES, (name, c)
        # Every connection it asks for has a page GitHub accepts.
        visitor = _Pages(schema)
        graphql.visit(doc, graphql.TypeInfoVisitor(visitor.info, visitor))
        assert visitor.refused == [], (name, visitor.refused)


class _Pages(graphql.Visitor):
    """The connections of a document whose literal page GitHub would refuse."""

    def __init__(self, schema):
        super().__init__()
        self.info = graphql.TypeInfo(schema)
        self.refused = []

    def enter_field(self, node, *_):
        fdef = self.info.get_field_def()
        if fdef is not None and gq.is_connection(fdef.type):
            args = {a.name.value: (int(a.value.value) if isinstance(a.value, graphql.IntValueNode) else 1)
                    for a in node.arguments if a.name.value in ("first", "last")}
            r = gq.pagination_refusal(node.name.value, args)
            if r:
                self.refused.append(r)
