//! tfstate
