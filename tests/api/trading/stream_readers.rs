//! Readers that stop reading a trade-updates stream, over real sockets: what the server holds
//! for one stays bounded (a page of events, whatever waits in Postgres), and one that stays
//! stopped is dropped after the write stall timeout, giving its place back.

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use uuid::Uuid;

use crate::connection_edge::serve;
use crate::helpers::{database_url, post_keyed_order, raptor_ok, Options, Order, TestApp};
use crate::metrics::Served;

/// Events a stopped reader is sent in these tests.
const EVENTS: i64 = 10_000;

/// The bound the server's resident memory keeps under while [`EVENTS`] events wait for a
/// reader that stopped reading: a page of them (100), the socket's buffers in user space, and
/// the allocator's slack. A stream that read every waiting event at once holds all of them
/// (about 3 KiB each with its order) and passes it.
const STOPPED_READER_MIB: u64 = 8;

/// A connection to `addr` that reads slowly by construction: a small receive buffer, so the
/// server's writes block after a little.
async fn small_window(addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    socket.connect(addr).await.expect("connect")
}

/// Opens the stream of `token` on `stream` and reads the answer's head (200).
async fn open_raw(stream: &mut TcpStream, token: &str) {
    let request = format!(
        "GET /api/trading/stream HTTP/1.1\r\nHost: raptor\r\nAuthorization: Bearer {token}\r\n\
         Accept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).await.expect("answer head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

/// `n` more trade events of the user: copies of their fill's audit row (each with the order),
/// written in one transaction as a busy account's would be over time.
async fn copies_of_fill(pool: &PgPool, user_id: i32, n: i64) {
    let written = sqlx::query(
        "insert into audit_log (user_id, action, context)
         select user_id, action, context from audit_log, generate_series(1, $2)
          where id = (select max(id) from audit_log where user_id = $1 and action = 'order.filled')",
    )
    .bind(user_id)
    .bind(n)
    .execute(pool)
    .await
    .expect("copies");
    assert_eq!(written.rows_affected(), u64::try_from(n).expect("n"));
}

/// One market order of `token` for 1 AAPL, filled at once (its `new` and `fill` events).
async fn buy_one(app: &TestApp, token: &str) {
    let placed = app
        .create_order(
            token,
            Uuid::new_v4(),
            &Order::market("AAPL").buy().qty("1").day().json(),
        )
        .await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
}

/// Reads `stream` into `received` until it holds `count` messages, each read within `wait`.
async fn read_messages(
    stream: &mut TcpStream,
    received: &mut Vec<u8>,
    count: usize,
    wait: Duration,
) {
    let mut buf = vec![0u8; 64 * 1024];
    while messages(received) < count {
        let n = tokio::time::timeout(wait, stream.read(&mut buf))
            .await
            .expect("the next events in time")
            .expect("read");
        assert!(n > 0, "the stream was closed");
        received.extend_from_slice(&buf[..n]);
    }
}

/// Events (`data:` lines; the position a stream opens with has none) in `bytes`.
fn messages(bytes: &[u8]) -> usize {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|line| line.starts_with("data:"))
        .count()
}

/// A reader that stops reading is dropped once the server's writes to it have made no progress
/// for the write stall timeout (1 s here): its stream ends and its place is given back.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_reader_that_stops_reading_is_dropped(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let edge = raptor_server::Edge {
            write_stall_timeout: Duration::from_secs(1),
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let (user_id, token) = app.user("stopped@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        buy_one(app, &token).await;

        let mut stopped = small_window(addr).await;
        open_raw(&mut stopped, &token).await;
        assert_eq!(app.state.trade_streams().open_streams(), 1);
        copies_of_fill(&app.pool, user_id, EVENTS).await;

        // The stream writes until the socket's buffers are full, then stalls for 1 s.
        let until = Instant::now() + Duration::from_secs(30);
        while app.state.trade_streams().open_streams() > 0 {
            assert!(
                Instant::now() < until,
                "a reader that stopped reading still holds its stream after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // What the socket got before the drop is a prefix of the events, not all of them.
        let mut received = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(10), stopped.read_to_end(&mut received)).await;
        let got = messages(&received);
        assert!(
            got < usize::try_from(EVENTS).expect("events"),
            "all {got} events reached a reader that never read"
        );

        // The user streams again at once (the place was given back).
        let mut again = TcpStream::connect(addr).await.expect("connect");
        open_raw(&mut again, &token).await;
        let _ = stop.send(());
        drop(again);
        drop(stopped);
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    })
    .await;
}

/// A stream is not an idle keep-alive connection: with no event for longer than the keep-alive
/// and header read timeouts (1 s each here) it stays open and carries the next one.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_quiet_stream_outlives_the_keepalive_timeout(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        // hyper's own head timer, the backstop, is their sum (2 s).
        let edge = raptor_server::Edge {
            keepalive_timeout: Duration::from_secs(1),
            header_read_timeout: Duration::from_secs(1),
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let (_, token) = app.user("quiet@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let mut reader = TcpStream::connect(addr).await.expect("connect");
        open_raw(&mut reader, &token).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        buy_one(app, &token).await;
        read_messages(&mut reader, &mut Vec::new(), 2, Duration::from_secs(5)).await;
        let _ = stop.send(());
        drop(reader);
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    })
    .await;
}

/// Resident memory of `pid` in KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// The resident memory of `pid` once it has not grown for a second (the stream stopped
/// writing), in KiB.
async fn settled_rss(pid: u32) -> u64 {
    let mut last = rss_kib(pid);
    let mut still = 0;
    let until = Instant::now() + Duration::from_secs(30);
    while still < 5 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = rss_kib(pid);
        still = if now > last { 0 } else { still + 1 };
        last = last.max(now);
    }
    last
}

/// 10,000 events wait for a reader of a real `raptor serve` process that stopped reading: the
/// server's resident memory grows by less than [`STOPPED_READER_MIB`], and once the reader
/// reads again it gets every event, once, in order.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_stopped_reader_costs_a_bounded_amount_of_memory(pool: PgPool) {
    let env = vec![
        ("DATABASE_URL", database_url(&pool)),
        // Longer than the test: the reader is paused, not dropped.
        ("RAPTOR_WRITE_STALL_TIMEOUT_SECS", "600".to_owned()),
    ];
    raptor_ok(
        &env,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    );
    let created = raptor_ok(&env, &["users", "create", "--email", "paused@example.com"]);
    let token = created["token"].as_str().expect("token").to_owned();
    let user_id = i32::try_from(created["user_id"].as_i64().expect("user id")).expect("id");
    let served = Served::start(&env).await;
    let client = reqwest::Client::new();
    let placed =
        post_keyed_order(&client, &served.base(), &token, &Uuid::new_v4().to_string()).await;
    assert_eq!(placed.status(), reqwest::StatusCode::CREATED);

    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], served.port()));
    let mut reader = small_window(addr).await;
    open_raw(&mut reader, &token).await;
    // Warm: a first batch read to the end, so the paths and buffers exist before the baseline.
    copies_of_fill(&pool, user_id, 500).await;
    let mut received = Vec::new();
    read_messages(&mut reader, &mut received, 500, Duration::from_secs(10)).await;
    let before = settled_rss(served.pid()).await;

    copies_of_fill(&pool, user_id, EVENTS).await;
    let during = settled_rss(served.pid()).await;
    let grown_mib = during.saturating_sub(before) / 1024;
    assert!(
        grown_mib < STOPPED_READER_MIB,
        "{EVENTS} events to a stopped reader grew the server by {grown_mib} MiB \
         ({before} KiB -> {during} KiB)"
    );

    // Reading again, the reader gets every event, once, in order.
    let expected = 500 + usize::try_from(EVENTS).expect("events");
    read_messages(
        &mut reader,
        &mut received,
        expected,
        Duration::from_secs(20),
    )
    .await;
    let ids: Vec<i64> = String::from_utf8_lossy(&received)
        .lines()
        .filter_map(|line| line.strip_prefix("id:"))
        .map(|id| id.trim().parse().expect("id"))
        .collect();
    // The stream's position first, then every event.
    assert_eq!(ids.len(), expected + 1);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in order, once");
}
