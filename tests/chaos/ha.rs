//! The world of scenarios 8 and 9: a highly available PostgreSQL cluster built from Debian's
//! packages. etcd (one member) is Patroni's store; two PostgreSQL nodes run under Patroni
//! (`synchronous_mode`, a 10 s leader TTL, a 1 s loop); HAProxy sends every connection to the
//! node whose Patroni answers `GET /primary` with 200 and cuts the sessions of a node marked down
//! (`on-marked-down shutdown-sessions`); pgBackRest archives WAL from whichever node leads into
//! a repository of its own. Everything lives in `target/chaos/ha`, on free ports, and runs as the
//! `postgres` user when the driver is root. Every process started here is stopped on drop.
//! `RAPTOR_CHAOS_PATRONI` names another Patroni executable to run instead of Debian's.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use raptor_integration_tests::free_port;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use sqlx::PgPool;

use crate::env::{self, chown_postgres, is_root, pg_tool, postgres_ids, DATABASE};

/// Patroni's scope (the cluster's name in etcd) and pgBackRest's stanza.
pub(crate) const SCOPE: &str = "raptor-chaos";
const STANZA: &str = "raptor";
/// Patroni's leader key lifetime and loop, in seconds (failover after a dead leader: ≤ TTL).
pub(crate) const TTL_SECS: u64 = 10;
const LOOP_WAIT_SECS: u64 = 1;

/// A process started as `postgres` (when root), its output appended to `log`, killed on drop.
fn spawn_as_postgres(
    program: &str,
    args: &[String],
    log: &Path,
) -> anyhow::Result<tokio::process::Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true);
    if is_root() {
        let (uid, gid) = postgres_ids()?;
        command.uid(uid).gid(gid);
    }
    command
        .spawn()
        .with_context(|| format!("could not start {program} (make chaos installs it)"))
}

/// Waits until something accepts TCP connections on `port`.
async fn wait_port(port: u16, what: &str, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("{what} did not listen on {port} within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// `kill -SIGNAL pid`.
pub(crate) fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("kill -{sig} {pid} failed");
    }
    Ok(())
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purposes: it holds no shared memory and no socket.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

/// The pids whose parent is `pid` (the postmaster's backends and auxiliary processes).
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .ok()
                .and_then(|stat| {
                    stat.rsplit_once(')').and_then(|(_, rest)| {
                        rest.split_whitespace()
                            .nth(1)
                            .and_then(|p| p.parse::<u32>().ok())
                    })
                })
                == Some(pid)
        })
        .collect()
}

/// One PostgreSQL node and its Patroni.
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) data: PathBuf,
    pub(crate) sock: PathBuf,
    pub(crate) pg_port: u16,
    pub(crate) rest_port: u16,
    config: PathBuf,
    log: PathBuf,
    patroni: Option<tokio::process::Child>,
}

impl Node {
    /// The postmaster's pid, from `postmaster.pid`, if it runs.
    pub(crate) fn postmaster(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        let pid = text.lines().next()?.trim().parse().ok()?;
        alive(pid).then_some(pid)
    }

    pub(crate) fn rest(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.rest_port)
    }

    pub(crate) fn options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.pg_port)
            .username("postgres")
            .database(database)
            .ssl_mode(PgSslMode::Disable)
    }

    fn start_patroni(&mut self) -> anyhow::Result<()> {
        // RAPTOR_CHAOS_PATRONI: another Patroni to run (e.g. a newer one in a virtualenv, to
        // compare with Debian's); `patroni` from PATH otherwise.
        let program = std::env::var("RAPTOR_CHAOS_PATRONI").unwrap_or_else(|_| "patroni".into());
        let child = spawn_as_postgres(
            &program,
            &[self.config.to_string_lossy().into_owned()],
            &self.log,
        )?;
        self.patroni = Some(child);
        Ok(())
    }

    /// SIGKILL to Patroni (its PostgreSQL goes on running), and reap it.
    pub(crate) async fn kill_patroni(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.patroni.take() {
            child.kill().await.context("kill -9 patroni")?;
        }
        Ok(())
    }

    /// Freezes the node as a hung machine would: SIGSTOP to Patroni, the postmaster, then every
    /// process the postmaster had started (none can fork once it is stopped). Returns the pids,
    /// for [`Node::thaw`].
    pub(crate) fn freeze(&self) -> anyhow::Result<Vec<u32>> {
        let patroni = self
            .patroni
            .as_ref()
            .and_then(tokio::process::Child::id)
            .with_context(|| format!("{}: no Patroni running", self.name))?;
        let postmaster = self
            .postmaster()
            .with_context(|| format!("{}: no postmaster running", self.name))?;
        signal(patroni, "STOP")?;
        signal(postmaster, "STOP")?;
        let mut pids = vec![patroni, postmaster];
        for child in children(postmaster) {
            // A backend may exit between the listing and the signal.
            if signal(child, "STOP").is_ok() {
                pids.push(child);
            }
        }
        Ok(pids)
    }

    /// SIGCONT to what [`Node::freeze`] stopped.
    pub(crate) fn thaw(pids: &[u32]) {
        for pid in pids {
            let _ = signal(*pid, "CONT");
        }
    }

    /// SIGKILL to the postmaster; returns its pid and the pids of the processes it had started
    /// (they exit on their own when they notice the postmaster is gone).
    pub(crate) fn kill_postmaster(&self) -> anyhow::Result<(u32, Vec<u32>)> {
        let pid = self
            .postmaster()
            .with_context(|| format!("{}: no postmaster running", self.name))?;
        let kids = children(pid);
        signal(pid, "KILL")?;
        Ok((pid, kids))
    }
}

/// The cluster.
pub(crate) struct Ha {
    pub(crate) dir: PathBuf,
    pub(crate) bindir: PathBuf,
    pub(crate) nodes: Vec<Node>,
    /// HAProxy's port: the service's `DATABASE_URL` points here.
    pub(crate) proxy_port: u16,
    pub(crate) etcd_port: u16,
    /// pgBackRest's configuration file.
    pub(crate) backrest: PathBuf,
    etcd: Option<tokio::process::Child>,
    haproxy: Option<tokio::process::Child>,
    /// Data directories of the stand-alone instances started by [`Ha::start_standalone`].
    standalone: std::sync::Mutex<Vec<PathBuf>>,
    client: reqwest::Client,
}

impl Ha {
    /// Starts etcd, node0 (bootstraps the cluster and becomes leader), pgBackRest's stanza,
    /// node1 (a copy of node0 by `pg_basebackup`, then its synchronous standby), and HAProxy.
    pub(crate) async fn start(chaos_dir: &Path, synchronous: bool) -> anyhow::Result<Self> {
        let dir = chaos_dir.join("ha");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let bindir = env::pg_bindir()?;
        let (etcd_port, etcd_peer, proxy_port) = (free_port()?, free_port()?, free_port()?);
        let backrest_dir = dir.join("pgbackrest");
        for sub in ["repo", "log", "lock", "spool"] {
            std::fs::create_dir_all(backrest_dir.join(sub))?;
        }
        let backrest = backrest_dir.join("pgbackrest.conf");
        std::fs::write(
            &backrest,
            format!(
                "[global]\n\
                 repo1-path={repo}\n\
                 repo1-retention-full=2\n\
                 log-path={log}\n\
                 lock-path={lock}\n\
                 spool-path={spool}\n\
                 log-level-console=warn\n\
                 log-level-file=info\n\
                 start-fast=y\n\
                 compress-type=lz4\n\
                 \n\
                 [{STANZA}]\n",
                repo = backrest_dir.join("repo").display(),
                log = backrest_dir.join("log").display(),
                lock = backrest_dir.join("lock").display(),
                spool = backrest_dir.join("spool").display(),
            ),
        )?;
        let mut nodes = Vec::new();
        for i in 0..2 {
            let name = format!("node{i}");
            let ndir = dir.join(&name);
            let sock = ndir.join("sock");
            std::fs::create_dir_all(&sock)?;
            let (pg_port, rest_port) = (free_port()?, free_port()?);
            let data = ndir.join("data");
            let config = ndir.join("patroni.yml");
            std::fs::write(
                &config,
                patroni_yml(
                    &name,
                    &ndir,
                    &data,
                    &sock,
                    pg_port,
                    rest_port,
                    etcd_port,
                    &bindir,
                    &backrest,
                    synchronous,
                ),
            )?;
            nodes.push(Node {
                name,
                log: ndir.join("patroni.out"),
                dir: ndir,
                data,
                sock,
                pg_port,
                rest_port,
                config,
                patroni: None,
            });
        }
        let haproxy_cfg = dir.join("haproxy.cfg");
        std::fs::write(&haproxy_cfg, haproxy_cfg_text(proxy_port, &nodes))?;
        chown_postgres(&dir)?;
        // Patroni and PostgreSQL want their directories private to their user.
        for node in &nodes {
            std::fs::set_permissions(
                &node.dir,
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )?;
        }
        let etcd = spawn_as_postgres(
            "etcd",
            &[
                "--name".into(),
                SCOPE.into(),
                "--data-dir".into(),
                dir.join("etcd").to_string_lossy().into_owned(),
                "--listen-client-urls".into(),
                format!("http://127.0.0.1:{etcd_port}"),
                "--advertise-client-urls".into(),
                format!("http://127.0.0.1:{etcd_port}"),
                "--listen-peer-urls".into(),
                format!("http://127.0.0.1:{etcd_peer}"),
                "--initial-advertise-peer-urls".into(),
                format!("http://127.0.0.1:{etcd_peer}"),
                "--initial-cluster".into(),
                format!("{SCOPE}=http://127.0.0.1:{etcd_peer}"),
                "--initial-cluster-state".into(),
                "new".into(),
            ],
            &dir.join("etcd.log"),
        )?;
        let mut ha = Self {
            dir: dir.clone(),
            bindir,
            nodes,
            proxy_port,
            etcd_port,
            backrest,
            etcd: Some(etcd),
            haproxy: None,
            standalone: std::sync::Mutex::new(Vec::new()),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()?,
        };
        wait_port(etcd_port, "etcd", Duration::from_secs(20)).await?;
        ha.nodes[0].start_patroni()?;
        ha.wait_leader(Some(0), Duration::from_secs(60))
            .await
            .context("node0 did not bootstrap the cluster (target/chaos/ha/node0/patroni.log)")?;
        // The stanza before the first WAL segment is complete, so that archiving never fails.
        let out = ha.pgbackrest(0, &["stanza-create"]).await?;
        if !out.status.success() {
            bail!(
                "pgbackrest stanza-create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        ha.nodes[1].start_patroni()?;
        ha.wait_replicating(synchronous, Duration::from_secs(90))
            .await
            .context("node1 did not join as a standby (target/chaos/ha/node1/patroni.log)")?;
        let haproxy = spawn_as_postgres(
            "haproxy",
            &[
                "-db".into(),
                "-f".into(),
                haproxy_cfg.to_string_lossy().into_owned(),
            ],
            &dir.join("haproxy.log"),
        )?;
        ha.haproxy = Some(haproxy);
        wait_port(proxy_port, "haproxy", Duration::from_secs(10)).await?;
        ha.wait_proxy_primary(Duration::from_secs(20)).await?;
        Ok(ha)
    }

    /// Waits until 10 connections in a row through HAProxy reach the primary. HAProxy counts a
    /// server up until its checks have failed `fall` times, so for about a second after it
    /// starts it sends connections to the standby too.
    async fn wait_proxy_primary(&self, limit: Duration) -> anyhow::Result<()> {
        let options = PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.proxy_port)
            .username("postgres")
            .database("postgres")
            .ssl_mode(PgSslMode::Disable);
        let deadline = Instant::now() + limit;
        let mut in_a_row = 0;
        while in_a_row < 10 {
            let primary = async {
                let mut conn: sqlx::PgConnection =
                    sqlx::Connection::connect_with(&options).await.ok()?;
                let standby: bool = sqlx::query_scalar("select pg_is_in_recovery()")
                    .fetch_one(&mut conn)
                    .await
                    .ok()?;
                sqlx::Connection::close(conn).await.ok()?;
                Some(!standby)
            }
            .await;
            if primary == Some(true) {
                in_a_row += 1;
            } else {
                in_a_row = 0;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if Instant::now() > deadline {
                bail!("HAProxy did not route to the primary alone within {limit:?}");
            }
        }
        Ok(())
    }

    /// The service's URL of the cluster: through HAProxy, to whichever node leads.
    pub(crate) fn url(&self, user: &str) -> String {
        format!(
            "postgres://{user}@127.0.0.1:{}/{DATABASE}?sslmode=disable",
            self.proxy_port
        )
    }

    /// A pool of the driver's own through HAProxy (it pings before lending, unlike the
    /// service's, so a failover costs the driver no errors).
    pub(crate) async fn pool(&self, database: &str, size: u32) -> anyhow::Result<PgPool> {
        PgPoolOptions::new()
            .max_connections(size)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(
                PgConnectOptions::new()
                    .host("127.0.0.1")
                    .port(self.proxy_port)
                    .username("postgres")
                    .database(database)
                    .ssl_mode(PgSslMode::Disable),
            )
            .await
            .context("could not connect through haproxy")
    }

    /// Patroni's `GET path` on node `i`: its status, 0 if Patroni does not answer.
    pub(crate) async fn rest_status(&self, i: usize, path: &str) -> u16 {
        match self.client.get(self.nodes[i].rest(path)).send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// The node whose Patroni answers `GET /primary` with 200 (what HAProxy routes to).
    pub(crate) async fn leader(&self) -> Option<usize> {
        for i in 0..self.nodes.len() {
            if self.rest_status(i, "/primary").await == 200 {
                return Some(i);
            }
        }
        None
    }

    /// Waits until a node (`want`, or any) leads; returns it.
    pub(crate) async fn wait_leader(
        &self,
        want: Option<usize>,
        limit: Duration,
    ) -> anyhow::Result<usize> {
        let deadline = Instant::now() + limit;
        loop {
            let leader = match want {
                Some(i) => (self.rest_status(i, "/primary").await == 200).then_some(i),
                None => self.leader().await,
            };
            if let Some(i) = leader {
                return Ok(i);
            }
            if Instant::now() > deadline {
                bail!("no leader within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Patroni's `GET /cluster` from the first node that answers.
    pub(crate) async fn cluster(&self) -> anyhow::Result<serde_json::Value> {
        for node in &self.nodes {
            if let Ok(r) = self.client.get(node.rest("/cluster")).send().await {
                if r.status().is_success() {
                    return Ok(r.json().await?);
                }
            }
        }
        bail!("no Patroni answered GET /cluster")
    }

    /// Members as `name role state tl lag`, for the log.
    pub(crate) async fn describe(&self) -> String {
        match self.cluster().await {
            Ok(c) => c["members"]
                .as_array()
                .map(|ms| {
                    ms.iter()
                        .map(|m| {
                            format!(
                                "{} {} ({}, timeline {}, lag {})",
                                m["name"].as_str().unwrap_or("?"),
                                m["role"].as_str().unwrap_or("?"),
                                m["state"].as_str().unwrap_or("?"),
                                m["timeline"],
                                m.get("lag").map_or("-".to_owned(), |l| l.to_string())
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default(),
            Err(err) => format!("{err:#}"),
        }
    }

    /// Waits until one node leads and the other replicates from it, running, on the leader's
    /// timeline, with no lag: as the synchronous standby (`synchronous`) or an asynchronous
    /// replica. Returns the leader and its timeline.
    pub(crate) async fn wait_replicating(
        &self,
        synchronous: bool,
        limit: Duration,
    ) -> anyhow::Result<(usize, i64)> {
        let deadline = Instant::now() + limit;
        let want_role = if synchronous {
            "sync_standby"
        } else {
            "replica"
        };
        loop {
            if let Ok(c) = self.cluster().await {
                let members = c["members"].as_array().cloned().unwrap_or_default();
                let leader = members.iter().find(|m| m["role"] == "leader");
                let standby = members.iter().find(|m| m["role"] == want_role);
                if let (Some(l), Some(s)) = (leader, standby) {
                    // Patroni 3.0 says "running" of a replica, later versions "streaming".
                    let ok = l["state"] == "running"
                        && (s["state"] == "running" || s["state"] == "streaming")
                        && l["timeline"] == s["timeline"]
                        && s["lag"].as_i64() == Some(0);
                    if ok {
                        let name = l["name"].as_str().unwrap_or_default();
                        if let Some(i) = self.nodes.iter().position(|n| n.name == name) {
                            return Ok((i, l["timeline"].as_i64().unwrap_or(0)));
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "no leader with a {want_role} within {limit:?}: {}",
                    self.describe().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Restarts node `i`'s Patroni (after [`Node::kill_patroni`]).
    pub(crate) fn start_patroni(&mut self, i: usize) -> anyhow::Result<()> {
        self.nodes[i].start_patroni()
    }

    /// `PATCH /config` (Patroni's dynamic configuration in etcd), through node `i`.
    pub(crate) async fn patch_config(
        &self,
        i: usize,
        patch: serde_json::Value,
    ) -> anyhow::Result<()> {
        let r = self
            .client
            .patch(self.nodes[i].rest("/config"))
            .json(&patch)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("PATCH /config {patch}: {}", r.status());
        }
        Ok(())
    }

    /// Turns synchronous replication on or off (`synchronous_mode`) and waits until the
    /// leader's `pg_stat_replication` shows the standby as `sync` or `async`.
    pub(crate) async fn set_synchronous(&self, on: bool) -> anyhow::Result<()> {
        let leader = self.wait_leader(None, Duration::from_secs(30)).await?;
        self.patch_config(leader, serde_json::json!({ "synchronous_mode": on }))
            .await?;
        let want = if on { "sync" } else { "async" };
        let deadline = Instant::now() + Duration::from_secs(30);
        let options = self.nodes[leader].options("postgres");
        loop {
            let state: Option<String> = async {
                let mut conn: sqlx::PgConnection =
                    sqlx::Connection::connect_with(&options).await.ok()?;
                sqlx::query_scalar::<_, String>("select sync_state from pg_stat_replication")
                    .fetch_optional(&mut conn)
                    .await
                    .ok()
                    .flatten()
            }
            .await;
            if state.as_deref() == Some(want) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the standby did not become {want} ({state:?})");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs `pgbackrest --stanza=raptor <args>` as `postgres`, with node `i` as `pg1`.
    pub(crate) async fn pgbackrest(
        &self,
        i: usize,
        args: &[&str],
    ) -> anyhow::Result<std::process::Output> {
        let node = &self.nodes[i];
        self.pgbackrest_raw(
            &[
                format!("--pg1-path={}", node.data.display()),
                format!("--pg1-port={}", node.pg_port),
                format!("--pg1-socket-path={}", node.sock.display()),
            ],
            args,
        )
        .await
    }

    /// Runs `pgbackrest --config=… --stanza=raptor <pg> <args>` as `postgres`.
    pub(crate) async fn pgbackrest_raw(
        &self,
        pg: &[String],
        args: &[&str],
    ) -> anyhow::Result<std::process::Output> {
        let mut command = if is_root() {
            let mut c = tokio::process::Command::new("runuser");
            c.args(["-u", "postgres", "--", "pgbackrest"]);
            c
        } else {
            tokio::process::Command::new("pgbackrest")
        };
        command
            .arg(format!("--config={}", self.backrest.display()))
            .arg(format!("--stanza={STANZA}"))
            .args(pg)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .context("could not run pgbackrest")
    }

    /// Starts a stand-alone PostgreSQL on `data` (a restored copy, or a dead node inspected
    /// before Patroni takes it back) on `port`: isolated, never archiving, never waiting for a
    /// standby. Stopped on drop unless [`Ha::stop_standalone`] stopped it first.
    pub(crate) fn start_standalone(&self, data: &Path, port: u16) -> anyhow::Result<()> {
        let sock = data
            .parent()
            .context("data directory without a parent")?
            .join("sock-standalone");
        std::fs::create_dir_all(&sock)?;
        chown_postgres(&sock)?;
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c archive_mode=off \
             -c synchronous_standby_names= -c hot_standby=on",
            sock.display()
        );
        let log = data
            .parent()
            .context("data directory without a parent")?
            .join("standalone.log");
        let (data_s, log_s) = (
            data.to_string_lossy().into_owned(),
            log.to_string_lossy().into_owned(),
        );
        if let Ok(mut list) = self.standalone.lock() {
            list.push(data.to_path_buf());
        }
        let out = pg_tool(
            &self.bindir,
            "pg_ctl",
            &[
                "-D", &data_s, "-l", &log_s, "-w", "-t", "120", "-o", &opts, "start",
            ],
        )?;
        if !out.status.success() {
            bail!(
                "pg_ctl start on {} failed: {}{} (see {})",
                data.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                log.display()
            );
        }
        Ok(())
    }

    /// `pg_ctl stop -m fast` of a stand-alone instance.
    pub(crate) fn stop_standalone(&self, data: &Path) -> anyhow::Result<()> {
        let data_s = data.to_string_lossy().into_owned();
        let out = pg_tool(
            &self.bindir,
            "pg_ctl",
            &["-D", &data_s, "-m", "fast", "-w", "-t", "60", "stop"],
        )?;
        if !out.status.success() {
            bail!(
                "pg_ctl stop on {} failed: {}",
                data.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if let Ok(mut list) = self.standalone.lock() {
            list.retain(|d| d != data);
        }
        Ok(())
    }

    /// Waits until every pid in `pids` has exited (bounded).
    pub(crate) async fn wait_exited(pids: &[u32], limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while pids.iter().any(|p| alive(*p)) {
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

fn stop_data_dir(bindir: &Path, data: &Path) {
    if !data.join("postmaster.pid").exists() {
        return;
    }
    let data_s = data.to_string_lossy().into_owned();
    match pg_tool(
        bindir,
        "pg_ctl",
        &["-D", &data_s, "-m", "immediate", "-w", "-t", "30", "stop"],
    ) {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stderr);
            if !text.contains("not running") && !text.contains("No such file") {
                eprintln!("raptor-chaos: stopping {}: {}", data.display(), text.trim());
            }
        }
        Err(err) => eprintln!("raptor-chaos: stopping {}: {err:#}", data.display()),
    }
}

impl Drop for Ha {
    fn drop(&mut self) {
        // Patroni first, so that it does not start its PostgreSQL again.
        for node in &mut self.nodes {
            if let Some(child) = node.patroni.as_mut() {
                let _ = child.start_kill();
            }
        }
        if let Some(child) = self.haproxy.as_mut() {
            let _ = child.start_kill();
        }
        std::thread::sleep(Duration::from_millis(200));
        for node in &self.nodes {
            stop_data_dir(&self.bindir, &node.data);
        }
        let standalone = self
            .standalone
            .lock()
            .map(|l| l.clone())
            .unwrap_or_default();
        for data in standalone {
            stop_data_dir(&self.bindir, &data);
        }
        if let Some(child) = self.etcd.as_mut() {
            let _ = child.start_kill();
        }
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one node's Patroni settings, each a different kind of value"
)]
fn patroni_yml(
    name: &str,
    dir: &Path,
    data: &Path,
    sock: &Path,
    pg_port: u16,
    rest_port: u16,
    etcd_port: u16,
    bindir: &Path,
    backrest: &Path,
    synchronous: bool,
) -> String {
    // archive_command is per node: pgBackRest reads the node's own pg_control.
    let archive = format!(
        "pgbackrest --config={} --stanza={STANZA} --pg1-path={} archive-push %p",
        backrest.display(),
        data.display()
    );
    format!(
        "scope: {SCOPE}
name: {name}
log:
  level: INFO
  dir: {dir}
restapi:
  listen: 127.0.0.1:{rest_port}
  connect_address: 127.0.0.1:{rest_port}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: {TTL_SECS}
    loop_wait: {LOOP_WAIT_SECS}
    retry_timeout: 4
    # Only synchronous_mode tells the synchronous run from the asynchronous control: the lag
    # allowed at failover is large, so that the control fails over (and loses) instead of
    # refusing to promote.
    maximum_lag_on_failover: 1073741824
    synchronous_mode: {synchronous}
    # A crashed primary fails over at once instead of being restarted in place.
    primary_start_timeout: 0
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: 'on'
        max_connections: 300
        shared_buffers: 128MB
        max_wal_size: 256MB
        wal_keep_size: 64MB
        archive_mode: 'on'
        log_min_messages: warning
  initdb:
    - encoding: UTF8
    - auth: trust
  pg_hba:
    - local all all trust
    - local replication all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg_port}
  connect_address: 127.0.0.1:{pg_port}
  data_dir: {data}
  bin_dir: {bindir}
  pgpass: {pgpass}
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '{sock}'
    archive_command: '{archive}'
",
        dir = dir.display(),
        data = data.display(),
        bindir = bindir.display(),
        pgpass = dir.join("pgpass").display(),
        sock = sock.display(),
    )
}

fn haproxy_cfg_text(port: u16, nodes: &[Node]) -> String {
    let mut text = format!(
        "# The service's DATABASE_URL points here: every connection goes to the node whose
# Patroni answers GET /primary with 200. A node marked down has its sessions cut at once,
# so pooled connections to a dead or demoted primary fail on their next use instead of
# hanging. Client and server timeouts are longer than the pools' idle timeout (10 min).
global
    maxconn 2000

defaults
    mode tcp
    timeout connect 1s
    timeout client 1h
    timeout server 1h
    timeout check 500ms

listen postgres
    bind 127.0.0.1:{port}
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 500ms fastinter 250ms fall 2 rise 1 on-marked-down shutdown-sessions
"
    );
    for node in nodes {
        text.push_str(&format!(
            "    server {} 127.0.0.1:{} check port {}\n",
            node.name, node.pg_port, node.rest_port
        ));
    }
    text
}
