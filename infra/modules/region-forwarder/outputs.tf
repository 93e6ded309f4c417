output "rule_arn" {
  description = "The forwarding rule in this region."
  value       = aws_cloudwatch_event_rule.this.arn
}

output "role_arn" {
  description = "Role EventBridge uses to put events on the home bus."
  value       = aws_iam_role.this.arn
}
