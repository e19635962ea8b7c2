//! `raptor-bench`: latency and throughput of the order write path, end to end.
//!
//! What runs: the real router (`raptor_api::app`) on a fresh, migrated database
//! `raptor_bench_<pid>` (dropped at the end, also on error or Ctrl-C), served by
//! `raptor_server::serve` on 127.0.0.1:0 in this process, with the server's default pool size and
//! the system clock. A keep-alive `reqwest` client drives it over real HTTP, so every figure
//! includes HTTP parsing, every middleware layer, authentication, the gates, the idempotency claim,
//! the paper engine, sealing and opening the stored response (a response key is configured) and
//! the Postgres commits. No tracing subscriber is installed (logging off); the
//! Prometheus recorder is, as in a scraped production process.
//!
//! Every request is `POST /api/trading/orders`, a market buy of 1 AAPL (quote 189.90 / 190.10)
//! by a user with enough cash never to run out. Each scenario is preceded by an unmeasured
//! warm-up.
//!
//! - (a) `keyed`: a fresh `Idempotency-Key` each time, one client, back to back.
//! - (b) `unkeyed`: no key (the untracked path). (a) and (b) are interleaved, alternating which
//!   goes first, so both see the same account and table sizes; their difference at p50 is the
//!   cost of the idempotency claim and completion.
//! - (c) `replay`: one key re-sent with the same body; each answer is the stored response.
//! - (d) `throughput`: 16 concurrent clients, each its own user, fresh keys, for 5 s.
//! - (e) `duplicates`: 64 clients released together with one key, 10 rounds. Exactly one of them
//!   may execute (checked against the rows in `paper_orders`); the others get the replay or
//!   `409 idempotency_in_flight`, and their latency is the `losers` row.
//! - (f) `resting`: one account with 500 resting limit buys (the per-account cap) on MSFT; one
//!   quote update that re-evaluates all 500 without filling any, then one that fills all 500.
//!   Each is one `set_quote` call (one transaction), timed in-process.
//!
//! How to read it: latencies are per request, measured by the client, in milliseconds (p50, p95,
//! p99 by nearest rank, and the maximum). `req/s` is completed requests over wall time; for the
//! one-client scenarios it is simply 1 / mean latency. The same figures go to
//! `target/bench/results.json`. Targets are checked at the end: a missed one prints FAIL and the
//! process exits with status 1 (2 when the benchmark itself could not run).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use raptor_api::accounts::store as accounts;
use raptor_api::auth::Role;
use raptor_api::{ApiConfig, ApiState, SystemClock, MIGRATOR};
use raptor_idempotency::{IdempotencyConfig, ResponseKeys};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool};
use tokio::sync::{oneshot, Barrier};
use tokio::task::JoinSet;
use uuid::Uuid;

const ORDERS: &str = "/api/trading/orders";
const ORDER_BODY: &str =
    r#"{"symbol":"AAPL","qty":"1","side":"buy","type":"market","time_in_force":"day"}"#;

/// `RAPTOR_RESPONSE_KEYS` of the bench (a throwaway key: the bench database is dropped).
const BENCH_RESPONSE_KEYS: &str = "bench:cmFwdG9yLWJlbmNoLW9ubHkta2V5LTMyLWJ5dGVzISE=";
/// Requests per one-client scenario.
const SEQUENTIAL_N: usize = 400;
/// Unmeasured requests before each one-client scenario.
const WARM_UP_N: usize = 50;
/// Concurrent clients (and users) of the throughput scenario.
const CLIENTS: usize = 16;
/// How long the throughput scenario sends new requests.
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(5);
/// Upper bound on one throughput client's requests, whatever the window.
const THROUGHPUT_CAP_PER_CLIENT: usize = 20_000;
/// Concurrent duplicates of one key per round.
const DUPLICATES: usize = 64;
/// Measured rounds of duplicates (after one warm-up round).
const ROUNDS: usize = 10;
/// The server's default `RAPTOR_DB_POOL_SIZE`, so the bench sees what production sees.
const POOL_SIZE: u32 = 20;
/// One request's deadline.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The whole run's deadline.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

// Speed targets for a 2-core machine with logging off, Postgres on the same machine with fsync on.
/// Keyed order p99, ms.
const TARGET_KEYED_P99_MS: f64 = 50.0;
/// Replay p99, ms.
const TARGET_REPLAY_P99_MS: f64 = 20.0;
/// Keyed minus unkeyed p50, ms.
const TARGET_OVERHEAD_P50_MS: f64 = 5.0;
/// Orders per second with 16 clients.
const TARGET_THROUGHPUT: f64 = 150.0;
/// Resting orders of scenario (f): `RAPTOR_MAX_OPEN_ORDERS`' default.
const RESTING: usize = 500;
/// One quote update over scenario (f)'s resting orders, ms.
const TARGET_QUOTE_UPDATE_MS: f64 = 1000.0;

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("raptor-bench: at least one target was missed");
            ExitCode::from(1)
        }
        Err(err) => {
            eprintln!("raptor-bench: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// Creates the database, runs the scenarios, always drops the database, then reports.
/// `Ok(false)` means the run completed but missed a target.
async fn run() -> anyhow::Result<bool> {
    let url = std::env::var("DATABASE_URL")
        .context("DATABASE_URL is not set (run `make bench`, which sets it)")?;
    let admin_options =
        PgConnectOptions::from_str(&url).context("DATABASE_URL is not a valid Postgres URL")?;
    let mut admin = PgConnection::connect_with(&admin_options)
        .await
        .context("could not connect to DATABASE_URL")?;
    let name = format!("raptor_bench_{}", std::process::id());
    sqlx::query(&format!("create database {name}"))
        .execute(&mut admin)
        .await
        .with_context(|| format!("could not create database {name}"))?;
    println!("raptor-bench: database {name}");

    let options = admin_options
        .clone()
        .database(&name)
        .application_name("raptor-bench");
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(RUN_TIMEOUT, bench(options)) => {
            outcome.unwrap_or_else(|_| Err(anyhow!("the run exceeded {RUN_TIMEOUT:?}")))
        }
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted")),
    };

    // FORCE ends connections an aborted run may have left behind (Postgres 13+).
    let dropped = sqlx::query(&format!("drop database if exists {name} with (force)"))
        .execute(&mut admin)
        .await;
    if let Err(err) = dropped {
        eprintln!("raptor-bench: could not drop database {name}: {err}");
    }
    let _ = admin.close().await;

    let report = outcome?;
    report.print();
    let path = report.write()?;
    println!("\nresults written to {}", path.display());
    Ok(report.checks.iter().all(|c| c.pass))
}

/// Sets up the app and runs every scenario.
async fn bench(options: PgConnectOptions) -> anyhow::Result<Report> {
    let pool = PgPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(Duration::from_secs(3))
        .connect_with(options)
        .await
        .context("could not connect to the bench database")?;
    MIGRATOR.run(&pool).await.context("migration failed")?;
    // Stored responses are encrypted, as `make run` and a production deployment configure
    // them, so sealing each completion and opening each replay is part of every figure.
    let idempotency = IdempotencyConfig {
        response_keys: ResponseKeys::parse(BENCH_RESPONSE_KEYS)
            .context("the bench's response key")?,
        ..IdempotencyConfig::default()
    };
    let state = ApiState::new(
        pool.clone(),
        ApiConfig::default(),
        idempotency,
        Arc::new(SystemClock),
    );
    // Production installs the recorder on the first scrape of /metrics; do it up front so the
    // per-request metrics cost is part of every figure.
    let _ = raptor_api::telemetry::prometheus();
    let server = Server::start(raptor_api::app(state.clone())).await?;
    let result = scenarios(&state, &pool, &server).await;
    server.stop().await;
    pool.close().await;
    result
}

async fn scenarios(state: &ApiState, pool: &PgPool, server: &Server) -> anyhow::Result<Report> {
    let http = Http::new(server.url(ORDERS))?;
    // AAPL 189.90 / 190.10: every market buy fills at 190.10.
    let (bid, ask) = (Decimal::new(18_990, 2), Decimal::new(19_010, 2));
    raptor_api::trading::set_quote(state, None, "AAPL", bid, ask)
        .await
        .map_err(|err| anyhow!("set_quote: {err}"))?;
    let postgres = postgres_info(pool).await?;

    println!("(a)+(b) keyed and unkeyed orders, {SEQUENTIAL_N} each, interleaved ...");
    let (keyed, unkeyed) = keyed_and_unkeyed(pool, &http).await?;
    println!("(c) replays, {SEQUENTIAL_N} ...");
    let replay = replay(pool, &http).await?;
    println!("(d) throughput, {CLIENTS} clients for {THROUGHPUT_WINDOW:?} ...");
    let throughput = throughput(pool, &http).await?;
    println!("(e) {DUPLICATES} duplicates of one key, {ROUNDS} rounds ...");
    let duplicates = duplicates(pool, &http).await?;
    println!("(f) quote updates over {RESTING} resting orders ...");
    let resting = resting(state, pool, &http).await?;

    let mut report = Report {
        machine: Machine {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            postgres,
        },
        overhead_p50_ms: keyed.p50_ms - unkeyed.p50_ms,
        overhead_mean_ms: keyed.mean_ms - unkeyed.mean_ms,
        keyed,
        unkeyed,
        replay,
        throughput,
        duplicates,
        resting,
        checks: Vec::new(),
    };
    report.checks = report.evaluate();
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// (a) and (b), interleaved on one user.
async fn keyed_and_unkeyed(pool: &PgPool, http: &Http) -> anyhow::Result<(Stats, Stats)> {
    let token = user(pool, "bench-sequential@example.com").await?.token;
    for _ in 0..WARM_UP_N {
        http.order(&token, Some(&new_key()))
            .await?
            .expect(201, false)?;
        http.order(&token, None).await?.expect(201, false)?;
    }
    let mut keyed = Vec::with_capacity(SEQUENTIAL_N);
    let mut unkeyed = Vec::with_capacity(SEQUENTIAL_N);
    for i in 0..SEQUENTIAL_N {
        let key = new_key();
        if i % 2 == 0 {
            keyed.push(http.order(&token, Some(&key)).await?.expect(201, false)?);
            unkeyed.push(http.order(&token, None).await?.expect(201, false)?);
        } else {
            unkeyed.push(http.order(&token, None).await?.expect(201, false)?);
            keyed.push(http.order(&token, Some(&key)).await?.expect(201, false)?);
        }
    }
    let keyed_busy = keyed.iter().sum();
    let unkeyed_busy = unkeyed.iter().sum();
    Ok((
        Stats::new(&mut keyed, Some(keyed_busy)),
        Stats::new(&mut unkeyed, Some(unkeyed_busy)),
    ))
}

/// (c): one key, executed once, then re-sent.
async fn replay(pool: &PgPool, http: &Http) -> anyhow::Result<Stats> {
    let bench_user = user(pool, "bench-replay@example.com").await?;
    let token = bench_user.token;
    let key = new_key();
    http.order(&token, Some(&key)).await?.expect(201, false)?;
    for _ in 0..WARM_UP_N {
        http.order(&token, Some(&key)).await?.expect(201, true)?;
    }
    let started = Instant::now();
    let mut samples = Vec::with_capacity(SEQUENTIAL_N);
    for _ in 0..SEQUENTIAL_N {
        samples.push(http.order(&token, Some(&key)).await?.expect(201, true)?);
    }
    let wall = started.elapsed();
    let executed = orders_of(pool, &[bench_user.id]).await?;
    if executed != 1 {
        bail!("replays executed the order: {executed} rows in paper_orders, expected 1");
    }
    Ok(Stats::new(&mut samples, Some(wall)))
}

/// (f): one account at the open-order cap; a quote update that evaluates every resting order,
/// then one that fills them all.
async fn resting(state: &ApiState, pool: &PgPool, http: &Http) -> anyhow::Result<Resting> {
    let token = user(pool, "bench-resting@example.com").await?.token;
    let quote = |bid: i64, ask: i64| {
        raptor_api::trading::set_quote(
            state,
            None,
            "MSFT",
            Decimal::new(bid, 2),
            Decimal::new(ask, 2),
        )
    };
    quote(40_000, 40_010)
        .await
        .map_err(|err| anyhow!("set_quote: {err}"))?;
    let body = r#"{"symbol":"MSFT","qty":"1","side":"buy","type":"limit","limit_price":"300.00","time_in_force":"gtc"}"#;
    for _ in 0..RESTING {
        http.post(&token, body).await?.expect(201, false)?;
    }
    let started = Instant::now();
    let evaluated = quote(39_000, 39_010)
        .await
        .map_err(|err| anyhow!("set_quote: {err}"))?;
    let evaluate_ms = started.elapsed().as_secs_f64() * 1000.0;
    if !evaluated.filled_order_ids.is_empty() {
        bail!("the evaluation-only update filled orders");
    }
    let started = Instant::now();
    let filled = quote(29_000, 29_010)
        .await
        .map_err(|err| anyhow!("set_quote: {err}"))?;
    let fill_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(Resting {
        orders: RESTING,
        evaluate_ms,
        fill_ms,
        filled: filled.filled_order_ids.len(),
    })
}

/// What one throughput client did.
struct ClientRun {
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
}

/// (d): `CLIENTS` users, each with its own client task, fresh keys, for `THROUGHPUT_WINDOW`.
async fn throughput(pool: &PgPool, http: &Http) -> anyhow::Result<Throughput> {
    let mut users = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        users.push(user(pool, &format!("bench-throughput-{i}@example.com")).await?);
    }
    let user_ids: Vec<i32> = users.iter().map(|u| u.id).collect();
    let tokens: Vec<String> = users.into_iter().map(|u| u.token).collect();
    // Warm-up: a few concurrent orders per client, which also opens the keep-alive connections.
    let mut warm = JoinSet::new();
    for token in &tokens {
        let (http, token) = (http.clone(), token.clone());
        warm.spawn(async move {
            for _ in 0..5 {
                http.order(&token, Some(&new_key()))
                    .await?
                    .expect(201, false)?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = warm.join_next().await {
        done.context("warm-up task")??;
    }

    let before = orders_of(pool, &user_ids).await?;
    let started = Instant::now();
    let deadline = started + THROUGHPUT_WINDOW;
    let mut clients = JoinSet::new();
    for token in tokens {
        let http = http.clone();
        clients.spawn(async move {
            let mut run = ClientRun {
                latencies: Vec::new(),
                errors: 0,
                first_error: None,
            };
            for _ in 0..THROUGHPUT_CAP_PER_CLIENT {
                if Instant::now() >= deadline {
                    break;
                }
                let outcome = match http.order(&token, Some(&new_key())).await {
                    Ok(answer) => answer.expect(201, false),
                    Err(err) => Err(err),
                };
                match outcome {
                    Ok(latency) => run.latencies.push(latency),
                    Err(err) => {
                        run.errors += 1;
                        run.first_error.get_or_insert_with(|| format!("{err:#}"));
                    }
                }
            }
            run
        });
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    while let Some(done) = clients.join_next().await {
        let run = done.context("throughput client task")?;
        latencies.extend(run.latencies);
        errors += run.errors;
        first_error = first_error.or(run.first_error);
    }
    let wall = started.elapsed();
    let rows = orders_of(pool, &user_ids).await? - before;
    let orders = latencies.len();
    if let Some(err) = &first_error {
        eprintln!("throughput: {errors} failed requests, the first: {err}");
    }
    Ok(Throughput {
        clients: CLIENTS,
        window_s: THROUGHPUT_WINDOW.as_secs_f64(),
        wall_s: wall.as_secs_f64(),
        orders,
        rows_in_paper_orders: rows,
        errors,
        orders_per_s: orders as f64 / wall.as_secs_f64(),
        latency: Stats::new(&mut latencies, Some(wall)),
    })
}

/// (e): `DUPLICATES` requests with one key, released together by a barrier.
async fn duplicates(pool: &PgPool, http: &Http) -> anyhow::Result<Duplicates> {
    let BenchUser { id, token } = user(pool, "bench-duplicates@example.com").await?;
    let user_id = [id];
    // Round 0 is the warm-up: it opens the client's 64 keep-alive connections.
    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for round in 0..=ROUNDS {
        let before = orders_of(pool, &user_id).await?;
        let key = new_key();
        // The extra party is this task, which starts the clock when it passes the barrier too.
        let barrier = Arc::new(Barrier::new(DUPLICATES + 1));
        let mut tasks = JoinSet::new();
        for _ in 0..DUPLICATES {
            let (http, token, key, barrier) =
                (http.clone(), token.clone(), key.clone(), barrier.clone());
            tasks.spawn(async move {
                barrier.wait().await;
                http.order(&token, Some(&key)).await
            });
        }
        barrier.wait().await;
        let released = Instant::now();
        let mut summary = Round {
            round,
            executions: 0,
            fresh: 0,
            replayed: 0,
            in_flight: 0,
            other: 0,
            wall_ms: 0.0,
        };
        let mut round_winners = Vec::new();
        let mut round_losers = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let answer = done.context("duplicate task")??;
            match (answer.status, answer.replayed) {
                (201, Some(false)) => {
                    summary.fresh += 1;
                    round_winners.push(answer.elapsed);
                }
                (201, Some(true)) => {
                    summary.replayed += 1;
                    round_losers.push(answer.elapsed);
                }
                (409, _) if answer.body.contains("idempotency_in_flight") => {
                    summary.in_flight += 1;
                    round_losers.push(answer.elapsed);
                }
                _ => {
                    summary.other += 1;
                    eprintln!(
                        "duplicates round {round}: unexpected answer {} {}",
                        answer.status, answer.body
                    );
                    round_losers.push(answer.elapsed);
                }
            }
        }
        summary.wall_ms = released.elapsed().as_secs_f64() * 1000.0;
        summary.executions = orders_of(pool, &user_id).await? - before;
        if round > 0 {
            rounds.push(summary);
            winners.extend(round_winners);
            losers.extend(round_losers);
        }
    }
    let exactly_once = rounds
        .iter()
        .all(|r| r.executions == 1 && r.fresh == 1 && r.other == 0);
    Ok(Duplicates {
        clients: DUPLICATES,
        exactly_once,
        winners: Stats::new(&mut winners, None),
        losers: Stats::new(&mut losers, None),
        rounds,
    })
}

// ---------------------------------------------------------------------------------------------
// Setup helpers

/// A bench user: its id (to count its orders) and bearer token.
struct BenchUser {
    id: i32,
    token: String,
}

/// A user with cash enough never to run out.
async fn user(pool: &PgPool, email: &str) -> anyhow::Result<BenchUser> {
    let mut tx = pool.begin().await?;
    let created = accounts::create_user(&mut tx, email, Role::User, Decimal::from(100_000_000))
        .await
        .map_err(|err| anyhow!("create_user {email}: {err}"))?;
    tx.commit().await?;
    Ok(BenchUser {
        id: created.user_id,
        token: created.token,
    })
}

/// Rows in `paper_orders` owned by `user_ids`.
async fn orders_of(pool: &PgPool, user_ids: &[i32]) -> anyhow::Result<usize> {
    let count: i64 =
        sqlx::query_scalar("select count(*) from paper_orders where user_id = any($1)")
            .bind(user_ids)
            .fetch_one(pool)
            .await
            .context("count paper_orders")?;
    usize::try_from(count).context("negative count")
}

async fn postgres_info(pool: &PgPool) -> anyhow::Result<PostgresInfo> {
    let show = |setting: &'static str| async move {
        sqlx::query_scalar::<_, String>(&format!("show {setting}"))
            .fetch_one(pool)
            .await
            .with_context(|| format!("show {setting}"))
    };
    Ok(PostgresInfo {
        version: show("server_version").await?,
        fsync: show("fsync").await?,
        synchronous_commit: show("synchronous_commit").await?,
    })
}

fn new_key() -> String {
    Uuid::new_v4().to_string()
}

/// The server under test, on 127.0.0.1:0.
struct Server {
    addr: std::net::SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(app: axum::Router) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("bind 127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let (shutdown, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(raptor_server::serve(listener, app, async {
            let _ = rx.await;
        }));
        Ok(Self {
            addr,
            shutdown,
            task,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Graceful shutdown, bounded: a server that does not stop in 10 s is abandoned.
    async fn stop(self) {
        let _ = self.shutdown.send(());
        match tokio::time::timeout(Duration::from_secs(10), self.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(err))) => eprintln!("raptor-bench: server error: {err}"),
            Ok(Err(err)) => eprintln!("raptor-bench: server task: {err}"),
            Err(_) => eprintln!("raptor-bench: the server did not stop within 10 s"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// A keep-alive client posting the benchmark order.
#[derive(Clone)]
struct Http {
    client: reqwest::Client,
    url: Arc<str>,
}

/// One response, timed from just before the request was built to the last body byte.
struct Answer {
    status: u16,
    /// `Idempotent-Replayed`, when present.
    replayed: Option<bool>,
    body: String,
    elapsed: Duration,
}

impl Answer {
    /// The latency, if the answer is the expected one.
    fn expect(self, status: u16, replayed: bool) -> anyhow::Result<Duration> {
        if self.status != status || self.replayed != Some(replayed) {
            bail!(
                "expected {status} with Idempotent-Replayed: {replayed}, got {} ({:?}): {}",
                self.status,
                self.replayed,
                self.body
            );
        }
        Ok(self.elapsed)
    }
}

impl Http {
    fn new(url: String) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(128)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("reqwest client")?;
        Ok(Self {
            client,
            url: url.into(),
        })
    }

    /// POSTs `body` to the orders URL without a key.
    async fn post(&self, token: &str, body: &'static str) -> anyhow::Result<Answer> {
        let started = Instant::now();
        let response = self
            .client
            .post(&*self.url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .context("POST /api/trading/orders")?;
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .map(|v| v == "true");
        let body = response.text().await.context("read the response body")?;
        Ok(Answer {
            status,
            replayed,
            body,
            elapsed: started.elapsed(),
        })
    }

    async fn order(&self, token: &str, key: Option<&str>) -> anyhow::Result<Answer> {
        let started = Instant::now();
        let mut request = self
            .client
            .post(&*self.url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(ORDER_BODY);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await.context("POST /api/trading/orders")?;
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .map(|v| v == "true");
        let body = response.text().await.context("read the response body")?;
        Ok(Answer {
            status,
            replayed,
            body,
            elapsed: started.elapsed(),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Figures

/// Latency percentiles of one scenario.
#[derive(Debug, Clone, Serialize)]
struct Stats {
    n: usize,
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    mean_ms: f64,
    /// Requests over wall time (for one client: 1 / mean); `None` where it means nothing (the
    /// duplicate rounds, whose requests are all released at once).
    rps: Option<f64>,
}

impl Stats {
    /// `wall`: the time the requests took together, `None` when a rate would mean nothing.
    fn new(samples: &mut [Duration], wall: Option<Duration>) -> Self {
        samples.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        // Nearest rank: the smallest sample with at least p% of the samples at or below it.
        let rank = |p: f64| {
            let n = samples.len();
            let index = ((p / 100.0) * n as f64).ceil() as usize;
            samples
                .get(index.clamp(1, n.max(1)) - 1)
                .map_or(0.0, |d| ms(*d))
        };
        let n = samples.len();
        let total: Duration = samples.iter().sum();
        Self {
            n,
            p50_ms: rank(50.0),
            p95_ms: rank(95.0),
            p99_ms: rank(99.0),
            max_ms: samples.last().map_or(0.0, |d| ms(*d)),
            mean_ms: if n == 0 { 0.0 } else { ms(total) / n as f64 },
            rps: wall
                .filter(|w| !w.is_zero())
                .map(|w| n as f64 / w.as_secs_f64()),
        }
    }
}

#[derive(Debug, Serialize)]
struct Throughput {
    clients: usize,
    window_s: f64,
    /// From the start until the last in-flight request answered.
    wall_s: f64,
    /// Successful (201) orders.
    orders: usize,
    /// Orders the clients' users own in `paper_orders` afterwards: must equal `orders`.
    rows_in_paper_orders: usize,
    errors: usize,
    orders_per_s: f64,
    latency: Stats,
}

#[derive(Debug, Serialize)]
struct Round {
    round: usize,
    /// New rows in `paper_orders`.
    executions: usize,
    /// 201 with `Idempotent-Replayed: false`.
    fresh: usize,
    /// 201 with `Idempotent-Replayed: true`.
    replayed: usize,
    /// 409 `idempotency_in_flight`.
    in_flight: usize,
    /// Anything else.
    other: usize,
    /// From the barrier's release to the last answer.
    wall_ms: f64,
}

#[derive(Debug, Serialize)]
struct Duplicates {
    clients: usize,
    exactly_once: bool,
    winners: Stats,
    losers: Stats,
    rounds: Vec<Round>,
}

#[derive(Debug, Serialize)]
struct PostgresInfo {
    version: String,
    fsync: String,
    synchronous_commit: String,
}

#[derive(Debug, Serialize)]
struct Machine {
    cpus: usize,
    postgres: PostgresInfo,
}

#[derive(Debug, Serialize)]
struct Check {
    name: &'static str,
    target: String,
    measured: String,
    pass: bool,
}

impl Check {
    fn below(name: &'static str, measured: f64, limit: f64, unit: &str) -> Self {
        Self {
            name,
            target: format!("< {limit} {unit}"),
            measured: format!("{measured:.2} {unit}"),
            pass: measured < limit,
        }
    }

    fn above(name: &'static str, measured: f64, limit: f64, unit: &str) -> Self {
        Self {
            name,
            target: format!("> {limit} {unit}"),
            measured: format!("{measured:.1} {unit}"),
            pass: measured > limit,
        }
    }

    fn holds(name: &'static str, target: &str, measured: String, pass: bool) -> Self {
        Self {
            name,
            target: target.to_owned(),
            measured,
            pass,
        }
    }
}

/// Scenario (f).
#[derive(Debug, Clone, Serialize)]
struct Resting {
    orders: usize,
    evaluate_ms: f64,
    fill_ms: f64,
    filled: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: Machine,
    keyed: Stats,
    unkeyed: Stats,
    replay: Stats,
    /// keyed p50 - unkeyed p50.
    overhead_p50_ms: f64,
    overhead_mean_ms: f64,
    throughput: Throughput,
    duplicates: Duplicates,
    resting: Resting,
    checks: Vec<Check>,
}

impl Report {
    fn evaluate(&self) -> Vec<Check> {
        let t = &self.throughput;
        let executions: Vec<usize> = self
            .duplicates
            .rounds
            .iter()
            .map(|r| r.executions)
            .collect();
        vec![
            Check::below(
                "keyed order p99",
                self.keyed.p99_ms,
                TARGET_KEYED_P99_MS,
                "ms",
            ),
            Check::below("replay p99", self.replay.p99_ms, TARGET_REPLAY_P99_MS, "ms"),
            Check::below(
                "idempotency overhead at p50",
                self.overhead_p50_ms,
                TARGET_OVERHEAD_P50_MS,
                "ms",
            ),
            Check::above("throughput", t.orders_per_s, TARGET_THROUGHPUT, "orders/s"),
            Check::holds(
                "throughput: no errors, one row per order",
                "0 errors, rows = orders",
                format!(
                    "{} errors, {} rows for {} orders",
                    t.errors, t.rows_in_paper_orders, t.orders
                ),
                t.errors == 0 && t.rows_in_paper_orders == t.orders,
            ),
            Check::holds(
                "duplicates: exactly one execution per round",
                "1 per round",
                format!("{executions:?}"),
                self.duplicates.exactly_once,
            ),
            Check::below(
                "quote update evaluating 500 resting orders",
                self.resting.evaluate_ms,
                TARGET_QUOTE_UPDATE_MS,
                "ms",
            ),
            Check::below(
                "quote update filling 500 resting orders",
                self.resting.fill_ms,
                TARGET_QUOTE_UPDATE_MS,
                "ms",
            ),
            Check::holds(
                "quote update fills every resting order once",
                "500 filled",
                format!("{} filled", self.resting.filled),
                self.resting.filled == self.resting.orders,
            ),
        ]
    }

    fn print(&self) {
        let m = &self.machine;
        println!(
            "\nraptor-bench: {} CPUs, Postgres {} (fsync {}, synchronous_commit {})\n",
            m.cpus, m.postgres.version, m.postgres.fsync, m.postgres.synchronous_commit
        );
        println!(
            "{:<36} {:>6} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "scenario (POST /api/trading/orders)",
            "n",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "req/s"
        );
        let row = |name: &str, s: &Stats| {
            let rps = s.rps.map_or_else(|| "-".to_owned(), |r| format!("{r:.1}"));
            println!(
                "{name:<36} {:>6} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {rps:>9}",
                s.n, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
            );
        };
        row("(a) fresh key, 1 client", &self.keyed);
        row("(b) no key, 1 client", &self.unkeyed);
        row("(c) replay of one key, 1 client", &self.replay);
        row(
            &format!("(d) fresh keys, {} clients", self.throughput.clients),
            &self.throughput.latency,
        );
        row(
            &format!("(e) {} duplicates: winners", self.duplicates.clients),
            &self.duplicates.winners,
        );
        row(
            &format!("(e) {} duplicates: losers", self.duplicates.clients),
            &self.duplicates.losers,
        );

        println!(
            "\nidempotency overhead (a - b): {:.2} ms at p50, {:.2} ms mean",
            self.overhead_p50_ms, self.overhead_mean_ms
        );
        let t = &self.throughput;
        println!(
            "throughput: {} orders in {:.2} s = {:.1} orders/s ({} errors, {} rows)",
            t.orders, t.wall_s, t.orders_per_s, t.errors, t.rows_in_paper_orders
        );
        println!(
            "duplicates, per round: executions / fresh 201 / replayed 201 / 409 in_flight / other, \
             and the time until the last answer"
        );
        for r in &self.duplicates.rounds {
            println!(
                "  round {:>2}: {} / {} / {:>2} / {:>2} / {}   {:>6.1} ms",
                r.round, r.executions, r.fresh, r.replayed, r.in_flight, r.other, r.wall_ms
            );
        }
        let r = &self.resting;
        println!(
            "resting: {} orders; quote update evaluating them {:.1} ms, filling them {:.1} ms \
             ({} filled)",
            r.orders, r.evaluate_ms, r.fill_ms, r.filled
        );

        println!("\ntargets:");
        for c in &self.checks {
            println!(
                "  {}  {:<44} target {:<24} measured {}",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.target,
                c.measured
            );
        }
    }

    /// Writes the report as JSON to `$CARGO_TARGET_DIR/bench/results.json` (default
    /// `<workspace>/target`).
    fn write(&self) -> anyhow::Result<PathBuf> {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the tests package has no parent directory")?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| workspace.join("target"), PathBuf::from);
        let dir = target.join("bench");
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let path = dir.join("results.json");
        let json = serde_json::to_string_pretty(self).context("serialise the report")?;
        std::fs::write(&path, json + "\n").with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }
}
