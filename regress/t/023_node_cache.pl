# Feature caches on the nodes of a distributed packed table.
#
# A first pgdl.fit_multiple of configurations with a base model has each node
# materialize the frozen layers' outputs over the partitions it holds (a table
# in its pgdl_cache, the caller's, recorded in the coordinator's
# pgdl.node_feature_cache); explain_fit_multiple then says `reuse` rather than
# `recompute`, and a second run reads the caches: its models are, bit for bit,
# those of a run that recomputes and those of one server.  A change to a node's
# table makes explain say `refresh` and the next run refresh it; a base model
# with other weights makes it `rebuild` (the old cache dropped).  A forged
# catalog row naming another relation is refused, and a cache is readable by
# its owner only.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord', "max_worker_processes = 16\n$LOG_CONF");
my $node1 = new_pgdl_node('node1', $LOG_CONF);
my $node2 = new_pgdl_node('node2', $LOG_CONF);
add_node_server($coord, 'node1', $node1);
add_node_server($coord, 'node2', $node2);

$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('train_rows', 'x', 'label', 'ref_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2']);
SELECT pgdl.fit('ref_packed', 'small', '{"optimizer": "adam", "lr": 0.01}', 1, name => 'base');
SELECT pgdl.grid_search('heads', '{}', '{"base_model": "base", "freeze": [2], "lr": [0.05, 0.1],
  "head": [[{"type": "dense", "units": 4}]], "batch_size": 25}');
});

sub explain_action
{
	my ($mode) = @_;
	return $coord->safe_psql('postgres',
		"SELECT action FROM pgdl.explain_fit_multiple('train_packed', 'heads', 2, 'valid_packed', feature_cache => '$mode') WHERE \"group\" = 1"
	);
}

sub fit
{
	my ($table, $source, $mode) = @_;
	my ($ret, $out, $err) = $coord->psql('postgres',
		"SET client_min_messages = warning; CREATE TABLE $table AS SELECT * FROM pgdl.fit_multiple('$source', 'heads', 2, 'valid_packed', workers_per_node => 2, feature_cache => '$mode')"
	);
	is($ret, 0, "fit_multiple into $table") or diag($err);
	return model_digests($coord, $table);
}

# the caches on a node: name:rows, by name
sub node_caches
{
	my ($node) = @_;
	return $node->safe_psql(
		'postgres', q{
		SELECT coalesce(string_agg(c.relname || ':' || (xpath('/row/n/text()',
		         query_to_xml(format('SELECT count(*) AS n FROM pgdl_cache.%I', c.relname), false, true, '')))[1]::text,
		         ' ' ORDER BY c.relname), '')
		  FROM pg_class c WHERE c.relnamespace = 'pgdl_cache'::regnamespace AND c.relkind = 'r'});
}

# ---------------------------------------------------------------------------
# 1. First run materializes on the nodes; the second reuses.
# ---------------------------------------------------------------------------
is(explain_action('on'),  'materialize', 'explain before any run: the nodes materialize (feature_cache => on)');
is(explain_action('off'), 'recompute',   'feature_cache => off: the nodes recompute');
my $reference = fit('lb_ref', 'ref_packed', 'off');
like($reference, qr/^\d+:\w{32} \d+:\w{32}$/, 'one server: two models');
my $recomputed = fit('lb_off', 'train_packed', 'off');
is($recomputed, $reference, 'nodes that recompute: the models of one server');
is(node_caches($node1) . node_caches($node2), '', '... and no cache is made on a node');

my $first = fit('lb_first', 'train_packed', 'on');
is($first, $reference, 'the run that materializes the caches: the same models');
like(node_caches($node1), qr/^node_\d+_k2_\w{8}_\d+:10 node_\d+_k2_\w{8}_\d+:10$/,
	'node1 holds a cache of each of its two partitions (10 buffers each)') or diag(node_caches($node1));
is($coord->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT server), bool_and(cache LIKE 'node\\_%') FROM pgdl.node_feature_cache"),
	'4|2|t', 'the coordinator records the 4 caches, on both nodes');
is(explain_action('auto'), 'reuse', 'explain of a second run: reuse, not recompute');
like($coord->safe_psql('postgres',
		"SELECT cache || ' / ' || reason FROM pgdl.explain_fit_multiple('train_packed', 'heads', 2, 'valid_packed') WHERE \"group\" = 1"),
	qr/^node1: pgdl_cache\.node_.* node2: pgdl_cache\.node_.* \/ every node .* valid cache/,
	'... naming the nodes\' caches and why');
my $second = fit('lb_second', 'train_packed', 'auto');
is($second, $reference, 'the second run, reading the caches: the bytes of a run without them');

# The nodes' visits read the caches: zeroed features in one give other models.
{
	my $cache = $node1->safe_psql('postgres',
		"SELECT relname FROM pg_class WHERE relnamespace = 'pgdl_cache'::regnamespace AND relkind = 'r' ORDER BY relname LIMIT 1");
	$node1->safe_psql('postgres', "UPDATE pgdl_cache.$cache SET x = array_fill(0::real, ARRAY[array_length(x, 1)])");
	my $tampered = fit('lb_tampered', 'train_packed', 'auto');
	isnt($tampered, $reference, 'a visit reads the cache: zeroed features give other models');
}

# ---------------------------------------------------------------------------
# 2. Invalidation: a node's table changes (refresh), the base model changes (rebuild).
# ---------------------------------------------------------------------------
{
	my @tables = split /\n/, $node1->safe_psql('postgres',
		"SELECT relname FROM pg_class WHERE relname LIKE 'train_packed%' AND relkind = 'r' ORDER BY relname");
	is(scalar @tables, 2, 'node1 holds two tables of train_packed');
	# an update that leaves the rows' values as they are still makes each table another version
	$node1->safe_psql('postgres', "UPDATE $_ SET n = n") for @tables;
	is(explain_action('on'), 'refresh', 'a node\'s table changed: explain says refresh');
	my $refreshed = fit('lb_refreshed', 'train_packed', 'on');
	is($refreshed, $reference, '... and the refreshed caches give the models of one server again');
	is(explain_action('auto'), 'reuse', '... then reuse');
}
{
	$coord->safe_psql('postgres', q{
UPDATE pgdl.models SET weights = (SELECT weights FROM pgdl.models WHERE name = 'base')
 WHERE name = 'base';  -- the same weights: no change yet
SELECT pgdl.fit('ref_packed', 'small', '{"optimizer": "adam", "lr": 0.02}', 1, name => 'base2');
UPDATE pgdl.models SET weights = (SELECT weights FROM pgdl.models WHERE name = 'base2') WHERE name = 'base';
});
	is(explain_action('on'), 'rebuild', 'the base model changed: explain says rebuild');
	# the planner weighs building against recomputing, as on one server: these heads are too small to pay
	like($coord->safe_psql('postgres',
			"SELECT action || ' / ' || reason FROM pgdl.explain_fit_multiple('train_packed', 'heads', 2, 'valid_packed') WHERE \"group\" = 1"),
		qr/^recompute \/ recomputing \([\d.]+ s\) is cheaper than materializing \([\d.]+ s\)/,
		'... which feature_cache => auto weighs against recomputing, and finds too dear for these heads');
	my $ref2 = fit('lb_ref2', 'ref_packed', 'off');
	my $rebuilt = fit('lb_rebuilt', 'train_packed', 'on');
	is($rebuilt, $ref2, '... and the rebuilt caches give the models of one server with the new base');
	isnt($rebuilt, $reference, '... which are other models than before');
	my $caches = node_caches($node1);
	my $n = () = $caches =~ /node_/g;
	is($n, 2, '... the old caches are dropped on the node (two left on node1)') or diag($caches);
	is($coord->safe_psql('postgres', 'SELECT count(*), count(DISTINCT base_hash) FROM pgdl.node_feature_cache'),
		'4|1', '... and their rows replaced');
}

# ---------------------------------------------------------------------------
# 3. A forged row, and who may read a cache.
# ---------------------------------------------------------------------------
{
	$coord->safe_psql('postgres',
		"UPDATE pgdl.node_feature_cache SET cache = 'pg_authid' WHERE id = (SELECT min(id) FROM pgdl.node_feature_cache)");
	my ($ret, $out, $err) = $coord->psql('postgres',
		"SELECT action FROM pgdl.explain_fit_multiple('train_packed', 'heads', 2, 'valid_packed')");
	isnt($ret, 0, 'a forged row naming another relation: the plan is refused');
	like($err, qr/pgdl\.node_feature_cache row \d+ names "pg_authid", not the cache of server "node\d"/,
		'... saying which row and what the node keeps');
	$coord->safe_psql('postgres', "DELETE FROM pgdl.node_feature_cache WHERE cache = 'pg_authid'");
	is(explain_action('on'), 'refresh', '... once the row is gone, the node\'s cache is recorded again by a refresh');
}
{
	$node1->safe_psql('postgres', q{
CREATE ROLE other LOGIN;
GRANT USAGE ON SCHEMA pgdl_cache TO other;
});
	my $cache = $node1->safe_psql('postgres',
		"SELECT relname FROM pg_class WHERE relnamespace = 'pgdl_cache'::regnamespace AND relkind = 'r' ORDER BY relname LIMIT 1");
	my ($ret, $out, $err) = $node1->psql('postgres', "SET ROLE other; SELECT count(*) FROM pgdl_cache.$cache");
	isnt($ret, 0, 'another role of the node cannot read a cache');
	like($err, qr/permission denied/, '... permission denied');
	is($node1->safe_psql('postgres',
			"SELECT bool_and(relacl IS NULL AND relowner = 'postgres'::regrole) FROM pg_class WHERE relnamespace = 'pgdl_cache'::regnamespace AND relkind = 'r'"),
		't', '... every cache is its role\'s, with nothing granted');
}

ok(workers_gone_within($coord, 5), 'no worker is left behind');
done_testing();
