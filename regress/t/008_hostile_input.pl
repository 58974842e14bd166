# No crash on any input (issue 10): a sweep generated from pg_proc.
#
# Every function of the extension in schema pgdl is called, as an ordinary role,
# with its arguments valid (that call must succeed), with NULL in each argument
# position (the others valid), and with hostile values in each position: per
# type, empty, wrong-length, 2-D and NULL-holding arrays, NaN and infinities,
# zero, negative and extreme sizes, 10 MB strings, jsonb and bytea, names with
# quotes, backslashes and format directives, every key of a valid spec or
# configuration given a value of the wrong type, truncated and corrupted model
# blobs, relations that are not packed tables, dropped or belong to another
# role, roles (regrole, acl items and role names: another role, a superuser,
# pgdl_admin, one that does not exist, oid 0), and catalog rows forged by hand (a
# run, a model, a dataset, an architecture; another role's models of the same
# names with acls aclexplode refuses), and for the functions of several servers
# a loopback node (a database of this server behind a postgres_fdw server),
# servers wrong in every way (another wrapper, no user mapping, no USAGE, no
# password, no pgdl, down, never answering), packed tables distributed to the
# node, on a node gone and attached from it, the node's tables that are not
# packed, of other classes, of another role or forged.  Aggregates are swept
# through their own call, serially and as a parallel aggregate (the support
# functions taking `internal` cannot be called from SQL); trigger functions are called directly
# and fired by writes: pgdl.configs_validate by hostile rows, pgdl.owned_by_run by
# rows planted into another role's run, which must be refused.  Each PARALLEL SAFE
# function's valid call also runs in a parallel worker, and each IMMUTABLE one
# answers the same twice.
#
# Each call runs in a subtransaction that is rolled back, under statement_timeout.
# It must succeed or fail with a clear error: an SQLSTATE other than XX000 (and no
# syntax error in SQL pgdl builds), message + detail and hint each under 300 bytes
# and a context that does not echo a large input (a 10 MB input is never echoed),
# within the timeout, and the server must never restart.  One test per function
# and case group (its valid call, its NULL arguments, each argument's hostile
# values); every outcome, SQLSTATE included, is written to the test's log.
use strict;
use warnings;

use B;
use IO::Socket::INET;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $TIMEOUT_S = 10;             # per call
# pgdl.calibrate(1) trains its probes for about 8 s even when the machine is idle (each probe runs at least
# three timed windows); on the shared 2-core machine it took 17 s under load, so it gets a longer timeout.
# calibrate measures for seconds; distribute waits out connect_timeout (2 s) on each of a silent node's tries
my %TIMEOUT_OF = ('pgdl.calibrate(double precision,integer)' => 60, 'pgdl.distribute(regclass,text[],integer)' => 30);
my $MAX_ERROR_BYTES = 300;      # message + detail; hint
my $MAX_CONTEXT_EXTRA = 4096;   # context beyond the statement the sweep itself ran
my $TEN_MB = 10_000_000;

my $node = PostgreSQL::Test::Cluster->new('hostile');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
max_worker_processes = 16
# a crash is recorded and the sweep goes on
restart_after_crash = on
# ERRORs stay out of the server log: a message that echoes a 10 MB input is a
# failure here, not 10 MB of log.  Crashes are logged at LOG.
log_min_messages = log
});
$node->start;

# ---------------------------------------------------------------------------
# Fixture: roles, a tiny table packed twice, an architecture, a model, two
# configuration sets (one of transfer configurations, whose feature cache is
# built), another role's objects, and catalog rows forged by hand.
# ---------------------------------------------------------------------------
my $SPEC = {
	input  => [4],
	layers => [
		{ type => 'dense', units => 8 },
		{ type => 'batchnorm' },
		{ type => 'relu' },
		{ type => 'dense', units => 3 }
	]
};
my $CONFIG = {
	lr           => 0.1,
	batch_size   => 8,
	optimizer    => 'sgd',
	momentum     => 0.9,
	seed         => 7,
	weight_decay => 0.0001
};
my $GRID = { lr => [ 0.1, 0.2 ], batch_size => 8 };
my $SPACE = {
	lr         => { uniform => [ 0.01, 0.1 ] },
	batch_size => { int     => [ 4, 16 ] },
	optimizer  => { choice  => [ 'sgd', 'adam' ] }
};

my $json = JSON::PP->new->canonical;
sub sql_literal { my ($s) = @_; $s =~ s/'/''/g; return "'$s'"; }
sub jsonb_sql { return sql_literal($json->encode($_[0])) . '::jsonb'; }

my $spec_sql = jsonb_sql($SPEC);

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgdl;
CREATE ROLE sweeper LOGIN;
CREATE ROLE sweep_other LOGIN;
GRANT CREATE ON SCHEMA public TO sweeper, sweep_other;
-- pgdl.calibrate is for pgdl_admin (and superusers): the sweeper may call it too
GRANT EXECUTE ON FUNCTION pgdl.calibrate(double precision, integer) TO sweeper;

-- Runs one generated call in a subtransaction that is always rolled back and
-- answers one line:
--   id|ok|the first column of the first row
--   id|timeout
--   id|badcall|why the call itself does not parse (a bug of this test)
--   id|error|SQLSTATE|bytes of message + detail|bytes of hint|bytes of context beyond the call|message
CREATE FUNCTION public.sweep_try(id integer, q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
	r text;
	st text;
	m text;
	d text;
	h text;
	c text;
BEGIN
	IF q ~* '^\s*(SELECT|INSERT|UPDATE|DELETE)' THEN
		BEGIN
			EXECUTE 'PREPARE sweep_check AS ' || q;
			EXECUTE 'DEALLOCATE sweep_check';
		EXCEPTION
			WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
				RETURN id || '|badcall|' || regexp_replace(left(m, 200), '[\n\r|]', ' ', 'g');
		END;
	END IF;
	BEGIN
		IF q ~* '^\s*SELECT' THEN
			EXECUTE q INTO r;
		ELSE
			EXECUTE q;
		END IF;
		RAISE EXCEPTION 'sweep: roll back' USING ERRCODE = 'SWEEP', DETAIL = coalesce(r, '<NULL>');
	EXCEPTION
		WHEN query_canceled THEN
			RETURN id || '|timeout';
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL,
				h = PG_EXCEPTION_HINT, c = PG_EXCEPTION_CONTEXT;
			IF st = 'SWEEP' THEN
				RETURN id || '|ok|' || left(d, 100);
			END IF;
			RETURN concat_ws('|', id, 'error', st, octet_length(m) + octet_length(d), octet_length(h),
							 octet_length(c) - octet_length(q),
							 regexp_replace(left(m, 160) || CASE WHEN d <> '' THEN ' DETAIL: ' || left(d, 120) ELSE '' END,
											'[\n\r|]', ' ', 'g'));
	END;
END
$f$;
});

$node->safe_psql(
	'postgres', q{
SET client_min_messages = warning;
SET ROLE sweep_other;
CREATE TABLE sweep_other_points AS
SELECT i AS id, ARRAY[sin(i)::real, cos(i)::real, sin(2 * i)::real, cos(3 * i)::real] AS x, i % 3 AS label
  FROM generate_series(1, 48) i;
SELECT pgdl.pack('sweep_other_points', 'x', 'label', 'sweep_other_packed', buffer_rows => 16, partitions => 2);
SELECT pgdl.add_architecture('sweep_other_arch', '{"input": [4], "layers": [{"type": "dense", "units": 3}]}');
SELECT pgdl.fit('sweep_other_packed', 'sweep_other_arch', '{"lr": 0.1}', 1, name => 'sweep_other_model');
SELECT pgdl.grid_search('sweep_other_set', ARRAY['sweep_other_arch'], '{"lr": [0.1]}');
});

$node->safe_psql(
	'postgres', qq{
SET client_min_messages = warning;
SET ROLE sweeper;
CREATE TABLE sweep_points AS
SELECT i AS id, ARRAY[sin(i)::real, cos(i)::real, sin(2 * i)::real, cos(3 * i)::real] AS x, i % 3 AS label
  FROM generate_series(1, 64) i;
CREATE TABLE sweep_forged_table AS SELECT * FROM sweep_points;
-- a cursor for pgdl.predict_batch(model, cursor refcursor, ...), open until the statement's transaction ends
CREATE FUNCTION sweep_open_cursor() RETURNS refcursor LANGUAGE plpgsql AS
\$\$ DECLARE c refcursor; BEGIN OPEN c FOR SELECT id, x FROM sweep_points; RETURN c; END \$\$;
SELECT pgdl.pack('sweep_points', 'x', 'label', 'sweep_packed', buffer_rows => 16, partitions => 2);
SELECT pgdl.pack('sweep_points', 'x', 'label', 'sweep_valid', buffer_rows => 32, partitions => 1,
				 reference => 'sweep_packed');
SELECT pgdl.add_architecture('sweep_arch', $spec_sql);
SELECT pgdl.fit('sweep_packed', 'sweep_arch', '{"lr": 0.1, "batch_size": 8}', 1, 'sweep_valid', name => 'sweep_model');
SELECT pgdl.grid_search('sweep_set', ARRAY['sweep_arch'], '{"lr": [0.1, 0.05], "batch_size": 8}');
-- pgdl.automl_search's pool (<prefix>_pool)
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'sweep_search_pool', architecture, config FROM pgdl.configs WHERE set_name = 'sweep_set';
SELECT pgdl.grid_search('sweep_heads', '{}',
	'{"base_model": "sweep_model", "freeze": 3, "head": [[{"type": "dense", "units": 3}]], "batch_size": 8}');
SELECT count(*) FROM pgdl.fit_multiple('sweep_packed', 'sweep_set', 1, 'sweep_valid', workers => 2);
SELECT count(*) FROM pgdl.fit_multiple('sweep_packed', 'sweep_heads', 1, 'sweep_valid', workers => 2,
									   feature_cache => 'on');
-- deployments of sweep_set's two models (sweep_model is deleted as a base model): one to use and grant,
-- one with an earlier model to roll back to, one to drop
CREATE TEMP TABLE sweep_set_models AS
SELECT m.id FROM pgdl.models m JOIN pgdl.runs r ON r.id = m.run
 WHERE r.kind = 'fit_multiple' AND m.name IS NULL AND m.parent IS NULL ORDER BY m.id LIMIT 2;
SELECT pgdl.deploy('sweep_deployment', (SELECT min(id) FROM sweep_set_models));
SELECT pgdl.deploy('sweep_dep_rollback', (SELECT min(id) FROM sweep_set_models));
SELECT pgdl.deploy('sweep_dep_rollback', (SELECT max(id) FROM sweep_set_models));
SELECT pgdl.deploy('sweep_dep_drop', (SELECT min(id) FROM sweep_set_models));

-- valid values the calls refer to
CREATE TABLE sweep_fix AS
SELECT m.id AS model_id, m.weights AS blob,
	   pgdl.init_model('{"input": [7], "layers": [{"type": "dense", "units": 2}]}') AS other_blob,
	   (SELECT array_agg(v ORDER BY w.i, u.j)
		  FROM pgdl.model_weights(m.weights) WITH ORDINALITY w(layer, name, shape, vals, i),
			   unnest(w.vals) WITH ORDINALITY u(v, j) WHERE w.name NOT LIKE 'running_%') AS params,
	   (SELECT array_agg(v ORDER BY w.i, u.j)
		  FROM pgdl.model_weights(m.weights) WITH ORDINALITY w(layer, name, shape, vals, i),
			   unnest(w.vals) WITH ORDINALITY u(v, j) WHERE w.name LIKE 'running_%') AS buffers,
	   pgdl.prefix_hash(m.id, 3) AS hash,
	   (SELECT f.view FROM pgdl.feature_cache f ORDER BY f.id LIMIT 1) AS cache,
	   0::oid AS dropped,
	   (SELECT d.id FROM pgdl.datasets d WHERE d.packed = 'sweep_packed'::regclass) AS dataset
  FROM pgdl.models m WHERE m.name = 'sweep_model';
CREATE TABLE sweep_dropped ();
UPDATE sweep_fix SET dropped = 'sweep_dropped'::regclass;
DROP TABLE sweep_dropped;
CREATE TABLE sweep_runs (label text PRIMARY KEY, id bigint);
});

# The ids of another role's rows, which row-level security hides from the
# sweeping role: a superuser writes them down for it.
$node->safe_psql(
	'postgres', q{
ALTER TABLE sweep_fix ADD other_model bigint, ADD other_run bigint, ADD other_dataset bigint;
UPDATE sweep_fix SET other_model = (SELECT id FROM pgdl.models WHERE name = 'sweep_other_model'),
	other_run = (SELECT id FROM pgdl.runs WHERE owner = 'sweep_other'::regrole ORDER BY id LIMIT 1),
	other_dataset = (SELECT id FROM pgdl.datasets WHERE packed = 'sweep_other_packed'::regclass);
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM sweep_fix WHERE num_nulls(other_model, other_run, other_dataset) = 0'),
	'1', "another role's model, run and dataset are in place");

# Forged catalog rows, written by the sweeping role where the catalog lets it and
# by a superuser where it does not.
my $forge = q{
SET client_min_messages = warning;
DO $forge$
DECLARE
	base jsonb := '{"eta": 0, "set": "sweep_set", "workers": 2, "strategy": "all", "feature_cache": "auto"}';
	mine bigint := (SELECT dataset FROM sweep_fix);
	theirs bigint := (SELECT other_dataset FROM sweep_fix);
	c record;
	run_id bigint;
BEGIN
	FOR c IN SELECT * FROM (VALUES
			('cancelled', 'fit_multiple', mine, '{}'::jsonb, 1), ('set 123', 'fit_multiple', mine, '{"set": 123}', 1),
			('eta "x"', 'fit_multiple', mine, '{"eta": "x"}', 1), ('workers "x"', 'fit_multiple', mine, '{"workers": "x"}', 1),
			('strategy 1', 'fit_multiple', mine, '{"strategy": 1}', 1),
			('name_prefix 5', 'fit_multiple', mine, '{"name_prefix": 5}', 1),
			('feature_cache []', 'fit_multiple', mine, '{"feature_cache": []}', 1),
			('eta 1e300', 'fit_multiple', mine, '{"eta": 1e300}', 1), ('workers -1', 'fit_multiple', mine, '{"workers": -1}', 1),
			('set of another role', 'fit_multiple', mine, '{"set": "sweep_other_set"}', 1),
			('no such set', 'fit_multiple', mine, '{"set": "no_such_set"}', 1),
			('epochs -1', 'fit_multiple', mine, '{}', -1), ('epochs INT_MAX', 'fit_multiple', mine, '{}', 2147483647),
			('a pgdl.fit run', 'fit', mine, '{}', 1),
			('dataset of another role', 'fit_multiple', theirs, '{}', 1),
			('config []', 'fit_multiple', mine, NULL, 1)) v(label, kind, dataset, patch, epochs)
	LOOP
		INSERT INTO pgdl.runs (kind, dataset, config, epochs, status)
		VALUES (c.kind, c.dataset, coalesce(base || c.patch, '[]'), c.epochs, 'cancelled') RETURNING id INTO run_id;
		INSERT INTO sweep_runs VALUES (c.label, run_id);
	END LOOP;
END
$forge$;
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
						   normalization, n_rows, n_buffers, buffer_rows, partitions, seed)
VALUES ('sweep_forged_table', 'sweep_points', 'x', 'label', 'classification', 4, 1, '{a}', 'integer',
		'{"mean": "x", "std": 5}', 64, 4, 16, 100000, 42);
INSERT INTO pgdl.models (name, spec, weights, dataset)
SELECT 'sweep_forged_truncated', m.spec, substring(m.weights for length(m.weights) / 2), m.dataset
  FROM pgdl.models m WHERE m.name = 'sweep_model'
UNION ALL
SELECT 'sweep_forged_random', m.spec, decode(repeat(md5('sweep'), 16), 'hex'), m.dataset
  FROM pgdl.models m WHERE m.name = 'sweep_model'
UNION ALL
SELECT 'sweep_forged_spec', '{"input": "x"}', m.weights, m.dataset FROM pgdl.models m WHERE m.name = 'sweep_model'
UNION ALL
SELECT 'sweep_forged_shape', m.spec, f.other_blob, m.dataset FROM pgdl.models m, sweep_fix f WHERE m.name = 'sweep_model'
UNION ALL
SELECT 'sweep_forged_dataset', m.spec, m.weights, d.id
  FROM pgdl.models m, pgdl.datasets d WHERE m.name = 'sweep_model' AND d.packed = 'sweep_forged_table'::regclass;
INSERT INTO pgdl.architectures (name, spec) VALUES ('sweep_forged_arch', '{"input": [4], "layers": 5}');
};
# models_validate and architectures_validate refuse the forged models and architecture when written, and
# runs_references a run of another role's dataset: the sweeping role writes them with those triggers
# disabled, as rows written before pgdl 0.7.0 would be
my $triggers = 'ALTER TABLE pgdl.models %1$s TRIGGER models_validate; '
  . 'ALTER TABLE pgdl.architectures %1$s TRIGGER architectures_validate; '
  . 'ALTER TABLE pgdl.runs %1$s TRIGGER runs_references;';
my ($forge_ret, $forge_out, $forge_err) = $node->psql('postgres',
	'BEGIN; ' . sprintf($triggers, 'DISABLE') . " SET ROLE sweeper; $forge RESET ROLE; " . sprintf($triggers, 'ENABLE')
	  . ' COMMIT;',
	on_error_stop => 1);
if ($forge_ret != 0)
{
	note("the sweeping role may not forge catalog rows ($forge_err); a superuser forges them");
	$node->safe_psql('postgres',
		'BEGIN; ' . sprintf($triggers, 'DISABLE') . " $forge " . sprintf($triggers, 'ENABLE') . ' COMMIT;');
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM sweep_runs'), '16', 'the forged runs are in place');

# Another role forges the acl of models of its own named as the sweeping role's:
# no acl it may write breaks anyone else's reads of pgdl.models (their row-level
# security reads the acl of every row they scan).
$node->safe_psql(
	'postgres', q{
SET ROLE sweep_other;
INSERT INTO pgdl.models (name, spec, weights, acl)
SELECT a.name, m.spec, m.weights, a.acl
  FROM pgdl.models m,
	   (VALUES ('sweep_model', '{}'::aclitem[]), ('sweep_forged_truncated', ARRAY[NULL::aclitem]),
			   ('sweep_forged_random', array_fill(makeaclitem(0, 'sweep_other'::regrole, 'USAGE', false), ARRAY[2, 2])))
	   a(name, acl)
 WHERE m.name = 'sweep_other_model';
});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pgdl.models WHERE owner = 'sweep_other'::regrole}),
	'4', "another role's models with forged acls are in place");
{
	my ($ret, $out, $err) = $node->psql('postgres',
		q{SET ROLE sweeper; SELECT count(*) = count(*) FILTER (WHERE owner = 'sweeper'::regrole) FROM pgdl.models});
	is($out, 't', "the sweeping role reads pgdl.models (its own rows) whatever acl another role wrote")
	  or diag($err);
}

# ---------------------------------------------------------------------------
# Several servers: a loopback node (database sweep_node of this server, reached
# through the postgres_fdw server sweep_loop) and servers wrong in each way a
# DBA can get one wrong: another wrapper, no user mapping, no USAGE, no
# password where one is required, no pgdl on the node, a port nobody listens
# on, and a listener that never answers (both with connect_timeout 2).  On the
# node, packed tables of its own rows for attach_partitions: one packed with
# the coordinator's dataset as reference (the valid one), one of other
# classes, another role's, and forged ones.  On the coordinator, a packed
# table distributed to the node, one whose node went away, and one with
# partitions both here and on the node.
# ---------------------------------------------------------------------------
my $host = $node->host;
my $port = $node->port;
my $down_port = PostgreSQL::Test::Cluster::get_free_port();
my $silent = IO::Socket::INET->new(Listen => 1, LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp')
  or die "cannot listen on 127.0.0.1: $!";
my $silent_port = $silent->sockport;
my $loop_options = "host '$host', port '$port', dbname 'sweep_node'";
my $mapping = q{OPTIONS (user 'sweeper', password_required 'false')};

$node->safe_psql(
	'postgres', qq{
SET client_min_messages = warning;
CREATE EXTENSION postgres_fdw;
CREATE DATABASE sweep_node;
CREATE DATABASE sweep_bare;
CREATE FOREIGN DATA WRAPPER sweep_fdw;
CREATE SERVER sweep_wrong FOREIGN DATA WRAPPER sweep_fdw;
CREATE SERVER sweep_loop FOREIGN DATA WRAPPER postgres_fdw OPTIONS ($loop_options);
-- the same database under a second name: pgdl.add_node's new server (its copies are the node's own tables)
CREATE SERVER sweep_loop_alias FOREIGN DATA WRAPPER postgres_fdw OPTIONS ($loop_options);
CREATE SERVER sweep_gone FOREIGN DATA WRAPPER postgres_fdw OPTIONS ($loop_options);
CREATE SERVER sweep_unmapped FOREIGN DATA WRAPPER postgres_fdw OPTIONS ($loop_options);
CREATE SERVER sweep_no_usage FOREIGN DATA WRAPPER postgres_fdw OPTIONS ($loop_options);
CREATE SERVER sweep_password FOREIGN DATA WRAPPER postgres_fdw OPTIONS ($loop_options);
CREATE SERVER sweep_bare FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'sweep_bare');
CREATE SERVER sweep_down FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$down_port', dbname 'sweep_node', connect_timeout '2');
CREATE SERVER sweep_silent FOREIGN DATA WRAPPER postgres_fdw
	OPTIONS (host '127.0.0.1', port '$silent_port', dbname 'sweep_node', connect_timeout '2');
GRANT USAGE ON FOREIGN SERVER sweep_wrong, sweep_loop, sweep_loop_alias, sweep_gone, sweep_unmapped, sweep_password, sweep_bare,
	sweep_down, sweep_silent TO sweeper;
CREATE USER MAPPING FOR sweeper SERVER sweep_wrong;
CREATE USER MAPPING FOR sweeper SERVER sweep_loop $mapping;
CREATE USER MAPPING FOR sweeper SERVER sweep_loop_alias $mapping;
CREATE USER MAPPING FOR sweeper SERVER sweep_gone $mapping;
CREATE USER MAPPING FOR sweeper SERVER sweep_no_usage $mapping;
CREATE USER MAPPING FOR sweeper SERVER sweep_password OPTIONS (user 'sweeper');
CREATE USER MAPPING FOR sweeper SERVER sweep_bare $mapping;
CREATE USER MAPPING FOR sweeper SERVER sweep_down $mapping;
CREATE USER MAPPING FOR sweeper SERVER sweep_silent $mapping;
});

my $description = $node->safe_psql('postgres', q{SELECT pgdl.export_dataset('sweep_packed')::text});
my $description_sql = sql_literal($description) . '::jsonb';
my $node_points = q{SELECT i AS id, ARRAY[sin(i)::real, cos(i)::real, sin(2 * i)::real, cos(3 * i)::real] AS x,
	i % 3 AS label FROM generate_series(101, 148) i};
$node->safe_psql(
	'sweep_node', qq{
SET client_min_messages = warning;
CREATE EXTENSION pgdl;
GRANT CREATE ON SCHEMA public TO sweeper, sweep_other;
SET ROLE sweeper;
CREATE TABLE sweep_node_points AS $node_points;
CREATE TABLE sweep_node_pairs AS SELECT id, x, label % 2 AS label FROM sweep_node_points;
SELECT pgdl.import_dataset($description_sql, 'sweep_ref');
SELECT pgdl.pack('sweep_node_points', 'x', 'label', 'sweep_site', buffer_rows => 16, partitions => 2,
				 reference => 'sweep_ref');
SELECT pgdl.pack('sweep_node_pairs', 'x', 'label', 'sweep_site_pairs', buffer_rows => 16, partitions => 2);
CREATE TABLE sweep_site_huge AS SELECT * FROM sweep_site;
CREATE TABLE sweep_site_none AS SELECT * FROM sweep_site;
CREATE TABLE sweep_site_negative AS SELECT * FROM sweep_site;
SET ROLE sweep_other;
CREATE TABLE sweep_other_node_points AS $node_points;
SELECT pgdl.import_dataset($description_sql, 'sweep_other_ref');
SELECT pgdl.pack('sweep_other_node_points', 'x', 'label', 'sweep_other_site', buffer_rows => 16, partitions => 2,
				 reference => 'sweep_other_ref');
RESET ROLE;
-- a node's datasets forged by hand: more partitions than a packed table may have, none, fewer than none
INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
						   normalization, n_rows, n_buffers, buffer_rows, partitions, seed, owner)
SELECT f.packed, d.source, d.features, d.label, d.task, d.n_features, d.n_targets, d.classes, d.label_type,
	   d.normalization, d.n_rows, d.n_buffers, d.buffer_rows, f.partitions, d.seed, d.owner
  FROM pgdl.datasets d,
	   (VALUES ('sweep_site_huge'::regclass, 2000), ('sweep_site_none', 0), ('sweep_site_negative', -1)) f(packed, partitions)
 WHERE d.packed = 'sweep_site'::regclass;
});

$node->safe_psql(
	'postgres', q{
SET client_min_messages = warning;
SET ROLE sweeper;
SELECT pgdl.pack('sweep_points', 'x', 'label', 'sweep_dist', buffer_rows => 16, partitions => 2,
				 reference => 'sweep_packed');
SELECT pgdl.distribute('sweep_dist', ARRAY['sweep_loop']);
SELECT pgdl.pack('sweep_points', 'x', 'label', 'sweep_gone_packed', buffer_rows => 16, partitions => 2,
				 reference => 'sweep_packed');
SELECT pgdl.distribute('sweep_gone_packed', ARRAY['sweep_gone']);
SELECT pgdl.pack('sweep_points', 'x', 'label', 'sweep_joined', buffer_rows => 16, partitions => 2,
				 reference => 'sweep_packed');
SELECT pgdl.attach_partitions('sweep_joined', 'sweep_loop', 'sweep_site');
CREATE TABLE sweep_taken_p0 ();
});
$node->safe_psql('postgres',
	"ALTER SERVER sweep_gone OPTIONS (SET host '127.0.0.1', SET port '$down_port', ADD connect_timeout '2')");
is( $node->safe_psql(
		'postgres', q{SET ROLE sweeper;
SELECT string_agg(c.relname || ':' || c.relkind::text, ' ' ORDER BY c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent IN ('sweep_dist'::regclass, 'sweep_gone_packed'::regclass, 'sweep_joined'::regclass)}),
	'sweep_dist_p0:f sweep_dist_p1:f sweep_gone_packed_p0:f sweep_gone_packed_p1:f sweep_joined_p0:r sweep_joined_p1:r sweep_joined_p2:f sweep_joined_p3:f',
	'packed tables distributed to the node, on a node gone, and partly attached are in place');
# What the attached partitions read: the node's rows, numbered as the coordinator's partitions 2 and 3.
my $attached_rows = q{SET ROLE sweeper;
SELECT string_agg(part || ':' || buffer_id || ':' || md5(x::text), ',' ORDER BY part, buffer_id) FROM %s};
my $node_site_rows = $node->safe_psql('sweep_node', sprintf($attached_rows, '(SELECT part + 2 AS part, buffer_id, x FROM sweep_site) s'));
is($node->safe_psql('postgres', sprintf($attached_rows, 'sweep_joined WHERE part >= 2')),
	$node_site_rows, "the attached partitions 2 and 3 read the node's partitions 0 and 1");
# The node's table attached to another packed table, as its partitions 1 and 2 (the node's work
# commits, the coordinator's is rolled back): this one's still read what they read.
$node->safe_psql('postgres',
	q{SET client_min_messages = warning; SET ROLE sweeper;
BEGIN; SELECT pgdl.attach_partitions('sweep_valid', 'sweep_loop', 'sweep_site'); ROLLBACK;});
is($node->safe_psql('postgres', sprintf($attached_rows, 'sweep_joined WHERE part >= 2')),
	$node_site_rows, "the node's table attached elsewhere too, the attached partitions 2 and 3 read the same rows");

# ---------------------------------------------------------------------------
# Values: the valid one of each argument, and the hostile ones of each type.
# ---------------------------------------------------------------------------
my $model_id = '(SELECT model_id FROM sweep_fix)';
my $blob     = '(SELECT blob FROM sweep_fix)';
my $x_sql    = q{'{0.1,0.2,0.3,0.4}'};
my $model_id_array = '(SELECT ARRAY[model_id] FROM sweep_fix)';

# by "function.argument", "argument:type" or "argument"
my %VALID = (
	'spec'                         => $spec_sql,
	'config:jsonb'                 => jsonb_sql($CONFIG),
	'params:jsonb'                 => jsonb_sql($GRID),
	'params:real[]'                => '(SELECT params FROM sweep_fix)',
	'buffers'                      => '(SELECT buffers FROM sweep_fix)',
	'space'                        => jsonb_sql($SPACE),
	'add_architecture.name'        => q{'sweep_new_arch'},
	'estimate.examples'            => '60000',
	'calibrate.seconds'            => '1',
	'calibrate.workers'            => '1',
	'fit.name'                     => q{'sweep_fit_model'},
	'source'                       => q{'sweep_packed'},
	'pack.source'                  => q{'sweep_points'},
	'predict_batch.source'         => q{'sweep_points'},
	'predict_batch_rows.source'    => q{'sweep_points'},
	# evaluation over raw rows: the rows sweep_packed was packed from
	'evaluate.source'              => q{'sweep_points'},
	'metrics.source'               => q{'sweep_points'},
	'confusion_matrix.source'      => q{'sweep_points'},
	'roc_curve.source'             => q{'sweep_points'},
	'feature_importance.source'    => q{'sweep_points'},
	# explanations (sql/parts/53_explain.sql)
	'target_class'                 => q{'1'},				# one of sweep_points' three classes
	'baseline'                     => q{'{0,0,0,0}'},
	'steps'                        => '8',
	'metric'                       => q{'accuracy'},
	'repeats'                      => '2',
	'top_k'                        => '2',
	'positive'                     => q{'1'},				# one of sweep_points' three classes
	'source_kind'                  => q{'text'},
	'cursor'                       => 'sweep_open_cursor()',
	'label_type'                   => 'NULL::integer',
	'features'                     => q{'x'},
	'label'                        => q{'label'},
	'output'                       => q{'sweep_out'},
	'buffer_rows'                  => '16',
	'partitions'                   => '2',
	'seed'                         => '42',
	'scale'                        => 'NULL',
	'standardize'                  => 'false',
	'nulls'                        => q{'error'},
	'reference'                    => 'NULL',
	'categorical'                  => 'NULL',
	'max_categories'               => '10000',
	'categories'                   => q{'{}'},
	'sequence'                     => 'NULL',
	'max_length'                   => 'NULL',
	'standardize_target'           => 'false',
	'pack.weight'                  => 'NULL',
	# preprocessing that travels with the model: missing values imputed, min-max scaling, no one-hot
	'impute'                       => q{'mean'},
	'impute_value'                 => 'NULL',
	'scaling'                      => q{'minmax'},
	'one_hot'                      => 'NULL',
	'split.source'                 => q{'sweep_points'},
	'output_prefix'                => q{'sweep_split'},
	'split.validation'             => '0.2',
	'split.test'                   => '0.1',
	'stratify'                     => 'NULL',
	'sequences'                    => q{'[]'},
	'x'                            => $x_sql,
	'train.x'                      => 'x',    # columns of the packed table
	'train.y'                      => 'y',
	'train.n'                      => 'n',
	'train.model'                  => $blob,
	'cache_features.n'             => '1',
	'model:bigint'                 => $model_id,
	'model:text'                   => q{'sweep_model'},
	'model:bytea'                  => $blob,
	'architecture:text'            => q{'sweep_arch'},
	'architectures'                => q{ARRAY['sweep_arch']},
	'epochs'                       => '1',
	'validation'                   => q{'sweep_valid'},
	'id_column'                    => q{'id'},
	'features_column'              => q{'x'},
	'batch_size'                   => '16',
	'packed'                       => q{'sweep_packed'},
	'set_name'                     => q{'sweep_new_set'},
	'random_search.n'              => '3',
	# Bayesian search (sql/parts/62_tpe_search.sql): one batch of two configurations, one run per call (its
	# later batches are the unit, regress and 016 tests')
	'trials'                       => '2',
	'batch'                        => '2',
	'tpe_search.deploy'            => q{'sweep_tpe_deployment'},
	'configs'                      => q{'sweep_set'},
	'explain_fit_multiple.configs' => q{'sweep_heads'},
	'workers'                      => '2',
	'strategy'                     => q{'all'},
	'eta'                          => '3',
	'name_prefix'                  => q{'sweep_mm'},
	'feature_cache'                => q{'auto'},
	'priority'                     => '5',
	'rank_by'                      => q{'loss'},
	'holdout'                      => 'NULL',    # with 'validation': each alone is valid
	'folds'                        => 'false',
	'run'                          => q{(SELECT id FROM sweep_runs WHERE label = 'cancelled')},
	'layers'                       => '3',
	'layer'                        => '3',
	'base'                         => $model_id,
	'from_layer'                   => '0',
	'to_layer'                     => '3',
	'base_hash'                    => '(SELECT hash FROM sweep_fix)',
	'cache'                        => '(SELECT cache FROM sweep_fix)',
	'unused_for'                   => q{'7 days'},
	# ownership and sharing (sql/parts/70_owners.sql)
	'owner'                        => q{'sweeper'},
	'acl'                          => q{ARRAY[makeaclitem('sweeper'::regrole, 'sweep_other'::regrole, 'USAGE', false)]},
	'kind'                         => q{'model'},
	'resolve_name.name'            => q{'sweep_model'},
	'ids'                          => $model_id_array,
	'owners'                       => q{ARRAY['sweeper'::regrole]},
	'hint'                         => q{'Give the model''s id.'},
	'model_id.name'                => q{'sweep_model'},
	'architecture_id.name'         => q{'sweep_arch'},
	'config_set_owner.set_name'    => q{'sweep_set'},
	'model_label'                  => q{'sweep_model'},
	'role'                         => q{'sweep_other'},
	'shared'                       => 'true',
	# deployments (sql/parts/77_deployments.sql)
	'deploy.name'                  => q{'sweep_dep_new'},
	'fit_multiple.deploy'          => q{'sweep_mop_deployment'},
	'rollback.name'                => q{'sweep_dep_rollback'},
	'drop_deployment.name'         => q{'sweep_dep_drop'},
	'grant_deployment.name'        => q{'sweep_deployment'},
	'revoke_deployment.name'       => q{'sweep_deployment'},
	'set_deployment_grant.name'    => q{'sweep_deployment'},
	'deployment_for_update.name'   => q{'sweep_deployment'},
	'deployment_label.name'        => q{'sweep_deployment'},
	'deployment'                   => q{(SELECT id FROM pgdl.deployment_names WHERE name = 'sweep_deployment')},
	# the extension's life (sql/parts/75_lifecycle.sql)
	'cleanup_checkpoints.keep'     => '1',
	'delete_rows.catalog'          => q{'pgdl.models'},
	'train_partitions.prefix'      => 'NULL',
	'node_feature_cache.prefix'    => $blob,
	'node_feature_cache.build'     => 'false',
	# several servers (sql/parts/80_cluster.sql)
	'parts'                        => 'ARRAY[0]',
	'workers_per_node'             => '1',
	'servers'                      => q{ARRAY['sweep_loop']},
	'replicas'                     => '1',
	'server'                       => q{'sweep_loop'},
	# add_node moves one of sweep_dist's two partitions to the same database under another server name
	'add_node.packed'              => q{'sweep_dist'},
	'add_node.server'              => q{'sweep_loop_alias'},
	'remote_packed'                => q{'sweep_site'},
	'fit_federated.source'         => q{'sweep_joined'},
	'rounds'                       => '1',
	'local_epochs'                 => '1',
	'fit_federated.name'           => q{'sweep_fed_model'},
	'fit_federated.min_sites'      => '1',
	'fit_federated.clip'           => '1',
	'fit_federated.noise_multiplier' => '1',
	'fit_federated.delta'          => '1e-5',
	'models'                       => "ARRAY[$blob, $blob]",
	'examples'                     => 'ARRAY[10, 30]::bigint[]',
	'description'                  => $description_sql,
	'import_dataset.name'          => q{'sweep_imported'},
	'export_onnx.with_normalization' => 'true',
	# AutoML (sql/parts/78_automl.sql); pgdl.automl is a procedure that commits, which sweep_try's
	# subtransaction refuses (2D000): its checks before the commit are what the sweep reaches
	'automl.source'                => q{'sweep_points'},
	'automl.budget'                => q{'3 seconds'},
	'automl.name'                  => q{'sweep_automl_dep'},
	'automl.validation'            => '0.2',
	'automl.output_prefix'         => q{'sweep_automl'},
	'automl.leaderboard'           => 'NULL',    # INOUT: what the procedure returns
	'automl.model'                 => 'NULL',
	'automl.deployed'              => 'NULL',
	'automl_columns.source'        => q{'sweep_points'},
	'automl_architectures.image_side' => 'NULL',
	'width'                        => '64',
	'depth'                        => '2',
	'dropout'                      => 'true',
	'filters'                      => '16',
	'blocks'                       => '2',
	'side'                         => '8',
	'automl_input_branch.name'     => q{'sweep_in'},
	'start'                        => '0',
	'seq_length'                   => '3',
	'vocab'                        => '5',
	'seq_kind'                     => q{'gru'},
	'automl_round_of.prefix'       => q{'sweep_p'},
	'automl_round_of.set_name'     => q{'sweep_p_round1'},
	'automl_prefix.base'           => q{'sweep_prefix'},
	'automl_prepare.source'        => q{'sweep_points'},
	'automl_prepare.prefix'        => q{'sweep_prep'},
	'automl_prepare.validation'    => '0.2',
	'classification'               => 'true',
	'automl_round.train'           => q{'sweep_packed'},
	'pool'                         => q{'sweep_set'},
	'round_set'                    => q{'sweep_round_set'},
	'used'                         => '0',
	'k'                            => '2',
	'factor'                       => '1',
	'allowed'                      => '60',
	'automl_search.train'          => q{'sweep_packed'},
	'valid'                        => q{'sweep_valid'},
	'automl_search.prefix'         => q{'sweep_search'},
	'deadline'                     => q{clock_timestamp() + interval '2 seconds'},
	'automl_epochs.train'          => q{'sweep_packed'},
	'automl_pool.train'            => q{'sweep_packed'},
	'automl_pool.pool'             => q{'sweep_pool_new'},
	'automl_pool.image_side'       => 'NULL',
	'automl_check.source'          => q{'sweep_points'},
	'automl_check.name'            => q{'sweep_checked_dep'},
	'automl_check.validation'      => '0.2',
	'budget'                       => q{'3 seconds'},
	'time_limit'                   => q{'1 hour'},
	'automl_leaderboard.prefix'    => q{'sweep_search'},
	'automl_leaderboard.name'      => q{'sweep_lb_dep'},
	'higher'                       => 'true',
	'retrain.name'                 => q{'sweep_deployment'},
	'retrain.source'               => q{'sweep_points'},
	'retrain.validation'           => '0.2',
	'warm_start'                   => 'true',
	'retrain.keep'                 => 'false',
	'deploy_if_better.name'        => q{'sweep_dib'},
	# ONNX import (sql/parts/52_onnx.sql): a Gemm of 4 features to 3 classes, as sweep_packed has, made by
	# onnx.helper (make_node('Gemm', ['x', 'W', 'B'], ['y'], transB=1), W = 0.1 * i, B = 0, opset 13)
	'import_onnx.name'             => q{'sweep_onnx_model'},
	'onnx'                         => q{'\\x0808120573776565703aae010a210a01780a01570a0142120179220447656d6d2a0d0a067472616e73421801a001021201672a3b080308041001223000000000cdcccc3dcdcc4c3e9a99993ecdcccc3e0000003f9a99193f3333333fcdcc4c3f6666663f0000803fcdcc8c3f4201572a1508031001220c0000000000000000000000004201425a180a017812130a110801120d0a07120562617463680a02080462180a017912130a110801120d0a07120562617463680a02080342040a00100d'::bytea},
	'import_onnx.dataset'          => q{'sweep_packed'},
	'import_onnx.loss'             => q{'cross_entropy'},
	# the model zoo (sql/parts/90_zoo.sql)
	'query:bigint'                 => $model_id,
	'query:text'                   => q{'sweep_model'},
	'query:jsonb'                  => $spec_sql,
	'similar_models.k'             => '3',
	'by'                           => q{'both'},);

sub blob_with_byte
{
	my ($offset) = @_;
	return "set_byte($blob, least($offset, length($blob) - 1), 255 - get_byte($blob, least($offset, length($blob) - 1)))";
}

my %HOSTILE = (
	'text' => [
		[ q{''}           => q{''} ],
		[ '10 MB'         => "repeat('n', $TEN_MB)" ],
		[ '200 bytes'     => q{repeat('l', 200)} ],
		[ q{with '}       => q{'sweep''s'} ],
		[ q{with "}       => q{'sweep"s'} ],
		[ q{with \\}      => q{'sweep\s'} ],
		[ q{with ' " \\}  => q{'sw"e''e\p'} ],
		[ 'format string' => q{'%s%n%d%%'} ],
		[ 'one space'     => q{' '} ],
	],
	'integer' => [
		[ 0         => '0' ],
		[ -1        => '-1' ],
		[ 'INT_MAX' => '2147483647' ],
		[ 'INT_MIN' => '-2147483648' ],
	],
	'bigint' => [
		[ 0           => '0' ],
		[ -1          => '-1' ],
		[ 'INT64_MAX' => '9223372036854775807' ],
		[ 'INT64_MIN' => '-9223372036854775808' ],
	],
	'double precision' => [
		[ NaN         => q{'NaN'} ],
		[ Infinity    => q{'Infinity'} ],
		[ '-Infinity' => q{'-Infinity'} ],
		[ 0           => '0' ],
		[ -1          => '-1' ],
		[ '1e308'     => '1e308' ],
	],
	# pgdl.split's shares
	'real' => [
		[ NaN         => q{'NaN'} ],
		[ Infinity    => q{'Infinity'} ],
		[ '-Infinity' => q{'-Infinity'} ],
		[ 0           => '0' ],
		[ -1          => '-1' ],
		[ 1           => '1' ],
		[ '1e38'      => '1e38' ],
	],
	'boolean' => [ [ true => 'true' ] ],
	# automl_search's deadline
	'timestamp with time zone' => [
		[ infinity      => q{'infinity'} ],
		[ '-infinity'   => q{'-infinity'} ],
		[ 'the epoch'   => q{'epoch'} ],
		[ 'year 9999'   => q{'9999-01-01'} ],
	],
	'jsonb'   => [],    # generated from each argument's valid value: %JSON_VARIANTS
	'real[]'  => [
		[ '{}'             => q{'{}'} ],
		[ '3 values'       => q{'{0.1,0.2,0.3}'} ],
		[ '5 values'       => q{'{0.1,0.2,0.3,0.4,0.5}'} ],
		[ 'a NULL'         => q{'{0.1,NULL,0.3,0.4}'} ],
		[ '2-D'            => q{'{{0.1,0.2},{0.3,0.4}}'} ],
		[ 'NaN'            => q{'{NaN,0.2,0.3,0.4}'} ],
		[ 'infinities'     => q{'{Infinity,-Infinity,0.3,0.4}'} ],
		[ 'lower bound 0'  => q{'[0:3]={0.1,0.2,0.3,0.4}'} ],
		[ '10 MB'          => 'array_fill(0.5::real, ARRAY[2621440])' ],
	],
	# x of pgdl.predict and pgdl.predict_class: every array of numbers converts to it
	'double precision[]' => [
		[ '{}'             => q{'{}'} ],
		[ '3 values'       => q{'{0.1,0.2,0.3}'} ],
		[ '5 values'       => q{'{0.1,0.2,0.3,0.4,0.5}'} ],
		[ 'a NULL'         => q{'{0.1,NULL,0.3,0.4}'} ],
		[ '2-D'            => q{'{{0.1,0.2},{0.3,0.4}}'} ],
		[ 'NaN'            => q{'{NaN,0.2,0.3,0.4}'} ],
		[ 'infinities'     => q{'{Infinity,-Infinity,0.3,0.4}'} ],
		[ 'beyond real'    => q{'{1e300,-1e-300,0.3,0.4}'} ],
		[ 'numeric[]'      => q{'{1e38,0.2,0.3,0.4}'::numeric[]} ],
		[ 'bigint[]'       => q{ARRAY[9223372036854775807,0,0,0]} ],
		[ 'lower bound 0'  => q{'[0:3]={0.1,0.2,0.3,0.4}'} ],
		[ '10 MB'          => 'array_fill(0.5::float8, ARRAY[1310720])' ],
	],
	'bytea' => [
		[ 'empty'              => q{''} ],
		[ 'one byte'           => q{'\x00'} ],
		[ '64 random bytes'    => q{decode(repeat(md5('sweep'), 4), 'hex')} ],
		[ 'blob cut in half'   => "substring($blob for length($blob) / 2)" ],
		[ 'blob less a byte'   => "substring($blob for length($blob) - 1)" ],
		[ 'blob and a byte'    => "$blob || '\\x00'::bytea" ],
		(map { [ "blob with byte $_ flipped" => blob_with_byte($_) ] } (0, 4, 8, 12, 16, 24, 32, 48, 64, 100)),
		[ 'blob of 7 inputs'   => '(SELECT other_blob FROM sweep_fix)' ],
		[ '10 MB'              => "decode(repeat('5a', $TEN_MB), 'hex')" ],
	],
	# pgdl.predict_batch's cursor: none of these names an open cursor
	'refcursor' => [
		[ q{''}               => q{''} ],
		[ '200 bytes'         => q{repeat('c', 200)} ],
		[ q{with ' " \\}     => q{'sw"e''e\p'} ],
		[ 'a table name'      => q{'sweep_points'} ],
		[ 'format string'     => q{'%s%n%d%%'} ],
	],
	# label_type: only its type counts, and types that cannot read the labels fail clearly
	'anyelement' => [
		[ 'text'    => 'NULL::text' ],
		[ 'bigint'  => 'NULL::bigint' ],
		[ 'date'    => 'NULL::date' ],
		[ 'boolean' => 'NULL::boolean' ],
		[ 'real[]'  => 'NULL::real[]' ],
		[ 'jsonb'   => 'NULL::jsonb' ],
		[ 'bytea'   => 'NULL::bytea' ],
		[ 'a value' => '42' ],
	],
	'regclass' => [
		[ 'a table not packed'       => q{'sweep_points'} ],
		[ 'a partition'              => q{'sweep_packed_p0'} ],
		[ 'pg_class'                 => q{'pg_class'} ],
		[ 'a view'                   => q{'pg_stat_activity'} ],
		[ 'pgdl.models'              => q{'pgdl.models'} ],
		[ 'a dropped table'          => '(SELECT dropped FROM sweep_fix)::oid' ],
		[ 'oid 0'                    => '0::oid' ],
		[ "another role's table"     => q{'sweep_other_points'} ],
		[ "another role's packed"    => q{'sweep_other_packed'} ],
		[ 'a forged dataset'         => q{'sweep_forged_table'} ],
		[ 'a feature cache view'     => '(SELECT cache FROM sweep_fix)::oid' ],
		[ 'the validation set'       => q{'sweep_valid'} ],
		[ 'a distributed packed'     => q{'sweep_dist'} ],
		[ 'packed on a node gone'    => q{'sweep_gone_packed'} ],
		[ 'packed here and on a node' => q{'sweep_joined'} ],
		[ 'a foreign partition'      => q{'sweep_dist_p0'} ],
	],
	'integer[]' => [
		[ '{}'                 => q{'{}'} ],
		[ '{NULL}'             => q{'{NULL}'} ],
		[ '{0,NULL}'           => q{'{0,NULL}'} ],
		[ '{-1}'               => q{'{-1}'} ],
		[ '{1024}'             => q{'{1024}'} ],
		[ 'a partition the table lacks' => q{'{5}'} ],
		[ 'INT extremes'       => q{'{2147483647,-2147483648}'} ],
		[ 'a partition twice'  => q{'{0,0}'} ],
		[ '2-D'                => q{'{{0},{1}}'} ],
		[ 'lower bound 0'      => q{'[0:1]={0,1}'} ],
		[ '1024 partitions'    => 'array_fill(0, ARRAY[1024])' ],
		[ '1025 partitions'    => 'array_fill(0, ARRAY[1025])' ],
		[ '10 MB'              => 'array_fill(0, ARRAY[2621440])' ],
	],
	'bytea[]' => [
		[ '{}'                          => q{'{}'} ],
		[ '{NULL}'                      => 'ARRAY[NULL::bytea]' ],
		[ 'a model and NULL'            => "ARRAY[$blob, NULL]" ],
		[ 'a model and an empty one'    => "ARRAY[$blob, '']" ],
		[ 'a model and 64 random bytes' => "ARRAY[$blob, decode(repeat(md5('sweep'), 4), 'hex')]" ],
		[ 'a model and one cut in half' => "ARRAY[$blob, substring($blob for length($blob) / 2)]" ],
		[ 'a model and one with byte 16 flipped' => "ARRAY[$blob, " . blob_with_byte(16) . ']' ],
		[ 'models of different architectures' => "ARRAY[$blob, (SELECT other_blob FROM sweep_fix)]" ],
		[ 'a model and one without optimizer state' => "ARRAY[$blob, pgdl.init_model($spec_sql)]" ],
		[ 'a model and 10 MB'           => "ARRAY[$blob, decode(repeat('5a', $TEN_MB), 'hex')]" ],
		[ '2-D'                         => "ARRAY[[$blob], [$blob]]" ],
		[ '1000 models'                 => "array_fill($blob, ARRAY[1000])" ],
	],
	'text[]' => [
		[ '{}'                  => q{'{}'} ],
		[ '{NULL}'              => q{'{NULL}'} ],
		[ q{{''}}               => q{ARRAY['']} ],
		[ 'a 10 MB name'        => "ARRAY[repeat('a', $TEN_MB)]" ],
		[ 'an unknown name'     => q{ARRAY['no_such_arch']} ],
		[ 'a name twice'        => q{ARRAY['sweep_arch', 'sweep_arch']} ],
		[ '2-D'                 => q{'{{sweep_arch},{sweep_arch}}'} ],
		[ q{a name with ' " \\} => q{ARRAY['sw"e''e\p']} ],
		[ "another role's"      => q{ARRAY['sweep_other_arch']} ],
		[ 'a forged one'        => q{ARRAY['sweep_forged_arch']} ],
	],
	'interval' => [
		[ 0                 => q{'0'} ],
		[ '-100 years'      => q{'-100 years'} ],
		[ '178000000 years' => q{'178000000 years'} ],
		[ '1 microsecond'   => q{'1 microsecond'} ],    # below automl's budget of 1 second
	],
	'regrole' => [
		[ 'another role'        => q{'sweep_other'} ],
		[ 'a superuser'         => q{'postgres'} ],
		[ 'pgdl_admin'          => q{'pgdl_admin'} ],
		[ 'oid 0'               => '0::oid' ],
		[ 'a nonexistent role'  => '4000000000::oid' ],
	],
	'regrole[]' => [
		[ '{}'                 => q{'{}'} ],
		[ '{NULL}'             => q{ARRAY[NULL::regrole]} ],
		[ 'oid 0'              => q{ARRAY[0::oid::regrole]} ],
		[ 'a nonexistent role' => q{ARRAY[4000000000::oid::regrole]} ],
		[ 'another role'       => q{ARRAY['sweep_other'::regrole]} ],
		[ 'two roles'          => q{ARRAY['sweep_other', 'postgres']::regrole[]} ],
		[ '2-D'                => q{'{{sweeper},{sweep_other}}'} ],
		[ 'lower bound 0'      => q{'[0:0]={sweeper}'} ],
		[ '100000 roles'       => q{array_fill('sweep_other'::regrole, ARRAY[100000])} ],
	],
	'bigint[]' => [
		[ '{}'                    => q{'{}'} ],
		[ '{NULL}'                => q{'{NULL}'} ],
		[ '{0,-1}'                => q{'{0,-1}'} ],
		[ 'INT64 extremes'        => q{'{9223372036854775807,-9223372036854775808}'} ],
		[ '2-D'                   => q{'{{1},{2}}'} ],
		[ 'lower bound 0'         => q{'[0:1]={1,2}'} ],
		[ "another role's model"  => q{(SELECT ARRAY[other_model] FROM sweep_fix)} ],
		[ 'three ids'             => "ARRAY[1, 2] || $model_id_array" ],
		[ '100000 ids'            => q{array_fill(1::bigint, ARRAY[100000])} ],
	],
	'aclitem[]' => [
		[ '{}'                   => q{'{}'} ],
		[ '{NULL}'               => q{ARRAY[NULL::aclitem]} ],
		[ 'PUBLIC'               => q{ARRAY[makeaclitem(0, 'sweep_other'::regrole, 'USAGE', false)]} ],
		[ 'a nonexistent role'   => q{ARRAY[makeaclitem(4000000000::oid, 'sweep_other'::regrole, 'USAGE', false)]} ],
		[ 'another role'         => q{ARRAY[makeaclitem('sweep_other'::regrole, 'sweeper'::regrole, 'USAGE', false)]} ],
		[ 'grantable'            => q{ARRAY[makeaclitem('sweeper'::regrole, 'sweeper'::regrole, 'USAGE', true)]} ],
		[ '2-D'                  => q{array_fill(makeaclitem(0, 'sweeper'::regrole, 'USAGE', false), ARRAY[2, 2])} ],
		[ '100000 items'         => q{array_fill(makeaclitem('sweep_other'::regrole, 'sweeper'::regrole, 'USAGE', false), ARRAY[100000])} ],
	],);

# another role's model, and models whose rows were forged
my @hostile_models = qw(sweep_other_model sweep_forged_truncated sweep_forged_random sweep_forged_spec
  sweep_forged_shape sweep_forged_dataset);
# by id: another role's, which its row-level security hides, is written down in sweep_fix
my @hostile_model_ids = map {
	[ $_ => $_ eq 'sweep_other_model' ? '(SELECT other_model FROM sweep_fix)' : "(SELECT id FROM pgdl.models WHERE name = '$_')" ]
} @hostile_models;
# servers as pgdl.distribute and pgdl.attach_partitions name them
my @hostile_servers = (
	[ 'a server of another wrapper'        => q{'sweep_wrong'} ],
	[ 'a server without a user mapping'    => q{'sweep_unmapped'} ],
	[ 'a server without USAGE'             => q{'sweep_no_usage'} ],
	[ 'a mapping without password'         => q{'sweep_password'} ],
	[ 'a node without pgdl'                => q{'sweep_bare'} ],
	[ 'a node down'                        => q{'sweep_down'} ],
	[ 'a node that never answers'          => q{'sweep_silent'} ],
	[ 'a 64-byte name'                     => q{repeat('s', 64)} ],
);
my %EXTRA = (
	'model:text'   => [ map { [ $_ => sql_literal($_) ] } @hostile_models ],
	'model:bigint' => \@hostile_model_ids,
	'base:bigint'  => \@hostile_model_ids,
	'configs:text' => [
		[ "another role's set"   => q{'sweep_other_set'} ],
		[ 'transfer set'         => q{'sweep_heads'} ],
		[ 'the plain set'        => q{'sweep_set'} ],
		[ 'an architecture name' => q{'sweep_arch'} ],
	],
	'architecture:text' => [
		[ "another role's"   => q{'sweep_other_arch'} ],
		[ 'a forged spec'    => q{'sweep_forged_arch'} ],
	],
	'strategy:text'      => [ [ 'successive_halving' => q{'successive_halving'} ] ],
	# a buffer's worth (n examples) of hostile features and labels
	'train.x' => [
		[ 'n x 4 NaN'          => q{array_fill('NaN'::real, ARRAY[n * 4])} ],
		[ 'n x 4 Infinity'     => q{array_fill('Infinity'::real, ARRAY[n * 4])} ],
		[ 'n x 4 of 3e38'      => q{array_fill(3e38::real, ARRAY[n * 4])} ],
	],
	'train.y' => [
		[ 'class 7 of 3'  => q{array_fill(7::real, ARRAY[n])} ],
		[ 'class -1'      => q{array_fill(-1::real, ARRAY[n])} ],
		[ 'class 0.5'     => q{array_fill(0.5::real, ARRAY[n])} ],
		[ 'class NaN'     => q{array_fill('NaN'::real, ARRAY[n])} ],
		[ 'class 1e30'    => q{array_fill(1e30::real, ARRAY[n])} ],
	],
	'feature_cache:text' => [ [ on => q{'on'} ], [ off => q{'off'} ] ],
	'run:bigint'         => [],                # the forged runs, below
	# a role name, as grant_model takes it
	'role:text' => [
		[ 'public'               => q{'public'} ],
		[ 'PUBLIC'               => q{'PUBLIC'} ],
		[ 'a nonexistent role'   => q{'no_such_role'} ],
		[ 'itself'               => q{'sweeper'} ],
		[ 'a superuser'          => q{'postgres'} ],
		[ 'pgdl_admin'           => q{'pgdl_admin'} ],
		[ 'a nonexistent oid'    => q{'4000000000'} ],
		[ 'oid 0'                => q{'0'} ],
		[ 'a quoted name'        => q{'"sweep_other"'} ],
	],
	'kind:text' => [ [ 'architecture' => q{'architecture'} ] ],
	'resolve_name.name' => [ [ "another role's model" => q{'sweep_other_model'} ] ],
	'model_id.name'     => [ map { [ $_ => sql_literal($_) ] } @hostile_models ],
	'architecture_id.name' => [
		[ "another role's"   => q{'sweep_other_arch'} ],
		[ 'a forged spec'    => q{'sweep_forged_arch'} ],
	],
	'config_set_owner.set_name' => [ [ "another role's set" => q{'sweep_other_set'} ] ],
	# several servers
	'servers' => [
		(map { [ "$_->[0]" => "ARRAY[$_->[1]]" ] } @hostile_servers),
		[ 'the node and one down' => q{ARRAY['sweep_loop', 'sweep_down']} ],
		[ 'the node twice'        => q{ARRAY['sweep_loop', 'sweep_loop']} ],
		[ '65 servers'            => q{array_fill('sweep_loop'::text, ARRAY[65])} ],
	],
	'server' => \@hostile_servers,
	'remote_packed' => [
		[ 'a table not packed'               => q{'sweep_node_points'} ],
		[ 'schema-qualified'                 => q{'public.sweep_site'} ],
		[ 'the imported reference (empty)'   => q{'sweep_ref'} ],
		[ 'packed with other classes'        => q{'sweep_site_pairs'} ],
		[ "another role's packed"            => q{'sweep_other_site'} ],
		[ 'a partition'                      => q{'sweep_site_p0'} ],
		[ 'pg_class'                         => q{'pg_class'} ],
		[ 'a forged 2000 partitions'         => q{'sweep_site_huge'} ],
		[ 'a forged 0 partitions'            => q{'sweep_site_none'} ],
		[ 'a forged -1 partitions'           => q{'sweep_site_negative'} ],
		[ 'an injection'                     => q{'sweep_site; DROP TABLE sweep_site'} ],
		[ 'the coordinator\'s distributed'   => q{'sweep_dist'} ],
	],
	'examples:bigint[]' => [
		[ 'zero examples each'  => q{'{0,0}'} ],
		[ 'INT64_MAX each'      => q{'{9223372036854775807,9223372036854775807}'} ],
		[ 'a negative count'    => q{'{10,-1}'} ],
	],
	'description' => [
		(map { [ "without $_" => "$description_sql - '$_'" ] } qw(task n_features n_targets classes label_type normalization)),
		[ 'n_features 100000000'          => "jsonb_set($description_sql, '{n_features}', '100000000')" ],
		[ 'n_targets 0'                   => "jsonb_set($description_sql, '{n_targets}', '0')" ],
		[ 'label_type a composite type'   => "jsonb_set($description_sql, '{label_type}', '\"pg_class\"')" ],
		[ 'label_type an injection'       => "jsonb_set($description_sql, '{label_type}', '\"integer); DROP TABLE x; --\"')" ],
		[ 'task regression, with classes' => "jsonb_set($description_sql, '{task}', '\"regression\"')" ],
		[ 'classes of 100000 values' => "jsonb_set($description_sql, '{classes}', (SELECT jsonb_agg(i) FROM generate_series(1, 100000) i))" ],
		[ 'classes of objects and nulls'  => "jsonb_set($description_sql, '{classes}', '[{\"a\": 1}, null, [2]]')" ],
		[ 'normalization of 10 MB'        => "jsonb_set($description_sql, '{normalization}', jsonb_build_object('mean', repeat('m', $TEN_MB)))" ],
	],
	'import_dataset.name' => [
		[ 'a table that exists'                => q{'sweep_points'} ],
		[ 'a name whose partition exists'      => q{'sweep_taken'} ],
		[ '60 bytes'                           => q{repeat('n', 60)} ],
		[ '61 bytes'                           => q{repeat('n', 61)} ],
		[ 'schema-qualified'                   => q{'public.sweep_x'} ],
		[ 'a catalog name'                     => q{'pg_class'} ],
	],
	'fit_federated.name' => [ [ 'a model name taken' => q{'sweep_model'} ] ],
	'workers_per_node' => [ [ 65 => '65' ], [ 2 => '2' ] ],
	'holdout' => [ [ 'the largest integer' => '2147483647' ], [ 'the smallest integer' => '-2147483648' ] ],
	'folds'   => [ [ 'true' => 'true' ] ],
);

my @run_labels = split /\n/,
  $node->safe_psql('postgres', q{SELECT label FROM sweep_runs WHERE label <> 'cancelled' ORDER BY label});
$EXTRA{'run:bigint'} = [
	(map { [ "forged run: $_" => '(SELECT id FROM sweep_runs WHERE label = ' . sql_literal($_) . ')' ] } @run_labels),
	[ "another role's run" => '(SELECT other_run FROM sweep_fix)' ]
];

# ---------------------------------------------------------------------------
# jsonb: generic values, 10 MB ones, and each key of the valid value given a
# value of the wrong type (arrays: their first two elements).
# ---------------------------------------------------------------------------
sub is_number
{
	my ($v) = @_;
	my $flags = B::svref_2object(\$v)->FLAGS;
	return ($flags & (B::SVp_IOK | B::SVp_NOK)) && !($flags & B::SVp_POK);
}

sub clone_with
{
	my ($v, $path, $new) = @_;
	return $new unless @$path;
	my ($k, @rest) = @$path;
	if (ref $v eq 'HASH')
	{
		my %c = %$v;
		$c{$k} = clone_with($v->{$k}, \@rest, $new);
		return \%c;
	}
	my @c = @$v;
	$c[$k] = clone_with($v->[$k], \@rest, $new);
	return \@c;
}

sub json_variants
{
	my ($valid) = @_;
	my $valid_sql = jsonb_sql($valid);
	my @out = (
		[ '{}'              => q{'{}'} ],
		[ '[]'              => q{'[]'} ],
		[ 'null'            => q{'null'} ],
		[ '"x"'             => q{'"x"'} ],
		[ '1'               => q{'1'} ],
		[ '1000 deep'       => q{('{"a": ' || repeat('[', 1000) || repeat(']', 1000) || '}')} ],
		[ 'a 10 MB value'   => "$valid_sql || jsonb_build_object('sweep_pad', repeat('j', $TEN_MB))" ],
		[ 'a 10 MB key'     => "$valid_sql || jsonb_build_object(repeat('k', $TEN_MB), 1)" ],
		[ 'an unknown key'  => jsonb_sql({ %$valid, sweep_unknown => 1 }) ],
	);
	my $walk;
	$walk = sub {
		my ($v, $path) = @_;
		my $at = join('.', @$path);
		my @wrong;
		if (ref $v eq 'HASH')
		{
			@wrong = ([ '[]' => [] ], [ '"x"' => 'x' ], [ '{}' => {} ]);
		}
		elsif (ref $v eq 'ARRAY')
		{
			@wrong = ([ '{}' => {} ], [ '[]' => [] ], [ '[null]' => [undef] ], [ '"x"' => 'x' ]);
		}
		elsif (is_number($v))
		{
			@wrong = ([ '"x"' => 'x' ], [ -1 => -1 ], [ '1e300' => 1e300 ], [ '2147483648' => 2147483648 ],
				[ '0.5' => 0.5 ], [ 'null' => undef ]);
		}
		else
		{
			@wrong = ([ 5 => 5 ], [ '""' => '' ], [ '"no_such"' => 'no_such' ], [ 'null' => undef ]);
			push @out,
			  [ "$at: a 10 MB string" =>
				  "jsonb_set($valid_sql, '{" . join(',', @$path) . "}', to_jsonb(repeat('t', $TEN_MB)))" ];
		}
		push @out, [ "$at: $_->[0]" => jsonb_sql(clone_with($valid, $path, $_->[1])) ] for @wrong;
		if (ref $v eq 'HASH')
		{
			$walk->($v->{$_}, [ @$path, $_ ]) for sort keys %$v;
		}
		elsif (ref $v eq 'ARRAY')
		{
			$walk->($v->[$_], [ @$path, $_ ]) for grep { $_ < 2 } 0 .. $#$v;
		}
	};
	$walk->($valid->{$_}, [$_]) for sort keys %$valid;
	return \@out;
}

# The settings of the optimizers and the loss that take keys of their own (rmsprop, adagrad, huber's delta):
# each key's wrong values, for the functions that validate a configuration or spec and build a model of it.
my $CONFIG_RMSPROP = { optimizer => 'rmsprop', lr => 0.01, alpha => 0.9, eps => 1e-6, momentum => 0.5,
	centered => JSON::PP::true, weight_decay => 0.001, batch_size => 8, seed => 7 };
my $CONFIG_ADAGRAD = { optimizer => 'adagrad', lr => 0.05, lr_decay => 0.01, initial_accumulator_value => 0.1,
	eps => 1e-10, weight_decay => 0.001, batch_size => 8, seed => 7 };
my $SPEC_HUBER = { %$SPEC, layers => [ { type => 'dense', units => 1 } ], loss => 'huber', delta => 0.5 };
sub key_variants
{
	my ($what, $valid, @keys) = @_;
	my $keys = join('|', @keys);
	return [ map { [ "$what: $_->[0]" => $_->[1] ] } grep { $_->[0] =~ /^($keys)(\.|:)/ } @{ json_variants($valid) } ];
}
my @NEW_CONFIG_VARIANTS = (@{ key_variants('rmsprop', $CONFIG_RMSPROP, qw(optimizer alpha eps momentum centered)) },
	@{ key_variants('adagrad', $CONFIG_ADAGRAD, qw(lr_decay initial_accumulator_value eps)) });
my @NEW_SPEC_VARIANTS = @{ key_variants('huber', $SPEC_HUBER, qw(loss delta)) };

my %JSON_VARIANTS = (
	'spec'          => json_variants($SPEC),
	'config:jsonb'  => json_variants($CONFIG),
	'validate_config.config' => [ @{ json_variants($CONFIG) }, @NEW_CONFIG_VARIANTS ],
	'init_model.config'      => [ @{ json_variants($CONFIG) }, @NEW_CONFIG_VARIANTS ],
	'validate_spec.spec'     => [ @{ json_variants($SPEC) }, @NEW_SPEC_VARIANTS ],
	'init_model.spec'        => [ @{ json_variants($SPEC) }, @NEW_SPEC_VARIANTS ],
	'params:jsonb'  => json_variants($GRID),
	'space'         => json_variants($SPACE),
	'description'   => json_variants(decode_json($description)),
	'query:jsonb'   => json_variants($SPEC),
	# a JSON array of token arrays, not an object: its own variants
	'sequences' => [
		[ '{}'              => q{'{}'} ],
		[ 'null'            => q{'null'} ],
		[ '"x"'             => q{'"x"'} ],
		[ '[null]'          => q{'[null]'} ],
		[ '[[1, "x", null]]' => q{'[[1, "x", null]]'} ],
		[ '[[{}]]'          => q{'[[{}]]'} ],
		[ '1000 deep'       => q{('[' || repeat('[', 1000) || repeat(']', 1000) || ']')::jsonb} ],
		[ 'a 10 MB token'   => "jsonb_build_array(jsonb_build_array(repeat('t', $TEN_MB)))" ],
		[ 'a million tokens' => q{jsonb_build_array((SELECT jsonb_agg(i) FROM generate_series(1, 1000000) i))} ],
	],);

# ---------------------------------------------------------------------------
# The functions, from pg_proc.
# ---------------------------------------------------------------------------
my @functions;
for my $line (
	split /\n/,
	$node->safe_psql(
		'postgres', q{
SELECT p.oid::regprocedure, p.proname, p.prokind, p.provolatile, p.proisstrict, p.proparallel,
	   p.prorettype::regtype,
	   (SELECT string_agg(coalesce(nullif(a.n, ''), '$' || a.i) || ' ' || format_type(a.t, NULL), ', ' ORDER BY a.i)
		  FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]), p.proargmodes, p.proargnames)
			   WITH ORDINALITY a(t, m, n, i)
		 WHERE coalesce(a.m, 'i') IN ('i', 'b', 'v')),
	   'internal'::regtype = ANY (p.proargtypes),
	   (SELECT string_agg(a.aggfnoid::regprocedure::text, ' ') FROM pg_aggregate a
		 WHERE p.oid IN (a.aggtransfn, a.aggcombinefn, a.aggserialfn, a.aggdeserialfn, a.aggfinalfn))
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
   AND d.refclassid = 'pg_extension'::regclass AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pgdl')
 WHERE p.pronamespace = 'pgdl'::regnamespace
 ORDER BY p.proname, p.oid}))
{
	my ($sig, $name, $kind, $volatility, $strict, $parallel, $rettype, $args, $internal, $agg_of) =
	  split /\|/, $line, -1;
	my @args = map { /^(\S+) (.+)$/ ? { name => $1, type => $2 } : die "cannot read argument \"$_\"" }
	  grep { $_ ne '' } split /, /, $args;
	$_->{name} =~ s/^"(.*)"$/$1/ for @args;
	push @functions,
	  {
		sig        => $sig,
		name       => $name,
		kind       => $kind,
		volatility => $volatility,
		strict     => $strict,
		parallel   => $parallel,
		rettype    => $rettype,
		args       => \@args,
		internal   => $internal eq 't',
		agg_of     => $agg_of
	  };
}
cmp_ok(scalar(@functions), '>=', 50, 'pg_proc lists the functions of pgdl');
note(sprintf('%-100s %s', $_->{sig}, "strict=$_->{strict} volatility=$_->{volatility} parallel=$_->{parallel}"))
  for @functions;

sub lookup
{
	my ($map, $f, $arg) = @_;
	for my $key ("$f->{name}.$arg->{name}", "$arg->{name}:$arg->{type}", $arg->{name})
	{
		return $map->{$key} if exists $map->{$key};
	}
	return undef;
}

sub valid_value
{
	my ($f, $arg) = @_;
	my $v = lookup(\%VALID, $f, $arg);
	die "no valid value for $f->{sig} argument $arg->{name} $arg->{type}" unless defined $v;
	return $v;
}

sub call_sql
{
	my ($f, $values, $parallel) = @_;
	# a polymorphic argument takes its value's own type (nothing casts to anyelement)
	# (a bare NULL there has no type: text's)
	my @typed = map {
		$f->{args}[$_]{type} ne 'anyelement' ? "($values->[$_])::$f->{args}[$_]{type}"
		  : $values->[$_] eq 'NULL'          ? 'NULL::text'
		  :                                    "($values->[$_])"
	} 0 .. $#$values;
	if ($f->{kind} eq 'a')
	{
		# a parallel aggregate has no ORDER BY; the serial one reads buffers in order
		my $order = $parallel ? '' : ' ORDER BY part, buffer_id';
		return "SELECT md5(pgdl.$f->{name}(" . join(', ', @typed) . "$order)) FROM sweep_packed";
	}
	return "CALL pgdl.$f->{name}(" . join(', ', @typed) . ')' if $f->{kind} eq 'p';
	# trigger functions cannot be called in FROM
	return "SELECT pgdl.$f->{name}() IS NULL" if $f->{rettype} =~ /trigger/;
	return "SELECT md5(array_agg(f::text)::text) FROM pgdl.$f->{name}(" . join(', ', @typed) . ') f';
}

# The cases of one function: [group, label, sql, pre, post, expect].
sub cases_of
{
	my ($f) = @_;
	my @valid = map { valid_value($f, $_) } @{ $f->{args} };
	my @cases;
	my $trigger = $f->{rettype} =~ /trigger/;
	# a procedure that commits cannot within sweep_try's subtransaction: its valid call reaches the commit
	push @cases,
	  $f->{kind} eq 'p'
	  ? { group => 'valid call', label => 'valid, up to its COMMIT', sql => call_sql($f, \@valid), state => '2D000' }
	  : { group => 'valid call', label => 'valid', sql => call_sql($f, \@valid), valid => !$trigger };
	return @cases if $trigger;

	for my $i (0 .. $#valid)
	{
		my @v = @valid;
		$v[$i] = 'NULL';
		push @cases, { group => 'NULL arguments', label => "NULL $f->{args}[$i]{name}", sql => call_sql($f, \@v) };
	}
	for my $i (0 .. $#valid)
	{
		my $arg = $f->{args}[$i];
		my @values = (
			@{ $HOSTILE{ $arg->{type} } // die "no hostile values of type $arg->{type}" },
			@{ lookup(\%EXTRA,         $f, $arg) // [] },
			@{ lookup(\%JSON_VARIANTS, $f, $arg) // ($arg->{type} eq 'jsonb' ? die "no jsonb variants for $arg->{name}" : []) });
		for my $h (@values)
		{
			my @v = @valid;
			$v[$i] = $h->[1];
			push @cases,
			  {
				group => "hostile $arg->{name} ($arg->{type})",
				label => "$arg->{name} = $h->[0]",
				sql   => call_sql($f, \@v)
			  };
		}
	}
	if ($f->{parallel} eq 's')
	{
		my $set = q{SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
			THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END, 'on', false);};
		my $reset = q{RESET ALL; SET client_min_messages = warning; } . "SET statement_timeout = '${TIMEOUT_S}s';";
		push @cases,
		  {
			group => 'PARALLEL SAFE: valid call in a parallel worker',
			label => 'valid, in a parallel worker',
			sql   => call_sql($f, \@valid),
			pre   => $set,
			post  => $reset,
			valid => 1
		  };
		if ($f->{kind} eq 'a')
		{
			my $par = q{SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
				SET max_parallel_workers_per_gather = 2; SET parallel_leader_participation = off;};
			for my $i (-1 .. $#valid)
			{
				my @v = @valid;
				$v[$i] = 'NULL' if $i >= 0;
				push @cases,
				  {
					group => 'parallel aggregate (combine, serial, deserial)',
					label => $i < 0 ? 'valid, partial aggregates combined' : "NULL $f->{args}[$i]{name}",
					sql   => call_sql($f, \@v, 1),
					pre   => $par,
					post  => $reset,
					valid => $i < 0
				  };
			}
			# a few hostile values of the first argument (x) and the last (the model, or its configuration)
			my @hostile = ((map { [ 0, $_ ] } @{ $HOSTILE{'real[]'} }[ 0 .. 4 ]),
				(map { [ $#valid, $_ ] } @{ lookup(\%JSON_VARIANTS, $f, $f->{args}[-1]) // $HOSTILE{bytea} }[ 0 .. 3 ]));
			for my $h (@hostile)
			{
				my ($i, $label, $value) = ($h->[0], @{ $h->[1] });
				my @v = @valid;
				$v[$i] = $value;
				push @cases,
				  {
					group => 'parallel aggregate (combine, serial, deserial)',
					label => "$f->{args}[$i]{name} = $label",
					sql   => call_sql($f, \@v, 1),
					pre   => $par,
					post  => $reset
				  };
			}
		}
	}
	if ($f->{volatility} eq 'i' && $f->{kind} eq 'f')
	{
		my $q = call_sql($f, \@valid);
		push @cases,
		  {
			group  => 'IMMUTABLE: the same answer twice',
			label  => 'valid, twice',
			sql    => "SELECT (($q) IS NOT DISTINCT FROM ($q))::text",
			valid  => 1,
			expect => 'true'
		  };
	}
	return @cases;
}

# Trigger functions fired by writes: valid ones, and hostile rows for the
# trigger that validates them.
sub trigger_cases
{
	my ($f) = @_;
	my %fired_by = (
		catalog_changed => [
			[ 'UPDATE pgdl.models' => q{UPDATE pgdl.models SET name = name WHERE name = 'sweep_model'} ],
			[ 'INSERT INTO pgdl.models' => q{INSERT INTO pgdl.models (name, spec, weights)
				SELECT 'sweep_copy', spec, weights FROM pgdl.models WHERE name = 'sweep_model'} ],
		],
		base_model_changed => [
			[ 'UPDATE of weights' => q{UPDATE pgdl.models SET weights = weights WHERE name = 'sweep_model'} ],
			[ 'DELETE of a base model' =>
				  q{SELECT pgdl.delete_rows('pgdl.models', ARRAY(SELECT id FROM pgdl.models WHERE name = 'sweep_model'))} ],
		],
		references_visible => [
			[ 'UPDATE of a model\'s architecture' => q{UPDATE pgdl.models
				SET architecture = (SELECT id FROM pgdl.architectures WHERE name = 'sweep_arch') WHERE name = 'sweep_model'} ],
		],
		forget_dropped_relations => [
			[ 'DROP of a packed table' => 'DROP TABLE sweep_valid CASCADE' ],
			[ 'DROP of a cache view' => 'DROP TABLE sweep_packed CASCADE' ],
		],
		models_validate => [
			[ 'INSERT INTO pgdl.models' => q{INSERT INTO pgdl.models (name, spec, weights)
				SELECT 'sweep_checked', spec, weights FROM pgdl.models WHERE name = 'sweep_model'} ],
			[ 'UPDATE of weights' => q{UPDATE pgdl.models SET weights = weights WHERE name = 'sweep_model'} ],
		],
		architectures_validate => [
			[ 'INSERT INTO pgdl.architectures' => q{INSERT INTO pgdl.architectures (name, spec)
				SELECT 'sweep_checked', spec FROM pgdl.architectures WHERE name = 'sweep_arch'} ],
		],
		owned_by_run => [
			[ 'INSERT INTO pgdl.run_metrics' => q{INSERT INTO pgdl.run_metrics (run, epoch)
				SELECT id, 7 FROM sweep_runs WHERE label = 'cancelled'} ],
			[ 'INSERT INTO pgdl.checkpoints' => q{INSERT INTO pgdl.checkpoints (run, config, epoch, weights)
				SELECT r.id, c.id, 7, f.blob FROM sweep_runs r, pgdl.configs c, sweep_fix f
				 WHERE r.label = 'cancelled' AND c.set_name = 'sweep_set' LIMIT 1} ],
			[ 'INSERT INTO pgdl.models' => q{INSERT INTO pgdl.models (name, spec, weights, run)
				SELECT 'sweep_run_copy', m.spec, m.weights, r.id FROM pgdl.models m, sweep_runs r
				 WHERE m.name = 'sweep_model' AND r.label = 'cancelled'} ],
		],);
	my @cases = map { { group => 'fired by writes', label => $_->[0], sql => $_->[1], valid => 1 } }
	  @{ $fired_by{ $f->{name} } // [] };
	if ($f->{name} eq 'owned_by_run')
	{
		# rows that name a run the writer may not write into
		for my $run ([ "another role's run" => '(SELECT other_run FROM sweep_fix)' ], [ 'no run' => '-1' ], [ NULL => 'NULL' ])
		{
			push @cases,
			  { group => 'fired by hostile rows', label => "run_metrics of $run->[0]", refused => 1,
				sql => "INSERT INTO pgdl.run_metrics (run, epoch) VALUES (($run->[1])::bigint, 1)" };
			push @cases,
			  { group => 'fired by hostile rows', label => "checkpoint of $run->[0]", refused => 1,
				sql => "INSERT INTO pgdl.checkpoints (run, config, epoch, weights) SELECT ($run->[1])::bigint, 1, 1, blob FROM sweep_fix" };
			push @cases,
			  { group => 'fired by hostile rows', label => "model of $run->[0], owned by another role", refused => 1,
				sql => "INSERT INTO pgdl.models (name, spec, weights, run, owner)
					SELECT 'sweep_planted', '{}', blob, ($run->[1])::bigint, 'sweep_other' FROM sweep_fix" };
		}
		push @cases,
		  { group => 'fired by hostile rows', label => 'a metrics row moved to another role\'s run',
			sql => 'UPDATE pgdl.run_metrics SET run = (SELECT other_run FROM sweep_fix)', refused => 1 };
	}
	if ($f->{name} eq 'references_visible')
	{
		# a model that names another role's run, or no run: the same foreign-key error
		push @cases,
		  { group => 'fired by hostile rows', label => "model naming $_->[0]", refused => 1,
			sql => "INSERT INTO pgdl.models (name, spec, weights, run) SELECT 'sweep_named', m.spec, m.weights, ($_->[1])::bigint
				FROM pgdl.models m WHERE m.name = 'sweep_model'" }
		  for [ "another role's run" => '(SELECT other_run FROM sweep_fix)' ], [ 'no run' => '-1' ];
	}
	if ($f->{name} eq 'models_validate')
	{
		# a spec or weights that do not parse, or weights of another spec: refused when written
		my $model = sub {
			my ($spec, $weights) = @_;
			return "INSERT INTO pgdl.models (name, spec, weights) SELECT 'sweep_bad', ($spec)::jsonb, ($weights)::bytea"
			  . " FROM pgdl.models m, sweep_fix f WHERE m.name = 'sweep_model'";
		};
		push @cases, { group => 'fired by hostile rows', label => "spec = $_->[0]", sql => $model->($_->[1], 'm.weights') }
		  for @{ $JSON_VARIANTS{spec} };
		push @cases, { group => 'fired by hostile rows', label => "spec = $_->[0]", refused => 1,
					   sql => $model->($_->[1], 'm.weights') }
		  for [ '"x"' => q{'"x"'} ], [ 'layers 5' => q{'{"input": [4], "layers": 5}'} ];
		push @cases, { group => 'fired by hostile rows', label => "weights = $_->[0]", refused => 1,
					   sql => $model->('m.spec', $_->[1]) }
		  for [ '\xdeadbeef' => q{'\xdeadbeef'} ], [ 'cut short' => 'substring(m.weights for length(m.weights) - 4)' ],
		  [ 'of another spec' => 'f.other_blob' ];
	}
	push @cases, { group => 'fired by hostile rows', label => "architecture spec = $_->[0]", refused => 1,
				   sql => "INSERT INTO pgdl.architectures (name, spec) VALUES ('sweep_bad', ($_->[1])::jsonb)" }
	  for $f->{name} eq 'architectures_validate' ? ([ '"x"' => q{'"x"'} ], [ 'layers 5' => q{'{"input": [4], "layers": 5}'} ]) : ();
	return @cases unless $f->{name} eq 'configs_validate';

	my $arch = q{(SELECT id FROM pgdl.architectures WHERE name = 'sweep_arch')};
	my $insert = sub {
		my ($set, $a, $config) = @_;
		return "INSERT INTO pgdl.configs (set_name, architecture, config) VALUES (($set)::text, ($a)::bigint, ($config)::jsonb)";
	};
	push @cases,
	  { group => 'fired by writes', label => 'a valid row', sql => $insert->(q{'sweep_t'}, $arch, jsonb_sql($CONFIG)), valid => 1 };
	push @cases,
	  { group => 'fired by hostile rows', label => "set_name = $_->[0]", sql => $insert->($_->[1], $arch, jsonb_sql($CONFIG)) }
	  for @{ $HOSTILE{text} }, [ NULL => 'NULL' ];
	push @cases,
	  { group => 'fired by hostile rows', label => "architecture = $_->[0]", sql => $insert->(q{'sweep_t'}, $_->[1], jsonb_sql($CONFIG)) }
	  for @{ $HOSTILE{bigint} }, [ NULL => 'NULL' ];
	push @cases, { group => 'fired by hostile rows', label => "config = $_->[0]", sql => $insert->(q{'sweep_t'}, $arch, $_->[1]) }
	  for @{ $JSON_VARIANTS{'config:jsonb'} }, [ NULL => 'NULL' ];
	# transfer configurations: no architecture
	push @cases,
	  { group => 'fired by writes', label => 'a valid transfer row',
		sql => $insert->(q{'sweep_t'}, 'NULL', q{'{"base_model": "sweep_model", "freeze": 3}'}), valid => 1 };
	push @cases, { group => 'fired by hostile rows', label => "config = $_->[0]", sql => $insert->(q{'sweep_t'}, 'NULL', $_->[1]) }
	  for [ 'base_model that does not exist' => q{'{"base_model": "no_such_model"}'} ],
	  [ 'base_model of 10 MB'       => "jsonb_build_object('base_model', repeat('b', $TEN_MB))" ],
	  [ 'base_model 0'              => q{'{"base_model": 0}'} ],
	  [ 'base_model -1'             => q{'{"base_model": -1}'} ],
	  [ 'base_model 1e300'          => q{'{"base_model": 1e300}'} ],
	  [ 'base_model []'             => q{'{"base_model": []}'} ],
	  [ "another role's base_model" => q{'{"base_model": "sweep_other_model", "freeze": 0}'} ],
	  [ 'freeze INT_MAX'            => q{'{"base_model": "sweep_model", "freeze": 2147483647}'} ],
	  [ 'freeze -1'                 => q{'{"base_model": "sweep_model", "freeze": -1}'} ],
	  [ 'freeze "no_such_layer"'    => q{'{"base_model": "sweep_model", "freeze": "no_such_layer"}'} ],
	  [ 'head of the wrong type'    => q{'{"base_model": "sweep_model", "freeze": 3, "head": 5}'} ],
	  [ 'head of a 10 MB layer type' => "jsonb_build_object('base_model', 'sweep_model', 'freeze', 3, 'head', jsonb_build_array(jsonb_build_object('type', repeat('t', $TEN_MB))))" ],
	  [ 'warm_start of 10 MB'       => "jsonb_build_object('warm_start', repeat('w', $TEN_MB))" ],
	  [ 'warm_start 1e300'          => q{'{"warm_start": 1e300}'} ],
	  [ 'warm_start and base_model' => q{'{"base_model": "sweep_model", "freeze": 3, "warm_start": "sweep_model"}'} ];
	push @cases,
	  { group => 'fired by hostile rows', label => 'UPDATE to config "x"',
		sql => q{UPDATE pgdl.configs SET config = '"x"' WHERE set_name = 'sweep_set'} };
	return @cases;
}

# ---------------------------------------------------------------------------
# Running: one psql session per function; a call that takes the server down is
# recorded, the server is waited for, and the function's other calls go on.
# ---------------------------------------------------------------------------
my $restarts_re = qr/terminated by signal|all server processes terminated|PANIC/;

sub run_cases
{
	my ($timeout_s, @cases) = @_;
	my @todo = @cases;
	my %result;
	while (@todo)
	{
		my $script = "SET client_min_messages = warning;\nSET statement_timeout = '${timeout_s}s';\n";
		for my $c (@todo)
		{
			$script .= "$c->{pre}\n" if $c->{pre};
			$script .= "SELECT sweep_try($c->{id}, \$sweep\$$c->{sql}\$sweep\$);\n";
			$script .= "$c->{post}\n" if $c->{post};
		}
		my $log_at = -s $node->logfile;
		my ($timed_out, $out, $err) = (0, '', '');
		$node->psql(
			'postgres', $script,
			stdout       => \$out,
			stderr       => \$err,
			extra_params => [ '-U', 'sweeper' ],
			on_error_stop => 1,
			timeout      => 60 + 2 * $timeout_s * @todo,
			timed_out    => \$timed_out);
		for my $line (split /\n/, $out)
		{
			next unless $line =~ /^(\d+)\|(ok|timeout|badcall|error)\|?(.*)$/;
			my ($id, $status, $rest) = ($1, $2, $3);
			if ($status eq 'error')
			{
				my ($state, $bytes, $hint, $ctx, $msg) = split /\|/, $rest, 5;
				$result{$id} =
				  { status => 'error', state => $state, bytes => $bytes, hint => $hint, ctx => $ctx, msg => $msg };
			}
			else
			{
				$result{$id} = { status => $status, value => $rest };
			}
		}
		my @missing = grep { !exists $result{ $_->{id} } } @todo;
		last unless @missing;

		# the first call without an answer ended the session
		my $first = shift @missing;
		poll_until($node, 'SELECT true', 120) or BAIL_OUT('the server did not come back');
		my $log = slurp_file($node->logfile, $log_at);
		my ($why) = $err =~ /^(.*(?:ERROR|FATAL|closed|lost|terminat).*)$/m;
		$result{ $first->{id} } = {
			status => $log =~ $restarts_re ? 'crash' : 'lost',
			msg    => ($timed_out ? 'psql timed out; ' : '') . ($why // $err)
		};
		@todo = @missing;
	}
	return \%result;
}

# Why a call's outcome is not acceptable, or undef.
sub verdict
{
	my ($case, $r, $timeout_s) = @_;
	return "the server crashed and restarted: $r->{msg}" if $r->{status} eq 'crash';
	return "the session ended: $r->{msg}" if $r->{status} eq 'lost';
	return "no answer within ${timeout_s}s" if $r->{status} eq 'timeout';
	return "the generated call does not parse (a bug of this test): $r->{value}" if $r->{status} eq 'badcall';
	return "succeeded, expected SQLSTATE $case->{state}" if $case->{state} && $r->{status} ne 'error';
	return "failed with $r->{state}, expected $case->{state}: $r->{msg}"
	  if $case->{state} && $r->{state} ne $case->{state};
	if ($r->{status} eq 'error')
	{
		return "internal error (XX000): $r->{msg}" if $r->{state} eq 'XX000';
		# the call parsed: a syntax error is in SQL that pgdl built
		return "pgdl ran malformed SQL ($r->{state}): $r->{msg}" if $r->{state} eq '42601';
		return "a valid call failed ($r->{state}): $r->{msg}" if $case->{valid};
		return "a message and detail of $r->{bytes} bytes ($r->{state}): " . substr($r->{msg}, 0, 100)
		  if $r->{bytes} >= $MAX_ERROR_BYTES;
		return "a hint of $r->{hint} bytes ($r->{state}): " . substr($r->{msg}, 0, 100)
		  if $r->{hint} >= $MAX_ERROR_BYTES;
		return "a context of $r->{ctx} bytes beyond the call ($r->{state}): " . substr($r->{msg}, 0, 100)
		  if $r->{ctx} > $MAX_CONTEXT_EXTRA;
		return undef;
	}
	return "succeeded: a write into another role's rows must be refused" if $case->{refused};
	return "answered \"$r->{value}\", expected \"$case->{expect}\""
	  if defined $case->{expect} && $r->{value} ne $case->{expect};
	return undef;
}

# A session that lives through the sweep: a crash of any backend ends it.
# the sweep takes minutes on a loaded machine: the session must outlive it, not the default 180 s timer
my $watcher = $node->background_psql('postgres', timeout => 1200);
my $watcher_pid = $watcher->query_safe('SELECT pg_backend_pid()');
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $log_start = -s $node->logfile;
my $t0 = time;
my $next_id = 1;
my (%states, @failures);
for my $f (@functions)
{
	if ($f->{internal})
	{
		ok($f->{agg_of} ne '', "$f->{sig}: takes internal, swept through the aggregate $f->{agg_of}")
		  or diag('a function with an internal argument cannot be called from SQL; nothing calls this one');
		next;
	}
	my @cases = (cases_of($f), trigger_cases($f));
	$_->{id} = $next_id++ for @cases;
	my $ft = time;
	my $timeout_s = $TIMEOUT_OF{ $f->{sig} } // $TIMEOUT_S;
	my $results = run_cases($timeout_s, @cases);
	my (@groups, %bad);
	for my $c (@cases)
	{
		push @groups, $c->{group} unless grep { $_ eq $c->{group} } @groups;
		my $r = $results->{ $c->{id} };
		my $why = verdict($c, $r, $timeout_s);
		my $outcome = $r->{status} eq 'error' ? "ERROR $r->{state}" : $r->{status};
		$states{$outcome}++;
		note("$f->{sig} | $c->{label} | $outcome" . ($r->{status} eq 'error' ? " | $r->{msg}" : ''));
		if ($why)
		{
			push @{ $bad{ $c->{group} } }, "$c->{label}: $why";
			push @failures, "$f->{sig} | $c->{label} | $why";
		}
	}
	for my $g (@groups)
	{
		my $n = grep { $_->{group} eq $g } @cases;
		ok(!$bad{$g}, "$f->{sig}: $g ($n calls)") or diag(join("\n", @{ $bad{$g} }));
	}
	note(sprintf('%s: %d calls in %.1fs', $f->{sig}, scalar(@cases), time - $ft));
}
note(sprintf('%d calls in %.0fs', $next_id - 1, time - $t0));
note("outcomes: " . join(', ', map { "$_ x$states{$_}" } sort keys %states));
note("failures:\n" . join("\n", @failures)) if @failures;

# ---------------------------------------------------------------------------
# The server never restarted.
# ---------------------------------------------------------------------------
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started, 'the postmaster never restarted');
my $still = eval { $watcher->query_safe('SELECT pg_backend_pid()') };
is($still, $watcher_pid, 'a session opened before the sweep is still connected: the server never restarted');
eval { $watcher->quit };
my @restarts = grep { /$restarts_re/ } split /\n/, slurp_file($node->logfile, $log_start);
ok(!@restarts, 'no server process crashed during the sweep') or diag(join("\n", @restarts));
is($node->safe_psql('postgres', q{SELECT count(*) FROM pgdl.models WHERE name = 'sweep_model' AND owner = 'sweeper'::regrole}),
	'1', 'the fixture is intact after the sweep');
# attach_partitions of other packed tables (with other numbers of partitions) left the views of this one alone
is($node->safe_psql('postgres', sprintf($attached_rows, 'sweep_joined WHERE part >= 2')),
	$node_site_rows, "after the sweep, the attached partitions 2 and 3 still read the node's partitions 0 and 1");

# ---------------------------------------------------------------------------
# ONNX nested 200,000 deep (issue 32).  protobuf-c unpacks each nested message
# by calling itself, with no bound: a file nesting TypeProto in TypeProto
# 200,000 times once overflowed the backend's stack and restarted the server.
# pgdl.import_onnx scans the nesting first (src/models/onnx_depth.c) and refuses more
# than 100 levels with 22023.  Each recursive path of onnx.proto is fed 200,000
# and 101 levels deep as the sweeping role: TypeProto's sequence, map and
# optional element types (under the graph's input), AttributeProto g and
# graphs (through GraphProto and NodeProto), and FunctionProto's nodes' graph
# attributes.  At 100 levels the same files pass the scan; a model exported by
# pgdl.export_onnx imports, with or without a FunctionProto 100 deep after it.
# ---------------------------------------------------------------------------

# a protobuf varint
sub pb_varint
{
	my ($v) = @_;
	my $s = '';
	while ($v >= 0x80)
	{
		$s .= chr(($v & 0x7f) | 0x80);
		$v >>= 7;
	}
	return $s . chr($v);
}

# A ModelProto whose messages nest through the field numbers @$outer, then
# $levels more around @$cycle (all length-delimited), the innermost empty:
# each message's size inside-out first, then the headers outside-in, O(n).
sub nested_onnx
{
	my ($outer, $cycle, $levels) = @_;
	my @fields = (@$outer, map { $cycle->[ $_ % @$cycle ] } 0 .. $levels - 1);
	my @size = (0) x (@fields + 1);
	for (my $i = $#fields; $i >= 0; $i--)
	{
		$size[$i] = length(pb_varint($fields[$i] << 3 | 2)) + length(pb_varint($size[ $i + 1 ])) + $size[ $i + 1 ];
	}
	my $bytes = '';
	$bytes .= pb_varint($fields[$_] << 3 | 2) . pb_varint($size[ $_ + 1 ]) for 0 .. $#fields;
	die 'nested_onnx: sizes and bytes disagree' unless length($bytes) == $size[0];
	return $bytes;
}

# each path: the fields to its first recursive message (3 deep), and its cycle
my @onnx_paths = (
	[ 'TypeProto.sequence_type.elem_type',   [ 7,  11, 2 ], [ 4,  1 ] ],
	[ 'TypeProto.map_type.value_type',       [ 7,  11, 2 ], [ 5,  2 ] ],
	[ 'TypeProto.optional_type.elem_type',   [ 7,  11, 2 ], [ 9,  1 ] ],
	[ 'AttributeProto.g.node.attribute',     [ 7,  1,  5 ], [ 6,  1, 5 ] ],
	[ 'AttributeProto.graphs.node.attribute', [ 7,  1,  5 ], [ 11, 1, 5 ] ],
	[ 'FunctionProto.node.attribute.g',      [ 25, 7,  5 ], [ 6,  1, 5 ] ]);
my $onnx_started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $onnx_log_at = -s $node->logfile;
$node->safe_psql('postgres',
	'CREATE TABLE deep_onnx (name text PRIMARY KEY, bytes bytea); GRANT SELECT ON deep_onnx TO sweeper');
my $onnx_file = $node->basedir . '/deep.onnx';
for my $p (@onnx_paths)
{
	my ($path, $outer, $cycle) = @$p;
	# 200,000 levels, 101 and 100 deep (3 to the first recursive message)
	for my $levels (200_000, 98, 97)
	{
		open(my $fh, '>:raw', $onnx_file) or die "$onnx_file: $!";
		print $fh nested_onnx($outer, $cycle, $levels);
		close($fh);
		$node->safe_psql('postgres',
			"INSERT INTO deep_onnx VALUES ('$path ' || ($levels + 3), pg_read_binary_file('$onnx_file'))");
	}
}
cmp_ok($node->safe_psql('postgres', q{SELECT min(length(bytes)) FROM deep_onnx WHERE name LIKE '% 200003'}),
	'>', 600_000, 'each file 200,000 levels deep is over 600 kB');

# the sweeping role's import of SQL `bytes`: (SQLSTATE, message and detail), or the new model's id
sub import_as_sweeper
{
	my ($bytes) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET ROLE sweeper;\n\\set VERBOSITY verbose\nSELECT pgdl.import_onnx(NULL, $bytes);");
	return $out if $ret == 0;
	my ($state, $msg) = $err =~ /ERROR:  ([0-9A-Z]{5}): (.*?)(?:\nLOCATION|\z)/s;
	return ($state // 'none') . ' ' . ($msg // $err);
}

my $too_deep = qr/^22023 cannot import the ONNX model\nDETAIL:  Its protobuf messages nest more than 100 deep/;
for my $p (@onnx_paths)
{
	my $path = $p->[0];
	for my $deep (200_003, 101)
	{
		like(import_as_sweeper("(SELECT bytes FROM deep_onnx WHERE name = '$path $deep')"),
			$too_deep, "import_onnx of $path $deep deep: refused with 22023 before protobuf-c reads it");
	}
	# past the scan and protobuf-c; then refused for what the model lacks (an opset, a graph), not for its depth
	like(import_as_sweeper("(SELECT bytes FROM deep_onnx WHERE name = '$path 100')"),
		qr/^(?:0A000|22023) cannot import the ONNX model\nDETAIL:  (?:Its opset is 0|The model has no graph)/,
		"import_onnx of $path 100 deep: read, then refused for its missing opset or graph");
}

# A serialized ModelProto followed by another one's fields reads as one: the exported model (without the
# dataset's normalization, so that it needs no dataset) with a FunctionProto (which pgdl does not use) nesting
# 100 deep imports; 200,003 deep is refused.
my $exported = q{pgdl.export_onnx((SELECT id FROM pgdl.models WHERE name = 'sweep_model' AND owner = 'sweeper'::regrole), false)};
like(import_as_sweeper($exported), qr/^\d+$/, 'a model exported by pgdl.export_onnx still imports');
like(import_as_sweeper("$exported || (SELECT bytes FROM deep_onnx WHERE name = 'FunctionProto.node.attribute.g 100')"),
	qr/^\d+$/, 'the exported model with a FunctionProto nesting 100 deep imports');
like(import_as_sweeper("$exported || (SELECT bytes FROM deep_onnx WHERE name = 'FunctionProto.node.attribute.g 200003')"),
	$too_deep, 'the exported model with a FunctionProto nesting 200,003 deep is refused with 22023');
# A singular message field that comes again is merged into the first by protobuf-c, with copies that grow as
# the square of the count and no cancel between: ModelProto.graph 40,000 times took 4.8 s of a backend no
# statement_timeout stopped.  More than 4 in one message is refused before protobuf-c reads it; the exported
# model with its graph once more (a merge of two graphs) still imports.
like(import_as_sweeper(q{decode(repeat('3a00', 40000), 'hex')}),
	qr/^22023 cannot import the ONNX model\nDETAIL:  A protobuf message holds one of its fields of a single message more than 4 times/,
	'import_onnx of ModelProto.graph 40,000 times: refused with 22023 before protobuf-c merges them');
like(import_as_sweeper("$exported || '\\x3a00'::bytea"), qr/^\d+$/, 'the exported model with a second, empty graph imports');

is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$onnx_started, 'the postmaster did not restart during the deep ONNX imports');
my @onnx_crashes = grep { /$restarts_re/ } split /\n/, slurp_file($node->logfile, $onnx_log_at);
ok(!@onnx_crashes, 'no server process crashed during the deep ONNX imports') or diag(join("\n", @onnx_crashes));

$node->stop;
done_testing();
