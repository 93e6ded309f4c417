locals {
  common_environment = merge(var.extra_environment, {
    CELLBRIDGE_FLEET_REPO    = var.fleet_repo
    CELLBRIDGE_GITHUB_SECRET = var.github_secret_arn
    GITHUB_API_URL           = var.github_api_url
    RUST_LOG                 = var.log_level
    # docs/outcomes.md, "Metrics and alarms" and "Pausing cellbridge".
    CELLBRIDGE_METRICS_NAMESPACE = var.metrics_namespace
    CELLBRIDGE_PAUSED            = tostring(var.paused)
    # docs/outcomes.md, "Outcomes": a record handed back returns after base, 2 x base, ... at most max.
    CELLBRIDGE_RETRY_BASE_SECS = tostring(var.retry_base_seconds)
    CELLBRIDGE_RETRY_MAX_SECS  = tostring(var.retry_max_seconds)
    }, var.base_branch == null ? {} : {
    CELLBRIDGE_BASE_BRANCH = var.base_branch
    }, var.flux_git_url == null ? {} : {
    # Overrides the template's GitRepository URL in a new cell's gotk-sync.yaml (and in the
    # sync objects bootstrap writes for a cell whose pull request is still open).
    CELLBRIDGE_FLUX_GIT_URL = var.flux_git_url
    }, var.flux_git_branch == null ? {} : {
    CELLBRIDGE_FLUX_GIT_BRANCH = var.flux_git_branch
  })

  state_sync_environment = merge(local.common_environment, {
    CELLBRIDGE_STATE_BUCKET      = var.state_bucket_name
    CELLBRIDGE_STATE_KEY_PATTERN = var.state_key_pattern
    # sync-all sends one message per state here, so each cell is synced and retried on its own.
    CELLBRIDGE_SYNC_QUEUE_URL = aws_sqs_queue.state_sync.url
    # This instance's share of GitHub's content-creation limits.
    CELLBRIDGE_GITHUB_WRITES_PER_MINUTE = tostring(local.github_writes_per_minute_share)
    CELLBRIDGE_GITHUB_WRITES_PER_HOUR   = tostring(local.github_writes_per_hour_share)
    }, var.state_role_arn == null ? {} : {
    # The bucket is in another account: states are read through this role.
    CELLBRIDGE_STATE_ROLE_ARN = var.state_role_arn
    }, length(var.account_describe_roles) == 0 ? {} : {
    # A destroyed cell's cluster is looked up in its account through state-sync's describe-only
    # role there, never cluster-bootstrap's.
    CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES = jsonencode(var.account_describe_roles)
  })

  cluster_bootstrap_environment = merge(local.common_environment, {
    CELLBRIDGE_FLUX_GIT_SECRET = var.flux_git_secret_arn
    # Wait for a CREATING cluster at most this long, leaving five minutes of the timeout for
    # the bootstrap itself; then the record goes back to the queue.
    CELLBRIDGE_CLUSTER_WAIT_SECS = tostring(max(var.cluster_bootstrap_timeout_seconds - 300, 0))
    # Temporary access entries older than this are swept (docs/bootstrap.md, "Temporary access").
    CELLBRIDGE_ACCESS_ENTRY_TTL_SECS = tostring(var.access_entry_ttl_seconds)
    # Where the function runs, so that a cluster whose endpoint excludes it fails at once,
    # finally, saying why (private only, or publicAccessCidrs without its egress addresses).
    CELLBRIDGE_VPC_ID = local.cluster_bootstrap_vpc_id
    # After applying Flux the function follows the cluster until Flux has taken over or the
    # deadline passes: each re-check is a message to its own queue, sent with a delay
    # (DelaySeconds), as are the daily sweep's catch-up bootstraps; each outcome is the
    # cluster's cellbridge.dev/flux tag.
    CELLBRIDGE_CONFIRM_QUEUE_URL     = aws_sqs_queue.cluster_bootstrap.url
    CELLBRIDGE_CONFIRM_DEADLINE_SECS = tostring(var.flux_confirm_deadline_seconds)
    }, length(var.account_roles) == 0 ? {} : {
    CELLBRIDGE_ACCOUNT_ROLES = jsonencode(var.account_roles)
    }, length(var.cluster_bootstrap_reachable_vpc_ids) == 0 ? {} : {
    CELLBRIDGE_REACHABLE_VPCS = join(",", var.cluster_bootstrap_reachable_vpc_ids)
    }, length(var.cluster_bootstrap_egress_cidrs) == 0 ? {} : {
    CELLBRIDGE_EGRESS_CIDRS = join(",", var.cluster_bootstrap_egress_cidrs)
  })

  # cluster-bootstrap runs in its own subnets when given (a hub VPC connected to the clusters'
  # VPCs by peering or a transit gateway), else in the functions' common ones.
  cluster_bootstrap_subnet_ids         = var.cluster_bootstrap_subnet_ids != null ? var.cluster_bootstrap_subnet_ids : var.vpc_subnet_ids
  cluster_bootstrap_security_group_ids = var.cluster_bootstrap_security_group_ids != null ? var.cluster_bootstrap_security_group_ids : var.vpc_security_group_ids
  cluster_bootstrap_vpc_ids            = distinct([for s in data.aws_subnet.cluster_bootstrap : s.vpc_id])
  cluster_bootstrap_vpc_id             = length(local.cluster_bootstrap_vpc_ids) > 0 ? local.cluster_bootstrap_vpc_ids[0] : "none"
  # What a cluster security group must admit on TCP 443 for a private endpoint to answer.
  cluster_bootstrap_ingress_cidrs = sort([for s in data.aws_subnet.cluster_bootstrap : s.cidr_block])
}

# By count, not for_each: subnets created in the same apply have no IDs at plan time.
data "aws_subnet" "cluster_bootstrap" {
  count = length(local.cluster_bootstrap_subnet_ids)
  id    = local.cluster_bootstrap_subnet_ids[count.index]
}

# A private endpoint's ENIs carry the cluster security group (clusterSecurityGroupId): it must
# admit HTTPS from cluster-bootstrap's subnets. By CIDR, which works over peering and transit
# gateways alike (https://repost.aws/knowledge-center/eks-private-cluster-endpoint-vpc).
resource "aws_vpc_security_group_ingress_rule" "cluster_bootstrap" {
  # Every cluster security group x every cluster-bootstrap subnet; by count, so that groups and
  # subnets created in the same apply work.
  count = length(var.cluster_security_group_ids) * length(local.cluster_bootstrap_subnet_ids)

  security_group_id = var.cluster_security_group_ids[floor(count.index / length(local.cluster_bootstrap_subnet_ids))]
  description       = "cellbridge cluster-bootstrap to the Kubernetes API"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = data.aws_subnet.cluster_bootstrap[count.index % length(local.cluster_bootstrap_subnet_ids)].cidr_block
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "state_sync" {
  name              = "/aws/lambda/${local.state_sync_name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
  tags              = local.tags
}

resource "aws_cloudwatch_log_group" "cluster_bootstrap" {
  name              = "/aws/lambda/${local.cluster_bootstrap_name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = local.kms_key_arn
  tags              = local.tags
}

resource "aws_lambda_function" "state_sync" {
  #checkov:skip=CKV_AWS_117:GitHub and AWS APIs are reached over the internet; set vpc_subnet_ids to run in a VPC.
  #checkov:skip=CKV_AWS_272:Code signing needs a signing profile the caller owns; pass code_signing_config_arn to enable it.
  function_name                  = local.state_sync_name
  description                    = "cellbridge: Terraform state -> cell-metadata pull request"
  role                           = aws_iam_role.state_sync.arn
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [var.architecture]
  filename                       = var.state_sync_zip
  source_code_hash               = filebase64sha256(var.state_sync_zip)
  memory_size                    = var.state_sync_memory_mb
  timeout                        = var.state_sync_timeout_seconds
  reserved_concurrent_executions = var.state_sync_reserved_concurrency
  kms_key_arn                    = local.kms_key_arn
  code_signing_config_arn        = var.code_signing_config_arn

  environment {
    variables = local.state_sync_environment
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.state_sync.name
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dead_letter_config {
    target_arn = aws_sqs_queue.state_sync_dlq.arn
  }

  dynamic "vpc_config" {
    for_each = length(var.vpc_subnet_ids) > 0 ? [1] : []
    content {
      subnet_ids         = var.vpc_subnet_ids
      security_group_ids = var.vpc_security_group_ids
    }
  }

  tags = local.tags

  depends_on = [aws_iam_role_policy.state_sync, aws_iam_role_policy_attachment.vpc]
}

resource "aws_lambda_function" "cluster_bootstrap" {
  #checkov:skip=CKV_AWS_117:GitHub, STS and public EKS endpoints are reached over the internet; set vpc_subnet_ids or cluster_bootstrap_subnet_ids to run in a VPC.
  #checkov:skip=CKV_AWS_272:Code signing needs a signing profile the caller owns; pass code_signing_config_arn to enable it.
  function_name                  = local.cluster_bootstrap_name
  description                    = "cellbridge: first Flux bootstrap of new EKS clusters"
  role                           = aws_iam_role.cluster_bootstrap.arn
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [var.architecture]
  filename                       = var.cluster_bootstrap_zip
  source_code_hash               = filebase64sha256(var.cluster_bootstrap_zip)
  memory_size                    = var.cluster_bootstrap_memory_mb
  timeout                        = var.cluster_bootstrap_timeout_seconds
  reserved_concurrent_executions = var.cluster_bootstrap_reserved_concurrency
  kms_key_arn                    = local.kms_key_arn
  code_signing_config_arn        = var.code_signing_config_arn

  environment {
    variables = local.cluster_bootstrap_environment
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.cluster_bootstrap.name
  }

  tracing_config {
    mode = var.tracing_mode
  }

  dead_letter_config {
    target_arn = aws_sqs_queue.cluster_bootstrap_dlq.arn
  }

  dynamic "vpc_config" {
    for_each = length(local.cluster_bootstrap_subnet_ids) > 0 ? [1] : []
    content {
      subnet_ids         = local.cluster_bootstrap_subnet_ids
      security_group_ids = local.cluster_bootstrap_security_group_ids
    }
  }

  tags = local.tags

  depends_on = [aws_iam_role_policy.cluster_bootstrap, aws_iam_role_policy_attachment.vpc]
}

# Asynchronous invocations (schedule, console with InvocationType Event): one retry, then DLQ.
resource "aws_lambda_function_event_invoke_config" "state_sync" {
  function_name                = aws_lambda_function.state_sync.function_name
  maximum_retry_attempts       = 1
  maximum_event_age_in_seconds = 3600
}

resource "aws_lambda_function_event_invoke_config" "cluster_bootstrap" {
  function_name                = aws_lambda_function.cluster_bootstrap.function_name
  maximum_retry_attempts       = 1
  maximum_event_age_in_seconds = 3600
}

resource "aws_lambda_event_source_mapping" "state_sync" {
  event_source_arn                   = aws_sqs_queue.state_sync.arn
  function_name                      = aws_lambda_function.state_sync.arn
  batch_size                         = var.state_sync_batch_size
  maximum_batching_window_in_seconds = var.state_sync_batching_window_seconds
  # One failed cell must not send the other cells of the batch round again.
  function_response_types = ["ReportBatchItemFailures"]

  dynamic "scaling_config" {
    for_each = local.state_sync_sqs_concurrency == null ? [] : [local.state_sync_sqs_concurrency]
    content {
      maximum_concurrency = scaling_config.value
    }
  }
}

resource "aws_lambda_event_source_mapping" "cluster_bootstrap" {
  event_source_arn = aws_sqs_queue.cluster_bootstrap.arn
  function_name    = aws_lambda_function.cluster_bootstrap.arn
  # A bootstrap can take most of the timeout; one cluster per invocation keeps the
  # deadline per record.
  batch_size              = 1
  function_response_types = ["ReportBatchItemFailures"]

  dynamic "scaling_config" {
    for_each = local.cluster_bootstrap_sqs_concurrency == null ? [] : [local.cluster_bootstrap_sqs_concurrency]
    content {
      maximum_concurrency = scaling_config.value
    }
  }
}
