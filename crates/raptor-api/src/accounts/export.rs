//! `GET /api/account/export`, streamed: one JSON object written section by section and row by
//! row from one read-only, repeatable-read transaction (a consistent snapshot), in chunks of
//! [`CHUNK`] bytes through a small bounded channel, so an account of any size is exported in
//! bounded memory and a slow reader slows the export instead of filling the server's.
//!
//! Errors found before the first byte (the user is gone, the database is down) are ordinary
//! error answers. One found after it cannot change the status any more: the body ends early
//! (the connection is closed mid-stream), so a client never takes a truncated document for a
//! whole one.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::stream::StreamExt;
use serde_json::Value;
use sqlx::{PgConnection, Postgres, Transaction};
use tokio::sync::mpsc;

use super::store::{self, EXPORT_SECTIONS};
use crate::error::{ApiResult, ResultExt};
use crate::state::ApiState;

/// Bytes per body chunk.
pub(crate) const CHUNK: usize = 64 * 1024;
/// Chunks written ahead of the reader.
const AHEAD: usize = 4;

/// The reader went away (the client disconnected): stop.
struct Gone;

/// Buffers JSON text into chunks and hands them to the response body.
struct Sink {
    buffer: Vec<u8>,
    chunks: mpsc::Sender<Result<Bytes, std::io::Error>>,
}

impl Sink {
    fn text(&mut self, text: &str) {
        self.buffer.extend_from_slice(text.as_bytes());
    }

    async fn value(&mut self, value: &Value) -> Result<(), Gone> {
        // A `Value` always serialises.
        let _ = serde_json::to_writer(&mut self.buffer, value);
        if self.buffer.len() >= CHUNK {
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Gone> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.chunks.send(Ok(chunk)).await.map_err(|_| Gone)
    }

    /// Ends the body with an error: the client sees a broken transfer, not a short document.
    async fn fail(self) {
        let _ = self
            .chunks
            .send(Err(std::io::Error::other("the export failed midway")))
            .await;
    }
}

/// Why the export stopped before its end.
enum Stopped {
    Gone,
    Failed(sqlx::Error),
}

impl From<Gone> for Stopped {
    fn from(_: Gone) -> Self {
        Self::Gone
    }
}

impl From<sqlx::Error> for Stopped {
    fn from(err: sqlx::Error) -> Self {
        Self::Failed(err)
    }
}

/// The export of `user_id` as a streamed response. It holds a connection and a snapshot while
/// it streams, so it is bounded: one per user and a few per process (`export_limits`, `429`
/// past them), and it ends, whole or broken off, within the request timeout however slowly it
/// is read. It runs as the server's background work, so a shutdown waits for it (within that
/// same bound).
pub(crate) async fn respond(state: &ApiState, user_id: i32) -> ApiResult<Response> {
    let slot = state.exports.enter(user_id)?;
    let deadline = state.config.request_timeout;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    raptor_db::query("set transaction isolation level repeatable read, read only")
        .execute(&mut *tx)
        .await
        .context("snapshot")?;
    let (user, email) = store::export_user(&mut tx, user_id).await?;
    let (chunks, mut receiver) = mpsc::channel(AHEAD);
    let keys = state.idempotency.config().response_keys.clone();
    state.idempotency.background().spawn(async move {
        let _slot = slot;
        let mut sink = Sink {
            buffer: Vec::with_capacity(CHUNK),
            chunks,
        };
        let written = tokio::time::timeout(
            deadline,
            write(&mut tx, &mut sink, user_id, &user, &email, &keys),
        )
        .await;
        match written {
            Ok(Ok(())) => {
                let _ = tx.rollback().await;
            }
            Ok(Err(Stopped::Gone)) => {
                tracing::info!(user.id = user_id, "export reader went away");
            }
            Ok(Err(Stopped::Failed(err))) => {
                tracing::error!(error = %err, user.id = user_id, "export failed midway");
                sink.fail().await;
            }
            Err(_) => {
                tracing::warn!(user.id = user_id, "export took longer than its deadline");
                sink.fail().await;
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| {
        receiver.poll_recv(cx)
    }));
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // Personal data: no cache may keep it.
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

async fn write(
    tx: &mut Transaction<'static, Postgres>,
    sink: &mut Sink,
    user_id: i32,
    user: &Value,
    email: &str,
    keys: &raptor_idempotency::ResponseKeys,
) -> Result<(), Stopped> {
    sink.text("{\"user\":");
    sink.value(user).await?;
    for section in EXPORT_SECTIONS {
        sink.text(&format!(",\"{}\":", section.name));
        let rows = store::export_rows(tx, section, user_id, email);
        if section.many {
            array(sink, rows).await?;
        } else {
            let mut rows = rows;
            let first = rows.next().await.transpose()?;
            sink.value(&first.unwrap_or(Value::Null)).await?;
        }
    }
    sink.text(",\"idempotency_keys\":");
    let conn: &mut PgConnection = tx;
    array(
        sink,
        raptor_idempotency::cleanup::export_for_user(conn, user_id, keys),
    )
    .await?;
    sink.text("}");
    sink.flush().await?;
    Ok(())
}

async fn array(
    sink: &mut Sink,
    mut rows: futures_util::stream::BoxStream<'_, Result<Value, sqlx::Error>>,
) -> Result<(), Stopped> {
    sink.text("[");
    let mut first = true;
    while let Some(row) = rows.next().await {
        if !first {
            sink.text(",");
        }
        first = false;
        sink.value(&row?).await?;
    }
    sink.text("]");
    Ok(())
}
