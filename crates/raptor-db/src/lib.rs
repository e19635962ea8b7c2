#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod conn;
pub mod error;
pub mod flag;
pub mod mode;
pub mod pool;
pub mod pool_metrics;
pub mod query;
pub mod reach;
pub mod tls;

pub use conn::{begin, conn, try_conn, Conn, ConnError};
pub use error::{classify, Failure};
pub use mode::{pool_mode, set_pool_mode, PoolMode};
pub use pool::{PoolSettings, SessionSettings, StoreBudget, StoreSettings};
pub use query::{built, query, query_as, query_scalar, statement, Statement};

/// Every migration of the workspace (`migrations/`), embedded.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");
