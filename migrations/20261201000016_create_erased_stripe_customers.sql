-- Stripe customers of erased users, by SHA-256 of the customer id only (no id, no user): a
-- webhook event for one of them (Stripe keeps the customer, and may send events about it long
-- after we forgot the person) is recorded and acknowledged, never mirrored, so an erasure is
-- not undone by the next `customer.subscription.updated`. Kept as long as Stripe may send such
-- events: the rows hold nothing that identifies anyone without the id itself.
CREATE TABLE erased_stripe_customers (
    customer_hash bytea       CONSTRAINT erased_stripe_customers_pkey PRIMARY KEY,
    erased_at     timestamptz NOT NULL DEFAULT now()
);
