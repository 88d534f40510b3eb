#!/usr/bin/env bash
# bench/pgbouncer/pgbouncer.sh — run a private PgBouncer on loopback in
# transaction pooling mode, in front of the test PostgreSQL
# (QTOP_TEST_POSTGRES, from: eval "$(./scripts/services env)").
#
#   bench/pgbouncer/pgbouncer.sh start [PORT] [POOL_SIZE] [MAX_PREPARED]   print the DSN to use
#   bench/pgbouncer/pgbouncer.sh stop  [PORT]
#
# MAX_PREPARED sets max_prepared_statements (PgBouncer 1.21 and later;
# older versions refuse to start with it). Its files live in a temporary
# folder named after the port; it runs as the invoking user, or as
# "postgres" when invoked as root (PgBouncer refuses root).
set -euo pipefail

cmd=${1:-start}
port=${2:-16432}
pool=${3:-2}
prepared=${4:-0}
dir="${TMPDIR:-/tmp}/qtop-pgbouncer-$port"
dsn=${QTOP_TEST_POSTGRES:?eval "\$(./scripts/services env)" first}

# postgres://user:pass@host:port/db?…
rest=${dsn#*://}
userpass=${rest%%@*}
user=${userpass%%:*}
pass=${userpass#*:}
hostport=${rest#*@}
hostport=${hostport%%/*}
host=${hostport%%:*}
pgport=${hostport#*:}
db=${rest#*/}
db=${db%%\?*}

case $cmd in
stop)
	if [ -f "$dir/pgbouncer.pid" ]; then
		kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
	fi
	exit 0
	;;
start) ;;
*)
	echo "usage: $0 start|stop [PORT] [POOL_SIZE] [MAX_PREPARED]" >&2
	exit 2
	;;
esac

"$0" stop "$port"
rm -rf "$dir"
mkdir -p "$dir"
printf '"%s" "%s"\n' "$user" "$pass" >"$dir/userlist.txt"
{
	echo "[databases]"
	echo "$db = host=$host port=$pgport dbname=$db"
	echo "[pgbouncer]"
	echo "listen_addr = 127.0.0.1"
	echo "listen_port = $port"
	echo "unix_socket_dir ="
	echo "auth_type = plain"
	echo "auth_file = $dir/userlist.txt"
	echo "pool_mode = transaction"
	echo "default_pool_size = $pool"
	echo "max_client_conn = 1000"
	echo "pidfile = $dir/pgbouncer.pid"
	echo "logfile = $dir/pgbouncer.log"
	echo "admin_users = $user"
	if [ "$prepared" != 0 ]; then echo "max_prepared_statements = $prepared"; fi
} >"$dir/pgbouncer.ini"
as=()
if [ "$(id -u)" = 0 ]; then
	chown -R postgres "$dir"
	as=(-u postgres)
fi
pgbouncer -d "${as[@]}" "$dir/pgbouncer.ini"
for _ in $(seq 50); do
	[ -s "$dir/pgbouncer.pid" ] && break
	sleep 0.1
done
[ -s "$dir/pgbouncer.pid" ] || { tail "$dir/pgbouncer.log" >&2; exit 1; }
echo "postgres://$user:$pass@127.0.0.1:$port/$db?sslmode=disable"
