# ---------------------------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------------------------

variable "state_sync_zip" {
  description = "Path to the state-sync deployment package (`make package` writes dist/state-sync.zip). A zip with a `bootstrap` executable at its root."
  type        = string
}

variable "cluster_bootstrap_zip" {
  description = "Path to the cluster-bootstrap deployment package (`make package` writes dist/cluster-bootstrap.zip)."
  type        = string
}

variable "architecture" {
  description = "Instruction set of both packages: x86_64 or arm64. Must match how the zips were built."
  type        = string
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be \"x86_64\" or \"arm64\"."
  }
}

variable "name_prefix" {
  description = "Prefix of every named resource (functions, roles, queues, rules, alarms)."
  type        = string
  default     = "cellbridge"

  validation {
    condition     = can(regex("^[a-zA-Z0-9-]{1,40}$", var.name_prefix))
    error_message = "name_prefix must be 1-40 letters, digits or hyphens."
  }
}

# ---------------------------------------------------------------------------------------------
# Terraform state
# ---------------------------------------------------------------------------------------------

variable "state_bucket_name" {
  description = "Name of the S3 bucket that holds the cells' Terraform state (the `s3` backend's bucket)."
  type        = string
}

variable "state_key_pattern" {
  description = "Key of a cell's state object, with `{cell}` where the cell name stands, and/or `{workspace}` where a Terraform workspace's name stands (`env:/{workspace}/stacks/eks/terraform.tfstate`: the workspace names the cell). Sets CELLBRIDGE_STATE_KEY_PATTERN and scopes state-sync's read access."
  type        = string
  default     = "cells/{cell}/terraform.tfstate"

  validation {
    condition     = can(regex("\\{(cell|workspace)\\}", var.state_key_pattern)) && endswith(var.state_key_pattern, ".tfstate")
    error_message = "state_key_pattern must contain {cell} or {workspace} and end with .tfstate (the EventBridge rule filters on that suffix)."
  }
}

variable "read_workspace_states" {
  description = "Let state-sync read the state of non-default Terraform workspaces, which the s3 backend keeps under `env:/<workspace>/<key>` (its default `workspace_key_prefix`, the one cellbridge understands). false: default-workspace state only (listing `env:/` stays allowed so sync-all can tell)."
  type        = bool
  default     = true
}

variable "state_role_arn" {
  description = "IAM role state-sync assumes to read the state bucket when the bucket lives in another account (CELLBRIDGE_STATE_ROLE_ARN), or null to read it with the function's own role. Its trust policy must allow the state_sync_role_arn output to assume it."
  type        = string
  default     = null

  validation {
    condition     = var.state_role_arn == null || can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", var.state_role_arn))
    error_message = "state_role_arn must be an IAM role ARN, arn:aws:iam::<account>:role/<name>."
  }
}

variable "state_bucket_kms_key_arn" {
  description = "ARN of the KMS key the state bucket encrypts objects with (SSE-KMS), or null for SSE-S3. state-sync gets kms:Decrypt on it through S3 only."
  type        = string
  default     = null
}

variable "enable_state_bucket_eventbridge" {
  description = "Turn on EventBridge notifications on the state bucket with aws_s3_bucket_notification. WARNING: that resource owns the bucket's whole notification configuration and replaces any queue, topic or Lambda notifications it has. Leave false when the bucket is managed elsewhere and enable EventBridge there."
  type        = bool
  default     = false
}

# ---------------------------------------------------------------------------------------------
# Fleet repository and Flux
# ---------------------------------------------------------------------------------------------

variable "fleet_repo" {
  description = "The fleet repository, `owner/name` (CELLBRIDGE_FLEET_REPO)."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", var.fleet_repo))
    error_message = "fleet_repo must be owner/name."
  }
}

variable "base_branch" {
  description = "Branch pull requests target and bootstrap reads from (CELLBRIDGE_BASE_BRANCH). null: the repository's default branch."
  type        = string
  default     = null
}

variable "github_secret_arn" {
  description = "Full ARN (with Secrets Manager's six-character suffix) of the Secrets Manager secret with the GitHub credentials (JSON: `app_id`, `installation_id`, `private_key`, or `token`). CELLBRIDGE_GITHUB_SECRET."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+-[A-Za-z0-9]{6}$", var.github_secret_arn))
    error_message = "github_secret_arn must be a Secrets Manager secret's full ARN, with the six characters Secrets Manager appends to its name (arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf: the console's \"Secret ARN\"); IAM matches a policy's resource against that full ARN."
  }
}

variable "github_api_url" {
  description = "GitHub REST API base URL (GITHUB_API_URL); set it for GitHub Enterprise Server, e.g. https://github.example.com/api/v3."
  type        = string
  default     = "https://api.github.com"
}

variable "flux_git_url" {
  description = "URL Flux syncs the fleet repository from (CELLBRIDGE_FLUX_GIT_URL), e.g. ssh://git@github.com/acme/fleet.git; null keeps the one in clusters/_template/flux-system/gotk-sync.yaml."
  type        = string
  default     = null
}

variable "flux_git_branch" {
  description = "Branch Flux follows (CELLBRIDGE_FLUX_GIT_BRANCH); null keeps the template's ref.branch, else the fleet repository's base branch."
  type        = string
  default     = null
}

variable "flux_git_secret_arn" {
  description = "Full ARN (with Secrets Manager's six-character suffix) of the Secrets Manager secret that becomes the `flux-system` Git credentials Secret (CELLBRIDGE_FLUX_GIT_SECRET). Read by cluster-bootstrap only."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:.+-[A-Za-z0-9]{6}$", var.flux_git_secret_arn))
    error_message = "flux_git_secret_arn must be a Secrets Manager secret's full ARN, with the six characters Secrets Manager appends to its name (arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf: the console's \"Secret ARN\"); IAM matches a policy's resource against that full ARN."
  }
}

variable "secrets_kms_key_arns" {
  description = "ARNs of customer managed KMS keys the two secrets are encrypted with (empty when they use aws/secretsmanager). Granted kms:Decrypt through Secrets Manager only."
  type        = list(string)
  default     = []
}

variable "account_roles" {
  description = "Cells in other accounts: account id => the cluster-bootstrap role in that account (CELLBRIDGE_ACCOUNT_ROLES; modules/cell-account makes it, trusting cluster-bootstrap's role alone). A CreateCluster event from a listed account is handled through its role (cluster-bootstrap gets sts:AssumeRole on exactly these roles); from an account neither listed nor this one it fails, naming the account. Each listed account may also put events on the bus (see accept_account_role_events). state-sync never assumes these: see account_describe_roles."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for account, role in var.account_roles :
      can(regex("^[0-9]{12}$", account)) && can(regex("^arn:aws[a-z-]*:iam::${account}:role/.+$", role))
    ])
    error_message = "account_roles: every key must be a 12-digit account id and its value an IAM role ARN in that same account."
  }
}

variable "account_describe_roles" {
  description = "Cells in other accounts: account id => state-sync's describe-only role in that account (CELLBRIDGE_ACCOUNT_DESCRIBE_ROLES; modules/cell-account makes it: eks:DescribeCluster alone, trusting state-sync's role alone). state-sync gets sts:AssumeRole on exactly these roles, to ask whether a destroyed cell's cluster is gone and for the dashboard's Flux column; a cell of an account not listed is reported unreachable by state-sync."
  type        = map(string)
  default     = {}

  validation {
    condition = alltrue([
      for account, role in var.account_describe_roles :
      can(regex("^[0-9]{12}$", account)) && can(regex("^arn:aws[a-z-]*:iam::${account}:role/.+$", role))
    ])
    error_message = "account_describe_roles: every key must be a 12-digit account id and its value an IAM role ARN in that same account."
  }
}

variable "accept_account_role_events" {
  description = "Allow each account of account_roles to put events on event_bus_name (one events:PutEvents statement per account, added with PutPermission beside the bus policy's other statements), so a region-forwarder deployed there can forward its CreateCluster events."
  type        = bool
  default     = true
}

variable "bootstrap_assume_role_arns" {
  description = "Roles cluster-bootstrap may assume for cells whose metadata holds `bootstrap_role_arn` (accounts not in account_roles). Each names its account: arn:aws:iam::222222222222:role/cellbridge-bootstrap (a wildcard may stand in the role's name, never in the account)."
  type        = list(string)
  default     = []

  # A wildcard account would let cluster-bootstrap assume a role of that name in any account,
  # anyone's: reach is bounded by the accounts named here.
  validation {
    condition     = alltrue([for arn in var.bootstrap_assume_role_arns : can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/.+$", arn))])
    error_message = "bootstrap_assume_role_arns: every role must name its 12-digit account (arn:aws:iam::222222222222:role/cellbridge-bootstrap); a wildcard account such as arn:aws:iam::*:role/cellbridge-bootstrap would let cluster-bootstrap assume that role in any AWS account, anyone's."
  }
}

# ---------------------------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------------------------

variable "state_sync_memory_mb" {
  description = "Memory of state-sync. The state and the fleet archive are read as they stream in and only the cells being synced are kept, so memory does not grow with the fleet (21 MB peak for one sync on a 1,000-cell fleet, make bench); 256 buys the CPU share (a sixth of a core) and a quarter of it bounds what a read keeps."
  type        = number
  default     = 256
}

variable "state_sync_timeout_seconds" {
  description = "Timeout of state-sync. A sync-all lists the states and sends one message per cell to the module's queue (1,000 cells in about 9 s), then rebuilds the fleet dashboard, which reads every state once more, 16 at a time; each record is then synced in its own invocation."
  type        = number
  default     = 300

  validation {
    condition     = var.state_sync_timeout_seconds >= 30 && var.state_sync_timeout_seconds <= 900
    error_message = "state_sync_timeout_seconds must be between 30 and 900."
  }
}

variable "cluster_bootstrap_memory_mb" {
  description = "Memory of cluster-bootstrap (it holds the Flux component manifests, a few MB)."
  type        = number
  default     = 512
}

variable "cluster_bootstrap_timeout_seconds" {
  description = "Timeout of cluster-bootstrap. A cluster still CREATING when the time runs out is handed back to its queue with a delay."
  type        = number
  default     = 900

  validation {
    condition     = var.cluster_bootstrap_timeout_seconds >= 60 && var.cluster_bootstrap_timeout_seconds <= 900
    error_message = "cluster_bootstrap_timeout_seconds must be between 60 and 900."
  }
}

variable "github_writes_per_minute" {
  description = "GitHub's limit on content-creating requests per minute for the token (80 on github.com: docs.github.com, \"Rate limits for the REST API\"); shared among state-sync's instances (state_sync_reserved_concurrency)."
  type        = number
  default     = 80
}

variable "github_writes_per_hour" {
  description = "GitHub's limit on content-creating requests per hour for the token (500 on github.com); shared among state-sync's instances."
  type        = number
  default     = 500
}

variable "state_sync_reserved_concurrency" {
  description = "Reserved concurrency of state-sync: bounds parallel writers to the fleet repository and GitHub API use. The SQS event source gets one less as its maximum concurrency (at most 1000), so a console run or the schedule always finds a slot and a queued record is never throttled. -1: unreserved; otherwise at least 3."
  type        = number
  default     = 10

  # An SQS event source's maximum concurrency is 2 to 1000 (Lambda API, ScalingConfig:
  # https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html); without one, the event
  # source polls past the reservation, and each throttled delivery counts toward the queue's
  # maxReceiveCount (https://repost.aws/knowledge-center/lambda-sqs-scaling).
  validation {
    condition     = var.state_sync_reserved_concurrency == -1 || (var.state_sync_reserved_concurrency >= 3 && floor(var.state_sync_reserved_concurrency) == var.state_sync_reserved_concurrency)
    error_message = "state_sync_reserved_concurrency must be -1 (unreserved) or a whole number of at least 3: the SQS event source gets one less as its maximum concurrency, which SQS event sources accept from 2 only; without it, deliveries throttled by the reservation count toward state_sync_max_receive_count and end in the dead-letter queue."
  }
}

variable "cluster_bootstrap_reserved_concurrency" {
  description = "Reserved concurrency of cluster-bootstrap (new clusters arrive rarely; a few at a time is plenty). The SQS event source gets one less as its maximum concurrency (at most 1000), so a console run or the sweep always finds a slot and a queued record is never throttled. -1: unreserved; otherwise at least 3."
  type        = number
  default     = 5

  # As state_sync_reserved_concurrency: an SQS event source's maximum concurrency is 2 to 1000
  # (https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html).
  validation {
    condition     = var.cluster_bootstrap_reserved_concurrency == -1 || (var.cluster_bootstrap_reserved_concurrency >= 3 && floor(var.cluster_bootstrap_reserved_concurrency) == var.cluster_bootstrap_reserved_concurrency)
    error_message = "cluster_bootstrap_reserved_concurrency must be -1 (unreserved) or a whole number of at least 3: the SQS event source gets one less as its maximum concurrency, which SQS event sources accept from 2 only; without it, deliveries throttled by the reservation count toward cluster_bootstrap_max_receive_count and end in the dead-letter queue."
  }
}

variable "state_sync_batch_size" {
  description = "SQS records per state-sync invocation. Failed records are reported one by one (partial batch response)."
  type        = number
  default     = 10
}

variable "state_sync_batching_window_seconds" {
  description = "How long the event source gathers records before invoking state-sync; a short window folds the duplicate notifications of one apply into one invocation."
  type        = number
  default     = 5
}

variable "state_sync_max_receive_count" {
  description = "Deliveries of one state-sync record before it goes to the dead-letter queue."
  type        = number
  default     = 5
}

variable "cluster_bootstrap_max_receive_count" {
  description = "Deliveries of one cluster-bootstrap record before it goes to the dead-letter queue. Each retry (a cluster still CREATING, a retryable failure) is one delivery, returned after the backoff (retry_base_seconds doubling up to retry_max_seconds): 12 span about six hours with the defaults."
  type        = number
  default     = 12
}

variable "log_level" {
  description = "RUST_LOG of both functions, e.g. `info` or `info,cellbridge=debug`."
  type        = string
  default     = "info"
}

variable "log_retention_days" {
  description = "Retention of both functions' log groups. The bootstrap logs are an audit trail of temporary cluster-admin access."
  type        = number
  default     = 365
}

variable "tracing_mode" {
  description = "Lambda X-Ray tracing: PassThrough or Active (Active attaches AWSXRayDaemonWriteAccess)."
  type        = string
  default     = "PassThrough"

  validation {
    condition     = contains(["PassThrough", "Active"], var.tracing_mode)
    error_message = "tracing_mode must be PassThrough or Active."
  }
}

variable "extra_environment" {
  description = "Additional environment variables for both functions (e.g. newer CELLBRIDGE_* settings). Cannot override the ones the module sets."
  type        = map(string)
  default     = {}
}

variable "vpc_subnet_ids" {
  description = "Subnets to run both functions in (empty: no VPC). They need a route to GitHub, STS, Secrets Manager, S3, SQS and the EKS endpoints."
  type        = list(string)
  default     = []
}

variable "vpc_security_group_ids" {
  description = "Security groups of both functions when vpc_subnet_ids is set."
  type        = list(string)
  default     = []
}

variable "cluster_bootstrap_subnet_ids" {
  description = "Subnets of cluster-bootstrap alone, e.g. in a hub VPC connected to the clusters' VPCs by peering or a transit gateway so that it reaches private endpoints. null: vpc_subnet_ids. They need a route to GitHub, STS, EKS and Secrets Manager too. Sets CELLBRIDGE_VPC_ID (their VPC; `none` without subnets)."
  type        = list(string)
  default     = null
}

variable "cluster_bootstrap_security_group_ids" {
  description = "Security groups of cluster-bootstrap when it runs in subnets (egress TCP 443). null: vpc_security_group_ids."
  type        = list(string)
  default     = null
}

variable "cluster_bootstrap_reachable_vpc_ids" {
  description = "VPCs connected to cluster-bootstrap's VPC (peering, transit gateway; routes both ways) whose clusters' private-only endpoints it reaches (CELLBRIDGE_REACHABLE_VPCS). Their cluster security groups must admit the cluster_bootstrap_ingress_cidrs output on TCP 443 (cluster_security_group_ids does it for groups of this account and region)."
  type        = list(string)
  default     = []
}

variable "cluster_bootstrap_egress_cidrs" {
  description = "Public CIDRs cluster-bootstrap's traffic leaves from (its NAT gateways' Elastic IPs as /32), checked against a cluster's publicAccessCidrs (CELLBRIDGE_EGRESS_CIDRS). Empty: unknown, so a public endpoint limited to some CIDRs is refused unless reached privately."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.cluster_bootstrap_egress_cidrs : can(cidrhost(c, 0))])
    error_message = "cluster_bootstrap_egress_cidrs must be CIDRs, e.g. 203.0.113.7/32."
  }
}

variable "cluster_security_group_ids" {
  description = "Cluster security groups (DescribeCluster's clusterSecurityGroupId) in this account and region to which the module adds ingress TCP 443 from cluster-bootstrap's subnets, for private endpoints. Others need the same rule from the cluster_bootstrap_ingress_cidrs output."
  type        = list(string)
  default     = []
}

variable "code_signing_config_arn" {
  description = "Lambda code signing configuration for both functions, or null."
  type        = string
  default     = null
}

# ---------------------------------------------------------------------------------------------
# Events and schedule
# ---------------------------------------------------------------------------------------------

variable "event_bus_name" {
  description = "Event bus the rules live on. S3 and CloudTrail events arrive on `default` only."
  type        = string
  default     = "default"
}

variable "enable_sync_all_schedule" {
  description = "Create the daily EventBridge Scheduler schedule that invokes state-sync with {\"action\":\"sync-all\"}."
  type        = bool
  default     = true
}

variable "sync_all_schedule_expression" {
  description = "When sync-all runs (EventBridge Scheduler expression)."
  type        = string
  default     = "cron(17 5 * * ? *)"
}

variable "sync_all_schedule_timezone" {
  description = "Time zone of sync_all_schedule_expression."
  type        = string
  default     = "UTC"
}

variable "enable_access_sweep_schedule" {
  description = "Create the daily EventBridge Scheduler schedule that invokes cluster-bootstrap with {\"action\":\"sweep\"} (delete expired temporary access entries on every cell's cluster), and its two alarms: the oldest entry's age, and no sweep for a day."
  type        = bool
  default     = true
}

variable "access_sweep_schedule_expression" {
  description = "When the access-entry sweep runs (EventBridge Scheduler expression, UTC). Once a day: the heartbeat alarm expects one sweep per day."
  type        = string
  default     = "cron(37 4 * * ? *)"
}

variable "access_entry_ttl_seconds" {
  description = "CELLBRIDGE_ACCESS_ENTRY_TTL_SECS: a temporary access entry cellbridge created that is older than this is a leftover of a dead run and is deleted (by the sweep, and by the next run on that cluster). At least 900 (a run's longest)."
  type        = number
  default     = 1800

  validation {
    condition     = var.access_entry_ttl_seconds >= 900 && floor(var.access_entry_ttl_seconds) == var.access_entry_ttl_seconds
    error_message = "access_entry_ttl_seconds must be a whole number of at least 900."
  }
}

variable "temporary_access_alarm_seconds" {
  description = "Alarm when the oldest temporary access entry left after a sweep (OldestTemporaryAccessSeconds) is older than this."
  type        = number
  default     = 3600
}

# ---------------------------------------------------------------------------------------------
# Encryption, alarms, tags
# ---------------------------------------------------------------------------------------------

variable "flux_confirm_deadline_seconds" {
  description = "CELLBRIDGE_CONFIRM_DEADLINE_SECS: how long cluster-bootstrap follows a cluster after applying Flux (re-checks sent to its own queue with a delay) before a cause still seen, or none, becomes its final outcome. The outcome is the cluster's cellbridge.dev/flux tag; a final outcome other than ready raises the flux-stuck alarm. From 300 (5 minutes) to 86400 (a day)."
  type        = number
  default     = 1200

  validation {
    condition     = var.flux_confirm_deadline_seconds >= 300 && var.flux_confirm_deadline_seconds <= 86400 && floor(var.flux_confirm_deadline_seconds) == var.flux_confirm_deadline_seconds
    error_message = "flux_confirm_deadline_seconds must be a whole number from 300 to 86400."
  }
}

variable "kms_key_arn" {
  description = "Customer managed KMS key for queues, log groups, environment variables and the schedule. null: the module creates one (with the key policy EventBridge, S3 and CloudWatch Logs need). A key you bring must grant the same."
  type        = string
  default     = null
}

variable "kms_key_deletion_window_days" {
  description = "Deletion window of the key the module creates."
  type        = number
  default     = 30
}

variable "alarm_actions" {
  description = "ARNs (e.g. SNS topics) notified when an alarm fires and when it clears."
  type        = list(string)
  default     = []
}

variable "metrics_namespace" {
  description = "CloudWatch namespace of the functions' outcome metrics (CELLBRIDGE_METRICS_NAMESPACE); the alarms on refused and failed_final read it."
  type        = string
  default     = "cellbridge"

  validation {
    condition     = can(regex("^[A-Za-z0-9.\\-_/#: ]{1,255}$", var.metrics_namespace)) && !startswith(var.metrics_namespace, "AWS/")
    error_message = "1-255 of A-Z a-z 0-9 . - _ / # : and spaces, not starting with AWS/."
  }
}

variable "retry_base_seconds" {
  description = "An SQS record that failed retryably returns to the function after this many seconds, doubling with each delivery up to retry_max_seconds (CELLBRIDGE_RETRY_BASE_SECS), instead of after the queue's visibility timeout; the queue's max_receive_count still moves it to the dead-letter queue."
  type        = number
  default     = 60

  validation {
    condition     = var.retry_base_seconds >= 0 && var.retry_base_seconds <= 43200
    error_message = "retry_base_seconds must be between 0 and 43200 (SQS's longest visibility timeout)."
  }
}

variable "retry_max_seconds" {
  description = "The longest backoff of a retried SQS record, in seconds (CELLBRIDGE_RETRY_MAX_SECS); at least retry_base_seconds."
  type        = number
  default     = 3600

  validation {
    condition     = var.retry_max_seconds >= 0 && var.retry_max_seconds <= 43200
    error_message = "retry_max_seconds must be between 0 and 43200 (SQS's longest visibility timeout)."
  }
}

variable "paused" {
  description = "Pause switch (CELLBRIDGE_PAUSED): state-sync writes nothing to GitHub and cluster-bootstrap touches no cluster; every result says paused. After unpausing, run sync-all (and bootstrap the clusters created meanwhile)."
  type        = bool
  default     = false
}

variable "queue_age_alarm_seconds" {
  description = "Alarm when the oldest state-sync record has waited this long (cluster-bootstrap gets four times as long: it waits for clusters on purpose)."
  type        = number
  default     = 3600
}

variable "runbook_url" {
  description = "The operator runbook every alarm's description links to, with the alarm's entry as its anchor. Point it at the release you deploy (`.../blob/<ref>/docs/runbook.md`, the `?ref=` of the module's source) or at your own copy."
  type        = string
  default     = "https://github.com/cellbridge/cellbridge/blob/main/docs/runbook.md"

  validation {
    condition     = can(regex("^https://[^#]+$", var.runbook_url))
    error_message = "runbook_url must be an https:// address without an anchor (each alarm adds its own)."
  }
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}

variable "console_example_cell" {
  description = "Cell name used in the `console_test_events` output, so the payloads run as they are."
  type        = string
  default     = "prod-eu-west-1"
}
