locals {
  alarms = {
    state_sync = {
      function = aws_lambda_function.state_sync.function_name
      queue    = aws_sqs_queue.state_sync.name
      dlq      = aws_sqs_queue.state_sync_dlq.name
      max_age  = var.queue_age_alarm_seconds
    }
    cluster_bootstrap = {
      function = aws_lambda_function.cluster_bootstrap.function_name
      queue    = aws_sqs_queue.cluster_bootstrap.name
      dlq      = aws_sqs_queue.cluster_bootstrap_dlq.name
      max_age  = 4 * var.queue_age_alarm_seconds
    }
  }
}

# Anything in a dead-letter queue is an event cellbridge gave up on: a cell whose pull request
# may be stale, or a cluster without Flux. Redrive it after fixing the cause.
resource "aws_cloudwatch_metric_alarm" "dlq_not_empty" {
  for_each = local.alarms

  alarm_name          = "${each.value.dlq}-not-empty"
  alarm_description   = "cellbridge ${each.key}: messages in the dead-letter queue ${each.value.dlq}. Read them, fix the cause, redrive. Runbook: ${var.runbook_url}#alarm-state-sync-dlq-not-empty"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = each.value.dlq }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

# Errors count invocations that failed as a whole (crash, timeout, bad configuration);
# single failed records are reported through the batch response and show up in the DLQ.
resource "aws_cloudwatch_metric_alarm" "function_errors" {
  for_each = local.alarms

  alarm_name          = "${each.value.function}-errors"
  alarm_description   = "cellbridge ${each.key}: invocations failed. See /aws/lambda/${each.value.function}. Runbook: ${var.runbook_url}#alarm-state-sync-errors"
  namespace           = "AWS/Lambda"
  metric_name         = "Errors"
  dimensions          = { FunctionName = each.value.function }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

resource "aws_cloudwatch_metric_alarm" "queue_stuck" {
  for_each = local.alarms

  alarm_name          = "${each.value.queue}-oldest-message-age"
  alarm_description   = "cellbridge ${each.key}: records wait longer than ${each.value.max_age}s in ${each.value.queue} (throttled, disabled event source, or failing and retrying). Runbook: ${var.runbook_url}#alarm-state-sync-oldest-message-age"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateAgeOfOldestMessage"
  dimensions          = { QueueName = each.value.queue }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 2
  comparison_operator = "GreaterThanThreshold"
  threshold           = each.value.max_age
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

# The functions' own outcomes, counted in the embedded metric format in their logs (docs/outcomes.md,
# "Metrics and alarms"): metric Count, dimensions Function (the function's name) and Outcome.
# A refused state or event, or a failure no retry will fix, needs a person.
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
locals {
  outcome_alarms = merge([
    for key, a in local.alarms : {
      for outcome in ["refused", "failed_final"] : "${key}_${outcome}" => {
        kind     = key
        function = a.function
        outcome  = outcome
      }
    }
  ]...)
}

resource "aws_cloudwatch_metric_alarm" "outcome" {
  for_each = local.outcome_alarms

  alarm_name          = "${each.value.function}-${replace(each.value.outcome, "_", "-")}"
  alarm_description   = "cellbridge ${each.value.kind}: ${each.value.outcome == "refused" ? "a state or event was refused (contract, input)" : "a failure no retry will fix"}. Find it in /aws/lambda/${each.value.function} with Outcome = \"${each.value.outcome}\"; the record's cell says which. Runbook: ${var.runbook_url}#alarm-state-sync-${replace(each.value.outcome, "_", "-")}"
  namespace           = var.metrics_namespace
  metric_name         = "Count"
  dimensions          = { Function = each.value.function, Outcome = each.value.outcome }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

# The bootstrap's confirmation: each final outcome writes FluxStuck (dimension Function only), 1
# for a cluster whose Flux did not take over (no-nodes, unschedulable, image-pull, git-auth,
# git-unreachable, build-failed, timed-out) and 0 for ready; FluxOutcomes counts each outcome by
# its Flux dimension (docs/outcomes.md, "Metrics and alarms"). The cluster's cellbridge.dev/flux tag says
# which, and the fleet dashboard's Flux column shows it. An hour: a confirmation lasts
# flux_confirm_deadline_seconds (20 minutes by default), so one stuck cluster keeps it red for
# the hour its outcome came in.
resource "aws_cloudwatch_metric_alarm" "flux_stuck" {
  alarm_name          = "${local.cluster_bootstrap_name}-flux-stuck"
  alarm_description   = "cellbridge cluster-bootstrap: Flux did not take over a cluster it bootstrapped. Find it in /aws/lambda/${local.cluster_bootstrap_name} (FluxStuck = 1, with its cluster and Flux outcome), on the cluster's cellbridge.dev/flux tag, or in the fleet dashboard's Flux column. Runbook: ${var.runbook_url}#alarm-cluster-bootstrap-flux-stuck"
  namespace           = var.metrics_namespace
  metric_name         = "FluxStuck"
  dimensions          = { Function = local.cluster_bootstrap_name }
  statistic           = "Sum"
  period              = 3600
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

# state-sync's GitHub token: every invocation writes GithubTokenDaysLeft (dimension Function only)
# from GitHub's GitHub-Authentication-Token-Expiration header when the secret holds a token that
# expires; a token without expiry and a GitHub App (whose installation tokens cellbridge renews)
# write none, hence notBreaching. Under 14 days: put a new token in the secret before GitHub stops
# accepting it. The fleet dashboard warns in the same window. A day's minimum: sync-alls and
# deliveries write it at least daily on a fleet that changes.
resource "aws_cloudwatch_metric_alarm" "github_token_expiring" {
  alarm_name          = "${local.state_sync_name}-github-token-expiring"
  alarm_description   = "cellbridge state-sync: the GitHub token cellbridge uses expires in less than 14 days (GithubTokenDaysLeft). Put a new token in the secret ${var.github_secret_arn} (or move to a GitHub App); the fleet dashboard names the date. Runbook: ${var.runbook_url}#alarm-state-sync-github-token-expiring"
  namespace           = var.metrics_namespace
  metric_name         = "GithubTokenDaysLeft"
  dimensions          = { Function = local.state_sync_name }
  statistic           = "Minimum"
  period              = 86400
  evaluation_periods  = 1
  comparison_operator = "LessThanThreshold"
  threshold           = 14
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

# Every EventBridge rule with a target: events it could not deliver (a queue policy that refuses
# it, a KMS key it may not use) are FailedInvocations, retried and then dead-lettered; the alarm
# says so before the dead-letter queue fills. Custom buses add the EventBusName dimension
# ("Amazon EventBridge metrics", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-monitoring.html).
locals {
  event_rule_alarms = {
    state_object_created = aws_cloudwatch_event_rule.state_object_created.name
    eks_create_cluster   = aws_cloudwatch_event_rule.eks_create_cluster.name
    eks_delete_cluster   = aws_cloudwatch_event_rule.eks_delete_cluster.name
  }
}

resource "aws_cloudwatch_metric_alarm" "event_rule_failed_invocations" {
  for_each = local.event_rule_alarms

  alarm_name          = "${each.value}-failed-invocations"
  alarm_description   = "cellbridge: the EventBridge rule ${each.value} could not deliver events to its target (its queue's policy, its key). They are retried, then dead-lettered. Runbook: ${var.runbook_url}#alarm-state-sync-state-object-created-failed-invocations"
  namespace           = "AWS/Events"
  metric_name         = "FailedInvocations"
  dimensions          = var.event_bus_name == "default" ? { RuleName = each.value } : { EventBusName = var.event_bus_name, RuleName = each.value }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = 0
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}
