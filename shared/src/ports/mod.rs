//! The outside services as the rules see them: one trait per consumer's slice of a service,
//! every method `async` in the same style (`-> impl Future<Output = Result<_, E>> + Send`), every
//! error typed and already classified ([`crate::shell::error::Classify`]). The real services
//! implement them in [`crate::adapters`]; the in-memory doubles of the `test-support` feature in
//! `doubles`.

pub mod cluster;
pub mod fleet;
pub mod github;
pub mod probe;
pub mod queue;
pub mod secrets;
pub mod state;
