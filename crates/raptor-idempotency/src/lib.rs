#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod claim;
pub mod cleanup;
mod config;
mod extract;
pub mod fingerprint;
pub mod key;
mod keyless;
mod lent;
mod outcome;
mod policy;
pub mod protocol;
mod reply;
pub mod seal;
mod service;

pub use claim::{Answer, Claim, ClaimRequest, Completed, Completer, PendingCompletion};
pub use config::IdempotencyConfig;
pub use extract::{Authenticate, Idempotent, IdempotentRejection, Scope};
pub use key::{IdempotencyKey, KeyError};
pub use lent::Lent;
pub use outcome::Outcome;
pub use policy::{Policy, Replay, RequireKey, Tier, Tier1, Tier2};
pub use raptor_db::flag::REFRESH as FLAG_REFRESH;
pub use reply::{error_body, ErrorReply, Refusal, Reply, StoredResponse, REPLAYED_HEADER};
pub use seal::{KeysError, ResponseKeys};
pub use service::FLAG_IDEMPOTENCY_MIDDLEWARE;
pub use service::{AuditFuture, Idempotency, ReplayAudit, ReplayEvent};
