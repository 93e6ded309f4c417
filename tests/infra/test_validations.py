"""The module's variable validations, planned by the real terraform binary from the module's own
files (variables.tf and concurrency.tf, which need no provider, so this runs offline in a few
tenths of a second per plan).

Roles the module may assume name their accounts: a wildcard account in
`bootstrap_assume_role_arns` (`arn:aws:iam::*:role/cellbridge-bootstrap`) would let
cluster-bootstrap assume a role of that name in anyone's account.

An SQS event source's maximum concurrency is 2 to 1000 (Lambda API reference, ScalingConfig,
https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html). Without it the event source
does not account for the function's reserved concurrency and polls more records than the function
may run; each throttled delivery counts as a receive (https://repost.aws/knowledge-center/lambda-sqs-scaling),
so records dead-letter after maxReceiveCount without ever running. The module therefore refuses a
reservation it cannot pair with a maximum (1 or 2, and 0), saying why, and otherwise gives the
event source one less than the reservation.
"""

import json
import os
import shutil
import subprocess

import pytest
import test_wiring as wiring

INFRA = wiring.INFRA
VARIABLES = ("state_sync_reserved_concurrency", "cluster_bootstrap_reserved_concurrency")
OUTPUTS = ("state_sync_sqs_concurrency", "cluster_bootstrap_sqs_concurrency")
# The module's required variables, with values its validations accept.
REQUIRED = {
    "state_sync_zip": "state-sync.zip",
    "cluster_bootstrap_zip": "cluster-bootstrap.zip",
    "state_bucket_name": "acme-tfstate",
    "fleet_repo": "acme/fleet",
    "github_secret_arn": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:cellbridge/github-AbC123",
    "flux_git_secret_arn": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:cellbridge/flux-git-AbC123",
}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip("terraform is not installed: the module's concurrency validation cannot be planned")
    root = tmp_path_factory.mktemp("concurrency")
    for name in ("variables.tf", "concurrency.tf"):
        shutil.copy(INFRA / name, root / name)
    env = {k: v for k, v in os.environ.items() if k != "TF_CLI_CONFIG_FILE"}
    env.update(TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1")

    def run(values):
        """The planned outputs for these reservations, or the plan's error text."""
        variables = [a for k, v in {**REQUIRED, **values}.items() for a in ("-var", f"{k}={v}")]
        args = [terraform, "plan", "-input=false", "-no-color", "-lock=false", "-json", *variables]
        r = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=60)
        lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        if r.returncode != 0:
            return None, " ".join(" ".join(d.get("diagnostic", {}).get(k, "") for k in ("summary", "detail"))
                                  for d in lines if d.get("type") == "diagnostic")
        # The plan passed; its locals' values, as the console evaluates them with the same variables.
        expr = "jsonencode({" + ", ".join(f"{n} = local.{n}" for n in OUTPUTS) + "})"
        r = subprocess.run([terraform, "console", *variables], input=expr, cwd=root, env=env, capture_output=True,
                           text=True, timeout=60, check=True)
        return json.loads(json.loads(r.stdout.strip())), None

    return run


@pytest.mark.parametrize("reserved", [(1, 1), (2, 2), (0, 3.5)])
def test_a_reservation_the_event_source_cannot_match_is_refused_saying_why(plan, reserved):
    outputs, error = plan(dict(zip(VARIABLES, reserved)))
    assert outputs is None, f"reserved concurrency {reserved} was accepted: {outputs}"
    for variable in VARIABLES:
        assert f"{variable} must be -1 (unreserved) or a whole number of at least 3" in error, error
    # Why: the event source's maximum starts at 2, and throttled deliveries dead-letter.
    assert "accept from 2 only" in error and "dead-letter queue" in error, error


def test_every_reservation_sets_the_event_sources_maximum_one_below_it(plan):
    outputs, error = plan({"state_sync_reserved_concurrency": 3, "cluster_bootstrap_reserved_concurrency": 5})
    assert error is None, error
    assert outputs == {"state_sync_sqs_concurrency": 2, "cluster_bootstrap_sqs_concurrency": 4}, outputs
    # SQS event sources take at most 1000: a larger reservation keeps the event source below it.
    outputs, error = plan({"state_sync_reserved_concurrency": 1500, "cluster_bootstrap_reserved_concurrency": -1})
    assert error is None, error
    assert outputs == {"state_sync_sqs_concurrency": 1000, "cluster_bootstrap_sqs_concurrency": None}, outputs


@pytest.mark.parametrize("function", ["state_sync", "cluster_bootstrap"])
def test_each_event_source_takes_its_maximum_from_its_own_functions_reservation(function):
    mod = wiring.load()
    fn = mod["resource"][("aws_lambda_function", function)]
    assert wiring.flat(fn["reserved_concurrent_executions"], mod) == [f"${{var.{function}_reserved_concurrency}}"]
    mapping = mod["resource"][("aws_lambda_event_source_mapping", function)]
    [dynamic] = mapping["dynamic"]
    assert f"local.{function}_sqs_concurrency" in str(dynamic["scaling_config"]["for_each"]), dynamic
    assert "scaling_config.value" in str(dynamic["scaling_config"]["content"]), dynamic


def test_a_role_to_assume_in_any_account_is_refused_saying_why(plan):
    outputs, error = plan({"bootstrap_assume_role_arns": '["arn:aws:iam::*:role/cellbridge-bootstrap"]'})
    assert outputs is None, f"a wildcard account was accepted: {outputs}"
    assert "bootstrap_assume_role_arns: every role must name its 12-digit account" in error, error
    assert "in any AWS account" in error, error
    # A named account (a wildcard in the role's name only) is accepted.
    outputs, error = plan({"bootstrap_assume_role_arns": '["arn:aws:iam::222222222222:role/cellbridge-*"]'})
    assert error is None, error
