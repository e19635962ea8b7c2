//! The statement builders of the service: sqlx's, named and cached in session mode, unnamed in
//! transaction mode ([`crate::mode`]). `crates/clippy.toml` refuses the sqlx originals (and their
//! `_with` forms and `raw_sql`) everywhere else in the service crates.

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::{FromRow, Postgres};

use crate::mode::{pool_mode, PoolMode};

fn persistent() -> bool {
    pool_mode() == PoolMode::Session
}

/// [`sqlx::query()`], named and cached in session mode, unnamed in transaction mode.
#[expect(
    clippy::disallowed_methods,
    reason = "the one wrapper the guard points to"
)]
pub fn query(sql: &str) -> Query<'_, Postgres, PgArguments> {
    sqlx::query(sql).persistent(persistent())
}

/// [`sqlx::query_as()`], named and cached in session mode, unnamed in transaction mode.
#[expect(
    clippy::disallowed_methods,
    reason = "the one wrapper the guard points to"
)]
pub fn query_as<'q, O>(sql: &'q str) -> QueryAs<'q, Postgres, O, PgArguments>
where
    O: for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_as(sql).persistent(persistent())
}

/// [`sqlx::query_scalar()`], named and cached in session mode, unnamed in transaction mode.
#[expect(
    clippy::disallowed_methods,
    reason = "the one wrapper the guard points to"
)]
pub fn query_scalar<'q, O>(sql: &'q str) -> QueryScalar<'q, Postgres, O, PgArguments>
where
    (O,): for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_scalar(sql).persistent(persistent())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::set_pool_mode;
    use sqlx::Execute;

    fn named<'q>(statement: impl Execute<'q, Postgres>) -> bool {
        statement.persistent()
    }

    #[test]
    fn statements_are_named_only_in_session_mode() {
        // The only test of this crate that sets the process-wide mode.
        assert_eq!(pool_mode(), PoolMode::Session);
        assert!(named(query("select 1")));
        set_pool_mode(PoolMode::Transaction);
        assert!(!named(query("select 1")));
        assert!(!named(query_scalar::<i32>("select 1")));
        assert!(!named(query_as::<(i32,)>("select 1")));
        set_pool_mode(PoolMode::Session);
        assert!(named(query_as::<(i32,)>("select 1")));
        assert!(named(query_scalar::<i32>("select 1")));
    }
}
