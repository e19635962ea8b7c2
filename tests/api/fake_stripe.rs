//! An in-process fake of the Stripe API for the billing tests (filled in by the billing work).
