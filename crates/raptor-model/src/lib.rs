#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod code;
pub mod export;
pub mod liveness;
pub mod model;
pub mod properties;
pub mod trace;

pub use model::{Bounds, ClaimProtocol, Mutant, Tier};
