//! What the connection loop adds around each accepted socket, below hyper: the idle keep-alive
//! timeout, the header read timeout, and the problem body of hyper's own `431` answer.
//!
//! - **Idle keep-alive**: once a response has been written and no byte of a next request has
//!   arrived for [`crate::Edge::keepalive_timeout`], reads end as if the client had closed; hyper
//!   then closes the idle connection cleanly. "Idle" is seen from the socket (the last thing
//!   that happened on it was a write, and nothing has been read since) and from the service: no
//!   answer is under way ([`Answering`]), so a trade-updates stream that is quiet between
//!   events is not idle (nor a request whose body is still arriving: the request timeout
//!   bounds that).
//! - **Header read timeout**: a request's head (its line and headers, up to the blank line)
//!   must arrive within [`crate::Edge::header_read_timeout`], counted from the connection's
//!   start for its first request and from the first byte of each later one. An idle kept-alive
//!   connection is governed by the keep-alive timeout alone, so it can stay open longer than a
//!   slow head is waited for (a load balancer that keeps its backend connections 600 s needs a
//!   keep-alive above that, while a stalled client still goes after a few seconds). hyper's own
//!   header timer, which runs from the previous response, is set to the sum of the two as a
//!   backstop.
//! - **Write stall timeout**: a write that makes no progress for
//!   [`crate::Edge::write_stall_timeout`] (the peer stopped reading, and the socket buffers
//!   between us are full) fails with `TimedOut`, and hyper drops the connection with the
//!   response it was sending. A trade-updates stream to a reader that stopped reading ends
//!   this way, and so gives back what it held; a reader that is slow but reading is not
//!   timed.
//! - **431 with a problem body**: a request head over the bound is refused by hyper's parser
//!   before any request exists (hyper writes `431` with an empty body and closes; it has no
//!   hook for the answer). The answer is recognised as hyper writes it (a `431` status line
//!   with `content-length: 0`, at the start of a write, which no route of ours answers) and
//!   replaced by the same status with the API's problem body, `request_headers_too_large`.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// hyper's automatic answer to a head over `max_header_size` begins with this.
const HYPER_431: &[u8] = b"HTTP/1.1 431 ";

/// Answers under way on one connection, from the request's arrival to the end of the
/// response's body (shared by the connection's service and its [`EdgeIo`]). A connection with
/// one under way is not idle, however long since its last byte: a trade-updates stream between
/// two events is an answer under way.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answering(Arc<AtomicUsize>);

impl Answering {
    /// One answer begins; it ends when the guard is dropped.
    pub(crate) fn begin(&self) -> AnswerUnderWay {
        self.0.fetch_add(1, Ordering::AcqRel);
        AnswerUnderWay(self.0.clone())
    }

    fn idle(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// An answer under way ([`Answering::begin`]).
pub(crate) struct AnswerUnderWay(Arc<AtomicUsize>);

impl Drop for AnswerUnderWay {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket as the connection loop hands it to hyper.
pub(crate) struct EdgeIo<S> {
    inner: S,
    /// The connection's answers under way.
    answering: Answering,
    keepalive: Duration,
    header_timeout: Duration,
    /// Armed when a response was written, until a byte arrives: the keep-alive deadline.
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the last I/O was a write (a response), with nothing read since.
    wrote_last: bool,
    /// While a request's head is arriving: its deadline, and the line ends seen in a row (the
    /// head ends at the second: `\r\n\r\n`, or bare `\n\n` as the parser accepts it).
    head: Option<(Pin<Box<tokio::time::Sleep>>, u8)>,
    /// Bytes of the replacement `431` answer not yet written.
    pending: Vec<u8>,
    /// How long a write may make no progress.
    write_stall: Duration,
    /// Armed when a write could not proceed, disarmed by the next one that does.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// The replacement was made (one per connection: hyper closes after it).
    replaced: bool,
    /// The whole `431` answer (its body names `max_header_bytes`).
    answer_431: std::sync::Arc<[u8]>,
}

impl<S> EdgeIo<S> {
    pub(crate) fn new(
        answering: Answering,
        inner: S,
        keepalive: Duration,
        header_timeout: Duration,
        write_stall: Duration,
        answer_431: std::sync::Arc<[u8]>,
    ) -> Self {
        let head = Some((Box::pin(tokio::time::sleep(header_timeout)), 0));
        Self {
            inner,
            answering,
            keepalive,
            header_timeout,
            idle: None,
            wrote_last: false,
            head,
            pending: Vec::new(),
            write_stall,
            stalled: None,
            replaced: false,
            answer_431,
        }
    }

    /// After hyper wrote `buf` (or is about to): the keep-alive deadline starts now.
    fn wrote(&mut self) {
        self.wrote_last = true;
        let deadline = tokio::time::Instant::now() + self.keepalive;
        match &mut self.idle {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.idle = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
    }

    /// The outcome of a write to the socket: progress disarms the stall deadline; no progress
    /// arms it, and past it the write fails.
    fn write_outcome(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match outcome {
            Poll::Ready(Ok(written)) => {
                self.stalled = None;
                if written > 0 {
                    self.wrote();
                }
                Poll::Ready(Ok(written))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => {
                let stall = self.write_stall;
                let deadline = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(stall)));
                if deadline.as_mut().poll(cx).is_ready() {
                    tracing::debug!("write made no progress within the write stall timeout");
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer stopped reading",
                    )));
                }
                Poll::Pending
            }
        }
    }

    /// After a read of `bytes`: the first byte after a response starts the next request's
    /// head (and its deadline); the head's end stops the deadline.
    fn read(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.wrote_last {
            self.wrote_last = false;
            self.head = Some((Box::pin(tokio::time::sleep(self.header_timeout)), 0));
        }
        if let Some((_, line_ends)) = &mut self.head {
            for byte in bytes {
                match byte {
                    b'\n' => *line_ends += 1,
                    b'\r' => {}
                    _ => *line_ends = 0,
                }
                if *line_ends == 2 {
                    self.head = None;
                    return;
                }
            }
        }
    }

    /// Whether `buf`, the start of a write, is hyper's own `431`; then how many of its bytes
    /// are that answer's head.
    fn hyper_431(&self, buf: &[u8]) -> Option<usize> {
        if self.replaced || !buf.starts_with(HYPER_431) {
            return None;
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        head.contains("\r\ncontent-length: 0\r\n").then_some(end)
    }
}

/// The `431` answer with its problem body, written in place of hyper's empty one.
pub(crate) fn answer_431(max_header_bytes: usize) -> std::sync::Arc<[u8]> {
    let status = axum::http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
    let mut body = serde_json::Map::new();
    body.insert(
        "error".into(),
        raptor_api::codes::ErrorCode::RequestHeadersTooLarge
            .as_str()
            .into(),
    );
    body.insert(
        "message".into(),
        format!(
            "the request line and headers exceed {} KiB; send fewer or smaller headers",
            max_header_bytes / 1024
        )
        .into(),
    );
    raptor_api::problem::enrich(&mut body, status, None);
    let body = serde_json::Value::Object(body).to_string();
    format!(
        "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: {}\r\ncontent-length: \
         {}\r\nconnection: close\r\n\r\n{body}",
        raptor_api::problem::CONTENT_TYPE,
        body.len()
    )
    .into_bytes()
    .into()
}

impl<S: AsyncWrite + Unpin> EdgeIo<S> {
    /// Writes what is left of the replacement answer; ready once it is all written.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.pending.is_empty() {
            let written =
                std::task::ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.pending.drain(..written);
        }
        Poll::Ready(Ok(()))
    }

    /// Replaces hyper's `431` head (the first `head` bytes hyper asked to write) by the
    /// answer with a body; it is written by the next write, flush or shutdown.
    fn replace_431(&mut self, head: usize) -> Poll<io::Result<usize>> {
        self.replaced = true;
        self.pending = self.answer_431.to_vec();
        self.wrote();
        Poll::Ready(Ok(head))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for EdgeIo<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.read(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => {
                if this.wrote_last && this.answering.idle() {
                    if let Some(sleep) = &mut this.idle {
                        if sleep.as_mut().poll(cx).is_ready() {
                            // Idle past the keep-alive timeout: end of stream, which hyper
                            // answers by closing the (idle) connection.
                            tracing::debug!("idle keep-alive connection closed");
                            return Poll::Ready(Ok(()));
                        }
                    }
                } else if let Some((deadline, _)) = &mut this.head {
                    if deadline.as_mut().poll(cx).is_ready() {
                        // The head did not arrive in time: end of stream mid-head, which hyper
                        // answers by closing the connection (nothing reached a handler).
                        tracing::debug!("request head not read within the header read timeout");
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for EdgeIo<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending(cx))?;
        if let Some(head) = this.hyper_431(buf) {
            return this.replace_431(head);
        }
        let outcome = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.write_outcome(cx, outcome)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending(cx))?;
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            if let Some(head) = this.hyper_431(first) {
                return this.replace_431(head);
            }
        }
        let outcome = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.write_outcome(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}
