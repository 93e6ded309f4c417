#!/usr/bin/env python3
"""The suite-wide report of the GitHub fake's description check.

Usage: github_conformance.py DIR   (DIR = $CELLBRIDGE_GITHUB_CONFORMANCE_DIR of the test run)

Every fake GitHub the tests start appends one JSON line per API request to DIR/github-<pid>.jsonl:
the documented operation it matched, the caller's User-Agent and what broke GitHub's description
(`tests/fakes/github_fake.py`). This report

  - prints which documented operations the product called (its User-Agent, `cellbridge/<version>`)
    and how often,
    on github.com and on GitHub Enterprise Server, next to what the tests' own client called;
  - prints which `X-GitHub-Api-Version`s each caller sent to each flavor, and fails when the
    product sent github.com anything but 2026-03-10 or GitHub Enterprise Server anything but
    2022-11-28 (`EXPECTED_VERSIONS`; the only version GHES 3.19 knows);
  - fails on any violation, from any caller, that a test did not plant on purpose and clear
    (`DELETE /_fake/conformance` writes a `{"cleared": true}` line);
  - fails when an operation the product's code can call (the `operations!` table of
    shared/src/adapters/github/operations.rs, and its `graphql_operations!` for GraphQL: ids
    `graphql/<operation name>`) was never exercised against the github.com fake, or when the
    product called an operation those tables do not list. A GraphQL document or its variables
    that GitHub's published schema (@octokit/graphql-schema) refuses is a violation like any
    other (check `graphql`).

Exit status: 0 clean, 1 a failure above, 2 nothing to read (the wiring is broken).
"""
import collections
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "shared", "src", "adapters", "github", "operations.rs")
PRODUCT_AGENT = "cellbridge/"
# The API version the product sends each flavor (shared/src/adapters/github/config.rs, api_version).
EXPECTED_VERSIONS = {"api.github.com": "2026-03-10", "ghes": "2022-11-28"}
# `NAME = METHOD "path" "operation id";` lines of the `operations!` table.
# NAME = METHOD "path" "operationId" "permission";
ENTRY = re.compile(r'^\s*([A-Z_]+)\s*=\s*(GET|POST|PATCH|PUT|DELETE)\s+"([^"]+)"\s+"([^"]+)"\s+"[^"]*";', re.M)
# NAME = query|mutation "operation name" "permission" DOCUMENT; lines of the `graphql_operations!`
# table (auto-merge): their ids are `graphql/<operation name>`.
GRAPHQL_ENTRY = re.compile(r'^\s*([A-Z_]+)\s*=\s*(query|mutation)\s+"([^"]+)"\s+"[^"]*"\s+[A-Z_]+;', re.M)


def declared():
    with open(TABLE, encoding="utf-8") as f:
        return {m.group(4): (m.group(2), m.group(3)) for m in ENTRY.finditer(f.read())}


def declared_graphql():
    """The GraphQL operations the product can send: {id: query|mutation}. Their documents are
    checked against GitHub's GraphQL schema by the fake on every request (a violation is
    reported like a REST one)."""
    with open(TABLE, encoding="utf-8") as f:
        return {f"graphql/{m.group(3)}": m.group(2) for m in GRAPHQL_ENTRY.finditer(f.read())}


def undocumented(ops, openapi_dir):
    """The declared operations that GitHub's descriptions do not hold at that method and path:
    github.com's and the newest GitHub Enterprise Server's."""
    names = ["api.github.com.json"]
    ghes = sorted((n for n in os.listdir(openapi_dir) if re.fullmatch(r"ghes-\d+\.\d+\.json", n)),
                  key=lambda n: tuple(int(x) for x in n[5:-5].split(".")))
    names += ghes[-1:]
    out = []
    for name in names:
        with open(os.path.join(openapi_dir, name), encoding="utf-8") as f:
            paths = json.load(f)["paths"]
        for op, (method, path) in sorted(ops.items()):
            doc = paths.get(path, {}).get(method.lower())
            if not doc or doc.get("operationId") != op:
                out.append(f"{method} {path} is not {op} in {name}")
    return names, out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    files = sorted(glob.glob(os.path.join(argv[1], "github-*.jsonl")))
    product = collections.defaultdict(collections.Counter)  # flavor -> op -> n
    tests = collections.defaultdict(collections.Counter)
    versions = collections.defaultdict(collections.Counter)  # (caller, flavor) -> version -> n
    violations = []
    requests = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            mine = []
            for line in f:
                if not line.strip():
                    continue
                rec = json.loads(line)
                if rec.get("cleared"):
                    # A test planted the violations so far on purpose, checked them, and cleared them.
                    mine.clear()
                    continue
                requests += 1
                # The product names itself (shared/src/adapters/github/transport/client.rs, USER_AGENT); the tests'
                # own client is `cellbridge-tests`. A product request under any other name counts
                # as the tests', and the operations it exercised are then reported unexercised.
                who = product if rec.get("user_agent", "").startswith(PRODUCT_AGENT) else tests
                if rec.get("op"):
                    who[rec["flavor"]][rec["op"]] += 1
                if rec.get("api_version"):
                    caller = "product" if who is product else "tests"
                    versions[(caller, rec["flavor"])][rec["api_version"]] += 1
                for v in rec.get("violations", []):
                    mine.append((rec, v))
            violations.extend(mine)
    ops = declared()
    gql = declared_graphql()
    if not files or not requests or not ops:
        print(f"github conformance: nothing to check ({len(files)} logs, {requests} requests, "
              f"{len(ops)} operations declared in {os.path.relpath(TABLE, ROOT)})", file=sys.stderr)
        return 2

    flavors = sorted(set(product) | set(tests))
    print(f"github conformance: {requests} requests from {len(files)} fakes, checked against GitHub's REST description")
    width = max(len(o) for o in set(ops) | set(gql) | {o for c in product.values() for o in c} | {o for c in tests.values() for o in c})
    header = "".join(f"{'product ' + f:>24}" for f in flavors) + "".join(f"{'tests ' + f:>22}" for f in flavors)
    print(f"  {'operation':<{width}}{header}")
    for op in sorted(set(ops) | set(gql) | {o for c in product.values() for o in c} | {o for c in tests.values() for o in c}):
        row = "".join(f"{product[f][op] or '-':>24}" for f in flavors) + "".join(f"{tests[f][op] or '-':>22}" for f in flavors)
        print(f"  {op:<{width}}{row}")

    for (caller, flavor), seen in sorted(versions.items()):
        print(f"github conformance: API versions {caller} -> {flavor}: "
              + ", ".join(f"{v} ({n} requests)" for v, n in sorted(seen.items())))

    failed = False
    wrong_versions = [f"{flavor}: {v} ({n} requests; expected {EXPECTED_VERSIONS.get(flavor)})"
                      for (caller, flavor), seen in sorted(versions.items()) if caller == "product"
                      for v, n in sorted(seen.items()) if EXPECTED_VERSIONS.get(flavor) not in (None, v)]
    if wrong_versions:
        failed = True
        print("FAILED: the product sent an API version other than the one it supports there: " + "; ".join(wrong_versions))
    openapi_dir = os.environ.get("CELLBRIDGE_GITHUB_OPENAPI_DIR") or os.path.join(
        ROOT, ".testbed", "openapi", "node_modules", "@octokit", "openapi", "generated")
    described, wrong = undocumented(ops, openapi_dir)
    if wrong:
        failed = True
        print("FAILED: shared/src/adapters/github/operations.rs declares operations GitHub does not describe so:\n  " + "\n  ".join(wrong))
    else:
        print(f"github conformance: the {len(ops)} declared REST operations are in {' and '.join(described)}; "
              f"{len(gql)} GraphQL operations ({', '.join(sorted(gql))}), each document checked against "
              "GitHub's GraphQL schema (@octokit/graphql-schema) when sent")
    if violations:
        failed = True
        print(f"FAILED: {len(violations)} request(s) or answer(s) broke GitHub's description:")
        for rec, v in violations[:50]:
            print(f"  [{rec['flavor']}] {rec['method']} {rec['path']} ({rec.get('user_agent') or 'no User-Agent'}) "
                  f"{v['check']}: {v['detail']}")
    missing = sorted((set(ops) | set(gql)) - set(product.get("api.github.com", {})))
    if missing:
        failed = True
        print("FAILED: operations the product can call that no test exercised against the github.com fake: "
              + ", ".join(missing))
    undeclared = sorted({o for c in product.values() for o in c} - set(ops) - set(gql))
    if undeclared:
        failed = True
        print("FAILED: the product called operations shared/src/adapters/github/operations.rs does not declare: " + ", ".join(undeclared))
    if not failed:
        ghes = set(product.get("ghes", {}))
        every = set(ops) | set(gql)
        print(f"github conformance: 0 violations; all {len(every)} operations of the product exercised "
              f"({len(ghes & every)} of them against GitHub Enterprise Server too)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
