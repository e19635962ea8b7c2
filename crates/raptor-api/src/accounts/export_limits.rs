//! Bounds on `GET /api/account/export`: each export holds a business connection and a
//! repeatable-read snapshot for as long as its reader takes, so a client must not be able to
//! hold many. One export at a time per user, and per process at most a quarter of the business
//! pool (at least one): past either bound the answer is `429 rate_limited` with `Retry-After`,
//! and every other request keeps its connections.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// How long a refused export is told to wait.
const RETRY_AFTER_SECS: u64 = 5;

/// The exports under way in this process.
#[derive(Debug)]
pub(crate) struct ExportLimits {
    permits: Arc<Semaphore>,
    users: Arc<Mutex<HashSet<i32>>>,
}

/// One export's place: held until its stream ends (or is dropped), then given back.
#[derive(Debug)]
pub(crate) struct ExportSlot {
    _permit: OwnedSemaphorePermit,
    users: Arc<Mutex<HashSet<i32>>>,
    user_id: i32,
}

impl Drop for ExportSlot {
    fn drop(&mut self) {
        self.users
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.user_id);
    }
}

impl ExportLimits {
    /// Bounds for a business pool of `pool_size` connections.
    pub(crate) fn for_pool(pool_size: u32) -> Self {
        let per_process = usize::try_from(pool_size / 4).unwrap_or(1).max(1);
        Self {
            permits: Arc::new(Semaphore::new(per_process)),
            users: Arc::default(),
        }
    }

    /// A place for `user_id`'s export, or `429` when the user already has one under way or the
    /// process runs as many as it allows.
    pub(crate) fn enter(&self, user_id: i32) -> Result<ExportSlot, ApiError> {
        let refused = ApiError::TooManyRequests {
            retry_after_secs: RETRY_AFTER_SECS,
        };
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        if users.contains(&user_id) {
            return Err(refused);
        }
        let permit = self
            .permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| refused)?;
        users.insert(user_id);
        Ok(ExportSlot {
            _permit: permit,
            users: self.users.clone(),
            user_id,
        })
    }
}
