data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition
  region    = data.aws_region.current.id

  state_sync_name        = "${var.name_prefix}-state-sync"
  cluster_bootstrap_name = "${var.name_prefix}-cluster-bootstrap"

  # Patterns are files so tests/infra/test_patterns.py routes the sample events through
  # exactly what gets deployed.
  state_object_created_pattern = templatefile("${path.module}/patterns/s3-state-object-created.json.tftpl", {
    bucket = var.state_bucket_name
  })
  eks_create_cluster_pattern = file("${path.module}/patterns/eks-create-cluster.json")
  eks_delete_cluster_pattern = file("${path.module}/patterns/eks-delete-cluster.json")

  state_bucket_arn = "arn:${local.partition}:s3:::${var.state_bucket_name}"

  # The rules whose targets are state-sync's queue and dead-letter queue: both queue policies
  # allow exactly these.
  state_sync_rule_arns = [
    aws_cloudwatch_event_rule.state_object_created.arn,
    aws_cloudwatch_event_rule.eks_delete_cluster.arn,
  ]

  # IAM scope of state-sync: `cells/{cell}/terraform.tfstate` -> `cells/*/terraform.tfstate`,
  # plus the same under `env:/*/` for workspaces. Listing (sync-all) only below the pattern's
  # fixed head and `env:/`, the two prefixes state-sync lists.
  # Both placeholders become IAM wildcards: a literal `{workspace}` in an object ARN matches no key.
  state_key_glob = replace(replace(var.state_key_pattern, "{cell}", "*"), "{workspace}", "*")
  state_key_head = regex("^[^{]*", var.state_key_pattern)
  state_object_arns = concat(
    ["${local.state_bucket_arn}/${local.state_key_glob}"],
    var.read_workspace_states ? ["${local.state_bucket_arn}/env:/*/${local.state_key_glob}"] : [],
  )
  state_list_prefixes = ["${local.state_key_head}*", "env:/*"]

  kms_key_arn = var.kms_key_arn != null ? var.kms_key_arn : aws_kms_key.this[0].arn

  # GitHub's limits on content-creating requests hold for the token, across every state-sync
  # instance at once: each keeps its share (docs/configuration.md). Unreserved, 10 are assumed.
  state_sync_instances           = var.state_sync_reserved_concurrency > 0 ? var.state_sync_reserved_concurrency : 10
  github_writes_per_minute_share = max(1, floor(var.github_writes_per_minute / local.state_sync_instances))
  github_writes_per_hour_share   = max(1, floor(var.github_writes_per_hour / local.state_sync_instances))

  eks_cluster_admin_policy_arn = "arn:${local.partition}:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"

  tags = merge({ "app.kubernetes.io/part-of" = "cellbridge" }, var.tags)
}

# Opt-in: S3 allows exactly one notification configuration per bucket, and this resource owns
# all of it. Only for buckets that have no other notifications, or that are managed here.
resource "aws_s3_bucket_notification" "state_bucket" {
  count = var.enable_state_bucket_eventbridge ? 1 : 0

  bucket      = var.state_bucket_name
  eventbridge = true
}
