//! The repeats' entries, off the answer's path. A repeat is answered with one read (docs/
//! design.md, "Repeats cost one read"); writing its entry there would add a write, on one
//! hot row, to every retry of a storm. So a repeat is only noted here, in memory, and a
//! writer folds what was noted in the last [`FLUSH_EVERY`] into counts per key, kind and
//! minute and adds them with one statement (migration 0012 keeps one row per key, kind and
//! minute, whichever instance writes).
//!
//! What this gives up, knowingly: a repeat's entry appears up to [`FLUSH_EVERY`] after its
//! answer, and a crash loses the notes of that last moment (repeats that changed nothing;
//! never anything a request did); a graceful stop writes them ([`RepeatWriter::finish`]).
//! When the writer falls behind, notes past [`CAPACITY`] are dropped and counted in the
//! log, never waited for.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use chrono::{DateTime, DurationRound, Utc};
use once_axum::Repeat;
use once_core::KeyedOperation;
use sqlx::PgPool;
use tokio::{sync::mpsc, task::JoinHandle};
use uuid::Uuid;

use super::{answer_words, operation_words, order_of};

/// How long notes gather before they are written.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How many notes may wait for the writer.
const CAPACITY: usize = 10_000;

/// Where repeats are noted. Cheap to clone; the writer ends once every clone is dropped,
/// after writing what is left.
#[derive(Clone)]
pub struct RepeatLog {
    notes: mpsc::Sender<Note>,
    dropped: Arc<AtomicU64>,
}

/// The writer's task: awaited at a graceful stop, once every [`RepeatLog`] is dropped.
pub struct RepeatWriter(JoinHandle<()>);

impl RepeatWriter {
    /// Waits up to `within` for the writer to write what was noted and end.
    pub async fn finish(self, within: Duration) {
        if tokio::time::timeout(within, self.0).await.is_err() {
            tracing::warn!("the journal's last repeat entries were not written before the stop");
        }
    }
}

struct Note {
    scope: String,
    key: String,
    order_id: Option<Uuid>,
    kind: &'static str,
    summary: String,
    at: DateTime<Utc>,
}

/// The repeats of one key, of one kind, in one minute, as one batch counted them.
struct Folded {
    order_id: Option<Uuid>,
    summary: String,
    first_at: DateTime<Utc>,
    last_at: DateTime<Utc>,
    count: i32,
}

impl RepeatLog {
    /// A log, and its writer started on the runtime.
    pub fn start(db: PgPool) -> (Self, RepeatWriter) {
        let (notes, received) = mpsc::channel(CAPACITY);
        let writer = RepeatWriter(tokio::spawn(run_writer(db, received)));
        let dropped = Arc::default();
        (Self { notes, dropped }, writer)
    }

    /// Notes a repeat answered from the key table; never waits.
    pub fn note(&self, at: KeyedOperation<'_>, repeat: Repeat<'_>) {
        let (kind, answer, stored) = match repeat {
            Repeat::Replay(stored) => (
                "replay",
                format!("{}, replayed", answer_words(stored)),
                Some(stored),
            ),
            Repeat::InProgress => ("in_progress", "409 request-in-progress".to_owned(), None),
            Repeat::KeyReused => ("key_reused", "422 idempotency-key-reused".to_owned(), None),
            _ => return,
        };
        let order_id = order_of(at.operation, stored);
        // A repeat about no order is no story's, save a 409 while an order is being made
        // (found through its key once the order exists).
        if order_id.is_none() && !matches!(repeat, Repeat::InProgress) {
            return;
        }
        self.send(at, order_id, kind, answer);
    }

    /// Notes a key reused on `order`, which the caller found the key holds (a checkout key
    /// the cart has moved past, sent again with other details): part of the order's story,
    /// though the refusal's answer names no order.
    pub fn note_reused_on(&self, at: KeyedOperation<'_>, order: Uuid) {
        let answer = "422 idempotency-key-reused".to_owned();
        self.send(at, Some(order), "key_reused", answer);
    }

    fn send(
        &self,
        at: KeyedOperation<'_>,
        order_id: Option<Uuid>,
        kind: &'static str,
        answer: String,
    ) {
        let note = Note {
            scope: at.scope.to_owned(),
            key: at.key.as_str().to_owned(),
            order_id,
            kind,
            summary: format!("{} answered {answer}", operation_words(at.operation)),
            at: Utc::now(),
        };
        if self.notes.try_send(note).is_err() {
            // Said once a thousand, so that a storm the writer cannot keep up with does
            // not flood the log as well.
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped % 1000 == 1 {
                tracing::warn!(
                    dropped,
                    "the journal's repeat writer is behind; repeats' entries were dropped"
                );
            }
        }
    }
}

async fn run_writer(db: PgPool, mut received: mpsc::Receiver<Note>) {
    while let Some(first) = received.recv().await {
        tokio::time::sleep(FLUSH_EVERY).await;
        let mut notes = vec![first];
        while let Ok(note) = received.try_recv() {
            notes.push(note);
        }
        let folded = fold(notes);
        let mut written = write(&db, &folded).await;
        if written.as_ref().is_err_and(is_deadlock) {
            // Another instance's batch held a row this one needed, and lost nothing: again.
            written = write(&db, &folded).await;
        }
        if let Err(e) = written {
            tracing::warn!(error = %e, "the journal's repeat entries of a moment were not written");
        }
    }
}

fn is_deadlock(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "40P01")
}

type FoldKey = (String, String, &'static str, DateTime<Utc>);

/// One count per key, kind and minute (one statement may not touch a row twice), in the
/// order of their keys: every instance locks the rows it adds to in that same order, so two
/// writers never wait on each other in a circle.
fn fold(notes: Vec<Note>) -> BTreeMap<FoldKey, Folded> {
    let mut folded: BTreeMap<FoldKey, Folded> = BTreeMap::new();
    for note in notes {
        let minute = note
            .at
            .duration_trunc(chrono::TimeDelta::minutes(1))
            .unwrap_or(note.at);
        folded
            .entry((note.scope, note.key, note.kind, minute))
            .and_modify(|f| {
                f.count += 1;
                f.first_at = f.first_at.min(note.at);
                f.last_at = f.last_at.max(note.at);
                f.order_id = f.order_id.or(note.order_id);
            })
            .or_insert(Folded {
                order_id: note.order_id,
                summary: note.summary,
                first_at: note.at,
                last_at: note.at,
                count: 1,
            });
    }
    folded
}

async fn write(db: &PgPool, folded: &BTreeMap<FoldKey, Folded>) -> Result<(), sqlx::Error> {
    let mut columns = Columns::default();
    for ((scope, key, kind, minute), f) in folded {
        columns.scopes.push(scope.clone());
        columns.keys.push(key.clone());
        columns.kinds.push((*kind).to_owned());
        columns.minutes.push(*minute);
        columns.orders.push(f.order_id);
        columns.summaries.push(f.summary.clone());
        columns.firsts.push(f.first_at);
        columns.lasts.push((f.count > 1).then_some(f.last_at));
        columns.counts.push(f.count);
    }
    let mut tx = db.begin().await?;
    // Entries of repeats that changed nothing: not worth a wait for the disk.
    sqlx::query!("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    // The order only if it is the session's, as for a completed request (`journal::request`):
    // a repeat naming someone else's order is no story's. Rows in the batch's order (above).
    // chrono, not the `time` crate sqlx would pick by default (see operator::pages).
    sqlx::query!(
        r#"INSERT INTO order_journal (order_id, kind, summary, scope_tag, idempotency_key,
                                      fold_minute, at, last_at, repeats)
           SELECT o.id, u.kind, u.summary, journal_scope_tag(u.scope), u.key, u.minute,
                  u.first_at, u.last_at, u.n
             FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::uuid[],
                         $6::text[], $7::timestamptz[], $8::timestamptz[], $9::int[])
                  WITH ORDINALITY
                  AS u (scope, key, kind, minute, order_id, summary, first_at, last_at, n, i)
             LEFT JOIN orders o ON o.id = u.order_id AND o.session_id = u.scope
            WHERE o.id IS NOT NULL OR u.order_id IS NULL
            ORDER BY u.i
           ON CONFLICT (scope_tag, idempotency_key, kind, fold_minute) WHERE fold_minute IS NOT NULL
           DO UPDATE SET repeats = order_journal.repeats + EXCLUDED.repeats,
                         at = least(order_journal.at, EXCLUDED.at),
                         last_at = greatest(coalesce(order_journal.last_at, order_journal.at),
                                            coalesce(EXCLUDED.last_at, EXCLUDED.at)),
                         order_id = coalesce(order_journal.order_id, EXCLUDED.order_id)"#,
        &columns.scopes,
        &columns.keys,
        &columns.kinds,
        &columns.minutes as &[DateTime<Utc>],
        &columns.orders as &[Option<Uuid>],
        &columns.summaries,
        &columns.firsts as &[DateTime<Utc>],
        &columns.lasts as &[Option<DateTime<Utc>>],
        &columns.counts,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// A batch as the statement's arrays.
#[derive(Default)]
struct Columns {
    scopes: Vec<String>,
    keys: Vec<String>,
    kinds: Vec<String>,
    minutes: Vec<DateTime<Utc>>,
    orders: Vec<Option<Uuid>>,
    summaries: Vec<String>,
    firsts: Vec<DateTime<Utc>>,
    lasts: Vec<Option<DateTime<Utc>>>,
    counts: Vec<i32>,
}
