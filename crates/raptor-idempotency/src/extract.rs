//! The axum integration: [`Idempotent<T, P, A>`], the last extractor of an instrumented
//! handler.
//!
//! It reads the body, then runs the authentication (and gates) `A` ([`Authenticate`]), so a
//! replay can never bypass a gate and the key's scope is the principal's; then it counts a
//! request without a key, parses the key (refusing a missing one where it is required),
//! deserialises the body, fingerprints the request and claims, on the connection `A` lent
//! ([`Lent`]). A replay, 400, 409, 422 or 503 is its rejection, so the
//! handler body only ever runs for the winner.

use std::future::Future;
use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRef, FromRequest, MatchedPath, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::claim::Claim;
use crate::claim::ClaimRequest;
use crate::fingerprint::fingerprint;
use crate::key::IdempotencyKey;
use crate::lent::Lent;
use crate::outcome::Outcome;
use crate::policy::Policy;
use crate::reply::Refusal;
use crate::service::Idempotency;

/// The idempotency scope of an authenticated principal: `None` user means a service principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// `scope_user_id`.
    pub user_id: Option<i32>,
}

/// What authenticates (and gates) an instrumented request: [`Idempotent`] runs it first,
/// before it even looks at the key, so a replay can never bypass authentication or a gate, and
/// the key's scope comes from the principal itself. A route cannot be instrumented without
/// one: it is a type parameter of [`Idempotent`].
///
/// It returns the connection its token lookup used ([`Lent`]; empty when it used none), which
/// becomes the request's transaction. A gate that waits (for a permit, a queue) is handed the
/// `Lent` and lets go of it first ([`Lent::let_go`]): a connection held while waiting would
/// drain the pool under load.
pub trait Authenticate<S>: Sized + Send {
    /// The refusal (401, 403, a gate's 503), answered as is.
    type Rejection: IntoResponse;

    /// Authenticates and gates the request; the principal and the connection it lends.
    fn authenticate(
        parts: &mut Parts,
        state: &S,
    ) -> impl Future<Output = Result<(Self, Lent), Self::Rejection>> + Send;

    /// The principal's idempotency scope.
    fn scope(&self) -> Scope;
}

/// A JSON request body of type `T` on a route with idempotency policy `P`, authenticated (and
/// gated) by `A`, plus the [`Claim`] that owns the request's transaction.
pub struct Idempotent<T, P, A> {
    /// The transaction to write through and finish.
    pub claim: Claim,
    /// The deserialised body (`{}` when the request had none).
    pub body: T,
    /// The principal, as `A` extracted it (with whatever its gates hold, e.g. a write permit).
    pub auth: A,
    policy: PhantomData<P>,
}

/// Why [`Idempotent`] did not hand the handler a claim: `A` refused the request (its own
/// rejection: 401, 403, a gate's 503), or the mechanism answered itself ([`Refusal`]).
#[derive(Debug)]
pub enum IdempotentRejection<R> {
    /// Authentication or a gate refused.
    Auth(R),
    /// A replay, or a refusal of the mechanism.
    Refusal(Refusal),
}

impl<R: IntoResponse> IntoResponse for IdempotentRejection<R> {
    fn into_response(self) -> Response {
        match self {
            Self::Auth(rejection) => rejection.into_response(),
            Self::Refusal(refusal) => refusal.into_response(),
        }
    }
}

impl<S, T, P, A> FromRequest<S> for Idempotent<T, P, A>
where
    S: Send + Sync,
    Idempotency: FromRef<S>,
    T: DeserializeOwned + Send,
    P: Policy,
    A: Authenticate<S>,
{
    type Rejection = IdempotentRejection<A::Rejection>;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (mut parts, payload) = req.into_parts();
        // The body first, so the connection the authentication keeps for the transaction is
        // never held while a slow client sends it. What reading it found is reported where it
        // always was: after authentication and the key.
        let mut body_request = Request::new(payload);
        *body_request.extensions_mut() = parts.extensions.clone();
        let bytes = Bytes::from_request(body_request, state).await;
        let (auth, lent) = A::authenticate(&mut parts, state)
            .await
            .map_err(IdempotentRejection::Auth)?;
        let (claim, body) = claim_request::<S, T, P>(&parts, bytes, lent, state, auth.scope())
            .await
            .map_err(IdempotentRejection::Refusal)?;
        Ok(Self {
            claim,
            body,
            auth,
            policy: PhantomData,
        })
    }
}

/// Everything after authentication: count a keyless request, parse the key (refusing a missing
/// one where it is required), deserialise the body, fingerprint the request, claim. `lent` is
/// the connection the authentication lent, for the request's transaction.
async fn claim_request<S, T, P>(
    parts: &Parts,
    bytes: Result<Bytes, BytesRejection>,
    lent: Lent,
    state: &S,
    scope: Scope,
) -> Result<(Claim, T), Refusal>
where
    S: Send + Sync,
    Idempotency: FromRef<S>,
    T: DeserializeOwned + Send,
    P: Policy,
{
    let idem = Idempotency::from_ref(state);
    let method = parts.method.to_string();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let endpoint = format!("{method} {route}");
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |pq| pq.as_str().to_owned());

    if !parts.headers.contains_key(crate::key::HEADER) {
        idem.inner.keyless.record(&endpoint, &parts.headers);
    }
    let enabled = idem.enabled().await;
    // A malformed key is refused whether or not the mechanism is on: its syntax does not
    // depend on the store, and a client should learn of its bug before an incident, not
    // during one. With the kill switch off a valid key is not used for dedup, but still
    // reaches the handler, so ids derived from it (a client_order_id) stop a retry from
    // executing twice once the switch is back on.
    let key = match IdempotencyKey::from_headers(&parts.headers) {
        Ok(key) => key,
        Err(err) => {
            Outcome::InvalidKey.record(&endpoint);
            return Err(Refusal::KeyInvalid(err));
        }
    };
    // Required by the route's policy, or by the configured level for its tier
    // (`IDEMPOTENCY_REQUIRE_KEY`). With the kill switch off nothing is required.
    let required = P::REQUIRE_KEY || idem.config().require_key.covers(P::TIER);
    if enabled && key.is_none() && required {
        return Err(Refusal::KeyRequired);
    }

    let json_content = is_json(&parts.headers);
    let bytes = bytes.map_err(|rejection| {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "payload_too_large"
        } else {
            "invalid_body"
        };
        Refusal::body(status, code, rejection.body_text())
    })?;
    let body: T = parse_json(&bytes, json_content)?;

    let (true, Some(key)) = (enabled, key) else {
        Outcome::Passthrough.record(&endpoint);
        let claim = idem.untracked(endpoint, enabled, key, lent).await?;
        return Ok((claim, body));
    };

    // An empty body is read as `{}` (above), so it is fingerprinted as `{}` too: a retry
    // that sends `{}` where the first attempt sent nothing is the same request.
    let fingerprinted: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
    let request = ClaimRequest {
        scope_user_id: scope.user_id,
        request_hash: fingerprint(&method, &path_and_query, fingerprinted),
        endpoint,
        key,
        ttl: P::TTL,
        tier: P::TIER,
        replay: P::REPLAY,
    };
    let claim = idem.claim(request, lent).await?;
    Ok((claim, body))
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(content_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// An empty body (no bytes) reads as `{}` (routes such as `reset` take no fields); anything
/// else, whitespace alone included, must be JSON with a JSON content type.
fn parse_json<T: DeserializeOwned>(bytes: &[u8], json_content: bool) -> Result<T, Refusal> {
    let source: &[u8] = if bytes.is_empty() {
        b"{}"
    } else if json_content {
        bytes
    } else {
        return Err(Refusal::body(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected a request with Content-Type: application/json",
        ));
    };
    // Every request body is a JSON object: serde would also read a struct from an array.
    let object = source
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_none_or(|first| *first == b'{');
    if !object && serde_json::from_slice::<serde::de::IgnoredAny>(source).is_ok() {
        return Err(Refusal::body(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_body",
            "the body must be a JSON object",
        ));
    }
    serde_json::from_slice(source).map_err(|err| {
        // serde_json calls some shape errors syntax (`null` for an enum is "expected value"):
        // well-formed JSON of the wrong shape is 422, only unparsable bytes are 400.
        let (status, code) = if serde_json::from_slice::<serde::de::IgnoredAny>(source).is_ok() {
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_body")
        } else {
            (StatusCode::BAD_REQUEST, "invalid_json")
        };
        Refusal::body(status, code, err.to_string())
    })
}
