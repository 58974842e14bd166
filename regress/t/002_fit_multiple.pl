# pgdl.fit_multiple and pgdl.resume: the model hopper's background workers.
#
# The same models, bit for bit, whatever the number of workers and whether the
# run went straight through, was cancelled or crashed and was resumed; the
# leaderboard, metrics and checkpoints a run leaves; cancel and statement_timeout
# stop every worker; too few worker slots; workers see only what the caller may
# read.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS      = 5;      # the grid's runs
my $LONG_EPOCHS = 300;    # the run that is cancelled or crashed: about 2 s here

my $node = PostgreSQL::Test::Cluster->new('mop');
$node->init;
# restart_after_crash: PostgreSQL::Test::Cluster turns it off; the kill -9 test
# below needs the postmaster to come back on its own.
# keep_checkpoints = -1: finished runs keep every epoch's checkpoints, which check_run_rows counts
$node->append_conf('postgresql.conf',
	"max_worker_processes = 16\nrestart_after_crash = on\npgdl.keep_checkpoints = -1\n");
$node->start;

# ---------------------------------------------------------------------------
# Helpers (and PgdlTest's).  Every wait is bounded.
# ---------------------------------------------------------------------------

sub run_of
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT DISTINCT m.run FROM $table l JOIN pgdl.models m ON m.id = l.model");
}

# A finished run has one metrics row and one checkpoint per (config, epoch), for
# every configuration of its set and every epoch, and nothing else.
sub check_run_rows
{
	my ($run, $set, $epochs, $what) = @_;
	my $expected = "SELECT c.id, e FROM pgdl.configs c, generate_series(1, $epochs) e WHERE c.set_name = '$set'";
	is( $node->safe_psql(
			'postgres', qq{
		SELECT (SELECT count(*) FROM pgdl.run_metrics WHERE run = $run) = (SELECT count(*) FROM ($expected) x)
		   AND NOT EXISTS (($expected) EXCEPT ALL SELECT config, epoch FROM pgdl.run_metrics WHERE run = $run)
		   AND (SELECT count(*) FROM pgdl.checkpoints WHERE run = $run) = (SELECT count(*) FROM ($expected) x)
		   AND NOT EXISTS (($expected) EXCEPT ALL SELECT config, epoch FROM pgdl.checkpoints WHERE run = $run)
		   AND (SELECT status FROM pgdl.runs WHERE id = $run) = 'finished'}),
		't',
		"$what: one metrics row and one checkpoint per (config, epoch); the run is finished");
}

# ---------------------------------------------------------------------------
# Data: 2,500 points of 16 features from sin(); the class is two sign tests on
# sums of features, which a small MLP learns to ~97%.  2,000 train in 4
# partitions, 500 validation packed against them.
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', 'CREATE EXTENSION pgdl;' . points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
-- grid: 2 architectures x 3 training configurations
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'grid', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}',
                    '{"optimizer": "sgd", "lr": 0.02, "momentum": 0.9, "batch_size": 50, "seed": 2}',
                    '{"optimizer": "adam", "lr": 0.005, "batch_size": 25, "seed": 3}']) c
 ORDER BY a.name, c;
-- long: many small steps per epoch, small checkpoints
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'long', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 2, "seed": 11}',
                    '{"optimizer": "adam", "lr": 0.0005, "batch_size": 2, "seed": 12}']) c
 WHERE a.name = 'small' ORDER BY c;
});
is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.configs WHERE set_name = 'grid'"),
	'6', 'the grid has 6 configurations');
is($node->safe_psql('postgres', "SELECT count(DISTINCT label) FROM train_rows"), '4', 'four classes');

# ---------------------------------------------------------------------------
# 1, 2 and 4 workers, and pgdl.fit of each configuration: the same bytes.
# ---------------------------------------------------------------------------
for my $w (1, 2, 4)
{
	$node->safe_psql('postgres',
		"CREATE TABLE lb_w$w AS SELECT * FROM pgdl.fit_multiple('train_packed', 'grid', $EPOCHS, 'valid_packed', workers => $w)"
	);
}
$node->safe_psql(
	'postgres', qq{
SET client_min_messages = warning;
CREATE TABLE lb_fit AS
SELECT c.id AS config, pgdl.fit('train_packed', a.name, c.config, $EPOCHS, 'valid_packed') AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = 'grid' ORDER BY c.id;
});

my %digests = map { $_ => model_digests($node, "lb_$_") } qw(w1 w2 w4 fit);
my $n_digests = () = $digests{w1} =~ /:[0-9a-f]{32}/g;
is($n_digests, 6, '1 worker: 6 models stored');
is($digests{w2},  $digests{w1}, '2 workers: the same models as 1 worker, bit for bit');
is($digests{w4},  $digests{w1}, '4 workers: the same models as 1 worker, bit for bit');
is($digests{fit}, $digests{w1}, 'pgdl.fit of each configuration: the same models as fit_multiple');

my %run = map { $_ => run_of("lb_w$_") } (1, 2, 4);
ok($run{1} =~ /^\d+$/ && $run{2} =~ /^\d+$/ && $run{4} =~ /^\d+$/
	  && $run{1} != $run{2} && $run{2} != $run{4},
	'each fit_multiple call is one run of its own');

# ---------------------------------------------------------------------------
# The leaderboard, the metrics and the checkpoints.
# ---------------------------------------------------------------------------
for my $w (1, 2, 4)
{
	my $workers = $w == 1 ? '1 worker' : "$w workers";
	is( $node->safe_psql(
			'postgres', qq{
		SELECT array_agg(rank ORDER BY rank) = (SELECT array_agg(g) FROM generate_series(1, 6) g)
		   AND bool_and(epochs = $EPOCHS AND NOT stopped)
		   AND bool_and(validation_loss IS NOT NULL AND validation_accuracy BETWEEN 0 AND 1)
		   AND array_agg(config ORDER BY config) = (SELECT array_agg(id ORDER BY id) FROM pgdl.configs WHERE set_name = 'grid')
		   AND (SELECT count(*) FROM pgdl.models WHERE run = $run{$w}) = 6
		  FROM lb_w$w}),
		't',
		"$workers: the leaderboard ranks the 6 models of the run 1..6 after $EPOCHS epochs");
	is( $node->safe_psql(
			'postgres', qq{
		SELECT bool_and(prev <= validation_loss) FROM
		  (SELECT validation_loss, lag(validation_loss) OVER (ORDER BY rank) AS prev FROM lb_w$w) s
		 WHERE prev IS NOT NULL}),
		't',
		"$workers: the leaderboard is sorted by validation loss");
	is( $node->safe_psql(
			'postgres', qq{
		SELECT count(*) = 6 AND bool_and(l.validation_loss = r.validation_loss AND l.train_loss = r.train_loss
		                                 AND r.model = l.model AND a.name = l.architecture)
		  FROM lb_w$w l JOIN pgdl.run_metrics r ON r.run = $run{$w} AND r.config = l.config AND r.epoch = $EPOCHS
		  JOIN pgdl.configs c ON c.id = l.config JOIN pgdl.architectures a ON a.id = c.architecture}),
		't',
		"$workers: the leaderboard shows each model's last-epoch metrics, linked to its model");
	check_run_rows($run{$w}, 'grid', $EPOCHS, "$workers");
}
is( $node->safe_psql('postgres',
		"SELECT count(DISTINCT o) FROM (SELECT string_agg(config::text, ',' ORDER BY rank) AS o FROM lb_w1 UNION ALL
		   SELECT string_agg(config::text, ',' ORDER BY rank) FROM lb_w2 UNION ALL
		   SELECT string_agg(config::text, ',' ORDER BY rank) FROM lb_w4) s"),
	'1',
	'the three leaderboards rank the configurations alike');
cmp_ok(
	$node->safe_psql('postgres', 'SELECT max(validation_accuracy) FROM lb_w1'),
	'>', 0.9, 'the best model learned the classes');

# ---------------------------------------------------------------------------
# Workers connect as the calling user.  Architectures and configuration sets
# belong to their owners: alice and bob each get a copy of 'small'.
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT CREATE ON SCHEMA public TO alice, bob;
CREATE TABLE alice_rows AS SELECT * FROM train_rows WHERE i <= 800;
ALTER TABLE alice_rows OWNER TO alice;
INSERT INTO pgdl.architectures (owner, name, spec)
SELECT r, a.name, a.spec FROM pgdl.architectures a, unnest('{alice, bob}'::regrole[]) r WHERE a.name = 'small';
});
$node->safe_psql(
	'postgres', q{
SELECT pgdl.pack('alice_rows', 'x', 'label', 'alice_packed', buffer_rows => 50, partitions => 2, seed => 5);
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'alice_set', id, '{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 10, "seed": 21}'
  FROM pgdl.architectures WHERE name = 'small';
CREATE TABLE alice_lb AS SELECT * FROM pgdl.fit_multiple('alice_packed', 'alice_set', 3, workers => 2);
}, extra_params => [ '-U', 'alice' ]);
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM alice_lb l JOIN pgdl.models m ON m.id = l.model WHERE m.metrics->>'epoch' = '3'"),
	'1',
	'the owner of a packed table runs fit_multiple on it');

# While a run is in flight, its workers are sessions of the calling user.
{
	my $bg = start_psql($node, 'mop_alice', 'alice', "SET statement_timeout = '20s'",
		"SELECT count(*) FROM pgdl.fit_multiple('alice_packed', 'alice_set', 100000, workers => 2)");
	ok( poll_until($node, 
			"SELECT count(*) = 2 AND bool_and(usename = 'alice') FROM pg_stat_activity WHERE backend_type = 'pgdl worker'",
			10),
		'both workers of a run started by alice are sessions of alice');
	$node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'mop_alice'");
	isnt(finish_psql($bg, 10), 0, "alice's long run ends when cancelled");
	ok(workers_gone_within($node, 5), "alice's workers are gone");
}

my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT count(*) FROM pgdl.fit_multiple('alice_packed', 'alice_set', 3, workers => 2)",
	extra_params => [ '-U', 'bob' ]);
isnt($ret, 0, 'a user who may not read the packed table cannot train on it');
like($err, qr/permission denied/, '... and is told it is a permission error');
ok(workers_gone_within($node, 2), '... and no worker is left behind');

$node->safe_psql('postgres', 'GRANT SELECT ON alice_packed TO bob', extra_params => [ '-U', 'alice' ]);
$node->safe_psql(
	'postgres', q{
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'alice_set', id, '{"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "batch_size": 10, "seed": 21}'
  FROM pgdl.architectures WHERE name = 'small';
CREATE TABLE bob_lb AS SELECT * FROM pgdl.fit_multiple('alice_packed', 'alice_set', 3, workers => 2);
}, extra_params => [ '-U', 'bob' ]);
my $weights_sql = 'SELECT string_agg(md5(m.weights), \' \' ORDER BY l.rank) FROM %s l JOIN pgdl.models m ON m.id = l.model';
is( $node->safe_psql('postgres', sprintf($weights_sql, 'bob_lb')),
	$node->safe_psql('postgres', sprintf($weights_sql, 'alice_lb')),
	'granted SELECT, another user trains, on a set of his own, the same model as the owner');
is($node->safe_psql('postgres', "SELECT string_agg(owner::text, ',' ORDER BY owner::text) FROM pgdl.configs WHERE set_name = 'alice_set'"),
	'alice,bob', '... and the set name is one set each');

# SET ROLE to a role that may not log in: the session's privileges are those of
# the role, and so should the workers' be.
$node->safe_psql(
	'postgres', q{
CREATE ROLE team NOLOGIN;
GRANT team TO bob;
GRANT SELECT ON train_packed, valid_packed TO team;
-- the grid as team's own
INSERT INTO pgdl.architectures (owner, name, spec)
SELECT 'team', a.name, a.spec FROM pgdl.architectures a
 WHERE a.id IN (SELECT architecture FROM pgdl.configs WHERE set_name = 'grid');
INSERT INTO pgdl.configs (owner, set_name, architecture, config)
SELECT 'team', c.set_name, t.id, c.config
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
  JOIN pgdl.architectures t ON t.owner = 'team'::regrole AND t.name = a.name
 WHERE c.set_name = 'grid' ORDER BY c.id;
});
# Workers log in as the session user and then take the current role, as
# parallel workers do, so a NOLOGIN role reached by SET ROLE works.
($ret, $out, $err) = $node->psql('postgres',
	"SET ROLE team; SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'grid', 1, workers => 2)",
	extra_params => [ '-U', 'bob' ]);
is($ret, 0, 'fit_multiple under SET ROLE to a NOLOGIN role runs') or diag($err);
ok(workers_gone_within($node, 2), 'no worker is left behind after SET ROLE');

# ---------------------------------------------------------------------------
# statement_timeout stops the run and every worker.
# ---------------------------------------------------------------------------
{
	my $start = time;
	my $timed_out = 0;
	($ret, $out, $err) = $node->psql(
		'postgres',
		"SET statement_timeout = '500ms';
		 SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', 100000, 'valid_packed', workers => 2);",
		timeout   => 30,
		timed_out => \$timed_out);
	my $elapsed = time - $start;
	ok(!$timed_out && $ret != 0, 'fit_multiple under statement_timeout = 500ms fails');
	like($err, qr/canceling statement due to statement timeout/, '... with the timeout error');
	cmp_ok($elapsed, '<', 5, '... promptly');
	ok(workers_gone_within($node, 2), '... and leaves no worker behind');
}

# ---------------------------------------------------------------------------
# Cancel, then resume: the models of an uninterrupted run.
# ---------------------------------------------------------------------------
$node->safe_psql('postgres',
	"CREATE TABLE lb_long AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', $LONG_EPOCHS, 'valid_packed', workers => 2)"
);
my $long_digests = model_digests($node, 'lb_long');
check_run_rows(run_of('lb_long'), 'long', $LONG_EPOCHS, 'the uninterrupted long run');

# Starts the long run in the background and waits for its first checkpoint;
# returns the psql handle and the run id.
sub start_long_run
{
	my ($app) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($node, $app, 'postgres',
		"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', $LONG_EPOCHS, 'valid_packed', workers => 2)");
	ok(poll_until($node, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run > $before)", 20),
		"$app: the run checkpoints its first epoch");
	my $run = $node->safe_psql('postgres', "SELECT max(run) FROM pgdl.checkpoints WHERE run > $before");
	return ($bg, $run);
}

{
	my ($bg, $run) = start_long_run('mop_cancel');
	# pgdl.progress reads the run's shared memory while it trains
	is( $node->safe_psql('postgres',
			"SELECT count(*) = 2 AND bool_and(epoch >= 1 AND state IN ('waiting', 'training', 'done')) "
			  . "FROM pgdl.progress WHERE run = $run"),
		't', 'pgdl.progress shows both models of the run in flight');
	my $start = time;
	is($node->safe_psql('postgres',
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'mop_cancel'"),
		't', 'cancel the leader');
	my $rc = finish_psql($bg, 10);
	my $elapsed = time - $start;
	ok(defined $rc && $rc != 0, 'the cancelled fit_multiple fails');
	like($bg->{stderr}, qr/canceling statement due to user request/, '... with the cancel error');
	cmp_ok($elapsed, '<', 3, '... within a few seconds');
	ok(workers_gone_within($node, 2), '... and within 2 seconds no pgdl worker is left');
	cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"),
		'<', 2 * $LONG_EPOCHS, 'the cancelled run stopped before its end');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.models WHERE run = $run"),
		'0', 'the cancelled run stored no model');
	ok(poll_until($node, "SELECT status = 'failed' AND finished IS NOT NULL FROM pgdl.runs WHERE id = $run", 10),
		'the cancelled run is marked failed, not left running');

	$node->safe_psql('postgres', "CREATE TABLE lb_cancel_resumed AS SELECT * FROM pgdl.resume($run)");
	is(run_of('lb_cancel_resumed'), $run, 'pgdl.resume continues the same run');
	is(model_digests($node, 'lb_cancel_resumed'), $long_digests,
		'cancelled and resumed: the same models as the uninterrupted run, bit for bit');
	check_run_rows($run, 'long', $LONG_EPOCHS, 'cancelled and resumed');
	($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)");
	like($err, qr/run $run has finished/, 'a finished run cannot be resumed');
}

# asha and hyperband, cancelled after their first rung and resumed: the decisions
# (decision, bracket) and the models of an uninterrupted run.
foreach my $strategy ('asha', 'hyperband')
{
	my $call = "pgdl.fit_multiple('train_packed', 'grid', 60, 'valid_packed', workers => 2, "
	  . "strategy => '$strategy', eta => 3)";
	my $decisions = sub {
		my ($run) = @_;
		return $node->safe_psql('postgres',
			"SELECT string_agg(config || '-' || epoch || ':' || decision || '/' || bracket, ' ' ORDER BY config, epoch)
			   FROM pgdl.run_metrics WHERE run = $run AND decision IS NOT NULL");
	};
	$node->safe_psql('postgres', "CREATE TABLE lb_${strategy} AS SELECT * FROM $call");
	my $straight = $decisions->(run_of("lb_${strategy}"));
	like($straight, qr/:stop/, "$strategy: the uninterrupted run stops some models");
	my $before = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($node, "mop_$strategy", 'postgres', "SELECT count(*) FROM $call");
	ok( poll_until(
			$node, "SELECT EXISTS (SELECT FROM pgdl.run_metrics WHERE run > $before AND decision IS NOT NULL)", 20),
		"$strategy: the run decides its first rung");
	$node->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'mop_$strategy'");
	finish_psql($bg, 20);
	my $run = $node->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE id > $before");
	ok(poll_until($node, "SELECT status <> 'running' FROM pgdl.runs WHERE id = $run", 10),
		"$strategy: the cancelled run has ended");
	# (a run that finished before the cancel came has nothing to resume: it is compared all the same)
	$node->safe_psql('postgres', "SELECT count(*) FROM pgdl.resume($run)")
	  if $node->safe_psql('postgres', "SELECT status FROM pgdl.runs WHERE id = $run") eq 'failed';
	$node->safe_psql('postgres',
		"CREATE TABLE lb_${strategy}_resumed AS SELECT DISTINCT config, model FROM pgdl.run_metrics "
		  . "WHERE run = $run AND model IS NOT NULL");
	is($decisions->($run), $straight, "$strategy: cancelled and resumed, the same decisions");
	is(model_digests($node, "lb_${strategy}_resumed"), model_digests($node, "lb_${strategy}"),
		"$strategy: cancelled and resumed, the same models, bit for bit");
}

# A run whose call returned, but whose transaction is then rolled back, is failed too; a
# run that an exception block catches the error of is failed while its transaction goes on.
{
	my $before = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	$node->safe_psql('postgres',
		"BEGIN; SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', 1, 'valid_packed', workers => 2); ROLLBACK;");
	my $run = $node->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE id > $before");
	ok($run ne '' && poll_until($node, "SELECT status = 'failed' FROM pgdl.runs WHERE id = $run", 10),
		'fit_multiple, then ROLLBACK: the run is marked failed');
	$before = $run;
	$node->safe_psql('postgres', q{
SET statement_timeout = '3s';
DO $$
BEGIN
  PERFORM count(*) FROM pgdl.fit_multiple('train_packed', 'long', 100000, 'valid_packed', workers => 2);
EXCEPTION WHEN query_canceled THEN
  RAISE NOTICE 'caught';
END $$});
	$run = $node->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE id > $before");
	ok($run ne '' && poll_until($node, "SELECT status = 'failed' FROM pgdl.runs WHERE id = $run", 10),
		'fit_multiple stopped in an exception block: the run is marked failed');
}

# ---------------------------------------------------------------------------
# kill -9 of a worker, then resume.
#
# When a child of the postmaster dies of a signal, the postmaster cannot know
# what it left half-done in shared memory: it sends SIGQUIT to every other
# backend (the leader included, whose client sees its connection end), waits
# for them, reinitializes shared memory and replays the WAL from the last
# checkpoint (crash recovery, restart_after_crash = on), then accepts
# connections again.  What was committed survives: the run row and the
# per-epoch metrics and checkpoints that the workers committed one epoch at a
# time; the leader's uncommitted work is lost.  pgdl.resume starts from there.
# ---------------------------------------------------------------------------
my $killed_pid;
{
	my ($bg, $run) = start_long_run('mop_crash');
	$killed_pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pgdl worker' ORDER BY pid LIMIT 1");
	like($killed_pid, qr/^\d+$/, 'a worker of the run is in pg_stat_activity');
	is(kill('KILL', $killed_pid), 1, 'kill -9 the worker');
	my $rc = finish_psql($bg, 30);
	ok(defined $rc && $rc != 0, 'fit_multiple fails when a worker is killed, without hanging');
	like(
		$bg->{stderr},
		qr/server closed the connection unexpectedly|terminating connection because of crash|connection to server was lost/,
		'... because the crash restart ends the leader too');
	ok(poll_until($node, 'SELECT true', 60), 'the node comes back after the crash restart');
	ok(workers_gone_within($node, 2), 'no pgdl worker survives the crash restart');
	cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"),
		'<', 2 * $LONG_EPOCHS, 'the crashed run stopped before its end');

	$node->safe_psql('postgres',
		"CREATE TABLE lb_crash_resumed AS SELECT * FROM pgdl.resume($run, workers => 4)");
	is(model_digests($node, 'lb_crash_resumed'), $long_digests,
		'crashed and resumed with 4 workers: the same models as the uninterrupted run, bit for bit');
	check_run_rows($run, 'long', $LONG_EPOCHS, 'crashed and resumed');
}

# ---------------------------------------------------------------------------
# Training methods (docs/reference/training.md): a schedule per epoch, step
# warmup, clipping, label smoothing, decay groups and early stopping give the
# same bytes whatever the workers, and pgdl.fit's.  min_delta 1e9: no epoch
# after the first improves, so patience 2 stops after epoch 3 of 5.
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'methods', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1, "schedule": "cosine", "warmup_epochs": 1,
                      "clip_norm": 0.5, "label_smoothing": 0.1, "patience": 2, "min_delta": 1e9}',
                    '{"optimizer": "adamw", "lr": 0.005, "batch_size": 25, "seed": 3, "schedule": "step", "step_size": 2,
                      "warmup_steps": 30, "no_decay_bias_norm": true, "clip_norm": 1}']) c
 WHERE a.name IN ('small', 'wide') AND a.owner = current_user::regrole
 ORDER BY a.name, c;
});
for my $w (1, 3)
{
	$node->safe_psql('postgres',
		"CREATE TABLE lb_methods_w$w AS SELECT * FROM pgdl.fit_multiple('train_packed', 'methods', $EPOCHS, 'valid_packed', workers => $w)"
	);
}
$node->safe_psql(
	'postgres', qq{
SET client_min_messages = warning;
CREATE TABLE lb_methods_fit AS
SELECT c.id AS config, pgdl.fit('train_packed', a.name, c.config, $EPOCHS, 'valid_packed') AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
 WHERE c.set_name = 'methods' ORDER BY c.id;
});
my %methods = map { $_ => model_digests($node, "lb_methods_$_") } qw(w1 w3 fit);
my $n_methods = () = $methods{w1} =~ /:[0-9a-f]{32}/g;
is($n_methods, 4, 'training methods: 4 models stored');
is($methods{w3},  $methods{w1}, 'training methods, 3 workers: the same models as 1 worker, bit for bit');
is($methods{fit}, $methods{w1}, 'training methods: pgdl.fit of each configuration gives the same models');
is($node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT epochs || ':' || stopped, ',') FROM lb_methods_w3 WHERE config_json ? 'patience'"),
	'3:true', 'early stopping: the configurations with patience stop after epoch 3');
is($node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT epochs::text, ',') FROM lb_methods_w3 WHERE NOT config_json ? 'patience'"),
	"$EPOCHS", '... the others train every epoch');

# ---------------------------------------------------------------------------
# Validation spread over the workers (schedule.c's pick_rank): configurations of
# one seed all end an epoch on the same partition, so the worker that owns it
# trains every epoch's last visit; the evaluation is a task of its own that a
# worker with nothing of its own takes.  Each worker's DEBUG1 lines say which
# evaluations it ran and what its time went to; the models stay 1 worker's.
# The validation set is 40 times a partition, so that evaluations are most of
# the work (tiny visits would leave who takes what to the latches' timing) and
# the worker that does not own the epochs' last partition takes a share of them.
# ---------------------------------------------------------------------------
$node->safe_psql(
	'postgres', q{
CREATE TABLE valid_big AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(2501, 22500) i, generate_series(1, 16) j GROUP BY i) s;
SELECT pgdl.pack('valid_big', 'x', 'label', 'valid_big_packed', buffer_rows => 500, partitions => 1,
                 reference => 'train_packed');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'one_seed', a.id, jsonb_build_object('optimizer', 'sgd', 'lr', lr, 'momentum', 0.9, 'batch_size', 25, 'seed', 5)
  FROM pgdl.architectures a, unnest(ARRAY[0.01, 0.02, 0.05, 0.1]) lr
 WHERE a.name IN ('small', 'wide') AND a.owner = current_user::regrole
 ORDER BY a.name, lr;
});
$node->safe_psql('postgres',
	"CREATE TABLE lb_one_seed_w1 AS SELECT * FROM pgdl.fit_multiple('train_packed', 'one_seed', $EPOCHS, 'valid_big_packed', workers => 1)"
);
$node->append_conf('postgresql.conf', "log_min_messages = debug1\n");
$node->reload;
ok(poll_until($node, "SELECT current_setting('log_min_messages') = 'debug1'", 10),
	'log_min_messages is debug1 for the run');
my $log_offset = -s $node->logfile;
# each configuration a unit of its own (fused, the one seed makes 2 units of 4, whose 10 evaluations are too
# few to cross reliably); the 1-worker run above is fused, so the digests below compare fused with apart too
$node->safe_psql('postgres',
	"SET pgdl.fuse_models = off; CREATE TABLE lb_one_seed_w2 AS SELECT * FROM pgdl.fit_multiple('train_packed', 'one_seed', $EPOCHS, 'valid_big_packed', workers => 2)"
);
$node->append_conf('postgresql.conf', "log_min_messages = warning\n");
$node->reload;
my $spread_log = substr(slurp_file($node->logfile), $log_offset);
my @evaluations = $spread_log =~ /pgdl worker (\d+): evaluates configuration \d+ at the end of its epoch \d+, visited last by worker (\d+)/g;
my $crossed = 0;
for (my $k = 0; $k < @evaluations; $k += 2)
{
	$crossed++ if $evaluations[$k] != $evaluations[ $k + 1 ];
}
is(scalar(@evaluations) / 2, 8 * $EPOCHS, 'one seed, 2 workers: every model-epoch is evaluated as a task of its own');
cmp_ok($crossed, '>', 0, '... and some by a worker other than the one that visited its last partition');
my %validated = $spread_log =~ /pgdl worker (\d+): trained [0-9.]+ s, validated (\d+) model-epochs/g;
is(join(',', sort keys %validated), '0,1', '... each of the 2 workers says where its time went');
is($validated{0} + $validated{1}, 8 * $EPOCHS, '... and their validations add up to every model-epoch');
is(model_digests($node, 'lb_one_seed_w2'), model_digests($node, 'lb_one_seed_w1'),
	'... and the models are those of 1 worker (fused), bit for bit');

# ---------------------------------------------------------------------------
# Too few background worker slots.
# ---------------------------------------------------------------------------
# max_worker_processes = 1 and the logical replication launcher holds that slot:
# no pgdl worker can start, and the error says which setting to raise.
$node->append_conf('postgresql.conf', "max_worker_processes = 1\nmax_parallel_workers = 0\n");
$node->restart;
($ret, $out, $err) = $node->psql('postgres',
	"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'grid', $EPOCHS, 'valid_packed', workers => 2)");
isnt($ret, 0, 'no free worker slot: fit_multiple fails');
like($err, qr/could not start any pgdl worker/, '... saying no worker could start');
like($err, qr/HINT:.*max_worker_processes/, '... with a hint about max_worker_processes');

# One free slot: the run goes on with one worker, says so, and ends with the
# same models.
$node->append_conf('postgresql.conf', "max_logical_replication_workers = 0\n");
$node->restart;
($ret, $out, $err) = $node->psql('postgres',
	"CREATE TABLE lb_one_slot AS SELECT * FROM pgdl.fit_multiple('train_packed', 'grid', $EPOCHS, 'valid_packed', workers => 2)"
);
is($ret, 0, 'one free worker slot: fit_multiple with workers => 2 runs');
like($err, qr/NOTICE:  started 1 of 2 pgdl workers/, '... and notices it started 1 of 2 workers');
is(model_digests($node, 'lb_one_slot'), $digests{w1}, '... and stores the same models');

$node->stop;
my $log = slurp_file($node->logfile);
unlike($log, qr/PANIC/, 'no PANIC');
my @signalled = $log =~ /\(PID (\d+)\) was terminated by signal/g;
is_deeply(\@signalled, [$killed_pid], 'the only process killed by a signal is the worker this test killed');

done_testing();
