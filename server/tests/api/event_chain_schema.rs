//! The event chain's tables exist twice: in the shop's migration history and in the
//! once-events crate's own migration. Both must leave the same schema, or the crate's
//! checked statements (and its tests) would describe tables the shop does not have.

use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

use crate::helpers::{admin_url, TestDatabase};

/// A database with nothing in it, and the handle that drops it.
async fn empty_db() -> (PgPool, std::sync::Arc<TestDatabase>) {
    let name = format!("once_test_{}", Uuid::new_v4().simple());
    let database = TestDatabase::named(&name);
    let mut admin = PgConnection::connect(&format!("{}/postgres", admin_url()))
        .await
        .expect("admin connection");
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut admin)
        .await
        .expect("database created");
    let pool = PgPool::connect(&format!("{}/{name}", admin_url()))
        .await
        .expect("connection");
    (pool, database)
}

/// The schema of `tables` as lines of text, one list per kind of object, sorted.
async fn schema(db: &PgPool, tables: &[String]) -> [Vec<String>; 4] {
    let lines = |sql: &'static str| async move {
        sqlx::query_scalar::<_, String>(sql)
            .bind(tables)
            .fetch_all(db)
            .await
            .expect(sql)
    };
    [
        lines(
            "SELECT format('%s.%s #%s %s nullable=%s default=%s', table_name, column_name,
                           ordinal_position, data_type, is_nullable, column_default)
               FROM information_schema.columns
              WHERE table_schema = 'public' AND table_name = ANY($1) ORDER BY 1",
        )
        .await,
        lines(
            "SELECT format('%s %s: %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
               FROM pg_constraint WHERE conrelid::regclass::text = ANY($1) ORDER BY 1",
        )
        .await,
        lines(
            "SELECT indexdef FROM pg_indexes
              WHERE schemaname = 'public' AND tablename = ANY($1) ORDER BY 1",
        )
        .await,
        // The triggers, and the functions they run.
        lines(
            "SELECT pg_get_triggerdef(t.oid) || E'\\n' || pg_get_functiondef(t.tgfoid)
               FROM pg_trigger t
              WHERE NOT t.tgisinternal AND t.tgrelid::regclass::text = ANY($1) ORDER BY 1",
        )
        .await,
    ]
}

#[tokio::test]
async fn the_crates_migration_and_the_shops_leave_the_event_chain_tables_identical() {
    let (by_crate, _crate_db) = empty_db().await;
    once_events::MIGRATOR.run(&by_crate).await.unwrap();
    let (by_shop, _shop_db) = empty_db().await;
    server::db::migrate(&by_shop).await.unwrap();

    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables
          WHERE schemaname = 'public' AND tablename <> '_sqlx_migrations' ORDER BY 1",
    )
    .fetch_all(&by_crate)
    .await
    .unwrap();
    assert_eq!(
        tables,
        [
            "bus_consumers",
            "bus_deliveries",
            "bus_messages",
            "consumed_events",
            "dead_letters",
            "outbox_events"
        ]
    );
    let by_crate = schema(&by_crate, &tables).await;
    // The order journal's triggers (`*_journal*`) are the shop's watch on these tables, not
    // part of their schema: the crate's code and the shop's behave the same with or without.
    let by_shop: Vec<Vec<String>> = schema(&by_shop, &tables)
        .await
        .into_iter()
        .map(|lines| {
            lines
                .into_iter()
                .filter(|l| !l.contains("_journal"))
                .collect()
        })
        .collect();
    assert!(
        by_crate.iter().all(|lines| !lines.is_empty()),
        "the catalog was read"
    );
    let kinds = [
        "columns",
        "constraints",
        "indexes",
        "triggers and their functions",
    ];
    let differences: Vec<String> = kinds
        .iter()
        .zip(by_crate.iter().zip(&by_shop))
        .flat_map(|(kind, (by_crate, by_shop))| {
            let only = |these: &[String], those: &[String], side: &str| {
                these
                    .iter()
                    .filter(|line| !those.contains(line))
                    .map(|line| format!("{kind}, only by the {side}: {line}"))
                    .collect::<Vec<_>>()
            };
            [
                only(by_crate, by_shop, "crate"),
                only(by_shop, by_crate, "shop"),
            ]
            .concat()
        })
        .collect();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
