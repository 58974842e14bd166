# bench/pg_private.sh -- sourced by the demo and the SQL benchmarks.
#
# pg_private_start: when PGHOST/PGDATABASE are not set by the caller, starts a
# throw-away PostgreSQL 15 (data and socket in a private temporary directory,
# no TCP) and exports PGHOST, PGPORT, PGUSER and PGDATABASE for it; stops and
# removes it when the calling script exits.  initdb refuses root, so as root the
# server runs as the postgres user.
# shellcheck shell=bash

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

pg_private_start()
{
	if [ -n "${PGHOST:-}" ] || [ -n "${PGDATABASE:-}" ]; then
		echo "using the PostgreSQL server given by PGHOST/PGPORT/PGDATABASE"
		return 0
	fi
	PG_PRIVATE_DIR=$(mktemp -d /tmp/pgdl-pg.XXXXXX)
	local as=()
	if [ "$(id -u)" -eq 0 ]; then
		chown postgres "$PG_PRIVATE_DIR"
		as=(runuser -u postgres --)
	fi
	"${as[@]}" "$PG_BIN/initdb" -D "$PG_PRIVATE_DIR/data" -A trust -U postgres -E UTF8 --locale=C --no-sync >/dev/null
	"${as[@]}" "$PG_BIN/pg_ctl" -D "$PG_PRIVATE_DIR/data" -l "$PG_PRIVATE_DIR/server.log" -w \
		-o "-c listen_addresses='' -k $PG_PRIVATE_DIR -p 5433 -c fsync=off -c shared_buffers=256MB -c max_wal_size=4GB" \
		start >/dev/null
	PG_PRIVATE_AS=("${as[@]}")
	trap pg_private_stop EXIT
	export PGHOST=$PG_PRIVATE_DIR PGPORT=5433 PGUSER=postgres PGDATABASE=postgres
	echo "started a private PostgreSQL 15 in $PG_PRIVATE_DIR"
}

pg_private_stop()
{
	if [ -n "${PG_PRIVATE_DIR:-}" ] && [ -d "$PG_PRIVATE_DIR" ]; then
		"${PG_PRIVATE_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_PRIVATE_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
		rm -rf "$PG_PRIVATE_DIR"
	fi
}

# Fashion-MNIST into tables fmnist_train and fmnist_test (id, image real[784], label), by COPY.
load_fmnist()
{
	local here
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	for split in train test; do
		psql -qX -v ON_ERROR_STOP=1 -c "DROP TABLE IF EXISTS fmnist_$split" \
			-c "CREATE TABLE fmnist_$split (id integer, image real[], label integer)"
		/usr/bin/python3 "$here/fmnist_copy.py" "$split" |
			psql -qX -v ON_ERROR_STOP=1 -c "COPY fmnist_$split FROM STDIN WITH (FORMAT binary)"
	done
}

# The start the model selection benchmarks share: a server (with KEEP_PG=1 a private one's directory and
# server.log are kept), a quiet psql, a header line naming the machine, Fashion-MNIST, and $train: the
# training table, or its first LIMIT images when LIMIT > 0, with $n_train rows.
bench_start()
{
	local name=$1 cpu
	if [ -n "${KEEP_PG:-}" ]; then
		pg_private_stop()
		{
			[ -n "${PG_PRIVATE_DIR:-}" ] && "${PG_PRIVATE_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_PRIVATE_DIR/data" -m fast -w stop >/dev/null 2>&1
			echo "kept $PG_PRIVATE_DIR (server.log)"
		}
	fi
	pg_private_start
	psql() { command psql -qX -v ON_ERROR_STOP=1 "$@"; }

	cpu=$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n 1)
	echo "== bench/$name: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, ${cpu:-unknown CPU}, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}"
	load_fmnist
	train=fmnist_train
	if [ "${LIMIT:-0}" -gt 0 ]; then
		psql -c "DROP TABLE IF EXISTS fmnist_train_sub" \
			-c "CREATE TABLE fmnist_train_sub AS SELECT * FROM fmnist_train WHERE id < $LIMIT ORDER BY id"
		train=fmnist_train_sub
	fi
	n_train=$(psql -Atc "SELECT count(*) FROM $train")
}
