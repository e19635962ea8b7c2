//! Scenarios 8 and 9, on the highly available cluster of [`crate::ha`].
//!
//! 8. Failover under keyed load: 3 release replicas whose `DATABASE_URL` points at HAProxy,
//!    16 clients each sending every key as two concurrent copies to two replicas and retrying
//!    every non-final answer with the same key. Round 1 kills the leader's postmaster (`kill -9`;
//!    Patroni lives and fails over at once, `primary_start_timeout: 0`), the old primary rejoins
//!    through `pg_rewind`; round 2 first stalls the leader's WAL sender for 1.5 s (`SIGSTOP`: the
//!    standby receives nothing, as when a standby lags), then kills the leader's Patroni and
//!    postmaster, waits out the leader key, inspects the dead node's own history (started
//!    stand-alone, isolated) and restarts its Patroni, which rewinds it: the failover back.
//!    Round 3 freezes the leader (`SIGSTOP` to Patroni, postmaster and backends: a hung machine
//!    whose sockets stay open), waits for the promotion, then fences it (kill -9, what a
//!    watchdog's reset does) and restarts its Patroni; `--thaw-after SECS` lets it wake up
//!    instead (a zombie primary: docs/SCALING.md has what Debian's Patroni 3.0.2 then does).
//!    Checked: every 201 is a committed, audited order on the final primary with its key
//!    `completed`; no key made two orders, on either node; no acknowledged order exists only in
//!    the dead node's history; answers only 201, 409 in flight or 503; the replicas serve again
//!    without a restart and their `/readyz` says 503 during the switch; the time from the kill to
//!    the first 201 (goal ≤ 15 s); every key retried until final made exactly one order, and the
//!    books reconcile (cash and positions = fills).
//!
//!    8b. The control: the same run with `synchronous_mode: false` must lose acknowledged
//!    orders (round 2's stall guarantees unreplicated commits), else the scenario would prove
//!    nothing. Each lost key, retried, executes again: the double execution a client sees.
//!
//!    8c. The synchronous standby's latency cost: keyed orders through HAProxy, 1 client and
//!    8 clients, blocks alternating between synchronous and asynchronous replication.
//!
//! 9. Restore drill: a full pgBackRest backup of the leader under keyed load, WAL archived
//!    throughout, a point-in-time restore (`--type=time`) into a new data directory, a replica
//!    of the service started on it. Checked: everything acknowledged before the target is
//!    there and nothing sent after it; every completed key row has its order and every order its
//!    key row; the books reconcile; a key acknowledged before the target replays, a key
//!    acknowledged after it (lost with its order) executes anew.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use raptor_integration_tests::{free_port, new_key};
use sqlx::{Connection, PgPool};
use tokio::task::JoinSet;

use crate::env::{self, Answer, Http, Replica, Tally, User, DATABASE};
use crate::ha::{signal, Ha, TTL_SECS};
use crate::scenarios::{self, Outcome};

/// Clients of the failover load; each key goes out as this many concurrent copies.
const CLIENTS: usize = 16;
const COPIES: usize = 2;
/// How long round 2 keeps the leader's WAL sender stopped before the kill.
const STALL: Duration = Duration::from_millis(1500);
/// The goal for the time from a kill to the first 201 on the new primary.
const FAILOVER_GOAL: Duration = Duration::from_secs(15);

/// The HA cluster, a driver pool through HAProxy, and 3 replicas on it.
pub(crate) struct HaWorld {
    /// `--thaw-after`: round 3 thaws the frozen primary this long after the promotion instead of
    /// fencing it.
    pub(crate) thaw_after: Option<Duration>,
    pub(crate) ha: Ha,
    pub(crate) db: PgPool,
    pub(crate) http: Http,
    pub(crate) replicas: Vec<Replica>,
    pub(crate) quick: bool,
}

impl HaWorld {
    pub(crate) async fn start(
        chaos_dir: &Path,
        quick: bool,
        thaw_after: Option<Duration>,
    ) -> anyhow::Result<Self> {
        let started = Instant::now();
        let ha = Ha::start(chaos_dir, true).await?;
        {
            let admin = ha.pool("postgres", 1).await?;
            sqlx::query(&format!("create database {DATABASE}"))
                .execute(&admin)
                .await?;
            admin.close().await;
        }
        let base_env = env::base_env(&ha.url("postgres"), &[]);
        env::raptor_cli(&base_env, &["migrate"]).await?;
        env::raptor_cli(
            &base_env,
            &[
                "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
            ],
        )
        .await?;
        let db = ha.pool(DATABASE, 8).await?;
        let dir = ha.dir.clone();
        let mut replicas = Vec::new();
        for i in 0..3 {
            replicas.push(Replica::spawn(&dir, &format!("replica-{i}"), base_env.clone()).await?);
        }
        println!(
            "raptor-chaos: HA cluster in {}: etcd on {}, {} , HAProxy on {}, replicas on {:?} \
             (set-up {:.1} s)",
            dir.display(),
            ha.etcd_port,
            ha.nodes
                .iter()
                .map(|n| format!(
                    "{} (postgres {}, patroni {})",
                    n.name, n.pg_port, n.rest_port
                ))
                .collect::<Vec<_>>()
                .join(", "),
            ha.proxy_port,
            replicas.iter().map(|r| r.port).collect::<Vec<_>>(),
            started.elapsed().as_secs_f64()
        );
        Ok(Self {
            thaw_after,
            ha,
            db,
            http: Http::new()?,
            replicas,
            quick,
        })
    }

    pub(crate) fn bases(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.base.clone()).collect()
    }

    pub(crate) async fn stop(mut self) {
        for replica in &mut self.replicas {
            let _ = replica.kill9().await;
        }
        self.db.close().await;
    }
}

// ---------------------------------------------------------------------------------------------
// The load

/// One answer, with when its request left and when the answer came back.
#[derive(Clone, Debug)]
struct Timed {
    sent: Instant,
    done: Instant,
    answer: Answer,
}

/// Every key of a run: its user and every answer of every copy.
type Log = BTreeMap<String, (User, Vec<Timed>)>;

/// Sends `key` to `bases` in turn until a final answer (bounded), 100 ms between tries.
async fn until_final_timed(
    http: &Http,
    bases: &[String],
    token: &str,
    key: &str,
    limit: Duration,
) -> Vec<Timed> {
    let started = Instant::now();
    let mut out = Vec::new();
    for i in 0..1_000 {
        let sent = Instant::now();
        let answer = http.order(&bases[i % bases.len()], token, Some(key)).await;
        let done = !answer.retryable();
        out.push(Timed {
            sent,
            done: Instant::now(),
            answer,
        });
        if done || started.elapsed() > limit {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    out
}

/// Closed-loop keyed load until `stop`: each client its own user and a favourite replica,
/// a fresh key per order sent as [`COPIES`] concurrent copies to consecutive replicas, each
/// copy retried until final.
fn start_load(
    http: &Http,
    bases: &[String],
    users: &[User],
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> tokio::task::JoinHandle<anyhow::Result<Log>> {
    let (http, bases, users) = (http.clone(), bases.to_vec(), users.to_vec());
    tokio::spawn(async move {
        let mut set = JoinSet::new();
        for (i, user) in users.into_iter().enumerate() {
            let (http, stop, tally) = (http.clone(), stop.clone(), tally.clone());
            let mut mine = bases.clone();
            mine.rotate_left(i % bases.len());
            set.spawn(async move {
                let mut log = Log::new();
                while !stop.load(Ordering::Acquire) {
                    let key = new_key();
                    let copies = (0..COPIES).map(|c| {
                        let mut order = mine.clone();
                        order.rotate_left(c % mine.len());
                        let (http, token, key) = (http.clone(), user.token.clone(), key.clone());
                        async move {
                            until_final_timed(&http, &order, &token, &key, Duration::from_secs(40))
                                .await
                        }
                    });
                    let answers: Vec<Timed> = futures_util::future::join_all(copies)
                        .await
                        .into_iter()
                        .flatten()
                        .collect();
                    for t in &answers {
                        tally.add(t.answer.label());
                    }
                    log.insert(key, (user.clone(), answers));
                }
                log
            });
        }
        let mut all = Log::new();
        while let Some(joined) = set.join_next().await {
            all.extend(joined?);
        }
        Ok(all)
    })
}

/// Keys that got no final answer in the load are retried (each alone) until they do: what a
/// client that retries every unanswered request with its key ends with.
async fn follow_up(http: &Http, bases: &[String], log: &mut Log) -> usize {
    let mut followed = 0;
    for (key, (user, answers)) in log.iter_mut() {
        if answers.iter().any(|t| !t.answer.retryable()) {
            continue;
        }
        followed += 1;
        answers.extend(
            until_final_timed(http, bases, &user.token, key, Duration::from_secs(60)).await,
        );
    }
    followed
}

fn finals(log: &Log) -> BTreeMap<String, Vec<Answer>> {
    log.iter()
        .map(|(k, (_, answers))| {
            (
                k.clone(),
                answers.iter().map(|t| t.answer.clone()).collect(),
            )
        })
        .collect()
}

/// Polls every replica's `/readyz` every 100 ms until `stop`: (when, replica, status).
fn start_readyz_poll(
    http: &Http,
    bases: &[String],
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(Instant, usize, u16)>> {
    let (http, bases) = (http.clone(), bases.to_vec());
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Acquire) {
            for (i, base) in bases.iter().enumerate() {
                let status = http.readyz(base).await;
                seen.push((Instant::now(), i, status));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        seen
    })
}

// ---------------------------------------------------------------------------------------------
// 8. failover

/// What one kill did.
struct Round {
    n: u8,
    old: usize,
    new: usize,
    stalled: Option<Instant>,
    killed: Instant,
    promoted_at: Instant,
    promoted: Duration,
    /// From the promotion until every replica answered readyz 200 and took an order.
    recovered: Vec<f64>,
    rejoined: Duration,
    timeline: i64,
    /// key -> order ids in the dead node's own history (round 2, before the rewind).
    old_history: Option<HashMap<String, Vec<String>>>,
}

/// An order answered with 201 that is not on the final primary.
pub(crate) struct Lost {
    key: String,
    order_id: String,
    token: String,
}

/// What a run measured, beyond its checks.
pub(crate) struct RunFigures {
    pub(crate) lost: Vec<Lost>,
    pub(crate) summary: String,
}

/// The orders of `user_ids` as key -> ids, read from a node directly.
async fn node_orders(
    options: &sqlx::postgres::PgConnectOptions,
    user_ids: &[i32],
) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let mut conn = sqlx::PgConnection::connect_with(options).await?;
    let rows: Vec<(Option<String>, String)> = sqlx::query_as(
        "select idempotency_key, id::text from paper_orders where user_id = any($1)",
    )
    .bind(user_ids)
    .fetch_all(&mut conn)
    .await?;
    conn.close().await?;
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for (key, id) in rows {
        map.entry(key.unwrap_or_default()).or_default().push(id);
    }
    Ok(map)
}

/// The leader's WAL sender pids (its replication connections).
async fn wal_senders(ha: &Ha, leader: usize) -> anyhow::Result<Vec<u32>> {
    let mut conn = sqlx::PgConnection::connect_with(&ha.nodes[leader].options("postgres")).await?;
    let pids: Vec<i32> = sqlx::query_scalar("select pid from pg_stat_replication")
        .fetch_all(&mut conn)
        .await?;
    conn.close().await?;
    Ok(pids
        .into_iter()
        .filter_map(|p| u32::try_from(p).ok())
        .collect())
}

/// Kills the leader (round 1: its postmaster; round 2: a stalled WAL sender, then Patroni and
/// postmaster), waits for the other node to lead and the replicas to serve, inspects the dead
/// node's own history (round 2), brings it back and waits until it replicates again.
async fn round(
    world: &mut HaWorld,
    out: &mut Outcome,
    n: u8,
    synchronous: bool,
    probe: &User,
    user_ids: &[i32],
) -> anyhow::Result<Round> {
    let old = world.ha.wait_leader(None, Duration::from_secs(30)).await?;
    let new = 1 - old;
    let mut stalled = None;
    let mut frozen = Vec::new();
    let (killed, dead) = if n == 1 {
        let (pid, kids) = world.ha.nodes[old].kill_postmaster()?;
        let killed = Instant::now();
        out.fact(format!(
            "round 1: kill -9 of {}'s postmaster (pid {pid}); its Patroni lives",
            world.ha.nodes[old].name
        ));
        (killed, kids)
    } else if n == 3 {
        frozen = world.ha.nodes[old].freeze()?;
        let killed = Instant::now();
        out.fact(format!(
            "round 3: {} frozen (SIGSTOP to Patroni, the postmaster and its {} processes): a hung \
             machine whose sockets stay open",
            world.ha.nodes[old].name,
            frozen.len() - 2
        ));
        (killed, Vec::new())
    } else {
        let senders = wal_senders(&world.ha, old).await?;
        for pid in &senders {
            signal(*pid, "STOP")?;
        }
        stalled = Some(Instant::now());
        tokio::time::sleep(STALL).await;
        world.ha.nodes[old].kill_patroni().await?;
        let (pid, mut kids) = world.ha.nodes[old].kill_postmaster()?;
        for pid in &senders {
            let _ = signal(*pid, "KILL");
        }
        let killed = Instant::now();
        kids.extend(senders.iter().copied());
        out.fact(format!(
            "round 2: {}'s WAL sender stopped (SIGSTOP, pids {senders:?}) for {:.1} s, then kill -9 \
             of its Patroni and postmaster (pid {pid})",
            world.ha.nodes[old].name,
            STALL.as_secs_f64()
        ));
        (killed, kids)
    };
    let promoted_at = world
        .ha
        .wait_leader(Some(new), Duration::from_secs(TTL_SECS * 4))
        .await
        .map(|_| Instant::now())
        .with_context(|| format!("round {n}: {} was not promoted", world.ha.nodes[new].name))?;
    let promoted = promoted_at - killed;
    let bases = world.bases();
    let recovered = scenarios::recovery(out, &world.http, &bases, probe).await?;
    let mut old_history = None;
    if n == 3 {
        match world.thaw_after {
            // The hung node is fenced, as Patroni's watchdog would reset its machine: kill -9 of
            // everything frozen, then its Patroni starts afresh and rewinds it.
            None => {
                world.ha.nodes[old].kill_patroni().await?;
                for pid in &frozen {
                    let _ = signal(*pid, "KILL");
                }
                if !Ha::wait_exited(&frozen, Duration::from_secs(15)).await {
                    out.check(
                        false,
                        "the frozen node's processes exited within 15 s of kill -9",
                    );
                }
                world.ha.start_patroni(old)?;
                out.fact(format!(
                    "round 3: {} fenced {:.1} s after the freeze (kill -9 of the frozen processes, \
                     as a watchdog reset), its Patroni started again",
                    world.ha.nodes[old].name,
                    killed.elapsed().as_secs_f64()
                ));
            }
            // --thaw-after: the hung node wakes up on its own, a zombie primary. Debian bookworm's
            // Patroni 3.0.2 may then overwrite the new leader's key (docs/SCALING.md).
            Some(hold) => {
                tokio::time::sleep(hold).await;
                crate::ha::Node::thaw(&frozen);
                out.fact(format!(
                    "round 3: {} thawed {:.1} s after the freeze (--thaw-after {} s past the \
                     promotion): it wakes up believing it leads",
                    world.ha.nodes[old].name,
                    killed.elapsed().as_secs_f64(),
                    hold.as_secs()
                ));
            }
        }
    }
    if n == 2 {
        // The dead node's history as it was: started stand-alone (isolated: another port, no
        // archiving, no standby), read, stopped; then Patroni takes it back and rewinds it.
        let gone = Ha::wait_exited(&dead, Duration::from_secs(15)).await;
        if !gone {
            out.check(false, "the dead primary's processes exited within 15 s");
        }
        let port = free_port()?;
        let data = world.ha.nodes[old].data.clone();
        world.ha.start_standalone(&data, port)?;
        let mut options = world.ha.nodes[old].options(DATABASE);
        options = options.port(port);
        let read = node_orders(&options, user_ids).await;
        world.ha.stop_standalone(&data)?;
        old_history = Some(read?);
        world.ha.start_patroni(old)?;
    }
    let joined = world
        .ha
        .wait_replicating(synchronous, Duration::from_secs(120))
        .await;
    let rejoined = killed.elapsed();
    let (leader, timeline) = match joined {
        Ok(joined) => joined,
        Err(err) => {
            // The checks of the run still follow: what did the cluster keep?
            out.check(
                false,
                format!(
                    "round {n}: {} did not rejoin: {err:#}",
                    world.ha.nodes[old].name
                ),
            );
            return Ok(Round {
                n,
                old,
                new,
                stalled,
                killed,
                promoted_at,
                promoted,
                recovered,
                rejoined,
                timeline: 0,
                old_history,
            });
        }
    };
    out.check(
        leader == new,
        format!(
            "round {n}: {} leads, {} rejoined as {} on timeline {timeline} {:.1} s after the kill",
            world.ha.nodes[leader].name,
            world.ha.nodes[old].name,
            if synchronous {
                "the synchronous standby (pg_rewind)"
            } else {
                "a replica (pg_rewind)"
            },
            rejoined.as_secs_f64()
        ),
    );
    Ok(Round {
        n,
        old,
        new,
        stalled,
        killed,
        promoted_at,
        promoted,
        recovered,
        rejoined,
        timeline,
        old_history,
    })
}

/// Scenario 8's run: keyed load, round 1 and/or round 2, then every check. With
/// `synchronous` false this is the control's run.
pub(crate) async fn run(
    world: &mut HaWorld,
    name: &str,
    synchronous: bool,
    rounds: &[u8],
) -> anyhow::Result<(Outcome, RunFigures)> {
    let mut out = Outcome::new(name);
    let quick = world.quick;
    let users = scenarios::make_users(&world.db, "ha", CLIENTS + 1).await?;
    let (probe, users) = users.split_last().context("users")?;
    let user_ids: Vec<i32> = users.iter().map(|u| u.id).collect();
    let bases = world.bases();
    let drained = scenarios::warm_replicas(&world.http, &bases, probe).await?;
    out.fact(format!(
        "{} replication; {CLIENTS} clients x {COPIES} concurrent copies per key over 3 replicas \
         through HAProxy; warm-up drained {drained} answers other than 201",
        if synchronous {
            "synchronous (synchronous_mode: true)"
        } else {
            "asynchronous (synchronous_mode: false)"
        }
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = start_load(&world.http, &bases, users, stop.clone(), tally.clone());
    let polling = Arc::new(AtomicBool::new(false));
    let readyz = start_readyz_poll(&world.http, &bases, polling.clone());
    let started = Instant::now();
    let slot = Duration::from_secs(if quick { 3 } else { 5 });
    let mut done = Vec::new();
    for &n in rounds {
        tokio::time::sleep(slot).await;
        let before = tally.snapshot();
        let r = round(world, &mut out, n, synchronous, probe, &user_ids).await?;
        let after = tally.snapshot();
        let during: Vec<String> = after
            .iter()
            .filter_map(|(k, v)| {
                let d = v - before.get(k).copied().unwrap_or(0);
                (d > 0).then(|| format!("{k}: {d}"))
            })
            .collect();
        out.fact(format!(
            "round {n}: {} promoted {:.2} s after the kill; replicas ready and taking orders \
             {:?} s after the promotion; answers from the kill to the rejoin: {}",
            world.ha.nodes[r.new].name,
            r.promoted.as_secs_f64(),
            r.recovered
                .iter()
                .map(|t| format!("{t:.2}"))
                .collect::<Vec<_>>(),
            during.join(", ")
        ));
        done.push(r);
    }
    tokio::time::sleep(slot).await;
    stop.store(true, Ordering::Release);
    let mut log = load.await??;
    polling.store(true, Ordering::Release);
    let readyz = readyz.await?;
    let followed = follow_up(&world.http, &bases, &mut log).await;
    out.fact(format!(
        "{} keys in {:.0} s; {followed} had no final answer when the load stopped and were \
         retried until final; answers: {}",
        log.len(),
        started.elapsed().as_secs_f64(),
        scenarios::label_counts(
            log.values()
                .flat_map(|(_, a)| a.iter().map(|t| t.answer.clone()))
        )
    ));

    // Every answer was final-and-right or retryable.
    let odd: Vec<String> = log
        .values()
        .flat_map(|(_, a)| a.iter())
        .filter(|t| {
            let a = &t.answer;
            !(a.status == 201
                || a.status == 503
                || (a.status == 409 && a.code.as_deref() == Some("idempotency_in_flight")))
        })
        .map(|t| {
            format!(
                "{} {}",
                t.answer.label(),
                t.answer
                    .message
                    .clone()
                    .or(t.answer.transport.clone())
                    .unwrap_or_default()
            )
        })
        .collect();
    out.check(
        odd.is_empty(),
        format!(
            "every answer was 201, 409 in flight or 503 ({} others{})",
            odd.len(),
            odd.first()
                .map(|o| format!(", e.g. {o}"))
                .unwrap_or_default()
        ),
    );

    // `/readyz`: 503 during each switch, 200 again after it, on every replica.
    for r in &done {
        let end = r.killed + r.promoted + Duration::from_secs(30);
        for i in 0..bases.len() {
            let window: Vec<u16> = readyz
                .iter()
                .filter(|(t, who, _)| *who == i && *t >= r.killed && *t <= end)
                .map(|(_, _, s)| *s)
                .collect();
            let down = window.iter().position(|s| *s != 200);
            let back = down.is_some_and(|d| window[d..].contains(&200));
            out.check(
                down.is_some() && back,
                format!(
                    "round {}: replica {i}'s /readyz answered {} during the switch and 200 after \
                     it ({} polls)",
                    r.n,
                    down.map_or("200 throughout".to_owned(), |d| window[d].to_string()),
                    window.len()
                ),
            );
        }
    }
    let mut restarted = 0;
    for r in &mut world.replicas {
        let running = r
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        if !running {
            restarted += 1;
        }
    }
    out.check(
        restarted == 0,
        format!("the replicas served on without a restart ({restarted} exited)"),
    );

    // The ledger on the final primary.
    let finals = finals(&log);
    let made = scenarios::check_ledger(&mut out, &world.db, &finals).await?;
    let executions: usize = made.values().map(Vec::len).sum();
    out.check(
        executions == log.len(),
        format!(
            "retried until final, every key made exactly one order ({} keys, {executions} orders)",
            log.len()
        ),
    );
    scenarios::check_books(&mut out, &world.db, &user_ids).await?;
    // Per round: no fresh 201 the standby could not have had, and the time from the kill to the
    // first 201 on the new primary. After a kill -9 of the postmaster its backends live on until
    // they next wait (HAProxy cuts their sessions within about a second): they can still answer
    // replays, and, without a synchronous standby, commit. So "on the new primary" is a fresh
    // execution (not a replay), answered after the promotion, whose order the final primary has.
    let final_ids: HashSet<&String> = made.values().flatten().collect();
    let answers: Vec<&Timed> = log.values().flat_map(|(_, a)| a.iter()).collect();
    let fresh = |t: &Timed| t.answer.status == 201 && t.answer.replayed.as_deref() == Some("false");
    let mut times = Vec::new();
    for r in &done {
        let first = answers
            .iter()
            .filter(|t| {
                fresh(t)
                    && t.sent >= r.killed
                    && t.done >= r.promoted_at
                    && t.answer
                        .order_id
                        .as_ref()
                        .is_some_and(|id| final_ids.contains(id))
            })
            .map(|t| t.done)
            .min();
        let secs = first.map(|t| (t - r.killed).as_secs_f64());
        times.push((r.n, secs));
        out.check(
            secs.is_some_and(|s| s <= FAILOVER_GOAL.as_secs_f64()),
            format!(
                "round {}: kill to the first 201 on the new primary {} (goal ≤ {} s; promotion \
                 after {:.2} s, leader TTL {TTL_SECS} s)",
                r.n,
                secs.map_or("never".to_owned(), |s| format!("{s:.2} s")),
                FAILOVER_GOAL.as_secs(),
                r.promoted.as_secs_f64()
            ),
        );
        // From the stall (round 2) or the kill until the promotion no commit can have reached
        // a standby, so a synchronous cluster acknowledges no new execution in between (200 ms
        // of slack for answers already on their way).
        let from = r.stalled.unwrap_or(r.killed) + Duration::from_millis(200);
        let orphaned: Vec<&&Timed> = answers
            .iter()
            .filter(|t| t.answer.status == 201 && t.done > from && t.done < r.promoted_at)
            .collect();
        let executed = orphaned.iter().filter(|t| fresh(t)).count();
        let what = if r.stalled.is_some() {
            "from the WAL sender's stall to the promotion"
        } else {
            "from the kill to the promotion"
        };
        if synchronous {
            out.check(
                executed == 0,
                format!(
                    "round {}: no new execution acknowledged {what} ({executed}; {} replays \
                     answered meanwhile)",
                    r.n,
                    orphaned.len() - executed
                ),
            );
        } else {
            out.fact(format!(
                "round {}: {executed} new executions acknowledged {what} (asynchronous commits do \
                 not wait for the standby), and {} replays",
                r.n,
                orphaned.len() - executed
            ));
        }
        if r.n == 3 {
            // Requests in flight on connections to the frozen primary: HAProxy cut them when its
            // checks failed, well before the request timeout would have.
            let cut: Vec<f64> = answers
                .iter()
                .filter(|t| t.sent < r.killed && t.done > r.killed)
                .map(|t| (t.done - r.killed).as_secs_f64())
                .collect();
            let slowest = cut.iter().copied().fold(0.0, f64::max);
            out.check(
                !cut.is_empty() && slowest < (env::REQUEST_TIMEOUT_SECS as f64) - 0.5,
                format!(
                    "round 3: the {} requests in flight at the freeze were answered within \
                     {slowest:.2} s of it (HAProxy's checks fail, on-marked-down \
                     shutdown-sessions cuts the connections; the request timeout is {} s)",
                    cut.len(),
                    env::REQUEST_TIMEOUT_SECS
                ),
            );
        }
    }
    let mut lost = Vec::new();
    for (key, (user, answers)) in &log {
        let ids: HashSet<&String> = answers
            .iter()
            .filter_map(|t| t.answer.order_id.as_ref())
            .collect();
        let orders = made.get(key).cloned().unwrap_or_default();
        for id in ids {
            if !orders.contains(id) {
                lost.push(Lost {
                    key: key.clone(),
                    order_id: id.clone(),
                    token: user.token.clone(),
                });
            }
        }
    }
    out.fact(format!(
        "acknowledged orders missing on the final primary: {}",
        lost.len()
    ));

    // Both nodes: the same orders, at most one per key, once the standby has caught up.
    match world
        .ha
        .wait_replicating(synchronous, Duration::from_secs(60))
        .await
    {
        Ok(_) => {
            let mut per_node = Vec::new();
            for node in &world.ha.nodes {
                let orders = node_orders(&node.options(DATABASE), &user_ids).await?;
                let twice = orders.values().filter(|v| v.len() > 1).count();
                let total: usize = orders.values().map(Vec::len).sum();
                per_node.push((node.name.clone(), total, twice));
            }
            out.check(
                per_node
                    .iter()
                    .all(|(_, t, twice)| *twice == 0 && *t == executions),
                format!(
                    "each node, read directly, holds the same orders, at most one per key: {}",
                    per_node
                        .iter()
                        .map(|(n, t, twice)| format!("{n}: {t} orders, {twice} keys with two"))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            );
        }
        Err(err) => out.check(
            false,
            format!("the standby caught up for the per-node check: {err:#}"),
        ),
    }

    // The dead primary's own history (round 2): what it committed that the cluster lost.
    for r in &done {
        let Some(history) = &r.old_history else {
            continue;
        };
        let acked: HashSet<&String> = finals
            .values()
            .flatten()
            .filter_map(|a| a.order_id.as_ref())
            .collect();
        let total: usize = history.values().map(Vec::len).sum();
        let discarded: Vec<(&String, &String)> = history
            .iter()
            .flat_map(|(k, ids)| ids.iter().map(move |id| (k, id)))
            .filter(|(_, id)| !final_ids.contains(id))
            .collect();
        let acked_discarded = discarded
            .iter()
            .filter(|(_, id)| acked.contains(id))
            .count();
        let again = discarded
            .iter()
            .filter(|(k, _)| made.get(*k).is_some_and(|v| !v.is_empty()))
            .count();
        let twice = history.values().filter(|v| v.len() > 1).count();
        out.fact(format!(
            "round {}: {}'s own history (read stand-alone before pg_rewind): {total} orders, {} \
             not on the new primary ({acked_discarded} of them acknowledged; {again} of their \
             keys executed once on the new primary when retried)",
            r.n,
            world.ha.nodes[r.old].name,
            discarded.len()
        ));
        out.check(
            twice == 0,
            format!(
                "round {}: no key made two orders in the dead primary's history either ({twice})",
                r.n
            ),
        );
        if synchronous {
            out.check(
                acked_discarded == 0,
                format!(
                    "round {}: no acknowledged order exists only in the dead primary's history \
                     ({acked_discarded}); the {} discarded commits were never acknowledged",
                    r.n,
                    discarded.len()
                ),
            );
        }
    }
    let summary = format!(
        "{} keys, {executions} orders; failover (kill to first 201): {}; acknowledged orders \
         lost: {}; timelines {}",
        log.len(),
        times
            .iter()
            .map(|(n, s)| format!(
                "round {n} {}",
                s.map_or("never".to_owned(), |s| format!("{s:.1} s"))
            ))
            .collect::<Vec<_>>()
            .join(", "),
        lost.len(),
        done.iter()
            .map(|r| r.timeline.to_string())
            .collect::<Vec<_>>()
            .join(" → ")
    );
    for r in &done {
        out.fact(format!(
            "round {}: promoted {:.2} s, rejoined {:.1} s after the kill",
            r.n,
            r.promoted.as_secs_f64(),
            r.rejoined.as_secs_f64()
        ));
    }
    Ok((out, RunFigures { lost, summary }))
}

/// 8b: the same run with asynchronous replication must lose acknowledged orders; each lost
/// key, retried, executes a second time.
pub(crate) async fn control(world: &mut HaWorld, rounds: &[u8]) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("8b control: asynchronous replication");
    world.ha.set_synchronous(false).await?;
    out.fact(
        "synchronous_mode: false (PATCH /config); the standby is async in pg_stat_replication",
    );
    let result = run(world, "control", false, rounds).await;
    world.ha.set_synchronous(true).await?;
    world
        .ha
        .wait_replicating(true, Duration::from_secs(60))
        .await?;
    let (inner, figures) = result?;
    for f in &inner.facts {
        out.fact(format!("control run: {f}"));
    }
    for v in &inner.violations {
        out.fact(format!("control run, violated as it must be: {v}"));
    }
    out.check(
        !figures.lost.is_empty() && !inner.violations.is_empty(),
        format!(
            "with asynchronous replication the failover lost {} acknowledged orders and the \
             run's checks failed ({} violations; first: {})",
            figures.lost.len(),
            inner.violations.len(),
            inner.violations.first().map_or("none", String::as_str)
        ),
    );
    // A client that got a 201 and retries anyway (a lost reply, a timeout on its side) now
    // executes the order a second time: the lost order took its key row with it.
    let retried: Vec<&Lost> = figures.lost.iter().take(20).collect();
    let mut again = 0;
    for lost in &retried {
        let a = world
            .http
            .order(&world.bases()[0], &lost.token, Some(&lost.key))
            .await;
        if a.status == 201
            && a.replayed.as_deref() == Some("false")
            && a.order_id.as_deref() != Some(lost.order_id.as_str())
        {
            again += 1;
        }
    }
    out.fact(format!(
        "{again} of {} lost keys, retried, executed again with a new order id (the key row was \
         lost with its order)",
        retried.len()
    ));
    out.fact(format!("control figures: {}", figures.summary));
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 8c. what the synchronous standby costs

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Closed-loop keyed orders from `users` (one client each, round robin over `bases`) for
/// `secs`: the 201s' latencies in ms and the number of other answers.
async fn timed_orders(
    http: &Http,
    bases: &[String],
    users: &[User],
    per_client: Option<usize>,
    secs: Duration,
) -> anyhow::Result<(Vec<f64>, usize)> {
    let started = Instant::now();
    let mut set = JoinSet::new();
    for (i, user) in users.iter().enumerate() {
        let (http, base, token) = (
            http.clone(),
            bases[i % bases.len()].clone(),
            user.token.clone(),
        );
        set.spawn(async move {
            let (mut ok, mut other) = (Vec::new(), 0);
            let mut n = 0;
            while per_client.map_or(started.elapsed() < secs, |max| n < max) {
                let a = http.order(&base, &token, Some(&new_key())).await;
                if a.status == 201 {
                    ok.push(a.elapsed.as_secs_f64() * 1000.0);
                } else {
                    other += 1;
                }
                n += 1;
            }
            (ok, other)
        });
    }
    let (mut ok, mut other) = (Vec::new(), 0);
    while let Some(joined) = set.join_next().await {
        let (o, x) = joined?;
        ok.extend(o);
        other += x;
    }
    Ok((ok, other))
}

/// One replication mode's measurements in 8c.
#[derive(Default)]
struct Samples {
    /// 1-client latencies (ms).
    one: Vec<f64>,
    /// 8-client latencies (ms).
    eight: Vec<f64>,
    eight_orders: usize,
    eight_secs: f64,
    /// Answers other than 201.
    others: usize,
}

pub(crate) async fn latency(world: &HaWorld) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("8c synchronous standby latency");
    let users = scenarios::make_users(&world.db, "latency", 9).await?;
    let bases = world.bases();
    scenarios::warm_replicas(&world.http, &bases, &users[8]).await?;
    // Short blocks, many alternations: the machine's other load comes in bursts, and pairs of
    // neighbouring blocks see about the same of it.
    let (blocks, single, many) = if world.quick {
        (6, 100, Duration::from_millis(1500))
    } else {
        (16, 150, Duration::from_millis(1500))
    };
    // mode -> each block's 1-client p50
    let mut block_p50: BTreeMap<bool, Vec<f64>> = BTreeMap::new();
    let mut by_mode: BTreeMap<bool, Samples> = BTreeMap::new();
    for block in 0..blocks {
        let synchronous = block % 2 == 0;
        world.ha.set_synchronous(synchronous).await?;
        let (one, x1) = timed_orders(
            &world.http,
            &bases[..1],
            &users[..1],
            Some(single),
            Duration::ZERO,
        )
        .await?;
        let t = Instant::now();
        let (eight, x8) = timed_orders(&world.http, &bases, &users[..8], None, many).await?;
        let secs = t.elapsed().as_secs_f64();
        let mut sorted = one.clone();
        sorted.sort_by(f64::total_cmp);
        block_p50
            .entry(synchronous)
            .or_default()
            .push(pct(&sorted, 0.5));
        let entry = by_mode.entry(synchronous).or_default();
        entry.eight_orders += eight.len();
        entry.eight_secs += secs;
        entry.one.extend(one);
        entry.eight.extend(eight);
        entry.others += x1 + x8;
    }
    world.ha.set_synchronous(true).await?;
    world
        .ha
        .wait_replicating(true, Duration::from_secs(60))
        .await?;
    let mut line = Vec::new();
    let mut p50 = BTreeMap::new();
    let mut others = 0;
    for (synchronous, samples) in by_mode {
        let Samples {
            mut one,
            mut eight,
            eight_orders: n8,
            eight_secs: secs,
            others: x,
        } = samples;
        one.sort_by(f64::total_cmp);
        eight.sort_by(f64::total_cmp);
        others += x;
        let label = if synchronous {
            "synchronous standby"
        } else {
            "asynchronous standby"
        };
        p50.insert(synchronous, (pct(&one, 0.5), pct(&eight, 0.5)));
        line.push(format!(
            "{label}: 1 client p50 {:.2} ms, p99 {:.2} ms ({} orders); 8 clients p50 {:.2} ms, \
             p99 {:.2} ms, {:.0} orders/s",
            pct(&one, 0.5),
            pct(&one, 0.99),
            one.len(),
            pct(&eight, 0.5),
            pct(&eight, 0.99),
            n8 as f64 / secs
        ));
    }
    for l in &line {
        out.fact(l.clone());
    }
    if let (Some(s), Some(a)) = (p50.get(&true), p50.get(&false)) {
        out.fact(format!(
            "the synchronous standby adds {:+.2} ms to the 1-client p50 and {:+.2} ms to the \
             8-client p50 ({} blocks per mode, alternating; 1 client on one replica, 8 over the \
             3, all through HAProxy)",
            s.0 - a.0,
            s.1 - a.1,
            blocks / 2
        ));
    }
    // Each synchronous block against the asynchronous block right after it.
    let mut deltas: Vec<f64> = block_p50
        .get(&true)
        .zip(block_p50.get(&false))
        .map(|(s, a)| s.iter().zip(a).map(|(s, a)| s - a).collect())
        .unwrap_or_default();
    deltas.sort_by(f64::total_cmp);
    out.fact(format!(
        "paired blocks (synchronous minus the asynchronous block after it), 1-client p50: \
         median {:+.2} ms, range {:+.2} .. {:+.2} ms over {} pairs",
        pct(&deltas, 0.5),
        deltas.first().copied().unwrap_or(f64::NAN),
        deltas.last().copied().unwrap_or(f64::NAN),
        deltas.len()
    ));
    out.fact(format!(
        "1-client p50 of each block, in ms: synchronous {:?}, asynchronous {:?}",
        block_p50
            .get(&true)
            .map(|v| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>())
            .unwrap_or_default(),
        block_p50
            .get(&false)
            .map(|v| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>())
            .unwrap_or_default()
    ));
    out.check(
        others == 0,
        format!("every measured order answered 201 ({others} did not)"),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 9. restore drill

async fn db_now(db: &PgPool) -> anyhow::Result<String> {
    Ok(sqlx::query_scalar("select clock_timestamp()::text")
        .fetch_one(db)
        .await?)
}

pub(crate) async fn restore_drill(world: &mut HaWorld) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("9 restore drill (pgBackRest, point in time)");
    let pause = Duration::from_secs(if world.quick { 2 } else { 4 });
    let users = scenarios::make_users(&world.db, "drill", 9).await?;
    let (probe, users) = users.split_last().context("users")?;
    let user_ids: Vec<i32> = users.iter().map(|u| u.id).collect();
    let bases = world.bases();
    scenarios::warm_replicas(&world.http, &bases, probe).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = start_load(&world.http, &bases, users, stop.clone(), tally.clone());
    tokio::time::sleep(pause).await;

    // A full backup of the leader, under load.
    let leader = world.ha.wait_leader(None, Duration::from_secs(30)).await?;
    let t = Instant::now();
    let backup = world
        .ha
        .pgbackrest(leader, &["--type=full", "backup"])
        .await?;
    if !backup.status.success() {
        stop.store(true, Ordering::Release);
        let _ = load.await;
        bail!(
            "pgbackrest backup failed: {}",
            String::from_utf8_lossy(&backup.stderr)
        );
    }
    let backup_secs = t.elapsed().as_secs_f64();
    let backup_end = db_now(&world.db).await?;
    tokio::time::sleep(pause).await;
    let before_target = Instant::now();
    let target = db_now(&world.db).await?;
    let after_target = Instant::now();
    tokio::time::sleep(pause).await;
    stop.store(true, Ordering::Release);
    let mut log = load.await??;
    follow_up(&world.http, &bases, &mut log).await;
    out.fact(format!(
        "keyed load ({} clients x {COPIES} copies): {} keys; full backup of {} under it in \
         {backup_secs:.1} s (ended {backup_end}); restore target {target}",
        user_ids.len(),
        log.len(),
        world.ha.nodes[leader].name
    ));
    // Everything up to now archived (check switches WAL and waits for the segment).
    let leader = world.ha.wait_leader(None, Duration::from_secs(30)).await?;
    let check = world.ha.pgbackrest(leader, &["check"]).await?;
    out.check(
        check.status.success(),
        format!(
            "pgbackrest check: the WAL up to now is archived{}",
            Some(String::from_utf8_lossy(&check.stderr).trim().to_owned())
                .filter(|e| !e.is_empty())
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
    );
    let info = world
        .ha
        .pgbackrest_raw(&[], &["info", "--output=json"])
        .await?;
    let info: serde_json::Value =
        serde_json::from_slice(&info.stdout).unwrap_or(serde_json::Value::Null);
    let last = &info[0]["backup"]
        .as_array()
        .and_then(|b| b.last().cloned())
        .unwrap_or_default();
    out.fact(format!(
        "repository: backup {} ({} bytes of database, {} in the repository); WAL archived {} .. {}",
        last["label"].as_str().unwrap_or("?"),
        last["info"]["size"],
        last["info"]["repository"]["size"],
        info[0]["archive"][0]["min"].as_str().unwrap_or("?"),
        info[0]["archive"][0]["max"].as_str().unwrap_or("?")
    ));

    // Restore into a new data directory at the target, then start it on its own.
    let rdir = world.ha.dir.join("restore");
    if rdir.exists() {
        std::fs::remove_dir_all(&rdir)?;
    }
    let data = rdir.join("data");
    std::fs::create_dir_all(&rdir)?;
    env::chown_postgres(&rdir)?;
    std::fs::set_permissions(&rdir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    let t = Instant::now();
    let restore = world
        .ha
        .pgbackrest_raw(
            &[format!("--pg1-path={}", data.display())],
            &[
                "--type=time",
                &format!("--target={target}"),
                "--target-action=promote",
                "restore",
            ],
        )
        .await?;
    if !restore.status.success() {
        bail!(
            "pgbackrest restore failed: {}",
            String::from_utf8_lossy(&restore.stderr)
        );
    }
    // The node's own postgresql.conf (Patroni's) names its files and archive_command: the
    // copy gets a plain one (recovery settings are in postgresql.auto.conf, from pgBackRest).
    // Recovery refuses a max_connections below the primary's.
    std::fs::write(
        data.join("postgresql.conf"),
        "include 'postgresql.base.conf'\nmax_connections = 300\nshared_buffers = 128MB\n",
    )?;
    env::chown_postgres(&data)?;
    let port = free_port()?;
    world.ha.start_standalone(&data, port)?;
    let options = world.ha.nodes[0].options(DATABASE).port(port);
    let restored = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while sqlx::query_scalar::<_, bool>("select pg_is_in_recovery()")
        .fetch_one(&restored)
        .await?
    {
        if Instant::now() > deadline {
            bail!("the restored copy was still recovering after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stopped_at = std::fs::read_to_string(rdir.join("standalone.log"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.contains("recovery stopping"))
        .map(|l| l.split("LOG:").nth(1).unwrap_or(l).trim().to_owned())
        .unwrap_or_else(|| "no \"recovery stopping\" line".to_owned());
    out.fact(format!(
        "restored to a new data directory and recovered in {:.1} s: {stopped_at}",
        t.elapsed().as_secs_f64()
    ));

    let live = node_orders_pool(&world.db, &user_ids).await?;
    let back = node_orders_pool(&restored, &user_ids).await?;
    let live_ids: HashSet<&String> = live.values().flatten().collect();
    let back_ids: HashSet<&String> = back.values().flatten().collect();
    let foreign = back_ids.iter().filter(|id| !live_ids.contains(*id)).count();
    out.check(
        foreign == 0,
        format!(
            "the copy holds {} of the cluster's {} drill orders and none it lacks ({foreign})",
            back_ids.len(),
            live_ids.len()
        ),
    );
    // Acknowledged before the target was read: restored. Sent after it was read: not.
    let (mut before, mut missing, mut after, mut present) = (0, 0, 0, 0);
    let (mut replay_key, mut lost_key) = (None, None);
    for (key, (user, answers)) in &log {
        let acked = answers
            .iter()
            .filter(|t| t.answer.status == 201)
            .map(|t| t.done)
            .min();
        let first_sent = answers.iter().map(|t| t.sent).min();
        if acked.is_some_and(|d| d < before_target) {
            before += 1;
            if back.get(key).is_none_or(Vec::is_empty) {
                missing += 1;
            } else if replay_key.is_none() {
                let id = back.get(key).and_then(|v| v.first()).cloned();
                replay_key = Some((key.clone(), user.token.clone(), id));
            }
        } else if first_sent.is_some_and(|s| s > after_target) {
            after += 1;
            if back.get(key).is_some_and(|v| !v.is_empty()) {
                present += 1;
            } else if lost_key.is_none() {
                let id = live.get(key).and_then(|v| v.first()).cloned();
                lost_key = Some((key.clone(), user.token.clone(), id));
            }
        }
    }
    out.check(
        missing == 0 && before > 0,
        format!("every key acknowledged before the target has its order in the copy ({missing} of {before} missing)"),
    );
    out.check(
        present == 0 && after > 0,
        format!(
            "no key first sent after the target has an order in the copy ({present} of {after})"
        ),
    );
    let replayed_wal: i64 = sqlx::query_scalar(
        "select count(*) from paper_orders where user_id = any($1) and created_at > $2::timestamptz",
    )
    .bind(&user_ids)
    .bind(&backup_end)
    .fetch_one(&restored)
    .await?;
    out.check(
        replayed_wal > 0,
        format!("{replayed_wal} drill orders in the copy were made after the backup ended (replayed from the archived WAL)"),
    );
    // Keys and orders come back together (the whole copy, every scenario's orders).
    let endpoint: Option<String> = sqlx::query_scalar(
        "select scope_endpoint from idempotency_keys where scope_user_id = any($1) limit 1",
    )
    .bind(&user_ids)
    .fetch_optional(&restored)
    .await?;
    let endpoint = endpoint.context("no key row of the drill in the copy")?;
    let keyless: i64 = sqlx::query_scalar(
        "select count(*) from idempotency_keys k
          where k.scope_endpoint = $1 and k.status = 'completed' and k.response_code = 201
            and not exists (select 1 from paper_orders o
                             where o.user_id = k.scope_user_id and o.idempotency_key = k.idem_key)",
    )
    .bind(&endpoint)
    .fetch_one(&restored)
    .await?;
    let orphan: i64 = sqlx::query_scalar(
        "select count(*) from paper_orders o
          where not exists (select 1 from idempotency_keys k
                             where k.scope_user_id = o.user_id and k.idem_key = o.idempotency_key
                               and k.scope_endpoint = $1 and k.status = 'completed')",
    )
    .bind(&endpoint)
    .fetch_one(&restored)
    .await?;
    let (keys, orders): (i64, i64) = sqlx::query_as(
        "select (select count(*) from idempotency_keys where scope_endpoint = $1 and status = 'completed'),
                (select count(*) from paper_orders)",
    )
    .bind(&endpoint)
    .fetch_one(&restored)
    .await?;
    out.check(
        keyless == 0 && orphan == 0,
        format!(
            "in the whole copy ({keys} completed order keys, {orders} orders) every completed key \
             row has its order ({keyless} lack one) and every order its completed key row \
             ({orphan} lack one)"
        ),
    );
    scenarios::check_books(&mut out, &restored, &user_ids).await?;

    // The service on the copy.
    let env = env::base_env(
        &format!("postgres://postgres@127.0.0.1:{port}/{DATABASE}?sslmode=disable"),
        &[],
    );
    let mut replica = Replica::spawn(&rdir, "replica-restored", env).await?;
    out.fact(format!(
        "raptor serve started on the copy (127.0.0.1:{port}) and answered /readyz 200"
    ));
    if let Some((key, token, id)) = replay_key {
        let a = world.http.order(&replica.base, &token, Some(&key)).await;
        out.check(
            a.status == 201 && a.replayed.as_deref() == Some("true") && a.order_id == id,
            format!(
                "a key acknowledged before the target, retried on the copy, is the replay of its order ({})",
                a.label()
            ),
        );
    }
    if let Some((key, token, id)) = lost_key {
        let a = world.http.order(&replica.base, &token, Some(&key)).await;
        out.check(
            a.status == 201 && a.replayed.as_deref() == Some("false") && a.order_id != id,
            format!(
                "a key acknowledged after the target (lost with its order) executes anew on the copy ({})",
                a.label()
            ),
        );
    }
    let a = world
        .http
        .order(&replica.base, &probe.token, Some(&new_key()))
        .await;
    out.check(
        a.status == 201,
        format!("a new order on the copy: {}", a.label()),
    );
    replica.kill9().await?;
    restored.close().await;
    world.ha.stop_standalone(&data)?;
    Ok(out)
}

/// The orders of `user_ids` as key -> ids.
async fn node_orders_pool(
    db: &PgPool,
    user_ids: &[i32],
) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let rows: Vec<(Option<String>, String)> = sqlx::query_as(
        "select idempotency_key, id::text from paper_orders where user_id = any($1)",
    )
    .bind(user_ids)
    .fetch_all(db)
    .await?;
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for (key, id) in rows {
        map.entry(key.unwrap_or_default()).or_default().push(id);
    }
    Ok(map)
}
