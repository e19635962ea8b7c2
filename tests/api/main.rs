//! The one integration-test binary: every test gets its own migrated database
//! (`#[sqlx::test]`), the real router, and real Postgres.

mod billing;
mod conformance;
mod docs;
mod encryption;
mod fake_stripe;
mod foundation;
mod hardening;
mod helpers;
mod idempotency;
mod onboarding;
mod openapi;
mod pool_mode;
mod probe;
mod retention;
mod store_failures;
mod trading;
