//! The server under test (`raptor serve`, its resident memory) and the HTTP client that drives
//! it.

use std::borrow::Cow;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use raptor_integration_tests::raptor_binary;

/// `raptor serve` on `port`; `sweeper` keeps its quote sweeper on (the counting server's is off,
/// so that its idle polls do not count as the orders' statements).
pub(crate) async fn start_server(
    database_url: &str,
    port: u16,
    sweeper: bool,
    pool_size: u32,
    extra_env: &[(String, String)],
) -> anyhow::Result<(tokio::process::Child, u32)> {
    let child = tokio::process::Command::new(raptor_binary("make bench")?)
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DATABASE_URL", database_url)
        .env("RAPTOR_ENV", "development")
        .env("RAPTOR_ADDR", format!("127.0.0.1:{port}"))
        .env("RAPTOR_LOG_FORMAT", "json")
        .env("RUST_LOG", "warn")
        .env("RAPTOR_DB_POOL_SIZE", pool_size.to_string())
        .env("RAPTOR_PAPER_STARTING_CASH", "100000000.00")
        .env("RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", "0")
        .env("RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS", "0")
        .env(
            "RAPTOR_QUOTE_SWEEP_INTERVAL_MS",
            if sweeper { "1000" } else { "0" },
        )
        // Stored responses are encrypted, as in production: the cost is part of every figure.
        .env(
            "RAPTOR_RESPONSE_KEYS",
            "bench:QmVuY2hLZXlCZW5jaEtleUJlbmNoS2V5QmVuY2hLZXk=",
        )
        .envs(extra_env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("could not start raptor serve")?;
    let pid = child.id().context("raptor exited at once")?;
    Ok((child, pid))
}

/// (peak, current) resident set of `pid` in MiB.
pub(crate) fn rss_mib(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((kib("VmHWM:") / 1024.0, kib("VmRSS:") / 1024.0))
}

// ---------------------------------------------------------------------------------------------
// HTTP

#[derive(Clone)]
pub(crate) struct Req {
    pub(crate) method: reqwest::Method,
    pub(crate) path: String,
    pub(crate) token: String,
    pub(crate) key: Option<String>,
    pub(crate) body: Option<Cow<'static, str>>,
}

#[derive(Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
    base: Arc<str>,
}

pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) elapsed: Duration,
}

/// What a failed request was: its status and error code (`503 database_busy`), or the
/// transport error.
pub(crate) fn error_kind(answer: &anyhow::Result<Answer>) -> String {
    match answer {
        Ok(answer) => {
            let code = serde_json::from_str::<serde_json::Value>(&answer.body)
                .ok()
                .and_then(|body| body["error"].as_str().map(str::to_owned))
                .unwrap_or_default();
            format!("{} {code}", answer.status)
        }
        Err(err) => format!("transport: {err}"),
    }
}

impl Http {
    pub(crate) fn new(base: String) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(256)
            .timeout(Duration::from_secs(30))
            .build()
            .context("reqwest client")?;
        Ok(Self {
            client,
            base: base.into(),
        })
    }

    pub(crate) async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(response) = self
                .client
                .get(format!("{}/readyz", self.base))
                .send()
                .await
            {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("raptor did not become ready");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn send(&self, req: Req) -> anyhow::Result<Answer> {
        let started = Instant::now();
        let mut request = self
            .client
            .request(req.method, format!("{}{}", self.base, req.path))
            .bearer_auth(&req.token);
        if let Some(body) = req.body {
            let body: reqwest::Body = match body {
                Cow::Borrowed(text) => text.into(),
                Cow::Owned(text) => text.into(),
            };
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        if let Some(key) = &req.key {
            request = request.header("idempotency-key", key);
        }
        let response = request.send().await.context("request")?;
        let status = response.status().as_u16();
        let body = response.text().await.context("response body")?;
        Ok(Answer {
            status,
            body,
            elapsed: started.elapsed(),
        })
    }
}

/// The soft and hard limits on open files of `pid` (`self` for this process), from
/// `/proc/<pid>/limits`; `u64::MAX` for `unlimited`.
pub(crate) fn open_files_limit(pid: &str) -> anyhow::Result<(u64, u64)> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .with_context(|| format!("read /proc/{pid}/limits"))?;
    let line = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .with_context(|| format!("no open files limit in /proc/{pid}/limits"))?;
    let mut values = line.split_whitespace().map(|value| match value {
        "unlimited" => Some(u64::MAX),
        n => n.parse().ok(),
    });
    match (values.next().flatten(), values.next().flatten()) {
        (Some(soft), Some(hard)) => Ok((soft, hard)),
        _ => bail!("unreadable open files limit in /proc/{pid}/limits: {line}"),
    }
}

/// A TCP socket of a process: its ports and its state (`/proc/net/tcp`'s hex code:
/// [`ESTABLISHED`], [`CLOSE_WAIT`], ...).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Socket {
    pub(crate) local_port: u16,
    pub(crate) remote_port: u16,
    pub(crate) state: u8,
}

pub(crate) const ESTABLISHED: u8 = 0x01;
/// The peer closed its side and this process has not closed its own yet.
pub(crate) const CLOSE_WAIT: u8 = 0x08;

/// The TCP sockets (IPv4 and IPv6) that `pid` holds open: the kernel's table of the network
/// namespace, kept to the sockets whose inode is one of the process's descriptors (the table
/// lists every process's sockets).
pub(crate) fn sockets(pid: u32) -> anyhow::Result<Vec<Socket>> {
    let mut inodes = std::collections::HashSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("read /proc/{pid}/fd"))?
    {
        // A descriptor closed between the listing and the read is skipped.
        let Ok(target) = std::fs::read_link(entry?.path()) else {
            continue;
        };
        if let Some(inode) = target
            .to_str()
            .and_then(|t| t.strip_prefix("socket:["))
            .and_then(|t| t.strip_suffix(']'))
        {
            inodes.insert(inode.to_owned());
        }
    }
    let port = |address: &str| {
        address
            .rsplit_once(':')
            .and_then(|(_, port)| u16::from_str_radix(port, 16).ok())
    };
    let mut found = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(remote), Some(state), Some(inode)) =
                (fields.get(1), fields.get(2), fields.get(3), fields.get(9))
            else {
                continue;
            };
            if !inodes.contains(*inode) {
                continue;
            }
            if let (Some(local_port), Some(remote_port), Ok(state)) =
                (port(local), port(remote), u8::from_str_radix(state, 16))
            {
                found.push(Socket {
                    local_port,
                    remote_port,
                    state,
                });
            }
        }
    }
    Ok(found)
}
