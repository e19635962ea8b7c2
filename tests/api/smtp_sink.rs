//! A real SMTP server for the mail tests: `tests/smtp/sink.py` (aiosmtpd, installed into a
//! virtualenv under target/ by `scripts/smtp-sink.sh`), a child process on 127.0.0.1 that
//! writes every message it accepts to a directory of its own, which [`SmtpSink::messages`]
//! reads back.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::OnceCell;

/// The virtualenv's python (installed once per test process).
static PYTHON: OnceCell<String> = OnceCell::const_new();

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests package sits in the repository")
}

async fn python() -> &'static str {
    PYTHON
        .get_or_init(|| async {
            let out = Command::new(repo_root().join("scripts/smtp-sink.sh"))
                .stderr(Stdio::inherit())
                .output()
                .await
                .expect("run scripts/smtp-sink.sh");
            assert!(out.status.success(), "scripts/smtp-sink.sh failed");
            String::from_utf8(out.stdout)
                .expect("a path")
                .trim()
                .to_owned()
        })
        .await
}

/// A port on 127.0.0.1 where nothing listens (yet).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// How to start the sink.
#[derive(Debug, Clone, Default)]
pub(crate) struct SinkOptions {
    /// Listen here (default: a free port).
    pub(crate) port: Option<u16>,
    /// Answer the first N messages `451` (temporary refusal).
    pub(crate) refuse: u32,
    /// Require AUTH with these credentials.
    pub(crate) auth: Option<(&'static str, &'static str)>,
    /// Speak TLS with this certificate and key.
    pub(crate) tls: Option<SinkTls>,
}

/// How the sink speaks TLS: a mode and the server's certificate and key (PEM files).
#[derive(Debug, Clone)]
pub(crate) struct SinkTls {
    /// `starttls` (mail only after STARTTLS) or `implicit` (TLS from the first byte).
    pub(crate) mode: &'static str,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

/// One message the sink accepted.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Received {
    pub(crate) rcpt_tos: Vec<String>,
    pub(crate) authenticated: bool,
    /// Whether the session was encrypted.
    pub(crate) tls: bool,
    /// The message as sent (headers, blank line, body).
    pub(crate) content: String,
}

impl Received {
    /// A header's value (the first of that name; folded lines joined).
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        let head = self.content.split("\r\n\r\n").next().unwrap_or_default();
        let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
        unfolded.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }

    /// The body, decoded when it is quoted-printable.
    pub(crate) fn body(&self) -> String {
        let body = self
            .content
            .split_once("\r\n\r\n")
            .map(|(_, body)| body)
            .unwrap_or_default();
        let quoted = self
            .header("Content-Transfer-Encoding")
            .is_some_and(|value| value.eq_ignore_ascii_case("quoted-printable"));
        if quoted {
            decode_quoted_printable(body)
        } else {
            body.replace("\r\n", "\n")
        }
    }

    /// The sign-in link in the body (`http…?token=rpl_…`).
    pub(crate) fn link(&self) -> String {
        let body = self.body();
        body.split_whitespace()
            .find(|word| word.starts_with("http") && word.contains("?token=rpl_"))
            .unwrap_or_else(|| panic!("no sign-in link in {body:?}"))
            .to_owned()
    }
}

fn decode_quoted_printable(text: &str) -> String {
    let joined = text.replace("=\r\n", "").replace("\r\n", "\n");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|pair| std::str::from_utf8(pair).ok())
            .and_then(|pair| u8::from_str_radix(pair, 16).ok());
        match (bytes[i], hex) {
            (b'=', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The running sink; killed and its directory removed on drop.
pub(crate) struct SmtpSink {
    child: Child,
    dir: PathBuf,
    pub(crate) port: u16,
    auth: Option<(&'static str, &'static str)>,
}

impl SmtpSink {
    /// Starts the sink and waits until it listens.
    pub(crate) async fn start(options: SinkOptions) -> Self {
        let python = python().await;
        let dir = std::env::temp_dir().join(format!("raptor-smtp-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("sink directory");
        let mut command = Command::new(python);
        command
            .arg(repo_root().join("tests/smtp/sink.py"))
            .arg(&dir)
            .args(["--port", &options.port.unwrap_or(0).to_string()])
            .args(["--refuse", &options.refuse.to_string()]);
        if let Some((user, password)) = options.auth {
            command.args(["--auth", &format!("{user}:{password}")]);
        }
        if let Some(tls) = &options.tls {
            command
                .args(["--tls", tls.mode, "--cert"])
                .arg(&tls.cert)
                .arg("--key")
                .arg(&tls.key);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start tests/smtp/sink.py");
        let stdout = child.stdout.take().expect("sink stdout");
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(30),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await
        .expect("the sink prints its port")
        .expect("read the sink's port");
        let port = line.trim().parse().expect("a port number");
        Self {
            child,
            dir,
            port,
            auth: options.auth,
        }
    }

    /// `RAPTOR_SMTP_URL` of this sink (plain SMTP, with the credentials when it wants AUTH).
    pub(crate) fn url(&self) -> String {
        smtp_url(self.port, self.auth)
    }

    /// Every message accepted so far, in order.
    pub(crate) fn messages(&self) -> Vec<Received> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .expect("sink directory")
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|path| {
                serde_json::from_slice(&std::fs::read(path).expect("message file"))
                    .expect("message json")
            })
            .collect()
    }

    /// The messages, once there are at least `count` (bounded wait: the sink writes each
    /// file after answering 250).
    pub(crate) async fn wait_for(&self, count: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let messages = self.messages();
            if messages.len() >= count {
                return messages;
            }
            assert!(
                Instant::now() < deadline,
                "the sink has {} messages, not {count}",
                messages.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The SMTP URL of a server on 127.0.0.1:`port`.
pub(crate) fn smtp_url(port: u16, auth: Option<(&str, &str)>) -> String {
    match auth {
        Some((user, password)) => format!("smtp://{user}:{password}@127.0.0.1:{port}"),
        None => format!("smtp://127.0.0.1:{port}"),
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
