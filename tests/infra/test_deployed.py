"""The module as deployed: `infra/examples/complete` applied by the real terraform binary and AWS
provider to moto_server, read back from moto, and driven end to end.

Needs `terraform` on PATH and the hashicorp/aws provider in a local mirror directory (this test
bed is offline; `CELLBRIDGE_TF_PLUGIN_DIR`, else Terraform's implied mirror directories and
`/opt/tf-plugins`); without them it skips, saying why. The function binaries come from `cargo
build` (`make test` builds them first).

What it checks, of what AWS will do with the deployed resources and moto does not enforce:
- every EventBridge rule's target, and the target's dead-letter queue, is allowed by that
  queue's resource policy for a delivery from that rule (`events.amazonaws.com`, `aws:SourceArn`
  = the rule, https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions),
  and by the queue's KMS key policy (an encrypted queue needs GenerateDataKey and Decrypt for
  the sender, https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html#compatibility-with-aws-services);
- every schedule's and forwarding rule's role may do what its target needs;
- each function's event source mapping reads its own queue with ReportBatchItemFailures, and the
  function's role may receive, delete and decrypt there
  (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html#events-sqs-permissions);
- in the cell account (222222222222, moto's multi-account STS), state-sync assumes only its
  describe-only role, which trusts state-sync's role alone and allows eks:DescribeCluster alone,
  and the bootstrap role trusts cluster-bootstrap's role alone;
then a Terraform state written to the bucket and a `CreateCluster` go through the deployed rules
and queues (moto's EventBridge evaluates the deployed patterns and delivers) to the function
binaries, run as Lambda runs them: the deployed configuration's variables, the deployed role's
session credentials, the SQS event Lambda builds from the message. They end in a pull request in
the GitHub fake and Flux in the Kubernetes fake.
"""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import boto3
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from iam_eval import allows  # noqa: E402
from lambda_runtime import Function  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
REGION = "eu-west-1"
ACCOUNT = "123456789012"  # moto's
GITHUB_TOKEN = "ghp_deployedModuleTestToken0000000000000"
CLUSTER = "prod-eu-west-1"
CLUSTER_CELL = "prod-eu"  # merged in tests/fixtures/flux/fleet: its own directory is applied
NEW_CELL = "staging-us-east-1"  # a cell the fleet has never seen: a whole-directory pull request
KNOWN_HOSTS = "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


# ------------------------------------------------------------------------------------------------
# what the machine has


def provider_mirror():
    """A directory holding registry.terraform.io/hashicorp/aws for this platform, or None.
    Terraform's implied local mirror directories on Linux
    (https://developer.hashicorp.com/terraform/cli/config/config-file#implied-local-mirror-directories)
    and /opt/tf-plugins, where this kind of machine keeps one."""
    candidates = [os.environ.get("CELLBRIDGE_TF_PLUGIN_DIR", "")]
    home = Path.home()
    candidates += [str(home / ".terraform.d" / "plugins"), str(home / ".local" / "share" / "terraform" / "plugins"),
                   "/usr/local/share/terraform/plugins", "/usr/share/terraform/plugins", "/opt/tf-plugins"]
    for c in filter(None, candidates):
        if list(Path(c).glob("registry.terraform.io/hashicorp/aws/*/linux_amd64")):
            return c
    return None


def needs():
    """Why this module cannot run here, or None."""
    if not shutil.which("terraform"):
        return "no terraform binary on PATH"
    if not provider_mirror():
        return ("no local mirror of the hashicorp/aws provider (set CELLBRIDGE_TF_PLUGIN_DIR to a directory "
                "holding registry.terraform.io/hashicorp/aws/<version>/linux_amd64)")
    return None


pytestmark = pytest.mark.skipif(needs() is not None, reason=f"module not deployed: {needs()}")


def binary(name):
    path = ROOT / "target" / "debug" / name
    assert path.exists(), f"{path} is missing: build it first (cargo build -p {name})"
    return path


# ------------------------------------------------------------------------------------------------
# the test bed: moto, the GitHub and Kubernetes fakes, the module applied


class Service:
    """A fake from tests/fakes that prints `PORT=<n>` (and `CONTROL_PORT=<n>`) and runs until its
    stdin closes."""

    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([sys.executable, *map(str, args)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        self.ports = {}
        for line in self.proc.stdout:
            key, _, value = line.strip().partition("=")
            if key in ("PORT", "CONTROL_PORT"):
                self.ports[key] = int(value)
            if "PORT" in self.ports and ("--tls" not in args or "CONTROL_PORT" in self.ports):
                break
        assert "PORT" in self.ports, f"{args[0]} exited (code {self.proc.poll()}) without printing PORT="
        self.port = self.ports["PORT"]

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# The configurations the READMEs document, applied beside the example in the same root (one
# apply: Terraform creates them in parallel): each key pattern, a state bucket in another account,
# cluster-bootstrap in a private hub VPC. Cells in another account are the example's own
# (modules/cell-account in account 222222222222, through a provider that assumes a role there).
OTHER_ACCOUNT = "222222222222"
OTHER_ACCOUNT_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/cellbridge-bootstrap"
OTHER_ACCOUNT_DESCRIBE_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/cellbridge-state-sync-describe"
STATE_ROLE = "arn:aws:iam::444455556666:role/cellbridge-state-reader"
VARIANTS = {
    "ws-named": {"state_key_pattern": '"env:/{workspace}/stacks/eks/terraform.tfstate"'},
    "ws-cells": {"state_key_pattern": '"env:/{workspace}/cells/{cell}/terraform.tfstate"'},
    "bucket-elsewhere": {"state_role_arn": f'"{STATE_ROLE}"'},
    "hub": {"cluster_bootstrap_subnet_ids": "[aws_subnet.hub.id]",
            "cluster_bootstrap_security_group_ids": "[aws_security_group.bootstrap.id]",
            "cluster_security_group_ids": "[aws_security_group.cluster.id]"},
}


def variants_tf():
    out = [
        "# Written by tests/infra/test_deployed.py into its copy of the example.",
        'resource "aws_vpc" "hub" {\n  cidr_block = "10.20.0.0/16"\n}',
        'resource "aws_subnet" "hub" {\n  vpc_id            = aws_vpc.hub.id\n  cidr_block        = "10.20.1.0/24"\n'
        '  availability_zone = "eu-west-1a"\n}',
        'resource "aws_security_group" "bootstrap" {\n  name   = "cellbridge-bootstrap"\n  vpc_id = aws_vpc.hub.id\n}',
        'resource "aws_security_group" "cluster" {\n  name   = "eks-cluster"\n  vpc_id = aws_vpc.hub.id\n}',
    ]
    for name, extra in VARIANTS.items():
        lines = [f'module "{name.replace("-", "_")}" {{', '  source = "../.."',
                 f'  name_prefix = "cb-{name}"',
                 '  state_sync_zip = "${local.dist}/state-sync.zip"',
                 '  cluster_bootstrap_zip = "${local.dist}/cluster-bootstrap.zip"',
                 f'  state_bucket_name = "{name}-tfstate"', '  fleet_repo = "acme/fleet"',
                 '  github_secret_arn = aws_secretsmanager_secret.github.arn',
                 '  flux_git_url = "ssh://git@github.com/acme/fleet.git"',
                 '  flux_git_secret_arn = aws_secretsmanager_secret.flux_git.arn',
                 '  secrets_kms_key_arns = [aws_kms_key.secrets.arn]',
                 '  enable_sync_all_schedule = false', '  enable_access_sweep_schedule = false']
        lines += [f"  {k} = {v}" for k, v in extra.items()]
        out.append("\n".join(lines + ["}"]))
    return "\n\n".join(out) + "\n"


def http(method, url, body=None, token=None):
    import urllib.request
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"null")


def terraform(workdir, env, *args):
    r = subprocess.run(["terraform", *args, "-no-color"], cwd=workdir, env=env, capture_output=True, text=True)
    assert r.returncode == 0, f"terraform {' '.join(args)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deployed")
    # AWS managed policies exist in every account (AWSLambdaVPCAccessExecutionRole, attached for a
    # function in a VPC); moto loads them on request.
    moto = Service(FAKES / "moto_server.py", "--port", "0",
                   env=dict(os.environ, MOTO_IAM_LOAD_MANAGED_POLICIES="true"))
    openapi = os.environ.get("CELLBRIDGE_GITHUB_OPENAPI_DIR") or str(
        ROOT / ".testbed/openapi/node_modules/@octokit/openapi/generated")
    github = Service(FAKES / "github_fake.py", "--port", "0", "--token", GITHUB_TOKEN, "--openapi", openapi)
    moto_url = f"http://127.0.0.1:{moto.port}"
    kube = Service(FAKES / "kube_fake.py", "--port", "0", "--tls", "--ca-out", tmp / "ca.pem",
                   "--eks-auth", f"{moto_url},{REGION},{CLUSTER}")
    try:
        # The module and its example as a user checks them out; placeholder packages (moto stores a
        # function's code and never runs it: the binaries run below, under the Runtime API).
        shutil.copytree(ROOT / "infra", tmp / "infra")
        (tmp / "dist").mkdir()
        for name in ("state-sync", "cluster-bootstrap"):
            with zipfile.ZipFile(tmp / "dist" / f"{name}.zip", "w") as z:
                z.writestr("bootstrap", "placeholder: the test runs target/debug/" + name)
        (tmp / "terraformrc").write_text(
            'provider_installation {\n  filesystem_mirror {\n'
            f'    path    = "{provider_mirror()}"\n    include = ["registry.terraform.io/hashicorp/aws"]\n  }}\n}}\n')
        env = {
            "PATH": os.environ.get("PATH", ""), "HOME": str(tmp),
            "TF_CLI_CONFIG_FILE": str(tmp / "terraformrc"), "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1",
            "AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        }
        example = tmp / "infra" / "examples" / "complete"
        (example / "variants.tf").write_text(variants_tf())
        terraform(example, env, "init", "-input=false", "-backend=false")
        terraform(example, env, "apply", "-input=false", "-auto-approve", "-parallelism=30")
        outputs = {k: v["value"] for k, v in json.loads(terraform(example, env, "output", "-json")).items()}
        yield {
            "tmp": tmp, "moto": moto_url, "github": f"http://127.0.0.1:{github.port}",
            "kube": kube, "ca_pem": (tmp / "ca.pem").read_text(),
            # The example's one output is the module's whole output object.
            "outputs": outputs["cellbridge"],
        }
    finally:
        for s in (kube, github, moto):
            s.stop()


def aws(bed, service, region=REGION, **creds):
    return boto3.client(service, endpoint_url=bed["moto"], region_name=region,
                        aws_access_key_id=creds.get("key", "testing"),
                        aws_secret_access_key=creds.get("secret", "testing"),
                        aws_session_token=creds.get("token"))


# ------------------------------------------------------------------------------------------------
# policies as AWS evaluates them


def role_policies(bed, role_arn):
    """Every identity policy of a role, inline and attached, as documents."""
    iam = aws(bed, "iam", "us-east-1")
    name = role_arn.rsplit("/", 1)[1]
    docs = []
    for pname in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        docs.append(iam.get_role_policy(RoleName=name, PolicyName=pname)["PolicyDocument"])
    for att in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        pol = iam.get_policy(PolicyArn=att["PolicyArn"])["Policy"]
        if att["PolicyArn"].startswith("arn:aws:iam::aws:policy/"):
            continue  # AWS managed (basic execution): not the module's to check
        ver = iam.get_policy_version(PolicyArn=att["PolicyArn"], VersionId=pol["DefaultVersionId"])
        docs.append(ver["PolicyVersion"]["Document"])
    return [json.loads(d) if isinstance(d, str) else d for d in docs]


def queue_url(bed, arn):
    return aws(bed, "sqs").get_queue_url(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"]


def queue_attrs(bed, arn):
    return aws(bed, "sqs").get_queue_attributes(QueueUrl=queue_url(bed, arn), AttributeNames=["All"])["Attributes"]


def key_policy(bed, key_id):
    kms = aws(bed, "kms")
    key_id = kms.describe_key(KeyId=key_id)["KeyMetadata"]["KeyId"]
    return kms.get_key_policy(KeyId=key_id, PolicyName="default")["Policy"]


def sqs_delivery_allowed(bed, queue_arn, source_arn, service="events.amazonaws.com"):
    """What a delivery from `source_arn` lacks to land in `queue_arn`: [] when nothing."""
    attrs = queue_attrs(bed, queue_arn)
    ctx = {"aws:SourceArn": source_arn, "aws:SourceAccount": ACCOUNT, "aws:PrincipalServiceName": service}
    missing = []
    if not allows([json.loads(attrs.get("Policy", "{}"))], "sqs:SendMessage", queue_arn, ctx):
        missing.append(f"the queue policy of {queue_arn} refuses sqs:SendMessage from {source_arn}")
    key = attrs.get("KmsMasterKeyId")
    if key:
        kms = aws(bed, "kms").describe_key(KeyId=key)["KeyMetadata"]
        policy = json.loads(key_policy(bed, key))
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            if not allows([policy], action, kms["Arn"], ctx):
                missing.append(f"the key policy of {key} (queue {queue_arn}) refuses {action} to {service}")
    return missing


# ------------------------------------------------------------------------------------------------
# wiring


def test_every_rule_target_and_dead_letter_queue_accepts_the_rules_deliveries(bed):
    checked, missing = [], []
    for region in (REGION, "us-east-1"):
        events = aws(bed, "events", region)
        for rule in events.list_rules(EventBusName="default")["Rules"]:
            for target in events.list_targets_by_rule(Rule=rule["Name"], EventBusName="default")["Targets"]:
                arns = [target["Arn"]] + [target.get("DeadLetterConfig", {}).get("Arn")]
                for arn in filter(None, arns):
                    if arn.startswith("arn:aws:sqs:"):
                        missing += sqs_delivery_allowed(bed, arn, rule["Arn"])
                    elif ":event-bus/" in arn:
                        # Forwarding to another region's bus goes with the target's role
                        # (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-region.html).
                        docs = role_policies(bed, target["RoleArn"])
                        if not allows(docs, "events:PutEvents", arn, {}):
                            missing.append(f"{target['RoleArn']} may not put events on {arn} for {rule['Arn']}")
                    else:
                        missing.append(f"{rule['Arn']} targets {arn}, which this test does not know")
                    checked.append((rule["Name"], arn))
    assert not missing, "\n".join(missing)
    names = {r for r, _ in checked}
    # The module's three rules, each with its queue and dead-letter queue, and the forwarder.
    assert {"cellbridge-state-sync-state-object-created", "cellbridge-state-sync-eks-delete-cluster",
            "cellbridge-cluster-bootstrap-eks-create-cluster"} <= names, checked
    assert len(checked) >= 7, checked


def test_every_schedule_may_deliver_to_its_target(bed):
    scheduler = aws(bed, "scheduler")
    schedules = scheduler.list_schedules()["Schedules"]
    assert schedules, "the module deployed no schedule (sync-all, the access sweep)"
    for s in schedules:
        full = scheduler.get_schedule(Name=s["Name"], GroupName=s.get("GroupName", "default"))
        target = full["Target"]
        docs = role_policies(bed, target["RoleArn"])
        if target["Arn"].startswith("arn:aws:sqs:"):
            assert allows(docs, "sqs:SendMessage", target["Arn"], {}), (s["Name"], target["Arn"])
            key = queue_attrs(bed, target["Arn"]).get("KmsMasterKeyId")
            if key:
                key_arn = aws(bed, "kms").describe_key(KeyId=key)["KeyMetadata"]["Arn"]
                assert allows(docs, "kms:GenerateDataKey", key_arn, {}), (s["Name"], key_arn)
        else:
            assert allows(docs, "lambda:InvokeFunction", target["Arn"], {}), (s["Name"], target["Arn"])
        # The schedule's payload is one the function reads.
        body = json.loads(target["Input"])
        assert body.get("action") in ("sync-all", "sweep"), (s["Name"], body)


@pytest.mark.parametrize("function", ["state_sync", "cluster_bootstrap"])
def test_each_function_reads_its_own_queue_and_reports_item_failures(bed, function):
    lam = aws(bed, "lambda")
    name = bed["outputs"][f"{function}_function_name"]
    queue_arn = bed["outputs"][f"{function}_queue_arn"]
    arn = lam.get_function_configuration(FunctionName=name)["FunctionArn"]
    mappings = [m for m in lam.list_event_source_mappings()["EventSourceMappings"] if m["FunctionArn"] == arn]
    assert len(mappings) == 1, f"{name}: {len(mappings)} event source mappings"
    [mapping] = mappings
    assert mapping["EventSourceArn"] == queue_arn, mapping
    assert mapping.get("FunctionResponseTypes") == ["ReportBatchItemFailures"], mapping
    role = lam.get_function_configuration(FunctionName=name)["Role"]
    docs = role_policies(bed, role)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"):
        assert allows(docs, action, queue_arn, {}), f"{role} may not {action} on {queue_arn}"
    key = queue_attrs(bed, queue_arn).get("KmsMasterKeyId")
    key_arn = aws(bed, "kms").describe_key(KeyId=key)["KeyMetadata"]["Arn"]
    assert allows(docs, "kms:Decrypt", key_arn, {"kms:ViaService": f"sqs.{REGION}.amazonaws.com"}), (role, key_arn)
    # A redrive policy sends what keeps failing to the dead-letter queue, which alarms.
    redrive = json.loads(queue_attrs(bed, queue_arn)["RedrivePolicy"])
    dlq = aws(bed, "sqs").get_queue_attributes(QueueUrl=bed["outputs"][f"{function}_dlq_url"],
                                               AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert redrive["deadLetterTargetArn"] == dlq, redrive


# ------------------------------------------------------------------------------------------------
# end to end


def deliver(bed, queue_arn, within=20):
    """The one message moto's EventBridge delivered to `queue_arn`, as the event Lambda's SQS event
    source builds from it (https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html#example-standard-queue-message-event)."""
    sqs = aws(bed, "sqs")
    url = queue_url(bed, queue_arn)
    end = time.time() + within
    while time.time() < end:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"],
                                  WaitTimeSeconds=1).get("Messages", [])
        if got:
            assert len(got) == 1, [m["Body"] for m in got]
            m = got[0]
            return url, {"Records": [{
                "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": REGION,
            }]}
    raise AssertionError(f"nothing reached {queue_arn} within {within}s")


def run_as_deployed(bed, function, event, extra_env=None):
    """The function binary with the deployed configuration and role, as Lambda invokes it; the
    answer, after which the message is deleted unless the answer lists it as failed (what the
    event source mapping does with ReportBatchItemFailures). `extra_env` adds settings the module
    leaves at their defaults."""
    lam = aws(bed, "lambda")
    conf = lam.get_function_configuration(FunctionName=bed["outputs"][f"{function}_function_name"])
    creds = aws(bed, "sts").assume_role(RoleArn=conf["Role"], RoleSessionName=conf["FunctionName"])["Credentials"]
    env = dict(conf.get("Environment", {}).get("Variables", {}))
    env.update({
        "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
        "AWS_SESSION_TOKEN": creds["SessionToken"],
        "AWS_LAMBDA_FUNCTION_NAME": conf["FunctionName"], "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(conf["MemorySize"]),
        "AWS_LAMBDA_LOG_GROUP_NAME": conf.get("LoggingConfig", {}).get("LogGroup", f"/aws/lambda/{conf['FunctionName']}"),
        "AWS_LAMBDA_LOG_STREAM_NAME": "deployed",
        # What differs from AWS: where AWS and GitHub are.
        "AWS_ENDPOINT_URL": bed["moto"], "GITHUB_API_URL": bed["github"],
    })
    env.update(extra_env or {})
    fmt = conf.get("LoggingConfig", {}).get("LogFormat")
    if fmt:
        env["AWS_LAMBDA_LOG_FORMAT"] = fmt
    f = Function(binary(function.replace("_", "-")), env, conf["FunctionArn"], deadline_secs=conf["Timeout"])
    try:
        kind, answer = f.invoke(event, within=120)
    finally:
        f.stop()
    assert kind == "response", f"{function} answered {kind}: {answer}\n{f.log()}"
    if "Records" not in event:  # a manual payload, invoked directly
        return answer, f.log()
    failed = {i["itemIdentifier"] for i in answer.get("batchItemFailures", [])}
    url = queue_url(bed, event["Records"][0]["eventSourceARN"])
    for r in event["Records"]:
        if r["messageId"] not in failed:
            aws(bed, "sqs").delete_message(QueueUrl=url, ReceiptHandle=r["receiptHandle"])
    return answer, f.log()


def put_event(bed, sample, detail_fix):
    event = json.loads((ROOT / "events" / sample).read_text())
    detail_fix(event["detail"])
    entry = {"Source": event["source"], "DetailType": event["detail-type"],
             "Detail": json.dumps(event["detail"]), "Resources": event.get("resources", []),
             "EventBusName": "default"}
    r = aws(bed, "events").put_events(Entries=[entry])
    assert r["FailedEntryCount"] == 0, r


def test_a_state_write_becomes_a_pull_request_through_the_deployed_rule_queue_and_function(bed):
    http("POST", f"{bed['github']}/_fake/seed", {"repo": "acme/fleet", "branch": "main", "replace": True,
                                                  "dir": str(ROOT / "examples/fleet")})
    aws(bed, "secretsmanager").put_secret_value(SecretId="cellbridge/github",
                                                SecretString=json.dumps({"token": GITHUB_TOKEN}))
    s3 = aws(bed, "s3")
    s3.create_bucket(Bucket="acme-tfstate", CreateBucketConfiguration={"LocationConstraint": REGION})
    key = f"cells/{NEW_CELL}/terraform.tfstate"
    s3.put_object(Bucket="acme-tfstate", Key=key, Body=(ROOT / "examples/states" / f"{NEW_CELL}.tfstate").read_bytes())

    def fix(detail):
        detail["bucket"]["name"] = "acme-tfstate"
        detail["object"]["key"] = key

    put_event(bed, "eventbridge-s3-object-created.json", fix)
    url, event = deliver(bed, bed["outputs"]["state_sync_queue_arn"])
    answer, log = run_as_deployed(bed, "state_sync", event)
    assert answer["batchItemFailures"] == [], f"{answer}\n{log}"
    [cell] = answer["cells"]
    assert (cell["cell"], cell["action"]) == (NEW_CELL, "opened"), f"{answer}\n{log}"
    state = http("GET", f"{bed['github']}/_fake/state?repo=acme/fleet")
    [pull] = [p for p in state["pulls"] if p["state"] == "open"]
    assert pull["head"]["ref"] == f"cellbridge/{NEW_CELL}", f"{pull}\n{log}"
    # The commit status the strict check sets on the head, as the deployed function wrote it.
    assert [s["state"] for s in pull["statuses"]] == ["success"], pull["statuses"]
    left = aws(bed, "sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                                                               "ApproximateNumberOfMessagesNotVisible"])
    assert left["Attributes"] == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, left


def ssh_key():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public


def test_a_new_cluster_is_bootstrapped_through_the_deployed_rule_queue_and_function(bed):
    # A fleet whose cells carry Flux's whole components file (examples/fleet's is trimmed).
    http("POST", f"{bed['github']}/_fake/seed", {"repo": "acme/fleet", "branch": "main", "replace": True,
                                                  "dir": str(ROOT / "tests/fixtures/flux/fleet")})
    aws(bed, "secretsmanager").put_secret_value(SecretId="cellbridge/github",
                                                SecretString=json.dumps({"token": GITHUB_TOKEN}))
    private, public = ssh_key()
    aws(bed, "secretsmanager").put_secret_value(SecretId="cellbridge/flux-git", SecretString=json.dumps(
        {"identity": private, "identity.pub": public, "known_hosts": KNOWN_HOSTS}))
    aws(bed, "eks").create_cluster(name=CLUSTER, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks-cluster",
                                   resourcesVpcConfig={"subnetIds": ["subnet-1"]},
                                   tags={"cellbridge.dev/cell": CLUSTER_CELL})
    http("POST", f"{bed['moto']}/_cellbridge/eks/clusters/{CLUSTER}",
         {"region": REGION, "endpoint": f"https://127.0.0.1:{bed['kube'].port}", "ca_pem": bed["ca_pem"]})
    control = f"http://127.0.0.1:{bed['kube'].ports['CONTROL_PORT']}"
    http("POST", f"{control}/_fake/auto-ready", {"delay": 0.2, "ready": True})

    def fix(detail):
        detail["requestParameters"]["name"] = CLUSTER
        detail["awsRegion"] = REGION
        detail.get("responseElements", {}).get("cluster", {})["name"] = CLUSTER

    put_event(bed, "cloudtrail-create-cluster.json", fix)
    url, event = deliver(bed, bed["outputs"]["cluster_bootstrap_queue_arn"])
    # The fake's controllers never run, so Flux never takes over: the run's own check is cut to
    # two seconds (CELLBRIDGE_READY_TIMEOUT_SECS, default 120) and the rest is handed to re-checks.
    answer, log = run_as_deployed(bed, "cluster_bootstrap", event, {"CELLBRIDGE_READY_TIMEOUT_SECS": "2"})
    assert answer["batchItemFailures"] == [], f"{answer}\n{log}"
    objects = {(o["kind"], o["metadata"]["name"]) for o in http("GET", f"{control}/_fake/objects?brief=1")}
    want = {("Namespace", "flux-system"), ("Secret", "flux-system"), ("GitRepository", "flux-system"),
            ("Kustomization", "flux-system"), ("Deployment", "source-controller")}
    assert want <= objects, f"missing {sorted(want - objects)}\n{log}"
    # The temporary access entry is gone: only what was there before remains.
    entries = aws(bed, "eks").list_access_entries(clusterName=CLUSTER)["accessEntries"]
    assert not [e for e in entries if "cellbridge-cluster-bootstrap" in e], entries
    # Still confirming: recorded on the cluster (TagResource with the deployed role's session),
    # and the next check queued on the function's own queue with a delay
    # (CELLBRIDGE_CONFIRM_QUEUE_URL, SendMessageBatch DelaySeconds).
    tags = aws(bed, "eks").describe_cluster(name=CLUSTER)["cluster"].get("tags", {})
    assert tags.get("cellbridge.dev/flux") == "confirming", f"{tags}\n{log}"
    assert tags.get("cellbridge.dev/flux-since", "").endswith("Z"), tags
    left = aws(bed, "sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert left.get("ApproximateNumberOfMessagesDelayed") == "1", f"{left}\n{log}"


# ------------------------------------------------------------------------------------------------
# the documented configurations, as deployed


def function_conf(bed, name):
    return aws(bed, "lambda").get_function_configuration(FunctionName=name)


def role_of(bed, function_name):
    return function_conf(bed, function_name)["Role"]


def sample_key(pattern):
    return pattern.replace("{workspace}", "blue").replace("{cell}", "eu-west-1")


@pytest.mark.parametrize("prefix, pattern", [
    ("cellbridge", "cells/{cell}/terraform.tfstate"),
    ("cellbridge", "env:/{workspace}/cells/{cell}/terraform.tfstate"),  # a workspace of the default pattern
    ("cb-ws-named", "env:/{workspace}/stacks/eks/terraform.tfstate"),
    ("cb-ws-cells", "env:/{workspace}/cells/{cell}/terraform.tfstate"),
])
def test_state_sync_reads_exactly_the_states_of_its_key_pattern(bed, prefix, pattern):
    fn = f"{prefix}-state-sync"
    conf = function_conf(bed, fn)
    bucket = conf["Environment"]["Variables"]["CELLBRIDGE_STATE_BUCKET"]
    docs = role_policies(bed, conf["Role"])
    key = sample_key(pattern)
    assert allows(docs, "s3:GetObject", f"arn:aws:s3:::{bucket}/{key}", {}), f"{fn} cannot read s3://{bucket}/{key}"
    for other in ("other/terraform.tfstate", key.replace("terraform.tfstate", "secrets.json")):
        assert not allows(docs, "s3:GetObject", f"arn:aws:s3:::{bucket}/{other}", {}), f"{fn} reads s3://{bucket}/{other}"
    # sync-all lists under the pattern's fixed head; S3 checks ListBucket, with no prefix in the
    # request's context, to answer a GetObject of a missing key 404 rather than 403
    # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html, "Permissions").
    head = pattern.split("{", 1)[0]
    assert allows(docs, "s3:ListBucket", f"arn:aws:s3:::{bucket}", {"s3:prefix": head}), (fn, head)
    assert allows(docs, "s3:ListBucket", f"arn:aws:s3:::{bucket}", {}), fn


def test_a_state_bucket_in_another_account_is_read_only_through_its_role(bed):
    conf = function_conf(bed, "cb-bucket-elsewhere-state-sync")
    assert conf["Environment"]["Variables"]["CELLBRIDGE_STATE_ROLE_ARN"] == STATE_ROLE
    docs = role_policies(bed, conf["Role"])
    assert allows(docs, "sts:AssumeRole", STATE_ROLE, {"sts:RoleSessionName": "cellbridge-state-sync"})
    bucket = conf["Environment"]["Variables"]["CELLBRIDGE_STATE_BUCKET"]
    assert not allows(docs, "s3:GetObject", f"arn:aws:s3:::{bucket}/cells/eu-west-1/terraform.tfstate", {}), (
        "the function's own role reads a bucket it reaches through STATE_ROLE")


def test_cells_in_another_account_are_reached_through_exactly_their_role(bed):
    """Each function assumes its own role in the cell account and no other: cluster-bootstrap the
    bootstrap role (account_roles), state-sync the describe-only one (account_describe_roles)."""
    out = bed["outputs"]
    for fn, session, own, other, variable in (
            (out["state_sync_function_name"], "cellbridge-state-sync", OTHER_ACCOUNT_DESCRIBE_ROLE,
             OTHER_ACCOUNT_ROLE, "CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES"),
            (out["cluster_bootstrap_function_name"], "cellbridge-bootstrap", OTHER_ACCOUNT_ROLE,
             OTHER_ACCOUNT_DESCRIBE_ROLE, "CELLBRIDGE_ACCOUNT_ROLES")):
        conf = function_conf(bed, fn)
        env = conf["Environment"]["Variables"]
        assert json.loads(env[variable]) == {OTHER_ACCOUNT: own}, (fn, env)
        # Neither function is handed the other's roles.
        assert not ({"CELLBRIDGE_ACCOUNT_ROLES", "CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES"} - {variable}) & env.keys(), (fn, env)
        docs = role_policies(bed, conf["Role"])
        assert allows(docs, "sts:AssumeRole", own, {"sts:RoleSessionName": session}), fn
        for refused in (other, "arn:aws:iam::333333333333:role/cellbridge-bootstrap"):
            assert not allows(docs, "sts:AssumeRole", refused, {"sts:RoleSessionName": session}), (fn, refused)
    # The other account's region-forwarder may put its CreateCluster events on this bus.
    policy = json.loads(aws(bed, "events").describe_event_bus(Name="default")["Policy"])
    assert allows([policy], "events:PutEvents", f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/default",
                  {"aws:PrincipalAccount": OTHER_ACCOUNT,
                   "aws:PrincipalArn": f"arn:aws:iam::{OTHER_ACCOUNT}:role/forwarder"}), policy


def assumed(bed, creds, role, session, policy=None):
    """`role`'s session credentials, assumed through moto's STS with `creds`."""
    extra = {"Policy": policy} if policy else {}
    got = aws(bed, "sts", **creds).assume_role(RoleArn=role, RoleSessionName=session, **extra)["Credentials"]
    return {"key": got["AccessKeyId"], "secret": got["SecretAccessKey"], "token": got["SessionToken"]}


def test_state_sync_assumes_only_its_describe_only_role_in_the_cell_account(bed):
    """state-sync's role assumes its describe-only role in the cell account (moto's STS, as the
    function does: session cellbridge-state-sync, the DescribeCluster-only session policy), and
    that role, as deployed there by modules/cell-account, trusts state-sync's role and nothing
    else and allows eks:DescribeCluster and nothing else; the bootstrap role there trusts
    cluster-bootstrap's role alone. moto enforces no IAM, so the deployed documents decide."""
    out = bed["outputs"]
    state_sync, cluster_bootstrap = out["state_sync_role_arn"], out["cluster_bootstrap_role_arn"]
    home = assumed(bed, {}, state_sync, "cellbridge-state-sync")
    describe_only = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Sid": "DescribeOnly", "Effect": "Allow", "Action": "eks:DescribeCluster", "Resource": "*"}]})
    there = assumed(bed, home, OTHER_ACCOUNT_DESCRIBE_ROLE, "cellbridge-state-sync", describe_only)
    who = aws(bed, "sts", **there).get_caller_identity()
    assert (who["Account"], who["Arn"]) == (
        OTHER_ACCOUNT, f"arn:aws:sts::{OTHER_ACCOUNT}:assumed-role/cellbridge-state-sync-describe/cellbridge-state-sync"), who
    iam = aws(bed, "iam", "us-east-1", **there)

    def role(arn):
        name = arn.rsplit("/", 1)[1]
        trust = iam.get_role(RoleName=name)["Role"]["AssumeRolePolicyDocument"]
        docs = [iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"]
                for p in iam.list_role_policies(RoleName=name)["PolicyNames"]]
        assert not iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"], f"{arn} has managed policies"
        as_json = lambda d: json.loads(d) if isinstance(d, str) else d
        return as_json(trust), [as_json(d) for d in docs]

    def assume(trust, principal):
        return allows([trust], "sts:AssumeRole", "*",
                      {"aws:PrincipalArn": principal, "aws:PrincipalAccount": principal.split(":")[4]})

    trust, docs = role(OTHER_ACCOUNT_DESCRIBE_ROLE)
    assert [st["Principal"] for st in trust["Statement"]] in ([{"AWS": state_sync}], [{"AWS": [state_sync]}]), trust
    assert assume(trust, state_sync)
    for principal in (cluster_bootstrap, f"arn:aws:iam::{OTHER_ACCOUNT}:root", f"arn:aws:iam::{ACCOUNT}:root"):
        assert not assume(trust, principal), f"{OTHER_ACCOUNT_DESCRIBE_ROLE} trusts {principal}"
    cluster = f"arn:aws:eks:{REGION}:{OTHER_ACCOUNT}:cluster/{CLUSTER}"
    assert {a for d in docs for st in d["Statement"] for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])} == {
        "eks:DescribeCluster"}, docs
    assert allows(docs, "eks:DescribeCluster", cluster, {})
    entry = f"arn:aws:eks:{REGION}:{OTHER_ACCOUNT}:access-entry/{CLUSTER}/role/{OTHER_ACCOUNT}/cellbridge-state-sync-describe/x"
    assert not allows(docs, "eks:CreateAccessEntry", cluster, {"eks:principalArn": OTHER_ACCOUNT_DESCRIBE_ROLE})
    assert not allows(docs, "eks:AssociateAccessPolicy", entry, {})
    # The bootstrap role there: cluster-bootstrap's alone, never state-sync's way in.
    trust, docs = role(OTHER_ACCOUNT_ROLE)
    assert assume(trust, cluster_bootstrap)
    assert not assume(trust, state_sync), f"{OTHER_ACCOUNT_ROLE} trusts state-sync"
    assert allows(docs, "eks:CreateAccessEntry", cluster, {
        "aws:ResourceTag/cellbridge.dev/cell": "prod", "eks:principalArn": OTHER_ACCOUNT_ROLE})
    # And state-sync's own policy never lets it try.
    assert not allows(role_policies(bed, state_sync), "sts:AssumeRole", OTHER_ACCOUNT_ROLE, {})


def test_cluster_bootstrap_runs_in_the_hub_vpc_and_the_clusters_admit_it(bed):
    ec2 = aws(bed, "ec2")
    [subnet] = ec2.describe_subnets(Filters=[{"Name": "cidr-block", "Values": ["10.20.1.0/24"]}])["Subnets"]
    conf = function_conf(bed, "cb-hub-cluster-bootstrap")
    assert conf["VpcConfig"]["SubnetIds"] == [subnet["SubnetId"]], conf["VpcConfig"]
    assert conf["Environment"]["Variables"]["CELLBRIDGE_VPC_ID"] == subnet["VpcId"]
    # Lambda needs ENI rights for a function in a VPC
    # (https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html#configuration-vpc-permissions).
    name = conf["Role"].rsplit("/", 1)[1]
    attached = [a["PolicyName"] for a in aws(bed, "iam", "us-east-1").list_attached_role_policies(RoleName=name)["AttachedPolicies"]]
    assert "AWSLambdaVPCAccessExecutionRole" in attached, attached
    assert not function_conf(bed, "cb-hub-state-sync").get("VpcConfig", {}).get("SubnetIds"), "state-sync moved too"
    [cluster_sg] = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["eks-cluster"]}])["SecurityGroups"]
    rules = ec2.describe_security_group_rules(Filters=[{"Name": "group-id", "Values": [cluster_sg["GroupId"]]}])
    ingress = [r for r in rules["SecurityGroupRules"] if not r["IsEgress"] and r.get("FromPort") == 443]
    assert ingress, f"the cluster's security group admits nothing on 443: {rules['SecurityGroupRules']}"
    assert {r.get("CidrIpv4") for r in ingress} | {r.get("ReferencedGroupInfo", {}).get("GroupId") for r in ingress} & {
        "10.20.1.0/24", *conf["VpcConfig"]["SecurityGroupIds"]}, ingress


def test_the_alarms_notify_through_a_topic_cloudwatch_may_encrypt_for(bed):
    """CloudWatch publishes an alarm to an encrypted topic only where the topic's key lets
    cloudwatch.amazonaws.com GenerateDataKey and Decrypt; the AWS managed `alias/aws/sns` cannot
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html)."""
    alarms = aws(bed, "cloudwatch").describe_alarms(AlarmNamePrefix="cellbridge-")["MetricAlarms"]
    assert alarms, "the example deployed no alarm"
    topics = {a for alarm in alarms for a in alarm["AlarmActions"]}
    assert topics, "no alarm notifies anyone"
    for topic in topics:
        key = aws(bed, "sns").get_topic_attributes(TopicArn=topic)["Attributes"].get("KmsMasterKeyId")
        assert key and not key.startswith("alias/aws/"), f"{topic} is encrypted with {key}"
        kms = aws(bed, "kms").describe_key(KeyId=key)["KeyMetadata"]
        policy = json.loads(key_policy(bed, key))
        ctx = {"aws:PrincipalServiceName": "cloudwatch.amazonaws.com", "aws:SourceAccount": ACCOUNT}
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            assert allows([policy], action, kms["Arn"], ctx), f"{topic}: its key refuses CloudWatch {action}"
    # Every rule's undelivered events alarm too (EventBridge's FailedInvocations per rule).
    failed = {d["Value"] for a in alarms if a["MetricName"] == "FailedInvocations" for d in a["Dimensions"]
              if d["Name"] == "RuleName"}
    rules = {r["Name"] for r in aws(bed, "events").list_rules(EventBusName="default", NamePrefix="cellbridge-")["Rules"]}
    assert rules and rules <= failed, f"rules without a FailedInvocations alarm: {sorted(rules - failed)}"


def test_cluster_bootstrap_follows_its_clusters_through_its_own_queue_and_records_on_them(bed):
    """After applying Flux, cluster-bootstrap re-checks the cluster through messages to its own
    queue (SendMessage with DelaySeconds, encrypted with the queue's key) until the deadline, and
    records each outcome as the cluster's two flux tags (TagResource with those keys only); a final
    outcome other than ready raises the flux-stuck alarm."""
    conf = function_conf(bed, bed["outputs"]["cluster_bootstrap_function_name"])
    env = conf["Environment"]["Variables"]
    assert env["CELLBRIDGE_CONFIRM_QUEUE_URL"] == bed["outputs"]["cluster_bootstrap_queue_url"], env
    assert env["CELLBRIDGE_CONFIRM_DEADLINE_SECS"] == "1200", env
    docs = role_policies(bed, conf["Role"])
    queue_arn = bed["outputs"]["cluster_bootstrap_queue_arn"]
    assert allows(docs, "sqs:SendMessage", queue_arn, {}), f"{conf['Role']} may not send re-checks to {queue_arn}"
    assert not allows(docs, "sqs:SendMessage", bed["outputs"]["state_sync_queue_arn"], {})
    key = queue_attrs(bed, queue_arn).get("KmsMasterKeyId")
    key_arn = aws(bed, "kms").describe_key(KeyId=key)["KeyMetadata"]["Arn"]
    assert allows(docs, "kms:GenerateDataKey", key_arn, {"kms:ViaService": f"sqs.{REGION}.amazonaws.com"}), key_arn
    cluster = f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/{CLUSTER}"
    flux = ["cellbridge.dev/flux", "cellbridge.dev/flux-since"]
    assert allows(docs, "eks:TagResource", cluster, {"aws:TagKeys": flux}), conf["Role"]
    assert not allows(docs, "eks:TagResource", cluster, {"aws:TagKeys": flux + ["cellbridge.dev/cell"]})
    assert not allows(docs, "eks:TagResource", f"arn:aws:eks:{REGION}:999999999999:cluster/{CLUSTER}",
                      {"aws:TagKeys": flux})
    [alarm] = aws(bed, "cloudwatch").describe_alarms(AlarmNames=[f"{conf['FunctionName']}-flux-stuck"])["MetricAlarms"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "cellbridge", "FluxStuck", "Sum", 3600), alarm
    assert alarm["Dimensions"] == [{"Name": "Function", "Value": conf["FunctionName"]}], alarm
    assert alarm["AlarmActions"] and alarm["OKActions"] == alarm["AlarmActions"], alarm


def test_the_deployed_state_sync_asks_about_a_cell_accounts_cluster_through_its_describe_only_role(bed, tmp_path):
    """A destroyed cell of the cell account, run through the deployed state-sync: it asks EKS in
    that account (through the describe-only role, the only one its configuration and policy give
    it), not at home, where a cluster of the same name and region stands; there none does, so the
    decommission is proposed, naming the account that answered."""
    fleet = tmp_path / "fleet"
    shutil.copytree(ROOT / "examples/fleet", fleet)
    meta = fleet / "clusters" / CLUSTER / "cell-metadata.yaml"
    text = meta.read_text()
    assert f'aws_account_id: "{ACCOUNT}"' in text, text
    meta.write_text(text.replace(f'aws_account_id: "{ACCOUNT}"', f'aws_account_id: "{OTHER_ACCOUNT}"'))
    http("POST", f"{bed['github']}/_fake/seed", {"repo": "acme/fleet", "branch": "main", "replace": True, "dir": str(fleet)})
    aws(bed, "secretsmanager").put_secret_value(SecretId="cellbridge/github",
                                                SecretString=json.dumps({"token": GITHUB_TOKEN}))
    eks = aws(bed, "eks")
    if CLUSTER not in eks.list_clusters()["clusters"]:
        eks.create_cluster(name=CLUSTER, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks-cluster",
                           resourcesVpcConfig={"subnetIds": ["subnet-1"]})
    s3 = aws(bed, "s3")
    if "acme-tfstate" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="acme-tfstate", CreateBucketConfiguration={"LocationConstraint": REGION})
    lineage = re.search(r'state-lineage: "([^"]+)"', text).group(1)
    destroyed = {"version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": lineage, "outputs": {}, "resources": []}
    s3.put_object(Bucket="acme-tfstate", Key=f"cells/{CLUSTER}/terraform.tfstate", Body=json.dumps(destroyed).encode())
    answer, log = run_as_deployed(bed, "state_sync", {"action": "sync", "cell": CLUSTER})
    [cell] = answer.get("cells", [answer])
    assert cell["action"] == "decommission-opened", f"{answer}\n{log}"
    assert (cell["decommission"]["account"], cell["decommission"]["eks"]) == (OTHER_ACCOUNT, {"presence": "gone"}), cell
    assert OTHER_ACCOUNT_DESCRIBE_ROLE in log and OTHER_ACCOUNT_ROLE not in log, log
