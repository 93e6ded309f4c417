"""docs/github.md's table of every request cellbridge sends is the code's: one row names each
REST operation of `shared/src/adapters/github/operations.rs` (its `operationId`) and each GraphQL
document (`graphql/<name>`), and no row names one the code no longer has."""

import re

from mdread import DOCS, ROOT, table

CODE = ROOT / "shared" / "src" / "adapters" / "github" / "operations.rs"


def in_code():
    text = CODE.read_text()
    rest = re.findall(r'^\s+[A-Z_]+ = (?:GET|POST|PATCH|PUT|DELETE) "[^"]*" "([a-z-]+/[a-z-]+)" "[^"]*";', text, re.M)
    graphql = re.findall(r'^\s+[A-Z_]+ = (?:query|mutation) "(\w+)" "[^"]*"', text, re.M)
    assert rest and graphql, "no operations read from operations.rs"
    return set(rest) | {f"graphql/{g}" for g in graphql}


def in_docs():
    rows = table((DOCS / "github.md").read_text(), "operation")
    return {name for r in rows for name in re.findall(r"`([a-zA-Z-]+/[a-zA-Z-]+)`", r["operation"])}


def test_every_operation_the_code_sends_has_a_row():
    missing = sorted(in_code() - in_docs())
    assert not missing, f"operations of operations.rs with no row in docs/github.md's table: {missing}"


def test_every_row_is_an_operation_the_code_sends():
    stale = sorted(in_docs() - in_code())
    assert not stale, f"rows of docs/github.md's operations table the code no longer sends: {stale}"
