//! A request to stop, handed down by the caller (the command line turns Ctrl-C into one).
//!
//! The stages only ask whether it came and wait for it; they never see a signal. Apply, prune
//! and delete check it before every request they start, let those in flight finish, and then
//! return what they did.

use std::sync::Arc;

use tokio::sync::watch;

/// Shared by the caller, which cancels, and the stages, which stop.
#[derive(Debug, Clone)]
pub struct Cancel(Arc<watch::Sender<bool>>);

impl Default for Cancel {
    fn default() -> Self {
        Cancel(Arc::new(watch::Sender::new(false)))
    }
}

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ask every holder to stop.
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once [`Cancel::cancel`] was called (at once if it already was).
    pub async fn cancelled(&self) {
        let mut receiver = self.0.subscribe();
        let _ = receiver.wait_for(|cancelled| *cancelled).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_reaches_every_clone_and_wakes_those_waiting() {
        let cancel = Cancel::new();
        let held = cancel.clone();
        let waiting = tokio::spawn(async move { held.cancelled().await });
        assert!(!cancel.is_cancelled());
        cancel.cancel();
        waiting.await.expect("the waiter wakes");
        assert!(cancel.clone().is_cancelled());
        cancel.cancelled().await;
    }
}
