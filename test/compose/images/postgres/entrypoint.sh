#!/bin/sh
# First start (an empty data directory): initdb with POSTGRES_USER as the superuser and POSTGRES_PASSWORD
# as its password (scram-sha-256 over TCP), and POSTGRES_DB created. Then runs the server in the
# foreground, listening on every address unless the command's own options say otherwise.
set -eu
if [ "${1:-}" != postgres ]; then exec "$@"; fi
shift
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C.UTF-8 > /dev/null
  rm -f "$pwfile"
  echo 'host all all all scram-sha-256' >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\" OWNER \"$user\";" | postgres --single -D "$PGDATA" postgres > /dev/null
  fi
  echo "postgres-entrypoint: initialized $PGDATA with user $user and database $db"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
