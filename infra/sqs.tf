# One queue per function between EventBridge and Lambda: it absorbs bursts (fifty cells applied
# at once), redelivers failed records, and lets cluster-bootstrap hand a still-CREATING cluster
# back with a delay. Each function has one dead-letter queue for everything that gave up:
# records past maxReceiveCount, events EventBridge could not deliver, failed async invocations
# (schedule, console "Event" invokes).

resource "aws_sqs_queue" "state_sync_dlq" {
  name                              = "${local.state_sync_name}-dlq"
  message_retention_seconds         = 1209600
  kms_master_key_id                 = local.kms_key_arn
  kms_data_key_reuse_period_seconds = 300
  tags                              = local.tags
}

resource "aws_sqs_queue" "state_sync" {
  name = local.state_sync_name
  # AWS guidance: six times the function timeout, so a batch in flight is not redelivered.
  visibility_timeout_seconds        = min(6 * var.state_sync_timeout_seconds, 43200)
  message_retention_seconds         = 345600
  kms_master_key_id                 = local.kms_key_arn
  kms_data_key_reuse_period_seconds = 300

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.state_sync_dlq.arn
    maxReceiveCount     = var.state_sync_max_receive_count
  })

  tags = local.tags
}

resource "aws_sqs_queue" "cluster_bootstrap_dlq" {
  name                              = "${local.cluster_bootstrap_name}-dlq"
  message_retention_seconds         = 1209600
  kms_master_key_id                 = local.kms_key_arn
  kms_data_key_reuse_period_seconds = 300
  tags                              = local.tags
}

resource "aws_sqs_queue" "cluster_bootstrap" {
  name = local.cluster_bootstrap_name
  # A retried record (a cluster still CREATING) returns after the function's own backoff
  # (ChangeMessageVisibility, retry_base_seconds doubling up to retry_max_seconds); this timeout
  # applies only to an invocation that died without answering, so it is kept just above the
  # function timeout (the least SQS event sources accept).
  visibility_timeout_seconds        = var.cluster_bootstrap_timeout_seconds + 60
  message_retention_seconds         = 345600
  kms_master_key_id                 = local.kms_key_arn
  kms_data_key_reuse_period_seconds = 300

  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.cluster_bootstrap_dlq.arn
    maxReceiveCount     = var.cluster_bootstrap_max_receive_count
  })

  tags = local.tags
}

# --- who may send --------------------------------------------------------------------------

data "aws_iam_policy_document" "state_sync_queue" {
  # Every rule that targets the queue: a state object written, and an EKS cluster deleted (this
  # region's events and those the region forwarders put on this bus). EventBridge sends as
  # events.amazonaws.com with the rule's ARN as aws:SourceArn ("Amazon SQS permissions",
  # https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sqs-permissions).
  statement {
    sid       = "EventBridgeRules"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.state_sync.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = local.state_sync_rule_arns
    }
  }

  # For buckets whose notification configuration is managed elsewhere: add a queue
  # configuration (events s3:ObjectCreated:*, suffix .tfstate) pointing at this queue.
  statement {
    sid       = "StateBucketDirectNotifications"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.state_sync.arn]

    principals {
      type        = "Service"
      identifiers = ["s3.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [local.state_bucket_arn]
    }

    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account]
    }
  }
}

resource "aws_sqs_queue_policy" "state_sync" {
  queue_url = aws_sqs_queue.state_sync.id
  policy    = data.aws_iam_policy_document.state_sync_queue.json
}

data "aws_iam_policy_document" "cluster_bootstrap_queue" {
  statement {
    sid       = "EventBridgeRule"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.cluster_bootstrap.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.eks_create_cluster.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "cluster_bootstrap" {
  queue_url = aws_sqs_queue.cluster_bootstrap.id
  policy    = data.aws_iam_policy_document.cluster_bootstrap_queue.json
}

# EventBridge puts events it could not deliver to a target into that target's DLQ, as the
# rule ("Using dead-letter queues to process undelivered events",
# https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-dlq.html): every rule whose
# target names this DLQ.
data "aws_iam_policy_document" "state_sync_dlq" {
  statement {
    sid       = "EventBridgeTargetDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.state_sync_dlq.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = local.state_sync_rule_arns
    }
  }
}

resource "aws_sqs_queue_policy" "state_sync_dlq" {
  queue_url = aws_sqs_queue.state_sync_dlq.id
  policy    = data.aws_iam_policy_document.state_sync_dlq.json
}

data "aws_iam_policy_document" "cluster_bootstrap_dlq" {
  statement {
    sid       = "EventBridgeTargetDeadLetters"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.cluster_bootstrap_dlq.arn]

    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }

    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.eks_create_cluster.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "cluster_bootstrap_dlq" {
  queue_url = aws_sqs_queue.cluster_bootstrap_dlq.id
  policy    = data.aws_iam_policy_document.cluster_bootstrap_dlq.json
}
