//! The connection an instrumented request's authentication lends to its transaction.
//!
//! An order used to check out three connections: the token lookup's, the claim's (store pool)
//! and the business transaction's, and sqlx sends a ping on every return to the pool. The
//! business pool's two are one here: [`Idempotent`](crate::Idempotent) asks its authentication
//! to [`keep`] the connection its token lookup used, and the request's transaction begins on it
//! (in transaction pool mode it simply continues the lookup's transaction block).
//!
//! A kept connection is never held while the request waits on the client or on a queue: the
//! body is read before the authentication runs, and a gate that must wait (the per-account
//! write permit) [`let_go`]es of it first. Anything that is not an instrumented request's
//! authentication never sees the request for a kept connection, so it cannot hold two.

use std::sync::{Arc, Mutex, PoisonError};

use axum::http::request::Parts;
use axum::http::Extensions;
use raptor_db::Conn;

/// Put by [`Idempotent`](crate::Idempotent) before its authentication runs, removed after.
#[derive(Clone, Debug)]
struct Wanted;

/// The kept connection, in the request's extensions.
#[derive(Clone)]
struct Held(Arc<Mutex<Option<Conn>>>);

/// Asks the authentication that runs next to keep its connection (see [`keep`]).
pub(crate) fn want(parts: &mut Parts) {
    parts.extensions.insert(Wanted);
}

/// Called by an authentication with the connection its lookup used (from the pool the
/// idempotency service was built with): kept for the request's transaction when the request
/// asked for it (`None` comes back), otherwise handed back to be finished as usual.
pub fn keep(parts: &mut Parts, conn: Conn) -> Option<Conn> {
    if parts.extensions.remove::<Wanted>().is_none() {
        return Some(conn);
    }
    parts
        .extensions
        .insert(Held(Arc::new(Mutex::new(Some(conn)))));
    None
}

/// Gives a kept connection back to its pool: call before anything that may wait.
pub fn let_go(parts: &mut Parts) {
    if let Some(held) = parts.extensions.remove::<Held>() {
        drop(take_from(&held));
    }
}

/// The kept connection, if the authentication kept one; stops asking for one either way.
pub(crate) fn take(extensions: &mut Extensions) -> Option<Conn> {
    extensions.remove::<Wanted>();
    extensions
        .remove::<Held>()
        .and_then(|held| take_from(&held))
}

fn take_from(held: &Held) -> Option<Conn> {
    held.0.lock().unwrap_or_else(PoisonError::into_inner).take()
}
