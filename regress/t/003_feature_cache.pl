# Feature caches under pgdl.fit_multiple's background workers.
#
# Over many epochs, heads trained on cached features are the bytes of heads
# trained with the frozen prefix recomputed; a run cancelled after its caches
# were built resumes from its checkpoints (whole models), reuses the caches and
# ends with the models of an uninterrupted run, and refuses to resume when the
# base model's frozen layers changed; two runs that build the same cache at once
# both succeed and leave one cache; another role can neither stall a build with
# advisory locks nor take or plant the name of a cache view.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $LONG_EPOCHS = 400;    # the run that is cancelled: about 2 s here

my $node = PostgreSQL::Test::Cluster->new('cache');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

sub drop_caches
{
	$node->safe_psql('postgres', 'SELECT pgdl.cleanup_feature_cache(\'0 seconds\')');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.feature_cache'), '0', 'no caches left');
}

# ---------------------------------------------------------------------------
# Data: 2,000 points of 16 features, 4 partitions, 500 validation points; a base
# MLP; four heads on two frozen depths (the deeper cache staged from the other).
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgdl;
CREATE TABLE points AS
SELECT i, x, ((x[1] + x[2] > x[3] + x[4])::int * 2 + (x[5] > x[6])::int) AS label
  FROM generate_series(1, 2500) i,
       LATERAL (SELECT array_agg(sin(i * k * 0.37 + k)::real ORDER BY k) AS x FROM generate_series(1, 16) k) f;
CREATE TABLE train_points AS SELECT * FROM points WHERE i <= 2000;
CREATE TABLE valid_points AS SELECT * FROM points WHERE i > 2000;
SELECT pgdl.pack('train_points', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4);
SELECT pgdl.pack('valid_points', 'x', 'label', 'valid_packed', buffer_rows => 100,
                 partitions => 1, reference => 'train_packed');
SELECT pgdl.fit('train_packed', '{"input": [16], "layers": [{"type": "dense", "units": 32}, {"type": "batchnorm"},
  {"type": "relu"}, {"type": "dense", "units": 32}, {"type": "relu"}, {"type": "dense", "units": 4}]}'::jsonb,
  '{"optimizer": "adam", "lr": 0.01}', 3, name => 'base');
SELECT pgdl.grid_search('heads', '{}', '{"base_model": "base", "freeze": [3, 5], "lr": [0.05, 0.02],
  "head": [[{"type": "dense", "units": 16}, {"type": "relu"}, {"type": "dense", "units": 4}]],
  "momentum": 0.9, "batch_size": 25}');
});

# ---------------------------------------------------------------------------
# Cached and recomputed, many epochs: the same bytes.
# ---------------------------------------------------------------------------
$node->safe_psql('postgres',
	"CREATE TABLE lb_on AS SELECT * FROM pgdl.fit_multiple('train_packed', 'heads', $LONG_EPOCHS, 'valid_packed', workers => 2, feature_cache => 'on')"
);
my $digests = model_digests($node, 'lb_on');
is( $node->safe_psql('postgres', 'SELECT count(*) || \' \' || bool_and(valid) || \' \' || count(staged_from) FROM pgdl.feature_cache'),
	'4 true 2', 'the run built four caches (training and validation at two depths), two of them staged');
is($node->safe_psql('postgres', 'SELECT min(validation_accuracy) > 0.6 FROM lb_on'), 't', 'every head learned');
$node->safe_psql('postgres',
	"CREATE TABLE lb_off AS SELECT * FROM pgdl.fit_multiple('train_packed', 'heads', $LONG_EPOCHS, 'valid_packed', workers => 2, feature_cache => 'off')"
);
is(model_digests($node, 'lb_off'), $digests, "$LONG_EPOCHS epochs on cached features: the models of the recomputed prefix, bit for bit");

# ---------------------------------------------------------------------------
# Cancel after the caches are built, then resume: the caches are reused and the
# models are those of an uninterrupted run; not while the base model differs.
# ---------------------------------------------------------------------------
drop_caches();
{
	my $before = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($node, 'cache_cancel', 'postgres',
		"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'heads', $LONG_EPOCHS, 'valid_packed', workers => 2, feature_cache => 'on')"
	);
	ok(poll_until($node, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run > $before)", 30),
		'the run checkpoints its first epoch');
	my $run = $node->safe_psql('postgres', "SELECT max(run) FROM pgdl.checkpoints WHERE run > $before");
	is( $node->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cache_cancel'"),
		't', 'cancel the leader');
	my $rc = finish_psql($bg, 30);
	ok(defined $rc && $rc != 0, 'the cancelled run fails');
	ok(poll_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pgdl worker'", 20),
		'its workers are gone');
	is($node->safe_psql('postgres', 'SELECT count(*) || \' \' || bool_and(valid) FROM pgdl.feature_cache'),
		'4 true', 'the caches it built stay, committed and valid');
	my $created = $node->safe_psql('postgres',
		'SELECT string_agg(created::text, \',\' ORDER BY id) FROM pgdl.feature_cache WHERE staged_from IS NULL');
	is( $node->safe_psql('postgres',
			"SELECT bool_and(array_length(pgdl.predict(c.weights, p.x), 1) = 4) FROM pgdl.checkpoints c,
			        (SELECT x FROM points LIMIT 1) p WHERE c.run = $run"),
		't', 'its checkpoints are whole models, frozen layers included');

	# the base changes: resuming would train on other features than the run started with
	$node->safe_psql('postgres', q{
		CREATE TABLE base_weights AS SELECT weights FROM pgdl.models WHERE name = 'base';
		SELECT pgdl.fit('train_packed', (SELECT spec FROM pgdl.models WHERE name = 'base'), '{"seed": 9}', 1, name => 'other');
		UPDATE pgdl.models SET weights = (SELECT weights FROM pgdl.models WHERE name = 'other') WHERE name = 'base'});
	my ($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)");
	like($err, qr/the base model of configuration \d+ changed since run $run started/,
		'resume refuses a base model whose frozen layers changed');
	$node->safe_psql('postgres', 'UPDATE pgdl.models SET weights = (SELECT weights FROM base_weights) WHERE name = \'base\'');

	$node->safe_psql('postgres', "CREATE TABLE lb_resumed AS SELECT * FROM pgdl.resume($run)");
	is(model_digests($node, 'lb_resumed'), $digests, 'cancelled and resumed: the models of the uninterrupted run, bit for bit');
	# updating the base, even to the same weights, made the caches stale: the run refreshed the
	# ones computed from the packed tables, and built the staged ones again
	is( $node->safe_psql('postgres',
			'SELECT string_agg(created::text, \',\' ORDER BY id) FROM pgdl.feature_cache WHERE staged_from IS NULL'),
		$created, 'the resumed run kept the caches computed from the packed tables');
	is( $node->safe_psql('postgres',
			'SELECT count(*) || \' \' || bool_and(valid) || \' \' || bool_and(refreshed > created OR staged_from IS NOT NULL) FROM pgdl.feature_cache'),
		'4 true true', '... refreshed them, and rebuilt the staged ones');
}

# ---------------------------------------------------------------------------
# Another role can neither hold a build's lock nor take a cache view's name.
# bob holds every advisory key he can compute from alice's cache names (those
# pgdl 0.6 used among them) and tries to create her views in pgdl_cache first;
# her run builds its caches without waiting for him, and they are hers.
# ---------------------------------------------------------------------------
drop_caches();
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_proc WHERE pronamespace = 'pgdl'::regnamespace AND prosrc ~* 'advisory|pg_locks'"),
	'0', 'no pgdl function takes an advisory lock in SQL');
$node->safe_psql(
	'postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT SELECT ON train_packed, valid_packed TO alice, bob;
SELECT pgdl.grant_model('base', 'alice'), pgdl.grant_model('base', 'bob');
});
$node->safe_psql('postgres',
	q{SELECT pgdl.grid_search('aheads', '{}', '{"base_model": "base", "freeze": [3, 5], "lr": 0.05, "batch_size": 25,
	  "head": [[{"type": "dense", "units": 4}]]}')}, extra_params => [ '-U', 'alice' ]);
{
	my $alice_run = "SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'aheads', 1, 'valid_packed', workers => 1, feature_cache => 'on')";
	my $alice_caches = "SELECT count(*) || ' ' || bool_and(c.relowner = 'alice'::regrole AND c.relkind = 'm')
	  FROM pgdl.feature_cache f JOIN pg_class c ON c.oid = f.view WHERE f.owner = 'alice'::regrole";
	my $cleanup = "SELECT pgdl.cleanup_feature_cache('0 seconds')";

	# an unblocked run, for its time; its views' names are what bob can compute too (from the
	# packed table's name, the depth, the base's prefix_hash and alice's OID)
	my $t0 = time;
	$node->safe_psql('postgres', $alice_run, extra_params => [ '-U', 'alice' ]);
	my $baseline = time - $t0;
	is($node->safe_psql('postgres', $alice_caches), '4 true', "alice's run built four caches of her own");
	my @names = split /\n/, $node->safe_psql('postgres', 'SELECT c.relname FROM pgdl.feature_cache f JOIN pg_class c ON c.oid = f.view');
	my $alice_oid = $node->safe_psql('postgres', "SELECT 'alice'::regrole::oid");
	is(scalar(grep { /_\Q$alice_oid\E$/ } @names), 4, "each view's name ends with its owner's OID");
	$node->safe_psql('postgres', $cleanup, extra_params => [ '-U', 'alice' ]);

	my @old_names = map { s/_\Q$alice_oid\E$//r } @names;
	my $keys = join(',', map { "('$_')" } (@names, @old_names, map { "pgdl_cache.$_" } (@names, @old_names)));
	my $bob = start_psql(
		$node, 'bob_locks', 'bob',
		"SELECT count(pg_advisory_lock(1885824108, hashtext(n))) + count(pg_advisory_lock(hashtext(n)))
		      + count(pg_advisory_lock($alice_oid, hashtext(n))) + count(pg_advisory_lock(hashtext(n)::bigint << 32 | $alice_oid))
		   FROM (VALUES $keys) k(n)",
		'SELECT pg_sleep(120)');
	my $n_keys = 4 * 4 * @names;
	ok( poll_until(
			$node,
			"SELECT count(*) = $n_keys FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			  WHERE a.application_name = 'bob_locks' AND l.locktype = 'advisory' AND l.granted",
			30),
		"bob holds $n_keys advisory locks computed from alice's cache names");
	my ($ret, $out, $err) = $node->psql('postgres', "CREATE TABLE pgdl_cache.$names[0] ()", extra_params => [ '-U', 'bob' ]);
	like($err, qr/permission denied for schema pgdl_cache/, "bob cannot take the name of alice's next view");
	($ret, $out, $err) = $node->psql('postgres', "CREATE MATERIALIZED VIEW pgdl_cache.$old_names[0] AS SELECT 1",
		extra_params => [ '-U', 'bob' ]);
	like($err, qr/permission denied for schema pgdl_cache/, '... nor the name pgdl 0.6 would have used');
	# what bob may have made there before an upgrade revoked CREATE stays his
	$node->safe_psql('postgres', "CREATE TABLE pgdl_cache.$names[1] (x int); ALTER TABLE pgdl_cache.$names[1] OWNER TO bob");

	my $bob_pid = $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE application_name = 'bob_locks'");
	my $run = start_psql($node, 'alice_run', 'alice', $alice_run);
	my ($blocked, $t1) = (0, time);
	while ($run->{h}->pumpable && time < $t1 + 60)
	{
		$run->{h}->pump_nb;
		$blocked += $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_stat_activity WHERE $bob_pid = ANY(pg_blocking_pids(pid))");
	}
	is(finish_psql($run, 1), 0, "alice's run succeeds while bob holds his locks") or diag($run->{stderr});
	my $elapsed = time - $t1;
	is($blocked, 0, 'no session of hers ever waited for bob');
	ok($elapsed < $baseline + 1.5, sprintf('it took %.1f s, %.1f s unblocked', $elapsed, $baseline));
	is($node->safe_psql('postgres', $alice_caches), '4 true', 'it built four caches, all hers');
	is( $node->safe_psql('postgres',
			"SELECT relkind::text || ' ' || relowner::regrole FROM pg_class WHERE oid = 'pgdl_cache.$names[1]'::regclass"),
		'r bob', "bob's table is left as it was, and not used");
	$bob->{h}->kill_kill;
	$node->safe_psql('postgres', $cleanup, extra_params => [ '-U', 'alice' ]);
	$node->safe_psql('postgres', "DROP TABLE pgdl_cache.$names[1]");
}

# ---------------------------------------------------------------------------
# Two runs that build the same caches at once: both succeed, one set of caches.
# ---------------------------------------------------------------------------
drop_caches();
{
	my @bg = map {
		start_psql($node, "cache_race_$_", 'postgres',
			"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'heads', 2, 'valid_packed', workers => 1, feature_cache => 'on')"
		)
	} (1, 2);
	is(finish_psql($bg[0], 60), 0, 'the first of two concurrent runs succeeds');
	is(finish_psql($bg[1], 60), 0, 'the second succeeds too') or diag($bg[1]->{stderr});
	is( $node->safe_psql('postgres',
			'SELECT count(*) || \' \' || count(DISTINCT (dataset, depth)) || \' \' || bool_and(valid) FROM pgdl.feature_cache'),
		'4 4 true', 'one cache per packed table and depth');
}

# The caches depend on pgdl: dropping the extension names them; CASCADE takes them.
my ($ret, $out, $err) = $node->psql('postgres', 'DROP EXTENSION pgdl');
like($err, qr/materialized view pgdl_cache\.\S+ depends on function pgdl\.cache_features/,
	'DROP EXTENSION names the caches that depend on it');
$node->safe_psql('postgres', 'DROP EXTENSION pgdl CASCADE');
is( $node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgdl_cache') + (SELECT count(*) FROM pg_matviews)"),
	'0', 'DROP EXTENSION ... CASCADE removes pgdl_cache and its caches');

$node->stop;
done_testing();
