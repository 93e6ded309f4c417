//! metadata
