//! Principals: bearer tokens stored as SHA-256 hashes, users with roles, service
//! principals, and the extractors that authenticate a request.

use std::sync::{Arc, OnceLock};

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use raptor_idempotency::{Authenticate, Lent, Scope};
use sha2::{Digest, Sha256};
use sqlx::{PgConnection, PgPool};

use crate::error::{ApiError, ApiResult};

/// A user's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An app user.
    User,
    /// Operator tooling: may call `/api/admin/*`.
    Operator,
}

impl Role {
    /// Parses the stored or CLI form.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "user" => Some(Self::User),
            "operator" => Some(Self::Operator),
            _ => None,
        }
    }

    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Operator => "operator",
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// A user's session token.
    User {
        /// `users.id`.
        id: i32,
        /// Its role.
        role: Role,
    },
    /// A service token: no user, idempotency scope `NULL`.
    Service {
        /// The service's name.
        name: String,
    },
}

impl Principal {
    /// The user id, if a user.
    pub fn user_id(&self) -> Option<i32> {
        match self {
            Self::User { id, .. } => Some(*id),
            Self::Service { .. } => None,
        }
    }
}

/// An authenticated user (services are refused with 403).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthUser {
    /// `users.id`.
    pub id: i32,
    /// Its role.
    pub role: Role,
}

/// An authenticated operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operator {
    /// The operator's `users.id`.
    pub id: i32,
}

/// A fresh random bearer token: 256 bits, hex, with a prefix that makes leaked tokens greppable.
pub fn new_token() -> ApiResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|err| ApiError::Internal(anyhow::anyhow!("no randomness: {err}")))?;
    Ok(format!("rpt_{}", hex::encode(bytes)))
}

/// The stored form of a token.
pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Stores a session token for `user_id` that expires after `ttl`.
pub async fn insert_session_token(
    conn: &mut PgConnection,
    user_id: i32,
    token: &str,
    ttl: std::time::Duration,
) -> Result<(), sqlx::Error> {
    raptor_db::query(
        "insert into api_tokens (token_hash, kind, user_id, expires_at)
         values ($1, 'session', $2, now() + make_interval(secs => $3))",
    )
    .bind(hash_token(token))
    .bind(user_id)
    .bind(ttl.as_secs_f64())
    .execute(conn)
    .await?;
    Ok(())
}

/// Stores a service token.
pub async fn insert_service_token(
    conn: &mut PgConnection,
    name: &str,
    token: &str,
) -> Result<(), sqlx::Error> {
    raptor_db::query(
        "insert into api_tokens (token_hash, kind, service_name) values ($1, 'service', $2)",
    )
    .bind(hash_token(token))
    .bind(name)
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    user_id: Option<i32>,
    role: Option<String>,
    service_name: Option<String>,
    account_mode: Option<String>,
}

/// The caller's paper account mode (`paper` or `live`), read with the token in the same
/// statement and kept in the request extensions for the gates; `None` without an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountMode(pub Option<String>);

fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The user a request authenticated as, filled in by the `Principal` extractor for the access
/// log (which runs outside the handler and cannot see its extractors).
#[derive(Debug, Clone, Default)]
pub struct SeenUser(Arc<OnceLock<i32>>);

impl SeenUser {
    /// Records `users.id` (the first one wins; a request has one principal).
    pub fn set(&self, id: i32) {
        let _ = self.0.set(id);
    }

    /// The recorded `users.id`, if a user signed in.
    pub fn get(&self) -> Option<i32> {
        self.0.get().copied()
    }
}

impl Principal {
    /// Authenticates the bearer token, lending the connection its lookup used (see
    /// [`Authenticate`]); a principal this request already authenticated as lends none.
    async fn authenticate<S>(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)>
    where
        S: Send + Sync,
        PgPool: FromRef<S>,
    {
        if let Some(principal) = parts.extensions.get::<Principal>() {
            return Ok((principal.clone(), Lent::none()));
        }
        let token = bearer(parts).ok_or(ApiError::Unauthenticated)?;
        // The account's mode comes along, so the order gates need no query of their own.
        let mut conn = raptor_db::conn(&PgPool::from_ref(state)).await?;
        let row: Option<TokenRow> = raptor_db::query_as(
            "select t.user_id, u.role, t.service_name, a.mode as account_mode
               from api_tokens t
               left join users u on u.id = t.user_id
               left join paper_accounts a on a.user_id = t.user_id
              where t.token_hash = $1 and (t.expires_at is null or t.expires_at > now())",
        )
        .bind(hash_token(token))
        .fetch_optional(&mut *conn)
        .await?;
        let row = row.ok_or(ApiError::Unauthenticated)?;
        let principal = match (
            row.user_id,
            row.role.as_deref().and_then(Role::parse),
            row.service_name,
        ) {
            (Some(id), Some(role), _) => Principal::User { id, role },
            (None, _, Some(name)) => Principal::Service { name },
            _ => return Err(ApiError::Unauthenticated),
        };
        if let (Some(seen), Some(id)) = (parts.extensions.get::<SeenUser>(), principal.user_id()) {
            seen.set(id);
        }
        parts.extensions.insert(AccountMode(row.account_mode));
        parts.extensions.insert(principal.clone());
        Ok((principal, Lent::new(conn)))
    }
}

impl<S> Authenticate<S> for Principal
where
    S: Send + Sync,
    PgPool: FromRef<S>,
{
    type Rejection = ApiError;

    async fn authenticate(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)> {
        Principal::authenticate(parts, state).await
    }

    fn scope(&self) -> Scope {
        Scope {
            user_id: self.user_id(),
        }
    }
}

impl<S> FromRequestParts<S> for Principal
where
    S: Send + Sync,
    PgPool: FromRef<S>,
{
    type Rejection = ApiError;

    /// Authenticates a request that lends its lookup's connection to nothing: the connection
    /// goes back to the pool at once.
    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let (principal, lent) = Principal::authenticate(parts, state).await?;
        lent.finish().await?;
        Ok(principal)
    }
}

impl<S> Authenticate<S> for AuthUser
where
    S: Send + Sync,
    PgPool: FromRef<S>,
{
    type Rejection = ApiError;

    async fn authenticate(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)> {
        match Principal::authenticate(parts, state).await? {
            (Principal::User { id, role }, lent) => Ok((Self { id, role }, lent)),
            (Principal::Service { .. }, _) => Err(ApiError::Forbidden),
        }
    }

    fn scope(&self) -> Scope {
        Scope {
            user_id: Some(self.id),
        }
    }
}

impl<S> FromRequestParts<S> for AuthUser
where
    S: Send + Sync,
    PgPool: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let (user, lent) = <Self as Authenticate<S>>::authenticate(parts, state).await?;
        lent.finish().await?;
        Ok(user)
    }
}

impl<S> FromRequestParts<S> for Operator
where
    S: Send + Sync,
    PgPool: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        match Principal::from_request_parts(parts, state).await? {
            Principal::User {
                id,
                role: Role::Operator,
            } => Ok(Self { id }),
            _ => Err(ApiError::Forbidden),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hashed() {
        let (a, b) = (new_token().expect("token"), new_token().expect("token"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        assert_eq!(hash_token(&a).len(), 32);
        assert_ne!(hash_token(&a), hash_token(&b));
    }
}
