#!/bin/bash
# bench/automl.sh -- make bench-automl: pgdl.automl (60 s) against a default MLP on scikit-learn's four
# bundled sets, three seeds; see bench/automl.py.  Starts a private server unless PGHOST/PGDATABASE say
# which to use (pgdl installed: make install first).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=pg_private.sh
. "$HERE/pg_private.sh"
pg_private_start
psql -X -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS pgdl;"
/usr/bin/python3 "$HERE/automl.py"
