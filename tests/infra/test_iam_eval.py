"""The IAM evaluator decides as AWS documents it, on the cases the module's checks rest on
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html,
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html), and the
converter reads a module's policy documents as Terraform would write them."""

import textwrap

import pytest

import test_wiring as wiring
from iam_eval import allows, policy_document

BUCKET = "arn:aws:s3:::acme-tfstate"


def listing(test):
    return {"Statement": [{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET,
                           "Condition": {test: {"s3:prefix": ["cells/*", "env:/*"]}}}]}


def test_a_request_without_the_key_passes_ifexists_and_fails_the_plain_operator():
    # A GetObject's implicit ListBucket check carries no s3:prefix.
    assert allows([listing("StringLikeIfExists")], "s3:ListBucket", BUCKET, {})
    assert not allows([listing("StringLike")], "s3:ListBucket", BUCKET, {})
    # With the key, both test its value.
    for test in ("StringLike", "StringLikeIfExists"):
        assert allows([listing(test)], "s3:ListBucket", BUCKET, {"s3:prefix": "cells/"})
        assert not allows([listing(test)], "s3:ListBucket", BUCKET, {"s3:prefix": "other/"})


def test_an_explicit_deny_in_any_document_wins():
    allow = {"Statement": {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}}
    deny = {"Statement": [{"Effect": "Deny", "Action": "sqs:SendMessage", "Resource": "arn:aws:sqs:*:*:cellbridge-*"}]}
    queue = "arn:aws:sqs:eu-west-1:111122223333:cellbridge-state-sync"
    assert allows([allow], "sqs:SendMessage", queue, {})
    assert not allows([allow, deny], "sqs:SendMessage", queue, {})
    assert not allows([deny, allow], "sqs:SendMessage", queue, {})
    assert allows([allow, deny], "sqs:ReceiveMessage", queue, {})
    assert not allows([], "sqs:ReceiveMessage", queue, {}), "nothing allows: implicitly denied"


def test_arnlike_wildcards_stay_within_their_part_of_the_arn():
    doc = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
                          "Action": "sqs:SendMessage", "Resource": "*",
                          "Condition": {"ArnLike": {"aws:SourceArn": "arn:aws:events:*:111122223333:rule/cellbridge-*"}}}]}
    events = {"aws:PrincipalServiceName": "events.amazonaws.com"}
    ok = "arn:aws:events:eu-west-1:111122223333:rule/cellbridge-state-sync-eks-delete-cluster"
    assert allows([doc], "sqs:SendMessage", "q", {**events, "aws:SourceArn": ok})
    for other in ("arn:aws:events:eu-west-1:444455556666:rule/cellbridge-x",
                  "arn:aws:events:eu-west-1:111122223333:rule/other",
                  "arn:aws:events:eu-west-1:1111:22223333:rule/cellbridge-x"):
        assert not allows([doc], "sqs:SendMessage", "q", {**events, "aws:SourceArn": other}), other
    assert not allows([doc], "sqs:SendMessage", "q", {"aws:PrincipalServiceName": "s3.amazonaws.com", "aws:SourceArn": ok})


def test_set_operators_and_negated_operators_on_an_absent_key():
    def doc(test, key="aws:TagKeys"):
        return {"Statement": [{"Effect": "Allow", "Action": "eks:TagResource", "Resource": "*",
                               "Condition": {test: {key: "cellbridge.dev/*"}}}]}
    tags = {"aws:TagKeys": ["cellbridge.dev/temporary", "cellbridge.dev/created-at"]}
    assert allows([doc("ForAllValues:StringLike")], "eks:TagResource", "e", tags)
    assert not allows([doc("ForAllValues:StringLike")], "eks:TagResource", "e", {"aws:TagKeys": ["cellbridge.dev/a", "owner"]})
    assert allows([doc("ForAllValues:StringLike")], "eks:TagResource", "e", {}), "ForAllValues holds with no key"
    assert not allows([doc("ForAnyValue:StringLike")], "eks:TagResource", "e", {}), "ForAnyValue fails with no key"
    assert allows([doc("StringNotLike", "aws:ResourceTag/owner")], "eks:TagResource", "e", {})
    present = {"Statement": [{"Effect": "Allow", "Action": "eks:TagResource", "Resource": "*",
                              "Condition": {"Null": {"aws:TagKeys": "false"}}}]}
    assert allows([present], "eks:TagResource", "e", tags)
    assert not allows([present], "eks:TagResource", "e", {})
    with pytest.raises(ValueError):
        allows([doc("StringLike")], "eks:TagResource", "e", tags)


def test_actions_fold_case_and_resources_do_not():
    doc = {"Statement": [{"Effect": "Allow", "Action": "S3:get*", "Resource": "arn:aws:s3:::acme-tfstate/cells/*"}]}
    assert allows([doc], "s3:GetObject", "arn:aws:s3:::acme-tfstate/cells/a/terraform.tfstate", {})
    assert not allows([doc], "s3:GetObject", "arn:aws:s3:::acme-tfstate/Cells/a/terraform.tfstate", {})
    assert not allows([doc], "s3:PutObject", "arn:aws:s3:::acme-tfstate/cells/a/terraform.tfstate", {})


def test_the_converter_expands_locals_keeps_references_and_takes_optional_statements(tmp_path):
    (tmp_path / "main.tf").write_text(textwrap.dedent("""
        variable "role_arn" {
          type    = string
          default = null
        }
        variable "pattern" {
          type    = string
          default = "cells/{cell}/terraform.tfstate"
        }
        locals {
          objects = ["arn:aws:s3:::b/${replace(var.pattern, "{cell}", "*")}"]
        }
        data "aws_iam_policy_document" "p" {
          statement {
            sid       = "Read"
            actions   = ["s3:GetObject"]
            resources = local.objects
          }
          dynamic "statement" {
            for_each = var.role_arn == null ? [] : [var.role_arn]
            content {
              sid       = "Assume"
              actions   = ["sts:AssumeRole"]
              resources = [statement.value, aws_iam_role.x.arn]
            }
          }
        }
    """))
    doc = policy_document(wiring.load(tmp_path), "p")
    by_sid = {st["Sid"]: st for st in doc["Statement"]}
    assert by_sid["Read"]["Resource"] == ["arn:aws:s3:::b/cells/*/terraform.tfstate"]
    assert by_sid["Assume"]["Resource"] == ["${var.role_arn}", "${aws_iam_role.x.arn}"]
    assert allows([doc], "sts:AssumeRole", "${var.role_arn}", {})
    # A deployment that sets the variable to null has no such statement.
    without = policy_document(wiring.load(tmp_path), "p", {"role_arn": None})
    assert [st["Sid"] for st in without["Statement"]] == ["Read"]


def test_the_converter_takes_a_local_modules_document_first_with_the_callers_values(tmp_path):
    """`source_policy_documents = [module.<name>.json]`: the called module's statements, its
    variables the call's arguments, come first (as Terraform writes them); a Sid twice is refused,
    as Terraform refuses it."""
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "main.tf").write_text(textwrap.dedent("""
        variable "account_id" {
          type = string
        }
        locals {
          clusters = "arn:aws:eks:*:${var.account_id}:cluster/*"
        }
        data "aws_iam_policy_document" "eks" {
          statement {
            sid       = "ReadClusters"
            actions   = ["eks:DescribeCluster"]
            resources = [local.clusters]
          }
        }
        output "json" {
          value = data.aws_iam_policy_document.eks.json
        }
        output "clusters" {
          value = local.clusters
        }
    """))

    def caller(own_sid):
        (tmp_path / "main.tf").write_text(textwrap.dedent(f"""
            locals {{
              account = "222222222222"
            }}
            module "part" {{
              source     = "./part"
              account_id = local.account
            }}
            data "aws_iam_policy_document" "p" {{
              source_policy_documents = [module.part.json]
              statement {{
                sid       = "{own_sid}"
                actions   = ["eks:ListClusters"]
                resources = [module.part.clusters]
              }}
            }}
        """))
        return policy_document(wiring.load(tmp_path), "p")

    doc = caller("ListClusters")
    assert [(st["Sid"], st["Resource"]) for st in doc["Statement"]] == [
        ("ReadClusters", ["arn:aws:eks:*:222222222222:cluster/*"]),
        ("ListClusters", ["arn:aws:eks:*:222222222222:cluster/*"])]
    with pytest.raises(ValueError, match="a Sid twice"):
        caller("ReadClusters")
