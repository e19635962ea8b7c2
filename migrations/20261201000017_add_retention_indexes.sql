-- Retention (docs/operations.md, "Retention"): the hourly cleanup deletes sent outbox messages
-- (they hold sign-in tokens in clear) a day after sending, spent or expired sign-in links a day
-- after they stopped working, and processed Stripe events once Stripe can no longer resend them
-- (30 days), each in bounded batches. These indexes let each batch find its rows without
-- reading the table.
CREATE INDEX idx_email_outbox_sent ON email_outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX idx_email_outbox_created ON email_outbox (created_at);
CREATE INDEX idx_processed_stripe_events_processed ON processed_stripe_events (processed_at);
