//! Stand-ins for what sits between the service and its idempotency store when things go
//! wrong, each a real TCP peer on 127.0.0.1 running on the test's runtime: a pooler that
//! answers every connection with PgBouncer's `08P01` refusal, a listener that accepts and never
//! answers, and a proxy to the real Postgres that holds each of its answers back.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn listen() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    (listener, port)
}

/// A pooler at its `max_client_conn`: it reads the client's start-up (answering `N` to a TLS or
/// GSS request first), then answers as PgBouncer does, `FATAL 08P01 no more connections
/// allowed (max_client_conn)`, and closes. The port.
pub(crate) async fn full_pooler() -> u16 {
    let (listener, port) = listen().await;
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            tokio::spawn(async move {
                loop {
                    let mut head = [0u8; 8];
                    if client.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
                    let code = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
                    let mut rest = vec![0u8; len.saturating_sub(8)];
                    if client.read_exact(&mut rest).await.is_err() {
                        return;
                    }
                    // SSLRequest and GSSENCRequest: "not here", then the start-up follows.
                    if code == 80_877_103 || code == 80_877_104 {
                        if client.write_all(b"N").await.is_err() {
                            return;
                        }
                        continue;
                    }
                    let mut fields = Vec::new();
                    for (tag, value) in [
                        (b'S', "FATAL"),
                        (b'V', "FATAL"),
                        (b'C', "08P01"),
                        (b'M', "no more connections allowed (max_client_conn)"),
                    ] {
                        fields.push(tag);
                        fields.extend_from_slice(value.as_bytes());
                        fields.push(0);
                    }
                    fields.push(0);
                    let mut message = vec![b'E'];
                    let len = u32::try_from(fields.len() + 4).expect("short");
                    message.extend_from_slice(&len.to_be_bytes());
                    message.extend_from_slice(&fields);
                    let _ = client.write_all(&message).await;
                    return;
                }
            });
        }
    });
    port
}

/// Accepts connections and never sends a byte (a peer that hangs). The port.
pub(crate) async fn silent_listener() -> u16 {
    let (listener, port) = listen().await;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((client, _)) = listener.accept().await {
            held.push(client);
        }
    });
    port
}

/// A proxy to `upstream` (host and port) that forwards the client's bytes at once and holds
/// each chunk of the server's answers back for `delay`: a store that is up but slow to answer.
/// The port.
pub(crate) async fn slow_proxy(upstream: (String, u16), delay: Duration) -> u16 {
    let (listener, port) = listen().await;
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect((upstream.0.as_str(), upstream.1)).await else {
                    return;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let up = async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                };
                let down = async move {
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let n = match server_read.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        tokio::time::sleep(delay).await;
                        if client_write.write_all(&buffer[..n]).await.is_err() {
                            return;
                        }
                    }
                };
                tokio::join!(up, down);
            });
        }
    });
    port
}
