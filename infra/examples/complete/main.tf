# Everything cellbridge needs: the module, its two secrets (values set outside Terraform, so they
# never enter state), alarms to a topic, forwarding from a second region, and a second account
# holding cells, with the two roles cellbridge assumes there.
#
#   make package                      # writes dist/state-sync.zip, dist/cluster-bootstrap.zip
#   cd infra/examples/complete && terraform init && terraform apply

provider "aws" {
  region = "eu-west-1"
}

provider "aws" {
  alias  = "us_east_1"
  region = "us-east-1"
}

locals {
  dist = "${path.root}/../../../dist"
}

data "aws_caller_identity" "current" {}

resource "aws_kms_key" "secrets" {
  description         = "cellbridge credentials"
  enable_key_rotation = true
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Sid       = "AccountAdministersThroughIam"
      Effect    = "Allow"
      Principal = { AWS = "arn:aws:iam::${data.aws_caller_identity.current.account_id}:root" }
      Action    = "kms:*"
      Resource  = "*"
    }]
  })
}

# Fill with: aws secretsmanager put-secret-value --secret-id cellbridge/github --secret-string file://github-app.json
resource "aws_secretsmanager_secret" "github" {
  #checkov:skip=CKV2_AWS_57:A GitHub App key or token cannot be rotated by a Lambda rotation function.
  name       = "cellbridge/github"
  kms_key_id = aws_kms_key.secrets.arn
}

# SSH deploy key of the fleet repo: {"identity": "...", "identity.pub": "...", "known_hosts": "..."}
resource "aws_secretsmanager_secret" "flux_git" {
  #checkov:skip=CKV2_AWS_57:A deploy key is rotated by replacing it in the Git host, not by a rotation function.
  name       = "cellbridge/flux-git"
  kms_key_id = aws_kms_key.secrets.arn
}

# The alarm topic's key lets CloudWatch encrypt what it publishes: the AWS managed key
# `alias/aws/sns` cannot be given that grant, so alarms would never notify ("Amazon CloudWatch
# alarms ... encrypted SNS topic": a customer managed key whose policy allows
# cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey*,
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html).
resource "aws_kms_key" "alarms" {
  description         = "cellbridge alarm notifications"
  enable_key_rotation = true
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Sid       = "AccountAdministersThroughIam"
        Effect    = "Allow"
        Principal = { AWS = "arn:aws:iam::${data.aws_caller_identity.current.account_id}:root" }
        Action    = "kms:*"
        Resource  = "*"
      },
      {
        Sid       = "CloudWatchPublishesAlarms"
        Effect    = "Allow"
        Principal = { Service = "cloudwatch.amazonaws.com" }
        Action    = ["kms:Decrypt", "kms:GenerateDataKey*"]
        Resource  = "*"
        Condition = { StringEquals = { "aws:SourceAccount" = data.aws_caller_identity.current.account_id } }
      },
    ]
  })
}

resource "aws_sns_topic" "alarms" {
  name              = "cellbridge-alarms"
  kms_master_key_id = aws_kms_key.alarms.arn
}

module "cellbridge" {
  source = "../.."

  state_sync_zip        = "${local.dist}/state-sync.zip"
  cluster_bootstrap_zip = "${local.dist}/cluster-bootstrap.zip"
  architecture          = "x86_64"

  state_bucket_name               = "acme-tfstate"
  state_key_pattern               = "cells/{cell}/terraform.tfstate"
  enable_state_bucket_eventbridge = false # the bucket's notifications are managed with the bucket

  fleet_repo           = "acme/fleet"
  base_branch          = "main"
  github_secret_arn    = aws_secretsmanager_secret.github.arn
  flux_git_url         = "ssh://git@github.com/acme/fleet.git"
  flux_git_secret_arn  = aws_secretsmanager_secret.flux_git.arn
  secrets_kms_key_arns = [aws_kms_key.secrets.arn]

  # Cells in account 222222222222: each function reaches it through its own role there, made by
  # the cell account's module below and trusting that function alone.
  account_roles          = { "222222222222" = module.cell_account_222222222222.bootstrap_role_arn }
  account_describe_roles = { "222222222222" = module.cell_account_222222222222.describe_role_arn }

  alarm_actions = [aws_sns_topic.alarms.arn]

  tags = {
    team = "platform"
  }
}

# The cell account's side: cluster-bootstrap's role and state-sync's describe-only role, created
# in that account (a provider that assumes an administrator role there).
provider "aws" {
  alias  = "cells_222222222222"
  region = "eu-west-1"

  assume_role {
    role_arn = "arn:aws:iam::222222222222:role/OrganizationAccountAccessRole"
  }
}

module "cell_account_222222222222" {
  source    = "../../modules/cell-account"
  providers = { aws = aws.cells_222222222222 }

  cluster_bootstrap_role_arn = module.cellbridge.cluster_bootstrap_role_arn
  state_sync_role_arn        = module.cellbridge.state_sync_role_arn
}

# Clusters created in us-east-1 are bootstrapped too (needs a trail recording management
# events there).
module "forward_us_east_1" {
  source    = "../../modules/region-forwarder"
  providers = { aws = aws.us_east_1 }

  home_event_bus_arn = module.cellbridge.event_bus_arn
}
