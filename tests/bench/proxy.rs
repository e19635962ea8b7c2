//! A counting TCP proxy between the server and Postgres: it forwards bytes both ways unchanged
//! and counts the client's round trips, i.e. the frontend messages that make Postgres answer:
//! `Sync` (the end of an extended-protocol query: Parse/Bind/Execute/Sync) and `Query` (a
//! simple-protocol statement such as `BEGIN`/`COMMIT`). A `Sync` with nothing before it is a
//! ping (sqlx pings every connection it gets back, after the request's work), counted apart.
//! Needs `sslmode=disable` (it reads the protocol in clear).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy's counters.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    round_trips: AtomicU64,
    pings: AtomicU64,
}

impl Counts {
    /// Statements: extended-protocol queries and simple queries.
    pub(crate) fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Bare `Sync`s: the pool's connection checks.
    pub(crate) fn pings(&self) -> u64 {
        self.pings.load(Ordering::Relaxed)
    }
}

/// Listens on 127.0.0.1:0 and forwards every connection to `upstream`, on a thread of its own
/// (one single-threaded runtime) so that its CPU can be told apart from the load generator's.
/// Returns the port and the thread's id (`/proc/self/task/<tid>`).
pub(crate) fn start(upstream: String, counts: Arc<Counts>) -> anyhow::Result<(u16, u32)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("bench-proxy".into())
        .spawn(move || {
            let tid = std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|link| link.file_name()?.to_str()?.parse::<u32>().ok());
            let _ = tid_tx.send(tid);
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let Ok(listener) = TcpListener::from_std(listener) else {
                    return;
                };
                while let Ok((client, _)) = listener.accept().await {
                    let (upstream, counts) = (upstream.clone(), counts.clone());
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(&upstream).await {
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            relay(client, server, counts).await;
                        }
                    });
                }
            });
        })?;
    let tid = tid_rx
        .recv()?
        .ok_or_else(|| anyhow::anyhow!("the proxy thread has no id in /proc/thread-self"))?;
    Ok((port, tid))
}

async fn relay(client: TcpStream, server: TcpStream, counts: Arc<Counts>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async move {
        let mut parser = Frontend::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let (statements, pings) = parser.feed(&buf[..n]);
            counts.round_trips.fetch_add(statements, Ordering::Relaxed);
            counts.pings.fetch_add(pings, Ordering::Relaxed);
            if server_write.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// Splits the client's byte stream into protocol messages. Before the startup message,
/// messages have no type byte (SSLRequest, GSSENCRequest, StartupMessage).
#[derive(Default)]
struct Frontend {
    started: bool,
    /// A message other than Sync came since the last Sync or Query.
    busy: bool,
    pending: Vec<u8>,
}

impl Frontend {
    /// Consumes bytes; returns how many statements and pings completed in them.
    fn feed(&mut self, bytes: &[u8]) -> (u64, u64) {
        self.pending.extend_from_slice(bytes);
        let (mut count, mut pings) = (0, 0);
        loop {
            let header = if self.started { 5 } else { 4 };
            if self.pending.len() < header {
                break;
            }
            let at = header - 4;
            let len = u32::from_be_bytes([
                self.pending[at],
                self.pending[at + 1],
                self.pending[at + 2],
                self.pending[at + 3],
            ]) as usize;
            let total = at + len;
            if len < 4 || self.pending.len() < total {
                break;
            }
            if self.started {
                match self.pending[0] {
                    b'Q' => {
                        count += 1;
                        self.busy = false;
                    }
                    b'S' if self.busy => {
                        count += 1;
                        self.busy = false;
                    }
                    b'S' => pings += 1,
                    _ => self.busy = true,
                }
            } else if len >= 8 {
                let code = u32::from_be_bytes([
                    self.pending[4],
                    self.pending[5],
                    self.pending[6],
                    self.pending[7],
                ]);
                // 80877103 SSLRequest, 80877104 GSSENCRequest: the startup message follows.
                if code != 80_877_103 && code != 80_877_104 {
                    self.started = true;
                }
            }
            self.pending.drain(..total);
        }
        (count, pings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&u32::try_from(body.len() + 4).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn counts_syncs_and_simple_queries_across_chunks() {
        let mut parser = Frontend::default();
        let mut startup = 8u32.to_be_bytes().to_vec();
        startup.extend_from_slice(&196_608u32.to_be_bytes());
        assert_eq!(parser.feed(&startup), (0, 0));
        let mut stream = message(b'P', b"select 1\0\0\0");
        stream.extend(message(b'B', b"\0\0\0\0\0\0"));
        stream.extend(message(b'E', b"\0\0\0\0\0"));
        stream.extend(message(b'S', b""));
        stream.extend(message(b'Q', b"BEGIN\0"));
        stream.extend(message(b'S', b""));
        let (a, b) = stream.split_at(7);
        let (first, second) = (parser.feed(a), parser.feed(b));
        assert_eq!((first.0 + second.0, first.1 + second.1), (2, 1));
    }
}
