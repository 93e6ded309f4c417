//! template
