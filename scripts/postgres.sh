# Sourced by scripts/run and scripts/test: makes sure a PostgreSQL server answers, and exports
# ONCE_PG_URL, its URL without a database (postgres://user@host:port).
#
# The shared server is used when it answers: ONCE_PG_URL if set, else 127.0.0.1:5432. When
# nothing answers there, PostgreSQL is installed from Debian if missing, and a private cluster
# is started in a directory of its own (ONCE_PRIVATE_PG_DIR, target/postgres) on a port of its
# own (ONCE_PRIVATE_PG_PORT, 55432); the calling script stops it on exit with `postgres_stop`.

postgres_ensure() {
  local shared="${ONCE_PG_URL:-postgres://postgres@127.0.0.1:5432}"
  if pg_isready -q -d "$shared/postgres" 2>/dev/null; then
    export ONCE_PG_URL="$shared"
    return 0
  fi
  echo "postgres: nothing answers at $shared; starting a private cluster"
  postgres_private "${ONCE_PRIVATE_PG_DIR:-$PWD/target/postgres}" "${ONCE_PRIVATE_PG_PORT:-55432}"
}

# Starts a private cluster in DIR on PORT (initialised on first use; extra server options in
# $3) and exports ONCE_PG_URL, plus the commands that stop it (ONCE_PG_STOP), start it again
# (ONCE_PG_START) and crash it without a shutdown (ONCE_PG_CRASH, for the fault harness).
postgres_private() {
  local dir="$1" port="$2" extra="${3:-}" bin
  if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "postgres: installing PostgreSQL from Debian"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  # initdb and the server refuse to run as root: as root, they run as Debian's postgres user.
  local as=""
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    as="runuser -u postgres --"
    chown postgres "$dir"
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    $as "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  local ctl="$as $bin/pg_ctl -D $dir/data"
  ONCE_PG_START="$ctl -l $dir/server.log -w -o '-p $port -k $dir -c listen_addresses=127.0.0.1 $extra' start"
  ONCE_PG_CRASH="$ctl -m immediate -w stop"
  ONCE_PG_STOP="$ctl -m fast -w stop"
  sh -c "$ONCE_PG_START" >/dev/null
  export ONCE_PG_URL="postgres://postgres@127.0.0.1:$port"
}

# Stops the private cluster, if this script started one.
postgres_stop() {
  if [ -n "${ONCE_PG_STOP:-}" ]; then
    $ONCE_PG_STOP >/dev/null 2>&1 || true
    ONCE_PG_STOP=
  fi
}

# The names scripts/test's steps give the databases they make on ONCE_PG_URL (the tests of
# every crate, the browser tests, scripts/api-fuzz and scripts/sqlx-data), each dropped by the
# code that made it when it ends (passed, failed or interrupted). scripts/test sweeps what a
# killed run left before it starts, and fails when one remains after it. Whole names, random
# parts included, so that no database of the user's (once_test_fixtures, once_e2e_data) is
# ever taken for one; the benchmarks' own (once_bench_*) are not scripts/test's to sweep.
ONCE_SCRATCH_DATABASES='^once_((provider_)?test(_(pg|axum|events|bookings))?_[0-9a-f]{32}(_once_pg)?|(provider_)?e2e(_[0-9a-f]{12})?_[0-9a-f]{32}|fuzz(_provider)?_[0-9]+_[0-9]+|sqlx(_provider)?_[0-9]+)$'

# Prints the names of those databases, one per line.
scratch_databases() {
  psql -X -qAt "$ONCE_PG_URL/postgres" -c \
    "SELECT datname FROM pg_database WHERE datname ~ '$ONCE_SCRATCH_DATABASES' ORDER BY 1"
}

# Drops every one of them.
drop_scratch_databases() {
  scratch_databases | while read -r db; do
    psql -X -q "$ONCE_PG_URL/postgres" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)"
  done
}
