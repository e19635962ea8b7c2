//! Extractors whose rejections use the API's error envelope.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::StatusCode;

use crate::codes::ErrorCode;
use crate::error::ApiError;

/// `axum::Json` with rejections as [`ApiError`]: malformed JSON 400, wrong content type 415,
/// too large 413, wrong shape 422. Every request body is a JSON object: serde would also read a
/// struct from an array (`[]`, `[null]`), which the document does not allow.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let axum::Json(value) = axum::Json::<serde_json::Value>::from_request(req, state).await?;
        if !value.is_object() {
            return Err(ApiError::invalid(
                ErrorCode::InvalidBody,
                "the body must be a JSON object",
            ));
        }
        serde_json::from_value(value)
            .map(ApiJson)
            .map_err(|err| ApiError::invalid(ErrorCode::InvalidBody, err.to_string()))
    }
}

/// `axum::extract::Path` with rejections as [`ApiError`] (400 `invalid_path`).
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// `axum::extract::Query` with rejections as [`ApiError`] (400 `invalid_query`).
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let message = rejection.body_text();
        match rejection.status() {
            StatusCode::UNPROCESSABLE_ENTITY => Self::invalid(ErrorCode::InvalidBody, message),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::UnsupportedMediaType(message),
            StatusCode::PAYLOAD_TOO_LARGE => Self::PayloadTooLarge(message),
            _ => Self::bad_request(ErrorCode::InvalidJson, message),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::bad_request(ErrorCode::InvalidPath, rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::bad_request(ErrorCode::InvalidQuery, rejection.body_text())
    }
}
