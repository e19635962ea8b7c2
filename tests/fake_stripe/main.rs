//! `raptor-fake-stripe`: the integration tests' fake Stripe (`tests/api/fake_stripe.rs`) as a
//! process, for runs against a real server (`make fuzz-api`). Prints its `STRIPE_API_BASE` on
//! the first line of stdout, then serves until killed. Its secret key is `sk_test_fake`.

#[expect(
    dead_code,
    reason = "the tests' inspection helpers (recorded requests, failure modes) are not used here"
)]
#[path = "../api/fake_stripe.rs"]
mod fake_stripe;

use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let stripe = fake_stripe::FakeStripe::start().await;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", stripe.base())?;
    stdout.flush()?;
    tokio::signal::ctrl_c().await?;
    Ok(())
}
