//! redact
