//! Serving HTTP: the connection loop (one hyper HTTP/1 connection per accepted socket, with the
//! limits of [`Edge`]), the API's own serving with the drain of its background work, and the
//! shutdown signals.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use raptor_api::ApiState;
use tokio::net::TcpListener;

use crate::edge;

/// How long `serve` waits, once the last request is answered, for the work spawned off
/// requests that the process still owes (key releases and settlements, queued sign-in links).
pub const BACKGROUND_DRAIN: Duration = Duration::from_secs(10);

/// Serves `state`'s API on `listener` until `shutdown` resolves, lets in-flight requests
/// finish, then waits up to [`BACKGROUND_DRAIN`] for the work they spawned
/// ([`raptor_idempotency::Idempotency::drain`]), so that exiting the process does not leave a
/// released key in flight or a login link unqueued.
pub async fn serve_state(
    listener: TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_state_with(listener, state, Edge::default(), shutdown).await
}

/// [`serve_state`] with the connection limits of `edge`.
pub async fn serve_state_with(
    listener: TcpListener,
    state: ApiState,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = raptor_api::app(state.clone());
    let served = serve_with(listener, app, edge, shutdown).await;
    state.idempotency.drain(BACKGROUND_DRAIN).await;
    served
}

/// How the server treats slow or oversized clients at the connection level, before a request
/// reaches the router.
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    /// A connection whose request head (request line and headers) is not complete this long
    /// after the connection opened, or after the first byte of a later request on it, is
    /// closed (`RAPTOR_HEADER_READ_TIMEOUT_SECS`).
    pub header_read_timeout: Duration,
    /// A keep-alive connection with no byte of a next request this long after the previous
    /// response is closed (`RAPTOR_KEEPALIVE_TIMEOUT_SECS`), whatever the header read timeout.
    pub keepalive_timeout: Duration,
    /// A connection whose writes make no progress this long (its peer stopped reading) is
    /// closed (`RAPTOR_WRITE_STALL_TIMEOUT_SECS`).
    pub write_stall_timeout: Duration,
    /// Request heads larger than this are answered `431 request_headers_too_large` (a problem
    /// body) and the connection is closed.
    pub max_header_bytes: usize,
    /// Open connections this process holds at most (`RAPTOR_MAX_CONNECTIONS`); one past it is
    /// answered `503 too_many_connections` with `Connection: close` and never served.
    pub max_connections: usize,
}

/// The bound on a request's head: request line and headers together.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

impl Default for Edge {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
            write_stall_timeout: Duration::from_secs(60),
            max_header_bytes: MAX_HEADER_BYTES,
            max_connections: 4096,
        }
    }
}

/// Serves `app` on an already-bound `listener` until `shutdown` resolves, then lets in-flight
/// requests finish. Binding first lets tests use port 0 without sleeping.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, app, Edge::default(), shutdown).await
}

/// [`serve`] with the connection limits of `edge`. One HTTP/1 connection per accepted socket
/// (hyper's own loop rather than `axum::serve`, which sets no header read timeout and no bound
/// on the head's size); the peer address reaches handlers as `ConnectInfo` (the client address
/// of rate limits and the access log).
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        // A backstop: hyper's timer runs from the previous response, so it spans an idle
        // keep-alive and the next head; `EdgeIo` times each on its own.
        .header_read_timeout(edge.keepalive_timeout + edge.header_read_timeout)
        .max_header_size(edge.max_header_bytes)
        // The read buffer must hold a whole head; hyper's floor is 8 KiB.
        .max_buf_size(edge.max_header_bytes.max(8192) + 8192);
    let answer_431 = edge::answer_431(edge.max_header_bytes);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(edge.max_connections));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics::counter!("raptor_connections_refused_total", "reason" => "max_connections")
                .increment(1);
            tokio::spawn(refuse_connection(stream));
            continue;
        };
        let app = app.clone();
        let answering = edge::Answering::default();
        let service = {
            let answering = answering.clone();
            hyper::service::service_fn(move |mut request: hyper::Request<_>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                let answer = answering.begin();
                let response = tower::ServiceExt::oneshot(app.clone(), request);
                async move {
                    let response = response.await?;
                    // The answer lasts as long as its body: a stream's for as long as it runs.
                    Ok::<_, std::convert::Infallible>(response.map(|body| {
                        axum::body::Body::new(http_body_util::BodyExt::map_frame(
                            body,
                            move |frame| {
                                let _answer = &answer;
                                frame
                            },
                        ))
                    }))
                }
            })
        };
        let io = edge::EdgeIo::new(
            answering,
            stream,
            edge.keepalive_timeout,
            edge.header_read_timeout,
            edge.write_stall_timeout,
            answer_431.clone(),
        );
        let connection =
            graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(io), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, %peer, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    // Idle connections are closed now; each busy one after its response.
    graceful.shutdown().await;
    Ok(())
}

/// Answers a connection past [`Edge::max_connections`]: `503 too_many_connections` (problem
/// details, `Retry-After: 1`, `Connection: close`) once its request head is in (within 2 s,
/// else it is just closed), then closes it. The request itself is never served.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tracing::warn!("connection refused: RAPTOR_MAX_CONNECTIONS reached");
    let mut body = serde_json::Map::new();
    body.insert("error".into(), "too_many_connections".into());
    body.insert(
        "message".into(),
        "the server holds as many connections as it accepts; retry shortly".into(),
    );
    raptor_api::problem::enrich(&mut body, axum::http::StatusCode::SERVICE_UNAVAILABLE, None);
    let body = serde_json::Value::Object(body).to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {}\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        raptor_api::problem::CONTENT_TYPE,
        body.len()
    );
    let refused = async {
        // An HTTP client reads an answer only after sending its request: wait for the end of
        // the head (or 16 KiB of it) first, so the refusal is read as the request's answer.
        let mut head = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = stream.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            head.extend_from_slice(&chunk[..read]);
        }
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what else the client sends until it closes, so closing does not reset the
        // connection (which could discard the answer before the client reads it).
        while stream.read(&mut chunk).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), refused).await;
}

/// Resolves `drain` after `signal`: from the signal on, `/readyz` answers 503 while requests
/// are still served; when this resolves the trade-updates streams end (their clients reconnect
/// elsewhere), the server stops accepting and finishes what it has.
pub async fn drain_on(state: ApiState, signal: impl Future<Output = ()> + Send, drain: Duration) {
    signal.await;
    state.begin_drain();
    if !drain.is_zero() {
        tracing::info!(secs = drain.as_secs(), "draining: readyz answers 503");
        tokio::time::sleep(drain).await;
    }
    state.trade_streams().close();
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "could not listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "could not listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT: shutting down"),
        () = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}
