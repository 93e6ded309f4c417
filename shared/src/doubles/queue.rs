//! State-sync's queue in memory: what sync-all's fan-out sent, or a refusal to send.

use crate::ports::queue::{Enqueue, EnqueueError};

/// A queue in memory (feature `test-support`): what was sent, or a refusal to send when `fail`
/// is set.
#[derive(Default)]
pub struct MemQueue {
    pub sent: std::sync::Mutex<Vec<String>>,
    pub fail: std::sync::atomic::AtomicBool,
}

impl Enqueue for MemQueue {
    async fn enqueue(&self, bodies: &[String]) -> Result<(), EnqueueError> {
        if self.fail.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(EnqueueError::NotSent {
                queue: "memory".into(),
                count: bodies.len(),
                code: "ThrottlingException".into(),
            });
        }
        self.sent.lock().unwrap().extend(bodies.iter().cloned());
        Ok(())
    }
}
