//! Set-up: the bench's users, quote updates, and resting orders written directly in SQL.

use std::borrow::Cow;

use anyhow::{anyhow, bail, Context};
use raptor_api::accounts::store as accounts;
use raptor_api::auth::Role;
use rust_decimal::Decimal;
use sqlx::PgPool;

use crate::http::{Answer, Req};
use crate::Bench;

pub(crate) struct BenchUser {
    pub(crate) id: i32,
    pub(crate) token: String,
}

/// A user with cash enough never to run out.
pub(crate) async fn user(pool: &PgPool, email: &str, role: Role) -> anyhow::Result<BenchUser> {
    let mut tx = pool.begin().await?;
    let day = std::time::Duration::from_secs(24 * 60 * 60);
    let created = accounts::create_user(&mut tx, email, role, Decimal::from(100_000_000), day)
        .await
        .map_err(|err| anyhow!("create_user {email}: {err}"))?;
    tx.commit().await?;
    Ok(BenchUser {
        id: created.user_id,
        token: created.token,
    })
}

impl Bench {
    pub(crate) async fn quote(&self, symbol: &str, bid: &str, ask: &str) -> anyhow::Result<Answer> {
        let body = format!(r#"{{"bid":"{bid}","ask":"{ask}"}}"#);
        let answer = self
            .http
            .send(Req {
                method: reqwest::Method::PUT,
                path: format!("/api/admin/quotes/{symbol}"),
                token: self.operator.clone(),
                key: None,
                body: Some(Cow::Owned(body)),
            })
            .await?;
        if answer.status != 200 {
            bail!("quote {symbol}: {} {}", answer.status, answer.body);
        }
        Ok(answer)
    }
}

/// Inserts `n` resting limit buys (gtc, 1 share at `limit`) for `user_id` directly in SQL; the
/// account's reservation totals follow through the trigger, as for orders placed over HTTP.
pub(crate) async fn seed_resting(
    pool: &PgPool,
    user_id: i32,
    symbol: &str,
    limit: &str,
    n: usize,
) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query(
        "insert into paper_orders (id, user_id, client_order_id, order_class, order_type,
                                   time_in_force, symbol, side, position_intent, qty,
                                   limit_price, status, reserved_cash)
         select gen_random_uuid(), $1, 'seed-' || g, 'simple', 'limit', 'gtc', $2, 'buy',
                'buy_to_open', 1, $3::numeric, 'new', $3::numeric
           from generate_series(1, $4) g",
    )
    .bind(user_id)
    .bind(symbol)
    .bind(limit)
    .bind(i32::try_from(n)?)
    .execute(&mut *tx)
    .await
    .context("seed resting orders")?;
    sqlx::query(
        "insert into paper_order_legs (order_id, leg_index, symbol, side, position_intent,
                                       ratio_qty, qty)
         select id, 0, symbol, side, position_intent, 1, qty
           from paper_orders where user_id = $1 and client_order_id like 'seed-%'",
    )
    .bind(user_id)
    .execute(&mut *tx)
    .await
    .context("seed legs")?;
    tx.commit().await?;
    Ok(())
}
