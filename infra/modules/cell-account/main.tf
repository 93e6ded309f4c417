# The two roles cellbridge assumes in a cell account, each trusting one of its functions' roles
# and nothing else, and each allowed only what that function's job needs here: IAM, not
# cellbridge's code, bounds its reach in this account.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition

  bootstrap_role_arn = "arn:${local.partition}:iam::${local.account}:role/${var.bootstrap_role_name}"
  # Access entries of the bootstrap role only: access-entry/<cluster>/role/<account>/<role name>/<id>.
  own_access_entry_arn = "arn:${local.partition}:eks:*:${local.account}:access-entry/*/role/${local.account}/${var.bootstrap_role_name}/*"
  eks_cluster_arn      = "arn:${local.partition}:eks:*:${local.account}:cluster/*"
  # The bootstrap's record on the cluster (shared/src/pure/bootstrap/record.rs).
  flux_record_tag_keys         = ["cellbridge.dev/flux", "cellbridge.dev/flux-since"]
  eks_cluster_admin_policy_arn = "arn:${local.partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"

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

# The cellbridge module's cluster-bootstrap EKS statements (infra/iam.tf), with this account and
# role in them: tests/infra/test_wiring.py keeps the two alike.
data "aws_iam_policy_document" "bootstrap" {
  statement {
    sid       = "ReadClusters"
    actions   = ["eks:DescribeCluster"]
    resources = [local.eks_cluster_arn]
  }

  # ListClusters has no resource type ("Actions defined by Amazon EKS"), so "*".
  statement {
    sid       = "ListClustersForTheSweep"
    actions   = ["eks:ListClusters"]
    resources = ["*"]
  }

  statement {
    sid       = "GrantSelfAccessOnCellClusters"
    actions   = ["eks:CreateAccessEntry"]
    resources = [local.eks_cluster_arn]

    condition {
      test     = "StringLike"
      variable = "aws:ResourceTag/cellbridge.dev/cell"
      values   = ["?*"]
    }

    condition {
      test     = "ArnEquals"
      variable = "eks:principalArn"
      values   = [local.bootstrap_role_arn]
    }
  }

  statement {
    sid       = "ManageOwnAccessEntry"
    actions   = ["eks:DescribeAccessEntry", "eks:DeleteAccessEntry"]
    resources = [local.own_access_entry_arn]
  }

  statement {
    sid       = "TagOwnAccessEntry"
    actions   = ["eks:TagResource"]
    resources = [local.own_access_entry_arn]

    condition {
      test     = "ForAllValues:StringLike"
      variable = "aws:TagKeys"
      values   = ["cellbridge.dev/*"]
    }
  }

  statement {
    sid       = "RecordFluxOutcomeOnClusters"
    actions   = ["eks:TagResource"]
    resources = [local.eks_cluster_arn]

    condition {
      test     = "ForAllValues:StringEquals"
      variable = "aws:TagKeys"
      values   = local.flux_record_tag_keys
    }

    condition {
      test     = "Null"
      variable = "aws:TagKeys"
      values   = ["false"]
    }
  }

  statement {
    sid       = "ClusterAdminForOwnAccessEntry"
    actions   = ["eks:AssociateAccessPolicy"]
    resources = [local.own_access_entry_arn]

    condition {
      test     = "StringEquals"
      variable = "eks:policyArn"
      values   = [local.eks_cluster_admin_policy_arn]
    }
  }
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
