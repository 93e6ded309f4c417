variable "cluster_bootstrap_role_arn" {
  description = "cluster-bootstrap's execution role (the cellbridge module's `cluster_bootstrap_role_arn` output): the one principal the bootstrap role trusts."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", var.cluster_bootstrap_role_arn))
    error_message = "cluster_bootstrap_role_arn must be one IAM role's ARN (arn:aws:iam::<12-digit account>:role/<name>, no wildcard): the bootstrap role trusts that role and no other."
  }
}

variable "state_sync_role_arn" {
  description = "state-sync's execution role (the cellbridge module's `state_sync_role_arn` output): the one principal the describe-only role trusts."
  type        = string

  validation {
    condition     = can(regex("^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", var.state_sync_role_arn))
    error_message = "state_sync_role_arn must be one IAM role's ARN (arn:aws:iam::<12-digit account>:role/<name>, no wildcard): the describe-only role trusts that role and no other."
  }
}

variable "bootstrap_role_name" {
  description = "Name of cluster-bootstrap's role in this account (list its ARN in the module's `account_roles`)."
  type        = string
  default     = "cellbridge-bootstrap"
}

variable "describe_role_name" {
  description = "Name of state-sync's describe-only role in this account (list its ARN in the module's `account_describe_roles`)."
  type        = string
  default     = "cellbridge-state-sync-describe"
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
