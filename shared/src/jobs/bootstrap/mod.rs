//! cluster-bootstrap as a job: the invocation's items and outcomes, the Lambda handler's parts
//! and the command line's local run. The sequence itself is [`crate::rules::bootstrap`].

mod catchup;
pub mod handler;
pub mod job;
pub mod local;
pub mod recheck;
pub mod scheduled;
pub mod sweep;
