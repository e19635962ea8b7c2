//! The one integration-test binary: every test gets its own migrated database
//! (`#[sqlx::test]`), the real router, and real Postgres, through `helpers::TestApp::run`.

// What the tests stand on: the harness, the probe routes, a fake Stripe.
mod fake_stripe;
mod helpers;
mod probe;
mod smtp_sink;

// The behaviours.
mod auth;
mod behind_a_proxy;
mod billing;
mod cli;
mod conformance;
mod connection_edge;
mod connection_use;
mod deployment;
mod docs;
mod encryption;
mod errors;
mod examples;
mod gdpr;
mod idempotency;
mod mail;
mod mail_tls;
mod metrics;
mod openapi;
mod ops;
mod pool_mode;
mod profile;
mod retention;
mod settings;
mod sign_up;
mod store_failures;
mod support;
mod tls;
mod traces;
mod trading;
mod upgrade;
