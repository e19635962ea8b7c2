//! The scenarios, one file each, in the order `bench()` runs them: the statement counts and
//! scenarios 1-3 (`orders.rs`), the ratios to the ceiling (`ratios.rs`), then 4-9
//! (`duplicates.rs`, `rolls.rs`, `open_loop.rs`, `book.rs`, `sweeps.rs`, `keys.rs`; the ceiling,
//! `../ceiling.rs`, runs between 8 and 9), 10 (`streams.rs`, the trade-updates stream) and the
//! soak (`soak.rs`).

pub(crate) mod book;
pub(crate) mod duplicates;
pub(crate) mod keys;
pub(crate) mod open_loop;
pub(crate) mod orders;
pub(crate) mod ratios;
pub(crate) mod rolls;
pub(crate) mod soak;
pub(crate) mod streams;
pub(crate) mod sweeps;
