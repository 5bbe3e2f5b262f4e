//! Shutting down the way meshlife tells its users to: readiness off first, keep serving while
//! the endpoint removal propagates, then stop accepting, finish what is in flight, exit.
//!
//! On SIGTERM (or SIGINT) the phase goes `Serving -> Draining`: `/readyz` fails at once, new
//! connections are still accepted and every response carries `Connection: close`, so clients
//! open their next connection to a pod that stays. After `--drain-delay`, `Draining -> Closing`:
//! the listener closes, idle keep-alive connections are closed, requests in flight are answered,
//! and the process exits when the last connection is done or `--shutdown-timeout` passes.

use std::time::Duration;

use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Serving,
    Draining,
    Closing,
}

/// The phase, shared by the listener, every connection and the health port.
#[derive(Clone)]
pub struct Lifecycle {
    sender: std::sync::Arc<watch::Sender<Phase>>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            sender: std::sync::Arc::new(watch::Sender::new(Phase::Serving)),
        }
    }
}

impl Lifecycle {
    pub fn phase(&self) -> Phase {
        *self.sender.borrow()
    }

    pub fn subscribe(&self) -> watch::Receiver<Phase> {
        self.sender.subscribe()
    }

    /// Moves forward only: a second signal never reopens a closing server.
    pub fn advance(&self, to: Phase) {
        self.sender.send_if_modified(|phase| {
            if *phase < to {
                *phase = to;
                true
            } else {
                false
            }
        });
    }
}

/// Waits for SIGTERM or SIGINT.
pub async fn termination_signal() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}

/// Waits until `receiver` shows `phase` or later.
pub async fn reached(receiver: &mut watch::Receiver<Phase>, phase: Phase) {
    let _ = receiver.wait_for(|current| *current >= phase).await;
}

/// Drives the phases after a signal: draining for `drain_delay`, then closing.
pub async fn run_drain(lifecycle: Lifecycle, drain_delay: Duration) {
    lifecycle.advance(Phase::Draining);
    tokio::time::sleep(drain_delay).await;
    lifecycle.advance(Phase::Closing);
}
