//! Quotes: read (share-locked for an order), set by operators as numbered events, and the queue
//! of the sweeps that judge resting orders against each event.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use raptor_engine::Quote;
use rust_decimal::Decimal;
use sqlx::PgConnection;

use crate::error::{ApiResult, ResultExt};

/// Quotes by symbol, and the newest event among them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Quotes {
    pub(crate) quotes: BTreeMap<String, Quote>,
    /// The largest `quotes.sequence` of the rows read. Read share-locked, it is the newest event
    /// of these symbols that committed before the read: a later event of one of them gets a
    /// larger number (its id is taken while it holds the row's lock, which waits for ours).
    pub(crate) sequence: i64,
}

/// Quotes for `symbols`, unlocked (an order locks its quotes with its account:
/// `lock_account_and_quotes`).
pub(crate) async fn quotes(conn: &mut PgConnection, symbols: &[String]) -> ApiResult<Quotes> {
    let rows: Vec<(String, Decimal, Decimal, i64)> =
        raptor_db::query_as("select symbol, bid, ask, sequence from quotes where symbol = any($1)")
            .bind(symbols)
            .fetch_all(conn)
            .await
            .context("load quotes")?;
    let sequence = rows.iter().map(|r| r.3).max().unwrap_or(0);
    Ok(Quotes {
        quotes: rows
            .into_iter()
            .map(|(symbol, bid, ask, _)| (symbol, Quote { bid, ask }))
            .collect(),
        sequence,
    })
}

/// The quotes of `symbols` as of quote event `event`: for each symbol, the latest quote whose
/// event is at or below `event` (a symbol without one then is left out, as unquoted). The
/// current quote is that quote unless a later event has moved it since (`quotes.sequence >
/// event`); then the event history has it. What a sweep judges a resting order against, so a
/// multi-leg order's fill names a moment whose quotes all existed together.
pub(crate) async fn quotes_as_of(
    conn: &mut PgConnection,
    symbols: &[String],
    event: i64,
) -> ApiResult<BTreeMap<String, Quote>> {
    let rows: Vec<(String, Decimal, Decimal)> = raptor_db::query_as(
        "select q.symbol, coalesce(e.bid, q.bid), coalesce(e.ask, q.ask)
           from quotes q
           left join lateral (
                select h.bid, h.ask from quote_events h
                 where h.symbol = q.symbol and h.id <= $2
                 order by h.id desc
                 limit 1) e on q.sequence > $2
          where q.symbol = any($1) and (q.sequence <= $2 or e.bid is not null)",
    )
    .bind(symbols)
    .bind(event)
    .fetch_all(conn)
    .await
    .context("load quotes as of an event")?;
    Ok(rows
        .into_iter()
        .map(|(symbol, bid, ask)| (symbol, Quote { bid, ask }))
        .collect())
}

/// A quote as stored, for reading.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct QuoteRow {
    pub(crate) symbol: String,
    pub(crate) bid: Decimal,
    pub(crate) ask: Decimal,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) sequence: i64,
}

/// The quote of `symbol`, if it has one.
pub(crate) async fn find_quote(
    conn: &mut PgConnection,
    symbol: &str,
) -> ApiResult<Option<QuoteRow>> {
    raptor_db::query_as(
        "select symbol, bid, ask, updated_at, sequence from quotes where symbol = $1",
    )
    .bind(symbol)
    .fetch_optional(conn)
    .await
    .context("find quote")
}

/// Sets a quote as a new event and queues a sweep for every account with a resting order on
/// the symbol, in one statement. The quote row is written first: its lock serialises the
/// updates of one symbol, and the event's id is taken while it is held, so the events of a
/// symbol are numbered in commit order. `at` is the event's time (the server's clock): its
/// sweeps judge as of then. Returns the event's id and the sweeps queued.
pub(crate) async fn set_quote_event(
    conn: &mut PgConnection,
    symbol: &str,
    bid: Decimal,
    ask: Decimal,
    updated_by: Option<i32>,
    at: DateTime<Utc>,
) -> ApiResult<(i64, i64)> {
    raptor_db::query(
        "insert into quotes (symbol, bid, ask, updated_by, updated_at) values ($1, $2, $3, $4, now())
         on conflict (symbol) do update
            set bid = excluded.bid, ask = excluded.ask, updated_by = excluded.updated_by,
                updated_at = now()",
    )
    .bind(symbol)
    .bind(bid)
    .bind(ask)
    .bind(updated_by)
    .execute(&mut *conn)
    .await
    .context("upsert quote")?;
    raptor_db::query_as(QUOTE_EVENT)
        .bind(symbol)
        .bind(bid)
        .bind(ask)
        .bind(at)
        .fetch_one(conn)
        .await
        .context("record quote event")
}

/// The statement that records a quote's event and queues its sweeps (`set_quote_event`): `$1`
/// symbol, `$2` bid, `$3` ask, `$4` the event's time. The accounts are found in `paper_orders`
/// alone, never by a join of the symbol's legs to the open orders: with statistics that lag the
/// book (a table never analysed, a book that grew faster than autoanalyze) the planner can nest
/// such a join, which is quadratic (20,000 resting orders on one symbol ran into the 10 s
/// statement timeout, so the quote could not be set). Simple orders are found by their own
/// symbol (`idx_paper_orders_open_symbol`), multi-leg orders (no symbol of their own) among the
/// open multi-leg orders by their legs' primary key: an `ARRAY` subquery is never turned into a
/// join, so each is one index lookup. Public for the test that checks the plan.
pub const QUOTE_EVENT: &str = "with e as (
        insert into quote_events (symbol, bid, ask, created_at) values ($1, $2, $3, $4)
        returning id),
     q as (
        update quotes set sequence = (select id from e) where symbol = $1),
     s as (
        insert into quote_sweeps (event_id, user_id)
        select distinct (select id from e), o.user_id
          from paper_orders o
         where o.status = 'new'
           and (o.symbol = $1
                or o.order_class = 'mleg'
                   and $1 = any (array(select l.symbol from paper_order_legs l
                                        where l.order_id = o.id)))
        returning 1)
     select (select id from e), (select count(*) from s)";

/// A pending sweep: judge `user_id`'s resting orders on `symbol` against event `event_id`.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Sweep {
    pub(crate) event_id: i64,
    pub(crate) user_id: i32,
    pub(crate) symbol: String,
    pub(crate) at: DateTime<Utc>,
}

/// Takes the next pending sweep (of `event_id` only, when given) after position `after` (the
/// `(event_id, user_id)` a worker did last; from the start without one), locked for the
/// caller's transaction and skipped by every other worker: the oldest event first, and never an
/// account's event while an older one of the same account is pending (so each account sees its
/// events in order). A worker moves forward from where it was, so it does not walk again over
/// the sweeps done since (their index entries stay until vacuum), and starts over from the
/// beginning when it reaches the end. `None` when nothing is ready past `after`.
pub(crate) async fn next_sweep(
    conn: &mut PgConnection,
    event_id: Option<i64>,
    after: Option<(i64, i32)>,
) -> ApiResult<Option<Sweep>> {
    raptor_db::query_as(
        "select s.event_id, s.user_id, e.symbol, e.created_at as at
           from quote_sweeps s
           join quote_events e on e.id = s.event_id
           -- The sweep's transaction commits without waiting for its WAL flush (see
           -- `sweep_next`); set here to save a round trip.
           cross join (select set_config('synchronous_commit', 'off', true)) c
          where ($1::bigint is null or s.event_id = $1)
            and (s.event_id, s.user_id) > ($2, $3)
            and s.not_before <= now()
            and not exists (select 1 from quote_sweeps p
                             where p.user_id = s.user_id and p.event_id < s.event_id)
          order by s.event_id, s.user_id
          limit 1
          for update of s skip locked",
    )
    .bind(event_id)
    .bind(after.map_or(i64::MIN, |a| a.0))
    .bind(after.map_or(i32::MIN, |a| a.1))
    .fetch_optional(conn)
    .await
    .context("next quote sweep")
}

/// Removes a sweep that was done (in the transaction that did it).
pub(crate) async fn finish_sweep(conn: &mut PgConnection, sweep: &Sweep) -> ApiResult<()> {
    raptor_db::query("delete from quote_sweeps where event_id = $1 and user_id = $2")
        .bind(sweep.event_id)
        .bind(sweep.user_id)
        .execute(conn)
        .await
        .context("finish quote sweep")?;
    Ok(())
}

/// Puts a sweep that failed back for later: a back-off that doubles with each attempt (from
/// one second, at most ten minutes), so a sweep that keeps failing does not hold up the others.
/// Its account's later events wait behind it (they must run in order).
pub(crate) async fn defer_sweep(conn: &mut PgConnection, sweep: &Sweep) -> ApiResult<()> {
    raptor_db::query(
        "update quote_sweeps
            set attempts = attempts + 1,
                not_before = now() + least(interval '10 minutes',
                                           interval '1 second' * power(2, least(attempts, 10)))
          where event_id = $1 and user_id = $2",
    )
    .bind(sweep.event_id)
    .bind(sweep.user_id)
    .execute(conn)
    .await
    .context("defer quote sweep")?;
    Ok(())
}

/// How many sweeps are pending (all, or of one event).
pub(crate) async fn pending_sweeps(
    conn: &mut PgConnection,
    event_id: Option<i64>,
) -> ApiResult<i64> {
    raptor_db::query_scalar(
        "select count(*) from quote_sweeps where $1::bigint is null or event_id = $1",
    )
    .bind(event_id)
    .fetch_one(conn)
    .await
    .context("pending quote sweeps")
}
