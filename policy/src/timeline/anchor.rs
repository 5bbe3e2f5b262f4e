//! Where a rule's finding shows on a timeline: the moments each rule is about, so a host can
//! draw a finding beside the event or request fate it explains.

use serde::Serialize;

use super::{Event, EventKind, Phase, Request, Timeline};

impl Timeline {
    /// Where a finding of `rule` (an id, `ML401`) shows on this timeline: the event or fate
    /// the rule is about, the one of `container` when several match. `None` for a rule with no
    /// place in time (ML000: the input could not be read).
    pub fn anchor_of(&self, rule: &str, container: Option<&str>) -> Option<Anchor> {
        let wanted = places_of_rule(rule)?;
        for place in wanted {
            let found = match place {
                Place::Event(phase, kind) => {
                    let matching = |event: &&Event| event.phase == *phase && event.kind == *kind;
                    let of_container = self.events.iter().position(|event| {
                        matching(&event)
                            && container.is_some()
                            && event.container.as_deref() == container
                    });
                    of_container
                        .or_else(|| self.events.iter().position(|event| matching(&event)))
                        .map(Anchor::Event)
                }
                Place::Fate(request) => self
                    .fates
                    .iter()
                    .position(|fate| fate.request == *request)
                    .map(Anchor::Fate),
                Place::Completion => self.completion.as_ref().map(|_| Anchor::Completion),
                Place::Mode => Some(Anchor::Mode),
            };
            if found.is_some() {
                return found;
            }
        }
        Some(Anchor::Mode)
    }
}

/// Where a finding shows on a [`Timeline`]: an index into `events` or `fates`, the batch
/// pod's completion, or the mesh mode line (for rules about the mode itself, and where the
/// rule's moment is not drawn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "at", content = "index", rename_all = "camelCase")]
pub enum Anchor {
    Event(usize),
    Fate(usize),
    Completion,
    Mode,
}

enum Place {
    Event(Phase, EventKind),
    Fate(Request),
    Completion,
    Mode,
}

/// The moments each rule is about, the preferred first (docs/rules.md, "What goes wrong at
/// runtime" of each rule).
fn places_of_rule(rule: &str) -> Option<&'static [Place]> {
    use EventKind::*;
    use Phase::*;
    Some(match rule {
        "ML101" | "ML102" => &[
            Place::Fate(Request::StartupOutbound),
            Place::Event(Startup, AppStarted),
        ],
        "ML103" => &[
            Place::Event(Startup, ProxyReady),
            Place::Fate(Request::StartupOutbound),
        ],
        "ML104" | "ML601" | "ML602" => &[Place::Mode],
        "ML201" | "ML202" => &[
            Place::Event(Startup, InitContainer),
            Place::Event(Startup, CaptureInstalled),
        ],
        "ML301" | "ML302" | "ML303" | "ML304" => &[Place::Completion],
        "ML401" => &[
            Place::Event(Shutdown, DrainEnd),
            Place::Event(Shutdown, Sigkill),
        ],
        "ML402" => &[Place::Event(Shutdown, ProxyExit)],
        // The drain an in-place restart skips.
        "ML407" => &[
            Place::Event(Shutdown, DrainStart),
            Place::Event(Shutdown, ProxyExit),
        ],
        "ML406" => &[
            Place::Event(Shutdown, ListenersClosed),
            Place::Event(Shutdown, DrainStart),
        ],
        "ML403" => &[
            Place::Event(Shutdown, DrainStart),
            Place::Fate(Request::InFlightAtSigterm),
        ],
        "ML404" => &[Place::Fate(Request::LongLivedStream)],
        "ML603" => &[Place::Event(Shutdown, Sigkill)],
        // A NetworkPolicy has no timeline of its own; what it blocks shows when its pods should
        // become ready and take traffic.
        "ML604" => &[Place::Event(Startup, AppReady)],
        // One waypoint pod: its traffic fails from its SIGTERM until a new pod is ready.
        "ML605" => &[Place::Event(Shutdown, Sigterm)],
        "ML405" => &[
            Place::Event(Shutdown, PreStop),
            Place::Event(Shutdown, Sigkill),
        ],
        // The replacement pod's readiness is what a rollout waits for.
        "ML501" => &[Place::Event(Startup, AppReady)],
        "ML502" => &[Place::Event(Startup, AppReady)],
        _ => return None,
    })
}
