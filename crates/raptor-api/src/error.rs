//! `ApiError`: the one error type of the API and its JSON envelope
//! `{"error": code, "message": text, ...context}`. Internal details never reach the client:
//! they are logged once, inside the request span, with its request id.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use raptor_engine::OrderRejection;
use raptor_idempotency::ErrorReply;
use serde_json::{json, Map, Value};

use crate::codes::ErrorCode;

/// Result alias for handlers and store functions.
pub type ApiResult<T, E = ApiError> = Result<T, E>;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 401: missing, unknown or expired bearer token.
    #[error("authentication required")]
    Unauthenticated,
    /// 403: the principal may not do this.
    #[error("forbidden")]
    Forbidden,
    /// 404.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// 404 with a code of its own (`quote_unavailable` for a symbol without a quote).
    #[error("{message}")]
    Absent {
        /// Machine code.
        code: ErrorCode,
        /// Human text.
        message: String,
    },
    /// 400 with a specific code (bad path parameter, bad query...).
    #[error("{message}")]
    BadRequest {
        /// Machine code.
        code: ErrorCode,
        /// Human text.
        message: String,
    },
    /// 413: the body exceeds the limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415: the body is not JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422: the request is well-formed but its values are not acceptable.
    #[error("{message}")]
    Invalid {
        /// Machine code.
        code: ErrorCode,
        /// Human text.
        message: String,
    },
    /// 410 with a specific code (a stream's history that is no longer kept).
    #[error("{message}")]
    Gone {
        /// Machine code.
        code: ErrorCode,
        /// Human text.
        message: String,
    },
    /// 409 with a specific code.
    #[error("{message}")]
    Conflict {
        /// Machine code.
        code: ErrorCode,
        /// Human text.
        message: String,
    },
    /// An order the engine refused (403 or 422 by kind).
    #[error(transparent)]
    Rejected(#[from] OrderRejection),
    /// 422: the order is filled, expired or otherwise not open.
    #[error("order is {status} and cannot be canceled")]
    OrderNotCancelable {
        /// The order's status.
        status: String,
    },
    /// 503: `MBT_NEW_ORDERS_DISABLED` is on.
    #[error("new orders are disabled")]
    NewOrdersDisabled,
    /// 403: the account is not a paper account.
    #[error("live trading is not available")]
    LiveTradingUnavailable,
    /// 429: too many requests from this client (sign-up and login rate limits).
    #[error("too many requests; retry in {retry_after_secs} s")]
    TooManyRequests {
        /// Seconds until a retry may succeed (`Retry-After`).
        retry_after_secs: u64,
    },
    /// 503 with a specific code (e.g. `billing_not_configured`); `Retry-After` when set.
    #[error("{message}")]
    ServiceUnavailable {
        /// Machine code.
        code: ErrorCode,
        /// Human text.
        message: String,
        /// Seconds the client should wait before retrying, when a retry can help.
        retry_after_secs: Option<u64>,
    },
    /// 502 or 504: an upstream service (Stripe) failed or timed out. Nothing was committed.
    #[error("{message}")]
    Upstream {
        /// 502 (bad answer) or 504 (timeout).
        status: StatusCode,
        /// Machine code.
        code: ErrorCode,
        /// Human text (never the upstream's internals).
        message: String,
        /// Whether the call may have taken effect upstream without our knowing (a timeout, a
        /// lost connection, an upstream 5xx): the key is then released, not failed, so the
        /// retry with the same key forwards the same upstream key and the upstream replays.
        outcome_unknown: bool,
    },
    /// 503: a lock or statement timeout fired in the transaction, or Postgres rolled it back
    /// to resolve a deadlock or a serialization conflict (retry).
    #[error("the database is busy")]
    Busy(#[source] sqlx::Error),
    /// 503: the database did not answer (pool timeout, connection refused).
    #[error("database unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// 500: anything else. Logged, never shown.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        match raptor_db::classify(&err) {
            // A lock or statement timeout, a deadlock or a serialization failure: rolled
            // back, nothing committed, a retry can succeed.
            raptor_db::Failure::Busy => Self::Busy(err),
            // No connection, or the connection was lost, or Postgres is restarting: nothing
            // committed, retry.
            raptor_db::Failure::Unavailable => Self::Unavailable(err),
            raptor_db::Failure::Other => Self::Internal(anyhow::Error::new(err)),
        }
    }
}

impl ApiError {
    /// A 422 with a code.
    pub fn invalid(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Invalid {
            code,
            message: message.into(),
        }
    }

    /// A 400 with a code.
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden | Self::LiveTradingUnavailable => StatusCode::FORBIDDEN,
            Self::NotFound(_) | Self::Absent { .. } => StatusCode::NOT_FOUND,
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::Invalid { .. } | Self::OrderNotCancelable { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::Gone { .. } => StatusCode::GONE,
            Self::Rejected(rejection) => match rejection {
                OrderRejection::InsufficientBuyingPower { .. }
                | OrderRejection::InsufficientQty { .. }
                | OrderRejection::UncoveredShortOption { .. } => StatusCode::FORBIDDEN,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            },
            Self::NewOrdersDisabled
            | Self::Unavailable(_)
            | Self::Busy(_)
            | Self::ServiceUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Upstream { status, .. } => *status,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unauthenticated => ErrorCode::Unauthenticated,
            Self::Forbidden => ErrorCode::Forbidden,
            Self::NotFound(_) => ErrorCode::NotFound,
            Self::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            Self::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            Self::BadRequest { code, .. }
            | Self::Absent { code, .. }
            | Self::Invalid { code, .. }
            | Self::Conflict { code, .. }
            | Self::Gone { code, .. }
            | Self::ServiceUnavailable { code, .. }
            | Self::Upstream { code, .. } => *code,
            Self::TooManyRequests { .. } => ErrorCode::RateLimited,
            Self::Rejected(rejection) => match rejection {
                OrderRejection::QuoteUnavailable { .. } => ErrorCode::QuoteUnavailable,
                OrderRejection::ContractExpired { .. } => ErrorCode::ContractExpired,
                OrderRejection::InsufficientBuyingPower { .. } => {
                    ErrorCode::InsufficientBuyingPower
                }
                OrderRejection::InsufficientQty { .. } => ErrorCode::InsufficientQty,
                OrderRejection::UncoveredShortOption { .. } => ErrorCode::UncoveredShortOption,
                OrderRejection::InvalidOrder { .. } => ErrorCode::InvalidOrder,
            },
            Self::OrderNotCancelable { .. } => ErrorCode::OrderNotCancelable,
            Self::NewOrdersDisabled => ErrorCode::NewOrdersDisabled,
            Self::LiveTradingUnavailable => ErrorCode::LiveTradingUnavailable,
            Self::Unavailable(_) => ErrorCode::DatabaseUnavailable,
            Self::Busy(_) => ErrorCode::DatabaseBusy,
            Self::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The JSON body: code, message and the context members of the variant (the document's
    /// `ErrorBody` schema, in `crate::openapi`).
    pub fn to_body(&self) -> Value {
        let message = match self {
            Self::Internal(_) => "internal server error".to_owned(),
            other => other.to_string(),
        };
        let mut body = Map::new();
        body.insert("error".into(), Value::from(self.code().as_str()));
        body.insert("message".into(), Value::from(message));
        match self {
            Self::Rejected(OrderRejection::InsufficientBuyingPower {
                buying_power,
                cost_basis,
            }) => {
                body.insert("buying_power".into(), json!(buying_power.to_string()));
                body.insert("cost_basis".into(), json!(cost_basis.to_string()));
            }
            Self::Rejected(OrderRejection::InsufficientQty {
                symbol,
                available,
                requested,
            }) => {
                body.insert("symbol".into(), json!(symbol));
                body.insert("available".into(), json!(available.to_string()));
                body.insert("requested".into(), json!(requested.to_string()));
            }
            Self::Rejected(
                OrderRejection::QuoteUnavailable { symbol }
                | OrderRejection::ContractExpired { symbol }
                | OrderRejection::UncoveredShortOption { symbol },
            ) => {
                body.insert("symbol".into(), json!(symbol));
            }
            Self::OrderNotCancelable { status } => {
                body.insert("order_status".into(), json!(status));
            }
            Self::TooManyRequests { retry_after_secs } => {
                body.insert("retry_after_ms".into(), json!(retry_after_secs * 1000));
            }
            _ => {}
        }
        Value::Object(body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            Self::Internal(err) => tracing::error!(error = ?err, "internal error"),
            Self::Unavailable(err) => tracing::warn!(error = %err, "database unavailable"),
            Self::Busy(err) => tracing::warn!(error = %err, "lock or statement timeout"),
            _ => {}
        }
        let mut response = (self.status(), axum::Json(self.to_body())).into_response();
        let retry_after = match &self {
            // Retry-After means "retrying can help": not for a halt (`new_orders_disabled`,
            // which lasts until an operator lifts it) nor for `billing_not_configured`.
            Self::Unavailable(_) | Self::Busy(_) => Some(1),
            Self::TooManyRequests { retry_after_secs } => Some(*retry_after_secs),
            Self::ServiceUnavailable {
                retry_after_secs, ..
            } => *retry_after_secs,
            _ => None,
        };
        if let Some(secs) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        response
    }
}

impl ErrorReply for ApiError {
    fn status(&self) -> StatusCode {
        ApiError::status(self)
    }

    fn releases_key(&self) -> bool {
        matches!(
            self,
            Self::Upstream {
                outcome_unknown: true,
                ..
            }
        ) || self.status() == StatusCode::SERVICE_UNAVAILABLE
    }

    fn body(&self) -> Value {
        self.to_body()
    }
}

/// Adds context to infrastructure errors on the way to a 500, keeping 503s for an unavailable
/// database.
pub trait ResultExt<T> {
    /// Like `anyhow::Context`, for `sqlx` results.
    fn context(self, what: &'static str) -> ApiResult<T>;
}

impl<T> ResultExt<T> for Result<T, sqlx::Error> {
    fn context(self, what: &'static str) -> ApiResult<T> {
        self.map_err(|err| match ApiError::from(err) {
            ApiError::Internal(err) => ApiError::Internal(err.context(what)),
            other => other,
        })
    }
}
