//! Billing routes against a fake Stripe (filled in by the billing work).
