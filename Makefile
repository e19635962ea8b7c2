# Two commands set everything up: `make run` and `make test` (see README).
SHELL := /bin/bash
DB := eval "$$(scripts/db.sh postgres)"
APP_DB := eval "$$(scripts/db.sh raptor)"
STRIPE := eval "$$(scripts/stripe.sh)"
export CARGO_TERM_COLOR ?= never

.PHONY: run test lint fmt openapi bench chaos chaos-quick build db-up db-down ci

# A development RAPTOR_RESPONSE_KEYS (a random key written to .env once) unless one is set.
DEV_RESPONSE_KEY := { [ -n "$${RAPTOR_RESPONSE_KEYS:-}" ] || grep -qs '^RAPTOR_RESPONSE_KEYS=.' .env || scripts/dotenv.sh RAPTOR_RESPONSE_KEYS "$$(scripts/response-key.sh dev)"; }

## run: start Postgres (and stripe-mock where Docker exists) if needed, then serve the API on
## RAPTOR_ADDR (default 127.0.0.1:8080), with a development key for stored responses
run:
	@$(APP_DB) && $(STRIPE) && scripts/dotenv.sh DATABASE_URL "$$DATABASE_URL" && $(DEV_RESPONSE_KEY) && cargo run --locked -p raptor-server --bin raptor -- serve

## test: start Postgres if needed, then run every test (one database per test)
test:
	@$(DB) && cargo test --workspace --locked

## lint: formatting and clippy, warnings are errors
lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

fmt:
	cargo fmt --all

## openapi: regenerate the checked-in spec
openapi:
	cargo run --locked -q -p raptor-server --bin raptor -- openapi > openapi/openapi.json

## bench: latency and throughput of the write path against a real server and Postgres
bench:
	@$(DB) && cargo build --locked --release -p raptor-server --bin raptor \
	  && cargo run --locked --release -p raptor-integration-tests --bin raptor-bench

## chaos: fault injection against 3 release replicas and a Postgres cluster of its own
## (target/chaos): kill -9, Postgres restarts, duplicates, pool exhaustion, PgBouncer, a slow
## database, the kill switch; installs postgresql/pgbouncer with apt-get when missing.
## CHAOS_ARGS passes flags (e.g. CHAOS_ARGS="--only 2,3").
chaos:
	scripts/chaos-deps.sh
	cargo build --locked --release -p raptor-server --bin raptor
	cargo run --locked --release -q -p raptor-integration-tests --bin raptor-chaos -- $(CHAOS_ARGS)

## chaos-quick: the CI subset (shorter scenarios, no PgBouncer)
chaos-quick:
	$(MAKE) chaos CHAOS_ARGS="--quick $(CHAOS_ARGS)"

build:
	cargo build --workspace --locked

db-up:
	@$(DB) && echo "$$DATABASE_URL"

db-down:
	-docker compose down 2>/dev/null
	-[ -f target/pg/data/PG_VERSION ] && runuser -u postgres -- $$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)/pg_ctl -D target/pg/data stop

ci: lint test
