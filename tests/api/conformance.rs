//! The model's traces replayed through the service's own statements
//! (`raptor_idempotency::protocol`) on real Postgres, one connection per business transaction:
//! after every step the key row and the committed effects are what the model says, a step the
//! model says blocks on the row's lock does block (a short `lock_timeout` ends it with 55P03),
//! and every other step proceeds without waiting.
//!
//! `make test` replays every `sometimes` witness, a trace ending in each transition, the safety
//! mutants' counterexamples (which must part from the code) and a bounded
//! number of seeded random walks; `make model` replays more walks
//! (`RAPTOR_REPLAY_WALKS`). A code change that makes a statement disagree with the model (the
//! mutants of `make mutants`) fails here, at the step where they part.
//!
//! What the replay cannot see: the decisions in Rust around the statements (the tier policy,
//! the judge's answers, the guard's choice of settle), which the route tests cover, and the
//! replay audit rows, which the model checks only in the abstract.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use raptor_idempotency::protocol::{self, ClaimValues, CompletionValues, Settle as SettleHow};
use raptor_model::export::{self, Named};
use raptor_model::model::{Action, Code, Effect, Pc, Resp, Settle, State, Status, Step};
use raptor_model::Mutant;
use serde_json::value::RawValue;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Row};
use uuid::Uuid;

/// Walks `make test` replays; `RAPTOR_REPLAY_WALKS` asks for more (`make model`).
const WALKS: u64 = 200;
/// The length of a walk, in steps (most end earlier: every client answered).
const WALK_STEPS: usize = 80;

/// The transitions that send a statement or a COMMIT (the others are decisions in Rust, the
/// adversary's, or a statement that did not get through).
const STATEMENTS: [&str; 13] = [
    "claim",
    "claim_blocked",
    "claim_connection_lost",
    "release_stale",
    "complete",
    "complete_alone",
    "commit",
    "commit_lost",
    "release_retryable",
    "settle_failed",
    "release_cancelled",
    "release_won",
    "release_attempt",
];

const ENDPOINT: &str = "POST /model";

/// Every witness, then the walks: each agrees with the model at every step.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn model_traces_replay_on_the_real_statements(pool: PgPool) {
    let replay = Replayer::new(&pool).await;
    let walks = std::env::var("RAPTOR_REPLAY_WALKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(WALKS);
    let mut traces = export::witnesses();
    assert!(traces.len() >= 8, "the witnesses are exported");
    traces.extend(export::transition_witnesses());
    traces.extend(export::fence_witnesses());
    traces.extend((0..walks).map(|seed| export::random_walk(seed, WALK_STEPS)));
    let (mut steps, mut blocked) = (0, 0);
    let mut taken: HashMap<&str, usize> = HashMap::new();
    for (n, named) in traces.iter().enumerate() {
        match replay.run(n, named).await {
            Ok(stats) => {
                steps += stats.steps;
                blocked += stats.blocked;
            }
            Err(parted) => panic!("{parted}"),
        }
        for action in &named.trace.1 {
            *taken.entry(action.transition(None).name()).or_default() += 1;
        }
    }
    println!(
        "{} traces, {steps} steps, {blocked} blocked: {taken:?}",
        traces.len()
    );
    assert!(steps > 500, "the traces went somewhere: {steps} steps");
    assert!(
        blocked > 0,
        "some step blocked on the row's lock, as the model said"
    );
    // Every transition that sends a statement or a COMMIT was replayed at least once.
    let missed: Vec<&str> = STATEMENTS
        .iter()
        .copied()
        .filter(|name| !taken.contains_key(name))
        .collect();
    assert!(missed.is_empty(), "never replayed: {missed:?}");
}

/// The safety mutants' counterexamples are paths the real statements refuse to follow: no
/// fence parts at the stale attempt's completion, which the fenced statement does not let
/// match; select-then-insert at its first step, since the real claim writes where the mutant
/// only reads. (The third safety mutant, fail-open on a busy pool, is a decision in Rust with no
/// statement of its own: `make mutants` shows its code mutant rejected by the store failure
/// tests.)
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_mutants_counterexamples_part_from_the_code(pool: PgPool) {
    let replay = Replayer::new(&pool).await;
    for (n, (mutant, step)) in [
        (Mutant::NoFence, "`complete`"),
        (Mutant::SelectThenInsert, "`mutant_claim_select`"),
    ]
    .into_iter()
    .enumerate()
    {
        let named = export::counterexample(mutant).expect("a counterexample");
        let parted = replay
            .run(n, &named)
            .await
            .expect_err("the mutant's trace cannot be followed by the real statements");
        assert!(
            parted.contains(step),
            "{mutant:?} parted elsewhere than at {step}:\n{parted}"
        );
    }
}

/// The statements the protocol sends all prepare against the migrated schema: a changed
/// statement that no longer parses is a broken build, not a bug a test must find (the
/// mutants of `make mutants` are checked with this first).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_protocol_statements_prepare(pool: PgPool) {
    let mut conn = pool.acquire().await.expect("conn");
    let statements = protocol::statements();
    let names: Vec<&str> = statements.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        [
            "claim",
            "settle_fail",
            "settle_release",
            "release_attempt",
            "complete",
            "complete_in_statement",
            "cleanup"
        ],
        "every statement of the protocol is checked"
    );
    for (name, sql) in statements {
        sqlx::Executor::prepare(&mut *conn, sql.as_str())
            .await
            .unwrap_or_else(|err| panic!("{name} does not prepare: {err}"));
    }
}

/// How far a trace went.
#[derive(Debug)]
struct Stats {
    steps: usize,
    blocked: usize,
}

struct Replayer {
    pool: PgPool,
}

/// One trace's mapping from the model's small numbers to the database's values, and the
/// business transactions it has open.
#[derive(Default)]
struct Run {
    key: String,
    trace: i32,
    /// Model token → attempt uuid.
    tokens: HashMap<u8, Uuid>,
    /// Model row id → `idempotency_keys.id`.
    rows: HashMap<u8, i64>,
    /// Model lineage → `idempotency_keys.lineage`.
    lineages: HashMap<u8, Uuid>,
    /// Open business transactions with the key row locked by their completion, by token.
    open: HashMap<u8, PgConnection>,
    /// The same, of attempts whose process died: held until the session ends.
    dead: HashMap<u8, PgConnection>,
    /// An expiry that waits for the row's lock (the clock moved while a completion held it).
    expiring: Option<tokio::task::JoinHandle<Result<(), String>>>,
    log: String,
}

impl Replayer {
    async fn new(pool: &PgPool) -> Self {
        sqlx::query(
            "create table model_effects (seq bigserial primary key, trace integer not null,
                token uuid not null, lineage uuid)",
        )
        .execute(pool)
        .await
        .expect("effects table");
        // Every replay session gives up on a lock after a short wait: a step the model says
        // proceeds must not wait at all.
        let options: PgConnectOptions = (*pool.connect_options())
            .clone()
            .options([("lock_timeout", "1500ms")]);
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .connect_with(options)
            .await
            .expect("replay pool");
        Self { pool }
    }

    /// Replays `named` step by step; `Err` says where the database and the model parted.
    async fn run(&self, n: usize, named: &Named) -> Result<Stats, String> {
        let (states, actions) = &named.trace;
        let mut run = Run {
            key: format!("trace-{n}-{}", Uuid::new_v4()),
            trace: i32::try_from(n).unwrap_or(i32::MAX),
            ..Run::default()
        };
        let mut stats = Stats {
            steps: 0,
            blocked: 0,
        };
        for (i, action) in actions.iter().enumerate() {
            let (before, after) = (&states[i], &states[i + 1]);
            let name = action.transition(named.model.mutant).name();
            let _ = writeln!(run.log, "{:>3} {name:<22} {action:?}", i + 1);
            let outcome = self.step(&mut run, before, after, *action).await;
            let outcome = match outcome {
                Ok(blocked) => {
                    stats.blocked += usize::from(blocked);
                    self.compare(&mut run, after).await
                }
                Err(why) => Err(why),
            };
            if let Err(why) = outcome {
                run.close().await;
                return Err(format!(
                    "{}: the database parted from the model at step {} `{name}`: {why}\n{}",
                    named.name,
                    i + 1,
                    run.log
                ));
            }
            stats.steps += 1;
        }
        run.close().await;
        Ok(stats)
    }

    /// Runs the statement (or COMMIT) `action` stands for. `Ok(true)`: the step blocked on the
    /// row's lock, as the model said it would.
    async fn step(
        &self,
        run: &mut Run,
        before: &State,
        after: &State,
        action: Action,
    ) -> Result<bool, String> {
        let Action::Step { attempt, step } = action else {
            return match action {
                Action::Expire => self.expire(run, before).await.map(|()| false),
                Action::SessionEnds => {
                    let token = before.row.and_then(|row| row.locked_by);
                    let conn = token
                        .and_then(|token| run.dead.remove(&token))
                        .ok_or("no dead session holds the lock")?;
                    conn_end(conn, false).await?;
                    Ok(false)
                }
                Action::Cleanup => {
                    raptor_idempotency::cleanup::delete_expired(&self.pool, 100)
                        .await
                        .map_err(|e| format!("cleanup: {e}"))?;
                    Ok(false)
                }
                // The clock passing the stale threshold is read by the next claim
                // (`stale_ms`); a client sending is not a statement.
                _ => Ok(false),
            };
        };
        let a = before
            .attempts
            .get(usize::from(attempt))
            .ok_or("no such attempt")?;
        let body = a.body;
        match (a.pc, step) {
            (Pc::Round { .. }, Step::Claim | Step::ClaimConnLost { executed: true })
            | (Pc::Landing, Step::Claim) => {
                let attempt = Uuid::new_v4();
                let row = self.claim(run, before, body, attempt, None).await?;
                let won = after.next_token > before.next_token;
                let Some(row) = row else {
                    return Err("the claim read no row".into());
                };
                if row.won != won {
                    return Err(format!("the claim won: {}, the model: {won}", row.won));
                }
                if let (false, Some(model)) = (row.won, before.row) {
                    let status = row.status.as_deref().unwrap_or_default();
                    if status != status_name(model.status) {
                        return Err(format!(
                            "the claim read {status}, the model: {:?}",
                            model.status
                        ));
                    }
                }
                if won {
                    run.tokens.insert(before.next_token, attempt);
                }
                Ok(false)
            }
            (Pc::Round { .. }, Step::ClaimLockTimeout) => {
                match self
                    .claim(run, before, body, Uuid::new_v4(), Some("100ms"))
                    .await
                {
                    Err(why) if why.contains("55P03") => Ok(true),
                    Err(why) => Err(why),
                    Ok(_) => Err("the model says the claim blocks; it did not".into()),
                }
            }
            (
                Pc::ReleaseStale {
                    row_id, attempt, ..
                },
                Step::ReleaseStale,
            ) => {
                let (id, token) = (run.row(row_id)?, run.token(attempt)?);
                self.settle(SettleHow::Release, id, token).await?;
                Ok(false)
            }
            (
                Pc::Executing {
                    token,
                    lineage,
                    row_id,
                },
                Step::Complete(code),
            ) => {
                let matched = after
                    .attempts
                    .iter()
                    .any(|b| matches!(b.pc, Pc::Committing { token: t, .. } if t == token));
                let id = run.row(row_id)?;
                let rows = self.complete(run, token, lineage, id, code, body).await?;
                if rows != u64::from(matched) {
                    return Err(format!(
                        "the completion matched {rows} row(s), the model: {}",
                        u64::from(matched)
                    ));
                }
                Ok(false)
            }
            (Pc::CompletingAlone { token, row_id, .. }, Step::CompleteAlone) => {
                let matched = before.row.is_some_and(|row| {
                    row.id == row_id && row.attempt == token && row.status == Status::InFlight
                });
                let rows = self
                    .complete_alone(run, token, run.row(row_id)?, body)
                    .await?;
                if rows != u64::from(matched) {
                    return Err(format!(
                        "the refusal's completion matched {rows} row(s), the model: {}",
                        u64::from(matched)
                    ));
                }
                Ok(false)
            }
            (
                Pc::Committing { token, .. },
                Step::Commit | Step::CommitLost { landed: true } | Step::CancelCommitLanded,
            ) => {
                let conn = run.open.remove(&token).ok_or("no open transaction")?;
                conn_end(conn, true).await?;
                Ok(false)
            }
            (Pc::Committing { token, .. }, Step::CommitLost { landed: false } | Step::Cancel) => {
                let conn = run.open.remove(&token).ok_or("no open transaction")?;
                conn_end(conn, false).await?;
                Ok(false)
            }
            (Pc::Committing { token, .. }, Step::Crash) => {
                // The process is gone; its session (and the row's lock) stays until Postgres
                // ends it (`session_ends`).
                let conn = run.open.remove(&token).ok_or("no open transaction")?;
                run.dead.insert(token, conn);
                Ok(false)
            }
            (Pc::Settling { token, row_id, how }, Step::Settle(_)) => {
                let how = match how {
                    Settle::Failed => SettleHow::Fail,
                    Settle::Retryable | Settle::Cancelled => SettleHow::Release,
                };
                // A lost commit leaves `row_id` as the row then was (or none).
                let Some(&id) = run.rows.get(&row_id) else {
                    return Ok(false);
                };
                self.settle(how, id, run.token(token)?).await?;
                Ok(false)
            }
            (Pc::ReleaseWon { token, row_id }, Step::ReleaseWon) => {
                let (id, token) = (run.row(row_id)?, run.token(token)?);
                self.settle(SettleHow::Release, id, token).await?;
                Ok(false)
            }
            (Pc::ReleaseAttempt { token }, Step::ReleaseAttempt) => {
                let attempt = run.token(token)?;
                let mut conn = self.conn().await?;
                protocol::release_attempt(&mut conn, &run.key, None, ENDPOINT, attempt)
                    .await
                    .map_err(|e| format!("release_attempt: {e}"))?;
                Ok(false)
            }
            (Pc::Untracked { token, .. }, Step::CommitUntracked) => {
                let id = Uuid::new_v4();
                run.tokens.insert(token, id);
                sqlx::query("insert into model_effects (trace, token) values ($1, $2)")
                    .bind(run.trace)
                    .bind(id)
                    .execute(&self.pool)
                    .await
                    .map_err(|e| format!("untracked effect: {e}"))?;
                Ok(false)
            }
            (Pc::Round { .. }, Step::ClaimUnreachable) if after.next_token > before.next_token => {
                // Fail-open: the token is the untracked execution's, written at its commit.
                Ok(false)
            }
            // No statement: the store's faults before a statement went out, a settle that did
            // not get through, a rollback of a transaction that wrote nothing yet (its effect
            // and completion are one step here), a client going away.
            _ => Ok(false),
        }
    }

    async fn conn(&self) -> Result<sqlx::pool::PoolConnection<sqlx::Postgres>, String> {
        self.pool
            .acquire()
            .await
            .map_err(|e| format!("acquire: {e}"))
    }

    /// The claim statement for `body`, stale when the model's row is.
    async fn claim(
        &self,
        run: &Run,
        before: &State,
        body: u8,
        attempt: Uuid,
        lock_timeout: Option<&str>,
    ) -> Result<Option<protocol::ClaimRow>, String> {
        let stale = before.row.is_some_and(|row| row.stale);
        let hash = format!("body-{body}");
        let values = ClaimValues {
            key: &run.key,
            scope_user_id: None,
            endpoint: ENDPOINT,
            request_hash: &hash,
            attempt,
            ttl_ms: 3_600_000,
            stale_ms: if stale { 0 } else { 3_600_000 },
            re_execute: false,
        };
        let mut conn = self.conn().await?;
        if let Some(timeout) = lock_timeout {
            sqlx::query(&format!("set lock_timeout = '{timeout}'"))
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
        }
        let claimed = protocol::claim(&mut conn, &values).await;
        if lock_timeout.is_some() {
            // Back to the pool's setting (the connection is reused).
            let _ = sqlx::query("reset lock_timeout").execute(&mut *conn).await;
        }
        claimed.map_err(|e| {
            let code = e
                .as_database_error()
                .and_then(|d| d.code())
                .unwrap_or_default();
            format!("claim: {code} {e}")
        })
    }

    async fn settle(&self, how: SettleHow, id: i64, attempt: Uuid) -> Result<u64, String> {
        let mut conn = self.conn().await?;
        protocol::settle(&mut conn, how, id, attempt)
            .await
            .map_err(|e| format!("settle {how:?}: {e}"))
    }

    /// The business transaction of `token`: its effect and the fenced completion, in one
    /// statement for even tokens (as the order writes it) and in two for odd ones (as the
    /// claim's own completion). Kept open when the completion matched; rolled back otherwise.
    async fn complete(
        &self,
        run: &mut Run,
        token: u8,
        lineage: u8,
        id: i64,
        code: Code,
        body: u8,
    ) -> Result<u64, String> {
        let attempt = run.token(token)?;
        let lineage = run.lineage(lineage)?;
        let err = |e: sqlx::Error| format!("complete: {e}");
        let mut conn = self.pool.acquire().await.map_err(err)?.detach();
        sqlx::query("begin").execute(&mut conn).await.map_err(err)?;
        let response = serde_json::json!({ "token": token, "body": body }).to_string();
        let response = RawValue::from_string(response).map_err(|e| e.to_string())?;
        let values = CompletionValues {
            id,
            attempt,
            code: match code {
                Code::Success => 201,
                Code::Rejection => 422,
                Code::Refusal => 400,
            },
            body: Some(&response),
            ..CompletionValues::default()
        };
        let rows = if token.is_multiple_of(2) {
            let marker = Uuid::new_v4();
            let mut sql = sqlx::QueryBuilder::new(
                "with effect as (insert into model_effects (trace, token, lineage) values (",
            );
            sql.push_bind(run.trace)
                .push(", ")
                .push_bind(attempt)
                .push(", ")
                .push_bind(lineage)
                .push(") returning 1), ");
            protocol::push_completion_cte(
                &mut sql,
                Some(values),
                "exists (select 1 from effect)",
                marker,
            );
            sql.push(" select ").push(protocol::COMPLETED_COLUMN);
            let row = sql.build().fetch_one(&mut conn).await.map_err(err)?;
            let completed: Option<Uuid> = row.try_get("idempotency_completed").map_err(err)?;
            u64::from(completed == Some(marker))
        } else {
            sqlx::query("insert into model_effects (trace, token, lineage) values ($1, $2, $3)")
                .bind(run.trace)
                .bind(attempt)
                .bind(lineage)
                .execute(&mut conn)
                .await
                .map_err(err)?;
            protocol::complete(&mut conn, &values).await.map_err(err)?
        };
        if rows == 1 {
            run.open.insert(token, conn);
        } else {
            conn_end(conn, false).await?;
        }
        Ok(rows)
    }

    /// A refusal stored on its own, on a connection of its own (autocommit), fenced.
    async fn complete_alone(&self, run: &Run, token: u8, id: i64, body: u8) -> Result<u64, String> {
        let response = serde_json::json!({ "token": token, "body": body }).to_string();
        let response = RawValue::from_string(response).map_err(|e| e.to_string())?;
        let values = CompletionValues {
            id,
            attempt: run.token(token)?,
            code: 400,
            body: Some(&response),
            ..CompletionValues::default()
        };
        let mut conn = self.conn().await?;
        protocol::complete(&mut conn, &values)
            .await
            .map_err(|e| format!("complete alone: {e}"))
    }

    /// The clock passes the row's `expires_at`. A row locked by a completion is updated once
    /// the lock goes (the update waits in a task of its own); meanwhile the comparison counts
    /// the row as expired.
    async fn expire(&self, run: &mut Run, before: &State) -> Result<(), String> {
        let row = before.row.ok_or("no row to expire")?;
        let id = run.row(row.id)?;
        let sql = "update idempotency_keys set expires_at = now() - interval '1 second'
                    where id = $1";
        if row.locked_by.is_none() {
            sqlx::query(sql)
                .bind(id)
                .execute(&self.pool)
                .await
                .map_err(|e| format!("expire: {e}"))?;
            return Ok(());
        }
        let options = (*self.pool.connect_options()).clone();
        run.expiring = Some(tokio::spawn(async move {
            let mut conn = PgConnection::connect_with(&options)
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query("set lock_timeout = 0")
                .execute(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            sqlx::query(sql)
                .bind(id)
                .execute(&mut conn)
                .await
                .map_err(|e| format!("expire: {e}"))?;
            conn.close().await.map_err(|e| e.to_string())
        }));
        Ok(())
    }

    /// The database's state against the model's `after`.
    async fn compare(&self, run: &mut Run, after: &State) -> Result<(), String> {
        let locked_in_model = after.row.is_some_and(|row| row.locked_by.is_some());
        if !locked_in_model {
            if let Some(expiring) = run.expiring.take() {
                expiring
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| format!("the delayed expiry: {e}"))?;
            }
        }
        let row = sqlx::query(
            "select id, status, attempt, lineage, request_hash, response_code, response_body,
                    expires_at <= now() as expired
               from idempotency_keys
              where idem_key = $1 and scope_user_id is null and scope_endpoint = $2",
        )
        .bind(&run.key)
        .bind(ENDPOINT)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| format!("read the row: {e}"))?;
        match (after.row, row) {
            (None, None) => {}
            (None, Some(_)) => return Err("a key row exists; the model has none".into()),
            (Some(_), None) => return Err("no key row; the model has one".into()),
            (Some(model), Some(db)) => {
                let get = |e: sqlx::Error| format!("row: {e}");
                let id: i64 = db.try_get("id").map_err(get)?;
                run.bind_row(model.id, id)?;
                let status: String = db.try_get("status").map_err(get)?;
                let expected = status_name(model.status);
                if status != expected {
                    return Err(format!("status {status}, the model: {expected}"));
                }
                let attempt: Uuid = db.try_get("attempt").map_err(get)?;
                if run.tokens.get(&model.attempt) != Some(&attempt) {
                    return Err(format!(
                        "the row's attempt is not the model's token {}",
                        model.attempt
                    ));
                }
                let lineage: Uuid = db.try_get("lineage").map_err(get)?;
                run.bind_lineage(model.lineage, lineage)?;
                let hash: String = db.try_get("request_hash").map_err(get)?;
                if hash != format!("body-{}", model.hash) {
                    return Err(format!(
                        "request_hash {hash}, the model: body {}",
                        model.hash
                    ));
                }
                let code: Option<i16> = db.try_get("response_code").map_err(get)?;
                let body: Option<serde_json::Value> = db.try_get("response_body").map_err(get)?;
                let stored = code.zip(body).map(|(code, body)| Resp {
                    token: u8::try_from(body["token"].as_u64().unwrap_or(255)).unwrap_or(255),
                    code: match code {
                        201 => Code::Success,
                        400 => Code::Refusal,
                        _ => Code::Rejection,
                    },
                    body: u8::try_from(body["body"].as_u64().unwrap_or(255)).unwrap_or(255),
                });
                if stored != model.response {
                    return Err(format!(
                        "response {stored:?}, the model: {:?}",
                        model.response
                    ));
                }
                let expired: bool = db.try_get("expired").map_err(get)?;
                if (expired || run.expiring.is_some()) != model.expired {
                    return Err(format!("expired {expired}, the model: {}", model.expired));
                }
                let locked = self.locked(id).await?;
                if locked != model.locked_by.is_some() {
                    return Err(format!(
                        "row locked {locked}, the model: {:?}",
                        model.locked_by
                    ));
                }
            }
        }
        let effects: Vec<(Uuid, Option<Uuid>)> = sqlx::query_as(
            "select token, lineage from model_effects where trace = $1 order by seq",
        )
        .bind(run.trace)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| format!("read the effects: {e}"))?;
        let expected: Vec<(Option<Uuid>, Option<Uuid>)> = after
            .effects
            .iter()
            .map(|effect| match *effect {
                Effect::Tracked { token, lineage, .. } => (
                    run.tokens.get(&token).copied(),
                    run.lineages.get(&lineage).copied(),
                ),
                Effect::Untracked { token, .. } => (run.tokens.get(&token).copied(), None),
            })
            .collect();
        // As sets: `seq` is drawn when the effect is written, not when it commits.
        let mut found: Vec<(Option<Uuid>, Option<Uuid>)> =
            effects.into_iter().map(|(t, l)| (Some(t), l)).collect();
        found.sort();
        let mut expected = expected;
        expected.sort();
        if found != expected {
            return Err(format!(
                "committed effects {found:?}, the model: {expected:?}"
            ));
        }
        Ok(())
    }

    /// Whether another transaction holds the row's lock (a `FOR UPDATE NOWAIT` says).
    async fn locked(&self, id: i64) -> Result<bool, String> {
        let mut conn = self.pool.acquire().await.map_err(|e| e.to_string())?;
        let mut tx = conn.begin().await.map_err(|e| e.to_string())?;
        let probe = sqlx::query("select 1 from idempotency_keys where id = $1 for update nowait")
            .bind(id)
            .execute(&mut *tx)
            .await;
        let _ = tx.rollback().await;
        match probe {
            Ok(_) => Ok(false),
            Err(e) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("55P03") => {
                Ok(true)
            }
            Err(e) => Err(format!("lock probe: {e}")),
        }
    }
}

impl Run {
    fn token(&self, token: u8) -> Result<Uuid, String> {
        self.tokens
            .get(&token)
            .copied()
            .ok_or_else(|| format!("token {token} never won a claim"))
    }

    fn row(&self, id: u8) -> Result<i64, String> {
        self.rows
            .get(&id)
            .copied()
            .ok_or_else(|| format!("row {id} never seen"))
    }

    fn lineage(&self, lineage: u8) -> Result<Uuid, String> {
        self.lineages
            .get(&lineage)
            .copied()
            .ok_or_else(|| format!("lineage {lineage} never seen"))
    }

    /// The model's row ids and the database's are one to one.
    fn bind_row(&mut self, model: u8, db: i64) -> Result<(), String> {
        bind(&mut self.rows, model, db, "row id")
    }

    /// And its lineages.
    fn bind_lineage(&mut self, model: u8, db: Uuid) -> Result<(), String> {
        bind(&mut self.lineages, model, db, "lineage")
    }

    async fn close(&mut self) {
        for (_, conn) in self.open.drain().chain(self.dead.drain()) {
            let _ = conn_end(conn, false).await;
        }
        if let Some(expiring) = self.expiring.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), expiring).await;
        }
    }
}

fn bind<V: PartialEq + Copy + std::fmt::Debug>(
    map: &mut HashMap<u8, V>,
    model: u8,
    db: V,
    what: &str,
) -> Result<(), String> {
    match map.get(&model) {
        Some(known) if *known == db => Ok(()),
        Some(known) => Err(format!("{what} {db:?}, the model's {model} was {known:?}")),
        None if map.values().any(|v| *v == db) => {
            Err(format!("{what} {db:?} is another of the model's"))
        }
        None => {
            map.insert(model, db);
            Ok(())
        }
    }
}

/// COMMIT or ROLLBACK of a business transaction, then the connection closed.
async fn conn_end(mut conn: PgConnection, commit: bool) -> Result<(), String> {
    let sql = if commit { "commit" } else { "rollback" };
    sqlx::query(sql)
        .execute(&mut conn)
        .await
        .map_err(|e| format!("{sql}: {e}"))?;
    conn.close().await.map_err(|e| e.to_string())
}

fn status_name(status: Status) -> &'static str {
    match status {
        Status::InFlight => "in_flight",
        Status::Completed => "completed",
        Status::Failed => "failed",
        Status::Released => "released",
    }
}
