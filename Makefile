# Two commands set everything up: `make run` and `make test` (see README).
SHELL := /bin/bash
DB := eval "$$(scripts/db.sh postgres)"
APP_DB := eval "$$(scripts/db.sh raptor)"
STRIPE := eval "$$(scripts/stripe.sh)"
export CARGO_TERM_COLOR ?= never

.PHONY: run test lint fmt openapi bench build db-up db-down ci docs-assets openapi-lint fuzz-api \
        client-generate client-e2e docs-check quickstart-check chaos chaos-quick model profile profile-postgres \
        flamegraph upgrade-check mutants k8s-check

# RAPTOR_ENV=development in .env unless set (production, the default, refuses to start without an
# SMTP relay and real keys, and never logs sign-in links).
DEV_ENV := { [ -n "$${RAPTOR_ENV:-}" ] || grep -qs '^RAPTOR_ENV=.' .env || scripts/dotenv.sh RAPTOR_ENV development; }
# A development RAPTOR_RESPONSE_KEYS and RAPTOR_SESSION_KEY (random keys written to .env once)
# unless they are set.
DEV_RESPONSE_KEY := { [ -n "$${RAPTOR_RESPONSE_KEYS:-}" ] || grep -qs '^RAPTOR_RESPONSE_KEYS=.' .env || scripts/dotenv.sh RAPTOR_RESPONSE_KEYS "$$(scripts/response-key.sh dev)"; }
DEV_SESSION_KEY := { [ -n "$${RAPTOR_SESSION_KEY:-}" ] || grep -qs '^RAPTOR_SESSION_KEY=.' .env || scripts/dotenv.sh RAPTOR_SESSION_KEY "$$(head -c 32 /dev/urandom | base64 | tr -d '\n')"; }

## run: install Swagger UI's files for /docs, start Postgres (and stripe-mock where Docker exists)
## if needed, then serve the API on RAPTOR_ADDR (default 127.0.0.1:8080), with development keys
## for stored responses and sign-in sessions
run:
	@$(MAKE) --no-print-directory docs-assets || echo "make: Swagger UI's files not installed; /docs serves the plain route list" >&2
	@$(APP_DB) && $(STRIPE) && scripts/dotenv.sh DATABASE_URL "$$DATABASE_URL" && $(DEV_ENV) && $(DEV_RESPONSE_KEY) && $(DEV_SESSION_KEY) && cargo run --locked -p raptor-server --bin raptor -- serve

## docs-assets: Swagger UI's files for /docs (npm ci --omit=dev: swagger-ui-dist only); `make run`
## goes on without them (npm missing or offline): /docs then serves the plain route list
docs-assets:
	@scripts/npm-ci.sh . --omit=dev

## test: start Postgres if needed, install the mail tests' SMTP server (aiosmtpd, in a
## virtualenv under target/) and HAProxy (the load-balancer tests start it) when missing, then
## run every test (one database per test)
test:
	@scripts/haproxy-deps.sh && $(DB) && scripts/smtp-sink.sh >/dev/null && cargo test --workspace --locked

## lint: formatting, clippy (warnings are errors), spelling, unused dependencies, the crate
## docs (scripts/lint.sh installs typos and cargo-machete if missing), cargo-deny's licenses,
## bans, sources and advisories (scripts/deny.sh, deny.toml), then the Prometheus alerting
## rules: promtool check and unit tests, a runbook per alert (scripts/prometheus-rules.sh
## installs Debian's prometheus package for promtool if missing)
lint:
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	scripts/lint.sh
	scripts/deny.sh
	scripts/prometheus-rules.sh

fmt:
	cargo fmt --all

## openapi: regenerate the checked-in spec and the typed client generated from it
openapi:
	cargo run --locked -q -p raptor-server --bin raptor -- openapi > openapi/openapi.json
	@$(MAKE) --no-print-directory client-generate

## bench: latency and throughput of the write path against a real server and Postgres
bench:
	@$(DB) && cargo build --locked --release -p raptor-server --bin raptor \
	  && cargo run --locked --release -p raptor-integration-tests --bin raptor-bench

## upgrade-check: the previous release's raptor (release/previous, built from its commit into
## target/previous-release/) serves while this release migrates the database and serves beside it;
## orders, fills and settlement written by either reconcile (tests/api/upgrade.rs)
upgrade-check:
	@scripts/upgrade-check.sh

## profile: instructions the server executes per keyed, unkeyed and replayed order (valgrind's
## callgrind, user space; a count that a busy machine does not move), on the release build with
## symbols (Cargo profile `profiling`); the files stay in target/profile/
profile:
	@$(DB) && cargo build --locked --profile profiling -p raptor-server --bin raptor \
	  && for kind in keyed unkeyed replay; do scripts/profile-server.sh $$kind 1000 || exit 1; done

## profile-postgres: instructions Postgres executes per unkeyed, keyed and replayed order
## (valgrind's callgrind in every backend of a throwaway cluster of its own; counts that a busy
## machine does not move): what a key costs Postgres, and what a statement or schema change
## saves; the files stay in target/profile/
profile-postgres:
	cargo build --locked --release -p raptor-server --bin raptor && scripts/profile-postgres.sh

## flamegraph: where the server's CPU goes (user space and kernel, every thread) while 32
## connections send keyed orders: `perf record` with DWARF call stacks on the release build with
## symbols, folded and drawn by inferno (installed into target/tools when missing); writes
## target/profile/flamegraph.keyed.svg and prints the shares docs/benchmarks/history.md tracks
flamegraph:
	@$(DB) && cargo build --locked --profile profiling -p raptor-server --bin raptor \
	  && scripts/flamegraph.sh

## openapi-lint: Redocly CLI (recommended ruleset, redocly.yaml), then Spectral (spectral:oas,
## .spectral.yaml) on openapi/openapi.json; an error of either fails
openapi-lint:
	@scripts/npm-ci.sh .
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no-install redocly lint --format=stylish
	npx --no-install spectral lint openapi/openapi.json --ruleset .spectral.yaml --fail-severity error

## client-generate: regenerate both clients from openapi/openapi.json: the TypeScript types
## (clients/typescript/src/schema.ts) and the Python package (clients/python/raptor_client,
## openapi-python-client in a virtualenv under target/)
client-generate:
	@scripts/npm-ci.sh clients/typescript
	cd clients/typescript && npx --no-install openapi-typescript ../../openapi/openapi.json --output src/schema.ts
	@scripts/python-client.sh generate

## client-e2e: both clients, each checked for drift and type-checked, run their journey against
## a real server: the TypeScript one (Antlers' journey), then the Python one
client-e2e:
	@scripts/client-e2e.sh
	@scripts/python-client.sh e2e

## fuzz-api: Schemathesis (pinned) against a real server on a fresh, seeded database: zero 5xx,
## zero answers the document does not allow, zero unauthenticated successes
fuzz-api:
	@scripts/fuzz-api.sh

## docs-check: headless Chromium, network off, loads /docs from a real server; every operation
## renders; screenshot in target/docs.png
docs-check:
	@scripts/docs-check.sh

## quickstart-check: the README's quick start, run as written against a fresh server
quickstart-check:
	@scripts/quickstart.sh

## k8s-check: the Kubernetes manifests (deploy/kubernetes) validated strictly against the schemas
## of Kubernetes 1.29 to 1.37 (kubernetes-validate, pinned, in a virtualenv under target/), then
## the real `raptor serve` run with the Deployment's probes, preStop hook and grace period: a pod
## waiting on the migration lock is not restarted, and a pod stopped under load exits within the
## grace period with every request answered (scripts/k8s-check.sh, scripts/k8s-lifecycle.py)
k8s-check:
	@scripts/k8s-check.sh

## chaos: fault injection against 3 release replicas and a Postgres cluster of its own
## (target/chaos): kill -9, Postgres restarts, duplicates, pool exhaustion, PgBouncer, a slow
## database, the kill switch; then failover on a Patroni + etcd + HAProxy cluster and a
## pgBackRest restore drill (target/chaos/ha); installs postgresql, pgbouncer, patroni,
## etcd-server, haproxy and pgbackrest with apt-get when missing.
## CHAOS_ARGS passes flags (e.g. CHAOS_ARGS="--only 2,3").
chaos:
	scripts/chaos-deps.sh
	cargo build --locked --release -p raptor-server --bin raptor
	cargo run --locked --release -q -p raptor-integration-tests --bin raptor-chaos -- $(CHAOS_ARGS)

## chaos-quick: the CI subset (every scenario, shorter)
chaos-quick:
	$(MAKE) chaos CHAOS_ARGS="--quick $(CHAOS_ARGS)"

## model: the model checker of the claim protocol (crates/raptor-model) at its larger bound
## (3 clients, budget 3; `cargo test` checks smaller ones): state counts, every property's
## verdict, a shortest counterexample for a violation (about 3 min, 1.5 GB); then 2,000 seeded
## walks of the model replayed through the service's statements on Postgres (REPLAY_WALKS).
## MODEL_ARGS passes flags (e.g. MODEL_ARGS="--clients 2 --lifetimes 1 --mutant no-fence").
REPLAY_WALKS ?= 2000
model:
	cargo run --locked --release -q -p raptor-model -- $(MODEL_ARGS)
	@$(DB) && RAPTOR_REPLAY_WALKS=$(REPLAY_WALKS) cargo test --locked -q -p raptor-integration-tests \
	    --test api -- --exact conformance::model_traces_replay_on_the_real_statements --nocapture

## mutants: the known-bad changes of the claim protocol (tests/mutants/*.patch: no fence,
## select-then-insert, fail-open on a busy pool or a probe timeout, no stale takeover, a release
## without `status = 'in_flight'`), each applied in a worktree; fails if the tests a patch names
## pass with it (MUTANTS="no-fence" runs one)
mutants:
	@$(DB) && scripts/mutants.sh

build:
	cargo build --workspace --locked

db-up:
	@$(DB) && echo "$$DATABASE_URL"

db-down:
	-docker compose down 2>/dev/null
	-[ -f target/pg/data/PG_VERSION ] && runuser -u postgres -- $$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)/pg_ctl -D target/pg/data stop

## ci: what CI runs on a clean clone (.ci/run): test, lint, then the checks around the OpenAPI
## document, the Kubernetes manifests' check and the quick chaos subset
ci:
	.ci/run
