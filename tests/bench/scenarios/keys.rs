//! Scenario 9: a fresh key with `RAPTOR_BENCH_KEY_ROWS` rows in `idempotency_keys`, against a
//! fresh key at one client run right before those rows are written; and the rows themselves.

use std::time::Instant;

use anyhow::Context;
use raptor_integration_tests::new_key;
use sqlx::PgPool;

use crate::runner::Run;
use crate::{Bench, Settings, LEVELS};

/// Scenario 9: its baseline, then the key rows, then the run at each of [`LEVELS`].
pub(crate) async fn scenario(settings: &Settings, b: &Bench) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    // (9)'s baseline: scenario 2 at one client on the same tables right before the key rows
    // are written, so that the comparison is the key table's size alone (scenario 2 ran minutes
    // earlier, on smaller tables and in another minute of the machine).
    println!("(9) baseline: fresh key before the key rows are written ...");
    let run = b
        .closed("9 baseline, fresh key", 1, |user, _| {
            b.order(user, Some(new_key()))
        })
        .await?;
    runs.push(run);
    println!(
        "(9) fresh key with {} rows in idempotency_keys ...",
        settings.key_rows
    );
    fill_keys(&b.pool, settings.key_rows).await?;
    for &clients in &LEVELS {
        let run = b
            .closed("9 fresh key, big key table", clients, |user, _| {
                b.order(user, Some(new_key()))
            })
            .await?;
        runs.push(run);
    }
    Ok(runs)
}

/// Scenario 9's table: `rows` completed keys of another endpoint, as a long-running service
/// accumulates them within the retention.
pub(crate) async fn fill_keys(pool: &PgPool, rows: u64) -> anyhow::Result<()> {
    let started = Instant::now();
    let batch: i64 = 500_000;
    let mut done: i64 = 0;
    let rows = i64::try_from(rows)?;
    while done < rows {
        let n = batch.min(rows - done);
        sqlx::query(
            "insert into idempotency_keys
                (idem_key, scope_user_id, scope_endpoint, request_hash, status, attempt,
                 response_code, response_body, expires_at, completed_at)
             select gen_random_uuid()::text, null, 'POST /bench/filler', md5(g::text),
                    'completed', gen_random_uuid(), 201, '{\"filler\": true}',
                    now() + interval '1 day', now()
               from generate_series(1, $1) g",
        )
        .bind(n)
        .execute(pool)
        .await
        .context("fill idempotency_keys")?;
        done += n;
    }
    sqlx::query("vacuum analyze idempotency_keys")
        .execute(pool)
        .await
        .context("vacuum")?;
    println!(
        "    {rows} rows in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
