-- The session a sign-in link issued last. A repeated verification of a used link (a client
-- retrying after a lost answer) revokes it before issuing the next, so one link never has more
-- than one live session behind it.
ALTER TABLE auth_link_tokens
    ADD COLUMN session_token_id bigint
        CONSTRAINT auth_link_tokens_session_token_id_fkey
        REFERENCES api_tokens (id) ON DELETE SET NULL;
