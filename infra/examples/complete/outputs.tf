output "cellbridge" {
  description = "Everything the module reports: functions, queues, rules, key, console test events."
  value       = module.cellbridge
}
