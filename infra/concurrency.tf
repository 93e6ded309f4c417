# The event sources' maximum concurrency, from the functions' reservations alone (no resource, no
# data source: tests/infra/test_validations.py plans this file with variables.tf, offline).
locals {
  # One slot below the reservation for the event source, so a console run or the daily
  # sync-all is not throttled behind a full queue, and the event source never polls more records
  # than the reservation runs (a throttled delivery counts toward maxReceiveCount). An SQS event
  # source takes 2 to 1000 (API_ScalingConfig); the variables refuse a reservation of 1 or 2, so
  # null here means unreserved only.
  state_sync_sqs_concurrency        = var.state_sync_reserved_concurrency == -1 ? null : min(var.state_sync_reserved_concurrency - 1, 1000)
  cluster_bootstrap_sqs_concurrency = var.cluster_bootstrap_reserved_concurrency == -1 ? null : min(var.cluster_bootstrap_reserved_concurrency - 1, 1000)
}
