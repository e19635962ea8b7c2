//! The one integration-test binary: every test gets its own migrated database
//! (`#[sqlx::test]`), the real router, and real Postgres.

mod foundation;
mod helpers;
mod idempotency;
mod openapi;
mod probe;
mod trading;
