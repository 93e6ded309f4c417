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

The operation's id, for the conformance report, is `graphql/<operation name>` (an anonymous
operation is itself a violation: cellbridge names every document it sends).
"""
from __future__ import annotations

import json
import os
import threading

import graphql
from graphql.execution.values import get_variable_values

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


def execute(path: str, doc, variables: dict, root: dict, operation_name: str | None = None) -> dict:
    """The answer GitHub gives: `data` with exactly the fields asked for, and `errors` (each
    with GitHub's `type`) for what a resolver refused."""
    result = graphql.execute(schema(path), doc, root_value=root,
                             variable_values=variables, operation_name=operation_name)
    out = {"data": result.data}
    if result.errors:
        errors = []
        for e in result.errors:
            orig = e.original_error
            entry = {"message": e.message, "locations": [{"line": loc.line, "column": loc.column} for loc in e.locations or []],
                     "path": e.path}
            if isinstance(orig, Refused):
                entry["type"] = orig.kind
            errors.append(entry)
        out["errors"] = errors
    return out


def refusal(message: str) -> dict:
    """GitHub's answer to a document it cannot run (validated before execution): no `data`."""
    return {"errors": [{"message": message}]}
