# shellcheck shell=bash
# Sourced by scripts/test.sh: starts the servers the tests use and exports
# their addresses. Today that is one throwaway PostgreSQL:
#
#   - installs Debian's postgresql with apt-get if no server binaries are
#     found (root only; apt-get update first, non-interactive);
#   - creates a cluster in a fresh temporary directory (owned by the
#     postgres user when run as root: postgres refuses to run as root),
#     listening on 127.0.0.1 only, on a free port, with fsync off (the data
#     is thrown away);
#   - creates the database loupe_test and exports
#     LOUPE_TEST_POSTGRES=postgres://postgres@127.0.0.1:PORT/loupe_test?sslmode=disable
#   - stops the server and removes the directory when the sourcing shell
#     exits. The EXIT trap is chained: whatever EXIT trap was set before is
#     kept and runs after ours.
#
# Idempotent: if LOUPE_TEST_POSTGRES is already set it does nothing, and
# when postgresql is installed it takes about two seconds. If PostgreSQL
# cannot be had, it warns and leaves LOUPE_TEST_POSTGRES unset; the
# postgres tests then skip, except under CI=true, where they fail.

loupe_pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; fi
}

loupe_pg_free_port() {
  local p
  for p in $(seq 25432 25999); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

loupe_pg_start() {
  local bindir dir port as=()
  bindir=$(loupe_pg_bindir)
  if [ -z "$bindir" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "services: installing postgresql with apt-get"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null ||
        { echo "services: apt-get install postgresql failed" >&2; return 1; }
      bindir=$(loupe_pg_bindir)
    fi
    if [ -z "$bindir" ]; then echo "services: no PostgreSQL server found" >&2; return 1; fi
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/loupe-pg.XXXXXX") || return 1
  chmod 755 "$dir"
  if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$dir" || return 1
    as=(runuser -u postgres --)
  fi
  port=$(loupe_pg_free_port) || { echo "services: no free port" >&2; return 1; }
  "${as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  "${as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null ||
    { cat "$dir/server.log" >&2; return 1; }
  LOUPE_PG_DIR=$dir
  LOUPE_PG_CTL=("${as[@]}" "$bindir/pg_ctl" -D "$dir/data")
  "${as[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres loupe_test || return 1
  export LOUPE_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/loupe_test?sslmode=disable"
  echo "services: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port ($dir)"
}

loupe_pg_stop() {
  if [ -n "${LOUPE_PG_DIR:-}" ]; then
    "${LOUPE_PG_CTL[@]}" stop -m immediate >/dev/null 2>&1 || true
    rm -rf "$LOUPE_PG_DIR"
    LOUPE_PG_DIR=
  fi
}

if [ -z "${LOUPE_TEST_POSTGRES:-}" ]; then
  if loupe_pg_start; then
    # Chain the EXIT trap: run ours, then whatever was there before.
    eval "set -- $(trap -p EXIT)"
    loupe_prev_exit_trap=${3:-}
    trap 'loupe_pg_stop; eval "$loupe_prev_exit_trap"' EXIT
  else
    loupe_pg_stop
    echo "services: WARNING: no PostgreSQL; postgres tests skip (and fail under CI=true)" >&2
  fi
fi
