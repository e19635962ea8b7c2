//! Per-account write concurrency in this process ([`AccountWrites`]) and the permit a write
//! holds ([`AccountWrite`]), taken after the gates and before the idempotency claim.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use raptor_idempotency::Lent;
use sqlx::PgPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::AuthUser;
use crate::error::{ApiError, ApiResult};

/// Per-account write concurrency, in this process. Writes on one account serialise on its row
/// lock anyway; without this, many concurrent writes for one account would each hold a pooled
/// connection while they wait for that lock, and starve every other user of connections.
#[derive(Debug)]
pub struct AccountWrites {
    permits: usize,
    wait: Duration,
    accounts: Mutex<HashMap<i32, Arc<Semaphore>>>,
}

impl AccountWrites {
    /// `permits` concurrent writes per account; a write waits at most `wait` for one.
    pub fn new(permits: usize, wait: Duration) -> Self {
        Self {
            permits: permits.max(1),
            wait,
            accounts: Mutex::new(HashMap::new()),
        }
    }

    fn semaphore(&self, user_id: i32) -> Arc<Semaphore> {
        let mut accounts = self
            .accounts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if accounts.len() > 10_000 {
            // Forget idle accounts (only the map holds their semaphore).
            accounts.retain(|_, s| Arc::strong_count(s) > 1);
        }
        accounts
            .entry(user_id)
            .or_insert_with(|| Arc::new(Semaphore::new(self.permits)))
            .clone()
    }

    async fn acquire(
        &self,
        user_id: i32,
        semaphore: Arc<Semaphore>,
    ) -> ApiResult<OwnedSemaphorePermit> {
        match tokio::time::timeout(self.wait, semaphore.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(ApiError::Internal(anyhow::anyhow!(
                "account write semaphore closed"
            ))),
            Err(_) => {
                tracing::info!(
                    user.id = user_id,
                    "too many concurrent writes on one account"
                );
                Err(ApiError::TooManyRequests {
                    retry_after_secs: 1,
                })
            }
        }
    }
}

/// A permit to write to the caller's account, held until the handler ends. Taken after the
/// gates and before the idempotency claim; a request that must wait for it waits without the
/// connection its authentication lent ([`AccountWrite::acquire`] takes the [`Lent`]).
#[derive(Debug)]
pub struct AccountWrite {
    _permit: OwnedSemaphorePermit,
}

impl AccountWrite {
    /// The permit to write to `user_id`'s account. When it must wait, it first lets go of the
    /// `lent` connection (the request's transaction will take a new one): a request waiting
    /// here with a connection would starve the pool under load.
    pub async fn acquire<S>(state: &S, user_id: i32, lent: &mut Lent) -> ApiResult<Self>
    where
        Arc<AccountWrites>: FromRef<S>,
    {
        let writes = Arc::<AccountWrites>::from_ref(state);
        let semaphore = writes.semaphore(user_id);
        let permit = match semaphore.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                lent.let_go();
                writes.acquire(user_id, semaphore).await?
            }
        };
        Ok(Self { _permit: permit })
    }
}

impl<S> FromRequestParts<S> for AccountWrite
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    Arc<AccountWrites>: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let user = AuthUser::from_request_parts(parts, state).await?;
        Self::acquire(state, user.id, &mut Lent::none()).await
    }
}
