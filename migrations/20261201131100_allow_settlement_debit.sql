-- An in-the-money short option settles in cash at expiry whatever the account holds: the
-- obligation is not the trader's choice, so the settlement cannot be refused the way an order
-- is. The account may therefore end with a debit balance (negative cash), from which it has no
-- buying power until cash comes back. Orders cannot spend cash they do not have: the engine's
-- buying-power check (with open orders' reservations) refuses them before any write.
ALTER TABLE paper_accounts DROP CONSTRAINT paper_accounts_cash_check;
