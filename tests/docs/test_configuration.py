"""docs/configuration.md's table is every variable the functions and the command line read, and
says truly which the module sets and from which of its variables (infra/lambda.tf): a variable
added to the code or to the module without its row, or set by the module where the row says
"you", fails here."""

import re

from mdread import DOCS, ROOT, table

PAGE = DOCS / "configuration.md"
# What the product reads: string literals naming a variable in its sources (tests left out).
SOURCES = [ROOT / "shared" / "src"] + sorted((ROOT / "functions").glob("*/src"))
# Read by a library on the product's behalf, never spelled by its code.
READ_BY_LIBRARIES = {
    "RUST_LOG": "tracing-subscriber's EnvFilter::try_from_default_env (shell/telemetry.rs)",
    "AWS_ENDPOINT_URL": "aws-config, for every AWS client",
}
NAMES = re.compile(r'"((?:CELLBRIDGE|GITHUB|AWS_ENDPOINT)_[A-Z_]+|RUST_LOG)"')


def rows():
    """variable name -> its row (a row naming two variables counts for both)."""
    out = {}
    for row in table(PAGE.read_text(), "variable"):
        for name in re.findall(r"`([A-Z_]+)`", row["variable"]):
            out[name] = row
    return out


def read_by_the_code():
    found = {}
    for src in SOURCES:
        for path in src.rglob("*.rs"):
            text = path.read_text()
            # A file's unit tests are no product code.
            text = text.split("#[cfg(test)]")[0]
            for name in NAMES.findall(text):
                found.setdefault(name, path.relative_to(ROOT).as_posix())
    return found


def set_by_the_module():
    """variable -> the expression infra/lambda.tf sets it to."""
    text = (ROOT / "infra" / "lambda.tf").read_text()
    return dict(re.findall(r"^\s+((?:CELLBRIDGE|GITHUB)_[A-Z_]+|RUST_LOG)\s*=\s*(.+)$", text, re.M))


def test_every_variable_the_code_reads_has_a_row():
    documented = rows()
    missing = {n: p for n, p in read_by_the_code().items() if n not in documented}
    assert not missing, f"variables read by the code with no row in docs/configuration.md: {missing}"


def test_every_row_is_a_variable_the_code_reads():
    code = read_by_the_code()
    stale = sorted(n for n in rows() if n not in code and n not in READ_BY_LIBRARIES)
    assert not stale, f"rows of docs/configuration.md no code reads: {stale}"


def test_the_set_by_column_is_the_modules():
    documented = rows()
    module = set_by_the_module()
    assert module, "no environment in infra/lambda.tf"
    wrong = []
    for name, expr in module.items():
        row = documented.get(name)
        if row is None:
            wrong.append(f"{name}: set by infra/lambda.tf, no row")
            continue
        by = row["set by"]
        if not by.startswith("the module"):
            wrong.append(f"{name}: infra/lambda.tf sets it, the row says {by!r}")
        for var in re.findall(r"var\.([a-z_0-9]+)", expr):
            if f"`{var}`" not in by:
                wrong.append(f"{name}: set from var.{var}, which the row's 'set by' does not name")
    for name, row in documented.items():
        if row["set by"].startswith("the module") and name not in module:
            wrong.append(f"{name}: the row says the module sets it, infra/lambda.tf does not")
    assert not wrong, "\n".join(wrong)


def test_every_default_is_given_or_said_to_be_required():
    for name, row in rows().items():
        required = "required" in (row["state-sync"] + row["cluster-bootstrap"])
        assert row["default"] or required or row["set by"].startswith("the module"), (
            f"{name}: no default, not required, not set by the module"
        )
