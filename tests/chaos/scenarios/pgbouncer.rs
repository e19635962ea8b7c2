//! 5. PgBouncer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::Connection;
use tokio::task::JoinSet;

use raptor_integration_tests::new_key;
use raptor_integration_tests::sse::{Item, Parser};

use crate::env::{self, Answer, Bouncer, Http, Replica};

use super::{Outcome, RowLock, World};

/// Roles with the session settings the replicas need behind a transaction pooler.
pub(crate) async fn prepare_roles(world: &World) -> anyhow::Result<()> {
    // The store role's timeouts: what the service derives from its store timeout.
    let half =
        raptor_db::StoreBudget::new(Duration::from_millis(env::STORE_TIMEOUT_MS)).session_ms();
    for sql in [
        "do $$ begin
           if not exists (select 1 from pg_roles where rolname = 'raptor') then create role raptor login; end if;
           if not exists (select 1 from pg_roles where rolname = 'raptor_idem') then create role raptor_idem login; end if;
         end $$",
        "grant all on all tables in schema public to raptor, raptor_idem",
        "grant all on all sequences in schema public to raptor, raptor_idem",
        &format!("alter role raptor set lock_timeout = '{}ms'", env::LOCK_TIMEOUT_MS),
        &format!("alter role raptor set statement_timeout = '{}ms'", env::STATEMENT_TIMEOUT_MS),
        "alter role raptor_idem set synchronous_commit = off",
        &format!("alter role raptor_idem set lock_timeout = '{half}ms'"),
        &format!("alter role raptor_idem set statement_timeout = '{half}ms'"),
    ] {
        sqlx::query(sql).execute(&world.db).await.with_context(|| sql.to_owned())?;
    }
    Ok(())
}

pub(crate) async fn bouncer_replicas(
    world: &World,
    bouncer: &Bouncer,
    pool_mode: &str,
) -> anyhow::Result<Vec<Replica>> {
    let mut replicas = Vec::new();
    for i in 0..3 {
        let name = format!("replica-bouncer-{pool_mode}-{i}");
        replicas.push(bouncer_replica(world, bouncer, &name, pool_mode, &[]).await?);
    }
    Ok(replicas)
}

/// One replica through `bouncer` (roles carry the settings, the listener has its own session),
/// with `extra` environment (an empty value removes a variable).
async fn bouncer_replica(
    world: &World,
    bouncer: &Bouncer,
    name: &str,
    pool_mode: &str,
    extra: &[(&str, String)],
) -> anyhow::Result<Replica> {
    let mut vars = vec![
        ("IDEMPOTENCY_STORE_DATABASE_URL", bouncer.url("raptor_idem")),
        ("RAPTOR_DB_SESSION_SETTINGS", "role".to_owned()),
        ("RAPTOR_DB_POOL_MODE", pool_mode.to_owned()),
        // The trade-updates listener's own session, past the pooler.
        ("RAPTOR_LISTEN_DATABASE_URL", world.cluster.url("raptor")),
    ];
    for (name, value) in extra {
        vars.retain(|(kept, _)| kept != name);
        if !value.is_empty() {
            vars.push((name, value.clone()));
        }
    }
    let env = env::base_env(&bouncer.url("raptor"), &vars);
    Replica::spawn(&world.dir, name, env).await
}

/// 5d: a busy store never runs a completed Tier 2 key again (transaction pooling). A replica
/// with a business pool of 4 (so a store pool of 2) and the 2-second store timeout; a profile
/// patch with key K completes; the driver holds K's row as a slow completing original would,
/// while 12 clients retry K twice each, so the waiting claims saturate the store pool. Every
/// answer must be 409 or 503 (none a fresh execution), the profile is not written again, and
/// the replica counts no `fail_open`.
pub(crate) async fn busy_store_tier2(
    world: &World,
    bouncer: &Bouncer,
    name: &str,
) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new(name);
    let mut replica = bouncer_replica(
        world,
        bouncer,
        "replica-bouncer-busy-store",
        "transaction",
        &[("RAPTOR_DB_POOL_SIZE", "4".to_owned())],
    )
    .await?;
    let user = world.users("busy-store", 1).await?.remove(0);
    let key = new_key();
    let body = r#"{"display_name":"Busy Store"}"#.to_owned();
    let patch = |http: Http, base: String, token: String, key: String, body: String| async move {
        http.send(
            reqwest::Method::PATCH,
            &base,
            "/api/account/profile",
            &token,
            Some(&key),
            Some(body),
        )
        .await
    };
    let first = patch(
        world.http.clone(),
        replica.base.clone(),
        user.token.clone(),
        key.clone(),
        body.clone(),
    )
    .await;
    o.check(
        first.status == 200 && first.replayed.as_deref() == Some("false"),
        format!("the first patch executed: {}", first.label()),
    );
    let updated_at = || async {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "select updated_at from users where id = $1",
        )
        .bind(user.id)
        .fetch_one(&world.db)
        .await
    };
    let before = updated_at().await?;
    let hold = Duration::from_secs(if world.quick { 5 } else { 8 });
    let lock = RowLock::key(world, &key).await?;
    let held = Instant::now();
    let mut clients = JoinSet::new();
    for _ in 0..12 {
        let (http, base, token, key, body) = (
            world.http.clone(),
            replica.base.clone(),
            user.token.clone(),
            key.clone(),
            body.clone(),
        );
        clients.spawn(async move {
            let mut answers = Vec::new();
            for _ in 0..2 {
                answers.push(
                    patch(
                        http.clone(),
                        base.clone(),
                        token.clone(),
                        key.clone(),
                        body.clone(),
                    )
                    .await,
                );
            }
            answers
        });
    }
    let answers: Vec<Answer> = clients.join_all().await.into_iter().flatten().collect();
    let answered_within_hold = held.elapsed() < hold;
    tokio::time::sleep(hold.saturating_sub(held.elapsed())).await;
    lock.release().await?;
    let mut tally = BTreeMap::new();
    for answer in &answers {
        *tally.entry(answer.label()).or_insert(0) += 1;
    }
    let fresh = answers
        .iter()
        .filter(|a| a.status == 200 && a.replayed.as_deref() == Some("false"))
        .count();
    o.check(
        answered_within_hold,
        format!("all {} answers came while the row was held", answers.len()),
    );
    o.check(
        fresh == 0,
        format!("fresh executions of the completed key while it was held: {fresh}"),
    );
    o.check(
        answers.iter().all(|a| {
            (a.status == 409 && a.code.as_deref() == Some("idempotency_in_flight"))
                || (a.status == 503 && a.code.as_deref() == Some("idempotency_store_unavailable"))
        }),
        format!("every answer was 409 in flight or 503: {tally:?}"),
    );
    let after = updated_at().await?;
    o.check(after == before, "the profile was not written again");
    let audited: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where user_id = $1 and action = 'profile.updated'",
    )
    .bind(user.id)
    .fetch_one(&world.db)
    .await?;
    o.check(
        audited == 1,
        format!("profile.updated audit rows: {audited}"),
    );
    let fail_open = fail_open_count(&world.http, &replica.base).await;
    o.check(
        fail_open == Some(0),
        format!("the replica's outcome=\"fail_open\" count: {fail_open:?}"),
    );
    replica.kill9().await?;
    Ok(o)
}

/// `raptor_idempotency_requests_total{outcome="fail_open"}` summed over endpoints, from a
/// replica's `/metrics` (`None`: not readable).
async fn fail_open_count(http: &Http, base: &str) -> Option<u64> {
    let text = http.text(&format!("{base}/metrics")).await?;
    Some(
        text.lines()
            .filter(|line| {
                line.starts_with("raptor_idempotency_requests_total")
                    && line.contains("outcome=\"fail_open\"")
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum(),
    )
}

/// Statements sent to Postgres through PgBouncer that keep session state, counted from the
/// server log (log_statement = all for the two roles while the scenario runs).
pub(crate) async fn session_state_in_log(
    world: &World,
    from: u64,
) -> anyhow::Result<(usize, usize, Vec<String>)> {
    let log = std::fs::read(world.cluster.dir.join("log"))?;
    let text = String::from_utf8_lossy(log.get(usize::try_from(from)?..).unwrap_or_default());
    let (mut unnamed, mut named) = (0, 0);
    let mut session = Vec::new();
    for line in text.lines() {
        if line.contains("execute <unnamed>") {
            unnamed += 1;
        } else if line.contains("execute sqlx_s_") {
            named += 1;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(idx) = lower.find("statement: ") {
            let stmt = lower[idx + 11..].trim_start();
            // PgBouncer itself re-applies the client's tracked startup parameters on the server
            // session it links (`set timezone=…;set application_name=…`): not the application's.
            let tracked = stmt
                .split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .all(|p| {
                    [
                        "set timezone=",
                        "set application_name=",
                        "set client_encoding=",
                        "set datestyle=",
                        "set standard_conforming_strings=",
                    ]
                    .iter()
                    .any(|prefix| p.starts_with(prefix))
                });
            if tracked {
                continue;
            }
            if (stmt.starts_with("set ") && !stmt.starts_with("set local"))
                || stmt.starts_with("listen")
                || stmt.starts_with("prepare")
                || stmt.contains("pg_advisory_lock(")
                || stmt.starts_with("create temp")
            {
                session.push(stmt.chars().take(120).collect());
            }
        }
    }
    Ok((unnamed, named, session))
}

pub(crate) fn log_len(world: &World) -> u64 {
    std::fs::metadata(world.cluster.dir.join("log")).map_or(0, |m| m.len())
}

/// `pgbouncer --version`'s first line.
pub(crate) fn pgbouncer_version() -> String {
    std::process::Command::new("pgbouncer")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|t| t.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "(version unknown)".to_owned())
}

/// Reads the session settings `n` times per role through PgBouncer, each on a fresh client
/// connection and in the simple query protocol (what a transaction pooler passes through);
/// returns what was seen and whether it matched the role's settings.
pub(crate) async fn role_settings_via(
    bouncer: &Bouncer,
    n: usize,
) -> anyhow::Result<Vec<(String, bool)>> {
    use sqlx::Row;
    // The store role's timeouts: what the service derives from its store timeout.
    let half =
        raptor_db::StoreBudget::new(Duration::from_millis(env::STORE_TIMEOUT_MS)).session_ms();
    let want = [
        (
            "raptor",
            format!(
                "{}ms/{}ms/on",
                env::LOCK_TIMEOUT_MS,
                env::STATEMENT_TIMEOUT_MS
            ),
        ),
        ("raptor_idem", format!("{half}ms/{half}ms/off")),
    ];
    let mut seen = Vec::new();
    for (role, expected) in want {
        let options: sqlx::postgres::PgConnectOptions = bouncer.url(role).parse()?;
        for _ in 0..n {
            let mut conn = sqlx::PgConnection::connect_with(&options).await?;
            let row = sqlx::raw_sql(
                "select (select setting from pg_settings where name = 'lock_timeout'),
                        (select setting from pg_settings where name = 'statement_timeout'),
                        current_setting('synchronous_commit')",
            )
            .fetch_one(&mut conn)
            .await?;
            let text = format!(
                "{}ms/{}ms/{}",
                row.try_get::<String, _>(0)?,
                row.try_get::<String, _>(1)?,
                row.try_get::<String, _>(2)?
            );
            seen.push((format!("{role}: {text}"), text == expected));
            conn.close().await?;
        }
    }
    Ok(seen)
}

/// What a trade-updates stream delivered for one order.
struct Delivered {
    /// The events carrying the order, in arrival order.
    events: Vec<String>,
    /// From the order's answer to its `fill` event.
    fill_after: Option<Duration>,
}

/// 5e: a trade-updates stream behind PgBouncer in transaction mode. A replica whose business
/// pools go through the pooler streams a user's updates; a keyed market order through it must
/// reach the stream as `new` and `fill` within a second of its answer, the listener being on a
/// session of its own (`RAPTOR_LISTEN_DATABASE_URL`). The control: without that setting the
/// replica must refuse to start (its `LISTEN` through the pooler would be on a session the pooler
/// hands to other clients, whose queries then fail on the notifications: an order's commit
/// answered 500 in an earlier version that only warned).
pub(crate) async fn trade_stream(
    world: &World,
    bouncer: &Bouncer,
    name: &str,
    listen_direct: bool,
) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new(name);
    if !listen_direct {
        let refused = bouncer_replica(
            world,
            bouncer,
            "replica-bouncer-stream-pooled",
            "transaction",
            &[("RAPTOR_LISTEN_DATABASE_URL", String::new())],
        )
        .await;
        match refused {
            Err(err) => o.check(
                true,
                format!("without RAPTOR_LISTEN_DATABASE_URL the replica refused to start: {err:#}"),
            ),
            Ok(mut replica) => {
                replica.kill9().await?;
                o.check(
                    false,
                    "without RAPTOR_LISTEN_DATABASE_URL the replica started",
                );
            }
        }
        return Ok(o);
    }
    let mut replica = bouncer_replica(
        world,
        bouncer,
        "replica-bouncer-stream-direct",
        "transaction",
        &[],
    )
    .await?;
    let user = world.users("stream-direct", 1).await?.remove(0);
    let wait = Duration::from_secs(1);
    let delivered = stream_one_order(world, &replica.base, &user.token, wait).await;
    replica.kill9().await?;
    let delivered = delivered?;
    o.fact("RAPTOR_LISTEN_DATABASE_URL: the listener's own session on Postgres");
    o.check(
        delivered.events == ["new", "fill"],
        format!(
            "the order's events on the stream within {wait:?} of its answer: {:?}",
            delivered.events
        ),
    );
    o.check(
        delivered.fill_after.is_some_and(|after| after < wait),
        format!(
            "its fill arrived {:?} after the answer",
            delivered.fill_after
        ),
    );
    Ok(o)
}

/// Opens `token`'s stream on `base`, lets the listener settle, places one keyed market order and
/// collects the stream's events about it for `wait` after the order's answer.
async fn stream_one_order(
    world: &World,
    base: &str,
    token: &str,
    wait: Duration,
) -> anyhow::Result<Delivered> {
    // Its own client: no total timeout on a response that does not end.
    let client = reqwest::Client::builder().build()?;
    let mut stream = client
        .get(format!("{base}/api/trading/stream"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .send()
        .await
        .context("open the stream")?;
    anyhow::ensure!(
        stream.status() == reqwest::StatusCode::OK,
        "the stream answered {}",
        stream.status()
    );
    // The first stream starts the listener; an order committed before its LISTEN would be read
    // by the catch-up read the listener makes when it connects, not woken by its notification.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let answer = world.http.order(base, token, Some(&new_key())).await;
    anyhow::ensure!(answer.status == 201, "the order: {}", answer.label());
    let order_id = answer.order_id.context("the order's id")?;
    let answered = Instant::now();
    let mut delivered = Delivered {
        events: Vec::new(),
        fill_after: None,
    };
    let mut parser = Parser::default();
    let mut items = Vec::new();
    while answered.elapsed() < wait {
        let left = wait.saturating_sub(answered.elapsed());
        let Ok(chunk) = tokio::time::timeout(left, stream.chunk()).await else {
            break;
        };
        let Some(chunk) = chunk.context("read the stream")? else {
            break;
        };
        parser.feed(&chunk, &mut items);
        for item in items.drain(..) {
            let Item::Message { event, data, .. } = item else {
                continue;
            };
            let data: serde_json::Value = serde_json::from_str(&data)?;
            if data["order"]["id"].as_str() == Some(order_id.as_str()) {
                if event == "fill" {
                    delivered.fill_after = Some(answered.elapsed());
                }
                delivered.events.push(event);
            }
        }
    }
    Ok(delivered)
}
