//! A function's queue in memory: what was sent and with which delay, or a refusal to send.

use crate::ports::queue::{Enqueue, EnqueueError};

/// A queue in memory (feature `test-support`): what was sent, or a refusal to send when `fail`
/// is set.
#[derive(Default)]
pub struct MemQueue {
    pub sent: std::sync::Mutex<Vec<String>>,
    /// The delay each message of `sent` was sent with.
    pub delays: std::sync::Mutex<Vec<std::time::Duration>>,
    pub fail: std::sync::atomic::AtomicBool,
}

impl Enqueue for MemQueue {
    async fn enqueue(&self, bodies: &[String], delay: std::time::Duration) -> Result<(), EnqueueError> {
        if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(EnqueueError::NotSent {
                queue: "memory".into(),
                count: bodies.len(),
                code: "ThrottlingException".into(),
            });
        }
        self.sent.lock().unwrap().extend(bodies.iter().cloned());
        self.delays.lock().unwrap().extend(bodies.iter().map(|_| delay));
        Ok(())
    }
}
