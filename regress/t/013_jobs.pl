# The server's queue of pgdl jobs: with pgdl.max_workers = 2, two roles'
# selections submitted at once both finish, never more than 2 pgdl workers run,
# later jobs wait in the queue (a NOTICE says so, pgdl.jobs shows it), each role
# sees only its own jobs, a queued job can be cancelled, a job gives a worker
# back to another role's and takes free slots, every model equals the one its
# selection trains alone, two jobs over one packed table read each partition
# once (shared scans, src/data/shared_scan.c), and a worker that dies, holding
# buffers another job uses, fails only its job; with pgdl.max_workers = 1, a
# role's priorities reorder only its own queued jobs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 1000;    # many small steps: several seconds, so that other jobs arrive while it trains

my $node = PostgreSQL::Test::Cluster->new('jobs');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\npgdl.max_workers = 2\n");
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgdl;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT CREATE ON SCHEMA public TO alice, bob;
CREATE TABLE points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s;
SELECT pgdl.pack('points', 'x', 'label', 'packed', buffer_rows => 50, partitions => 4, seed => 7);
GRANT SELECT ON points, packed TO alice, bob;
});
for my $role ('alice', 'bob')
{
	my $lr = $role eq 'alice' ? '[0.01, 0.005]' : '[0.02, 0.003]';
	$node->safe_psql('postgres', qq{SET ROLE $role;
SELECT pgdl.add_architecture('small_$role', '{"input": [16], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}');
SELECT pgdl.grid_search('set_$role', '{small_$role}', '{"optimizer": "sgd", "lr": $lr, "batch_size": 2, "seed": 11}')});
}

sub fit_sql
{
	my ($role, $table, $workers, $epochs, $priority) = @_;
	$epochs //= $EPOCHS;
	my $prio = defined $priority ? ", priority => $priority" : '';
	return "CREATE TABLE $table AS SELECT * FROM pgdl.fit_multiple('packed', 'set_$role', $epochs, workers => $workers$prio)";
}

sub jobs_as
{
	my ($role, $query) = @_;
	return $node->safe_psql('postgres', "SET ROLE $role; $query");
}

sub pid_of
{
	my ($app) = @_;
	return $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE application_name = '$app'");
}

# Each selection alone first: the models the queued runs must reproduce.
$node->safe_psql('postgres', "SET ROLE alice; " . fit_sql('alice', 'alone_alice', 2));
$node->safe_psql('postgres', "SET ROLE bob; " . fit_sql('bob', 'alone_bob', 2));
$node->safe_psql('postgres', "SET ROLE bob; " . fit_sql('bob', 'alone_bob_long', 2, 2 * $EPOCHS));

# ---------------------------------------------------------------------------
# Two roles at once, a worker each; two more jobs queue, one is withdrawn.
# ---------------------------------------------------------------------------
my $a1 = start_psql($node, 'job_a1', 'alice', fit_sql('alice', 'lb_alice', 1));
my $b1 = start_psql($node, 'job_b1', 'bob', fit_sql('bob', 'lb_bob', 1));
ok(poll_until($node, "SELECT count(*) = 2 FROM pgdl.jobs WHERE state = 'running' AND workers = 1", 30),
	'two jobs run, a worker slot each');
my $a2 = start_psql($node, 'job_a2', 'alice', 'SET client_min_messages = notice', fit_sql('alice', 'lb_alice_2', 1));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'queued' AND position = 1", 30),
	'a third job waits, first in the queue');
my $b2 = start_psql($node, 'job_b2', 'bob', 'SET client_min_messages = notice', fit_sql('bob', 'lb_cancelled', 1));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'queued' AND position = 2", 30),
	'a fourth queues behind it');

is($node->safe_psql('postgres',
		"SELECT string_agg(owner || ':' || state || ':' || coalesce(position, 0), ',' ORDER BY state, position, owner::text) FROM pgdl.jobs"),
	'alice:queued:1,bob:queued:2,alice:running:0,bob:running:0', 'pgdl.jobs shows the queue to a superuser');
is(jobs_as('bob', "SELECT string_agg(state, ',' ORDER BY state) FROM pgdl.jobs"), 'queued,running', 'bob sees only his own jobs');
is(jobs_as('alice', "SELECT string_agg(state, ',' ORDER BY state) FROM pgdl.jobs"), 'queued,running', 'alice sees only hers');
like(jobs_as('alice', "SELECT run FROM pgdl.jobs WHERE state = 'running'"), qr/^\d+$/, 'a running job names its run');
cmp_ok(jobs_as('alice', "SELECT configurations_left FROM pgdl.jobs WHERE state = 'running'"), '>=', 1,
	'... and how many configurations it has left');
ok(jobs_as('alice', "SELECT predicted_seconds_left > 0 AND priority = 0 FROM pgdl.jobs WHERE state = 'running'") eq 't',
	'... the seconds it has left as predicted, and its priority');
ok(jobs_as('alice', "SELECT predicted_seconds_left > 0 FROM pgdl.jobs WHERE state = 'queued'") eq 't',
	'a queued job shows its predicted time too');

# withdraw the fourth job: cancelling its statement
my $b2_pid = pid_of('job_b2');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($b2_pid)");
isnt(finish_psql($b2, 30), 0, 'a cancelled queued job ends with an error');
like($b2->{stderr}, qr/NOTICE:  pgdl job queued behind 1 other job\n/, 'it had been told it queued behind one');
like($b2->{stderr}, qr/canceling statement due to user request/, '... and, cancelled, that it was');
# its own row, not a count: one of the three others may end meanwhile
ok(poll_until($node, "SELECT NOT EXISTS (SELECT FROM pgdl.jobs WHERE pid = $b2_pid)", 10), 'it left the queue');

# never more than pgdl.max_workers pgdl workers, until the three jobs end
my $most = 0;
while (grep { $_->{h}->pumpable } $a1, $b1, $a2)
{
	my $n = $node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgdl worker'");
	$most = $n if $n > $most;
	$_->{h}->pump_nb for grep { $_->{h}->pumpable } $a1, $b1, $a2;
	usleep(50_000);
}
is(finish_psql($a1, 120), 0, "alice's first job finishes");
is(finish_psql($b1, 120), 0, "bob's job finishes");
is(finish_psql($a2, 120), 0, "alice's queued job finishes after them");
like($a2->{stderr}, qr/NOTICE:  pgdl job waiting for a worker: all 2 are busy/, 'it had been told it waited');
ok($most >= 1 && $most <= 2, "never more than 2 pgdl workers at once (at most $most seen)");
is(model_digests($node, 'lb_alice'), model_digests($node, 'alone_alice'), "alice's models equal her selection alone");
is(model_digests($node, 'lb_alice_2'), model_digests($node, 'alone_alice'), '... queued too');
is(model_digests($node, 'lb_bob'), model_digests($node, 'alone_bob'), "bob's models equal his selection alone");
is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.jobs'), '0', 'no job left');

# ---------------------------------------------------------------------------
# Fair share: a job that holds both slots gives one back when another role's
# job queues, and a job takes a slot that frees up when none waits.
# ---------------------------------------------------------------------------
my $a3 = start_psql($node, 'job_a3', 'alice', fit_sql('alice', 'lb_alice_shared', 2));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'running' AND workers = 2", 30),
	'a job alone takes both worker slots');
my $b3 = start_psql($node, 'job_b3', 'bob', fit_sql('bob', 'lb_bob_shared', 2, 2 * $EPOCHS));
ok(poll_until($node, "SELECT count(*) = 2 FROM pgdl.jobs WHERE state = 'running' AND workers = 1", 30),
	"when bob's job queues, alice's gives a worker back: a worker each");
is(finish_psql($a3, 120), 0, "alice's job finishes");
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE owner = 'bob'::regrole AND workers = 2", 30),
	"bob's job then takes the free slot");
is(finish_psql($b3, 120), 0, "bob's job finishes");
is(model_digests($node, 'lb_alice_shared'), model_digests($node, 'alone_alice'),
	"alice's models, trained by a worker that left and one that stayed, equal her selection alone");
is(model_digests($node, 'lb_bob_shared'), model_digests($node, 'alone_bob_long'),
	"bob's models, trained by one worker then two, equal his selection alone");

# ---------------------------------------------------------------------------
# Shared scans: two jobs of one worker each over one packed table.  Bob's
# worker attaches the partitions alice's worker read, except one whose row was
# updated (to the same values) since: that one it reads.  Alice's worker,
# terminated while both train on those buffers, fails only her job.
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()');

# How many of the packed table's partitions the workers of the job of backend $pid loaded as $how.
sub loads_of
{
	my ($pid, $how) = @_;
	my @lines = slurp_file($node->logfile) =~ /pgdl worker \d+ of backend $pid: partition \d+ of "packed" \Q$how\E\n/g;
	return scalar @lines;
}

sub loads_within
{
	my ($pid, $how, $count, $secs) = @_;
	for (1 .. $secs * 10)
	{
		return 1 if loads_of($pid, $how) >= $count;
		usleep(100_000);
	}
	diag("the job of backend $pid loaded " . loads_of($pid, $how) . " partitions as \"$how\"");
	return 0;
}

my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my $a4 = start_psql($node, 'job_a4', $superuser, 'SET ROLE alice', fit_sql('alice', 'lb_killed', 1));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'running' AND run IS NOT NULL", 30),
	"alice's job runs");
my $a4_pid = pid_of('job_a4');
ok(loads_within($a4_pid, 'read from its table and published', 4, 30),
	"alice's worker reads the 4 partitions and publishes them");
# a new version of one row of partition 2, of the same bytes: what alice's worker holds of it is stale
$node->safe_psql('postgres', 'UPDATE packed SET n = n WHERE part = 2 AND buffer_id = (SELECT min(buffer_id) FROM packed WHERE part = 2)');
my $b4 = start_psql($node, 'job_b4', 'bob', fit_sql('bob', 'lb_survivor', 1));
ok(poll_until($node, "SELECT count(*) = 2 FROM pgdl.jobs WHERE state = 'running' AND workers = 1 AND run IS NOT NULL", 30),
	'two jobs run side by side, a worker each');
my $b4_pid = pid_of('job_b4');
ok(loads_within($b4_pid, 'attached from another worker', 3, 30), "bob's worker attaches the 3 partitions alice's read");
ok(loads_within($b4_pid, 'read from its table and published', 1, 30), '... and reads the one updated since');
like(slurp_file($node->logfile), qr/of backend $b4_pid: partition 2 of "packed" read from its table and published\n/,
	'... which is partition 2');
is(loads_of($b4_pid, 'read from its table'), 0, '... and reads nothing it does not share');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()');
my $victim_run = $node->safe_psql('postgres', "SELECT run FROM pgdl.jobs WHERE pid = $a4_pid");
is($node->safe_psql('postgres', "SELECT owner FROM pgdl.jobs WHERE pid = $a4_pid"), 'alice',
	'a job started after SET ROLE belongs to that role');
is(jobs_as('alice', "SELECT count(*) FROM pgdl.jobs"), '1', '... and shows to it');
# between two visits no model of the run is busy and no worker shows: try until one is terminated
ok( poll_until(
		$node,
		"SELECT coalesce(bool_or(pg_terminate_backend(worker_pid)), false)
		   FROM (SELECT worker_pid FROM pgdl.progress WHERE run = $victim_run AND worker_pid IS NOT NULL LIMIT 1) w",
		30),
	"alice's worker, training, is terminated");
isnt(finish_psql($a4, 60), 0, 'the job whose worker died fails');
is(finish_psql($b4, 120), 0, 'the other job finishes, on the buffers the dead worker read');
is(model_digests($node, 'lb_survivor'), model_digests($node, 'alone_bob'), '... with the models it trains alone');

# ---------------------------------------------------------------------------
# Priority, with pgdl.max_workers = 1: while bob's long job runs, bob queues
# a job, then alice a low-priority one and a high-priority one.  Alice's
# high-priority job takes the place of her earlier low-priority one, but not
# bob's place ahead of both: bob's, alice's high, alice's low start in turn.
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', 'ALTER SYSTEM SET pgdl.max_workers = 1; SELECT pg_reload_conf()');
ok(poll_until($node, "SELECT current_setting('pgdl.max_workers') = '1'", 10), 'pgdl.max_workers is 1');

sub queue_shown
{
	return $node->safe_psql('postgres',
		"SELECT string_agg(a.application_name || ':' || j.state || ':' || coalesce(j.position, 0) || ':' || j.priority, ','
		                   ORDER BY j.position NULLS FIRST)
		   FROM pgdl.jobs j JOIN pg_stat_activity a USING (pid)");
}

my $r5 = start_psql($node, 'job_r5', 'bob', fit_sql('bob', 'lb_prio_long', 1, 2 * $EPOCHS));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'running' AND workers = 1", 30),
	"bob's long job takes the only worker slot");
my $b5 = start_psql($node, 'job_b5', 'bob', fit_sql('bob', 'lb_prio_bob', 1, $EPOCHS / 4));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'queued'", 30), 'bob queues a job');
my $l5 = start_psql($node, 'job_l5', 'alice', 'SET client_min_messages = notice',
	fit_sql('alice', 'lb_prio_low', 1, $EPOCHS / 4, -5));
ok(poll_until($node, "SELECT count(*) = 2 FROM pgdl.jobs WHERE state = 'queued'", 30), 'alice queues a low-priority job');
is(queue_shown(), 'job_r5:running:0:0,job_b5:queued:1:0,job_l5:queued:2:-5', 'the queue in the order jobs came');
my $h5 = start_psql($node, 'job_h5', 'alice', 'SET client_min_messages = notice', fit_sql('alice', 'lb_prio_high', 1, $EPOCHS, 7));
ok(poll_until($node, "SELECT count(*) = 3 FROM pgdl.jobs WHERE state = 'queued'", 30), 'then a high-priority one');
is(queue_shown(), 'job_r5:running:0:0,job_b5:queued:1:0,job_h5:queued:2:7,job_l5:queued:3:-5',
	"alice's high-priority job takes her low-priority job's place, behind bob's");
is(jobs_as('alice', "SELECT string_agg(position || ':' || priority, ',' ORDER BY position) FROM pgdl.jobs"), '2:7,3:-5',
	'alice sees her jobs, their places and priorities');

ok( poll_until(
		$node, "SELECT count(*) = 1 FROM pgdl.jobs j JOIN pg_stat_activity a USING (pid)
		         WHERE a.application_name = 'job_b5' AND j.state = 'running'", 120),
	"bob's queued job starts first");
is(queue_shown(), 'job_b5:running:0:0,job_h5:queued:1:7,job_l5:queued:2:-5', '... while both of alice\'s wait');
ok( poll_until(
		$node, "SELECT count(*) = 1 FROM pgdl.jobs j JOIN pg_stat_activity a USING (pid)
		         WHERE a.application_name = 'job_h5' AND j.state = 'running'", 120),
	"alice's high-priority job starts next");
is(queue_shown(), 'job_h5:running:0:7,job_l5:queued:1:-5', "... before her earlier low-priority one");
is(finish_psql($r5, 120), 0, "bob's long job finishes");
is(finish_psql($b5, 120), 0, "bob's queued job finishes");
is(finish_psql($h5, 120), 0, "alice's high-priority job finishes");
is(finish_psql($l5, 120), 0, "alice's low-priority job finishes last");
like($l5->{stderr}, qr/NOTICE:  pgdl job queued behind 1 other job\n/, 'it had been told it queued behind bob\'s');
is(model_digests($node, 'lb_prio_high'), model_digests($node, 'alone_alice'),
	"alice's high-priority job's models equal her selection alone");
is(model_digests($node, 'lb_prio_long'), model_digests($node, 'alone_bob_long'), "bob's long job's too");

done_testing();
