#!/usr/bin/env bash
# The BI views through ODBC (psqlODBC, unixODBC's isql), as a BI tool reads them: trains a tiny model
# selection in a database of its own, then checks that pgdl.leaderboard and pgdl.training_curves arrive
# through ODBC with the rows psql sees, and that ODBC's column catalog (SQLColumns, isql's "help")
# gives each column a numeric, boolean, timestamp or text SQL type, not the varchar(255) psqlODBC gives
# jsonb and arrays.  Prints "ok"/"not ok" per check and ends with "N passed, N failed".
#
# Usage: PGHOST=... PGPORT=... PGUSER=... regress/odbc/check.sh   (a superuser; needs isql and psqlODBC:
# Debian's unixodbc and odbc-postgresql).  PSQLODBC overrides the driver's path.
set -euo pipefail

DB=pgdl_odbc_check
# Debian's odbc-postgresql: /usr/lib/<multiarch>/odbc/psqlodbcw.so (the Unicode driver)
DRIVER=${PSQLODBC:-$(dpkg -L odbc-postgresql 2>/dev/null | grep -m1 '/psqlodbcw\.so$' || echo /usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so)}
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -d "$DB")
PASSED=0
FAILED=0

check()
{
	local name=$1
	shift
	if "$@"; then
		PASSED=$((PASSED + 1))
		echo "ok - $name"
	else
		FAILED=$((FAILED + 1))
		echo "not ok - $name"
	fi
}

# same TEXT A B: A and B are equal and not empty (shows both when not)
same()
{
	if [ -n "$1" ] && [ "$1" = "$2" ]; then
		return 0
	fi
	printf '  odbc: %s\n  psql: %s\n' "${1//$'\n'/ \\n }" "${2//$'\n'/ \\n }"
	return 1
}

[ -f "$DRIVER" ] || { echo "no psqlODBC driver at $DRIVER"; echo "0 passed, 1 failed"; exit 1; }

# ---------------------------------------------------------------------------
# A tiny model selection: a pgdl.fit run and a pgdl.fit_multiple run with successive halving
# ---------------------------------------------------------------------------
psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" \
	-c "CREATE DATABASE $DB"
trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true; rm -rf "${ODBC_DIR:-}"' EXIT
"${PSQL[@]}" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pgdl;
CREATE TABLE points AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i)]::real[] AS x,
       (CASE WHEN sin(i) > 0.3 THEN 0 WHEN cos(i) > 0 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 96) i;
SELECT pgdl.pack('points', 'x', 'label', 'points_packed', buffer_rows => 16, partitions => 2);
SELECT pgdl.pack('points', 'x', 'label', 'points_valid', buffer_rows => 32, partitions => 1, reference => 'points_packed');
SELECT pgdl.add_architecture('small', '{"input": [4], "layers": [{"type": "dense", "units": 3}]}');
SELECT pgdl.add_architecture('mlp', '{"input": [4], "layers": [{"type": "dense", "units": 8}, {"type": "relu"},
  {"type": "dense", "units": 3}]}');
SELECT pgdl.fit('points_packed', 'mlp', '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 8}', 2,
                'points_valid', name => 'points_mlp');
SELECT pgdl.grid_search('selection', ARRAY['small', 'mlp'], '{"optimizer": ["sgd", "adam"], "lr": [0.01, 0.1], "batch_size": 8}');
SELECT count(*) FROM pgdl.fit_multiple('points_packed', 'selection', 4, 'points_valid', workers => 1,
                                       strategy => 'hyperband', eta => 2);
SQL

# ---------------------------------------------------------------------------
# A DSN in a private ODBC configuration: psqlODBC over the server's socket; search_path so that isql's
# "help TABLE" (SQLColumns without a schema) finds pgdl's views; booleans as booleans (BoolsAsChar=0)
# ---------------------------------------------------------------------------
ODBC_DIR=$(mktemp -d /tmp/pgdl-odbc.XXXXXX)
cat >"$ODBC_DIR/odbcinst.ini" <<EOF
[PostgreSQL Unicode]
Description = PostgreSQL ODBC driver (psqlODBC)
Driver = $DRIVER
EOF
cat >"$ODBC_DIR/odbc.ini" <<EOF
[pgdl]
Driver = PostgreSQL Unicode
Servername = ${PGHOST:-/var/run/postgresql}
Port = ${PGPORT:-5432}
Database = $DB
Username = ${PGUSER:-$(id -un)}
ConnSettings = SET search_path TO pgdl, public
BoolsAsChar = 0
EOF
export ODBCSYSINI=$ODBC_DIR ODBCINI=$ODBC_DIR/odbc.ini

# odbc SQL: the rows isql fetches, columns separated by |; an error is output ERROR, which no check takes
odbc()
{
	local out
	out=$(printf '%s\n' "$1" | isql -b -d'|' pgdl 2>&1) || out="ERROR: isql failed: $out"
	if grep -q 'ERROR' <<<"$out"; then
		echo "  isql: $out" >&2
		echo "ERROR"
		return
	fi
	printf '%s\n' "$out" | sed -e '/^SQLRowCount returns/d' -e '/^$/d'
}

q() { "${PSQL[@]}" -At -F'|' -c "$1"; }

# the rows: what psql sees arrives through ODBC (numbers compared as text, rounded in SQL)
LB="SELECT run, rank, ranked_by, model_name, config, architecture, status, epochs, optimizer, round(lr::numeric, 6),
 nesterov, batch_size, seed, round(validation_loss::numeric, 6), config_text FROM pgdl.leaderboard ORDER BY run, rank"
check "pgdl.leaderboard: the rows psql sees arrive through ODBC" same "$(odbc "${LB//$'\n'/}")" "$(q "$LB" | sed 's/|t|/|1|/g; s/|f|/|0|/g')"
check "pgdl.leaderboard: one row per model of both runs (1 + 8)" same "$(odbc 'SELECT count(*) FROM pgdl.leaderboard')" 9
check "pgdl.leaderboard: successive halving stopped some models" \
	same "$(odbc "SELECT count(*) > 0 FROM pgdl.leaderboard WHERE status = 'stopped'" | tr -d ' ')" 1
TC="SELECT run, model, config, epoch, metric, round(value::numeric, 6) FROM pgdl.training_curves ORDER BY run, config, epoch, metric"
check "pgdl.training_curves: the rows psql sees arrive through ODBC" same "$(odbc "$TC")" "$(q "$TC")"
check "pgdl.training_curves: 4 metrics per epoch of each model" \
	same "$(odbc 'SELECT count(*) FROM pgdl.training_curves')" "$(q 'SELECT 4 * count(*) FROM pgdl.run_metrics')"

# the columns: SQLColumns' DATA_TYPE (field 5) and TYPE_NAME (6) of each, against the view's own types
#   -5 SQL_BIGINT, 4 SQL_INTEGER, 6/8 SQL_FLOAT/SQL_DOUBLE, -7 SQL_BIT, 11/93 SQL_TIMESTAMP,
#   -1/-10 SQL_(W)LONGVARCHAR (text); psqlODBC's fallback for jsonb and arrays is 12 SQL_VARCHAR, 255
expected_odbc_type()
{
	case $1 in
	bigint) echo '-5' ;;
	integer) echo '4' ;;
	'double precision') echo '6 8' ;;
	boolean) echo '-7' ;;
	'timestamp with time zone') echo '11 93' ;;
	text) echo '-1 -10' ;;
	*) echo "none for $1" ;;
	esac
}

columns_typed()
{
	local view=$1 help pg n=0 bad=0 name type odbc_type odbc_name
	help=$(odbc "help $view")
	pg=$(q "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
	         WHERE a.attrelid = 'pgdl.$view'::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum")
	while IFS='|' read -r name type; do
		n=$((n + 1))
		odbc_type=$(awk -F'|' -v c="$name" '$4 == c {print $5}' <<<"$help")
		odbc_name=$(awk -F'|' -v c="$name" '$4 == c {print $6}' <<<"$help")
		if [[ -z "$odbc_type" || " $(expected_odbc_type "$type") " != *" $odbc_type "* ]]; then
			echo "  $view.$name ($type): ODBC type '${odbc_type:-none}' ($odbc_name), expected $(expected_odbc_type "$type")"
			bad=$((bad + 1))
		fi
	done <<<"$pg"
	[ "$n" -gt 0 ] && [ "$bad" -eq 0 ] && [ "$(grep -c "|$view|" <<<"$help")" -eq "$n" ]
}
check "pgdl.leaderboard: ODBC gives every column its numeric, boolean, timestamp or text type" columns_typed leaderboard
check "pgdl.training_curves: ODBC gives every column its numeric or text type" columns_typed training_curves

# what the views are for: the catalog's jsonb reaches ODBC as varchar(255) (so the check above can fail)
check "pgdl.runs.config (jsonb) reaches ODBC as varchar(255)" \
	same "$(odbc 'help runs' | awk -F'|' '$4 == "config" {print $5 " " $6 " " $7}')" "12 jsonb 255"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
