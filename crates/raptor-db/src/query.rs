//! The statement builders of the service: sqlx's (and its `QueryBuilder`, as [`Statement`]),
//! named and cached in session mode, unnamed in transaction mode ([`crate::mode`]). `crates/clippy.toml` refuses the sqlx originals (and their
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

/// A statement assembled from named pieces: each value is bound where its placeholder is
/// written ([`sqlx::QueryBuilder::push_bind`]), so no value can land on another's number. Build it
/// with [`built`]. The text must not depend on the values (only on the statement's shape), so
/// that the statement is prepared once per connection like the others.
pub type Statement<'args> = sqlx::QueryBuilder<'args, Postgres>;

/// An empty [`Statement`], starting with `sql`.
pub fn statement<'args>(sql: &str) -> Statement<'args> {
    sqlx::QueryBuilder::new(sql)
}

/// The query of a [`Statement`], named and cached in session mode, unnamed in transaction mode.
#[expect(
    clippy::disallowed_methods,
    reason = "the one wrapper the guard points to"
)]
pub fn built<'q>(statement: &'q mut Statement<'_>) -> Query<'q, Postgres, PgArguments> {
    statement.build().persistent(persistent())
}

/// Pushes `insert into <table> (<column>, …) values (<value>, …)` onto a [`Statement`], each
/// value written beside its column's name and bound where it lands, so two values of one type
/// cannot be swapped by a miscount:
///
/// ```
/// let mut sql = raptor_db::statement("");
/// raptor_db::push_insert!(&mut sql, "paper_orders", { id: 7_i32, symbol: "AAPL" });
/// assert_eq!(sql.sql(), "insert into paper_orders (id, symbol) values ($1, $2)");
/// ```
#[macro_export]
macro_rules! push_insert {
    ($sql:expr, $table:literal, { $($column:ident: $value:expr),+ $(,)? }) => {{
        let sql: &mut $crate::Statement<'_> = $sql;
        sql.push(concat!(
            "insert into ", $table, " (", $crate::__column_names!($($column),+), ") values ("
        ));
        let mut values = sql.separated(", ");
        $( values.push_bind($value); )+
        values.push_unseparated(")");
    }};
}

/// Pushes `unnest(<array>::<type>, …) as <alias>(<column>, …)` onto a [`Statement`], each array
/// written beside the name (and type) of the column it becomes:
///
/// ```
/// let mut sql = raptor_db::statement("select l.symbol from ");
/// raptor_db::push_unnest!(&mut sql, "l", {
///     leg_index: "smallint[]" = vec![0_i16, 1],
///     symbol: "text[]" = vec!["AAPL", "MSFT"],
/// });
/// assert_eq!(
///     sql.sql(),
///     "select l.symbol from unnest($1::smallint[], $2::text[]) as l(leg_index, symbol)"
/// );
/// ```
#[macro_export]
macro_rules! push_unnest {
    ($sql:expr, $alias:literal, { $($column:ident: $ty:literal = $value:expr),+ $(,)? }) => {{
        let sql: &mut $crate::Statement<'_> = $sql;
        sql.push("unnest(");
        let mut arrays = sql.separated(", ");
        $(
            arrays.push_bind($value);
            arrays.push_unseparated(concat!("::", $ty));
        )+
        sql.push(concat!(
            ") as ", $alias, "(", $crate::__column_names!($($column),+), ")"
        ));
    }};
}

/// `a, b, c` from the identifiers `a`, `b`, `c` (for [`push_insert!`] and [`push_unnest!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __column_names {
    ($first:ident $(, $rest:ident)*) => {
        concat!(stringify!($first) $(, ", ", stringify!($rest))*)
    };
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
        let mut built_in_transaction_mode = statement("select ");
        built_in_transaction_mode.push_bind(1);
        set_pool_mode(PoolMode::Transaction);
        assert!(!named(built(&mut built_in_transaction_mode)));
        set_pool_mode(PoolMode::Session);
        let mut built_in_session_mode = statement("select ");
        built_in_session_mode.push_bind(1);
        assert!(named(built(&mut built_in_session_mode)));
    }
}
