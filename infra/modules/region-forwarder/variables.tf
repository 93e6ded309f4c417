variable "home_event_bus_arn" {
  description = "Bus of the cellbridge module (its `event_bus_arn` output), in the home region."
  type        = string
}

variable "name_prefix" {
  description = "Prefix of the rule and role names; the region is appended."
  type        = string
  default     = "cellbridge"
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
