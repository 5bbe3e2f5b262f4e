//! Which connection gives way when the routes port is full.
//!
//! Any pod of a cluster can reach the server's Service, and a client that opens connections
//! and never completes a TLS handshake (or completes it and idles, or trickles a request head)
//! holds a slot each. Waiting for a slot, as a plain limit does, would leave the engine's own
//! calls in the kernel's backlog past their timeout (Gatekeeper's 3 s), so every admission in
//! that window would go unchecked. Instead the listener keeps accepting, and when the limit is
//! reached one connection that is not being answered gives way: from the peer address that
//! holds the most connections, the one least likely to carry a call (a TLS handshake stalled
//! past HANDSHAKE_GRACE, then an idle keep-alive connection, then a handshake still within its
//! grace, then a request head still arriving), oldest first. A request a route is answering is
//! never cut. One flooding source thus sheds its own connections, and the callers that complete
//! handshakes and send requests keep theirs. A fresh handshake outlives idle connections
//! because a caller may leave one idle connection behind per call: Kyverno's service calls
//! build a new HTTP transport each time and never close it, so its calls in flight were shed
//! for its own leftovers once the table was full.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// How long a TLS handshake may take before it looks stalled (a flood's) rather than a call on
/// its way: a handshake takes milliseconds, and the engines give a call 2 s or more.
const HANDSHAKE_GRACE: Duration = Duration::from_secs(1);

/// How far a connection has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Stage {
    /// Accepted; the TLS handshake has not finished.
    Handshaking = 0,
    /// Between requests, or before its first one.
    Idle = 1,
    /// A request head or body is arriving.
    Receiving = 2,
    /// A route is answering a request: never cut.
    Answering = 3,
}

/// One open connection, as the table and its own task share it.
pub struct Slot {
    peer: IpAddr,
    accepted: Instant,
    stage: AtomicU8,
    shed: AtomicBool,
    /// Woken when the connection is to close.
    pub notify: Notify,
}

impl Slot {
    pub fn set_stage(&self, stage: Stage) {
        self.stage.store(stage as u8, Ordering::Relaxed);
    }

    fn stage(&self) -> Stage {
        match self.stage.load(Ordering::Relaxed) {
            0 => Stage::Handshaking,
            1 => Stage::Idle,
            2 => Stage::Receiving,
            _ => Stage::Answering,
        }
    }

    /// Whether the connection was asked to give way (also after the wake-up was consumed).
    pub fn is_shed(&self) -> bool {
        self.shed.load(Ordering::Relaxed)
    }
}

/// The open connections of one listener.
pub struct ConnectionTable {
    limit: usize,
    open: Mutex<HashMap<u64, std::sync::Arc<Slot>>>,
    next_id: std::sync::atomic::AtomicU64,
}

/// What the listener does with a connection it has just accepted.
pub enum Admission {
    /// Serve it; the slot is released when the guard drops.
    Serve(SlotGuard),
    /// Every open connection is answering a request: close the new one at once.
    Full,
}

/// Removes its slot from the table when the connection's task ends.
pub struct SlotGuard {
    table: std::sync::Arc<ConnectionTable>,
    id: u64,
    pub slot: std::sync::Arc<Slot>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Ok(mut open) = self.table.open.lock() {
            open.remove(&self.id);
        }
    }
}

impl ConnectionTable {
    pub fn new(limit: usize) -> std::sync::Arc<ConnectionTable> {
        std::sync::Arc::new(ConnectionTable {
            limit: limit.max(1),
            open: Mutex::new(HashMap::new()),
            next_id: std::sync::atomic::AtomicU64::new(0),
        })
    }

    pub fn len(&self) -> usize {
        self.open.lock().map_or(0, |open| open.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes a slot for a connection from `peer`, asking another to give way when the table
    /// is full. `shed` is told of each connection asked to give way.
    pub fn admit(
        self: &std::sync::Arc<Self>,
        peer: SocketAddr,
        shed: impl FnMut(Stage),
    ) -> Admission {
        self.admit_at(peer, Instant::now(), shed)
    }

    fn admit_at(
        self: &std::sync::Arc<Self>,
        peer: SocketAddr,
        now: Instant,
        mut shed: impl FnMut(Stage),
    ) -> Admission {
        let Ok(mut open) = self.open.lock() else {
            return Admission::Full;
        };
        // Slots already asked to give way are on their way out: they do not count.
        let live = open.values().filter(|slot| !slot.is_shed()).count();
        if live >= self.limit {
            match victim(&open, now) {
                Some(slot) => {
                    slot.shed.store(true, Ordering::Relaxed);
                    slot.notify.notify_one();
                    shed(slot.stage());
                }
                None => return Admission::Full,
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = std::sync::Arc::new(Slot {
            peer: peer.ip(),
            accepted: now,
            stage: AtomicU8::new(Stage::Handshaking as u8),
            shed: AtomicBool::new(false),
            notify: Notify::new(),
        });
        open.insert(id, std::sync::Arc::clone(&slot));
        Admission::Serve(SlotGuard {
            table: std::sync::Arc::clone(self),
            id,
            slot,
        })
    }
}

/// The connection to give way: of the peer with the most live connections, the least likely to
/// carry a call, oldest first; never one whose request a route is answering.
fn victim(
    open: &HashMap<u64, std::sync::Arc<Slot>>,
    now: Instant,
) -> Option<&std::sync::Arc<Slot>> {
    let mut per_peer: HashMap<IpAddr, usize> = HashMap::new();
    for slot in open.values().filter(|slot| !slot.is_shed()) {
        *per_peer.entry(slot.peer).or_default() += 1;
    }
    open.values()
        .filter(|slot| !slot.is_shed() && slot.stage() != Stage::Answering)
        .min_by_key(|slot| {
            (
                std::cmp::Reverse(per_peer.get(&slot.peer).copied().unwrap_or(0)),
                give_way_order(slot.stage(), now.saturating_duration_since(slot.accepted)),
                slot.accepted,
            )
        })
}

/// Lower gives way first.
fn give_way_order(stage: Stage, age: Duration) -> u8 {
    match stage {
        Stage::Handshaking if age > HANDSHAKE_GRACE => 0,
        Stage::Idle => 1,
        Stage::Handshaking => 2,
        Stage::Receiving => 3,
        Stage::Answering => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(last: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], port))
    }

    fn served(admission: Admission) -> SlotGuard {
        match admission {
            Admission::Serve(guard) => guard,
            Admission::Full => panic!("refused"),
        }
    }

    #[test]
    fn the_flooding_peer_gives_way_first_its_stalled_handshakes_before_its_idle_connections() {
        let table = ConnectionTable::new(4);
        let start = Instant::now();
        let engine = served(table.admit_at(peer(1, 1), start, |_| {}));
        engine.slot.set_stage(Stage::Idle);
        let flood: Vec<SlotGuard> = (0..3)
            .map(|port| {
                let accepted = start + Duration::from_millis(u64::from(port));
                served(table.admit_at(peer(9, port), accepted, |_| {}))
            })
            .collect();
        flood[0].slot.set_stage(Stage::Idle);
        let mut shed = Vec::new();
        let later = start + HANDSHAKE_GRACE * 2;
        let newcomer = served(table.admit_at(peer(2, 1), later, |stage| shed.push(stage)));
        // The oldest stalled handshake of the peer with three connections, not its idle one.
        assert_eq!(shed, vec![Stage::Handshaking]);
        assert!(!flood[0].slot.is_shed() && flood[1].slot.is_shed());
        assert!(!engine.slot.is_shed() && !newcomer.slot.is_shed());
        // A slot given back makes room without shedding.
        drop(flood);
        let mut shed_again = Vec::new();
        let _third = served(table.admit(peer(3, 1), |stage| shed_again.push(stage)));
        assert!(shed_again.is_empty());
        assert_eq!(table.len(), 3);
    }

    #[test]
    fn a_caller_that_leaves_a_connection_behind_each_call_loses_those_before_its_calls() {
        let table = ConnectionTable::new(4);
        let start = Instant::now();
        let leftovers: Vec<SlotGuard> = (0..3)
            .map(|port| {
                let accepted = start + Duration::from_millis(u64::from(port));
                served(table.admit_at(peer(1, port), accepted, |_| {}))
            })
            .collect();
        for leftover in &leftovers {
            leftover.slot.set_stage(Stage::Idle);
        }
        let now = start + HANDSHAKE_GRACE * 10;
        let in_flight = served(table.admit_at(peer(1, 3), now, |_| {}));
        let mut shed = Vec::new();
        let next_call = served(table.admit_at(peer(1, 4), now, |stage| shed.push(stage)));
        // Its oldest idle connection, not the handshake of the call it has just made.
        assert_eq!(shed, vec![Stage::Idle]);
        assert!(leftovers[0].slot.is_shed());
        assert!(!in_flight.slot.is_shed() && !next_call.slot.is_shed());
    }

    #[test]
    fn a_request_being_answered_is_never_cut() {
        let table = ConnectionTable::new(2);
        let first = served(table.admit(peer(1, 1), |_| {}));
        let second = served(table.admit(peer(1, 2), |_| {}));
        first.slot.set_stage(Stage::Answering);
        second.slot.set_stage(Stage::Answering);
        assert!(matches!(table.admit(peer(2, 1), |_| {}), Admission::Full));
        second.slot.set_stage(Stage::Receiving);
        let _third = served(table.admit(peer(2, 1), |_| {}));
        assert!(second.slot.is_shed() && !first.slot.is_shed());
    }
}
