//! Integration tests live in `api/`; this library is empty.
