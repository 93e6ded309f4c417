output "state_sync_function_name" {
  description = "Name of the state-sync function (Lambda console, `aws lambda invoke`)."
  value       = aws_lambda_function.state_sync.function_name
}

output "state_sync_function_arn" {
  description = "ARN of the state-sync function."
  value       = aws_lambda_function.state_sync.arn
}

output "cluster_bootstrap_function_name" {
  description = "Name of the cluster-bootstrap function."
  value       = aws_lambda_function.cluster_bootstrap.function_name
}

output "cluster_bootstrap_function_arn" {
  description = "ARN of the cluster-bootstrap function."
  value       = aws_lambda_function.cluster_bootstrap.arn
}

output "state_sync_role_arn" {
  description = "Execution role of state-sync (e.g. for a state bucket policy or a KMS key policy)."
  value       = aws_iam_role.state_sync.arn
}

output "cluster_bootstrap_role_arn" {
  description = "Execution role of cluster-bootstrap: the principal of the temporary EKS access entries, and the role other accounts' bootstrap roles must trust."
  value       = aws_iam_role.cluster_bootstrap.arn
}

output "state_sync_queue_url" {
  description = "Queue between EventBridge (or direct S3 notifications) and state-sync."
  value       = aws_sqs_queue.state_sync.url
}

output "state_sync_queue_arn" {
  description = "ARN of the state-sync queue: the target of a direct S3 queue notification when the bucket is managed elsewhere."
  value       = aws_sqs_queue.state_sync.arn
}

output "state_sync_dlq_url" {
  description = "Dead-letter queue of state-sync."
  value       = aws_sqs_queue.state_sync_dlq.url
}

output "cluster_bootstrap_queue_url" {
  description = "Queue between EventBridge and cluster-bootstrap."
  value       = aws_sqs_queue.cluster_bootstrap.url
}

output "cluster_bootstrap_queue_arn" {
  description = "ARN of the cluster-bootstrap queue."
  value       = aws_sqs_queue.cluster_bootstrap.arn
}

output "cluster_bootstrap_dlq_url" {
  description = "Dead-letter queue of cluster-bootstrap."
  value       = aws_sqs_queue.cluster_bootstrap_dlq.url
}

output "state_object_created_rule_arn" {
  description = "EventBridge rule for new state versions."
  value       = aws_cloudwatch_event_rule.state_object_created.arn
}

output "eks_create_cluster_rule_arn" {
  description = "EventBridge rule for CloudTrail CreateCluster (local and forwarded)."
  value       = aws_cloudwatch_event_rule.eks_create_cluster.arn
}

output "eks_create_cluster_event_pattern" {
  description = "The CreateCluster pattern, for forwarders in other regions (modules/region-forwarder reads the same file)."
  value       = local.eks_create_cluster_pattern
}

output "eks_delete_cluster_rule_arn" {
  description = "EventBridge rule for CloudTrail DeleteCluster (local and forwarded), targeting state-sync's queue."
  value       = aws_cloudwatch_event_rule.eks_delete_cluster.arn
}

output "eks_delete_cluster_event_pattern" {
  description = "The DeleteCluster pattern, for forwarders in other regions (modules/region-forwarder reads the same file)."
  value       = local.eks_delete_cluster_pattern
}

output "event_bus_arn" {
  description = "ARN of the bus the rules live on: the target of modules/region-forwarder."
  value       = "arn:${local.partition}:events:${local.region}:${local.account}:event-bus/${var.event_bus_name}"
}

output "sync_all_schedule_arn" {
  description = "The daily sync-all schedule, or null when disabled."
  value       = var.enable_sync_all_schedule ? aws_scheduler_schedule.sync_all[0].arn : null
}

output "kms_key_arn" {
  description = "KMS key of queues, logs, environment and schedule (created or passed in)."
  value       = local.kms_key_arn
}

output "log_group_names" {
  description = "Log groups of both functions."
  value = {
    state_sync        = aws_cloudwatch_log_group.state_sync.name
    cluster_bootstrap = aws_cloudwatch_log_group.cluster_bootstrap.name
  }
}

output "console_test_events" {
  description = "Manual payloads per function, ready for the Lambda console's Test tab (Event JSON) or `aws lambda invoke --payload`."
  value = {
    (local.state_sync_name) = {
      "sync-cell"         = jsonencode({ action = "sync", cell = var.console_example_cell })
      "sync-cell-dry-run" = jsonencode({ action = "sync", cell = var.console_example_cell, dry_run = true })
      "sync-object"       = jsonencode({ action = "sync", bucket = var.state_bucket_name, key = replace(var.state_key_pattern, "{cell}", var.console_example_cell) })
      "sync-all"          = jsonencode({ action = "sync-all" })
      "sync-all-dry-run"  = jsonencode({ action = "sync-all", dry_run = true })
    }
    (local.cluster_bootstrap_name) = {
      "bootstrap-dry-run" = jsonencode({ action = "bootstrap", cluster = var.console_example_cell, region = local.region, force = false, dry_run = true })
      "bootstrap"         = jsonencode({ action = "bootstrap", cluster = var.console_example_cell, region = local.region, force = false, dry_run = false })
      "bootstrap-force"   = jsonencode({ action = "bootstrap", cluster = var.console_example_cell, region = local.region, force = true, dry_run = false })
    }
  }
}

output "cluster_bootstrap_vpc_id" {
  description = "VPC cluster-bootstrap runs in (CELLBRIDGE_VPC_ID), or `none`."
  value       = local.cluster_bootstrap_vpc_id
}

output "cluster_bootstrap_ingress_cidrs" {
  description = "CIDRs of cluster-bootstrap's subnets: what a cluster security group must admit on TCP 443 for cluster-bootstrap to reach a private endpoint."
  value       = local.cluster_bootstrap_ingress_cidrs
}
