//! Outbox relay, an at-least-once bus and a consumer that deduplicates by event id.
//!
//! The business transaction has already committed each event's outbox row (with its effect),
//! so the model starts there. The relay publishes then marks; the bus delivers copies in any
//! order and redelivers anything unacked; the consumer applies each delivery in one
//! transaction (or two, in the broken variants) and acks after commit. Relay and consumer
//! crash at any step, within a budget that keeps the state space finite.

use stateright::{Model, Property};

/// Name of the safety property that no event's effect commits twice.
pub const NEVER_TWICE: &str = "an event's effect is never applied twice";
/// Name of the property that, once everything has settled, every event applied exactly once.
pub const EXACTLY_ONCE: &str = "every published event's effect applied exactly once";
/// Name of the sanity property that the dedup row is exercised (a duplicate was skipped).
pub const DUPLICATE_SKIPPED: &str = "a duplicate delivery is skipped";

/// Where the consumer's `INSERT INTO consumed_events` commits relative to the effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dedup {
    /// The real consumer: the dedup insert and the effect are one transaction.
    InEffectTx,
    /// Broken: the dedup row commits first, the effect in a second transaction.
    OwnTxBefore,
    /// Broken: the effect commits first (after checking the dedup row), the dedup row after.
    OwnTxAfter,
}

/// The model: `events` outbox rows, `crashes` relay or consumer crashes and `redeliveries`
/// spontaneous bus redeliveries (ack-wait expiring under a slow consumer) in total.
#[derive(Clone, Debug)]
pub struct EventChain {
    /// How many outbox rows (events) there are, all committed and unpublished at the start.
    pub events: usize,
    /// How many crashes, of the relay or of a consumer's handler, may happen in all.
    pub crashes: u8,
    /// How many spontaneous redeliveries the bus may make in all.
    pub redeliveries: u8,
    /// Where the dedup row commits: [`Dedup::InEffectTx`] as implemented, or a broken
    /// variant.
    pub dedup: Dedup,
}

impl EventChain {
    /// The chain as implemented: dedup row and effect in one transaction.
    pub fn new(events: usize, crashes: u8, redeliveries: u8) -> Self {
        Self {
            events,
            crashes,
            redeliveries,
            dedup: Dedup::InEffectTx,
        }
    }

    /// The same chain with a different placement of the dedup row.
    pub fn with_dedup(self, dedup: Dedup) -> Self {
        Self { dedup, ..self }
    }
}

/// How far one delivery's handler has got. Crashing at any stage drops the handler and the
/// bus redelivers the message; only what was committed stays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Stage {
    /// Delivered, nothing committed.
    Received,
    /// The first of two transactions committed (broken variants only).
    Halfway,
    /// Everything committed (or skipped as a duplicate); the ack is next.
    Committed,
}

/// One delivery in progress (unacked): which event, and how far its handler has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handler {
    /// The event's index.
    pub event: usize,
    /// How far the handler has got.
    pub stage: Stage,
}

/// A state of the model: the outbox, the relay, the bus, the consumer's handlers and what
/// each has committed. Per-event vectors are indexed by the event's index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChainState {
    /// The outbox row is marked published.
    pub marked: Vec<bool>,
    /// The relay has published this event and not yet marked it.
    pub relay: Option<usize>,
    /// Copies of each event on the bus awaiting (re)delivery.
    pub queued: Vec<u8>,
    /// Deliveries in progress (unacked), kept sorted: a multiset, so that the order in which
    /// deliveries started does not multiply the states.
    pub handlers: Vec<Handler>,
    /// The `(consumer, event_id)` dedup row is committed.
    pub consumed: Vec<bool>,
    /// Committed applications of each event's effect.
    pub applied: Vec<u8>,
    /// Crashes (relay or consumer) still allowed.
    pub crashes_left: u8,
    /// Spontaneous redeliveries still allowed.
    pub redeliveries_left: u8,
    /// A delivery found its dedup row and skipped the effect (the dedup did its job once).
    pub skipped: bool,
}

impl ChainState {
    /// Nothing left to do: every row marked, the bus drained, no process mid-step. Every
    /// maximal run ends here, as each budget-free step moves an event forward.
    pub fn settled(&self) -> bool {
        self.relay.is_none()
            && self.marked.iter().all(|&m| m)
            && self.queued.iter().all(|&q| q == 0)
            && self.handlers.is_empty()
    }

    fn remove(&mut self, h: Handler) -> Option<()> {
        let at = self.handlers.iter().position(|&x| x == h)?;
        self.handlers.remove(at);
        Some(())
    }

    fn add(&mut self, h: Handler) {
        self.handlers.push(h);
        self.handlers.sort();
    }

    fn advance(&mut self, event: usize, from: Stage, to: Stage) -> Option<()> {
        self.remove(Handler { event, stage: from })?;
        self.add(Handler { event, stage: to });
        Some(())
    }
}

/// One step of the relay, the bus or a handler. The `usize` is the event's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChainAction {
    /// The relay publishes an unmarked outbox row.
    Publish(usize),
    /// The relay marks the row it just published.
    Mark(usize),
    /// The relay dies between publish and mark: the row will be published again.
    RelayCrash,
    /// The bus hands a queued copy to the consumer, in any order.
    Deliver(usize),
    /// The handler runs its (first) transaction.
    Commit(usize),
    /// The handler runs its second transaction (broken variants only).
    CommitSecond(usize),
    /// The handler acks: the bus forgets the message.
    Ack(usize),
    /// The handler dies at this stage (before its ack): the bus redelivers.
    ConsumerCrash(Handler),
    /// Ack-wait expires while a handler of this event is still at work: a second copy.
    Redeliver(usize),
}

impl Model for EventChain {
    type State = ChainState;
    type Action = ChainAction;

    fn init_states(&self) -> Vec<ChainState> {
        vec![ChainState {
            marked: vec![false; self.events],
            relay: None,
            queued: vec![0; self.events],
            handlers: Vec::new(),
            consumed: vec![false; self.events],
            applied: vec![0; self.events],
            crashes_left: self.crashes,
            redeliveries_left: self.redeliveries,
            skipped: false,
        }]
    }

    fn actions(&self, s: &ChainState, actions: &mut Vec<ChainAction>) {
        match s.relay {
            None => actions.extend(
                (0..self.events)
                    .filter(|&e| !s.marked[e])
                    .map(ChainAction::Publish),
            ),
            Some(e) => {
                actions.push(ChainAction::Mark(e));
                if s.crashes_left > 0 {
                    actions.push(ChainAction::RelayCrash);
                }
            }
        }
        actions.extend(
            (0..self.events)
                .filter(|&e| s.queued[e] > 0)
                .map(ChainAction::Deliver),
        );
        let mut handlers = s.handlers.clone();
        // Identical handlers lead to identical states: offer each one's steps once.
        handlers.dedup();
        for h in handlers {
            actions.push(match h.stage {
                Stage::Received => ChainAction::Commit(h.event),
                Stage::Halfway => ChainAction::CommitSecond(h.event),
                Stage::Committed => ChainAction::Ack(h.event),
            });
            if s.crashes_left > 0 {
                actions.push(ChainAction::ConsumerCrash(h));
            }
        }
        if s.redeliveries_left > 0 {
            let mut busy: Vec<usize> = s.handlers.iter().map(|h| h.event).collect();
            busy.dedup();
            actions.extend(busy.into_iter().map(ChainAction::Redeliver));
        }
    }

    fn next_state(&self, s: &ChainState, action: ChainAction) -> Option<ChainState> {
        let mut n = s.clone();
        match action {
            ChainAction::Publish(e) => {
                n.queued[e] += 1;
                n.relay = Some(e);
            }
            ChainAction::Mark(e) => {
                n.marked[e] = true;
                n.relay = None;
            }
            ChainAction::RelayCrash => {
                n.relay = None;
                n.crashes_left -= 1;
            }
            ChainAction::Deliver(e) => {
                n.queued[e] -= 1;
                n.add(Handler {
                    event: e,
                    stage: Stage::Received,
                });
            }
            ChainAction::Commit(e) => {
                let stage = if s.consumed[e] {
                    // Primary key conflict (or the row seen by the check): skip, then ack.
                    n.skipped = true;
                    Stage::Committed
                } else {
                    match self.dedup {
                        Dedup::InEffectTx => {
                            n.consumed[e] = true;
                            n.applied[e] += 1;
                            Stage::Committed
                        }
                        Dedup::OwnTxBefore => {
                            n.consumed[e] = true;
                            Stage::Halfway
                        }
                        Dedup::OwnTxAfter => {
                            n.applied[e] += 1;
                            Stage::Halfway
                        }
                    }
                };
                n.advance(e, Stage::Received, stage)?;
            }
            ChainAction::CommitSecond(e) => {
                match self.dedup {
                    Dedup::InEffectTx => return None,
                    Dedup::OwnTxBefore => n.applied[e] += 1,
                    // ON CONFLICT DO NOTHING: a concurrent twin may have inserted it already.
                    Dedup::OwnTxAfter => n.consumed[e] = true,
                }
                n.advance(e, Stage::Halfway, Stage::Committed)?;
            }
            ChainAction::Ack(e) => n.remove(Handler {
                event: e,
                stage: Stage::Committed,
            })?,
            ChainAction::ConsumerCrash(h) => {
                n.remove(h)?;
                n.queued[h.event] += 1;
                n.crashes_left -= 1;
            }
            ChainAction::Redeliver(e) => {
                n.queued[e] += 1;
                n.redeliveries_left -= 1;
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(NEVER_TWICE, |_, s: &ChainState| {
                s.applied.iter().all(|&a| a <= 1)
            }),
            // An always-property over settled states rather than `eventually`: stateright's
            // `eventually` is satisfied by passing through "applied == 1" even if a later
            // step makes it 2, and it ignores paths that end in a cycle.
            Property::always(EXACTLY_ONCE, |_, s: &ChainState| {
                !s.settled() || s.applied.iter().all(|&a| a == 1)
            }),
            Property::sometimes(DUPLICATE_SKIPPED, |_, s: &ChainState| s.skipped),
        ]
    }
}
