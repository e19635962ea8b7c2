-- Billing: our mirror of the user's Stripe customer and subscription, and the processed webhook
-- events (dedup by Stripe's event id).

CREATE TABLE billing_customers (
    user_id            integer     CONSTRAINT billing_customers_pkey PRIMARY KEY
                                   CONSTRAINT billing_customers_user_id_fkey
                                   REFERENCES users (id) ON DELETE CASCADE,
    stripe_customer_id text        NOT NULL CONSTRAINT uq_billing_customers_stripe_id UNIQUE,
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- One row per Stripe subscription. `source_at` is the Stripe time of the state the row holds
-- (the event's `created`, or the time of an operator sync): an older event never overwrites it.
CREATE TABLE billing_subscriptions (
    stripe_subscription_id text        CONSTRAINT billing_subscriptions_pkey PRIMARY KEY,
    stripe_customer_id     text        NOT NULL,
    user_id                integer     CONSTRAINT billing_subscriptions_user_id_fkey
                                       REFERENCES users (id) ON DELETE CASCADE,
    status                 text        NOT NULL,
    price_id               text,
    current_period_end     timestamptz,
    cancel_at_period_end   boolean     NOT NULL DEFAULT false,
    canceled_at            timestamptz,
    source_at              timestamptz NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_billing_subscriptions_user ON billing_subscriptions (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX idx_billing_subscriptions_customer ON billing_subscriptions (stripe_customer_id);

-- Every webhook event applied (or acknowledged as unknown). The row and its effect on the
-- mirror commit in one transaction, so a redelivery finds the row and changes nothing. No
-- payload is kept: events carry personal data.
CREATE TABLE processed_stripe_events (
    event_id     text        CONSTRAINT processed_stripe_events_pkey PRIMARY KEY,
    type         text        NOT NULL,
    created      timestamptz NOT NULL,
    livemode     boolean     NOT NULL DEFAULT false,
    applied      boolean     NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now()
);
