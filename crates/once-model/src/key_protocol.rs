//! The idempotency key protocol: one row per (scope, key), every transition one statement.
//!
//! Several clients send the same request under the same key and retry after a crash, a
//! failure or an "in progress" answer. Each action is one SQL statement (or one commit), so
//! its effect on the row is atomic and the checker explores every interleaving of them.
//!
//! A client may also ask to wait for a running request (`Prefer: wait`, docs/protocol.md):
//! it is woken when the row stops running under a valid lease (a notification, or the
//! fallback read), or its wait runs out and it is told "in progress".

use stateright::{Model, Property};

/// Name of the safety property that the business effect commits at most once.
pub const AT_MOST_ONCE: &str = "at most one completed execution per key";
/// Name of the safety property that only the current lease holder commits.
pub const NO_STALE_COMPLETION: &str = "a stale holder never completes";
/// Name of the sanity property that a completion is reachable at all.
pub const COMPLETES: &str = "the request completes";
/// Name of the sanity property that the fence is exercised (a stale completion is refused).
pub const STALE_REFUSED: &str = "a stale holder's completion is refused";
/// Name of the safety property that every answer a client is given (a waiter's included)
/// is the stored outcome of the execution that completed.
pub const ANSWERS_ARE_STORED: &str = "an answer is the stored outcome of the completed execution";
/// Name of the sanity property that a waiter is woken with the original's stored answer.
pub const WAITER_REPLAYED: &str = "a waiter is given the stored answer";
/// Name of the sanity property that a waiter whose original failed runs the request itself.
pub const WAITER_TOOK_OVER: &str = "a waiter takes over a failed or lapsed key";

/// What a waiting client does when it is woken (`Prefer: wait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WakeUp {
    /// Clients never wait: told "in progress" at once, they retry later.
    NoWaits,
    /// As implemented: the waiter reads the row and is answered as a repeat at that moment
    /// (the stored answer, or it claims a failed or lapsed key itself).
    ReadsTheRow,
    /// Broken: the waiter takes the notification as "the request it waited for completed"
    /// and answers with that request's outcome, without reading the row.
    TrustsTheNotice,
}

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
#[non_exhaustive]
pub struct KeyProtocol {
    /// How many clients send the request, each under the same key.
    pub clients: usize,
    /// How many claims each client makes at most (its first try and its retries).
    pub attempts: u8,
    /// How completion is fenced: [`CompletionGuard::Fenced`] as implemented, or a broken
    /// variant.
    pub guard: CompletionGuard,
    /// What a waiter does when woken: [`WakeUp::ReadsTheRow`] as implemented, no waits at
    /// all, or a broken variant.
    pub wake_up: WakeUp,
}

impl KeyProtocol {
    /// The protocol as implemented: completion fenced on the lease token, and waiters
    /// that read the row when woken.
    pub fn new(clients: usize, attempts: u8) -> Self {
        Self {
            clients,
            attempts,
            guard: CompletionGuard::Fenced,
            wake_up: WakeUp::ReadsTheRow,
        }
    }

    /// The same protocol with a different completion statement.
    pub fn with_guard(self, guard: CompletionGuard) -> Self {
        Self { guard, ..self }
    }

    /// The same protocol with waiters that do `wake_up` when woken.
    pub fn with_wake_up(self, wake_up: WakeUp) -> Self {
        Self { wake_up, ..self }
    }

    /// The clients that may ask to wait for the running request: those that would be told
    /// "in progress".
    fn waits(&self, s: &KeyState, actions: &mut Vec<KeyAction>) {
        if self.wake_up == WakeUp::NoWaits {
            return;
        }
        for (i, c) in s.clients.iter().enumerate() {
            if c.phase == Phase::Idle && c.attempts < self.attempts {
                actions.push(KeyAction::Wait(i));
            }
        }
    }

    /// Waiter `i` woken in state `s`, into `n`.
    fn wake(&self, s: &KeyState, n: &mut KeyState, i: usize) -> Option<()> {
        let Phase::Waiting(awaited) = s.clients[i].phase else {
            return None;
        };
        match (self.wake_up, s.row) {
            (WakeUp::TrustsTheNotice, _) => {
                n.clients[i].phase = Phase::Done;
                n.clients[i].answer = Some(awaited);
            }
            (_, Row::Completed) => {
                n.clients[i].phase = Phase::Done;
                n.clients[i].answer = s.stored;
                n.waiter_replayed = true;
            }
            // Failed, or a lapsed lease: the waiter's request takes the key over itself.
            (_, Row::Failed | Row::Processing { .. }) => {
                n.tokens += 1;
                n.row = Row::processing(n.tokens);
                n.clients[i].phase = Phase::Claimed(n.tokens);
                n.waiter_took_over = true;
            }
            _ => return None,
        }
        Some(())
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
    /// Asked to wait, and waits, for the running request that held this token when it
    /// arrived.
    Waiting(u8),
}

/// One client and the server process handling its current attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Client {
    /// Where it stands.
    pub phase: Phase,
    /// Requests sent so far (bounded by [`KeyProtocol::attempts`]).
    pub attempts: u8,
    /// The answer it was given: the token of the execution whose outcome it is.
    pub answer: Option<u8>,
}

/// A state of the model: the row, the clients, and what has been committed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// The token of the execution whose answer the row stores (the last completion).
    pub stored: Option<u8>,
    /// A waiter was given the stored answer.
    pub waiter_replayed: bool,
    /// A waiter took the key over and ran the request itself.
    pub waiter_took_over: bool,
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
    /// The row is running under a valid lease, and the client asked to wait: it waits.
    Wait(usize),
    /// A waiter is woken (a notification or the fallback read): the row no longer runs
    /// under a valid lease.
    Woken(usize),
    /// A waiter's wait runs out (or its process dies): it is told "in progress".
    WaitOut(usize),
}

impl Model for KeyProtocol {
    type State = KeyState;
    type Action = KeyAction;

    fn init_states(&self) -> Vec<KeyState> {
        let client = Client {
            phase: Phase::Idle,
            attempts: 0,
            answer: None,
        };
        vec![KeyState {
            row: Row::Absent,
            tokens: 0,
            clients: vec![client; self.clients],
            effects: 0,
            stale_commits: 0,
            refused: false,
            stored: None,
            waiter_replayed: false,
            waiter_took_over: false,
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
                Phase::Waiting(_) => {
                    if !matches!(
                        s.row,
                        Row::Processing {
                            lease_valid: true,
                            ..
                        }
                    ) {
                        actions.push(KeyAction::Woken(i));
                    }
                    actions.push(KeyAction::WaitOut(i));
                }
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
            self.waits(s, actions);
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
                n.clients[i].answer = s.stored;
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
                    n.stored = Some(t);
                    n.clients[i].phase = Phase::Done;
                    n.clients[i].answer = Some(t);
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
            KeyAction::Wait(i) => {
                n.clients[i].attempts += 1;
                n.clients[i].phase = Phase::Waiting(s.row.token()?);
            }
            KeyAction::Woken(i) => self.wake(s, &mut n, i)?,
            KeyAction::WaitOut(i) => n.clients[i].phase = Phase::Idle,
        }
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(AT_MOST_ONCE, |_, s: &KeyState| s.effects <= 1),
            Property::always(NO_STALE_COMPLETION, |_, s: &KeyState| s.stale_commits == 0),
            Property::sometimes(COMPLETES, |_, s: &KeyState| s.row == Row::Completed),
            Property::sometimes(STALE_REFUSED, |_, s: &KeyState| s.refused),
            Property::always(ANSWERS_ARE_STORED, |_, s: &KeyState| {
                let given = s.clients.iter().filter_map(|c| c.answer);
                given.into_iter().all(|a| s.stored == Some(a))
            }),
            Property::sometimes(WAITER_REPLAYED, |_, s: &KeyState| s.waiter_replayed),
            Property::sometimes(WAITER_TOOK_OVER, |_, s: &KeyState| s.waiter_took_over),
        ]
    }
}
