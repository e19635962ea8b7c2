//! `/metrics` of a real `raptor serve` process (its own process, so its counters hold only what
//! the test did): orders, fills and rejections counted after real orders, both pools' gauges,
//! build info, the process, the schedules' last success, buckets past the request timeout;
//! and `RAPTOR_METRICS_ADDR` moving `/metrics` to a listener of its own.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use raptor_integration_tests::{free_port, ORDERS};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use tokio::process::{Child, Command};

use crate::behind_a_proxy::wait_for_health;
use crate::helpers::{count, database_url, metric, post_keyed_order, raptor, raptor_ok};

/// A `raptor serve` process with `env`, killed when dropped.
pub(crate) struct Served {
    _child: Child,
    port: u16,
    log: PathBuf,
}

impl Served {
    pub(crate) async fn start(env: &[(&str, String)]) -> Self {
        let port = free_port().expect("a free port");
        let log = std::env::temp_dir().join(format!("raptor-metrics-{}.log", uuid::Uuid::new_v4()));
        let child = Command::new(env!("CARGO_BIN_EXE_raptor-cli"))
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RAPTOR_ENV", "development")
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env("RAPTOR_ADDR", format!("127.0.0.1:{port}"))
            .env("RAPTOR_LOG_FORMAT", "json")
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .kill_on_drop(true)
            .spawn()
            .expect("start raptor serve");
        wait_for_health(port, &log).await;
        Self {
            _child: child,
            port,
            log,
        }
    }

    /// The process id (to read its memory).
    pub(crate) fn pid(&self) -> u32 {
        self._child.id().expect("running")
    }

    /// The port it serves on.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

async fn scrape(client: &reqwest::Client, base: &str) -> String {
    let answer = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("scrape");
    assert_eq!(answer.status(), StatusCode::OK);
    answer.text().await.expect("metrics text")
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

fn seeded_env(pool: &PgPool) -> (Vec<(&'static str, String)>, String) {
    let env = vec![("DATABASE_URL", database_url(pool))];
    raptor_ok(
        &env,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    );
    let created = raptor_ok(&env, &["users", "create", "--email", "metrics@example.com"]);
    let token = created["token"].as_str().expect("token").to_owned();
    (env, token)
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_scrape_shows_the_orders_pools_process_and_schedules_of_real_work(pool: PgPool) {
    let (mut env, token) = seeded_env(&pool);
    env.extend([
        ("RAPTOR_REQUEST_TIMEOUT_SECS", "2".to_owned()),
        ("RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", "1".to_owned()),
        ("RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS", "1".to_owned()),
        ("RAPTOR_MAIL_RELAY_INTERVAL_MS", "100".to_owned()),
    ]);
    let started = unix_now();
    let server = Served::start(&env).await;
    let (client, base) = (reqwest::Client::new(), server.base());
    let before = scrape(&client, &base).await;
    let placed = [("purpose", "order"), ("status", "filled")];
    let rejected = [("purpose", "order"), ("code", "insufficient_buying_power")];
    let submit_fill = [("trigger", "submit")];

    // One keyed order and its retry (a replay places nothing), then one the engine refuses.
    let key = uuid::Uuid::new_v4().to_string();
    for _ in 0..2 {
        let answer = post_keyed_order(&client, &base, &token, &key).await;
        assert_eq!(answer.status(), StatusCode::CREATED);
    }
    let refused = client
        .post(format!("{base}{ORDERS}"))
        .bearer_auth(&token)
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .json(
            &serde_json::json!({"symbol": "AAPL", "qty": "100000", "side": "buy",
                                  "type": "market", "time_in_force": "day"}),
        )
        .send()
        .await
        .expect("order");
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let body: Value = refused.json().await.expect("problem");
    assert_eq!(body["error"], "insufficient_buying_power");
    // And one refused before the engine sees it (its values), by its own code.
    let invalid = client
        .post(format!("{base}{ORDERS}"))
        .bearer_auth(&token)
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .json(
            &serde_json::json!({"symbol": "AAPL", "qty": "0", "side": "buy",
                                  "type": "market", "time_in_force": "day"}),
        )
        .send()
        .await
        .expect("order");
    assert!(invalid.status().is_client_error(), "{}", invalid.status());
    let body: Value = invalid.json().await.expect("problem");
    let invalid_code = body["error"].as_str().expect("a code").to_owned();

    let after = scrape(&client, &base).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        count(&after, name, labels) - count(&before, name, labels)
    };
    assert_eq!(delta("raptor_orders_placed_total", &placed), 1.0, "{after}");
    assert_eq!(delta("raptor_order_fills_total", &submit_fill), 1.0);
    assert_eq!(delta("raptor_order_rejections_total", &rejected), 1.0);
    assert_eq!(
        delta(
            "raptor_order_rejections_total",
            &[("purpose", "order"), ("code", &invalid_code)]
        ),
        1.0,
        "{invalid_code}: {after}"
    );
    assert_eq!(
        count(&after, "raptor_order_rejections_total", &[]),
        2.0,
        "nothing else counted as a rejection"
    );

    // Both pools: open connections, idle ones, their bound, and nobody waiting now.
    for pool in ["business", "store"] {
        let labels = [("pool", pool)];
        let open = metric(&after, "raptor_db_pool_connections", &labels)
            .unwrap_or_else(|| panic!("{pool} pool size missing:\n{after}"));
        assert!(open >= 1.0, "{pool}: {open}");
        let idle = metric(&after, "raptor_db_pool_idle_connections", &labels).expect("idle");
        assert!(idle <= open, "{pool}: {idle} idle of {open}");
        let max = metric(&after, "raptor_db_pool_max_connections", &labels).expect("max");
        assert!(max >= open, "{pool}: {open} open of {max}");
        assert_eq!(metric(&after, "raptor_db_pool_waiters", &labels), Some(0.0));
        assert!(
            metric(&after, "raptor_db_pool_acquire_seconds_count", &labels).unwrap_or(0.0) >= 1.0,
            "{pool}: acquires are timed"
        );
    }

    // Which build runs: the version of the binary and a commit (or `unknown`).
    let build = after
        .lines()
        .find(|l| l.starts_with("raptor_build_info{"))
        .unwrap_or_else(|| panic!("no build info:\n{after}"));
    assert!(build.ends_with(" 1"), "{build}");
    assert!(build.contains("version=\"0."), "{build}");
    let sha = build
        .split("git_sha=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("git_sha label");
    assert!(
        sha == "unknown" || (sha.len() >= 7 && sha.chars().all(|c| c.is_ascii_hexdigit())),
        "{build}"
    );

    // The process, from /proc.
    let rss = metric(&after, "process_resident_memory_bytes", &[]).expect("RSS");
    assert!(rss > 1_000_000.0, "RSS {rss}");
    assert!(metric(&after, "process_open_fds", &[]).expect("fds") >= 3.0);
    assert!(metric(&after, "process_max_fds", &[]).expect("max fds") >= 64.0);
    assert!(metric(&after, "process_cpu_seconds_total", &[]).expect("cpu") > 0.0);
    // The last year of the market calendar's holidays, which an alert holds against next year.
    assert_eq!(
        metric(&after, "raptor_market_calendar_last_year", &[]),
        Some(f64::from(raptor_engine::calendar::last_covered_year()))
    );
    // A counter (it only grows), so that rate() over it is the process's CPU use.
    assert!(
        after.contains("# TYPE process_cpu_seconds_total counter"),
        "process_cpu_seconds_total is not typed a counter:\n{}",
        after
            .lines()
            .filter(|l| l.contains("process_cpu"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let start = metric(&after, "process_start_time_seconds", &[]).expect("start time");
    assert!(
        (start - started).abs() < 30.0,
        "started at {start}, the test at {started}"
    );

    // Latency buckets reach past the 2 s request timeout (and its exposure for the alerts).
    assert_eq!(
        metric(&after, "raptor_request_timeout_seconds", &[]),
        Some(2.0)
    );
    for le in ["1.6", "1.8", "2", "3", "4", "+Inf"] {
        assert!(
            metric(
                &after,
                "raptor_http_request_duration_seconds_bucket",
                &[("le", le)]
            )
            .is_some(),
            "no le={le} bucket:\n{after}"
        );
    }
    assert!(metric(
        &after,
        "raptor_http_request_duration_seconds_bucket",
        &[("le", "10")]
    )
    .is_none());

    // Each schedule ran (at once, then every second) and says when it last succeeded; the
    // relay sampled the outbox on its way.
    let mut text = after;
    for _ in 0..50 {
        let all = ["order_expiry", "cleanup", "mail_relay"].iter().all(|s| {
            metric(
                &text,
                "raptor_schedule_last_success_timestamp_seconds",
                &[("schedule", s)],
            )
            .is_some()
        });
        if all {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        text = scrape(&client, &base).await;
    }
    for schedule in ["order_expiry", "cleanup", "mail_relay"] {
        let labels = [("schedule", schedule)];
        let at = metric(
            &text,
            "raptor_schedule_last_success_timestamp_seconds",
            &labels,
        )
        .unwrap_or_else(|| panic!("{schedule} never succeeded; log:\n{}", server.log()));
        assert!(
            at >= started - 1.0 && at <= unix_now() + 1.0,
            "{schedule} at {at}"
        );
        assert!(
            count(
                &text,
                "raptor_schedule_runs_total",
                &[("schedule", schedule), ("outcome", "ok")]
            ) >= 1.0
        );
        assert_eq!(
            count(
                &text,
                "raptor_schedule_runs_total",
                &[("schedule", schedule), ("outcome", "error")]
            ),
            0.0
        );
    }
    assert_eq!(metric(&text, "raptor_mail_outbox_unsent", &[]), Some(0.0));
    assert_eq!(
        metric(&text, "raptor_mail_outbox_oldest_unsent_age_seconds", &[]),
        Some(0.0)
    );
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn with_a_metrics_address_only_that_listener_serves_metrics(pool: PgPool) {
    let (mut env, token) = seeded_env(&pool);
    let metrics_port = free_port().expect("a free port");
    env.push(("RAPTOR_METRICS_ADDR", format!("127.0.0.1:{metrics_port}")));
    let server = Served::start(&env).await;
    let (client, base) = (reqwest::Client::new(), server.base());
    let metrics_base = format!("http://127.0.0.1:{metrics_port}");

    let answer = post_keyed_order(&client, &base, &token, &uuid::Uuid::new_v4().to_string()).await;
    assert_eq!(answer.status(), StatusCode::CREATED);

    let on_api = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("GET /metrics on the API");
    assert_eq!(on_api.status(), StatusCode::NOT_FOUND);
    let problem: Value = on_api.json().await.expect("a JSON problem");
    assert_eq!(problem["error"], "not_found");

    let text = scrape(&client, &metrics_base).await;
    assert_eq!(
        count(&text, "raptor_orders_placed_total", &[("purpose", "order")]),
        1.0,
        "{text}"
    );
    assert!(text.contains("raptor_build_info{"), "{text}");
    // The metrics listener serves nothing else; the API listener everything else.
    let other = client
        .get(format!("{metrics_base}/healthz"))
        .send()
        .await
        .expect("GET /healthz on the metrics listener");
    assert_eq!(other.status(), StatusCode::NOT_FOUND);
    let health = client
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
    assert!(
        server.log().contains("metrics listening"),
        "{}",
        server.log()
    );
}

/// A metrics address that is the API's own, or not an address, stops start-up naming it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_bad_metrics_address_is_a_start_up_error(pool: PgPool) {
    let port = free_port().expect("a free port");
    for (value, expected) in [
        (format!("127.0.0.1:{port}"), "must differ from RAPTOR_ADDR"),
        ("not-an-address".to_owned(), "RAPTOR_METRICS_ADDR"),
    ] {
        let env = [
            ("DATABASE_URL", database_url(&pool)),
            ("RAPTOR_ADDR", format!("127.0.0.1:{port}")),
            ("RAPTOR_METRICS_ADDR", value.clone()),
        ];
        let out = raptor(&env, &["serve"]);
        assert!(!out.status.success(), "{value} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{value}: {stderr}");
        assert!(stderr.contains("RAPTOR_METRICS_ADDR"), "{value}: {stderr}");
    }
}

/// A method no HTTP specification defines is counted as `_OTHER` (OpenTelemetry's HTTP
/// conventions): a client sending made-up methods cannot grow the series without bound.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_made_up_method_adds_no_series_of_its_own(pool: PgPool) {
    let (env, _token) = seeded_env(&pool);
    let server = Served::start(&env).await;
    let (client, base) = (reqwest::Client::new(), server.base());
    for method in ["BREW", "PROPFINDX", "GET"] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method token");
        let answer = client
            .request(method, format!("{base}/healthz"))
            .send()
            .await
            .expect("an answer");
        assert!(answer.status().as_u16() < 500, "{}", answer.status());
    }
    let text = scrape(&client, &base).await;
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("raptor_http_request_duration_seconds_count"))
        .collect();
    for made_up in ["BREW", "PROPFINDX"] {
        assert!(
            !text.contains(&format!("method=\"{made_up}\"")),
            "{made_up} is a label value:\n{}",
            series.join("\n")
        );
    }
    assert!(
        series.iter().any(|l| l.contains("method=\"_OTHER\"")),
        "no _OTHER series:\n{}",
        series.join("\n")
    );
    assert!(
        series.iter().any(|l| l.contains("method=\"GET\"")),
        "no GET series:\n{}",
        series.join("\n")
    );
}
