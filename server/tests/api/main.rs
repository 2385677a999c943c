//! Integration tests: the real server on port 0 against a real PostgreSQL, one fresh
//! database per test.

mod bad_input;
mod callback_outcomes;
mod callbacks;
mod card_secrecy;
mod cart;
mod checkout;
mod console_guard;
mod cross_site;
mod dead_letters;
mod event_chain_schema;
mod fn_properties;
mod foundation;
mod fulfillment;
mod headers;
mod helpers;
mod idempotency;
mod limits;
mod mailer;
mod no_500;
mod openapi;
mod operator;
mod orders;
mod outages;
mod outbox;
mod overlap;
mod payment_attempts;
mod payments;
mod readers;
mod reconcile;
mod reconcile_runs;
mod repeats;
mod sessions;
mod shop;
mod simultaneous_payments;
mod worker_faults;
