//! The idempotency key protocol: one row per (scope, key), every transition one statement.
//!
//! Several clients send the same request under the same key and retry after a crash, a
//! failure or an "in progress" answer. Each action is one SQL statement (or one commit), so
//! its effect on the row is atomic and the checker explores every interleaving of them.

use stateright::{Model, Property};

/// Name of the safety property that the business effect commits at most once.
pub const AT_MOST_ONCE: &str = "at most one completed execution per key";
/// Name of the safety property that only the current lease holder commits.
pub const NO_STALE_COMPLETION: &str = "a stale holder never completes";
/// Name of the sanity property that a completion is reachable at all.
pub const COMPLETES: &str = "the request completes";
/// Name of the sanity property that the fence is exercised (a stale completion is refused).
pub const STALE_REFUSED: &str = "a stale holder's completion is refused";

/// The `WHERE` clause of the completing `UPDATE`, i.e. how completion is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompletionGuard {
    /// The real statement: `WHERE lease_token = $mine AND state = 'processing'`.
    Fenced,
    /// Broken: `WHERE state = 'processing'`; any holder completes a processing row.
    StateOnly,
    /// Broken: `WHERE scope = $1 AND key = $2`; the holder trusts its lease blindly.
    KeyOnly,
}

/// The model: `clients` concurrent senders of one request, each making at most `attempts`
/// claims (the bound that keeps the state space finite).
#[derive(Clone, Debug)]
pub struct KeyProtocol {
    /// How many clients send the request, each under the same key.
    pub clients: usize,
    /// How many claims each client makes at most (its first try and its retries).
    pub attempts: u8,
    /// How completion is fenced: [`CompletionGuard::Fenced`] as implemented, or a broken
    /// variant.
    pub guard: CompletionGuard,
}

impl KeyProtocol {
    /// The protocol as implemented: completion fenced on the lease token.
    pub fn new(clients: usize, attempts: u8) -> Self {
        Self {
            clients,
            attempts,
            guard: CompletionGuard::Fenced,
        }
    }

    /// The same protocol with a different completion statement.
    pub fn with_guard(self, guard: CompletionGuard) -> Self {
        Self { guard, ..self }
    }

    fn admits(&self, row: Row, mine: u8) -> bool {
        match self.guard {
            CompletionGuard::Fenced => row == Row::processing(mine),
            CompletionGuard::StateOnly => matches!(row, Row::Processing { .. }),
            // The holder's own claim created the row, so it always exists.
            CompletionGuard::KeyOnly => true,
        }
    }
}

/// The key row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Row {
    /// No row yet: the next claim inserts it.
    Absent,
    /// A request holds the key. The statements that check the token do not look at
    /// `lease_valid`, only a takeover does.
    Processing {
        /// The holder's lease token (`lease_token`).
        token: u8,
        /// `locked_until > now()`: the lease has not expired.
        lease_valid: bool,
    },
    /// The request completed: its effect committed, with the stored answer.
    Completed,
    /// The request failed; the effect rolled back, and the next claim takes the row over.
    Failed,
}

impl Row {
    fn processing(token: u8) -> Self {
        Row::Processing {
            token,
            lease_valid: true,
        }
    }

    fn token(self) -> Option<u8> {
        match self {
            Row::Processing { token, .. } => Some(token),
            _ => None,
        }
    }
}

/// Where one client (with the server process handling its current attempt) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Between attempts, or given up once its attempts are spent.
    Idle,
    /// Holds the lease with this token; no effect written yet.
    Claimed(u8),
    /// Holds (or believes it holds) the lease and has written its effect, uncommitted.
    Working(u8),
    /// Has its answer: its own completion or the stored replay.
    Done,
}

/// One client and the server process handling its current attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Where it stands.
    pub phase: Phase,
    /// Claims made so far (bounded by [`KeyProtocol::attempts`]).
    pub attempts: u8,
}

/// A state of the model: the row, the clients, and what has been committed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyState {
    /// The key row.
    pub row: Row,
    /// Tokens handed out so far; the next claim gets `tokens + 1` (fresh, never reused).
    pub tokens: u8,
    /// Every client, in order: an action's index names one.
    pub clients: Vec<Client>,
    /// Committed business effects: the quantity the whole protocol exists to keep at one.
    pub effects: u8,
    /// Commits made by a holder whose token was not the row's current one.
    pub stale_commits: u8,
    /// A completion matched no row and rolled back (the fence did its job once).
    pub refused: bool,
}

/// One statement, named by its outcome where one statement has several (claim) so that a
/// counterexample reads as a story. The `usize` is the client's index in
/// [`KeyState::clients`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyAction {
    /// The `INSERT ... ON CONFLICT DO NOTHING` inserted: a fresh lease.
    Claim(usize),
    /// The reclaiming `UPDATE` took a failed row or an expired lease.
    TakeOver(usize),
    /// A live holder exists: the client is told "in progress" and retries later.
    InProgress(usize),
    /// The row is completed: the client gets the stored response.
    Replay(usize),
    /// The holder writes its effect in its still-open business transaction.
    Work(usize),
    /// The completing `UPDATE` then commit (1 row) or rollback (0 rows): the work's answer
    /// is definitive (`once_core::is_stored`: a 2xx, or any 4xx the work decided, a 409
    /// such as "room taken" included), stored with the key.
    Complete(usize),
    /// The fenced `UPDATE ... SET state = 'failed'`; the effect rolls back: the answer was
    /// transient (a 5xx, 408 or 429, or a 4xx the work marks as "not now").
    Fail(usize),
    /// The heartbeat `UPDATE ... SET locked_until` (only emitted when it revives a lease).
    Renew(usize),
    /// The process handling the attempt dies; its open transaction rolls back.
    Crash(usize),
    /// Time passes beyond `locked_until`.
    Expire,
}

impl Model for KeyProtocol {
    type State = KeyState;
    type Action = KeyAction;

    fn init_states(&self) -> Vec<KeyState> {
        let client = Client {
            phase: Phase::Idle,
            attempts: 0,
        };
        vec![KeyState {
            row: Row::Absent,
            tokens: 0,
            clients: vec![client; self.clients],
            effects: 0,
            stale_commits: 0,
            refused: false,
        }]
    }

    fn actions(&self, s: &KeyState, actions: &mut Vec<KeyAction>) {
        for (i, c) in s.clients.iter().enumerate() {
            match c.phase {
                Phase::Idle if c.attempts < self.attempts => actions.push(match s.row {
                    Row::Absent => KeyAction::Claim(i),
                    Row::Failed
                    | Row::Processing {
                        lease_valid: false, ..
                    } => KeyAction::TakeOver(i),
                    Row::Processing { .. } => KeyAction::InProgress(i),
                    Row::Completed => KeyAction::Replay(i),
                }),
                Phase::Idle | Phase::Done => {}
                Phase::Claimed(t) | Phase::Working(t) => {
                    actions.push(if c.phase == Phase::Claimed(t) {
                        KeyAction::Work(i)
                    } else {
                        KeyAction::Complete(i)
                    });
                    actions.push(KeyAction::Fail(i));
                    if s.row
                        == (Row::Processing {
                            token: t,
                            lease_valid: false,
                        })
                    {
                        actions.push(KeyAction::Renew(i));
                    }
                    actions.push(KeyAction::Crash(i));
                }
            }
        }
        if let Row::Processing {
            lease_valid: true, ..
        } = s.row
        {
            actions.push(KeyAction::Expire);
        }
    }

    fn next_state(&self, s: &KeyState, action: KeyAction) -> Option<KeyState> {
        let mut n = s.clone();
        match action {
            KeyAction::Claim(i) | KeyAction::TakeOver(i) => {
                n.tokens += 1;
                n.row = Row::processing(n.tokens);
                n.clients[i].attempts += 1;
                n.clients[i].phase = Phase::Claimed(n.tokens);
            }
            KeyAction::InProgress(i) => n.clients[i].attempts += 1,
            KeyAction::Replay(i) => {
                n.clients[i].attempts += 1;
                n.clients[i].phase = Phase::Done;
            }
            KeyAction::Work(i) => {
                let Phase::Claimed(t) = s.clients[i].phase else {
                    return None;
                };
                n.clients[i].phase = Phase::Working(t);
            }
            KeyAction::Complete(i) => {
                let Phase::Working(t) = s.clients[i].phase else {
                    return None;
                };
                if self.admits(s.row, t) {
                    // Effect and completion commit together.
                    n.effects += 1;
                    if s.row.token() != Some(t) {
                        n.stale_commits += 1;
                    }
                    n.row = Row::Completed;
                    n.clients[i].phase = Phase::Done;
                } else {
                    // 0 rows: roll back; the client retries and learns the outcome then.
                    n.refused = true;
                    n.clients[i].phase = Phase::Idle;
                }
            }
            KeyAction::Fail(i) => {
                let (Phase::Claimed(t) | Phase::Working(t)) = s.clients[i].phase else {
                    return None;
                };
                if s.row.token() == Some(t) {
                    n.row = Row::Failed;
                }
                n.clients[i].phase = Phase::Idle;
            }
            KeyAction::Renew(i) => {
                let (Phase::Claimed(t) | Phase::Working(t)) = s.clients[i].phase else {
                    return None;
                };
                if s.row.token() != Some(t) {
                    return None;
                }
                n.row = Row::processing(t);
            }
            // The row stays processing until its lease expires; the effect was never committed.
            KeyAction::Crash(i) => n.clients[i].phase = Phase::Idle,
            KeyAction::Expire => {
                let Row::Processing { token, .. } = s.row else {
                    return None;
                };
                n.row = Row::Processing {
                    token,
                    lease_valid: false,
                };
            }
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(AT_MOST_ONCE, |_, s: &KeyState| s.effects <= 1),
            Property::always(NO_STALE_COMPLETION, |_, s: &KeyState| s.stale_commits == 0),
            Property::sometimes(COMPLETES, |_, s: &KeyState| s.row == Row::Completed),
            Property::sometimes(STALE_REFUSED, |_, s: &KeyState| s.refused),
        ]
    }
}
