//! The one integration-test binary: every test gets its own migrated database
//! (`#[sqlx::test]`), the real router, and real Postgres.

mod auth;
mod billing;
mod cli;
mod docs;
mod encryption;
mod errors;
mod fake_stripe;
mod gdpr;
mod helpers;
mod idempotency;
mod openapi;
mod ops;
mod pool_mode;
mod probe;
mod profile;
mod retention;
mod sign_up;
mod store_failures;
mod trading;
