-- A quote update queues one sweep per account with a resting order on the symbol. It found them
-- by joining the symbol's legs to the open orders, a plan that rests on the statistics: on tables
-- that were never analysed (autovacuum off, or a book that grew faster than autoanalyze) the
-- planner took both sides for ~100 rows and joined them by a nested loop, 20,000 legs against
-- 20,000 open orders (400 M comparisons), and the statement ran into its 10 s timeout: the quote
-- could not be set at all. The statement now reads paper_orders alone: simple orders by this
-- index (their own symbol), multi-leg orders (symbol NULL) by idx_paper_orders_open_mleg with a
-- lookup of their legs by primary key; no plan of it is worse than linear in the open orders.
-- Only resting orders get an entry (an order that fills when placed is inserted as filled).
CREATE INDEX idx_paper_orders_open_symbol ON paper_orders (symbol) WHERE status = 'new';
