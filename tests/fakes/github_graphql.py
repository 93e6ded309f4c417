"""GitHub's GraphQL API for the fake GitHub (`github_fake.py`), checked against GitHub's published
schema: the npm package `@octokit/graphql-schema` (its `schema.json`, the introspection answer of
https://api.github.com/graphql, installed by `make testbed` beside the REST description), read
with `graphql-core`.

Every request to the GraphQL endpoint (`POST /graphql` on github.com, `POST /api/graphql` on
GitHub Enterprise Server: "The GraphQL endpoint", https://docs.github.com/graphql/guides/forming-calls-with-graphql#the-graphql-endpoint)
is checked before it is served:

- the body is JSON with a string `query`, an optional `operationName` and an object `variables`
  ("Communicating with GraphQL": "the JSON-encoded body ... `query` ... `variables`");
- the document parses and validates against the schema (every field, argument, fragment and
  type condition exists, every variable is declared and used);
- the variables are coerced by their declared types (a missing `ID!`, an `Int` given a string,
  an unknown enum value are refused as GitHub refuses them);
- it names one operation (`operationName` when the document has several);
- `Content-Type: application/json`, a `User-Agent` and credentials are there.

A request that breaks one of these is recorded as a violation (check `graphql`, as the REST
checks record theirs) and answered as GitHub answers a document it cannot run: HTTP 200 with
`{"errors": [{"message": ...}]}` and no `data` (GitHub validates before executing). Answers are
produced by graphql-core's executor over resolvers the fake provides, so they hold exactly the
fields asked for, with the schema's types; a resolver's refusal becomes an error with GitHub's
`type` (`NOT_FOUND`, `FORBIDDEN`, `UNPROCESSABLE`), `path` and a `null` field, as GitHub answers
them (https://docs.github.com/graphql/guides/forming-calls-with-graphql, and answers quoted in
the fakes' other comments).

A document that passes is then held to GitHub's GraphQL limits ("Rate limits and query limits for
the GraphQL API", https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api):
`limits` computes its requests, point value and node count from the document as the docs' formula
does, `node_limit_refusal` answers a call over 500,000 nodes, and `limits_middleware` refuses a
connection's page outside 1-100 or missing, and a field the token may not read, at the field as
GitHub does (the rate limit's budgets, timeouts and permissions are the fake's: github_fake.py).

The operation's id, for the conformance report, is `graphql/<operation name>` (an anonymous
operation is itself a violation: cellbridge names every document it sends).
"""
from __future__ import annotations

import json
import os
import threading

import graphql
from graphql.execution.values import get_argument_values, get_variable_values

_SCHEMA = {"schema": None, "path": None}
_LOCK = threading.Lock()


def schema_path(openapi_dir: str) -> str:
    """`@octokit/graphql-schema`'s schema.json beside `@octokit/openapi`'s generated folder
    (both under node_modules/@octokit)."""
    return os.path.normpath(os.path.join(openapi_dir, "..", "..", "graphql-schema", "schema.json"))


def schema(path: str):
    """The schema, built once (0.3-0.4 s) on the first GraphQL request."""
    with _LOCK:
        if _SCHEMA["schema"] is None or _SCHEMA["path"] != path:
            with open(path, encoding="utf-8") as f:
                intro = json.load(f)
            _SCHEMA["schema"] = graphql.build_client_schema(intro.get("data", intro))
            _SCHEMA["path"] = path
        return _SCHEMA["schema"]


class Refused(Exception):
    """A resolver's refusal: GitHub's error `type` and message."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class Operation:
    """What the conformance log needs of an operation: its id."""

    def __init__(self, name: str, kind: str):
        self.id = f"graphql/{name}"
        self.kind = kind
        self.doc_url = "https://docs.github.com/graphql"


def check(path: str, headers, raw_body: bytes | None):
    """The request checked: (operation or None, parsed document, variables, violations as
    (detail) strings)."""
    problems = []
    lower = {k.lower(): v for k, v in headers}
    if not lower.get("user-agent"):
        problems.append("no User-Agent header (GitHub requires one on every API request)")
    ctype = (lower.get("content-type") or "").split(";")[0].strip()
    if ctype != "application/json":
        problems.append(f"Content-Type {ctype or 'missing'}: a GraphQL request is a JSON body (application/json)")
    try:
        body = json.loads(raw_body or b"")
    except ValueError:
        return None, None, None, problems + ["the body is not JSON"]
    if not isinstance(body, dict) or not isinstance(body.get("query"), str):
        return None, None, None, problems + ["the body has no string `query`"]
    unknown = set(body) - {"query", "operationName", "variables"}
    if unknown:
        problems.append(f"the body has fields GraphQL requests do not: {sorted(unknown)}")
    variables = body.get("variables") or {}
    if not isinstance(variables, dict):
        return None, None, None, problems + ["`variables` is not an object"]
    try:
        doc = graphql.parse(body["query"])
    except graphql.GraphQLError as e:
        return None, None, None, problems + [f"the document does not parse: {e.message}"]
    s = schema(path)
    for e in graphql.validate(s, doc):
        problems.append(f"the document is not valid against GitHub's schema: {e.message}")
    ops = [d for d in doc.definitions if isinstance(d, graphql.OperationDefinitionNode)]
    name = body.get("operationName")
    chosen = [o for o in ops if name is None or (o.name and o.name.value == name)]
    if len(chosen) != 1:
        problems.append(f"the document does not name one operation (operationName {name!r}, {len(ops)} operations)")
        return None, doc, variables, problems
    op = chosen[0]
    if op.name is None:
        problems.append("an anonymous operation: cellbridge names every document it sends")
        return None, doc, variables, problems
    coerced = get_variable_values(s, op.variable_definitions or [], variables)
    if isinstance(coerced, list):
        for e in coerced:
            problems.append(f"variables: {e.message}")
    declared = {v.variable.name.value for v in op.variable_definitions or []}
    extra = set(variables) - declared
    if extra:
        problems.append(f"variables the operation does not declare: {sorted(extra)}")
    return Operation(op.name.value, op.operation.value), doc, variables, problems


def execute(path: str, doc, variables: dict, root: dict, operation_name: str | None = None,
            middleware=None) -> dict:
    """The answer GitHub gives: `data` with exactly the fields asked for, and `errors` (each
    with GitHub's `type`) for what a resolver refused; `middleware`: graphql-core's, run around
    every field (`limits_middleware`)."""
    result = graphql.execute(schema(path), doc, root_value=root,
                             variable_values=variables, operation_name=operation_name, middleware=middleware)
    out = {"data": result.data}
    if result.errors:
        errors = []
        for e in result.errors:
            orig = e.original_error
            entry = {"message": e.message, "locations": [{"line": loc.line, "column": loc.column} for loc in e.locations or []],
                     "path": e.path}
            if isinstance(orig, Refused):
                entry["type"] = orig.kind
                if orig.kind == "FORBIDDEN":
                    # GitHub's field-level refusal carries this extension: {"type":"FORBIDDEN",
                    # "path":[...,"statusCheckRollup"],"extensions":{"saml_failure":false},
                    # "locations":[...],"message":"Resource not accessible by integration"}
                    # (https://github.com/facebook/sapling/issues/993).
                    entry["extensions"] = {"saml_failure": False}
            errors.append(entry)
        out["errors"] = errors
    return out


def undefined_fields(path: str, doc, lacks) -> list[dict]:
    """The fields of `doc` a GitHub lacking `lacks` ("Type.field" names, e.g. "Ref.rules": a
    GitHub Enterprise Server older than the field) refuses, as GitHub refuses a field its schema
    does not have: the whole document, HTTP 200, no `data`, one error a field, e.g.
    {"path": ["query", "repository", "issue", "noSuchFieldOnIssue"], "extensions": {"code":
    "undefinedField", "typeName": "Issue", "fieldName": "noSuchFieldOnIssue"}, "locations":
    [{"line": 1, "column": 114}], "message": "Field 'noSuchFieldOnIssue' doesn't exist on type
    'Issue'"} (as `gh api graphql` prints GitHub's answer; a named operation's path begins "query
    <name>"; on a GitHub Enterprise Server: "Field 'stackEntry' doesn't exist on type
    'PullRequest'", https://github.com/gitify-app/gitify/issues/3174)."""
    if not lacks:
        return []
    info = graphql.TypeInfo(schema(path))
    at, errors = [], []

    class Walk(graphql.Visitor):
        def enter_operation_definition(self, node, *_):
            at.append(f"{node.operation.value} {node.name.value}" if node.name else node.operation.value)

        def enter_field(self, node, *_):
            at.append((node.alias or node.name).value)
            parent = info.get_parent_type()
            named = f"{parent.name}.{node.name.value}" if parent else None
            if named in lacks:
                errors.append({
                    "path": list(at),
                    "extensions": {"code": "undefinedField", "typeName": parent.name, "fieldName": node.name.value},
                    "locations": [{"line": node.loc.source.get_location(node.loc.start).line,
                                   "column": node.loc.source.get_location(node.loc.start).column}] if node.loc else [],
                    "message": f"Field '{node.name.value}' doesn't exist on type '{parent.name}'",
                })

        def leave_field(self, *_):
            at.pop()

        def leave_operation_definition(self, *_):
            at.pop()

    graphql.visit(doc, graphql.TypeInfoVisitor(info, Walk()))
    return errors


def refusal(message: str) -> dict:
    """GitHub's answer to a document it cannot run (validated before execution): no `data`."""
    return {"errors": [{"message": message}]}


# --- GitHub's GraphQL limits -----------------------------------------------------------------
#
# "Rate limits and query limits for the GraphQL API"
# (https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api, read
# from github/docs' content/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api.md):
# a call's point value and its node count are computed from the document alone, before it runs.

LIMITS_DOCS = "https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api"
# "Individual calls cannot request more than 500,000 total nodes." ("Node limit")
MAX_NODES = 500_000
# "Values of `first` and `last` must be within 1-100." ("Node limit")
MAX_PAGE = 100


class Limits:
    """What GitHub computes of a call before running it: `requests` (the connections' fetches),
    `points` (the primary rate limit's point value) and `nodes` (the node limit's count)."""

    def __init__(self, requests: int, nodes: int, pages=()):
        self.requests = requests
        self.nodes = nodes
        # The connections whose page GitHub refuses when they run (`pagination_refusal`), as
        # (response path, type, message): known before, for the conformance report.
        self.pages = list(pages)
        # "Divide the number by **100** and round the result to the nearest whole number to get
        # the final aggregate point value" and "The minimum point value of a call to the GraphQL
        # API is **1**" ("Predicting the point value of a query"). A half rounds up here: the docs
        # do not say which way it goes (5,101 requests "gives us the final score of the query:
        # **51**", which any rounding gives). Mutations are not treated apart: the 1 and 5 points
        # of a request "without mutations" / "with mutations" are the secondary rate limit's,
        # "separate from the point value calculations for the primary rate limit"
        # ("Calculating points for the secondary rate limit", same page).
        self.points = max(1, (requests + 50) // 100)

    def __repr__(self):
        return f"Limits(requests={self.requests}, nodes={self.nodes}, points={self.points})"


def is_connection(field_type) -> bool:
    """A connection is a field whose type is a `*Connection` object (GitHub's schema names every
    one so, and gives each `first` and `last`)."""
    named = graphql.get_named_type(field_type)
    return isinstance(named, graphql.GraphQLObjectType) and named.name.endswith("Connection")


def page_size(args: dict):
    """The page a connection asks for: `first` or `last` (the larger when both are given), None
    when neither is."""
    given = [args[k] for k in ("first", "last") if args.get(k) is not None]
    return max(given) if given else None


def _collect(s, parent, selection_set, fragments, out, seen):
    """The fields a selection set asks of `parent`, fragments and inline fragments laid in, by
    response key (alias or name) and the type they are asked on: the same key asked twice on the
    same type is one field (GraphQL merges them), so one "unique connection"."""
    for sel in selection_set.selections:
        if isinstance(sel, graphql.FieldNode):
            name = sel.name.value
            if name.startswith("__") or not hasattr(parent, "fields") or name not in parent.fields:
                continue
            key = (sel.alias.value if sel.alias else name, parent.name, name)
            out.setdefault(key, (parent.fields[name], []))[1].append(sel)
        elif isinstance(sel, graphql.InlineFragmentNode):
            cond = s.get_type(sel.type_condition.name.value) if sel.type_condition else parent
            _collect(s, cond, sel.selection_set, fragments, out, seen)
        elif isinstance(sel, graphql.FragmentSpreadNode):
            frag = fragments.get(sel.name.value)
            if frag is None or sel.name.value in seen:
                continue
            _collect(s, s.get_type(frag.type_condition.name.value), frag.selection_set, fragments, out,
                     seen | {sel.name.value})


def _walk(s, parent, selection_sets, fragments, variables, parents, acc, at=()):
    fields = {}
    for ss in selection_sets:
        _collect(s, parent, ss, fragments, fields, frozenset())
    for (key, _type, name), (fdef, nodes) in fields.items():
        below = parents
        if is_connection(fdef.type):
            args = get_argument_values(fdef, nodes[0], variables)
            refused = pagination_refusal(name, args)
            if refused:
                acc[2].append((list(at + (key,)),) + refused)
            size = max(0, page_size(args) or 0)  # a page refused (negative, missing) brings nothing
            # "Add up the number of requests needed to fulfill each unique connection in the
            # call. Assume every request will reach the `first` or `last` argument limits": a
            # connection is fetched once for each object it hangs from ("the API has to connect
            # to each of the **100** repositories to get the list of issues"), and brings up to
            # its page of nodes for each ("50 x 20 = 1,000 pullRequests", "Calculating nodes in
            # a call").
            acc[0] += parents
            acc[1] += parents * size
            below = parents * size
        subs = [n.selection_set for n in nodes if n.selection_set]
        named = graphql.get_named_type(fdef.type)
        if subs and isinstance(named, (graphql.GraphQLObjectType, graphql.GraphQLInterfaceType, graphql.GraphQLUnionType)):
            _walk(s, named, subs, fragments, variables, below, acc, at + (key,))


def limits(path_or_schema, doc, variables: dict | None = None, operation_name: str | None = None) -> Limits:
    """The call's requests, point value and node count, as GitHub computes them from the document
    (see `Limits`): every connection counted, fragments and aliases included; a connection without
    `first`/`last` counts no node (it is refused when it runs: `pagination_middleware`)."""
    s = path_or_schema if isinstance(path_or_schema, graphql.GraphQLSchema) else schema(path_or_schema)
    ops = [d for d in doc.definitions if isinstance(d, graphql.OperationDefinitionNode)]
    op = next((o for o in ops if operation_name is None or (o.name and o.name.value == operation_name)), None)
    if op is None:
        return Limits(0, 0)
    fragments = {d.name.value: d for d in doc.definitions if isinstance(d, graphql.FragmentDefinitionNode)}
    coerced = get_variable_values(s, op.variable_definitions or [], variables or {})
    if isinstance(coerced, list):
        coerced = dict(variables or {})
    root = {"query": s.query_type, "mutation": s.mutation_type, "subscription": s.subscription_type}[op.operation.value]
    acc = [0, 0, []]
    _walk(s, root, [op.selection_set], fragments, coerced, 1, acc)
    return Limits(acc[0], acc[1], acc[2])


def node_limit_refusal(nodes: int) -> dict:
    """GitHub's answer to a call over the node limit: no `data`, one error of type
    `MAX_NODE_LIMIT_EXCEEDED` ("This query requests up to 603,360 possible nodes which exceeds the
    maximum limit of 500,000.", https://github.com/rkclark/pullp/issues/108; the type, as GitHub
    sends it: "The API rejected the whole query (MAX_NODE_LIMIT_EXCEEDED)",
    https://github.com/plclub/sf-in-lean/pull/265)."""
    return {"errors": [{"type": "MAX_NODE_LIMIT_EXCEEDED",
                        "message": f"This query requests up to {nodes:,} possible nodes which exceeds the maximum limit of {MAX_NODES:,}."}]}


def pagination_refusal(field_name: str, args: dict):
    """GitHub's refusal of a connection's page, or None. GitHub checks it when the field runs, so
    the error carries the field's `path` and the field is null (its parent too when the connection
    is non-null), the rest of `data` answered:

    - no `first`/`last`: "Clients must supply a `first` or `last` argument on any connection"
      ("Node limit"), refused with `MISSING_PAGINATION_BOUNDARIES` "You must provide a `first` or
      `last` value to properly paginate the `releases` connection." with the field's path
      (observed: "A connection missing `first` is a FIELD-level error. `path: ["repository",
      "releases"]`, `type: MISSING_PAGINATION_BOUNDARIES`");
    - over 100: `EXCESSIVE_PAGINATION` "Requesting 101 records on the `starredRepositories`
      connection exceeds the `first` limit of 100 records."
      (https://github.com/korosuke613/gh-user-stars/issues/8; "... exceeds the `last` limit of 100
      records.", https://github.com/dblock/fue/issues/5);
    - below zero: `INVALID_PAGINATION` "`first` on the connection cannot be less than zero."
      (https://github.com/sourcegraph/sourcegraph-public-snapshot/issues/3329, quoting GitHub's
      answer with its `path`);
    - zero: the docs' "must be within 1-100"; GitHub's words for it are not published, these are
      the fake's (its observed check is "less than zero": GitHub may well accept 0).
    """
    for arg in ("first", "last"):
        v = args.get(arg)
        if v is None:
            continue
        if v > MAX_PAGE:
            return "EXCESSIVE_PAGINATION", f"Requesting {v} records on the `{field_name}` connection exceeds the `{arg}` limit of {MAX_PAGE} records."
        if v < 0:
            return "INVALID_PAGINATION", f"`{arg}` on the connection cannot be less than zero."
        if v == 0:
            return "INVALID_PAGINATION", f"`{arg}` on the `{field_name}` connection must be within 1-{MAX_PAGE}."
    if args.get("first") is None and args.get("last") is None:
        return "MISSING_PAGINATION_BOUNDARIES", f"You must provide a `first` or `last` value to properly paginate the `{field_name}` connection."
    return None


def limits_middleware(permit=None):
    """A graphql-core middleware holding every field to GitHub's checks at run time: a
    connection's page (`pagination_refusal`) and, with `permit(type name, field name)` returning
    a refusal message or None, the token's permission to read the field (see github_fake's
    `GRAPHQL_FIELD_PERMISSIONS`)."""

    def middleware(next_, root, info, **args):
        if permit is not None:
            denied = permit(info.parent_type.name, info.field_name)
            if denied:
                raise Refused("FORBIDDEN", denied)
        if is_connection(info.return_type):
            refused = pagination_refusal(info.field_name, args)
            if refused:
                raise Refused(*refused)
        return next_(root, info, **args)

    return middleware
