//! A client span per SQL statement, for the exported traces: sqlx reports each statement it ran
//! as an event (target `sqlx::query`: the statement's text, how long it took, the rows), and
//! [`DbSpans`] turns that event into a span of the trace the statement ran in, backdated to when
//! the statement started. The span carries OpenTelemetry's database conventions, and only those
//! that describe the statement, never a value bound to it:
//!
//! - name: `{operation} {table}` (`INSERT paper_orders`), or the operation alone (`BEGIN`);
//! - `db.system.name` `postgresql`, `db.operation.name`, `db.collection.name` (the first table
//!   the operation writes or reads), `db.query.summary` (the name), and
//!   `db.response.returned_rows`.
//!
//! A statement that ran outside any exported span (a background job between its spans) makes no
//! span. Installed by [`crate::telemetry::init`] only when traces are exported.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{SpanKind, Tracer as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::trace::SdkTracer;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// The target of sqlx's per-statement events.
pub(crate) const SQLX_TARGET: &str = "sqlx::query";

/// The subscriber a [`DbSpans`] is part of, to reach the OpenTelemetry layer's span contexts:
/// set once the subscriber is installed ([`DispatchSlot::fill`]).
pub(crate) type DispatchSlot = Arc<OnceLock<tracing::dispatcher::WeakDispatch>>;

/// The layer: see the module's documentation.
pub(crate) struct DbSpans {
    tracer: SdkTracer,
    dispatch: DispatchSlot,
}

impl DbSpans {
    /// The layer and the slot to fill with the installed subscriber ([`fill`]).
    pub(crate) fn new(tracer: SdkTracer) -> (Self, DispatchSlot) {
        let dispatch = DispatchSlot::default();
        let layer = Self {
            tracer,
            dispatch: dispatch.clone(),
        };
        (layer, dispatch)
    }
}

/// Gives the layer the global subscriber, once it is installed. (A layer inside an `Option`, as
/// this one is, is not told of the subscriber it joins.)
pub(crate) fn fill(slot: &DispatchSlot) {
    tracing::dispatcher::get_default(|dispatch| {
        let _ = slot.set(dispatch.downgrade());
    });
}

impl<S> Layer<S> for DbSpans
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != SQLX_TARGET {
            return;
        }
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let Some(dispatch) = self.dispatch.get().and_then(|weak| weak.upgrade()) else {
            return;
        };
        let Some(parent) =
            tracing_opentelemetry::get_otel_context(&mut span.extensions_mut(), &dispatch)
        else {
            return;
        };
        let mut statement = Statement::default();
        event.record(&mut statement);
        let sql = if statement.text.trim().is_empty() {
            statement.summary.as_str()
        } else {
            statement.text.as_str()
        };
        let described = describe(sql);
        let ended = SystemTime::now();
        let started = ended
            .checked_sub(Duration::from_secs_f64(statement.elapsed_secs.max(0.0)))
            .unwrap_or(ended);
        let name = described.summary();
        let mut attributes = vec![
            KeyValue::new("db.system.name", "postgresql"),
            KeyValue::new("db.operation.name", described.operation.clone()),
            KeyValue::new("db.query.summary", name.clone()),
            KeyValue::new(
                "db.response.returned_rows",
                i64::try_from(statement.rows_returned).unwrap_or(i64::MAX),
            ),
        ];
        if let Some(table) = described.table {
            attributes.push(KeyValue::new("db.collection.name", table));
        }
        let mut exported = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(started)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        opentelemetry::trace::Span::end_with_timestamp(&mut exported, ended);
    }
}

/// What sqlx's event says of a statement.
#[derive(Default)]
struct Statement {
    summary: String,
    text: String,
    elapsed_secs: f64,
    rows_returned: u64,
}

impl Visit for Statement {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "summary" => value.clone_into(&mut self.summary),
            "db.statement" => value.clone_into(&mut self.text),
            _ => {}
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "elapsed_secs" {
            self.elapsed_secs = value;
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "rows_returned" {
            self.rows_returned = value;
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// A statement's operation and the table it is about.
#[derive(Debug, PartialEq, Eq)]
struct Described {
    operation: String,
    table: Option<String>,
}

impl Described {
    fn summary(&self) -> String {
        match &self.table {
            Some(table) => format!("{} {table}", self.operation),
            None => self.operation.clone(),
        }
    }
}

/// The operation of `sql` (its first keyword; for a `WITH`, the first `INSERT`, `UPDATE` or
/// `DELETE` of its parts, else `SELECT`) and the table that operation names (after `INTO`,
/// `UPDATE` or `FROM`). Only keywords and names are read: a statement's values are bound
/// parameters, never part of its text.
fn describe(sql: &str) -> Described {
    let words: Vec<String> = sql
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '"'))
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let first = words.first().map_or("", String::as_str);
    let writes = ["insert", "update", "delete"];
    let at = if first == "with" {
        words.iter().position(|w| writes.contains(&w.as_str()))
    } else {
        Some(0)
    };
    let Some(at) = at else {
        return Described {
            operation: "SELECT".to_owned(),
            table: table_after(&words, 0, "from"),
        };
    };
    let operation = words[at].to_ascii_uppercase();
    let table = match words[at].as_str() {
        "insert" => table_after(&words, at, "into"),
        "update" => words.get(at + 1).map(|t| name(t)),
        "delete" | "select" => table_after(&words, at, "from"),
        _ => None,
    };
    Described { operation, table }
}

/// The name after the first `keyword` from `at` on that is followed by a name (`only`
/// skipped; a subquery's `from (select …` looks further).
fn table_after(words: &[String], at: usize, keyword: &str) -> Option<String> {
    let not_names = ["select", "lateral", "unnest", "values", "with"];
    let mut from = at;
    loop {
        let found = words.iter().skip(from).position(|w| w == keyword)? + from;
        let next = words.iter().skip(found + 1).find(|w| *w != "only")?;
        if !not_names.contains(&next.as_str()) {
            return Some(name(next));
        }
        from = found + 1;
    }
}

fn name(word: &str) -> String {
    word.trim_matches('"').to_owned()
}

#[cfg(test)]
mod tests {
    use super::{describe, Described};

    fn described(sql: &str) -> (String, Option<String>) {
        let Described { operation, table } = describe(sql);
        (operation, table)
    }

    #[test]
    fn statements_are_named_by_operation_and_table() {
        let cases = [
            (
                "select t.user_id from api_tokens t left join users u on u.id = t.user_id",
                ("SELECT", Some("api_tokens")),
            ),
            (
                "insert into idempotency_keys (idem_key) values ($1) on conflict do nothing",
                ("INSERT", Some("idempotency_keys")),
            ),
            (
                "update idempotency_keys set status = 'completed' where id = $1",
                ("UPDATE", Some("idempotency_keys")),
            ),
            (
                "delete from idempotency_keys where id in (select id from idempotency_keys)",
                ("DELETE", Some("idempotency_keys")),
            ),
            (
                "with o as (insert into paper_orders (id) values ($1) returning id), \
                 legs as (insert into paper_order_legs select o.id from o) select 1",
                ("INSERT", Some("paper_orders")),
            ),
            (
                "with recent as (select * from paper_fills) select count(*) from recent",
                ("SELECT", Some("paper_fills")),
            ),
            ("BEGIN", ("BEGIN", None)),
            ("select 1", ("SELECT", None)),
            (
                "select x from (select id as x from paper_orders) o",
                ("SELECT", Some("paper_orders")),
            ),
            (
                "select * from only \"Quoted\" where x = $1",
                ("SELECT", Some("quoted")),
            ),
        ];
        for (sql, (operation, table)) in cases {
            assert_eq!(
                described(sql),
                (operation.to_owned(), table.map(str::to_owned)),
                "{sql}"
            );
        }
    }
}
