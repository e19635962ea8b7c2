//! Behind a load balancer: a real HAProxy (`option forwardfor`) in front of a real `raptor
//! serve` process. The forwarding header is believed only from a trusted proxy, so two clients
//! behind the proxy get per-IP rate limits of their own, and a client that sends its own
//! `X-Forwarded-For` stays in its own bucket; the access log names the client, the user and
//! the response size.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::process::{Child, Command};

use crate::helpers::{cli, database_url};

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// `raptor serve` as a process (the tests' copy of the binary), its log in `log`.
pub(crate) async fn start_raptor(
    pool: &PgPool,
    port: u16,
    log: &Path,
    env: &[(&str, &str)],
) -> Child {
    let log_file = std::fs::File::create(log).expect("log file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_raptor-cli"));
    command
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", database_url(pool))
        .env("RAPTOR_ENV", "development")
        .env("RAPTOR_ADDR", format!("127.0.0.1:{port}"))
        .env("RAPTOR_LOG_FORMAT", "json")
        .env("RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS", "0")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .kill_on_drop(true);
    let child = command.spawn().expect("start raptor");
    wait_for_health(port, log).await;
    child
}

pub(crate) async fn wait_for_health(port: u16, log: &Path) {
    let client = reqwest::Client::new();
    for _ in 0..300 {
        let answer = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await;
        if answer.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "nothing answered /healthz on {port}; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn haproxy_binary() -> PathBuf {
    for candidate in ["/usr/sbin/haproxy", "/usr/bin/haproxy"] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!("haproxy is not installed: scripts/haproxy-deps.sh installs it (make test runs it)");
}

/// HAProxy on `port`, HTTP mode, `option forwardfor`, in front of the server on `backend`.
pub(crate) async fn start_haproxy(dir: &Path, port: u16, backend: u16) -> Child {
    let config = format!(
        "global\n  maxconn 256\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
         frontend api\n  bind 127.0.0.1:{port}\n  option forwardfor\n  default_backend raptor\n\
         backend raptor\n  server raptor 127.0.0.1:{backend}\n"
    );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, config).expect("haproxy.cfg");
    let log = std::fs::File::create(dir.join("haproxy.log")).expect("haproxy log");
    let child = Command::new(haproxy_binary())
        .arg("-db")
        .arg("-f")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start haproxy");
    wait_for_health(port, &dir.join("haproxy.log")).await;
    child
}

/// An HTTP client whose connections leave from `source` (a loopback address of its own).
fn client_from(source: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(source.parse::<IpAddr>().expect("ip"))
        .build()
        .expect("client")
}

/// `POST /api/auth/register` for `email`, with `X-Forwarded-For: spoofed` when given.
async fn register(client: &reqwest::Client, port: u16, email: &str, spoofed: Option<&str>) -> u16 {
    let mut request = client
        .post(format!("http://127.0.0.1:{port}/api/auth/register"))
        .json(&json!({ "email": email }));
    if let Some(spoofed) = spoofed {
        request = request.header("x-forwarded-for", spoofed);
    }
    request.send().await.expect("register").status().as_u16()
}

async fn stop(mut child: Child) {
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// The access log's `request` lines (JSON format) of `route`.
pub(crate) fn request_lines(log: &Path, route: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| {
            line["fields"]["message"] == "request" && line["span"]["http.route"] == route
        })
        .collect()
}

/// Two clients behind HAProxy (127.0.0.2 and 127.0.0.3) have a sign-up budget each, and a
/// spoofed `X-Forwarded-For`, sent straight to the server or through the proxy, changes
/// nothing. Without the proxy trusted (the default), everyone behind it shares its bucket.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn clients_behind_haproxy_have_their_own_limits(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("raptor-proxy-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (api, proxy) = (free_port(), free_port());
    let raptor = start_raptor(
        &pool,
        api,
        &dir.join("raptor.log"),
        &[
            ("RAPTOR_TRUSTED_PROXIES", "127.0.0.1/32"),
            ("RAPTOR_AUTH_IP_PER_MINUTE", "2"),
        ],
    )
    .await;
    let haproxy = start_haproxy(&dir, proxy, api).await;
    let (two, three) = (client_from("127.0.0.2"), client_from("127.0.0.3"));

    // 127.0.0.2 spends its budget of 2 through the proxy; 127.0.0.3 still has its own.
    assert_eq!(register(&two, proxy, "a@example.com", None).await, 202);
    assert_eq!(register(&two, proxy, "b@example.com", None).await, 202);
    assert_eq!(register(&two, proxy, "c@example.com", None).await, 429);
    assert_eq!(register(&three, proxy, "d@example.com", None).await, 202);
    // Through the proxy, a client's own X-Forwarded-For is left of what HAProxy appends:
    // the right-most untrusted address is still the client's.
    assert_eq!(
        register(&two, proxy, "e@example.com", Some("127.0.0.50")).await,
        429,
        "a spoofed header through the proxy must not open a fresh bucket"
    );
    // Straight to the server, an untrusted peer's header is ignored: 127.0.0.3 uses up its
    // budget whatever address it claims.
    assert_eq!(
        register(&three, api, "f@example.com", Some("127.0.0.60")).await,
        202
    );
    assert_eq!(
        register(&three, api, "g@example.com", Some("127.0.0.61")).await,
        429,
        "a spoofed header from an untrusted peer must be ignored"
    );
    stop(haproxy).await;
    stop(raptor).await;

    // The same proxy, not trusted: both clients are the proxy's address, one bucket.
    let raptor = start_raptor(
        &pool,
        api,
        &dir.join("untrusted.log"),
        &[("RAPTOR_AUTH_IP_PER_MINUTE", "2")],
    )
    .await;
    let haproxy = start_haproxy(&dir, proxy, api).await;
    assert_eq!(register(&two, proxy, "h@example.com", None).await, 202);
    assert_eq!(register(&three, proxy, "i@example.com", None).await, 202);
    assert_eq!(register(&three, proxy, "j@example.com", None).await, 429);
    stop(haproxy).await;
    stop(raptor).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The access log line of a request names the client behind the proxy, the signed-in user and
/// the size of the response body; an anonymous request's line has no user.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_access_log_names_client_user_and_size(pool: PgPool) {
    let dir = std::env::temp_dir().join(format!("raptor-log-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let created = cli(&pool, &["users", "create", "--email", "log@example.com"])
        .await
        .expect("user");
    let (user_id, token) = (
        created["user_id"].as_i64().expect("user_id"),
        created["token"].as_str().expect("token").to_owned(),
    );
    let (api, proxy) = (free_port(), free_port());
    let log = dir.join("raptor.log");
    let raptor = start_raptor(&pool, api, &log, &[("RAPTOR_TRUSTED_PROXIES", "127.0.0.1")]).await;
    let haproxy = start_haproxy(&dir, proxy, api).await;
    let client = client_from("127.0.0.2");
    let profile = client
        .get(format!("http://127.0.0.1:{proxy}/api/account/profile"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("profile");
    assert_eq!(profile.status().as_u16(), 200);
    let size = profile.bytes().await.expect("body").len();
    assert_eq!(
        register(&client, proxy, "anon@example.com", None).await,
        202
    );
    stop(haproxy).await;
    stop(raptor).await;

    let lines = request_lines(&log, "/api/account/profile");
    let [line] = lines.as_slice() else {
        panic!("one access log line for the profile, got {lines:?}");
    };
    let fields = &line["fields"];
    assert_eq!(fields["status"], 200);
    assert_eq!(fields["client_addr"], "127.0.0.2", "{line}");
    assert_eq!(fields["user_id"], user_id, "{line}");
    assert_eq!(fields["bytes"], json!(size), "{line}");
    let lines = request_lines(&log, "/api/auth/register");
    let [line] = lines.as_slice() else {
        panic!("one access log line for the sign-up, got {lines:?}");
    };
    assert_eq!(line["fields"]["client_addr"], "127.0.0.2", "{line}");
    assert!(line["fields"].get("user_id").is_none(), "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}
