//! Trading tests.
