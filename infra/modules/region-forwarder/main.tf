# Runs in one other region (configure the provider for it). EventBridge sees a CloudTrail event
# only in the region of the API call, so CreateCluster in this region never reaches the home
# bus unless it is forwarded; DeleteCluster likewise. Same pattern files as the home rules.

data "aws_region" "current" {}
data "aws_partition" "current" {}
data "aws_caller_identity" "current" {}

locals {
  region = data.aws_region.current.id
  name   = "${var.name_prefix}-forward-create-cluster-${local.region}"
}

resource "aws_cloudwatch_event_rule" "this" {
  name          = local.name
  description   = "cellbridge: forward EKS CreateCluster from ${local.region} to the home bus"
  event_pattern = file("${path.module}/../../patterns/eks-create-cluster.json")
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "home_bus" {
  rule      = aws_cloudwatch_event_rule.this.name
  target_id = "cellbridge-home-bus"
  arn       = var.home_event_bus_arn
  role_arn  = aws_iam_role.this.arn
}

# DeleteCluster too: state-sync confirms a destroyed cell's cluster is gone before proposing
# its decommission, and a deletion in this region is news only here.
resource "aws_cloudwatch_event_rule" "delete_cluster" {
  name          = "${var.name_prefix}-forward-delete-cluster-${local.region}"
  description   = "cellbridge: forward EKS DeleteCluster from ${local.region} to the home bus"
  event_pattern = file("${path.module}/../../patterns/eks-delete-cluster.json")
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "delete_cluster_home_bus" {
  rule      = aws_cloudwatch_event_rule.delete_cluster.name
  target_id = "cellbridge-home-bus"
  arn       = var.home_event_bus_arn
  role_arn  = aws_iam_role.this.arn
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

# IAM is global: the region in the name keeps one role per forwarder.
resource "aws_iam_role" "this" {
  name               = local.name
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

data "aws_iam_policy_document" "put_events" {
  statement {
    actions   = ["events:PutEvents"]
    resources = [var.home_event_bus_arn]
  }
}

resource "aws_iam_role_policy" "this" {
  name   = "put-events-home-bus"
  role   = aws_iam_role.this.id
  policy = data.aws_iam_policy_document.put_events.json
}
