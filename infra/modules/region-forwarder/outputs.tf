output "rule_arn" {
  description = "The CreateCluster forwarding rule in this region."
  value       = aws_cloudwatch_event_rule.this.arn
}

output "delete_cluster_rule_arn" {
  description = "The DeleteCluster forwarding rule in this region."
  value       = aws_cloudwatch_event_rule.delete_cluster.arn
}

output "role_arn" {
  description = "Role EventBridge uses to put events on the home bus."
  value       = aws_iam_role.this.arn
}
