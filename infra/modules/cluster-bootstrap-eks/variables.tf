variable "account_id" {
  description = "The account whose clusters the role works on, and which holds the role."
  type        = string
}

variable "partition" {
  description = "The account's partition (aws, aws-cn, aws-us-gov)."
  type        = string
}

variable "role_name" {
  description = "Name of cluster-bootstrap's role in that account: the one principal it may grant cluster access to, and whose access entries alone it manages."
  type        = string
}
