"""Routes the sample events of events/ through the module's own EventBridge patterns.

Each file in infra/patterns/ becomes a rule on an EventBridge bus in moto with one SQS queue as
its target, exactly the wiring of infra/events.tf. Every EventBridge-shaped sample (and the
EventBridge events wrapped in SQS samples) is sent with PutEvents, one at a time, and must land
in exactly the queue of the function that handles it; near misses (another bucket, a lock file,
a failed call, another service's CreateCluster, ...) must land nowhere.

moto: MOTO_URL if set, else tests/fakes/moto_server.py started here.
"""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = ROOT / "infra" / "patterns"
EVENTS = ROOT / "events"
REGION = "eu-west-1"
# The bucket the samples use; templatefile() gets var.state_bucket_name the same way.
BUCKET = "acme-tfstate"

# Which rule (pattern file stem) each EventBridge-shaped sample must reach. A new sample file that
# is an EventBridge event must be added here, so no sample goes untested.
EXPECTED_ROUTE = {
    "eventbridge-s3-object-created.json": "s3-state-object-created",
    "cloudtrail-create-cluster.json": "eks-create-cluster",
    "cloudtrail-create-cluster-cross-account.json": "eks-create-cluster",
    "sqs-eventbridge-s3.json": "s3-state-object-created",
    "sqs-cloudtrail-create-cluster.json": "eks-create-cluster",
    "cloudtrail-delete-cluster.json": "eks-delete-cluster",
    "sqs-cloudtrail-delete-cluster.json": "eks-delete-cluster",
}

# The functions behind the rules (infra/events.tf targets).
RULE_FUNCTION = {
    "s3-state-object-created": "state-sync",
    "eks-create-cluster": "cluster-bootstrap",
    "eks-delete-cluster": "state-sync",
}


# ------------------------------------------------------------------------------------------------
# moto


@pytest.fixture(scope="module")
def moto_url():
    url = os.environ.get("MOTO_URL")
    if url:
        yield url.rstrip("/")
        return
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fakes" / "moto_server.py"), "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = None
        for line in proc.stdout:
            if line.startswith("PORT="):
                port = int(line.strip().split("=", 1)[1])
                break
        if port is None:
            pytest.fail(f"moto_server.py exited (code {proc.wait()}) without printing PORT=")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stdin.close()  # the server stops when its stdin closes
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def client(service, url):
    return boto3.client(
        service,
        endpoint_url=url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


# ------------------------------------------------------------------------------------------------
# patterns and samples


def rendered_patterns():
    """Pattern stem -> pattern dict, rendered as Terraform's templatefile() would for BUCKET."""
    out = {}
    for path in sorted(PATTERNS.iterdir()):
        text = path.read_text()
        if path.name.endswith(".json.tftpl"):
            stem = path.name[: -len(".json.tftpl")]
            text = text.replace("${bucket}", BUCKET)
        elif path.suffix == ".json":
            stem = path.stem
        else:
            continue
        # Anything else would be a template directive this test does not render.
        assert "${" not in text and "%{" not in text, f"{path.name}: unrendered template syntax"
        out[stem] = json.loads(text)
    return out


def is_eventbridge_event(obj):
    return isinstance(obj, dict) and {"detail-type", "source", "detail"} <= obj.keys()


def eventbridge_samples():
    """(label, event) for every EventBridge event in events/, direct or as an SQS record body."""
    samples = []
    for path in sorted(EVENTS.glob("*.json")):
        doc = json.loads(path.read_text())
        if is_eventbridge_event(doc):
            samples.append((path.name, doc))
        for i, record in enumerate(doc.get("Records", []) if isinstance(doc, dict) else []):
            if record.get("eventSource") == "aws:sqs":
                body = json.loads(record["body"])
                if is_eventbridge_event(body):
                    samples.append((f"{path.name}#{i}", body))
    return samples


def load(name):
    return json.loads((EVENTS / name).read_text())


def near_misses():
    """(label, event) that no cellbridge rule may match: realistic events of the same families."""
    s3 = load("eventbridge-s3-object-created.json")
    ct = load("cloudtrail-create-cluster.json")
    misses = []

    other_bucket = json.loads(json.dumps(s3))
    other_bucket["detail"]["bucket"]["name"] = "acme-artifacts"
    other_bucket["resources"] = ["arn:aws:s3:::acme-artifacts"]
    misses.append(("object created in another bucket", other_bucket))

    lock = json.loads(json.dumps(s3))
    lock["detail"]["object"]["key"] = "cells/prod-eu-west-1/terraform.tfstate.tflock"
    lock["detail"]["object"]["size"] = 212
    misses.append(("terraform .tflock object", lock))

    other_key = json.loads(json.dumps(s3))
    other_key["detail"]["object"]["key"] = "cells/prod-eu-west-1/plan.json"
    misses.append(("non-state object in the state bucket", other_key))

    deleted = json.loads(json.dumps(s3))
    deleted["detail-type"] = "Object Deleted"
    deleted["detail"]["reason"] = "DeleteObject"
    deleted["detail"]["deletion-type"] = "Delete Marker Created"
    misses.append(("state object deleted", deleted))

    ecs = json.loads(json.dumps(ct))
    ecs["source"] = "aws.ecs"
    ecs["detail"]["eventSource"] = "ecs.amazonaws.com"
    ecs["detail"]["requestParameters"] = {"clusterName": "prod-eu-west-1"}
    ecs["detail"]["responseElements"] = {"cluster": {"clusterName": "prod-eu-west-1", "status": "ACTIVE"}}
    misses.append(("ECS CreateCluster", ecs))

    update = json.loads(json.dumps(ct))
    update["detail"]["eventName"] = "UpdateClusterConfig"
    update["detail"]["requestParameters"] = {"name": "prod-eu-west-1", "logging": {"clusterLogging": []}}
    update["detail"]["responseElements"] = {"update": {"id": str(uuid.uuid4()), "status": "InProgress"}}
    misses.append(("EKS UpdateClusterConfig", update))

    failed = json.loads(json.dumps(ct))
    failed["detail"]["errorCode"] = "ResourceInUseException"
    failed["detail"]["errorMessage"] = "Cluster already exists with name: prod-eu-west-1"
    failed["detail"]["responseElements"] = None
    misses.append(("EKS CreateCluster that failed", failed))

    dc = load("cloudtrail-delete-cluster.json")
    failed_delete = json.loads(json.dumps(dc))
    failed_delete["detail"]["errorCode"] = "ResourceInUseException"
    failed_delete["detail"]["errorMessage"] = "Cluster has nodegroups attached"
    failed_delete["detail"]["responseElements"] = None
    misses.append(("EKS DeleteCluster that failed", failed_delete))

    nodegroup = json.loads(json.dumps(dc))
    nodegroup["detail"]["eventName"] = "DeleteNodegroup"
    nodegroup["detail"]["requestParameters"] = {"name": "prod-eu-west-1", "nodegroupName": "system"}
    nodegroup["detail"]["responseElements"] = {"nodegroup": {"nodegroupName": "system", "status": "DELETING"}}
    misses.append(("EKS DeleteNodegroup", nodegroup))

    ecs_delete = json.loads(json.dumps(dc))
    ecs_delete["source"] = "aws.ecs"
    ecs_delete["detail"]["eventSource"] = "ecs.amazonaws.com"
    ecs_delete["detail"]["requestParameters"] = {"cluster": "prod-eu-west-1"}
    ecs_delete["detail"]["responseElements"] = {"cluster": {"clusterName": "prod-eu-west-1", "status": "INACTIVE"}}
    misses.append(("ECS DeleteCluster", ecs_delete))

    return misses


def extra_hits():
    """Realistic events the samples do not cover but the rules must route."""
    s3 = load("eventbridge-s3-object-created.json")
    ws = json.loads(json.dumps(s3))
    ws["detail"]["object"]["key"] = "env:/staging/cells/staging-eu-west-1/terraform.tfstate"
    multipart = json.loads(json.dumps(s3))
    multipart["detail"]["reason"] = "CompleteMultipartUpload"
    multipart["detail"]["object"]["etag"] = "4af981f98d22a0b9979da24b259e5e42-3"
    ct = load("cloudtrail-create-cluster.json")
    forwarded = json.loads(json.dumps(ct))
    forwarded["region"] = "us-east-1"
    forwarded["detail"]["awsRegion"] = "us-east-1"
    forwarded["detail"]["requestParameters"]["name"] = "prod-us-east-1"
    forwarded["detail"]["responseElements"]["cluster"]["name"] = "prod-us-east-1"
    dc = load("cloudtrail-delete-cluster.json")
    deleted_elsewhere = json.loads(json.dumps(dc))
    deleted_elsewhere["region"] = "us-east-1"
    deleted_elsewhere["detail"]["awsRegion"] = "us-east-1"
    deleted_elsewhere["detail"]["requestParameters"]["name"] = "prod-us-east-1"
    deleted_elsewhere["detail"]["responseElements"]["cluster"]["name"] = "prod-us-east-1"
    return [
        ("CreateCluster forwarded from us-east-1", forwarded, "eks-create-cluster"),
        ("DeleteCluster forwarded from us-east-1", deleted_elsewhere, "eks-delete-cluster"),
        ("workspace state object (env:/staging/...)", ws, "s3-state-object-created"),
        ("state written by multipart upload", multipart, "s3-state-object-created"),
    ]


# ------------------------------------------------------------------------------------------------
# the wiring


@pytest.fixture(scope="module")
def router(moto_url):
    """A fresh bus with one rule per pattern file, each targeting its own queue."""
    events = client("events", moto_url)
    sqs = client("sqs", moto_url)
    run = uuid.uuid4().hex[:8]
    bus = f"cellbridge-patterns-{run}"
    events.create_event_bus(Name=bus)
    queues = {}
    for stem, pattern in rendered_patterns().items():
        url = sqs.create_queue(QueueName=f"{stem}-{run}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events.put_rule(Name=f"{stem}-{run}", EventBusName=bus, EventPattern=json.dumps(pattern))
        events.put_targets(Rule=f"{stem}-{run}", EventBusName=bus, Targets=[{"Id": "queue", "Arn": arn}])
        queues[stem] = url

    def send(event):
        entry = {
            "EventBusName": bus,
            "Source": event["source"],
            "DetailType": event["detail-type"],
            "Detail": json.dumps(event["detail"]),
            "Resources": event.get("resources", []),
        }
        resp = events.put_events(Entries=[entry])
        assert resp["FailedEntryCount"] == 0, resp
        landed = {}
        for stem, url in queues.items():
            bodies = []
            while True:
                msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
                if not msgs:
                    break
                for m in msgs:
                    bodies.append(json.loads(m["Body"]))
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            if bodies:
                landed[stem] = bodies
        return landed

    yield send
    for stem in queues:
        events.remove_targets(Rule=f"{stem}-{run}", EventBusName=bus, Ids=["queue"])
        events.delete_rule(Name=f"{stem}-{run}", EventBusName=bus)
    events.delete_event_bus(Name=bus)


# ------------------------------------------------------------------------------------------------
# tests


def test_every_pattern_file_is_wired_to_a_function():
    assert set(rendered_patterns()) == set(RULE_FUNCTION), (
        "infra/patterns/ and the rules of infra/events.tf must match one to one"
    )
    tf = (ROOT / "infra" / "main.tf").read_text()
    for path in PATTERNS.iterdir():
        assert f"patterns/{path.name}" in tf, f"infra/main.tf does not load {path.name}"


def test_terraform_renders_the_patterns_as_this_test_does(tmp_path):
    """The rules get templatefile()/file() output; this test's own rendering must be identical."""
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("terraform is not installed: cannot compare with templatefile()")
    env = dict(os.environ)
    if env.get("TF_CLI_CONFIG_FILE") and not os.path.exists(env["TF_CLI_CONFIG_FILE"]):
        del env["TF_CLI_CONFIG_FILE"]
    for stem, expected in rendered_patterns().items():
        tftpl = PATTERNS / f"{stem}.json.tftpl"
        if tftpl.exists():
            expr = f'jsonencode(jsondecode(templatefile("{tftpl}", {{ bucket = "{BUCKET}" }})))'
        else:
            expr = f'jsonencode(jsondecode(file("{PATTERNS / (stem + ".json")}")))'
        # console needs no providers and no init, so it runs offline in an empty directory.
        out = subprocess.run(
            [terraform, "console"], input=expr, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
        )
        assert out.returncode == 0, f"{stem}: terraform console failed: {out.stderr}"
        assert json.loads(json.loads(out.stdout.strip())) == expected, stem


def test_every_eventbridge_sample_has_an_expected_route():
    labels = {label.split("#")[0] for label, _ in eventbridge_samples()}
    assert labels == set(EXPECTED_ROUTE), "classify new EventBridge samples in EXPECTED_ROUTE"


@pytest.mark.parametrize("label,event", eventbridge_samples(), ids=lambda v: v if isinstance(v, str) else "")
def test_sample_reaches_exactly_its_function(router, label, event):
    want = EXPECTED_ROUTE[label.split("#")[0]]
    landed = router(event)
    assert set(landed) == {want}, f"{label}: expected only {RULE_FUNCTION[want]}, landed in {sorted(landed)}"
    assert len(landed[want]) == 1, f"{label}: delivered {len(landed[want])} times"
    delivered = landed[want][0]
    # What the function receives through SQS is the event as sent, in EventBridge's envelope:
    # the shape of the sqs-*.json samples. (AWS also sets "account"; moto 5.2 leaves it out.)
    assert delivered["detail"] == event["detail"]
    assert delivered["source"] == event["source"] and delivered["detail-type"] == event["detail-type"]
    assert {"version", "id", "time", "region", "resources"} <= delivered.keys()
    assert delivered["resources"] == event["resources"]


@pytest.mark.parametrize("label,event,want", extra_hits(), ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_other_state_writes_reach_state_sync(router, label, event, want):
    landed = router(event)
    assert set(landed) == {want} and len(landed[want]) == 1, f"{label}: landed in {sorted(landed)}"


@pytest.mark.parametrize("label,event", near_misses(), ids=lambda v: v if isinstance(v, str) else "")
def test_near_miss_reaches_no_function(router, label, event):
    landed = router(event)
    assert landed == {}, f"{label}: must not trigger cellbridge, landed in {sorted(landed)}"


def test_events_readme_lists_every_sample():
    readme = (EVENTS / "README.md").read_text()
    missing = [p.name for p in EVENTS.glob("*.json") if f"`{p.name}`" not in readme]
    assert not missing, f"events/README.md does not describe {missing}"
