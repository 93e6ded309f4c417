output "account_id" {
  description = "This account: the key of both roles in the module's `account_roles` and `account_describe_roles`."
  value       = local.account
}

output "bootstrap_role_arn" {
  description = "cluster-bootstrap's role here: the value of this account in the module's `account_roles`."
  value       = aws_iam_role.bootstrap.arn
}

output "describe_role_arn" {
  description = "state-sync's describe-only role here: the value of this account in the module's `account_describe_roles`."
  value       = aws_iam_role.describe.arn
}
