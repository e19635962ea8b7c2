//! The paper book: the order kill switch, starting cash, fees, per-account limits and the
//! expiry schedule.

use clap::Args;
use rust_decimal::Decimal;

use super::parse_flag;

fn parse_fee(text: &str) -> Result<Decimal, String> {
    let fee = Decimal::from_str_exact(text.trim()).map_err(|e| format!("not a decimal: {e}"))?;
    if fee.is_sign_negative() {
        return Err("must be >= 0".into());
    }
    Ok(fee)
}

fn parse_cash(text: &str) -> Result<Decimal, String> {
    let cash = Decimal::from_str_exact(text.trim()).map_err(|e| format!("not a decimal: {e}"))?;
    if cash.is_sign_negative() || cash.scale() > 2 {
        return Err("must be >= 0 with at most 2 decimal places".into());
    }
    Ok(cash)
}

/// `MBT_NEW_ORDERS_DISABLED`, `RAPTOR_PAPER_STARTING_CASH`, `RAPTOR_FEE_PER_CONTRACT`,
/// `RAPTOR_FEE_PER_SHARE`, `RAPTOR_FEE_MIN_PER_ORDER`, `RAPTOR_MAX_OPEN_ORDERS`,
/// `RAPTOR_ACCOUNT_WRITE_CONCURRENCY`, `RAPTOR_ACCOUNT_WRITE_WAIT_MS`,
/// `RAPTOR_ORDER_EXPIRY_INTERVAL_SECS`, `RAPTOR_QUOTE_SWEEP_INTERVAL_MS`,
/// `RAPTOR_TRADE_STREAMS_PER_USER`, `RAPTOR_TRADE_STREAMS_PER_PROCESS`.
#[derive(Debug, Clone, Args)]
pub struct TradingArgs {
    /// Refuse new orders, rolls and closes with 503 (cancels still work).
    #[arg(long, env = "MBT_NEW_ORDERS_DISABLED", value_name = "MBT_NEW_ORDERS_DISABLED",
          default_value = "0", value_parser = parse_flag, action = clap::ArgAction::Set, global = true)]
    pub mbt_new_orders_disabled: bool,

    /// Cash of a new or reset paper account.
    #[arg(long, env = "RAPTOR_PAPER_STARTING_CASH", value_name = "RAPTOR_PAPER_STARTING_CASH",
          default_value = "100000.00", value_parser = parse_cash, global = true)]
    pub paper_starting_cash: Decimal,

    /// Paper commission per option contract (Alpaca paper: 0).
    #[arg(long, env = "RAPTOR_FEE_PER_CONTRACT", value_name = "RAPTOR_FEE_PER_CONTRACT",
          default_value = "0", value_parser = parse_fee, global = true)]
    pub fee_per_contract: Decimal,

    /// Paper commission per share (Alpaca paper: 0).
    #[arg(long, env = "RAPTOR_FEE_PER_SHARE", value_name = "RAPTOR_FEE_PER_SHARE",
          default_value = "0", value_parser = parse_fee, global = true)]
    pub fee_per_share: Decimal,

    /// Minimum commission of an order that is charged anything.
    #[arg(long, env = "RAPTOR_FEE_MIN_PER_ORDER", value_name = "RAPTOR_FEE_MIN_PER_ORDER",
          default_value = "0", value_parser = parse_fee, global = true)]
    pub fee_min_per_order: Decimal,

    /// Open (resting) orders allowed per account; past it, 422 too_many_open_orders.
    #[arg(long, env = "RAPTOR_MAX_OPEN_ORDERS", value_name = "RAPTOR_MAX_OPEN_ORDERS",
          default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=100_000), global = true)]
    pub max_open_orders: u32,

    /// Concurrent writes per account in one process (orders, rolls, closes, resets, cancels).
    #[arg(long, env = "RAPTOR_ACCOUNT_WRITE_CONCURRENCY", value_name = "RAPTOR_ACCOUNT_WRITE_CONCURRENCY",
          default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000), global = true)]
    pub account_write_concurrency: u32,

    /// How long a write waits for its account's turn before 429 rate_limited, in ms.
    #[arg(long, env = "RAPTOR_ACCOUNT_WRITE_WAIT_MS", value_name = "RAPTOR_ACCOUNT_WRITE_WAIT_MS",
          default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=600_000), global = true)]
    pub account_write_wait_ms: u64,

    /// Expire day orders after the session close (and orders on expired options) inside
    /// `serve` every N seconds; 0 turns the schedule off (`raptor orders expire` still works,
    /// and touching an account expires its orders anyway).
    #[arg(long, env = "RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", value_name = "RAPTOR_ORDER_EXPIRY_INTERVAL_SECS",
          default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400), global = true)]
    pub order_expiry_interval_secs: u64,

    /// How often `serve`'s quote sweeper looks for pending quote sweeps (resting orders a quote
    /// update made marketable that its own request did not reach), in ms; it works them until
    /// none is ready, then waits this long. 0 turns the sweeper off (then only quote updates
    /// sweep, and what they leave waits for a replica that has one).
    #[arg(long, env = "RAPTOR_QUOTE_SWEEP_INTERVAL_MS", value_name = "RAPTOR_QUOTE_SWEEP_INTERVAL_MS",
          default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=600_000), global = true)]
    pub quote_sweep_interval_ms: u64,

    /// Open trade-updates streams (`GET /api/trading/stream`) one user may hold on this
    /// process; past it, 429 rate_limited.
    #[arg(long, env = "RAPTOR_TRADE_STREAMS_PER_USER", value_name = "RAPTOR_TRADE_STREAMS_PER_USER",
          default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100), global = true)]
    pub trade_streams_per_user: u32,

    /// Open trade-updates streams this process holds at most (each is a connection; keep it
    /// below RAPTOR_MAX_CONNECTIONS); past it, 503 too_many_connections.
    #[arg(long, env = "RAPTOR_TRADE_STREAMS_PER_PROCESS", value_name = "RAPTOR_TRADE_STREAMS_PER_PROCESS",
          default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000), global = true)]
    pub trade_streams_per_process: u32,
}

impl TradingArgs {
    /// The bounds on open trade-updates streams.
    pub fn trade_streams(&self) -> raptor_api::trading::stream::StreamLimits {
        raptor_api::trading::stream::StreamLimits {
            per_user: usize::try_from(self.trade_streams_per_user).unwrap_or(usize::MAX),
            per_process: usize::try_from(self.trade_streams_per_process).unwrap_or(usize::MAX),
        }
    }

    /// The paper engine's fees.
    pub fn fees(&self) -> raptor_engine::FeeSchedule {
        raptor_engine::FeeSchedule {
            per_contract: self.fee_per_contract,
            per_share: self.fee_per_share,
            min_per_order: self.fee_min_per_order,
        }
    }
}
