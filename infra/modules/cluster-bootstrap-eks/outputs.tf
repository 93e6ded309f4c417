output "json" {
  description = "The EKS statements as a policy document (JSON), for `source_policy_documents`."
  value       = data.aws_iam_policy_document.eks.json
}

output "cluster_arn" {
  description = "Every cluster of the account, in any region: the resource of the statements on clusters."
  value       = local.cluster_arn
}
