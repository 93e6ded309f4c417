# One role per function, each with only what its job needs.

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account]
    }
  }
}

# --- state-sync --------------------------------------------------------------------------------

resource "aws_iam_role" "state_sync" {
  name               = local.state_sync_name
  description        = "cellbridge state-sync: reads Terraform state, opens pull requests"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "state_sync" {
  # The state bucket with the function's own role, unless a state-reading role is configured
  # (then that role reads it, and this role only assumes it). The latest version of an object is
  # read (GetObject without versionId), so neither GetObjectVersion nor ListBucketVersions.
  dynamic "statement" {
    for_each = var.state_role_arn == null ? [1] : []
    content {
      sid       = "ReadStateObjects"
      actions   = ["s3:GetObject"]
      resources = local.state_object_arns
    }
  }

  # sync-all lists the state objects, under the pattern's fixed head and `env:/` only. S3 also
  # asks for ListBucket on a GetObject of a missing key, to answer 404 rather than 403 ("If you
  # have the s3:ListBucket permission on the bucket, Amazon S3 returns an HTTP status code 404
  # Not Found error", https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html,
  # Permissions); that request carries no `s3:prefix`, which `...IfExists` lets through ("If the
  # key is not present, evaluate the condition element as true",
  # https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html#Conditions_IfExists):
  # a state deleted after its event is then ignored, not a refusal.
  dynamic "statement" {
    for_each = var.state_role_arn == null ? [1] : []
    content {
      sid       = "ListStateObjectsUnderPrefix"
      actions   = ["s3:ListBucket"]
      resources = [local.state_bucket_arn]

      condition {
        test     = "StringLikeIfExists"
        variable = "s3:prefix"
        values   = local.state_list_prefixes
      }
    }
  }

  dynamic "statement" {
    for_each = var.state_bucket_kms_key_arn == null || var.state_role_arn != null ? [] : [var.state_bucket_kms_key_arn]
    content {
      sid       = "DecryptStateThroughS3"
      actions   = ["kms:Decrypt"]
      resources = [statement.value]

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["s3.${local.region}.amazonaws.com"]
      }
    }
  }

  statement {
    sid       = "ReadGitHubCredentials"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [var.github_secret_arn]
  }

  dynamic "statement" {
    for_each = length(var.secrets_kms_key_arns) == 0 ? [] : [1]
    content {
      sid       = "DecryptSecretsThroughSecretsManager"
      actions   = ["kms:Decrypt"]
      resources = var.secrets_kms_key_arns

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["secretsmanager.${local.region}.amazonaws.com"]
      }
    }
  }

  statement {
    sid = "ConsumeOwnQueue"
    # ChangeMessageVisibility and GetQueueUrl: a record handed back returns after its backoff.
    # SendMessage: sync-all fans out one message per state to this same queue.
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:SendMessage"]
    resources = [aws_sqs_queue.state_sync.arn]
  }

  # Failed asynchronous invocations (schedule, console) land in the DLQ with the role's rights.
  statement {
    sid       = "OwnDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.state_sync_dlq.arn]
  }

  statement {
    sid       = "ModuleKey"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [local.kms_key_arn]
  }

  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.state_sync.arn}:*"]
  }

  # A destroyed stack's decommission is proposed only once EKS says its cluster is gone; the
  # fleet dashboard's Flux column reads the bootstrap record from the same answer's tags.
  statement {
    sid       = "ConfirmDestroyedCellsClustersAreGone"
    actions   = ["eks:DescribeCluster"]
    resources = [local.eks_cluster_arn]
  }

  # A cell in another account: its cluster is asked about through state-sync's describe-only
  # role there (modules/cell-account), never cluster-bootstrap's, whose trust names
  # cluster-bootstrap alone (docs/deploying.md, "Cells in other accounts").
  dynamic "statement" {
    for_each = length(local.describe_role_arns) == 0 ? [] : [1]
    content {
      sid       = "AssumeDescribeOnlyRolesOfCellAccounts"
      actions   = ["sts:AssumeRole"]
      resources = local.describe_role_arns
    }
  }

  # The state bucket in another account, read through this one role and no other.
  dynamic "statement" {
    for_each = var.state_role_arn == null ? [] : [var.state_role_arn]
    content {
      sid       = "AssumeTheStateReadingRole"
      actions   = ["sts:AssumeRole"]
      resources = [statement.value]
    }
  }
}

resource "aws_iam_role_policy" "state_sync" {
  name   = "state-sync"
  role   = aws_iam_role.state_sync.id
  policy = data.aws_iam_policy_document.state_sync.json
}

# --- cluster-bootstrap -------------------------------------------------------------------------

resource "aws_iam_role" "cluster_bootstrap" {
  name               = local.cluster_bootstrap_name
  description        = "cellbridge cluster-bootstrap: first Flux install on new EKS clusters"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
  tags               = local.tags
}

locals {
  cluster_bootstrap_role_arn = "arn:${local.partition}:iam::${local.account}:role/${local.cluster_bootstrap_name}"
  # Access entries of this role only: access-entry/<cluster>/role/<account>/<role name>/<id>.
  own_access_entry_arn = "arn:${local.partition}:eks:*:${local.account}:access-entry/*/role/${local.account}/${local.cluster_bootstrap_name}/*"
  eks_cluster_arn      = "arn:${local.partition}:eks:*:${local.account}:cluster/*"
  # The bootstrap's record on the cluster (shared/src/pure/bootstrap/record.rs).
  flux_record_tag_keys = ["cellbridge.dev/flux", "cellbridge.dev/flux-since"]
}

data "aws_iam_policy_document" "cluster_bootstrap" {
  # Reading a cluster is how the function learns its state, CA, authentication mode and
  # `cellbridge.dev/cell` tag, so it cannot be conditioned on that tag.
  statement {
    sid       = "ReadClusters"
    actions   = ["eks:DescribeCluster"]
    resources = [local.eks_cluster_arn]
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
    resources = [local.eks_cluster_arn]

    condition {
      test     = "StringLike"
      variable = "aws:ResourceTag/cellbridge.dev/cell"
      values   = ["?*"]
    }

    condition {
      test     = "ArnEquals"
      variable = "eks:principalArn"
      values   = [local.cluster_bootstrap_role_arn]
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
  # cellbridge.dev/flux-since): TagResource on clusters of this account, with those two keys and
  # no other. eks:TagResource takes aws:TagKeys and aws:RequestTag/${TagKey} on the request
  # (Service Authorization Reference, "Actions defined by Amazon Elastic Kubernetes Service",
  # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html);
  # ForAllValues holds for a request with no tag keys at all, hence the Null test
  # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html).
  # Not conditioned on the cellbridge.dev/cell tag: a cluster found through its
  # cell-metadata.yaml (an access entry made by hand) is bootstrapped and recorded too.
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

  dynamic "statement" {
    for_each = length(local.assume_role_arns) == 0 ? [] : [1]
    content {
      sid       = "AssumeCellBootstrapRoles"
      actions   = ["sts:AssumeRole"]
      resources = local.assume_role_arns
    }
  }

  statement {
    sid       = "ReadGitHubAndFluxCredentials"
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [var.github_secret_arn, var.flux_git_secret_arn]
  }

  dynamic "statement" {
    for_each = length(var.secrets_kms_key_arns) == 0 ? [] : [1]
    content {
      sid       = "DecryptSecretsThroughSecretsManager"
      actions   = ["kms:Decrypt"]
      resources = var.secrets_kms_key_arns

      condition {
        test     = "StringEquals"
        variable = "kms:ViaService"
        values   = ["secretsmanager.${local.region}.amazonaws.com"]
      }
    }
  }

  # ChangeMessageVisibility and GetQueueUrl: a record handed back (a cluster still CREATING, a
  # retryable failure) returns after its backoff.
  statement {
    sid       = "ConsumeOwnQueue"
    actions   = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl"]
    resources = [aws_sqs_queue.cluster_bootstrap.arn]
  }

  # After applying Flux, each re-check of the cluster is a message to this same queue, sent with
  # DelaySeconds (SendMessageBatch, authorized as sqs:SendMessage; CELLBRIDGE_CONFIRM_QUEUE_URL),
  # and so are the daily sweep's catch-up bootstraps. SQS has no condition key for the delay or
  # the body, so the grant is this one queue; the queue's key is ModuleKey's.
  statement {
    sid       = "RecheckThroughOwnQueue"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.cluster_bootstrap.arn]
  }

  statement {
    sid       = "OwnDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.cluster_bootstrap_dlq.arn]
  }

  statement {
    sid       = "ModuleKey"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [local.kms_key_arn]
  }

  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.cluster_bootstrap.arn}:*"]
  }
}

resource "aws_iam_role_policy" "cluster_bootstrap" {
  name   = "cluster-bootstrap"
  role   = aws_iam_role.cluster_bootstrap.id
  policy = data.aws_iam_policy_document.cluster_bootstrap.json
}

# --- optional extras, both roles ---------------------------------------------------------------

resource "aws_iam_role_policy_attachment" "xray" {
  for_each = var.tracing_mode == "Active" ? { state_sync = aws_iam_role.state_sync.name, cluster_bootstrap = aws_iam_role.cluster_bootstrap.name } : {}

  role       = each.value
  policy_arn = "arn:${local.partition}:iam::aws:policy/AWSXRayDaemonWriteAccess"
}

resource "aws_iam_role_policy_attachment" "vpc" {
  for_each = merge(
    length(var.vpc_subnet_ids) > 0 ? { state_sync = aws_iam_role.state_sync.name } : {},
    length(local.cluster_bootstrap_subnet_ids) > 0 ? { cluster_bootstrap = aws_iam_role.cluster_bootstrap.name } : {},
  )

  role       = each.value
  policy_arn = "arn:${local.partition}:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
}

locals {
  # cluster-bootstrap's: the roles of account_roles, and any bootstrap_assume_role_arns, and no others.
  assume_role_arns = distinct(concat(var.bootstrap_assume_role_arns, values(var.account_roles)))
  # state-sync's: the describe-only roles of account_describe_roles, and no others.
  describe_role_arns = distinct(values(var.account_describe_roles))
}
