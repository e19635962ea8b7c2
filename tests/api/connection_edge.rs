//! The edge of the HTTP server: connections that never finish their request head are closed
//! after the header read timeout (an idle keep-alive connection too) while other clients are
//! served, an idle keep-alive connection is closed after the keep-alive timeout, a request head
//! over 32 KiB is answered `431 request_headers_too_large`, and a connection past the bound is
//! refused with `503 too_many_connections` and counted.

use std::time::Duration;

use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::helpers::{Options, TestApp, PROBLEM_JSON};

/// The real router served by [`raptor_server::serve_with`] with `edge` on 127.0.0.1:0.
pub(crate) async fn serve(
    app: &TestApp,
    edge: raptor_server::Edge,
) -> (
    std::net::SocketAddr,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(raptor_server::serve_with(
        listener,
        app.router.clone(),
        edge,
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop, task)
}

/// Reads until the server closes the connection (a reset counts as closed); what it sent.
/// The outer bound only keeps a broken server from hanging the test.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => return,
                Err(err) => panic!("read: {err}"),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server never closed the connection");
    received
}

/// 300 connections that send half a request line and stop are closed by a 1 s header read
/// timeout, and one keep-alive connection left idle after its first answer by the keep-alive
/// timeout; meanwhile ordinary requests are answered.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn half_open_connections_are_closed_and_others_served(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let edge = raptor_server::Edge {
            header_read_timeout: Duration::from_secs(1),
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let mut stalled = Vec::new();
        for _ in 0..300 {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.write_all(b"GET /healthz HT").await.expect("write");
            stalled.push(stream);
        }
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        let mut head = [0u8; 12];
        idle.read_exact(&mut head).await.expect("first answer");
        assert_eq!(&head, b"HTTP/1.1 200");

        let client = reqwest::Client::new();
        for _ in 0..20 {
            let answer = client
                .get(format!("http://{addr}/healthz"))
                .send()
                .await
                .expect("healthz while connections stall");
            assert_eq!(answer.status().as_u16(), 200);
        }
        for stream in &mut stalled {
            let sent = read_until_closed(stream).await;
            assert!(
                sent.is_empty() || sent.starts_with(b"HTTP/1.1 4"),
                "a stalled connection got {:?}",
                String::from_utf8_lossy(&sent)
            );
        }
        read_until_closed(&mut idle).await;
        let answer = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .expect("healthz after");
        assert_eq!(answer.status().as_u16(), 200);
        let _ = stop.send(());
        task.await.expect("join").expect("serve");
    })
    .await;
}

/// A request head over 32 KiB is answered 431 and the connection closed; one under it is
/// served.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn oversized_request_headers_get_431(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (addr, stop, task) = serve(app, raptor_server::Edge::default()).await;
        let request = |filler: usize| {
            format!(
                "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\nConnection: close\r\n\r\n",
                "a".repeat(filler)
            )
        };
        let mut big = TcpStream::connect(addr).await.expect("connect");
        // The server may close while the rest is still being written.
        let _ = big.write_all(request(200 * 1024).as_bytes()).await;
        let sent = read_until_closed(&mut big).await;
        let text = String::from_utf8_lossy(&sent);
        assert!(
            sent.starts_with(b"HTTP/1.1 431"),
            "200 KiB of headers got {text:?}"
        );
        let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
        let head = format!("{}\r\n", head.to_ascii_lowercase());
        assert!(
            head.contains(&format!("\r\ncontent-type: {PROBLEM_JSON}\r\n")),
            "{head}"
        );
        assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
        assert!(
            head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert_eq!(body["error"], "request_headers_too_large");
        assert_eq!(body["status"], 431);
        let document = raptor_api::openapi::to_json(&raptor_api::openapi());
        assert!(
            document.contains("\"request_headers_too_large\""),
            "the code is in the OpenAPI document"
        );
        let mut under = TcpStream::connect(addr).await.expect("connect");
        under
            .write_all(request(24 * 1024).as_bytes())
            .await
            .expect("write");
        let sent = read_until_closed(&mut under).await;
        assert!(
            sent.starts_with(b"HTTP/1.1 200"),
            "24 KiB of headers got {:?}",
            String::from_utf8_lossy(&sent)
        );
        let _ = stop.send(());
        task.await.expect("join").expect("serve");
    })
    .await;
}

/// With the bound at 5 connections, 5 held open make the 6th an immediate `503
/// too_many_connections` problem with `Connection: close` and `Retry-After`; once they close,
/// new connections are served again.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn connections_past_the_bound_are_refused(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let edge = raptor_server::Edge {
            header_read_timeout: Duration::from_secs(120),
            max_connections: 5,
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let mut held = Vec::new();
        for _ in 0..5 {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            stream.write_all(b"GET /healthz HT").await.expect("write");
            held.push(stream);
        }
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .expect("client");
        let refused_before = refused_total(app).await;
        let refused = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .expect("an answer past the bound");
        assert!(
            refused_total(app).await > refused_before,
            "raptor_connections_refused_total counts the refusal"
        );
        assert_eq!(refused.status().as_u16(), 503);
        let header = |name: &str| {
            refused
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(header("content-type").as_deref(), Some(PROBLEM_JSON));
        assert_eq!(header("connection").as_deref(), Some("close"));
        assert_eq!(header("retry-after").as_deref(), Some("1"));
        let body: serde_json::Value = refused.json().await.expect("json");
        assert_eq!(body["error"], "too_many_connections");
        assert_eq!(body["status"], 503);
        drop(held);
        // The permits come back as the server notices the closes.
        let mut served = false;
        for _ in 0..200 {
            let answer = client
                .get(format!("http://{addr}/healthz"))
                .send()
                .await
                .expect("healthz");
            if answer.status().as_u16() == 200 {
                served = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(served, "closed connections must free their places");
        let _ = stop.send(());
        task.await.expect("join").expect("serve");
    })
    .await;
}

/// `raptor_connections_refused_total{reason="max_connections"}` in the scrape (0 before the
/// first refusal).
async fn refused_total(app: &TestApp) -> f64 {
    let text = app.metrics().await;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("raptor_connections_refused_total{reason=\"max_connections\"} ")
        })
        .map_or(0.0, |value| value.trim().parse().expect("a number"))
}

/// Reads one answer whose head carries `content-length` from `stream`; its status line.
async fn read_answer(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&received[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("content-length");
                if received.len() >= end + 4 + length {
                    return head.lines().next().unwrap_or_default().to_owned();
                }
            }
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before the answer was complete");
            received.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    read.expect("an answer")
}

/// With a keep-alive timeout of 1 s and a header read timeout of 120 s, a keep-alive connection
/// serves a second request sent at once, and is then closed once idle, long before the header
/// read timeout: the two settings are distinct.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_idle_keepalive_connection_is_closed_after_the_keepalive_timeout(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let edge = raptor_server::Edge {
            header_read_timeout: Duration::from_secs(120),
            keepalive_timeout: Duration::from_secs(1),
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        for _ in 0..2 {
            conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .expect("write");
            assert_eq!(read_answer(&mut conn).await, "http/1.1 200 ok");
        }
        // Closed well within read_until_closed's 60 s, so not by the 120 s header timeout.
        let sent = read_until_closed(&mut conn).await;
        assert!(
            sent.is_empty(),
            "an idle connection got {:?}",
            String::from_utf8_lossy(&sent)
        );
        let _ = stop.send(());
        task.await.expect("join").expect("serve");
    })
    .await;
}

/// A keep-alive timeout longer than the header read timeout holds: with a keep-alive of 3 s and
/// a header read timeout of 1 s, a connection left idle for 2 s after its answer still serves
/// the next request (a load balancer that keeps its backend connections 600 s needs that).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_idle_keepalive_connection_outlives_the_header_read_timeout(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let edge = raptor_server::Edge {
            header_read_timeout: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(3),
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        assert_eq!(read_answer(&mut conn).await, "http/1.1 200 ok");
        tokio::time::sleep(Duration::from_secs(2)).await;
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write after 2 s idle");
        assert_eq!(read_answer(&mut conn).await, "http/1.1 200 ok");
        let _ = stop.send(());
        task.await.expect("join").expect("serve");
    })
    .await;
}

/// The header read timeout still binds a later request on a kept-alive connection: with a
/// keep-alive of 120 s and a header read timeout of 1 s, a second request whose head stalls
/// half-way is closed, long before the keep-alive timeout.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_stalled_head_on_a_kept_alive_connection_is_closed(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let edge = raptor_server::Edge {
            header_read_timeout: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(120),
            ..raptor_server::Edge::default()
        };
        let (addr, stop, task) = serve(app, edge).await;
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("write");
        assert_eq!(read_answer(&mut conn).await, "http/1.1 200 ok");
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHo")
            .await
            .expect("half a head");
        // Closed well within read_until_closed's 60 s, so not by the 120 s keep-alive (nor by
        // hyper's backstop of both together).
        let sent = read_until_closed(&mut conn).await;
        assert!(
            sent.is_empty() || sent.starts_with(b"HTTP/1.1 4"),
            "a stalled head got {:?}",
            String::from_utf8_lossy(&sent)
        );
        let _ = stop.send(());
        task.await.expect("join").expect("serve");
    })
    .await;
}
