# A pgdl.fit_multiple run in flight, seen from other sessions: pgdl.run_in_progress
# says so; pgdl.resume of it is "run N is in progress" (object_in_use), not a
# unique-key violation on its checkpoints; pgdl.cleanup_checkpoints leaves it
# alone.  The same holds for a run that pgdl.resume is continuing.  Once it
# ends, it is neither in progress nor resumable, and keeps the last checkpoint
# of each model.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 800;    # many small steps: a few seconds, so that other sessions act while it trains

my $node = PostgreSQL::Test::Cluster->new('in_flight');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgdl;
CREATE TABLE points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s;
SELECT pgdl.pack('points', 'x', 'label', 'packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.add_architecture('small', '{"input": [16], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}');
SELECT pgdl.grid_search('long', '{small}', '{"optimizer": "sgd", "lr": [0.01, 0.005], "batch_size": 2, "seed": 11}');
});

sub checkpoints
{
	my ($run) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run");
}

# ---------------------------------------------------------------------------
# A fit_multiple run in flight
# ---------------------------------------------------------------------------
my $bg = start_psql($node, 'long_run', $node->safe_psql('postgres', 'SELECT current_user'),
	"SELECT count(*) FROM pgdl.fit_multiple('packed', 'long', $EPOCHS, workers => 2)");
ok(poll_until($node, 'SELECT EXISTS (SELECT FROM pgdl.checkpoints)', 30), 'the run checkpoints its first epoch');
my $run = $node->safe_psql('postgres', 'SELECT max(run) FROM pgdl.checkpoints');

is($node->safe_psql('postgres', "SELECT pgdl.run_in_progress($run)"), 't', 'pgdl.run_in_progress: it is');
my ($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)");
like($err, qr/ERROR:  run $run is in progress\nDETAIL:  A pgdl.fit_multiple or pgdl.resume of it is still running/,
	'pgdl.resume of it: "run N is in progress"');
unlike($err, qr/duplicate key/, '... not a unique-key violation');
($ret, $out, $err) = $node->psql('postgres',
	"DO \$\$ BEGIN PERFORM pgdl.resume($run); EXCEPTION WHEN object_in_use THEN RAISE NOTICE 'object_in_use'; END \$\$");
like($err, qr/NOTICE:  object_in_use/, '... with SQLSTATE object_in_use');
($ret, $out, $err) = $node->psql('postgres', "SELECT pgdl.cleanup_checkpoints(0, $run)");
like($err, qr/ERROR:  run $run is in progress/, 'pgdl.cleanup_checkpoints of it: in progress');
my $before = checkpoints($run);
is($node->safe_psql('postgres', 'SELECT pgdl.cleanup_checkpoints(0)'), '0', 'pgdl.cleanup_checkpoints of all runs skips it');
cmp_ok(checkpoints($run), '>=', $before, '... and deletes none of its checkpoints');

my $rc = finish_psql($bg, 120);
is($rc, 0, 'the run ends');
is($node->safe_psql('postgres', "SELECT pgdl.run_in_progress($run)"), 'f', 'and is no longer in progress');
($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)");
like($err, qr/run $run has finished/, 'pgdl.resume of it: it has finished');
is($node->safe_psql('postgres', "SELECT string_agg(epoch::text, ',') FROM pgdl.checkpoints WHERE run = $run"),
	"$EPOCHS,$EPOCHS", 'it keeps the last checkpoint of each model');

# ---------------------------------------------------------------------------
# A run that pgdl.resume continues
# ---------------------------------------------------------------------------
$bg = start_psql($node, 'long_run_2', $node->safe_psql('postgres', 'SELECT current_user'),
	"SELECT count(*) FROM pgdl.fit_multiple('packed', 'long', $EPOCHS, workers => 2)");
ok(poll_until($node, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run > $run)", 30),
	'a second run checkpoints its first epoch');
$run = $node->safe_psql('postgres', 'SELECT max(run) FROM pgdl.checkpoints');
$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'long_run_2'");
$rc = finish_psql($bg, 30);
ok(defined $rc && $rc != 0, 'it is cancelled');
ok(workers_gone_within($node, 10), '... and its workers are gone');
is($node->safe_psql('postgres', "SELECT pgdl.run_in_progress($run)"), 'f', 'then it is not in progress');

my $last = $node->safe_psql('postgres', "SELECT max(epoch) FROM pgdl.checkpoints WHERE run = $run");
$bg = start_psql($node, 'resume', $node->safe_psql('postgres', 'SELECT current_user'),
	"SELECT count(*) FROM pgdl.resume($run)");
ok(poll_until($node, "SELECT max(epoch) > $last FROM pgdl.checkpoints WHERE run = $run", 30),
	'pgdl.resume continues it');
is($node->safe_psql('postgres', "SELECT pgdl.run_in_progress($run)"), 't', 'while it resumes, it is in progress');
($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)");
like($err, qr/ERROR:  run $run is in progress/, 'a second pgdl.resume of it: in progress');
$rc = finish_psql($bg, 120);
is($rc, 0, 'the first pgdl.resume ends');
is($node->safe_psql('postgres', "SELECT status || ' ' || count(m.id) FROM pgdl.runs r JOIN pgdl.models m ON m.run = r.id "
		  . "WHERE r.id = $run GROUP BY status"),
	'finished 2', '... with the run finished and its two models');

done_testing();
