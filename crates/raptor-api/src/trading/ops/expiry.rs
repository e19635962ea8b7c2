//! Expiry: day orders at the session close, orders on options at their contract's last close,
//! and option positions settled at that close (worthless or in cash, the engine's arithmetic).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use raptor_engine::{AccountState, Position, Settlement};
use serde_json::json;
use sqlx::{PgConnection, PgPool};

use crate::audit::{self, AuditAction, AuditEvent};
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::trading::desk::Desk;
use crate::trading::store;

/// Accounts swept per transaction by `raptor orders expire` and the schedule.
const ACCOUNTS_PER_SWEEP: i64 = 100;

/// What an expiry pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expired {
    /// Open orders expired.
    pub orders: usize,
    /// Option positions settled.
    pub settled: usize,
    /// Expired option positions left open because their underlying has no quote (retried on
    /// the next pass).
    pub awaiting_quote: usize,
}

impl std::ops::AddAssign for Expired {
    fn add_assign(&mut self, other: Self) {
        self.orders += other.orders;
        self.settled += other.settled;
        self.awaiting_quote += other.awaiting_quote;
    }
}

/// Expires what stopped being good by `now` on `user_id`'s account, which the caller has
/// locked: first the open orders (day orders at the session close, orders on options at their
/// last close), freeing their reservations, then the option positions past their last close,
/// settled at their underlying's quote. Each expiry and settlement is audited, in the caller's
/// transaction.
pub(crate) async fn expire_due(
    conn: &mut PgConnection,
    user_id: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<Expired> {
    let expired = store::expire_due(conn, user_id, now).await?;
    for order in &expired {
        let reason = if order.time_in_force == "day" {
            "session_close"
        } else {
            "contract_expiry"
        };
        audit::record(
            conn,
            AuditEvent::new(
                Some(order.user_id),
                AuditAction::OrderExpired,
                json!({ "order_id": order.id, "reason": reason,
                        "expires_at": order.expires_at }),
            ),
        )
        .await
        .context("audit expiry")?;
    }
    let mut done = settle_expired(conn, user_id, now).await?;
    done.orders = expired.len();
    Ok(done)
}

/// Settles `user_id`'s option positions past their last close (the account is locked by the
/// caller, so a second pass, here or on another replica, waits and then finds them flat).
async fn settle_expired(
    conn: &mut PgConnection,
    user_id: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<Expired> {
    let through = raptor_engine::expiry::expired_through(now);
    let rows = store::expiring_positions(conn, user_id, through).await?;
    if rows.is_empty() {
        return Ok(Expired::default());
    }
    // Each position settles at its underlying's last quote at or before its contract's last
    // close (`store::quotes_at_close`): one engine pass per close, with that close's quotes.
    let mut by_close: BTreeMap<Option<DateTime<Utc>>, AccountState> = BTreeMap::new();
    for row in rows {
        let close = raptor_engine::Instrument::parse(&row.symbol)
            .ok()
            .and_then(|instrument| instrument.expiry())
            .and_then(raptor_engine::calendar::last_trading_close);
        by_close
            .entry(close)
            .or_default()
            .positions
            .insert(row.symbol.clone(), Position::from(row));
    }
    let mut wanted: Vec<(String, Option<DateTime<Utc>>)> = by_close
        .iter()
        .flat_map(|(close, account)| {
            account
                .positions
                .keys()
                .filter_map(|symbol| raptor_engine::Instrument::parse(symbol).ok())
                .map(|instrument| (instrument.underlying().to_owned(), *close))
        })
        .collect();
    wanted.sort();
    wanted.dedup();
    let mut quotes: BTreeMap<Option<DateTime<Utc>>, BTreeMap<String, raptor_engine::Quote>> =
        BTreeMap::new();
    for (root, close, quote) in store::quotes_at_close(conn, &wanted).await? {
        quotes.entry(close).or_default().insert(root, quote);
    }
    let mut run = raptor_engine::ExpiryRun::default();
    for (close, account) in &by_close {
        let none = BTreeMap::new();
        let at_close = quotes.get(close).unwrap_or(&none);
        let part = raptor_engine::expiry::settle_expired(account, at_close, now);
        run.settlements.extend(part.settlements);
        run.awaiting_quote.extend(part.awaiting_quote);
    }
    if !run.awaiting_quote.is_empty() {
        metrics::counter!("raptor_option_expiry_awaiting_quote_total")
            .increment(run.awaiting_quote.len() as u64);
        tracing::warn!(
            user.id = user_id,
            symbols = ?run.awaiting_quote,
            "expired option positions wait for their underlying's quote"
        );
    }
    if !run.settlements.is_empty() {
        let settled = store::settle_positions(conn, user_id, &run.settlements, now).await?;
        if settled != run.settlements.len() {
            // A position moved under the account lock: nothing of this pass may commit.
            return Err(ApiError::Internal(anyhow::anyhow!(
                "settled {settled} of {} expired positions",
                run.settlements.len()
            )));
        }
        for settlement in &run.settlements {
            audit::record(conn, settlement_event(user_id, settlement))
                .await
                .context("audit settlement")?;
        }
        metrics::counter!("raptor_option_expiry_settlements_total")
            .increment(run.settlements.len() as u64);
    }
    Ok(Expired {
        orders: 0,
        settled: run.settlements.len(),
        awaiting_quote: run.awaiting_quote.len(),
    })
}

/// The `position.expired` audit row of a settlement.
fn settlement_event(user_id: i32, s: &Settlement) -> AuditEvent {
    AuditEvent::new(
        Some(user_id),
        AuditAction::PositionExpired,
        json!({
            "symbol": s.symbol,
            "qty": s.qty.to_string(),
            "avg_entry_price": s.avg_entry_price.to_string(),
            "outcome": s.outcome.as_str(),
            "underlying": s.underlying,
            "underlying_mid": s.underlying_mid.normalize().to_string(),
            "settlement_price": s.intrinsic.normalize().to_string(),
            "cash_delta": s.cash_delta.to_string(),
            "realized_pnl": s.realized_pnl.to_string(),
        }),
    )
}

/// One sweep of every account's due orders and expired positions, [`ACCOUNTS_PER_SWEEP`]
/// accounts at a time (each batch its own transaction, so it never holds many locks):
/// `raptor orders expire` and the schedule.
pub(crate) async fn expire_orders(db: &PgPool, desk: &Desk) -> ApiResult<Expired> {
    let mut total = Expired::default();
    let mut after = 0;
    loop {
        let now = desk.now();
        let through = raptor_engine::expiry::expired_through(now);
        let mut tx = raptor_db::begin(db).await.context("begin")?;
        // Account by account, each locked first: the lock order of the book (an order writer
        // holds its account's row before any of its orders, and the reservation trigger
        // updates that row), so the sweep cannot deadlock with orders or quote updates. An
        // account another transaction holds is skipped: touching it expires its orders anyway.
        // The pass moves forward by account id, so accounts whose positions wait for a quote
        // (still due after their turn) are visited once per sweep.
        let accounts =
            store::lock_accounts_with_due(&mut tx, now, through, after, ACCOUNTS_PER_SWEEP).await?;
        for &user_id in &accounts {
            total += expire_due(&mut tx, user_id, now).await?;
        }
        tx.commit().await.context("commit expiry")?;
        match accounts.last() {
            Some(&last)
                if i64::try_from(accounts.len()).unwrap_or(i64::MAX) >= ACCOUNTS_PER_SWEEP =>
            {
                after = last;
            }
            _ => return Ok(total),
        }
    }
}

/// Expires the caller's due orders and settles its expired positions before a read, so reads
/// never show a dead order as open or an expired contract as held. Usually one cheap indexed
/// look; when there is something to do, the account is locked first (the book's lock order).
pub(crate) async fn expire_for_read(db: &PgPool, desk: &Desk, user_id: i32) -> ApiResult<()> {
    let now = desk.now();
    let through = raptor_engine::expiry::expired_through(now);
    let mut conn = raptor_db::conn(db).await.context("acquire")?;
    let due = store::has_due(&mut conn, user_id, now, through).await?;
    conn.finish().await.context("finish")?;
    if !due {
        return Ok(());
    }
    let mut tx = raptor_db::begin(db).await.context("begin")?;
    store::lock_account(&mut tx, user_id).await?;
    expire_due(&mut tx, user_id, now).await?;
    tx.commit().await.context("commit expiry")?;
    Ok(())
}
