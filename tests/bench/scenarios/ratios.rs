//! The ratios to the ceiling: rounds of the service and its ceiling side by side in time (keyed
//! and unkeyed, 32 clients), and `RAPTOR_BENCH_ONLY=ratios`, the same rounds for server A, a
//! server B started with `RAPTOR_BENCH_B_ENV` and the keyed ceiling (an A/B of a lever in one
//! run).

use anyhow::Context;
use raptor_integration_tests::new_key;
use serde::Serialize;

use crate::ceiling::{pgbench, Schema, Script};
use crate::http::Http;
use crate::setup::BenchUser;
use crate::{cpu, env_number, Bench, Settings, PAIRS, USERS};

/// The service beside its ceiling, [`PAIRS`] rounds.
pub(crate) async fn paired_rounds(settings: &Settings, b: &Bench) -> anyhow::Result<Vec<Pair>> {
    // The ratios to the ceiling, measured in pairs adjacent in time: the service and its
    // ceiling, keyed and unkeyed, at 32 clients, PAIRS times, the order flipped each round.
    // A ceiling run minutes away from the service's run (on other tables and another minute of
    // the host's speed) moved the keyed ratio from 0.82 to 0.62 between two runs of one code.
    println!("ratios to the ceiling: {PAIRS} rounds of service and ceiling side by side ...");
    let users_range = (b.users[0].id, b.users[USERS - 1].id);
    let db_meter = b.meter.without_server();
    let mut pairs = Vec::new();
    for round in 0..PAIRS {
        let mut pair = Pair::default();
        for script in [Script::Keyed, Script::Unkeyed] {
            let service = || async {
                match script {
                    Script::Keyed => {
                        b.closed("paired, fresh key", 32, |user, _| {
                            b.order(user, Some(new_key()))
                        })
                        .await
                    }
                    Script::Unkeyed => {
                        b.closed("paired, no key", 32, |user, _| b.order(user, None))
                            .await
                    }
                }
            };
            let ceiling = || pgbench(settings, &db_meter, (Schema::Real, script), 32, users_range);
            let (run, top) = if round % 2 == 0 {
                let top = ceiling()?;
                (service().await?, top)
            } else {
                let run = service().await?;
                (run, ceiling()?)
            };
            let cpu = run.cpu.context("a closed-loop run has CPU figures")?;
            pair.set(
                script,
                run.rps / top.tps,
                cpu.machine_ms / top.cpu.machine_ms,
            );
            println!(
                "  round {round}, {script:?}: {:.0} req/s against {:.0} tx/s ({:.2} x), machine CPU {:.2} against {:.2} ms",
                run.rps, top.tps, run.rps / top.tps, cpu.machine_ms, top.cpu.machine_ms
            );
            pair.errors += run.errors();
        }
        pairs.push(pair);
    }
    Ok(pairs)
}

/// One round of the service beside its ceiling at 32 clients, adjacent in time: throughput and
/// machine CPU per request over the ceiling's, keyed and unkeyed.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Pair {
    pub(crate) keyed: f64,
    pub(crate) keyed_cpu: f64,
    pub(crate) unkeyed: f64,
    pub(crate) unkeyed_cpu: f64,
    /// Failed requests of the round's two service runs.
    pub(crate) errors: usize,
}

impl Pair {
    pub(crate) fn set(&mut self, script: Script, throughput: f64, cpu: f64) {
        match script {
            Script::Keyed => (self.keyed, self.keyed_cpu) = (throughput, cpu),
            Script::Unkeyed => (self.unkeyed, self.unkeyed_cpu) = (throughput, cpu),
        }
    }
}

/// The median of the rounds' `figure` (the upper one of an even count), with every round's.
pub(crate) fn median_of(pairs: &[Pair], figure: fn(&Pair) -> f64) -> anyhow::Result<(f64, String)> {
    let mut values: Vec<f64> = pairs.iter().map(figure).collect();
    let each = values
        .iter()
        .map(|v| format!("{v:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    values.sort_by(f64::total_cmp);
    let median = *values.get(values.len() / 2).context("no paired round")?;
    Ok((median, format!("rounds: {each}")))
}

/// One round of `RAPTOR_BENCH_ONLY=ratios`: keyed orders at 32 clients on server A, on server
/// B (when there is one) and pgbench's keyed ceiling, in an order that rotates each round.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct AbRound {
    ceiling_tps: f64,
    ceiling_cpu_ms: f64,
    a_rps: f64,
    a_cpu_ms: f64,
    a_server_ms: f64,
    b_rps: Option<f64>,
    b_cpu_ms: Option<f64>,
    b_server_ms: Option<f64>,
    errors: usize,
}

/// `RAPTOR_BENCH_ONLY=ratios`: `PAIRS` rounds (`RAPTOR_BENCH_ROUNDS` to change) of keyed
/// orders at 32 clients on server A and server B (A's environment plus `RAPTOR_BENCH_B_ENV`)
/// beside the keyed ceiling, each round's order rotated so that neither side always runs first.
/// Prints each round and the medians: A and B over the ceiling, B over A, CPU per order.
pub(crate) async fn ratios_ab(
    settings: &Settings,
    a: &Bench,
    b: Option<(Http, cpu::Meter)>,
) -> anyhow::Result<Vec<AbRound>> {
    let rounds = usize::try_from(env_number("RAPTOR_BENCH_ROUNDS", PAIRS as u64)?)?;
    let users = (a.users[0].id, a.users[USERS - 1].id);
    let db_meter = a.meter.without_server();
    let b = b.map(|(http, meter)| Bench {
        pool: a.pool.clone(),
        http,
        users: a
            .users
            .iter()
            .map(|u| BenchUser {
                id: u.id,
                token: u.token.clone(),
            })
            .collect(),
        operator: a.operator.clone(),
        counted: a.counted.clone(),
        counts: a.counts.clone(),
        secs: a.secs,
        meter,
    });
    println!(
        "ratios: {rounds} rounds of keyed orders at 32 clients: server A{}, the ceiling ...",
        if b.is_some() {
            format!(", server B (A + {:?})", settings.b_env)
        } else {
            String::new()
        }
    );
    let mut out = Vec::new();
    for round in 0..rounds {
        let mut r = AbRound::default();
        // 0: ceiling, 1: A, 2: B; rotated by the round.
        for step in 0..3 {
            match (step + round) % 3 {
                0 => {
                    let top = pgbench(
                        settings,
                        &db_meter,
                        (Schema::Real, Script::Keyed),
                        32,
                        users,
                    )?;
                    (r.ceiling_tps, r.ceiling_cpu_ms) = (top.tps, top.cpu.machine_ms);
                }
                1 => {
                    let run = a
                        .closed("A, fresh key", 32, |user, _| a.order(user, Some(new_key())))
                        .await?;
                    let cpu = run.cpu.unwrap_or_default();
                    (r.a_rps, r.a_cpu_ms, r.a_server_ms) = (run.rps, cpu.machine_ms, cpu.server_ms);
                    r.errors += run.errors();
                }
                _ => {
                    if let Some(b) = &b {
                        let run = b
                            .closed("B, fresh key", 32, |user, _| b.order(user, Some(new_key())))
                            .await?;
                        let cpu = run.cpu.unwrap_or_default();
                        r.b_rps = Some(run.rps);
                        r.b_cpu_ms = Some(cpu.machine_ms);
                        r.b_server_ms = Some(cpu.server_ms);
                        r.errors += run.errors();
                    }
                }
            }
        }
        println!(
            "  round {round}: ceiling {:.0} tx/s ({:.2} ms); A {:.0} req/s ({:.2} ms, server {:.3}){}",
            r.ceiling_tps,
            r.ceiling_cpu_ms,
            r.a_rps,
            r.a_cpu_ms,
            r.a_server_ms,
            match (r.b_rps, r.b_cpu_ms, r.b_server_ms) {
                (Some(rps), Some(cpu), Some(server)) =>
                    format!("; B {rps:.0} req/s ({cpu:.2} ms, server {server:.3})"),
                _ => String::new(),
            }
        );
        out.push(r);
    }
    let median = |figure: &dyn Fn(&AbRound) -> Option<f64>| {
        let mut values: Vec<f64> = out.iter().filter_map(figure).collect();
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    };
    let show = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    println!(
        "\nmedians: A / ceiling {} x, machine CPU A / ceiling {} x, A server CPU {} ms",
        show(median(&|r| Some(r.a_rps / r.ceiling_tps))),
        show(median(&|r| Some(r.a_cpu_ms / r.ceiling_cpu_ms))),
        show(median(&|r| Some(r.a_server_ms))),
    );
    if b.is_some() {
        println!(
            "         B / ceiling {} x, machine CPU B / ceiling {} x, B server CPU {} ms\n         B / A throughput {} x, machine CPU per order B / A {} x",
            show(median(&|r| r.b_rps.map(|b| b / r.ceiling_tps))),
            show(median(&|r| r.b_cpu_ms.map(|b| b / r.ceiling_cpu_ms))),
            show(median(&|r| r.b_server_ms)),
            show(median(&|r| r.b_rps.map(|b| b / r.a_rps))),
            show(median(&|r| r.b_cpu_ms.map(|b| b / r.a_cpu_ms))),
        );
    }
    Ok(out)
}
