# Several servers: a coordinator and two nodes on this machine, reached through
# postgres_fdw foreign servers and user mappings.
#
# pgdl.distribute moves a packed table's partitions onto the nodes, whole and
# once, also when a call failed half way; pgdl.fit_multiple over the
# distributed table trains the models pgdl.fit trains on one server, bit for
# bit, with the same leaderboard, metrics and checkpoints; a node killed mid-run
# ends the call with an error naming the node and the run, and pgdl.resume
# after the node is back ends with the bytes of an uninterrupted run; cancel and
# statement_timeout on the coordinator cancel the nodes' queries; the node runs as the
# mapped user (passwords as postgres_fdw wants them, SELECT as the node grants
# it); a node without pgdl or with another build is refused; a node that
# returns a model other than the one sent, trained (another architecture,
# parameter count, optimizer or seed, a step count its examples do not account
# for) is refused, and nothing of it stored; no password is ever printed, in an
# error or a log line.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS      = 3;      # the grid's runs
my $LONG_EPOCHS = 600;    # the run that loses a node: about 3 s here
my $WRONG_PW    = 'S3cret-pgdl-xyz';    # never in an error or a log line
my $RIGHT_PW    = 'Right-pgdl-4711';    # nor this one

# log_parameter_max_length = 0: under the tests' log_statement = all, a node
# would log every model that hops to it, in hex
my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord',
	"max_worker_processes = 24\npgdl.keep_checkpoints = -1\n$LOG_CONF");
my $node1 = new_pgdl_node('node1', $LOG_CONF);
my $node2 = new_pgdl_node('node2', $LOG_CONF);
add_node_server($coord, 'node1', $node1);
add_node_server($coord, 'node2', $node2);
my @nodes = ($node1, $node2);

# ---------------------------------------------------------------------------
# Helpers (and PgdlTest's).  Every wait is bounded.
# ---------------------------------------------------------------------------

sub run_of
{
	my ($table) = @_;
	return $coord->safe_psql('postgres',
		"SELECT DISTINCT m.run FROM $table l JOIN pgdl.models m ON m.id = l.model");
}

# count, sum(n) and an md5 of every row of a packed table, in (part, buffer_id) order
sub contents
{
	my ($table) = @_;
	return $coord->safe_psql('postgres',
		"SELECT count(*) || ' ' || sum(n) || ' ' || md5(string_agg(part || ':' || buffer_id || ':' || n || ':' || x::text || ':' || y::text, ';' ORDER BY part, buffer_id)) FROM $table"
	);
}

# part:server of each partition of a packed table ('-' for one here), in part order
sub placement
{
	my ($table) = @_;
	return $coord->safe_psql(
		'postgres', qq{
		SELECT string_agg(substring(pg_get_expr(c.relpartbound, c.oid) FROM '\\((\\d+)\\)') || ':' || coalesce(s.srvname, '-'),
		                  ' ' ORDER BY substring(pg_get_expr(c.relpartbound, c.oid) FROM '\\((\\d+)\\)')::int)
		  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		  LEFT JOIN pg_foreign_table f ON f.ftrelid = c.oid LEFT JOIN pg_foreign_server s ON s.oid = f.ftserver
		 WHERE i.inhparent = '$table'::regclass});
}

# name:rows of the partitions of a packed table a node holds (tables named like the coordinator's partitions)
sub node_tables
{
	my ($node, $table) = @_;
	return $node->safe_psql(
		'postgres', qq{
		SELECT coalesce(string_agg(c.relname || ':' || (xpath('/row/n/text()',
		         query_to_xml(format('SELECT count(*) AS n FROM %I.%I', n.nspname, c.relname), false, true, '')))[1]::text,
		         ' ' ORDER BY c.relname), '')
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE c.relkind = 'r' AND c.relname LIKE '${table}_%'});
}

# name:rows of partitions k of $table (here, before distribute) that go to node i of n
sub expected_node_tables
{
	my ($table, $i, $n) = @_;
	return $coord->safe_psql(
		'postgres', qq{
		SELECT coalesce(string_agg(c.relname || ':' || (SELECT count(*) FROM $table t WHERE t.part = p.k), ' ' ORDER BY c.relname), '')
		  FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid,
		       LATERAL (SELECT substring(pg_get_expr(c.relpartbound, c.oid) FROM '\\((\\d+)\\)')::int AS k) p
		 WHERE h.inhparent = '$table'::regclass AND p.k % $n = $i});
}

# A finished run has one metrics row and one checkpoint per (config, epoch) of its set, and nothing else.
sub check_run_rows
{
	my ($run, $set, $epochs, $what) = @_;
	my $expected = "SELECT c.id, e FROM pgdl.configs c, generate_series(1, $epochs) e WHERE c.set_name = '$set' AND c.owner = 'postgres'::regrole";
	is( $coord->safe_psql(
			'postgres', qq{
		SELECT (SELECT count(*) FROM pgdl.run_metrics WHERE run = $run) = (SELECT count(*) FROM ($expected) x)
		   AND NOT EXISTS (($expected) EXCEPT ALL SELECT config, epoch FROM pgdl.run_metrics WHERE run = $run)
		   AND (SELECT count(*) FROM pgdl.checkpoints WHERE run = $run) = (SELECT count(*) FROM ($expected) x)
		   AND NOT EXISTS (($expected) EXCEPT ALL SELECT config, epoch FROM pgdl.checkpoints WHERE run = $run)
		   AND (SELECT status FROM pgdl.runs WHERE id = $run) = 'finished'}),
		't',
		"$what: one metrics row and one checkpoint per (config, epoch); the run is finished");
}

sub no_secret
{
	my ($text, $what) = @_;
	unlike($text, qr/\Q$WRONG_PW\E|\Q$RIGHT_PW\E|password=/, "$what: no password in the error");
}

# ---------------------------------------------------------------------------
# Data: 2,000 points of 16 features from sin(), 4 classes; packed twice with
# the same seed (train_packed is distributed, ref_packed stays here as the
# single-server reference); 500 validation points.
# ---------------------------------------------------------------------------
$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('train_rows', 'x', 'label', 'ref_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
CREATE TABLE grid_configs (ord int, config jsonb);
INSERT INTO grid_configs VALUES
  (1, '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}'),
  (2, '{"optimizer": "adam", "lr": 0.005, "batch_size": 25, "seed": 3}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'grid', a.id, g.config FROM pgdl.architectures a, grid_configs g ORDER BY a.name, g.ord;
-- many small steps per epoch: the run that loses a node
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'long', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 2, "seed": 11}',
                    '{"optimizer": "adam", "lr": 0.0005, "batch_size": 2, "seed": 12}']) c
 WHERE a.name = 'small' ORDER BY c;
-- each visit of a partition is one remote query of seconds: 500 steps of one example through three
-- convolutions of 384 filters on the 16 features as a 4x4 image (about 5 s here; a model of 11 MB, so that
-- the nodes read it quickly): the runs that are cancelled
SELECT pgdl.add_architecture('heavy', '{"input": [1, 4, 4], "layers": [
  {"type": "conv2d", "filters": 384, "kernel": 3, "padding": 1}, {"type": "relu"},
  {"type": "conv2d", "filters": 384, "kernel": 3, "padding": 1}, {"type": "relu"},
  {"type": "conv2d", "filters": 384, "kernel": 3, "padding": 1}, {"type": "relu"},
  {"type": "flatten"}, {"type": "dense", "units": 4}]}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'heavy', a.id, jsonb_build_object('optimizer', 'sgd', 'lr', 0.001, 'batch_size', 1, 'seed', s)
  FROM pgdl.architectures a, generate_series(31, 34) s WHERE a.name = 'heavy' ORDER BY s;
});
is(contents('ref_packed'), contents('train_packed'), 'packed twice with one seed: the same rows');
my $original = contents('train_packed');
like($original, qr/^40 2000 [0-9a-f]{32}$/, '2,000 rows in 40 buffers');

# ---------------------------------------------------------------------------
# A node without pgdl, and one with another build, are refused up front.
# ---------------------------------------------------------------------------
$node1->safe_psql('postgres', 'CREATE DATABASE bare');
$node2->safe_psql('postgres', 'CREATE DATABASE other');
$node2->safe_psql('other', 'CREATE EXTENSION pgdl');
add_node_server($coord, 'bare', $node1, 'bare');
add_node_server($coord, 'other', $node2, 'other');
{
	my ($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('train_packed', ARRAY['bare'])");
	isnt($ret, 0, 'distribute to a node without pgdl fails');
	like($err, qr/pgdl is not installed on server "bare"/, '... saying pgdl is not installed there');
	is(placement('train_packed'), '0:- 1:- 2:- 3:-', '... and every partition is still here');
	is($node1->safe_psql('bare', "SELECT count(*) FROM pg_class WHERE relname LIKE 'train_packed%'"),
		'0', '... and nothing was created on the node');

	# other runs pgdl, and a table is distributed there before its build "changes"
	$coord->safe_psql('postgres',
		"SELECT pgdl.pack('train_rows', 'x', 'label', 'other_packed', buffer_rows => 50, partitions => 2, seed => 7)");
	($ret, $out, $err) =
	  $coord->psql('postgres', "SELECT pgdl.distribute('other_packed', ARRAY['node1', 'other'])");
	is($out, '2', 'distribute to a node that runs the same build moves its partitions') or diag($err);
	# a node on other CPU kernels is named in a WARNING; its session takes this one's pgdl.cpu_isa
	$node2->safe_psql('other',
		"CREATE OR REPLACE FUNCTION pgdl.cpu_info() RETURNS jsonb LANGUAGE sql AS "
		  . "\$\$SELECT jsonb_build_object('isa', 'forged-' || current_setting('pgdl.cpu_isa'), 'blas_core', 'Elsewhere')\$\$");
	$coord->safe_psql('postgres',
		"SELECT pgdl.pack('train_rows', 'x', 'label', 'isa_packed', buffer_rows => 50, partitions => 2, seed => 7)");
	($ret, $out, $err) = $coord->psql('postgres',
		"SET pgdl.cpu_isa = 'baseline'; SELECT pgdl.distribute('isa_packed', ARRAY['other'])");
	is($out, '2', 'distribute to a node on other CPU kernels moves its partitions') or diag($err);
	like($err, qr/WARNING:  server "other" runs other CPU kernels than this server/, '... with a WARNING naming it');
	like($err, qr/runs instruction set baseline and BLAS kernels \w+; server "other" runs forged-baseline and Elsewhere/,
		"... whose session took this one's pgdl.cpu_isa");
	$node2->safe_psql('other',
		"CREATE OR REPLACE FUNCTION pgdl.version() RETURNS text LANGUAGE sql AS \$\$SELECT 'pgdl 0.0.1 another build'\$\$"
	);
	my $before = $coord->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	($ret, $out, $err) = $coord->psql('postgres',
		"SELECT count(*) FROM pgdl.fit_multiple('other_packed', 'grid', 1, 'valid_packed')");
	isnt($ret, 0, 'fit_multiple over a node with another pgdl build fails');
	like($err, qr/server "other" runs a different pgdl build/, '... saying the node runs another build');
	is($coord->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run > $before"),
		'0', '... before any model finished an epoch');
	$coord->safe_psql('postgres',
		"SELECT pgdl.pack('train_rows', 'x', 'label', 'other2_packed', buffer_rows => 50, partitions => 2, seed => 7)");
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('other2_packed', ARRAY['other'])");
	like($err, qr/server "other" runs a different pgdl build/, 'distribute to it is refused too');
	like($err, qr/pgdl 0\.0\.1 another build/, '... and the error shows the build it found');
	is($node2->safe_psql('other', "SELECT count(*) FROM pg_class WHERE relname LIKE 'other2_packed%'"),
		'0', '... before anything was created on the node');
	ok(node_sessions_gone($node1, 2) && node_sessions_gone($node2, 2), 'no session is left on the nodes');
}

# ---------------------------------------------------------------------------
# 1. distribute: every partition moves, whole and once.
# ---------------------------------------------------------------------------
{
	my @expected = map { expected_node_tables('train_packed', $_, 2) } (0, 1);
	like($expected[0], qr/^train_packed_\w+:\d+ train_packed_\w+:\d+$/, 'two partitions go to node1');
	my ($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2'])");
	is($out, '4', 'distribute moves the 4 partitions') or diag($err);
	my @notices = $err =~ /NOTICE:  partition \d of 4 \(\d+ buffers\) is on server "node\d"/g;
	is(scalar @notices, 4, '... with a NOTICE for each');
	is(placement('train_packed'), '0:node1 1:node2 2:node1 3:node2',
		'... round robin: every partition is a foreign table on its node');
	is(contents('train_packed'), $original,
		'count, sum(n) and every x and y read on the coordinator are unchanged');
	is(node_tables($node1, 'train_packed'), $expected[0], 'node1 holds its partitions, whole');
	is(node_tables($node2, 'train_packed'), $expected[1], 'node2 holds its partitions, whole');
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2'])");
	is($out, '0', 'a second distribute moves nothing');
	is(contents('train_packed'), $original, '... and changes nothing');
	is(node_tables($node1, 'train_packed') . ' ' . node_tables($node2, 'train_packed'),
		"$expected[0] $expected[1]", '... on the nodes either');
	ok(node_sessions_gone($node1, 2) && node_sessions_gone($node2, 2), 'distribute leaves no session on the nodes');
}

# ---------------------------------------------------------------------------
# 2. fit_multiple across the nodes: the models of one server, bit for bit.
# ---------------------------------------------------------------------------
$coord->safe_psql(
	'postgres', qq{
CREATE TABLE lb_local AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'grid', $EPOCHS, 'valid_packed', workers => 2);
CREATE TABLE lb_d1 AS SELECT * FROM pgdl.fit_multiple('train_packed', 'grid', $EPOCHS, 'valid_packed');
CREATE TABLE lb_d2 AS SELECT * FROM pgdl.fit_multiple('train_packed', 'grid', $EPOCHS, 'valid_packed', workers_per_node => 2);
SET client_min_messages = warning;
CREATE TABLE lb_fit AS
SELECT c.id AS config, pgdl.fit('ref_packed', a.name, c.config, $EPOCHS, 'valid_packed') AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = 'grid' ORDER BY c.id;
});
my %digests = map { $_ => model_digests($coord, "lb_$_") } qw(local d1 d2 fit);
my $n_digests = () = $digests{fit} =~ /:[0-9a-f]{32}/g;
is($n_digests, 4, 'pgdl.fit on one server: 4 models');
is($digests{d1}, $digests{fit}, 'fit_multiple over 2 nodes, 1 worker each: the models of pgdl.fit on one server, bit for bit');
is($digests{d2}, $digests{fit}, 'fit_multiple over 2 nodes, 2 workers each: the same models');
is($digests{local}, $digests{fit}, 'fit_multiple on one server: the same models');
my %run = map { $_ => run_of("lb_$_") } qw(local d1 d2);
for my $d (qw(d1 d2))
{
	is( $coord->safe_psql(
			'postgres', qq{
		SELECT count(*) = 4 AND bool_and(d.rank = l.rank AND d.epochs = l.epochs AND d.stopped = l.stopped
		                                 AND d.train_loss = l.train_loss AND d.train_accuracy = l.train_accuracy
		                                 AND d.validation_loss = l.validation_loss
		                                 AND d.validation_accuracy = l.validation_accuracy)
		  FROM lb_$d d JOIN lb_local l USING (config)}),
		't',
		"$d: the leaderboard's ranks and metrics are one server's");
	is( $coord->safe_psql(
			'postgres', qq{
		SELECT count(*) = 4 * $EPOCHS AND bool_and(d.train_loss = l.train_loss AND d.validation_loss = l.validation_loss
		                                           AND d.validation_accuracy = l.validation_accuracy)
		  FROM pgdl.run_metrics d JOIN pgdl.run_metrics l USING (config, epoch)
		 WHERE d.run = $run{$d} AND l.run = $run{local}}),
		't',
		"$d: pgdl.run_metrics of every epoch are one server's");
	check_run_rows($run{$d}, 'grid', $EPOCHS, $d);
}
is( $coord->safe_psql(
		'postgres', qq{
	SELECT count(*) = 4 * $EPOCHS AND bool_and(d.weights = l.weights)
	  FROM pgdl.checkpoints d JOIN pgdl.checkpoints l USING (config, epoch)
	 WHERE d.run = $run{d2} AND l.run = $run{local}}),
	't', "every epoch's checkpoint is one server's, bit for bit");
is( $coord->safe_psql('postgres', "SELECT config->>'workers_per_node' FROM pgdl.runs WHERE id = $run{d2}"),
	'2', 'the run records workers_per_node');
is( $coord->safe_psql(
		'postgres', qq{
	SELECT d = r AND (d).n = 2000 FROM
	  (SELECT pgdl.evaluate(l.model, 'train_packed') AS d, pgdl.evaluate(l.model, 'ref_packed') AS r
	     FROM lb_d1 l ORDER BY rank LIMIT 1) s}),
	't', 'pgdl.evaluate on the coordinator reads the distributed table as the local one');

# Successive halving across nodes: the same rungs, decisions and models as on one server.
$coord->safe_psql(
	'postgres', q{
SET client_min_messages = warning;
CREATE TABLE lb_halving_local AS
SELECT * FROM pgdl.fit_multiple('ref_packed', 'grid', 4, 'valid_packed', workers => 2, strategy => 'successive_halving', eta => 2);
CREATE TABLE lb_halving_dist AS
SELECT * FROM pgdl.fit_multiple('train_packed', 'grid', 4, 'valid_packed', strategy => 'successive_halving', eta => 2);
});
is(model_digests($coord, 'lb_halving_dist'), model_digests($coord, 'lb_halving_local'),
	'successive halving across nodes: the models of one server');
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) = 4 AND bool_and(d.stopped = l.stopped AND d.epochs = l.epochs AND d.rank = l.rank)
	       AND bool_or(d.stopped)
	  FROM lb_halving_dist d JOIN lb_halving_local l USING (config)}),
	't', '... with the same rungs: the same models stopped at the same epochs');

# A validation table on a node too (read on the coordinator through postgres_fdw),
# and pgdl.fit of a distributed table.
$coord->safe_psql(
	'postgres', qq{
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_remote', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
SELECT pgdl.distribute('valid_remote', ARRAY['node2']);
CREATE TABLE lb_vr AS SELECT * FROM pgdl.fit_multiple('train_packed', 'grid', $EPOCHS, 'valid_remote');
});
is(placement('valid_remote'), '0:node2', 'the validation table is on node2');
is(model_digests($coord, 'lb_vr'), $digests{fit}, 'validation on a node: the same models');
is( $coord->safe_psql(
		'postgres', q{
	SELECT count(*) = 4 AND bool_and(d.rank = l.rank AND d.validation_loss = l.validation_loss
	                                 AND d.validation_accuracy = l.validation_accuracy)
	  FROM lb_vr d JOIN lb_local l USING (config)}),
	't', '... and the validation metrics of one server');
{
	my ($ret, $out, $err) = $coord->psql(
		'postgres', qq{
SET client_min_messages = warning;
CREATE TABLE lb_fit_dist AS
SELECT c.id AS config, pgdl.fit('train_packed', a.name, c.config, $EPOCHS, 'valid_packed') AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = 'grid' ORDER BY c.id;
});
	is($ret, 0, 'pgdl.fit of the distributed table runs') or diag($err);
	is(model_digests($coord, 'lb_fit_dist'), $digests{fit},
		'pgdl.fit of the distributed table: the models of pgdl.fit on one server');
}

# rmsprop (centered, with momentum) and adagrad: their settings and state travel in the blob as the others',
# and the nodes' models are checked against them (alpha, centered, lr_decay, initial_accumulator_value).
$coord->safe_psql(
	'postgres', qq{
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'grid_new', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "rmsprop", "lr": 0.005, "alpha": 0.9, "momentum": 0.5, "centered": true, "batch_size": 25, "seed": 5}',
                    '{"optimizer": "adagrad", "lr": 0.05, "lr_decay": 0.01, "initial_accumulator_value": 0.1, "batch_size": 25, "seed": 6}']) c
 WHERE a.name = 'small' ORDER BY c;
CREATE TABLE lb_new_local AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'grid_new', $EPOCHS, 'valid_packed', workers => 2);
CREATE TABLE lb_new_dist AS SELECT * FROM pgdl.fit_multiple('train_packed', 'grid_new', $EPOCHS, 'valid_packed',
                                                            workers_per_node => 2);
});
{
	my $new_digests = model_digests($coord, 'lb_new_dist');
	my $n_new = () = $new_digests =~ /:[0-9a-f]{32}/g;
	is($n_new, 2, 'rmsprop and adagrad across the nodes: 2 models');
	is($new_digests, model_digests($coord, 'lb_new_local'), '... the models of one server, bit for bit');
}

# Configurations with a base model: the nodes run the frozen layers at every
# visit (feature_cache => 'auto' finds a node cache too dear for these heads;
# 023_node_cache.pl builds and reuses them), and the models are those of one
# server, with its feature cache or without.
$coord->safe_psql(
	'postgres', q{
SELECT pgdl.fit('ref_packed', 'small', '{"optimizer": "adam", "lr": 0.01}', 1, name => 'base');
SELECT pgdl.grid_search('heads', '{}', '{"base_model": "base", "freeze": [2], "lr": [0.05, 0.1],
  "head": [[{"type": "dense", "units": 4}]], "batch_size": 25}');
});
{
	my ($ret, $out, $err) = $coord->psql(
		'postgres', q{
SET client_min_messages = warning;
CREATE TABLE lb_heads_cached AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'heads', 2, 'valid_packed', feature_cache => 'on');
CREATE TABLE lb_heads_recomputed AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'heads', 2, 'valid_packed', feature_cache => 'off');
CREATE TABLE lb_heads_dist AS SELECT * FROM pgdl.fit_multiple('train_packed', 'heads', 2, 'valid_packed', workers_per_node => 2);
});
	is($ret, 0, 'configurations with a base model train on a distributed table') or diag($err);
	my $cached = model_digests($coord, 'lb_heads_cached');
	like($cached, qr/^\d+:\w{32} \d+:\w{32}$/, '... two models on one server');
	is(model_digests($coord, 'lb_heads_recomputed'), $cached, '... one server: the same with its cache or without');
	is(model_digests($coord, 'lb_heads_dist'), $cached, '... and on the nodes, which run the frozen layers');
	($ret, $out, $err) = $coord->psql(
		'postgres', q{
SET client_min_messages = warning;
CREATE TABLE lb_heads_vr AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'heads', 2, 'valid_remote', feature_cache => 'on');
});
	is($ret, 0, '... on one server with a validation set on a node') or diag($err);
	is(model_digests($coord, 'lb_heads_vr'), $cached, '... the same models');
	is($coord->safe_psql('postgres', q{
		SELECT bool_and(v.validation_loss = c.validation_loss) AND count(*) = 2
		  FROM lb_heads_vr v JOIN lb_heads_cached c USING (config)}),
		't', '... the validation losses of the same set here');
	is( $coord->safe_psql('postgres', q{
		SELECT bool_or(action = 'recompute') AND NOT bool_or(action IN ('build', 'reuse', 'refresh', 'rebuild'))
		  FROM pgdl.explain_fit_multiple('train_packed', 'heads', 2, 'valid_packed')}),
		't', '... explain_fit_multiple says the nodes recompute');
	ok(workers_gone_within($coord, 2), '... and no worker is left behind');
}

# ---------------------------------------------------------------------------
# 4. Cancel and statement_timeout on the coordinator: the remote queries are
# cancelled.  A heavy model's visit of a partition is one query of several
# seconds on its node, so only the coordinator's PQcancel (which the node logs
# as a cancel) stops it within 2 s.  Four models start on the four partitions.
# ---------------------------------------------------------------------------
sub nodes_idle_within
{
	my ($secs, $what) = @_;
	for my $node (@nodes)
	{
		my $name = $node->name;
		ok(node_training_gone($node, $secs), "$what: within $secs s no pgdl.train_partitions runs on $name");
		ok(node_sessions_gone($node, $secs), "$what: ... and no session of the coordinator is left on $name");
	}
}

# Starts fit_multiple of a set in the background once the run exists; the psql handle and the run id.
sub start_run
{
	my ($app, $set, $epochs, @pre) = @_;
	my $before = $coord->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($coord, $app, 'postgres', @pre,
		"SELECT count(*) FROM pgdl.fit_multiple('train_packed', '$set', $epochs, 'valid_packed')");
	ok(poll_until($coord, "SELECT EXISTS (SELECT FROM pgdl.runs WHERE id > $before)", 20), "$app: the run started");
	my $run = $coord->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE id > $before");
	return ($bg, $run);
}

# Both nodes run a visit (the cancel in the first seconds of the run); with
# $min_secs, both have been running theirs for that long at once.
sub both_nodes_train
{
	my ($min_secs) = @_;
	my $sql = "SELECT count(*) = 1 FROM pg_stat_activity WHERE state = 'active' AND application_name = 'pgdl'"
	  . " AND query LIKE '%train_partitions%' AND now() - query_start >= interval '${min_secs} s'";
	my $deadline = time + 20;
	while (time < $deadline)
	{
		return 1 if $node1->safe_psql('postgres', $sql) eq 't' && $node2->safe_psql('postgres', $sql) eq 't';
		Time::HiRes::usleep(20_000);
	}
	return 0;
}

# What a node's log since $offset shows of the stop: a pgdl.train_partitions query
# cancelled, or, when the stop came between two visits, the next one's model half
# sent (the node never ran it: "incomplete message").
sub node_logged_cancel
{
	my ($i, $offset) = @_;
	my $log = substr(slurp_file($nodes[$i]->logfile), $offset);
	return $log =~ qr/pgdl ERROR:  canceling statement due to user request\n[^\n]*pgdl STATEMENT:  [^\n]*train_partitions|pgdl LOG:  incomplete message from client/;
}

# Each node was told to cancel its query: both had trained for a second when the cancel came.
sub nodes_logged_cancel
{
	my ($what, @offsets) = @_;
	ok(node_logged_cancel($_, $offsets[$_]), "$what: " . $nodes[$_]->name . ' was told to cancel its query')
	  for (0, 1);
}

# A timeout comes at a set time, when a node may be between two visits (its
# last query done, the next not sent): at least one node was told to cancel.
sub a_node_logged_cancel
{
	my ($what, @offsets) = @_;
	ok(node_logged_cancel(0, $offsets[0]) || node_logged_cancel(1, $offsets[1]),
		"$what: a node in the middle of a visit was told to cancel its query");
}

{
	my @offsets = map { -s $_->logfile } @nodes;
	my ($bg, $run) = start_run('cl_cancel', 'heavy', 1);
	# a cancel that reaches a node while it still reads the query (a model of
	# 11 MB) is ignored there (the coordinator cancels again until it is not);
	# the visits take several seconds
	ok(both_nodes_train(1), 'cancel: both nodes have trained a model for a second');
	my $start = time;
	is($coord->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cl_cancel'"),
		't', 'cancel the leader');
	my $rc = finish_psql($bg, 10);
	ok(defined $rc && $rc != 0, 'the cancelled fit_multiple fails');
	like($bg->{stderr}, qr/canceling statement due to user request/, '... with the cancel error');
	cmp_ok(time - $start, '<', 3, '... within a few seconds');
	nodes_idle_within(2, 'cancel');
	ok(workers_gone_within($coord, 2), 'cancel: no pgdl worker is left on the coordinator');
	nodes_logged_cancel('cancel', @offsets);
}
{
	my @offsets = map { -s $_->logfile } @nodes;
	# the run's setup takes seconds on a loaded machine, then every visit several:
	# at 8 s both nodes are in the middle of one
	my ($bg, $run) = start_run('cl_timeout', 'heavy', 1, "SET statement_timeout = '8s'");
	ok(both_nodes_train(0), 'statement_timeout: both nodes train a model of the run');
	my $rc = finish_psql($bg, 15);
	ok(defined $rc && $rc != 0, 'fit_multiple under statement_timeout fails');
	like($bg->{stderr}, qr/canceling statement due to statement timeout/, '... with the timeout error');
	nodes_idle_within(2, 'statement_timeout');
	ok(workers_gone_within($coord, 2), 'statement_timeout: no pgdl worker is left on the coordinator');
	a_node_logged_cancel('statement_timeout', @offsets);
}

# A cancel while distribute ships a partition to a node that stopped reading:
# a trigger there sleeps (10 s) on the first row, and the coordinator, which sends 16
# buffers (of 128 kB here) a message, fills its socket with the second.  The
# call ends within 2 s, the node's COPY is cancelled, nothing moved.
{
	$coord->safe_psql(
		'postgres', q{
CREATE TABLE big_rows AS
SELECT i, array_fill(((i % 97) / 97.0)::real, ARRAY[16]) AS x, i % 4 AS label FROM generate_series(1, 24 * 2048) i;
SELECT pgdl.pack('big_rows', 'x', 'label', 'big_packed', buffer_rows => 2048, partitions => 1, seed => 3);
});
	my $before = contents('big_packed');
	my $part = $coord->safe_psql('postgres',
		"SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'big_packed'::regclass");
	# the node's table as an earlier distribute of this partition left it (its comment says so), plus a trigger
	my $marker = $coord->safe_psql('postgres',
		"SELECT 'pgdl.distribute: partition 0 of public.big_packed in database postgres of system ' || system_identifier
		   FROM pg_control_system()");
	$node2->safe_psql(
		'postgres', qq{
CREATE TABLE public.$part (part integer NOT NULL, buffer_id integer NOT NULL, n integer NOT NULL,
                           x real[] NOT NULL, y real[] NOT NULL, PRIMARY KEY (part, buffer_id));
COMMENT ON TABLE public.$part IS '$marker';
CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS \$\$BEGIN PERFORM pg_sleep(10); RETURN NEW; END\$\$;
CREATE TRIGGER stall BEFORE INSERT ON public.$part FOR EACH ROW WHEN (NEW.buffer_id = 0) EXECUTE FUNCTION stall();
});
	my $bg = start_psql($coord, 'cl_ship', 'postgres', "SELECT pgdl.distribute('big_packed', ARRAY['node2'])");
	ok( poll_until($node2,
			"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'pgdl' AND wait_event = 'PgSleep'", 20),
		'distribute: the node stops reading the partition');
	Time::HiRes::usleep(300_000);
	my $start = time;
	is($coord->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cl_ship'"),
		't', 'cancel distribute');
	my $rc = finish_psql($bg, 15);
	my $elapsed = time - $start;
	ok(defined $rc && $rc != 0, 'the cancelled distribute fails');
	like($bg->{stderr}, qr/canceling statement due to user request/, '... with the cancel error');
	cmp_ok($elapsed, '<', 2, '... within 2 s, although the node does not read');
	ok(node_sessions_gone($node2, 2), '... and its session on the node ends');
	is(placement('big_packed'), '0:-', '... and the partition is still here');
	is(contents('big_packed'), $before, '... whole');

	$node2->safe_psql('postgres', "DROP TRIGGER stall ON public.$part");
	my ($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('big_packed', ARRAY['node2'])");
	is($out, '1', 'run again, distribute ships the partition') or diag($err);
	is(contents('big_packed'), $before, '... whole and once');
}

# ---------------------------------------------------------------------------
# 3. A node killed mid-run: a clear error; resume ends with the same bytes.
# ---------------------------------------------------------------------------
{
	my $t0 = time;
	$coord->safe_psql('postgres',
		"CREATE TABLE lb_long AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', $LONG_EPOCHS, 'valid_packed')");
	note(sprintf('the uninterrupted long run took %.1f s', time - $t0));
	my $long_digests = model_digests($coord, 'lb_long');
	check_run_rows(run_of('lb_long'), 'long', $LONG_EPOCHS, 'the uninterrupted long run');

	my ($bg, $run) = start_run('cl_kill', 'long', $LONG_EPOCHS);
	ok(poll_until($coord, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run = $run)", 20),
		'the run checkpoints its first epoch');
	is( $coord->safe_psql('postgres',
			"SELECT count(*) = 2 AND bool_and(epoch >= 1 AND state IN ('waiting', 'training', 'done')) FROM pgdl.progress WHERE run = $run"
		),
		't',
		'pgdl.progress shows both models of the run in flight');
	# every process of node1, to see them gone before it starts again
	my @pids = split /\n/, $node1->safe_psql('postgres', 'SELECT pid FROM pg_stat_activity');
	my $start = time;
	$node1->kill9;
	my $rc = finish_psql($bg, 30);
	my $elapsed = time - $start;
	ok(defined $rc && $rc != 0, 'fit_multiple fails when node1 is killed, without hanging');
	cmp_ok($elapsed, '<', 30, '... within 30 s');
	note(sprintf('the call failed %.1f s after the kill', $elapsed));
	like($bg->{stderr}, qr/ERROR:  pgdl worker \d+ failed: .*server "node1"/, '... with an error naming server node1')
	  or diag($bg->{stderr});
	like($bg->{stderr}, qr/HINT:  Run $run can continue from each model's last epoch with pgdl\.resume\($run\)/,
		'... and a hint with the run id');
	my $host = $node1->host;
	my $port = $node1->port;
	unlike($bg->{stderr}, qr/\Q$host\E|port=|\b$port\b|dbname/, '... and no connection string');
	no_secret($bg->{stderr}, 'node killed');
	ok(node_training_gone($node2, 2) && node_sessions_gone($node2, 2), 'nothing of the run is left on node2');
	cmp_ok($coord->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"),
		'<', 2 * $LONG_EPOCHS, 'the run stopped before its end');

	# the killed postmaster's children leave its shared memory as they notice it is gone
	my $deadline = time + 30;
	Time::HiRes::usleep(50_000) while time < $deadline && grep { kill(0, $_) } @pids;
	is(scalar(grep { kill(0, $_) } @pids), 0, "every process of node1 exits after its postmaster was killed");
	ok($node1->start(fail_ok => 1), 'node1 starts again');
	$coord->safe_psql('postgres', "CREATE TABLE lb_resumed AS SELECT * FROM pgdl.resume($run)");
	is(run_of('lb_resumed'), $run, 'pgdl.resume continues the run');
	is(model_digests($coord, 'lb_resumed'), $long_digests,
		'node killed and resumed: the models of the uninterrupted run, bit for bit');
	check_run_rows($run, 'long', $LONG_EPOCHS, 'node killed and resumed');
}

# ---------------------------------------------------------------------------
# 5. The node runs as the mapped user: passwords as postgres_fdw wants them,
# and the node's privileges.  On the nodes, reader logs in with a password,
# guest without one; neither may read the packed partitions yet.
# ---------------------------------------------------------------------------
for my $node (@nodes)
{
	$node->safe_psql('postgres',
		"SET log_statement = 'none'; CREATE ROLE reader LOGIN PASSWORD '$RIGHT_PW'; CREATE ROLE guest LOGIN;");
	prepend_hba($node, 'local all reader scram-sha-256');
}
$coord->safe_psql(
	'postgres', q{
CREATE ROLE alice LOGIN;
GRANT CREATE ON SCHEMA public TO alice;
GRANT SELECT ON train_packed, valid_packed, train_rows TO alice;
GRANT USAGE ON FOREIGN SERVER node1, node2 TO alice;
CREATE USER MAPPING FOR alice SERVER node1 OPTIONS (user 'reader');
CREATE USER MAPPING FOR alice SERVER node2 OPTIONS (user 'reader');
});
$coord->safe_psql(
	'postgres', q{
INSERT INTO pgdl.architectures (owner, name, spec) SELECT 'alice', name, spec FROM pgdl.architectures WHERE name = 'small';
INSERT INTO pgdl.configs (owner, set_name, architecture, config)
SELECT 'alice', 'alice_set', a.id, g.config FROM pgdl.architectures a, grid_configs g
 WHERE a.name = 'small' AND a.owner = 'alice'::regrole ORDER BY g.ord;
});

sub alice_fit
{
	my ($what) = @_;
	my ($ret, $out, $err) = $coord->psql('postgres',
		"CREATE TABLE IF NOT EXISTS alice_lb AS SELECT * FROM pgdl.fit_multiple('train_packed', 'alice_set', $EPOCHS, 'valid_packed')",
		extra_params => [ '-U', 'alice' ]);
	no_secret($err, $what);
	ok(workers_gone_within($coord, 2), "$what: no pgdl worker is left behind");
	return ($ret, $err);
}

sub set_mappings
{
	my ($options) = @_;
	$coord->safe_psql('postgres',
		"SET log_statement = 'none'; ALTER USER MAPPING FOR alice SERVER node1 OPTIONS ($options); ALTER USER MAPPING FOR alice SERVER node2 OPTIONS ($options);"
	);
}

{
	my ($ret, $err) = alice_fit('no password');
	isnt($ret, 0, 'a user mapping of a role that is not a superuser, without a password: refused');
	like($err, qr/password is required to connect to server "node\d"/, '... password is required');

	# postgres_fdw's rule: only a superuser may waive the password
	my ($r2, $o2, $e2) = $coord->psql('postgres',
		"ALTER USER MAPPING FOR alice SERVER node1 OPTIONS (ADD password_required 'false')",
		extra_params => [ '-U', 'alice' ]);
	isnt($r2, 0, 'alice may not waive the password of her own mapping');

	# a password the node never asks for (guest logs in on trust) does not count
	set_mappings("SET user 'guest', ADD password '$WRONG_PW'");
	($ret, $err) = alice_fit('unused password');
	isnt($ret, 0, 'a mapping whose password the node does not ask for: refused');
	like($err, qr/password is required to connect to server "node\d"/, '... password is required');

	# a superuser waives it: the node's own privileges decide
	set_mappings("DROP password, ADD password_required 'false'");
	($ret, $err) = alice_fit('password_required false');
	isnt($ret, 0, 'password_required false, the mapped user without SELECT on the node: refused');
	like($err, qr/server "node\d": permission denied for table train_packed_/,
		"... with the node's permission error, naming the server");

	# the wrong password: the node refuses the login
	set_mappings("SET user 'reader', DROP password_required, ADD password '$WRONG_PW'");
	($ret, $err) = alice_fit('wrong password');
	isnt($ret, 0, 'a wrong password: refused');
	like($err, qr/could not connect to server "node\d"/, '... could not connect, naming the server');

	# the right password: as reader, who may not read the node's partitions
	set_mappings("SET password '$RIGHT_PW'");
	($ret, $err) = alice_fit('reader without SELECT');
	isnt($ret, 0, 'the right password, the mapped user without SELECT on the node: refused');
	like($err, qr/server "node\d": permission denied for table train_packed_/,
		"... with the node's permission error, naming the server");

	for my $node (@nodes)
	{
		$node->safe_psql('postgres',
			"DO \$\$ DECLARE t text; BEGIN FOR t IN SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'train_packed_%' LOOP EXECUTE format('GRANT SELECT ON %I TO reader', t); END LOOP; END \$\$"
		);
	}
	($ret, $err) = alice_fit('reader with SELECT');
	is($ret, 0, 'granted SELECT on the nodes, alice trains across them') or diag($err);
	is( $coord->safe_psql(
			'postgres', q{
		SELECT count(*) = 2 AND bool_and(ma.weights = mg.weights)
		  FROM alice_lb a JOIN lb_d1 g ON g.architecture = a.architecture AND g.config_json = a.config_json
		  JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mg ON mg.id = g.model}),
		't', "... the same models as the superuser's run");
}

# ---------------------------------------------------------------------------
# 6. A password the node refuses, a server that is not there: no password in
# the errors (checked above and here) nor in any log line (checked at the end).
# ---------------------------------------------------------------------------
{
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $host = $node1->host;
	$coord->safe_psql(
		'postgres', qq{
SET log_statement = 'none';
CREATE SERVER nowhere FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER nowhere OPTIONS (user 'postgres', password '$WRONG_PW');
CREATE USER MAPPING FOR alice SERVER nowhere OPTIONS (user 'reader', password '$WRONG_PW');
GRANT USAGE ON FOREIGN SERVER nowhere TO alice;
});
	my ($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('ref_packed', ARRAY['nowhere'])");
	isnt($ret, 0, 'distribute to a server that is not there fails');
	like($err, qr/could not connect to server "nowhere"/, '... could not connect, naming the server');
	no_secret($err, 'distribute to nowhere');
	is(placement('ref_packed'), '0:- 1:- 2:- 3:-', '... and every partition is still here');

	# alice's own packed table, to her node1 mapping with the wrong password
	set_mappings("SET password '$WRONG_PW'");
	$coord->safe_psql('postgres',
		"SELECT pgdl.pack('train_rows', 'x', 'label', 'alice_packed', buffer_rows => 50, partitions => 2, seed => 7)",
		extra_params => [ '-U', 'alice' ]);
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('alice_packed', ARRAY['node1'])",
		extra_params => [ '-U', 'alice' ]);
	isnt($ret, 0, 'distribute as alice with a wrong password fails');
	like($err, qr/could not connect to server "node1"/, '... could not connect, naming the server');
	no_secret($err, 'distribute with a wrong password');
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('alice_packed', ARRAY['nowhere'])",
		extra_params => [ '-U', 'alice' ]);
	like($err, qr/could not connect to server "nowhere"/, 'as alice to a server that is not there: could not connect');
	no_secret($err, 'alice to nowhere');
	$coord->safe_psql('postgres', 'GRANT SELECT ON ref_packed TO alice');
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('ref_packed', ARRAY['node1'])",
		extra_params => [ '-U', 'alice' ]);
	like($err, qr/must be owner of table ref_packed/, 'distribute of a table alice does not own: refused');
	$coord->safe_psql('postgres', "CREATE SERVER locked FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port')");
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('alice_packed', ARRAY['locked'])",
		extra_params => [ '-U', 'alice' ]);
	like($err, qr/permission denied for foreign server locked/, 'distribute to a server alice may not use: refused');
	is(placement('alice_packed'), '0:- 1:-', "alice's partitions are all still here");
	is( $coord->safe_psql('postgres',
			"SET log_statement = 'none'; SELECT count(*) FROM pgdl.runs r WHERE r::text LIKE '%$WRONG_PW%' OR r::text LIKE '%$RIGHT_PW%'"),
		'0', 'no password in pgdl.runs');
}

# ---------------------------------------------------------------------------
# 7. A hostile node: trusted with data, not with the coordinator.  On node1,
# pgdl.train_partitions becomes a wrapper of the real one that returns, as the
# table hostile says, a model that is not the one sent, trained: each a valid
# blob (its checksum right), made with pgdl's own functions there.  The
# coordinator refuses each, naming the server and what differs, and stores
# nothing from the run; node2, honest, goes on training; the wrapper passing
# the real result through trains the models of one server.
# ---------------------------------------------------------------------------
$node1->safe_psql(
	'postgres', q{
CREATE TABLE public.hostile (mode text NOT NULL);
INSERT INTO public.hostile VALUES ('honest');
ALTER FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer, bytea) RENAME TO train_partitions_real;
CREATE FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer DEFAULT 1, bytea DEFAULT NULL)
	RETURNS TABLE (model bytea, examples bigint, loss_sum double precision, correct bigint, n bigint, diverged boolean)
	LANGUAGE plpgsql SET search_path = pg_catalog AS $f$
#variable_conflict use_column
DECLARE
	r record;
	m bytea;
	mode text := (SELECT h.mode FROM public.hostile h);
	small text := '{"input": [16], "layers": [{"type": "dense", "units": %s}, {"type": "%s"}, {"type": "dense", "units": 4}]}';
	n_params int;
	retrain text := format('SELECT pgdl.train(x, y, n, $1, $2 ORDER BY part, buffer_id) FROM %s WHERE part = ANY($3)', $3);
BEGIN
	SELECT * INTO r FROM pgdl.train_partitions_real($1, $2, $3, $4, $5, $6) t;
	m := r.model;
	n_params := (SELECT sum(cardinality(w."values")) FROM pgdl.model_weights(r.model) w);
	CASE mode
	WHEN 'honest' THEN NULL;
	WHEN 'architecture' THEN	-- tanh for relu: the same parameters
		m := pgdl.model_from_weights(format(small, 32, 'tanh')::jsonb, array_fill(0.01::real, ARRAY[n_params]), NULL, 0);
	WHEN 'parameters' THEN
		m := pgdl.model_from_weights(format(small, 33, 'relu')::jsonb, array_fill(0.01::real, ARRAY[n_params + 21]), NULL, 0);
	WHEN 'optimizer' THEN
		EXECUTE retrain INTO m USING $1, $2 || '{"optimizer": "adam", "momentum": 0}', $4;
	WHEN 'lr' THEN
		EXECUTE retrain INTO m USING $1, $2 || '{"lr": 0.5}', $4;
	WHEN 'seed' THEN			-- trained with the configuration sent, from a model of another seed
		EXECUTE retrain INTO m USING pgdl.model_from_weights(format(small, 32, 'relu')::jsonb,
			array_fill(0.01::real, ARRAY[n_params]), NULL, 99), $2, $4;
	WHEN 'untrained' THEN		-- the model sent, as if trained
		m := $1;
	WHEN 'more_steps' THEN		-- trained again, one example a step
		EXECUTE retrain INTO m USING r.model, $2 || '{"batch_size": 1}', $4;
	WHEN 'examples' THEN
		r.examples := r.examples * 2;
	WHEN 'flipped' THEN			-- a bit flipped, the checksum not made again
		m := set_byte(m, 100, get_byte(m, 100) # 1);
	END CASE;
	RETURN QUERY SELECT m, r.examples, r.loss_sum, r.correct, r.n, r.diverged;
END
$f$;
});
$coord->safe_psql(
	'postgres', q{
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'hostile', a.id, '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}'
  FROM pgdl.architectures a WHERE a.name = 'small' AND a.owner = 'postgres'::regrole;
});
my $hostile_config = $coord->safe_psql('postgres', "SELECT id FROM pgdl.configs WHERE set_name = 'hostile'");

sub set_hostile
{
	my ($mode) = @_;
	$node1->safe_psql('postgres', "UPDATE public.hostile SET mode = '$mode'");
	return;
}

# What the coordinator holds of models, checkpoints and metrics.
sub stored
{
	return $coord->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM pgdl.models) || ' / ' || (SELECT count(*) FROM pgdl.checkpoints) || ' / ' || (SELECT count(*) FROM pgdl.run_metrics)}
	);
}

{
	# what each is refused with (WHAT: the configuration or round), and its detail
	my %refused = (
		architecture => [ q{server "node1" returned a model of another architecture for WHAT},
			q{Its layer 1 is tanh, the model sent's relu\.} ],
		parameters => [ q{server "node1" returned a model with another parameter count for WHAT},
			q{It has 697 parameters, the model sent 676\.} ],
		optimizer => [ q{server "node1" returned a model with another optimizer for WHAT},
			q{It has adam, the configuration sent sgd\.} ],
		lr => [ q{server "node1" returned a model with another optimizer for WHAT},
			q{Its "lr" is 0\.5, the configuration's 0\.100000001\.} ],
		seed => [ q{server "node1" returned a model with another seed for WHAT},
			q{Its seed is 99, the model sent's \d+\.} ],
		untrained => [ q{server "node1" returned a model whose step count does not match its training for WHAT},
			q{It took 0 optimizer steps for the (\d+) examples it reports; in batches of at most 25 they take between \d+ and \1\.} ],
		more_steps => [ q{server "node1" returned a model whose step count does not match its training for WHAT},
			q{It took \d+ optimizer steps for the (\d+) examples it reports; in batches of at most 25 they take between \d+ and \1\.} ],
		examples => [ q{server "node1" returned inconsistent example counts for WHAT},
			q{It reports \d+ examples trained, and \d+ in its loss figures\.} ],
		flipped => [ q{server "node1" returned a corrupt model for WHAT},
			q{Model blob is corrupt \(checksum mismatch\)\.} ],
	);
	my $refusal = sub {
		my ($mode, $what) = @_;
		(my $msg = $refused{$mode}[0]) =~ s/WHAT/$what/;
		return ($msg, $refused{$mode}[1]);
	};
	for my $mode (sort keys %refused)
	{
		set_hostile($mode);
		my $before = stored();
		my $offset = -s $coord->logfile;
		my ($ret, $out, $err) = $coord->psql('postgres',
			"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'hostile', 1, 'valid_packed')");
		isnt($ret, 0, "hostile node, $mode: fit_multiple fails");
		my ($msg, $detail) = $refusal->($mode, "configuration $hostile_config");
		like($err, qr/ERROR:  pgdl worker \d+ failed: $msg\n/, "... refusing the model: $mode") or diag($err);
		# the caller gets the worker's message; its detail is in the log
		like(substr(slurp_file($coord->logfile), $offset), qr/ERROR:  $msg\n[^\n]*DETAIL:  $detail/,
			'... whose detail says what differs');
		is(stored(), $before, '... and stores nothing from the run');
		ok(workers_gone_within($coord, 2), '... and no worker is left behind');
	}
	for my $mode (qw(architecture untrained))
	{
		set_hostile($mode);
		my $before = stored();
		my ($ret, $out, $err) = $coord->psql('postgres',
			"SELECT pgdl.fit_federated('train_packed', 'small', '{\"optimizer\": \"sgd\", \"lr\": 0.1, \"momentum\": 0.9, \"batch_size\": 25, \"seed\": 1}', 2, 1)");
		isnt($ret, 0, "hostile node, $mode: fit_federated fails");
		my ($msg, $detail) = $refusal->($mode, 'round 1');
		like($err, qr/ERROR:  $msg\nDETAIL:  $detail/, "... refusing the site's model: $mode") or diag($err);
		is(stored(), $before, '... and stores nothing');
	}

	# node2 is honest: a table of its own trains while node1 is hostile
	set_hostile('architecture');
	my ($ret, $out, $err) = $coord->psql(
		'postgres', q{
SET client_min_messages = warning;
CREATE TABLE lb_node2 AS SELECT * FROM pgdl.fit_multiple('valid_remote', 'hostile', 2);
SELECT pgdl.fit_federated('valid_remote', 'small', '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}', 2, 1) > 0;
});
	is($ret, 0, 'while node1 is hostile, fit_multiple and fit_federated over node2 train') or diag($err);
	is($coord->safe_psql('postgres', 'SELECT count(*) FROM lb_node2 l JOIN pgdl.models m ON m.id = l.model'),
		'1', '... and store their models');

	# the real result passed through: the models of one server
	set_hostile('honest');
	($ret, $out, $err) = $coord->psql('postgres',
		"CREATE TABLE lb_hostile AS SELECT * FROM pgdl.fit_multiple('train_packed', 'hostile', $EPOCHS, 'valid_packed')");
	is($ret, 0, 'node1 passing the real result through: fit_multiple trains') or diag($err);
	is( $coord->safe_psql(
			'postgres', q{
		SELECT count(*) = 1 AND bool_and(ma.weights = mg.weights)
		  FROM lb_hostile a JOIN lb_d1 g ON g.architecture = a.architecture AND g.config_json = a.config_json
		  JOIN pgdl.models ma ON ma.id = a.model JOIN pgdl.models mg ON mg.id = g.model}),
		't', '... the model of the same configuration trained across the honest nodes, bit for bit');
	$node1->safe_psql(
		'postgres', q{
DROP FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer, bytea);
ALTER FUNCTION pgdl.train_partitions_real(bytea, jsonb, regclass, integer[], integer, bytea) RENAME TO train_partitions;
DROP TABLE public.hostile;
});
}

# ---------------------------------------------------------------------------
# 8. distribute interrupted half way, then run again: every partition on a
# node once, nothing lost or duplicated.
# ---------------------------------------------------------------------------
{
	$coord->safe_psql('postgres',
		"SELECT pgdl.pack('train_rows', 'x', 'label', 'half_packed', buffer_rows => 50, partitions => 4, seed => 9)");
	my $before = contents('half_packed');
	my @expected = map { expected_node_tables('half_packed', $_, 2) } (0, 1);
	my ($p1) = $expected[1] =~ /^(half_packed_\w+):/;

	# node2 holds a table of that name that pgdl.distribute did not make (a site's own data): it is not
	# emptied; partition 0 reached node1 first
	$node2->safe_psql('postgres', "CREATE TABLE $p1 (part integer); INSERT INTO $p1 VALUES (42)");
	my ($ret, $out, $err) =
	  $coord->psql('postgres', "SELECT pgdl.distribute('half_packed', ARRAY['node1', 'node2'])");
	isnt($ret, 0, 'distribute fails on the node that has a table of that name');
	like($err, qr/server "node2" has a table public\.\Q$p1\E that pgdl.distribute did not make/,
		"... which it refuses to empty") or diag($err);
	is($node2->safe_psql('postgres', "SELECT string_agg(part::text, ',') FROM $p1"), '42', "... and the node's table keeps its rows");
	like($err, qr/NOTICE:  partition 1 of 4 .* is on server "node1"/, '... after partition 0 reached node1');
	is(placement('half_packed'), '0:- 1:- 2:- 3:-', 'the failed call moved nothing for good');
	is(contents('half_packed'), $before, '... and lost nothing');

	# node2 is down: partition 0 is copied again, partition 1 cannot go
	$node2->safe_psql('postgres', "DROP TABLE $p1");
	$node2->stop('immediate');
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('half_packed', ARRAY['node1', 'node2'])");
	isnt($ret, 0, 'distribute fails while node2 is down');
	like($err, qr/could not connect to server "node2"/, '... could not connect, naming the server');
	is(contents('half_packed'), $before, '... and loses nothing');

	$node2->start;
	($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('half_packed', ARRAY['node1', 'node2'])");
	is($out, '4', 'run again, distribute finishes the job') or diag($err);
	is(placement('half_packed'), '0:node1 1:node2 2:node1 3:node2', 'every partition is on its node');
	is(contents('half_packed'), $before, 'count, sum(n) and every x and y are the original');
	is(node_tables($node1, 'half_packed'), $expected[0], 'node1 holds its partitions once, whole');
	is(node_tables($node2, 'half_packed'), $expected[1], 'node2 holds its partitions once, whole');
}

# ---------------------------------------------------------------------------
# Logs: no password anywhere, no crash of the coordinator.
# ---------------------------------------------------------------------------
$_->stop for ($coord, $node1, $node2);
for my $node ($coord, $node1, $node2)
{
	my $log = slurp_file($node->logfile);
	my $name = $node->name;
	unlike($log, qr/\Q$WRONG_PW\E/, "$name: the refused password is in no log line");
	unlike($log, qr/\Q$RIGHT_PW\E/, "$name: the right password is in no log line");
	unlike($log, qr/PANIC/, "$name: no PANIC");
}
like(slurp_file($node1->logfile), qr/password authentication failed for user "reader"/,
	'node1 logged the refused login');
unlike(slurp_file($coord->logfile), qr/was terminated by signal/, 'no process of the coordinator was killed by a signal');

done_testing();
