terraform {
  required_version = ">= 1.5.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.40: Lambda logging_config, SQS ESM scaling_config, EventBridge Scheduler with KMS.
      version = ">= 5.40"
    }
  }
}
