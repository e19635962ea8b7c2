//! The chaos suite's own world: a Postgres cluster under `target/chaos/pg`, an optional
//! PgBouncer, `raptor serve` replicas, and an HTTP client that records every answer.
//! Everything started here is stopped by `Drop` (also on error and Ctrl-C).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use raptor_integration_tests::{free_port, raptor_binary, ORDERS, ORDER_BODY};
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::PgPool;
use uuid::Uuid;

/// Settings every replica gets (short, so that the scenarios run in seconds).
pub(crate) const REQUEST_TIMEOUT_SECS: u64 = 4;
pub(crate) const STALE_AFTER_SECS: u64 = 5;
pub(crate) const LOCK_TIMEOUT_MS: u64 = 2_000;
pub(crate) const STATEMENT_TIMEOUT_MS: u64 = 3_000;
pub(crate) const STORE_TIMEOUT_MS: u64 = 2_000;
pub(crate) const POOL_SIZE: u32 = 20;
pub(crate) const DATABASE: &str = "chaos";
/// Every account's starting cash (`RAPTOR_PAPER_STARTING_CASH`): enough for any scenario.
pub(crate) const STARTING_CASH: rust_decimal::Decimal =
    rust_decimal::Decimal::from_parts(100_000_000, 0, 0, false, 0);
const RESPONSE_KEYS: &str = "chaos:Q2hhb3NLZXlDaGFvc0tleUNoYW9zS2V5Q2hhb3NLZXk=";

pub(crate) use raptor_integration_tests::pg::{
    chown_postgres, initdb, is_root, pg_bindir, pg_tool,
};

/// (uid, gid) of the `postgres` user (when running as root).
pub(crate) fn postgres_ids() -> anyhow::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 3 && fields[0] == "postgres" {
            return Ok((fields[2].parse()?, fields[3].parse()?));
        }
    }
    bail!("no postgres user (scripts/chaos-deps.sh, run by `make chaos`, creates one)")
}

/// The driver's own cluster: `initdb` into `target/chaos/pg`, a free port, stopped on drop.
pub(crate) struct Cluster {
    pub(crate) bindir: PathBuf,
    pub(crate) data: PathBuf,
    pub(crate) port: u16,
    pub(crate) dir: PathBuf,
}

impl Cluster {
    pub(crate) fn start(dir: &Path) -> anyhow::Result<Self> {
        let bindir = pg_bindir()?;
        let root = dir.join("pg");
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        std::fs::create_dir_all(root.join("sock"))?;
        chown_postgres(dir)?;
        let data = root.join("data");
        initdb(&bindir, &data)?;
        let port = free_port()?;
        let cluster = Self {
            bindir,
            data,
            port,
            dir: root,
        };
        cluster.pg_start()?;
        Ok(cluster)
    }

    fn opts(&self) -> String {
        format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 \
             -c shared_buffers=128MB -c log_min_messages=warning",
            self.port,
            self.dir.join("sock").display()
        )
    }

    pub(crate) fn pg_start(&self) -> anyhow::Result<()> {
        let (data, log, opts) = (
            self.data.to_string_lossy().into_owned(),
            self.dir.join("log").to_string_lossy().into_owned(),
            self.opts(),
        );
        let out = pg_tool(
            &self.bindir,
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-w", "-t", "60", "-o", &opts, "start",
            ],
        )?;
        if !out.status.success() {
            bail!(
                "pg_ctl start failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// `pg_ctl stop -m MODE` (fast or immediate).
    pub(crate) fn pg_stop(&self, mode: &str) -> anyhow::Result<()> {
        let data = self.data.to_string_lossy().into_owned();
        let out = pg_tool(
            &self.bindir,
            "pg_ctl",
            &["-D", &data, "-m", mode, "-w", "-t", "60", "stop"],
        )?;
        if !out.status.success() {
            bail!(
                "pg_ctl stop failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    pub(crate) fn options(&self, database: &str, user: &str) -> PgConnectOptions {
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.port)
            .username(user)
            .database(database)
            .ssl_mode(PgSslMode::Disable)
    }

    pub(crate) fn url(&self, user: &str) -> String {
        format!(
            "postgres://{user}@127.0.0.1:{}/{DATABASE}?sslmode=disable",
            self.port
        )
    }

    pub(crate) async fn pool(&self, size: u32) -> anyhow::Result<PgPool> {
        PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(self.options(DATABASE, "postgres"))
            .await
            .context("could not connect to the chaos cluster")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Err(err) = self.pg_stop("immediate") {
            eprintln!("raptor-chaos: stopping the cluster: {err:#}");
        }
    }
}

/// PgBouncer (transaction pooling) in front of the cluster, run as `postgres`, killed on drop.
pub(crate) struct Bouncer {
    child: tokio::process::Child,
    pub(crate) port: u16,
    pub(crate) ini: PathBuf,
}

impl Bouncer {
    pub(crate) async fn start(dir: &Path, cluster: &Cluster, mode: &str) -> anyhow::Result<Self> {
        let binary = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .context("pgbouncer is not installed (make chaos installs it with apt-get)")?;
        let port = free_port()?;
        let bdir = dir.join(format!("pgbouncer-{mode}"));
        std::fs::create_dir_all(&bdir)?;
        let users = bdir.join("userlist.txt");
        std::fs::write(
            &users,
            "\"raptor\" \"\"\n\"raptor_idem\" \"\"\n\"postgres\" \"\"\n",
        )?;
        let ini = bdir.join("pgbouncer.ini");
        let text = format!(
            "[databases]\n\
             {DATABASE} = host=127.0.0.1 port={pg} dbname={DATABASE}\n\
             \n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {users}\n\
             pool_mode = {mode}\n\
             max_client_conn = 1000\n\
             default_pool_size = {pool}\n\
             reserve_pool_size = 0\n\
             server_login_retry = 1\n\
             ignore_startup_parameters = extra_float_digits\n\
             logfile = {log}\n\
             admin_users = postgres\n",
            pg = cluster.port,
            users = users.display(),
            pool = if mode == "session" { 80 } else { 20 },
            log = bdir.join("pgbouncer.log").display(),
        );
        std::fs::write(&ini, text)?;
        chown_postgres(&bdir)?;
        let mut command = tokio::process::Command::new(binary);
        command
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if is_root() {
            let (uid, gid) = postgres_ids()?;
            command.uid(uid).gid(gid);
        }
        let child = command.spawn().context("could not start pgbouncer")?;
        let bouncer = Self { child, port, ini };
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if Instant::now() > deadline {
                bail!("pgbouncer did not listen on {port}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(bouncer)
    }

    pub(crate) fn url(&self, user: &str) -> String {
        format!(
            "postgres://{user}@127.0.0.1:{}/{DATABASE}?sslmode=disable",
            self.port
        )
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// One `raptor serve` process.
pub(crate) struct Replica {
    pub(crate) child: Option<tokio::process::Child>,
    pub(crate) port: u16,
    pub(crate) base: String,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) log: PathBuf,
}

/// The environment every replica and CLI call gets, plus `extra`.
pub(crate) fn base_env(database_url: &str, extra: &[(&str, String)]) -> Vec<(String, String)> {
    let mut env: HashMap<String, String> = [
        ("DATABASE_URL", database_url.to_owned()),
        ("RAPTOR_LOG_FORMAT", "json".to_owned()),
        ("RUST_LOG", "warn".to_owned()),
        (
            "RAPTOR_REQUEST_TIMEOUT_SECS",
            REQUEST_TIMEOUT_SECS.to_string(),
        ),
        ("IDEMPOTENCY_STALE_AFTER_SECS", STALE_AFTER_SECS.to_string()),
        ("IDEMPOTENCY_STORE_TIMEOUT_MS", STORE_TIMEOUT_MS.to_string()),
        ("RAPTOR_DB_LOCK_TIMEOUT_MS", LOCK_TIMEOUT_MS.to_string()),
        (
            "RAPTOR_DB_STATEMENT_TIMEOUT_MS",
            STATEMENT_TIMEOUT_MS.to_string(),
        ),
        ("RAPTOR_DB_POOL_SIZE", POOL_SIZE.to_string()),
        ("RAPTOR_ACCOUNT_WRITE_CONCURRENCY", "16".to_owned()),
        ("RAPTOR_ACCOUNT_WRITE_WAIT_MS", "3000".to_owned()),
        ("RAPTOR_PAPER_STARTING_CASH", STARTING_CASH.to_string()),
        ("RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", "0".to_owned()),
        ("RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS", "0".to_owned()),
        ("RAPTOR_RESPONSE_KEYS", RESPONSE_KEYS.to_owned()),
        ("STRIPE_TIMEOUT_MS", "2000".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (k, v) in extra {
        env.insert((*k).to_owned(), v.clone());
    }
    let mut env: Vec<_> = env.into_iter().collect();
    env.sort();
    env
}

impl Replica {
    pub(crate) async fn spawn(
        dir: &Path,
        name: &str,
        env: Vec<(String, String)>,
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let log = dir.join(format!("{name}.log"));
        let mut replica = Self {
            child: None,
            port,
            base: format!("http://127.0.0.1:{port}"),
            env,
            log,
        };
        replica.start().await?;
        Ok(replica)
    }

    /// Starts (or restarts) the process on the same port and waits for `/readyz`.
    pub(crate) async fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = tokio::process::Command::new(raptor_binary("make chaos")?)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RAPTOR_ENV", "development")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("RAPTOR_ADDR", format!("127.0.0.1:{}", self.port))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .context("could not start raptor serve")?;
        self.child = Some(child);
        self.wait_ready(Duration::from_secs(30)).await
    }

    pub(crate) async fn wait_ready(&mut self, limit: Duration) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + limit;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("raptor serve exited ({status}); see {}", self.log.display());
                }
            }
            if let Ok(r) = client
                .get(format!("{}/readyz", self.base))
                .timeout(Duration::from_secs(2))
                .send()
                .await
            {
                if r.status().is_success() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("replica on {} not ready after {limit:?}", self.port);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL, and reap.
    pub(crate) async fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await.context("kill -9")?;
        }
        Ok(())
    }
}

/// Runs `raptor <args>` once with `env`; its stdout as JSON.
pub(crate) async fn raptor_cli(
    env: &[(String, String)],
    args: &[&str],
) -> anyhow::Result<serde_json::Value> {
    let out = tokio::process::Command::new(raptor_binary("make chaos")?)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RAPTOR_ENV", "development")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("could not run raptor")?;
    if !out.status.success() {
        bail!(
            "raptor {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).with_context(|| format!("raptor {args:?} printed {text:?}"))
}

#[derive(Clone, Debug)]
pub(crate) struct User {
    pub(crate) id: i32,
    pub(crate) token: String,
}

/// `n` users made with `raptor users create` (8 at a time): the operator; scenario users are
/// made in-process (`World::users`).
pub(crate) async fn users(
    env: &[(String, String)],
    prefix: &str,
    n: usize,
    role: &str,
) -> anyhow::Result<Vec<User>> {
    let mut out = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(8) {
        let mut set = tokio::task::JoinSet::new();
        for &i in chunk {
            let env = env.to_vec();
            let email = format!("{prefix}-{i}-{}@example.com", Uuid::new_v4().simple());
            let role = role.to_owned();
            set.spawn(async move {
                raptor_cli(
                    &env,
                    &["users", "create", "--email", &email, "--role", &role],
                )
                .await
            });
        }
        let mut made = Vec::new();
        while let Some(joined) = set.join_next().await {
            let value = joined??;
            made.push(User {
                id: value["user_id"]
                    .as_i64()
                    .and_then(|v| i32::try_from(v).ok())
                    .context("user_id")?,
                token: value["token"].as_str().context("token")?.to_owned(),
            });
        }
        made.sort_by_key(|u| u.id);
        out.extend(made);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// One answer (status 0: no HTTP answer, `transport` says why).
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) replayed: Option<String>,
    pub(crate) retry_after: Option<String>,
    pub(crate) code: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) order_id: Option<String>,
    pub(crate) elapsed: Duration,
    pub(crate) transport: Option<String>,
}

impl Answer {
    /// Non-final: retry with the same key (no answer, 503, 409 in flight, 429).
    pub(crate) fn retryable(&self) -> bool {
        matches!(self.status, 0 | 503 | 429)
            || (self.status == 409 && self.code.as_deref() == Some("idempotency_in_flight"))
    }

    pub(crate) fn label(&self) -> String {
        match (self.status, &self.code) {
            (0, _) => "no answer".to_owned(),
            (s, Some(code)) => format!("{s} {code}"),
            (201, None) if self.replayed.as_deref() == Some("true") => "201 replay".to_owned(),
            (s, None) => s.to_string(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    /// Every keyed order sent through this client and its answer (`history.rs`).
    pub(crate) history: crate::history::History,
}

impl Http {
    pub(crate) fn new() -> anyhow::Result<Self> {
        Ok(Self {
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .timeout(Duration::from_secs(REQUEST_TIMEOUT_SECS + 6))
                .build()?,
            history: crate::history::History::default(),
        })
    }

    pub(crate) async fn order(&self, base: &str, token: &str, key: Option<&str>) -> Answer {
        let invoked = Instant::now();
        let answer = self
            .send(
                reqwest::Method::POST,
                base,
                ORDERS,
                token,
                key,
                Some(ORDER_BODY.to_owned()),
            )
            .await;
        if let Some(key) = key {
            self.history.record(crate::history::Record {
                scope: hex::encode(&Sha256::digest(token.as_bytes())[..8]),
                token: token.to_owned(),
                key: key.to_owned(),
                body: hex::encode(&Sha256::digest(ORDER_BODY.as_bytes())[..8]),
                invoked,
                returned: Instant::now(),
                status: answer.status,
                code: answer.code.clone(),
                order_id: answer.order_id.clone(),
                replayed: answer.replayed.clone(),
            });
        }
        answer
    }

    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        base: &str,
        path: &str,
        token: &str,
        key: Option<&str>,
        body: Option<String>,
    ) -> Answer {
        let started = Instant::now();
        let mut request = self
            .client
            .request(method, format!("{base}{path}"))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        let header = |r: &reqwest::Response, name: &str| {
            r.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let replayed = header(&response, "idempotent-replayed");
                let retry_after = header(&response, "retry-after");
                let text = response.text().await.unwrap_or_default();
                let json: serde_json::Value =
                    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
                let code = json["error"]
                    .as_str()
                    .or_else(|| json["code"].as_str())
                    .map(str::to_owned)
                    .filter(|_| status >= 400);
                let message = json["message"].as_str().map(str::to_owned);
                let order_id = json["id"]
                    .as_str()
                    .map(str::to_owned)
                    .filter(|_| status < 300);
                Answer {
                    status,
                    replayed,
                    retry_after,
                    code,
                    message,
                    order_id,
                    elapsed: started.elapsed(),
                    transport: None,
                }
            }
            Err(err) => Answer {
                status: 0,
                replayed: None,
                retry_after: None,
                code: None,
                message: None,
                order_id: None,
                elapsed: started.elapsed(),
                transport: Some(err.to_string()),
            },
        }
    }

    /// The body of `GET url`, when it answers 200.
    pub(crate) async fn text(&self, url: &str) -> Option<String> {
        let response = self.client.get(url).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        response.text().await.ok()
    }

    pub(crate) async fn readyz(&self, base: &str) -> u16 {
        match self
            .client
            .get(format!("{base}/readyz"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
        {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        }
    }
}

/// Sends `key` until a final answer (bounded by `attempts` and `limit`), waiting `pause`
/// between tries; every answer is returned, the last one is final unless the bounds ran out.
pub(crate) async fn until_final(
    http: &Http,
    bases: &[String],
    token: &str,
    key: &str,
    attempts: usize,
    limit: Duration,
    pause: Duration,
) -> Vec<Answer> {
    let started = Instant::now();
    let mut answers = Vec::new();
    for i in 0..attempts {
        let base = &bases[i % bases.len()];
        let answer = http.order(base, token, Some(key)).await;
        let done = !answer.retryable();
        answers.push(answer);
        if done || started.elapsed() > limit {
            break;
        }
        tokio::time::sleep(pause).await;
    }
    answers
}

/// Shared tallies of answers by label.
#[derive(Default)]
pub(crate) struct Tally {
    inner: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Tally {
    pub(crate) fn add(&self, label: String) {
        if let Ok(mut map) = self.inner.lock() {
            *map.entry(label).or_default() += 1;
        }
    }

    pub(crate) fn summary(&self) -> String {
        self.inner
            .lock()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }

    pub(crate) fn snapshot(&self) -> std::collections::BTreeMap<String, u64> {
        self.inner.lock().map(|m| m.clone()).unwrap_or_default()
    }
}
