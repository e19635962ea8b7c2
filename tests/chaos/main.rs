//! `raptor-chaos` (`make chaos`): fault injection against real processes.
//!
//! It starts its own Postgres cluster (`initdb` into `target/chaos/pg`, a free port, as the
//! `postgres` user when run as root), applies the migrations with `raptor migrate`, and spawns
//! three `raptor serve` replicas (the release binary) on free ports, all on 127.0.0.1. Then it
//! runs the scenarios (docs/SCALING.md, "What the chaos suite measured"):
//!
//! 1. kill -9 mid-transaction (the driver holds the account row lock), retry after the stale
//!    threshold on a restarted replica: no rows from the killed attempt, one execution; then
//!    (1b) a replica still on longer timeouts (a rolling deploy) whose attempt is taken over
//!    while it waits on a lock: when it resumes it must be fenced off, one execution;
//! 2. `pg_ctl stop -m fast` and `-m immediate` (then start) under keyed load from 32 clients
//!    across 3 replicas: every 201 is a committed, audited order; no key twice; only 201, 503
//!    or 409 in flight; every replica ready and taking orders within 5 s, without a restart;
//! 3. 1,000 keys x 8 concurrent copies across the replicas: 1,000 executions; every copy the
//!    replay or 409;
//! 4. pool exhaustion (pool of 4, 40 clients, the quote row held): 503 with Retry-After, every
//!    answer within the request timeout, orders succeed once the load drops;
//! 5. scenarios 2 and 3 through PgBouncer 1.18 in transaction pooling, the replicas in
//!    `RAPTOR_DB_POOL_MODE=transaction` with role settings; the server log must show no session
//!    state and no named statement; (5d) a completed Tier 2 key whose row is held while 12
//!    clients retry it through a saturated store pool is never executed again (409/503 only, no
//!    `fail_open`); (5e) a trade-updates stream gets an order's events within 1 s with its
//!    listener on a session of its own (`RAPTOR_LISTEN_DATABASE_URL`), and a replica without
//!    that setting refuses to start (a control); a control shows session pool mode failing
//!    through it;
//! 6. a slow database (pg_sleep in a trigger): no request past the request timeout, no key taken
//!    over while its first attempt runs, the configuration refuses stale < request timeout;
//! 7. the kill switch flipped off and on under load: every replica sees it within 1 s, orders
//!    per account equal the 201s;
//! 8. failover under keyed load on a cluster of its own (`ha.rs`, in `target/chaos/ha`): etcd,
//!    two PostgreSQL nodes under Patroni with synchronous replication, HAProxy routing to the
//!    leader, 3 replicas on it; the leader's postmaster killed (round 1), then after a stalled
//!    WAL sender its Patroni and postmaster (round 2, the failover back), then the leader frozen
//!    and fenced (round 3): no acknowledged order lost, no key twice, on either node, replicas
//!    back without a restart, kill to first 201 ≤ 15 s; (8b) the control, the same run asynchronous, must lose acknowledged orders;
//!    (8c) keyed order latency with and without the synchronous standby (`failover.rs`);
//! 9. a restore drill on that cluster: pgBackRest full backup under load, WAL archived, a
//!    point-in-time restore into a new data directory and the service on it: everything
//!    acknowledged before the target there, key rows and orders together, the books reconcile.
//!
//! `--quick` shortens every scenario (what `.ci/run` runs); `--only 1,3` picks
//! scenarios. Exit status: 0 all held, 1 a violation, 2 the run itself failed. Every process it
//! started is killed on exit, also on error or Ctrl-C.

mod env;
mod failover;
mod ha;
mod history;
mod scenarios;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use sqlx::Connection;

use crate::env::{Bouncer, Cluster, Http, Replica};
use crate::scenarios::{Outcome, World};

#[derive(Debug, Parser)]
#[command(
    name = "raptor-chaos",
    about = "Fault injection against raptor replicas and Postgres"
)]
struct Args {
    /// The CI subset: every scenario, shorter.
    #[arg(long)]
    quick: bool,
    /// Scenarios to run (comma-separated numbers 1-9); all by default.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=9))]
    only: Vec<u8>,
    /// Scenario 8, round 3: instead of fencing the frozen primary after the failover (kill -9,
    /// as a watchdog would reset its machine), let it wake up this many seconds after the
    /// promotion: the zombie-primary experiment of docs/SCALING.md.
    #[arg(long, value_name = "SECS")]
    thaw_after: Option<u64>,
}

const RUN_TIMEOUT: Duration = Duration::from_secs(14 * 60);

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(RUN_TIMEOUT, run(&args)) => {
            outcome.unwrap_or_else(|_| Err(anyhow::anyhow!("the run exceeded {RUN_TIMEOUT:?}")))
        }
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("raptor-chaos: at least one invariant was violated");
            ExitCode::from(1)
        }
        Err(err) => {
            eprintln!("raptor-chaos: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args) -> anyhow::Result<bool> {
    let started = Instant::now();
    let wanted = |n: u8| args.only.is_empty() || args.only.contains(&n);
    let dir = raptor_integration_tests::target_dir()?.join("chaos");
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::remove_file(path)?;
        }
    }
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut figures = Vec::new();
    if (1..=7).any(wanted) {
        single_server(args, &dir, &mut outcomes, &mut figures).await?;
    }
    if wanted(8) || wanted(9) {
        highly_available(args, &dir, &mut outcomes).await?;
    }
    print_summary(&outcomes, &figures, started.elapsed());
    write_summary(&dir, &outcomes, &figures, started.elapsed())?;
    Ok(outcomes.iter().all(|o| o.violations.is_empty()))
}

/// Scenarios 8 and 9 on the highly available cluster (`ha.rs`, `failover.rs`).
async fn highly_available(
    args: &Args,
    dir: &std::path::Path,
    outcomes: &mut Vec<Outcome>,
) -> anyhow::Result<()> {
    let wanted = |n: u8| args.only.is_empty() || args.only.contains(&n);
    println!("\n== HA cluster: etcd, Patroni x 2, HAProxy, pgBackRest ==");
    let mut world =
        failover::HaWorld::start(dir, args.quick, args.thaw_after.map(Duration::from_secs)).await?;
    if wanted(8) {
        let name = "8 failover under keyed load (synchronous replication)";
        println!("\n== {name} ==");
        let t = Instant::now();
        world.http.history.take();
        let mut o = failover::run(&mut world, name, true, &[1, 2, 3])
            .await
            .map(|(o, f)| {
                println!("  figures: {}", f.summary);
                o
            })
            .unwrap_or_else(|err| could_not_run(name, &err));
        let read = history::final_reads(&world.http, &world.bases(), FINAL_READS).await;
        o.fact(format!("{read} keys read once more after the scenario"));
        histories(&world.http.history.take(), &mut o, true);
        o.secs = t.elapsed().as_secs_f64();
        outcomes.push(o);
        println!("\n== 8b control: the same run with asynchronous replication ==");
        let rounds: &[u8] = if args.quick { &[2] } else { &[1, 2] };
        let name = "8b control: asynchronous replication";
        let mut control = timed(name, failover::control(&mut world, rounds)).await;
        histories(&world.http.history.take(), &mut control, false);
        outcomes.push(control);
        println!("\n== 8c synchronous standby latency ==");
        let name = "8c synchronous standby latency";
        outcomes.push(timed(name, failover::latency(&world)).await);
    }
    if wanted(9) {
        let name = "9 restore drill (pgBackRest, point in time)";
        println!("\n== {name} ==");
        outcomes.push(timed(name, failover::restore_drill(&mut world)).await);
    }
    world.stop().await;
    Ok(())
}

/// Scenarios 1-7, on one Postgres of the driver's own (`target/chaos/pg`).
async fn single_server(
    args: &Args,
    dir: &std::path::Path,
    outcomes: &mut Vec<Outcome>,
    figures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let wanted = |n: u8| args.only.is_empty() || args.only.contains(&n);
    let dir = dir.to_path_buf();
    println!("raptor-chaos: cluster in {}", dir.join("pg").display());
    let cluster = Cluster::start(&dir)?;
    {
        let mut admin =
            sqlx::PgConnection::connect_with(&cluster.options("postgres", "postgres")).await?;
        sqlx::query(&format!("create database {}", env::DATABASE))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
    }
    let base_env = env::base_env(&cluster.url("postgres"), &[]);
    env::raptor_cli(&base_env, &["migrate"]).await?;
    env::raptor_cli(
        &base_env,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    )
    .await?;
    let operator = env::users(&base_env, "operator", 1, "operator")
        .await?
        .remove(0);
    let db = cluster.pool(8).await?;
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(Replica::spawn(&dir, &format!("replica-{i}"), base_env.clone()).await?);
    }
    println!(
        "raptor-chaos: Postgres on 127.0.0.1:{}, replicas on {:?} (set-up {:.1} s)",
        cluster.port,
        replicas.iter().map(|r| r.port).collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
    let mut world = World {
        dir: dir.clone(),
        cluster,
        db,
        http: Http::new()?,
        replicas,
        operator,
        quick: args.quick,
    };
    let quick = world.quick;

    let history = world.http.history.clone();
    macro_rules! scenario {
        ($n:expr, $title:expr, $body:expr) => {
            if wanted($n) {
                println!("\n== {} ==", $title);
                history.take();
                let mut outcome = timed($title, async { $body }).await;
                // The kill switch turns deduplication off on purpose: its keys are not checked.
                if $n != 7 {
                    let read = history::final_reads(&world.http, &world.bases(), FINAL_READS).await;
                    outcome.fact(format!("{read} keys read once more after the scenario"));
                    histories(&history.take(), &mut outcome, true);
                }
                outcomes.push(outcome);
            }
        };
    }

    scenario!(
        1,
        "1 kill -9 mid-transaction",
        scenarios::kill9(&mut world).await
    );
    scenario!(
        1,
        "1b late attempt fenced off",
        scenarios::late_attempt(&world).await
    );
    let bases = world.bases();
    let load = if quick { 15 } else { 30 };
    scenario!(
        2,
        "2 Postgres restart under load",
        scenarios::pg_restart(&world, "2 Postgres restart under load", &bases, load).await
    );
    let keys = if quick { 300 } else { 1000 };
    scenario!(
        3,
        "3 duplicates across replicas",
        scenarios::duplicates(&world, "3 duplicates across replicas", &bases, keys).await
    );
    scenario!(
        4,
        "4 pool exhaustion",
        scenarios::pool_exhaustion(&world, if quick { 5 } else { 8 })
            .await
            .map(|(o, f)| {
                figures.push(f);
                o
            })
    );
    if wanted(5) {
        history.take();
        let mut five = bouncer(&world, quick).await;
        history::final_reads(&world.http, &world.bases(), FINAL_READS).await;
        if let Some(last) = five.last_mut() {
            histories(&history.take(), last, true);
        }
        outcomes.extend(five);
    }
    scenario!(6, "6 slow database", scenarios::slow_database(&world).await);
    scenario!(
        7,
        "7 kill switch under load",
        scenarios::kill_switch(&world, if quick { 6 } else { 9 }).await
    );

    for replica in &mut world.replicas {
        replica.kill9().await?;
    }
    world.db.close().await;
    Ok(())
}

/// Scenario 5: PgBouncer 1.18 in transaction pooling, as Debian ships it (no reset query after
/// a transaction, no prepared-statement support). The roles carry the session settings; the
/// replicas run `RAPTOR_DB_POOL_MODE=transaction`. Scenarios 2 and 3 run through it, and the
/// server log must show no session state and no named statement from the replicas; a trade
/// stream gets its events with the listener on a session of its own, and (a control) a replica
/// without it refuses to start. Then a control: replicas left in session pool mode
/// must fail through the same pooler, so the scenario can tell the two apart.
async fn bouncer(world: &World, quick: bool) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let t = Instant::now();
    println!("\n== 5 PgBouncer, transaction pooling: scenarios 2 and 3 through it ==");
    let mut setup = Outcome::new("5 PgBouncer transaction pooling set-up");
    let started = async {
        scenarios::prepare_roles(world).await?;
        for sql in [
            "alter role raptor set log_statement = 'all'",
            "alter role raptor_idem set log_statement = 'all'",
        ] {
            sqlx::query(sql).execute(&world.db).await?;
        }
        let bouncer = Bouncer::start(&world.dir, &world.cluster, "transaction").await?;
        setup.fact(format!(
            "pgbouncer {} on 127.0.0.1:{} ({}): pool_mode=transaction, default_pool_size=20, \
             ignore_startup_parameters=extra_float_digits, no server_reset_query_always",
            scenarios::pgbouncer_version(),
            bouncer.port,
            bouncer.ini.display()
        ));
        // The settings come from the roles on every server session PgBouncer hands out.
        let seen = scenarios::role_settings_via(&bouncer, 30).await?;
        setup.check(
            seen.iter().all(|(_, ok)| *ok),
            format!(
                "30 transactions per role through PgBouncer all saw the role's settings: {:?}",
                seen.iter()
                    .map(|(s, _)| s.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
            ),
        );
        let from = scenarios::log_len(world);
        let replicas = scenarios::bouncer_replicas(world, &bouncer, "transaction").await?;
        setup.check(
            true,
            "3 replicas with RAPTOR_DB_POOL_MODE=transaction, RAPTOR_DB_SESSION_SETTINGS=role, \
             IDEMPOTENCY_STORE_DATABASE_URL as role raptor_idem: the start-up check of the \
             roles' settings passed through the pooler",
        );
        Ok::<_, anyhow::Error>((bouncer, replicas, from))
    }
    .await;
    let (bouncer, mut replicas, from) = match started {
        Ok(started) => started,
        Err(err) => {
            setup.check(false, format!("set-up failed: {err:#}"));
            setup.secs = t.elapsed().as_secs_f64();
            outcomes.push(setup);
            reset_log_statement(world, &mut outcomes).await;
            return outcomes;
        }
    };
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let name = "5a restart via PgBouncer (transaction pooling)";
    let load = if quick { 15 } else { 24 };
    let o2 = timed(name, scenarios::pg_restart(world, name, &bases, load)).await;
    let name = "5b duplicates via PgBouncer (transaction pooling)";
    let keys = if quick { 300 } else { 1000 };
    let o3 = timed(name, scenarios::duplicates(world, name, &bases, keys)).await;
    let name = "5d busy store never re-runs a Tier 2 key (transaction pooling)";
    let o4 = timed(name, scenarios::busy_store_tier2(world, &bouncer, name)).await;
    // Read before 5e, whose listener sends LISTEN on a session of its own (role raptor, direct).
    session_state(world, from, &mut setup).await;
    let name = "5e trade stream with the listener's own session (transaction pooling)";
    let o5 = timed(name, scenarios::trade_stream(world, &bouncer, name, true)).await;
    let name = "5e control: without the listener's own session a replica refuses to start";
    let o6 = timed(name, scenarios::trade_stream(world, &bouncer, name, false)).await;
    for replica in &mut replicas {
        let _ = replica.kill9().await;
    }
    setup.secs = t.elapsed().as_secs_f64() - o2.secs - o3.secs - o4.secs - o5.secs - o6.secs;
    outcomes.push(setup);
    outcomes.extend([o2, o3, o4, o5, o6]);

    let t4 = Instant::now();
    println!("\n== 5c control: session pool mode through transaction pooling must fail ==");
    let mut control = Outcome::new("5c control: session pool mode through the pooler");
    session_mode_fails(world, &bouncer, quick, &mut control).await;
    control.secs = t4.elapsed().as_secs_f64();
    outcomes.push(control);
    bouncer.stop().await;
    reset_log_statement(world, &mut outcomes).await;
    outcomes
}

/// Keys sent once more after each checked scenario (`history::final_reads`).
const FINAL_READS: usize = 200;

/// Checks the keyed orders a scenario sent (`history.rs`): every key's answers must be a
/// write-once register's history. `must_hold`: false for a control, whose history must fail.
fn histories(records: &[history::Record], outcome: &mut Outcome, must_hold: bool) {
    let verdict = history::check(records);
    let summary = format!(
        "histories: {} keys, {} keyed orders ({} indeterminate), {} not linearizable",
        verdict.keys,
        verdict.requests,
        verdict.indeterminate,
        verdict.violations.len()
    );
    if must_hold {
        outcome.check(verdict.violations.is_empty(), summary);
        for v in verdict.violations.iter().take(5) {
            outcome.check(false, v.clone());
        }
    } else {
        outcome.check(
            !verdict.violations.is_empty(),
            format!("{summary}: the checker rejects the control, as it must"),
        );
        if let Some(v) = verdict.violations.first() {
            outcome.fact(format!("first: {v}"));
        }
    }
}

/// Runs one scenario: its outcome, or the error that stopped it as a violation; timed.
async fn timed(
    name: &str,
    body: impl std::future::Future<Output = anyhow::Result<Outcome>>,
) -> Outcome {
    let t = Instant::now();
    let mut outcome = body.await.unwrap_or_else(|err| could_not_run(name, &err));
    outcome.secs = t.elapsed().as_secs_f64();
    outcome
}

fn could_not_run(name: &str, err: &anyhow::Error) -> Outcome {
    let mut o = Outcome::new(name);
    o.check(false, format!("the scenario could not run: {err:#}"));
    o
}

async fn reset_log_statement(world: &World, outcomes: &mut [Outcome]) {
    for sql in [
        "alter role raptor reset log_statement",
        "alter role raptor_idem reset log_statement",
    ] {
        if let Err(err) = sqlx::query(sql).execute(&world.db).await {
            if let Some(last) = outcomes.last_mut() {
                last.check(false, format!("{sql}: {err}"));
            }
        }
    }
}

/// What reached Postgres from the replicas' roles since `from` (log_statement = all): no
/// session state, and (transaction pooling) only unnamed statements.
async fn session_state(world: &World, from: u64, out: &mut Outcome) {
    match scenarios::session_state_in_log(world, from).await {
        Ok((unnamed, named, session)) => {
            out.check(
                named == 0 && unnamed > 0,
                format!(
                    "server log of roles raptor/raptor_idem: {unnamed} executions of unnamed \
                     statements, {named} of named (sqlx_s_*) ones"
                ),
            );
            out.check(
                session.is_empty(),
                format!(
                    "no session state sent (SET, PREPARE, LISTEN, session advisory locks, temp \
                     tables): {} found {:?}",
                    session.len(),
                    session.iter().take(3).collect::<Vec<_>>()
                ),
            );
        }
        Err(err) => out.check(false, format!("could not read the server log: {err:#}")),
    }
}

/// The control: replicas in `RAPTOR_DB_POOL_MODE=session` (named statements, lone statements
/// outside a transaction block) through the same pooler either refuse to start or break
/// under scenario 3's load. Were they to pass, the scenario above would prove nothing.
async fn session_mode_fails(world: &World, bouncer: &Bouncer, quick: bool, out: &mut Outcome) {
    match scenarios::bouncer_replicas(world, bouncer, "session").await {
        Err(err) => out.check(
            true,
            format!("replicas in session pool mode refused to start: {err:#}"),
        ),
        Ok(mut replicas) => {
            let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
            let keys = if quick { 100 } else { 200 };
            let name = "control";
            let broken = scenarios::duplicates(world, name, &bases, keys)
                .await
                .unwrap_or_else(|err| could_not_run(name, &err));
            let errors = replicas
                .iter()
                .map(|r| {
                    std::fs::read_to_string(&r.log)
                        .unwrap_or_default()
                        .matches("prepared statement")
                        .count()
                })
                .sum::<usize>();
            out.check(
                !broken.violations.is_empty(),
                format!(
                    "replicas in session pool mode started but broke under {keys} keys x 8: \
                     {} violations (first: {}); {errors} \"prepared statement\" errors in their logs",
                    broken.violations.len(),
                    broken.violations.first().map_or("none", String::as_str)
                ),
            );
            for replica in &mut replicas {
                let _ = replica.kill9().await;
            }
        }
    }
}

fn table(outcomes: &[Outcome], total: Duration) -> String {
    let mut text = String::new();
    text.push_str("| scenario | result | seconds | violations |\n|---|---|---|---|\n");
    for o in outcomes {
        text.push_str(&format!(
            "| {} | {} | {:.1} | {} |\n",
            o.name,
            if o.violations.is_empty() {
                "PASS"
            } else {
                "FAIL"
            },
            o.secs,
            if o.violations.is_empty() {
                "-".to_owned()
            } else {
                o.violations.join("; ")
            }
        ));
    }
    text.push_str(&format!("\ntotal {:.1} s\n", total.as_secs_f64()));
    text
}

fn print_summary(outcomes: &[Outcome], figures: &[String], total: Duration) {
    println!("\n== summary ==\n{}", table(outcomes, total));
    for f in figures {
        println!("scenario 4 figures: {f}");
    }
}

fn write_summary(
    dir: &std::path::Path,
    outcomes: &[Outcome],
    figures: &[String],
    total: Duration,
) -> anyhow::Result<()> {
    let mut text = table(outcomes, total);
    for o in outcomes {
        text.push_str(&format!("\n### {}\n", o.name));
        for f in &o.facts {
            text.push_str(&format!("- {f}\n"));
        }
        for v in &o.violations {
            text.push_str(&format!("- VIOLATION: {v}\n"));
        }
    }
    for f in figures {
        text.push_str(&format!("\nscenario 4 figures: {f}\n"));
    }
    let path = dir.join("summary.md");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("written to {}", path.display());
    Ok(())
}
