# The two roles cellbridge assumes in a cell account, each trusting one of its functions' roles
# and nothing else, and each allowed only what that function's job needs here: IAM, not
# cellbridge's code, bounds its reach in this account.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition

  eks_cluster_arn = module.bootstrap_eks.cluster_arn

  tags = merge({ "app.kubernetes.io/part-of" = "cellbridge" }, var.tags)
}

# --- cluster-bootstrap's role ------------------------------------------------------------------

data "aws_iam_policy_document" "bootstrap_trust" {
  statement {
    sid     = "ClusterBootstrapOnly"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "AWS"
      identifiers = [var.cluster_bootstrap_role_arn]
    }
  }
}

resource "aws_iam_role" "bootstrap" {
  name               = var.bootstrap_role_name
  description        = "cellbridge cluster-bootstrap: first Flux install on this account's new EKS clusters"
  assume_role_policy = data.aws_iam_policy_document.bootstrap_trust.json
  tags               = local.tags
}

# The cellbridge module's cluster-bootstrap EKS statements (modules/cluster-bootstrap-eks, which
# infra/iam.tf grants to cluster-bootstrap's own role), with this account and role in them.
module "bootstrap_eks" {
  source = "../cluster-bootstrap-eks"

  account_id = local.account
  partition  = local.partition
  role_name  = var.bootstrap_role_name
}

data "aws_iam_policy_document" "bootstrap" {
  source_policy_documents = [module.bootstrap_eks.json]
}

resource "aws_iam_role_policy" "bootstrap" {
  name   = "cluster-bootstrap"
  role   = aws_iam_role.bootstrap.id
  policy = data.aws_iam_policy_document.bootstrap.json
}

# --- state-sync's describe-only role -----------------------------------------------------------

data "aws_iam_policy_document" "describe_trust" {
  statement {
    sid     = "StateSyncOnly"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "AWS"
      identifiers = [var.state_sync_role_arn]
    }
  }
}

resource "aws_iam_role" "describe" {
  name               = var.describe_role_name
  description        = "cellbridge state-sync: asks whether this account's cells' clusters exist, nothing else"
  assume_role_policy = data.aws_iam_policy_document.describe_trust.json
  tags               = local.tags
}

# A destroyed cell's decommission is proposed only once EKS says its cluster is gone; the fleet
# dashboard's Flux column reads the bootstrap record from the same answer's tags.
data "aws_iam_policy_document" "describe" {
  statement {
    sid       = "DescribeClustersOnly"
    actions   = ["eks:DescribeCluster"]
    resources = [local.eks_cluster_arn]
  }
}

resource "aws_iam_role_policy" "describe" {
  name   = "state-sync-describe"
  role   = aws_iam_role.describe.id
  policy = data.aws_iam_policy_document.describe.json
}
