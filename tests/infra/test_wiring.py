"""The module's wiring, read from its own HCL (python-hcl2, which checkov brings into the test
bed) and its own expressions evaluated, not a copy of them: what moto cannot tell, since it
enforces neither resource policies nor IAM conditions.

- Every EventBridge rule's SQS target, and the target's dead-letter queue, lets that rule send:
  EventBridge delivers as `events.amazonaws.com` with the rule's ARN as `aws:SourceArn`
  (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions,
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html).
- Every state key pattern the README documents passes the module's validation and becomes an
  object ARN IAM can match (no literal `{cell}` or `{workspace}`).
- A secret ARN variable takes only a secret's full ARN, with the six characters Secrets Manager
  appends to its name: IAM matches the policy's resource against that full ARN.
"""

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
    }
    return eval(py, {"__builtins__": {}}, dict(funcs, env=env))


def documented_key_patterns():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `CELLBRIDGE_STATE_KEY_PATTERN`"))
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
