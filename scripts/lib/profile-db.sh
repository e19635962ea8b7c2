# Sourced by scripts/profile-server.sh and scripts/flamegraph.sh: a fresh database on the
# Postgres DATABASE_URL names, the environment the bench runs `raptor serve` with (no TLS to
# Postgres, JSON logs at WARN, no background jobs, whose work would be counted), and the
# migrations.
#
#   source scripts/lib/profile-db.sh
#   profile_database NAME BINARY   # exports DATABASE_URL (the new database) and the settings;
#                                  # on exit, stops $server if the caller set it and drops the
#                                  # database

profile_database() {
	local name=$1 binary=$2
	: "${DATABASE_URL:?DATABASE_URL is not set (the make target sets it)}"
	PROFILE_ADMIN_URL=$DATABASE_URL
	PROFILE_DB=${name}_$$
	psql -q "$PROFILE_ADMIN_URL" -c "create database $PROFILE_DB"
	trap profile_database_drop EXIT
	export DATABASE_URL=${PROFILE_ADMIN_URL%/*}/$PROFILE_DB?sslmode=disable
	export RUST_LOG=warn RAPTOR_LOG_FORMAT=json
	export RAPTOR_ORDER_EXPIRY_INTERVAL_SECS=0 RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS=0
	export RAPTOR_QUOTE_SWEEP_INTERVAL_MS=0 RAPTOR_MAIL_RELAY_INTERVAL_MS=0
	export RAPTOR_PAPER_STARTING_CASH=100000000.00
	export RAPTOR_RESPONSE_KEYS=${RAPTOR_RESPONSE_KEYS:-$(scripts/response-key.sh profile)}
	"$binary" migrate >/dev/null
}

profile_database_drop() {
	if [[ -n ${server:-} ]]; then
		kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	fi
	psql -q "$PROFILE_ADMIN_URL" -c "drop database if exists $PROFILE_DB with (force)" || true
}
