# Row-level security with background workers: ordinary roles, logged in as
# themselves, run, cancel and resume pgdl.fit_multiple.  The workers write the
# run's metrics and checkpoints as the caller, under the catalog's policies;
# what a run writes belongs to the run's owner, also when a member of the
# owning role resumes it; nobody else sees the run, resumes it or writes into
# it; and the resumed models are those of an uninterrupted run, bit for bit.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 1200;    # many small steps: several seconds, so that a cancel lands mid-run
my $ROWS   = 2 * $EPOCHS;    # checkpoints and metrics of a whole run of the two configurations

my $node = PostgreSQL::Test::Cluster->new('owners');
$node->init;
# keep_checkpoints = -1: finished runs keep every epoch's checkpoints, whose owners are counted
$node->append_conf('postgresql.conf', "max_worker_processes = 16\npgdl.keep_checkpoints = -1\n");
$node->start;

# alice works alone; team is a group role that carol acts as, by SET ROLE or
# by membership; bob is a stranger.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgdl;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE team NOLOGIN;
CREATE ROLE carol LOGIN IN ROLE team;
GRANT CREATE ON SCHEMA public TO alice, team;
CREATE TABLE points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s;
GRANT SELECT ON points TO alice, team;
});

# Each owner packs the same rows and makes the same set of its own.
my %session = (alice => [ 'alice', '' ], team => [ 'carol', 'SET ROLE team;' ]);
for my $owner (sort keys %session)
{
	my ($user, $set_role) = @{ $session{$owner} };
	$node->safe_psql(
		'postgres', qq{
$set_role
SELECT pgdl.pack('points', 'x', 'label', '${owner}_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.add_architecture('small', '{"input": [16], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'long', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 2, "seed": 11}',
                    '{"optimizer": "adam", "lr": 0.0005, "batch_size": 2, "seed": 12}']) c
 WHERE a.name = 'small' ORDER BY c;
}, extra_params => [ '-U', $user ]);
}
is( $node->safe_psql('postgres',
		"SELECT string_agg(owner::text || ':' || n, ' ' ORDER BY owner::text) FROM "
		  . "(SELECT owner, count(*) AS n FROM pgdl.configs WHERE set_name = 'long' GROUP BY owner) s"),
	'alice:2 team:2',
	'the set name "long" is two sets, one per owner');

# md5 of the models a leaderboard table names, in configuration order.
sub weights
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(md5(m.weights), ' ' ORDER BY l.config) FROM $table l JOIN pgdl.models m ON m.id = l.model"
	);
}

# Who owns the rows run $run wrote: its row, metrics, checkpoints and models (type:count:owners).
sub run_rows_owned_by
{
	my ($run) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT string_agg(t || ':' || n || ':' || owners, ' ' ORDER BY t) FROM (
  SELECT t, count(*) AS n, string_agg(DISTINCT owner::text, ',') AS owners FROM (
    SELECT 'run' AS t, owner FROM pgdl.runs WHERE id = $run UNION ALL
    SELECT 'metrics', owner FROM pgdl.run_metrics WHERE run = $run UNION ALL
    SELECT 'checkpoints', owner FROM pgdl.checkpoints WHERE run = $run UNION ALL
    SELECT 'models', owner FROM pgdl.models WHERE run = $run) r GROUP BY t) s});
}

# alice's uninterrupted run, as herself, with two workers.
$node->safe_psql('postgres',
	"CREATE TABLE alice_lb AS SELECT * FROM pgdl.fit_multiple('alice_packed', 'long', $EPOCHS, workers => 2)",
	extra_params => [ '-U', 'alice' ]);
my $uninterrupted = weights('alice_lb');
like($uninterrupted, qr/^[0-9a-f]{32} [0-9a-f]{32}$/, 'an ordinary role runs fit_multiple with workers: 2 models');
my $alice_run = $node->safe_psql('postgres', 'SELECT DISTINCT m.run FROM alice_lb l JOIN pgdl.models m ON m.id = l.model');
is(run_rows_owned_by($alice_run),
	"checkpoints:$ROWS:alice metrics:$ROWS:alice models:2:alice run:1:alice",
	'every row of her run is hers, the workers\' metrics and checkpoints too');

# Starts a long run in the background as $user (after @pre) and waits for its
# first checkpoint; returns the psql handle and the run id.
sub start_long_run
{
	my ($app, $user, $owner, @pre) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($node, $app, $user, @pre,
		"SELECT count(*) FROM pgdl.fit_multiple('${owner}_packed', 'long', $EPOCHS, workers => 2)");
	ok(poll_until($node, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run > $before)", 20),
		"$app: the run checkpoints its first epoch");
	my $run = $node->safe_psql('postgres', "SELECT max(run) FROM pgdl.checkpoints WHERE run > $before");
	return ($bg, $run);
}

sub cancel_run
{
	my ($app, $bg, $run) = @_;
	$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'");
	my $rc = finish_psql($bg, 10);
	ok(defined $rc && $rc != 0, "$app: the cancelled run fails");
	ok(workers_gone_within($node, 5), "$app: its workers are gone");
	cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"),
		'<', 2 * $EPOCHS, "$app: the run stopped before its end");
}

# ---------------------------------------------------------------------------
# alice: cancelled, then resumed by herself; bob can do nothing to the run.
# ---------------------------------------------------------------------------
{
	my ($bg, $run) = start_long_run('own_alice', 'alice', 'alice');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.progress WHERE run = $run",
			extra_params => [ '-U', 'alice' ]),
		'2', 'alice sees her run in flight in pgdl.progress');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.progress WHERE run = $run",
			extra_params => [ '-U', 'bob' ]),
		'0', '... bob does not');
	cancel_run('own_alice', $bg, $run);

	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)", extra_params => [ '-U', 'bob' ]);
	like($err, qr/run $run does not exist/, 'bob cannot resume her run: for him it does not exist');
	($ret, $out, $err) = $node->psql(
		'postgres',
		"INSERT INTO pgdl.checkpoints (run, config, epoch, weights) SELECT run, config, epoch + 1, weights "
		  . "FROM pgdl.checkpoints WHERE run = $run;"
		  . "INSERT INTO pgdl.checkpoints (owner, run, config, epoch, weights) VALUES ('alice', $run, 1, $EPOCHS, '\\x00')",
		extra_params => [ '-U', 'bob' ]);
	like($err, qr/new row violates row-level security policy for table "checkpoints"/,
		'bob cannot plant a checkpoint into her run');

	$node->safe_psql('postgres', "CREATE TABLE alice_resumed AS SELECT * FROM pgdl.resume($run)",
		extra_params => [ '-U', 'alice' ]);
	is(weights('alice_resumed'), $uninterrupted,
		'alice resumes her run: the models of the uninterrupted run, bit for bit');
	is(run_rows_owned_by($run),
		"checkpoints:$ROWS:alice metrics:$ROWS:alice models:2:alice run:1:alice",
		'every row of the resumed run is hers');
}

# ---------------------------------------------------------------------------
# team: carol runs it as team (SET ROLE), and resumes it as herself, a member of
# team: what the resumed run writes is still team's.
# ---------------------------------------------------------------------------
{
	my ($bg, $run) = start_long_run('own_team', 'carol', 'team', 'SET ROLE team');
	cancel_run('own_team', $bg, $run);
	is($node->safe_psql('postgres', "SELECT owner FROM pgdl.runs WHERE id = $run"), 'team', 'the run is team\'s');

	$node->safe_psql('postgres', "CREATE TABLE team_resumed AS SELECT * FROM pgdl.resume($run)",
		extra_params => [ '-U', 'carol' ]);
	is(weights('team_resumed'), $uninterrupted,
		'carol, a member of team, resumes its run: the models of the uninterrupted run, bit for bit');
	is(run_rows_owned_by($run),
		"checkpoints:$ROWS:team metrics:$ROWS:team models:2:team run:1:team",
		'every row of the run is team\'s, those carol\'s workers wrote too');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.run_metrics WHERE run = $run",
			extra_params => [ '-U', 'bob' ]),
		'0', 'bob sees none of it');
}

$node->stop;
unlike(slurp_file($node->logfile), qr/PANIC|terminated by signal/, 'no backend crashed');

done_testing();
