# cluster-bootstrap's EKS statements, written once: the cellbridge module grants them to
# cluster-bootstrap's own role (infra/iam.tf), modules/cell-account to its role in a cell account.
# Each caller names the account and the role; nothing else differs.

locals {
  role_arn = "arn:${var.partition}:iam::${var.account_id}:role/${var.role_name}"
  # Access entries of this role only: access-entry/<cluster>/role/<account>/<role name>/<id>.
  own_access_entry_arn = "arn:${var.partition}:eks:*:${var.account_id}:access-entry/*/role/${var.account_id}/${var.role_name}/*"
  cluster_arn          = "arn:${var.partition}:eks:*:${var.account_id}:cluster/*"
  # The bootstrap's record on the cluster (shared/src/pure/bootstrap/record.rs).
  flux_record_tag_keys     = ["cellbridge.dev/flux", "cellbridge.dev/flux-since", "cellbridge.dev/catch-up"]
  cluster_admin_policy_arn = "arn:${var.partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
}

data "aws_iam_policy_document" "eks" {
  # Reading a cluster is how the function learns its state, CA, authentication mode and
  # `cellbridge.dev/cell` tag, so it cannot be conditioned on that tag.
  statement {
    sid       = "ReadClusters"
    actions   = ["eks:DescribeCluster"]
    resources = [local.cluster_arn]
  }

  # The sweep finds the tagged clusters of cells not merged yet; ListClusters has no resource
  # type ("Actions defined by Amazon EKS": no resource-level permissions), so "*".
  statement {
    sid       = "ListClustersForTheSweep"
    actions   = ["eks:ListClusters"]
    resources = ["*"]
  }

  # Access is granted only on clusters tagged as a cell, and only to this role itself.
  statement {
    sid       = "GrantSelfAccessOnCellClusters"
    actions   = ["eks:CreateAccessEntry"]
    resources = [local.cluster_arn]

    condition {
      test     = "StringLike"
      variable = "aws:ResourceTag/cellbridge.dev/cell"
      values   = ["?*"]
    }

    condition {
      test     = "ArnEquals"
      variable = "eks:principalArn"
      values   = [local.role_arn]
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

  # Each check's outcome is recorded on the cluster as two tags (cellbridge.dev/flux and
  # cellbridge.dev/flux-since), and the sweep marks a catch-up it queued (cellbridge.dev/catch-up):
  # TagResource on clusters of this account, with those three keys and no other.
  # eks:TagResource takes aws:TagKeys and aws:RequestTag/${TagKey} on the request
  # (Service Authorization Reference, "Actions defined by Amazon Elastic Kubernetes Service",
  # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html);
  # ForAllValues holds for a request with no tag keys at all, hence the Null test
  # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html).
  # Not conditioned on the cellbridge.dev/cell tag: a cluster found through its
  # cell-metadata.yaml (an access entry made by hand) is bootstrapped and recorded too.
  statement {
    sid       = "RecordFluxOutcomeOnClusters"
    actions   = ["eks:TagResource"]
    resources = [local.cluster_arn]

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
      values   = [local.cluster_admin_policy_arn]
    }
  }
}
