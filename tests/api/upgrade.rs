//! Upgrades that keep at-most-once and money (docs/operations.md, "Upgrading"): the previous
//! release's `raptor` (built from its commit by `make upgrade-check`, `RAPTOR_PREVIOUS_BIN`)
//! serves while this release migrates the database and serves beside it, as in a rolling
//! deploy. Orders, fills and option positions written by either binary reconcile: every
//! position is what its fills add up to, its expiry dates are what its symbol and quantity say,
//! and every option position settles once at expiry, whichever binary opened it.

use std::path::Path;
use std::process::Stdio;

use chrono::TimeZone;
use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::process::{Child, Command};

use crate::behind_a_proxy::wait_for_health;
use crate::helpers::{database_url, Options, TestApp};

/// The call the option positions are opened with: expiring 2027-01-15, strike 65.
const CALL: &str = "XYZ270115C00065000";

/// `binary <args>` with the test's database; what it printed, as JSON.
fn run(binary: &Path, url: &str, args: &[&str]) -> Value {
    let out = std::process::Command::new(binary)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", url)
        .env("RAPTOR_ENV", "development")
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run raptor");
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `binary serve` on a free port; the port (once `/healthz` answers) and the process.
async fn serve(binary: &Path, url: &str, log: &Path) -> (u16, Child) {
    let port = raptor_integration_tests::free_port().expect("a free port");
    let child = Command::new(binary)
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", url)
        .env("RAPTOR_ENV", "development")
        .env("RAPTOR_ADDR", format!("127.0.0.1:{port}"))
        .env("RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", "0")
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .kill_on_drop(true)
        .spawn()
        .expect("start raptor serve");
    wait_for_health(port, log).await;
    (port, child)
}

/// A keyed order placed through the server on `port`; its answer.
async fn place(port: u16, token: &str, body: Value) -> Value {
    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/trading/orders"))
        .bearer_auth(token)
        .header("idempotency-key", uuid::Uuid::new_v4().to_string())
        .json(&body)
        .send()
        .await
        .expect("order");
    let status = answer.status();
    let body: Value = answer.json().await.expect("json");
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

fn option_order(side: &str, intent: &str, qty: &str) -> Value {
    json!({ "symbol": CALL, "qty": qty, "side": side, "type": "market",
            "position_intent": intent, "time_in_force": "day" })
}

/// The rows of `paper_positions` whose quantity is not the sum of their fills.
async fn positions_off_their_fills(app: &TestApp) -> i64 {
    app.count(
        "select count(*) from paper_positions p
          where p.qty <> coalesce((select sum(case when f.side = 'buy' then f.qty else -f.qty end)
                                     from paper_fills f
                                    where f.user_id = p.user_id and f.symbol = p.symbol), 0)",
    )
    .await
}

/// The rows of `paper_positions` whose expiry dates are not what the symbol and quantity say.
async fn expiry_dates_wrong(app: &TestApp) -> i64 {
    app.count(
        "select count(*) from paper_positions p
          where p.expiry_date is distinct from occ_expiry_date(p.symbol)
             or p.open_expiry_date is distinct from
                  (case when p.qty <> 0 then occ_expiry_date(p.symbol) end)",
    )
    .await
}

/// The accounts whose cash is not the starting cash moved by their fills and settlements.
async fn cash_off_its_history(app: &TestApp) -> i64 {
    app.count(
        "select count(*) from paper_accounts a
          where a.cash <> 100000
                - coalesce((select sum(case when f.side = 'buy' then 1 else -1 end
                                       * f.qty * f.price * f.multiplier)
                              from paper_fills f where f.user_id = a.user_id), 0)
                + coalesce((select sum((l.context->>'cash_delta')::numeric) from audit_log l
                             where l.user_id = a.user_id and l.action = 'position.expired'), 0)",
    )
    .await
}

#[sqlx::test(migrations = false)]
#[ignore = "needs the previous release's binary (RAPTOR_PREVIOUS_BIN): make upgrade-check"]
async fn the_previous_release_serves_beside_this_one(pool: PgPool) {
    let previous = std::path::PathBuf::from(
        std::env::var("RAPTOR_PREVIOUS_BIN")
            .expect("RAPTOR_PREVIOUS_BIN: the previous release's raptor (make upgrade-check)"),
    );
    let current = Path::new(env!("CARGO_BIN_EXE_raptor-cli"));
    let url = database_url(&pool);
    let dir = std::env::temp_dir().join(format!("raptor-upgrade-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    // Settled as of 17:00 New York on the call's expiration day, by this release's code.
    let after_expiry = Options {
        now: chrono::Utc
            .with_ymd_and_hms(2027, 1, 15, 22, 0, 0)
            .single()
            .expect("instant"),
        ..Options::default()
    };

    // The previous release migrates and serves, and the users trade on it.
    run(&previous, &url, &["migrate"]);
    let user = |email: &str| {
        run(&previous, &url, &["users", "create", "--email", email])["token"]
            .as_str()
            .expect("token")
            .to_owned()
    };
    let (first, second, third) = (
        user("first@example.com"),
        user("second@example.com"),
        user("third@example.com"),
    );
    for (symbol, bid, ask) in [
        (CALL, "5.90", "6.10"),
        ("XYZ", "69.90", "70.10"),
        ("AAPL", "189.90", "190.10"),
    ] {
        run(
            &previous,
            &url,
            &["quotes", "set", symbol, "--bid", bid, "--ask", ask],
        );
    }
    let (old_port, old_server) = serve(&previous, &url, &dir.join("previous.log")).await;
    place(old_port, &first, option_order("buy", "buy_to_open", "1")).await;

    // This release migrates while the previous one serves, then serves beside it.
    run(current, &url, &["migrate"]);
    let (new_port, new_server) = serve(current, &url, &dir.join("current.log")).await;

    // Option positions opened, closed and reopened by either binary on the migrated schema.
    place(old_port, &second, option_order("buy", "buy_to_open", "2")).await;
    place(new_port, &third, option_order("buy", "buy_to_open", "3")).await;
    place(new_port, &first, option_order("sell", "sell_to_close", "1")).await;
    place(old_port, &first, option_order("buy", "buy_to_open", "1")).await;
    place(old_port, &third, option_order("sell", "sell_to_close", "1")).await;
    // Equities on both.
    let aapl = json!({ "symbol": "AAPL", "qty": "2", "side": "buy", "type": "market" });
    place(old_port, &second, aapl.clone()).await;
    place(new_port, &second, aapl).await;
    drop(old_server);
    drop(new_server);

    TestApp::run(&pool, after_expiry, async |app| {
        assert_eq!(positions_off_their_fills(app).await, 0, "positions and fills disagree");
        assert_eq!(expiry_dates_wrong(app).await, 0, "expiry dates not kept");
        assert_eq!(cash_off_its_history(app).await, 0, "cash and fills disagree");
        let open: i64 = app
            .count("select coalesce(sum(qty), 0)::bigint from paper_positions where symbol = 'XYZ270115C00065000'")
            .await;
        assert_eq!(open, 1 + 2 + 2);

        // At expiry (underlying at 70, strike 65), every position settles once, whichever
        // binary opened it.
        let done = raptor_api::trading::expire_orders(&app.state)
            .await
            .expect("expiry pass");
        assert_eq!((done.settled, done.awaiting_quote), (3, 0), "every position settles");
        assert_eq!(
            app.count("select count(*) from paper_positions where qty <> 0 and symbol <> 'AAPL'")
                .await,
            0
        );
        assert_eq!(
            app.count("select count(*) from audit_log where action = 'position.expired'")
                .await,
            3,
            "each once"
        );
        assert_eq!(expiry_dates_wrong(app).await, 0);
        assert_eq!(cash_off_its_history(app).await, 0, "cash and settlements disagree");
        let again = raptor_api::trading::expire_orders(&app.state)
            .await
            .expect("second pass");
        assert_eq!(again.settled, 0);
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The upgrade rule, checked on every migration written since it was made (20261203200000):
/// one that runs in a transaction sets its own `lock_timeout` (`SET LOCAL`), and an index on an
/// existing table is built `CONCURRENTLY`, in a file of its own outside a transaction
/// (`-- no-transaction`). (`raptor migrate` also runs every migration with a lock timeout.)
#[test]
fn migrations_follow_the_upgrade_rule() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations");
    let mut wrong = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).expect("migrations") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if !name.ends_with(".sql") || name.as_str() < "20261203200000" {
            continue;
        }
        checked += 1;
        let sql = std::fs::read_to_string(&path).expect("read");
        let code: String = sql
            .lines()
            .filter(|line| !line.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n")
            .to_lowercase();
        let no_transaction = sql.starts_with("-- no-transaction");
        if !no_transaction && !code.contains("set local lock_timeout") {
            wrong.push(format!("{name}: no SET LOCAL lock_timeout"));
        }
        if code.contains("create index") && !code.contains("create index concurrently") {
            wrong.push(format!("{name}: CREATE INDEX without CONCURRENTLY"));
        }
        if no_transaction && code.matches(';').count() > 1 {
            wrong.push(format!(
                "{name}: more than one statement outside a transaction"
            ));
        }
    }
    assert!(checked >= 4, "only {checked} migrations checked");
    assert!(wrong.is_empty(), "{wrong:#?}");
}
