"""The module's wiring, read from its own HCL (python-hcl2, which checkov brings into the test
bed) and its own expressions evaluated, not a copy of them: what moto cannot tell, since it
enforces neither resource policies nor IAM conditions.

- Every EventBridge rule's SQS target, and the target's dead-letter queue, lets that rule send:
  EventBridge delivers as `events.amazonaws.com` with the rule's ARN as `aws:SourceArn`
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html).
- Every state key pattern docs/configuration.md documents passes the module's validation and becomes an
  object ARN IAM can match (no literal `{cell}` or `{workspace}`).
- A secret ARN variable takes only a secret's full ARN, with the six characters Secrets Manager
  appends to its name: IAM matches the policy's resource against that full ARN.
"""

import json
import math
import re
from pathlib import Path

import hcl2
import pytest

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"


def load(directory=INFRA):
    """Every block of the module's `*.tf`: resources and data by (type, name), locals, variables."""
    out = {"resource": {}, "data": {}, "locals": {}, "variable": {}}
    for tf in sorted(directory.glob("*.tf")):
        with open(tf) as f:
            doc = hcl2.load(f)
        for kind in ("resource", "data"):
            for block in doc.get(kind, []):
                for typ, named in block.items():
                    for name, body in named.items():
                        out[kind][(typ, name)] = body
        for block in doc.get("locals", []):
            out["locals"].update(block)
        for block in doc.get("variable", []):
            out["variable"].update(block)
    return out


REF = re.compile(r"^\$\{([a-z0-9_]+(?:\.[a-z0-9_]+)+)(?:\[0\])?(?:\.[a-z_]+)?\}$")


def ref(value):
    """`${aws_sqs_queue.state_sync.arn}` -> `aws_sqs_queue.state_sync`."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    m = REF.match(value) if isinstance(value, str) else None
    assert m, f"not a reference: {value!r}"
    parts = m.group(1).split(".")
    return ".".join(parts[1:3]) if parts[0] == "data" else ".".join(parts[:2])


def flat(values, mod):
    """A policy's condition values with the module's locals expanded: references kept as text."""
    out = []
    for v in values:
        if isinstance(v, list):
            out.extend(flat(v, mod))
        elif isinstance(v, str) and v.startswith("${local.") and v.endswith("}"):
            out.extend(flat([mod["locals"][v[len("${local."):-1]]], mod))
        else:
            out.append(v)
    return out


def statements(doc):
    """A policy document's statements, those of its `dynamic "statement"` blocks included
    (whatever their `for_each`: each may be there)."""
    out = list(doc.get("statement", []))
    for dyn in doc.get("dynamic", []):
        out.extend(dyn.get("statement", {}).get("content", []))
    return out


def senders(mod, queue):
    """The `aws:SourceArn` values allowed to send to `aws_sqs_queue.<queue>` as EventBridge."""
    policies = [
        ref(body["policy"])
        for body in mod["resource"].values()
        if "queue_url" in body and ref(body["queue_url"]) == f"aws_sqs_queue.{queue}"
    ]
    assert len(policies) == 1, f"aws_sqs_queue.{queue} has {len(policies)} queue policies"
    doc = mod["data"][("aws_iam_policy_document", policies[0].split(".")[1])]
    allowed = []
    for st in statements(doc):
        events = any(
            "events.amazonaws.com" in flat(p["identifiers"], mod) for p in st.get("principals", [])
        )
        if events and "sqs:SendMessage" in flat(st["actions"], mod):
            for c in st.get("condition", []):
                if flat(c["variable"], mod) == ["aws:SourceArn"]:
                    allowed.extend(flat(c["values"], mod))
    return allowed


def test_every_rule_may_send_to_its_queue_and_to_its_dead_letter_queue():
    mod = load()
    targets = [(n, b) for (t, n), b in mod["resource"].items() if t == "aws_cloudwatch_event_target"]
    assert len(targets) >= 3, targets
    checked = []
    for name, target in targets:
        rule = ref(target["rule"]).split(".")[1]
        want = f"${{aws_cloudwatch_event_rule.{rule}.arn}}"
        queues = [ref(target["arn"])] + [ref(d["arn"]) for d in target.get("dead_letter_config", [])]
        for q in queues:
            if not q.startswith("aws_sqs_queue."):
                continue
            allowed = senders(mod, q.split(".")[1])
            assert want in allowed, f"rule {rule} (target {name}) cannot send to {q}: its policy allows {allowed}"
            checked.append((rule, q))
    # The state-sync queue takes both a state write and an EKS DeleteCluster, and so does its DLQ.
    assert {("eks_delete_cluster", "aws_sqs_queue.state_sync"),
            ("eks_delete_cluster", "aws_sqs_queue.state_sync_dlq")} <= set(checked), checked


def hcl_eval(expr, env):
    """Evaluates the few HCL functions and operators the module's validations and locals use."""
    body = expr
    while isinstance(body, list):
        body = body[0]
    assert body.startswith("${") and body.endswith("}"), body
    py = body[2:-1].replace("&&", " and ").replace("||", " or ")
    py = re.sub(r"\bvar\.([a-z0-9_]+)", r"env['\1']", py)

    def regex(pattern, s):
        m = re.search(pattern, s)
        return m.group(0) if m else None

    funcs = {
        "replace": lambda s, a, b: s.replace(a, b),
        "strcontains": lambda s, sub: sub in s,
        "endswith": lambda s, suffix: s.endswith(suffix),
        "regex": regex,
        "can": lambda v: v is not None,
        "floor": math.floor,
    }
    return eval(py, {"__builtins__": {}}, dict(funcs, env=env))


def documented_key_patterns():
    page = (ROOT / "docs" / "configuration.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `CELLBRIDGE_STATE_KEY_PATTERN`"))
    return sorted(p for p in set(re.findall(r"`([^`]*\{(?:cell|workspace)\}[^`]*)`", row)) if p.endswith(".tfstate"))


@pytest.mark.parametrize("pattern", documented_key_patterns())
def test_every_documented_key_pattern_is_accepted_and_names_keys_iam_can_match(pattern):
    mod = load()
    var = mod["variable"]["state_key_pattern"]
    env = {"state_key_pattern": pattern}
    for v in var["validation"]:
        assert hcl_eval(v["condition"], env), f"{pattern}: {v['error_message']}"
    glob = hcl_eval(mod["locals"]["state_key_glob"], env)
    assert "{" not in glob and "}" not in glob, f"{pattern} -> object ARNs under {glob!r}"


def test_documented_key_patterns_are_found():
    assert len(documented_key_patterns()) >= 3, documented_key_patterns()


@pytest.mark.parametrize("variable", ["github_secret_arn", "flux_git_secret_arn"])
def test_a_secret_arn_must_be_the_full_one(variable):
    mod = load()
    [v] = mod["variable"][variable]["validation"]
    full = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cellbridge/github-AbC123"
    assert hcl_eval(v["condition"], {variable: full})
    for partial in (full[: -len("-AbC123")], "arn:aws:secretsmanager:eu-west-1:123456789012:secret:cellbridge/github-*"):
        assert not hcl_eval(v["condition"], {variable: partial}), partial


def test_a_getobject_of_a_missing_state_is_answered_404_not_403():
    """S3 answers a missing key 404 only to a caller allowed s3:ListBucket on the bucket, and
    checks that for the GetObject request, which carries no `s3:prefix`
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, Permissions): a
    condition on a key the request lacks passes only as `...IfExists`
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html#Conditions_IfExists)."""
    mod = load()
    doc = mod["data"][("aws_iam_policy_document", "state_sync")]
    listing = [st for st in statements(doc) if "s3:ListBucket" in flat(st["actions"], mod)]
    assert listing, "state-sync is never allowed s3:ListBucket"
    for st in listing:
        for c in st.get("condition", []):
            test = flat(c["test"], mod)[0]
            assert test.endswith("IfExists"), (
                f"{flat(st.get('sid', ['?']), mod)}: {test} on {flat(c['variable'], mod)} fails a GetObject's "
                "implicit ListBucket check (no such key in its context): a deleted state would be a 403"
            )


def test_the_examples_alarm_topic_is_one_cloudwatch_can_publish_to():
    """CloudWatch cannot use the AWS managed `alias/aws/sns` key: an alarm topic encrypted with it
    never notifies. The example's topic uses a customer managed key whose policy lets
    cloudwatch.amazonaws.com encrypt
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html)."""
    mod = load(INFRA / "examples" / "complete")
    topics = [b for (t, _), b in mod["resource"].items() if t == "aws_sns_topic"]
    assert topics
    for topic in topics:
        key = flat(topic["kms_master_key_id"], mod)[0]
        assert not key.startswith("alias/aws/"), f"alarm topic encrypted with the AWS managed {key}"
        policy = str(mod["resource"][("aws_kms_key", ref(key).split(".")[1])]["policy"])
        assert "cloudwatch.amazonaws.com" in policy and "kms:GenerateDataKey" in policy, policy


def test_every_rule_with_a_target_has_a_failed_invocations_alarm():
    mod = load()
    rules = {ref(b["rule"]).split(".")[1] for (t, _), b in mod["resource"].items() if t == "aws_cloudwatch_event_target"}
    alarmed = set()
    for (t, _), body in mod["resource"].items():
        if t == "aws_cloudwatch_metric_alarm" and flat(body["metric_name"], mod) == ["FailedInvocations"]:
            each = flat(body["for_each"], mod)
            for entry in each:
                if isinstance(entry, dict):
                    alarmed |= {ref(v).split(".")[1] for v in entry.values() if isinstance(v, str)}
    assert rules and rules <= alarmed, f"rules without a FailedInvocations alarm: {sorted(rules - alarmed)}"


# --- the bootstrap's confirmation: re-checks through its own queue, the record on the cluster ------

FLUX_TAG_KEYS = ["cellbridge.dev/flux", "cellbridge.dev/flux-since"]


def environment_literals(mod, name):
    """The variables a function's environment local sets, each with its HCL value, from every map
    literal of its `merge(...)` (both branches of a conditional included)."""
    text = mod["locals"][name]
    text = text[0] if isinstance(text, list) else text
    return dict(re.findall(r"'([A-Z][A-Z0-9_]*)': '([^']*)'", text))


def test_cluster_bootstrap_sends_its_rechecks_to_its_own_queue_until_the_configured_deadline():
    mod = load()
    env = environment_literals(mod, "cluster_bootstrap_environment")
    # The queue its event source mapping reads, so that a re-check comes back to this function.
    assert env.get("CELLBRIDGE_CONFIRM_QUEUE_URL") == "${aws_sqs_queue.cluster_bootstrap.url}", env
    mapping = mod["resource"][("aws_lambda_event_source_mapping", "cluster_bootstrap")]
    assert ref(mapping["event_source_arn"]) == "aws_sqs_queue.cluster_bootstrap"
    assert env.get("CELLBRIDGE_CONFIRM_DEADLINE_SECS") == "${tostring(var.flux_confirm_deadline_seconds)}", env
    function = mod["resource"][("aws_lambda_function", "cluster_bootstrap")]
    assert function["environment"][0]["variables"] in ("${local.cluster_bootstrap_environment}",
                                                       ["${local.cluster_bootstrap_environment}"])
    # state-sync neither re-checks clusters nor records on them.
    assert "CELLBRIDGE_CONFIRM_QUEUE_URL" not in environment_literals(mod, "state_sync_environment")
    assert _unwrap_default(mod["variable"]["flux_confirm_deadline_seconds"]) == 1200


def _unwrap_default(var):
    d = var["default"]
    return d[0] if isinstance(d, list) else d


@pytest.mark.parametrize("seconds, ok", [(300, True), (1200, True), (86400, True), (299, False),
                                         (86401, False), (600.5, False), (0, False)])
def test_the_confirmation_deadline_is_validated(seconds, ok):
    mod = load()
    [v] = mod["variable"]["flux_confirm_deadline_seconds"]["validation"]
    assert bool(hcl_eval(v["condition"], {"flux_confirm_deadline_seconds": seconds})) is ok, v["error_message"]


def _cluster_bootstrap_policy():
    from iam_eval import Module
    return Module(load()).policy_document("cluster_bootstrap")


def test_cluster_bootstrap_may_send_to_its_own_queue_and_no_other():
    from iam_eval import allows
    doc = _cluster_bootstrap_policy()
    own = "${aws_sqs_queue.cluster_bootstrap.arn}"
    assert allows([doc], "sqs:SendMessage", own, {})
    assert not allows([doc], "sqs:SendMessage", "${aws_sqs_queue.state_sync.arn}", {})
    assert not allows([doc], "sqs:SendMessage", "arn:aws:sqs:eu-west-1:111122223333:elsewhere", {})
    # The queue is encrypted with the module key, which the role may use to send.
    mod = load()
    queue = mod["resource"][("aws_sqs_queue", "cluster_bootstrap")]
    assert flat(queue["kms_master_key_id"], mod) == flat(["${local.kms_key_arn}"], mod)
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert allows([doc], action, "${local.kms_key_arn}", {"kms:ViaService": "sqs.eu-west-1.amazonaws.com"}), action


def test_cluster_bootstrap_tags_clusters_of_its_account_with_the_flux_record_only():
    from iam_eval import Module, allows
    module = Module(load())
    doc = module.policy_document("cluster_bootstrap")
    cluster = module.expand("arn:${local.partition}:eks:eu-west-1:${local.account}:cluster/prod-eu-west-1")
    assert allows([doc], "eks:TagResource", cluster, {"aws:TagKeys": FLUX_TAG_KEYS})
    assert allows([doc], "eks:TagResource", cluster, {"aws:TagKeys": FLUX_TAG_KEYS[:1]})
    for keys in (FLUX_TAG_KEYS + ["team"], ["cellbridge.dev/cell"], ["cellbridge.dev/temporary"]):
        assert not allows([doc], "eks:TagResource", cluster, {"aws:TagKeys": keys}), keys
    assert not allows([doc], "eks:TagResource", cluster, {}), "a request without tag keys"
    other = cluster.replace(module.expand("${local.account}"), "999999999999")
    assert not allows([doc], "eks:TagResource", other, {"aws:TagKeys": FLUX_TAG_KEYS})
    # Removing the record is no part of the job.
    assert not allows([doc], "eks:UntagResource", cluster, {"aws:TagKeys": FLUX_TAG_KEYS})


def test_the_flux_stuck_alarm_reads_the_functions_metric():
    mod = load()
    alarm = mod["resource"][("aws_cloudwatch_metric_alarm", "flux_stuck")]
    one = lambda field: flat(alarm[field], mod)[0]
    assert one("alarm_name") == "${local.cluster_bootstrap_name}-flux-stuck"
    assert (one("namespace"), one("metric_name"), one("statistic")) == ("${var.metrics_namespace}", "FluxStuck", "Sum")
    # Dimension Function only, as the function writes FluxStuck (FluxOutcomes has Flux too).
    assert alarm["dimensions"] == [{"Function": "${local.cluster_bootstrap_name}"}]
    assert (one("period"), one("comparison_operator"), one("threshold"), one("treat_missing_data")) == (
        3600, "GreaterThanThreshold", 0, "notBreaching")
    assert one("alarm_actions") == one("ok_actions") == "${var.alarm_actions}"


def test_the_github_token_expiring_alarm_reads_state_syncs_days_left():
    mod = load()
    alarm = mod["resource"][("aws_cloudwatch_metric_alarm", "github_token_expiring")]
    one = lambda field: flat(alarm[field], mod)[0]
    assert one("alarm_name") == "${local.state_sync_name}-github-token-expiring"
    assert (one("namespace"), one("metric_name"), one("statistic")) == (
        "${var.metrics_namespace}", "GithubTokenDaysLeft", "Minimum")
    # Dimension Function only, as state-sync writes it (shell/metrics.rs, token_record).
    assert alarm["dimensions"] == [{"Function": "${local.state_sync_name}"}]
    # No datapoint for a token without expiry or a GitHub App: never an alarm for them.
    assert (one("comparison_operator"), one("threshold"), one("treat_missing_data")) == (
        "LessThanThreshold", 14, "notBreaching")
    assert one("alarm_actions") == one("ok_actions") == "${var.alarm_actions}"


def documented_account_role_policy():
    """The policy infra/README.md documents for the role in another account: the JSON block
    after "The bootstrap role's permissions in that account"."""
    text = (INFRA / "README.md").read_text()
    head = "The bootstrap role's permissions in that account"
    assert head in text, f"infra/README.md no longer documents {head!r}"
    block = text.split(head, 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    return json.loads(block)


def test_the_documented_role_of_another_account_has_the_modules_eks_statements():
    """Another account's role is documented as the module's own EKS statements with that account
    and role in them: a statement added to iam.tf (the flux record's tags) is added there too."""
    other = {"${data.aws_partition.current.partition}": "aws",
             "${data.aws_caller_identity.current.account_id}": "222222222222",
             "cellbridge-cluster-bootstrap": "cellbridge-bootstrap"}

    def there(value):
        if isinstance(value, dict):
            return {k: there(v) for k, v in value.items()}
        if isinstance(value, list):
            return sorted(there(v) for v in value)
        for a, b in other.items():
            value = value.replace(a, b)
        return value

    def listed(value):
        if isinstance(value, dict):
            return {k: listed(v) for k, v in value.items()}
        return sorted(value) if isinstance(value, list) else [value]

    want = {st["Sid"]: listed(there(st)) for st in _cluster_bootstrap_policy()["Statement"]
            if all(a.startswith("eks:") for a in st["Action"])}
    got = {st["Sid"]: listed(st) for st in documented_account_role_policy()["Statement"]}
    assert "RecordFluxOutcomeOnClusters" in want
    assert got == want


def test_the_cell_accounts_roles_trust_one_function_each_and_the_bootstrap_role_has_the_modules_eks_statements():
    """modules/cell-account: cluster-bootstrap's role there has the module's own EKS statements with
    that account and role in them, and trusts cluster-bootstrap's role alone; state-sync's role
    there trusts state-sync's role alone. moto enforces neither, so the documents are compared."""
    from iam_eval import Module, allows
    cell = Module(load(INFRA / "modules" / "cell-account"))

    def there(value):
        if isinstance(value, dict):
            return {k: there(v) for k, v in value.items()}
        if isinstance(value, list):
            return sorted(there(v) for v in value)
        # The module's role name (default prefix) there is the cell account module's default.
        return value.replace("cellbridge-cluster-bootstrap", "cellbridge-bootstrap")

    home = {st["Sid"]: there(st) for st in _cluster_bootstrap_policy()["Statement"]
            if all(a.startswith("eks:") for a in st["Action"])}
    theirs = {st["Sid"]: there(st) for st in cell.policy_document("bootstrap")["Statement"]}
    assert "RecordFluxOutcomeOnClusters" in theirs
    assert theirs == home
    for trust, role, other in (("bootstrap_trust", "${var.cluster_bootstrap_role_arn}", "${var.state_sync_role_arn}"),
                               ("describe_trust", "${var.state_sync_role_arn}", "${var.cluster_bootstrap_role_arn}")):
        doc = cell.policy_document(trust)
        assert [st["Principal"] for st in doc["Statement"]] == [{"AWS": [role]}], doc
        assert allows([doc], "sts:AssumeRole", "*", {"aws:PrincipalArn": role})
        assert not allows([doc], "sts:AssumeRole", "*", {"aws:PrincipalArn": other}), trust
    mod = load(INFRA / "modules" / "cell-account")
    roles = {n: b for (t, n), b in mod["resource"].items() if t == "aws_iam_role"}
    assert {n: flat(b["assume_role_policy"], mod) for n, b in roles.items()} == {
        "bootstrap": ["${data.aws_iam_policy_document.bootstrap_trust.json}"],
        "describe": ["${data.aws_iam_policy_document.describe_trust.json}"]}
    policies = {flat(b["role"], mod)[0]: flat(b["policy"], mod)[0] for (t, _), b in mod["resource"].items()
                if t == "aws_iam_role_policy"}
    assert policies == {"${aws_iam_role.bootstrap.id}": "${data.aws_iam_policy_document.bootstrap.json}",
                        "${aws_iam_role.describe.id}": "${data.aws_iam_policy_document.describe.json}"}
