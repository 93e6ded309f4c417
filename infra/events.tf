# --- state-sync: a new state version in the state bucket --------------------------------------

resource "aws_cloudwatch_event_rule" "state_object_created" {
  name           = "${local.state_sync_name}-state-object-created"
  description    = "cellbridge: a Terraform state object was written to ${var.state_bucket_name}"
  event_bus_name = var.event_bus_name
  event_pattern  = local.state_object_created_pattern
  tags           = local.tags
}

resource "aws_cloudwatch_event_target" "state_object_created" {
  rule           = aws_cloudwatch_event_rule.state_object_created.name
  event_bus_name = var.event_bus_name
  target_id      = "state-sync-queue"
  arn            = aws_sqs_queue.state_sync.arn

  retry_policy {
    maximum_event_age_in_seconds = 86400
    maximum_retry_attempts       = 185
  }

  dead_letter_config {
    arn = aws_sqs_queue.state_sync_dlq.arn
  }
}

# --- cluster-bootstrap: CloudTrail saw CreateCluster -----------------------------------------

resource "aws_cloudwatch_event_rule" "eks_create_cluster" {
  name           = "${local.cluster_bootstrap_name}-eks-create-cluster"
  description    = "cellbridge: an EKS cluster was created (CloudTrail CreateCluster, this region or forwarded)"
  event_bus_name = var.event_bus_name
  event_pattern  = local.eks_create_cluster_pattern
  tags           = local.tags
}

resource "aws_cloudwatch_event_target" "eks_create_cluster" {
  rule           = aws_cloudwatch_event_rule.eks_create_cluster.name
  event_bus_name = var.event_bus_name
  target_id      = "cluster-bootstrap-queue"
  arn            = aws_sqs_queue.cluster_bootstrap.arn

  retry_policy {
    maximum_event_age_in_seconds = 86400
    maximum_retry_attempts       = 185
  }

  dead_letter_config {
    arn = aws_sqs_queue.cluster_bootstrap_dlq.arn
  }
}

# --- state-sync: CloudTrail saw DeleteCluster ---------------------------------------------------
# The cell whose merged metadata names the cluster is synced again: a destroyed stack's
# decommission is proposed once EKS no longer knows the cluster (docs/decommission.md).

resource "aws_cloudwatch_event_rule" "eks_delete_cluster" {
  name           = "${local.state_sync_name}-eks-delete-cluster"
  description    = "cellbridge: an EKS cluster is being deleted (CloudTrail DeleteCluster, this region or forwarded)"
  event_bus_name = var.event_bus_name
  event_pattern  = local.eks_delete_cluster_pattern
  tags           = local.tags
}

resource "aws_cloudwatch_event_target" "eks_delete_cluster" {
  rule           = aws_cloudwatch_event_rule.eks_delete_cluster.name
  event_bus_name = var.event_bus_name
  target_id      = "state-sync-queue"
  arn            = aws_sqs_queue.state_sync.arn

  retry_policy {
    maximum_event_age_in_seconds = 86400
    maximum_retry_attempts       = 185
  }

  dead_letter_config {
    arn = aws_sqs_queue.state_sync_dlq.arn
  }
}

# --- daily sync-all: catches whatever events were missed ---------------------------------------
# EventBridge Scheduler delivers `input` verbatim as the invocation payload (asynchronous
# invoke), the same JSON as events/schedule-sync-all.json. `scheduled` tells state-sync nobody
# is watching: a dashboard it could not rebuild for now is retried through its queue.

resource "aws_scheduler_schedule" "sync_all" {
  count = var.enable_sync_all_schedule ? 1 : 0

  name                         = "${local.state_sync_name}-sync-all"
  description                  = "cellbridge: converge every cell's pull request to its latest state"
  schedule_expression          = var.sync_all_schedule_expression
  schedule_expression_timezone = var.sync_all_schedule_timezone
  kms_key_arn                  = local.kms_key_arn

  flexible_time_window {
    mode                      = "FLEXIBLE"
    maximum_window_in_minutes = 15
  }

  target {
    arn      = aws_lambda_function.state_sync.arn
    role_arn = aws_iam_role.scheduler[0].arn
    input    = jsonencode({ action = "sync-all", scheduled = true })

    retry_policy {
      maximum_event_age_in_seconds = 3600
      maximum_retry_attempts       = 2
    }

    dead_letter_config {
      arn = aws_sqs_queue.state_sync_dlq.arn
    }
  }
}

data "aws_iam_policy_document" "scheduler_assume" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["scheduler.amazonaws.com"]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account]
    }
  }
}

resource "aws_iam_role" "scheduler" {
  count = var.enable_sync_all_schedule ? 1 : 0

  name               = "${local.state_sync_name}-scheduler"
  assume_role_policy = data.aws_iam_policy_document.scheduler_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "scheduler" {
  statement {
    sid       = "InvokeStateSync"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.state_sync.arn, "${aws_lambda_function.state_sync.arn}:*"]
  }

  statement {
    sid       = "DeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.state_sync_dlq.arn]
  }

  statement {
    sid       = "EncryptedScheduleAndDeadLetters"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [local.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "scheduler" {
  count = var.enable_sync_all_schedule ? 1 : 0

  name   = "invoke-state-sync"
  role   = aws_iam_role.scheduler[0].id
  policy = data.aws_iam_policy_document.scheduler.json
}

# --- other accounts: their forwarded CreateCluster and DeleteCluster events-----------------------------------
# A rule in another account can target this bus only if the bus's resource-based policy lets that
# account call PutEvents (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-bus-perms.html,
# https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-account.html). PutPermission
# adds one statement per account and leaves the policy's other statements alone, which matters on
# the shared `default` bus; the events keep their own `account`, which selects the role.

resource "aws_cloudwatch_event_permission" "account_roles" {
  for_each = var.accept_account_role_events ? var.account_roles : {}

  event_bus_name = var.event_bus_name
  principal      = each.key
  statement_id   = "${var.name_prefix}-from-${each.key}"
  action         = "events:PutEvents"
}
