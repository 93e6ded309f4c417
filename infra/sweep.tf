# --- no standing admin: the daily sweep of temporary access entries ----------------------------
# cluster-bootstrap gives itself cluster-admin through an EKS access entry tagged
# cellbridge.dev/temporary (with cellbridge.dev/created-at and its run's own cellbridge.dev/run)
# and deletes it at the end of the run; a run killed in between leaves it. A run deletes an
# expired leftover on the cluster it touches (a young one may be a live run's: used, never
# deleted); this schedule sweeps every cell's cluster daily with {"action":"sweep"}, in pages
# within its deadline (events/sweep.json). EventBridge Scheduler delivers `input` verbatim as the payload of an
# asynchronous invoke (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-targets-templated.html).

resource "aws_scheduler_schedule" "access_sweep" {
  count = var.enable_access_sweep_schedule ? 1 : 0

  name                         = "${local.cluster_bootstrap_name}-access-sweep"
  description                  = "cellbridge: delete expired temporary access entries cellbridge created on the fleet's clusters"
  schedule_expression          = var.access_sweep_schedule_expression
  schedule_expression_timezone = "UTC"
  kms_key_arn                  = local.kms_key_arn

  flexible_time_window {
    mode                      = "FLEXIBLE"
    maximum_window_in_minutes = 15
  }

  target {
    arn      = aws_lambda_function.cluster_bootstrap.arn
    role_arn = aws_iam_role.access_sweep_scheduler[0].arn
    input    = jsonencode({ action = "sweep" })

    retry_policy {
      maximum_event_age_in_seconds = 3600
      maximum_retry_attempts       = 2
    }
  }
}

resource "aws_iam_role" "access_sweep_scheduler" {
  count = var.enable_access_sweep_schedule ? 1 : 0

  name               = "${local.cluster_bootstrap_name}-sweep-scheduler"
  assume_role_policy = data.aws_iam_policy_document.scheduler_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "access_sweep_scheduler" {
  statement {
    sid       = "InvokeClusterBootstrap"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.cluster_bootstrap.arn, "${aws_lambda_function.cluster_bootstrap.arn}:*"]
  }

  statement {
    sid       = "EncryptedSchedule"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [local.kms_key_arn]
  }
}

resource "aws_iam_role_policy" "access_sweep_scheduler" {
  count = var.enable_access_sweep_schedule ? 1 : 0

  name   = "invoke-cluster-bootstrap-sweep"
  role   = aws_iam_role.access_sweep_scheduler[0].id
  policy = data.aws_iam_policy_document.access_sweep_scheduler.json
}

# Each finished sweep records AccessSweeps = 1 and OldestTemporaryAccessSeconds (the oldest
# temporary entry still there after it: a live run's, or one whose delete failed), dimension
# Function only (docs/bootstrap.md, "Temporary access"). Both alarms look at whole days: the schedule runs
# once a day.
resource "aws_cloudwatch_metric_alarm" "temporary_access_age" {
  count = var.enable_access_sweep_schedule ? 1 : 0

  alarm_name          = "${local.cluster_bootstrap_name}-temporary-access-age"
  alarm_description   = "cellbridge cluster-bootstrap: a temporary cluster-admin access entry is older than ${var.temporary_access_alarm_seconds} s after the sweep (its delete failed). Find the sweep's record in /aws/lambda/${local.cluster_bootstrap_name} (\"sweep: cluster not swept\") and delete the entry. Runbook: ${var.runbook_url}#alarm-cluster-bootstrap-temporary-access-age"
  namespace           = var.metrics_namespace
  metric_name         = "OldestTemporaryAccessSeconds"
  dimensions          = { Function = local.cluster_bootstrap_name }
  statistic           = "Maximum"
  period              = 86400
  evaluation_periods  = 1
  comparison_operator = "GreaterThanThreshold"
  threshold           = var.temporary_access_alarm_seconds
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}

# The heartbeat: no sweep finished for a day (the schedule, the fleet repo or the function is
# broken), so nothing says the temporary entries are gone.
resource "aws_cloudwatch_metric_alarm" "access_sweep_missing" {
  count = var.enable_access_sweep_schedule ? 1 : 0

  alarm_name          = "${local.cluster_bootstrap_name}-access-sweep-missing"
  alarm_description   = "cellbridge cluster-bootstrap: no access-entry sweep finished in a day. See /aws/lambda/${local.cluster_bootstrap_name} and the schedule ${local.cluster_bootstrap_name}-access-sweep. Runbook: ${var.runbook_url}#alarm-cluster-bootstrap-access-sweep-missing"
  namespace           = var.metrics_namespace
  metric_name         = "AccessSweeps"
  dimensions          = { Function = local.cluster_bootstrap_name }
  statistic           = "Sum"
  period              = 86400
  evaluation_periods  = 1
  comparison_operator = "LessThanThreshold"
  threshold           = 1
  treat_missing_data  = "breaching"
  alarm_actions       = var.alarm_actions
  ok_actions          = var.alarm_actions
  tags                = local.tags
}
