# The server's queue of pgdl jobs: with pgdl.max_workers = 2, two roles'
# selections submitted at once both finish, never more than 2 pgdl workers run,
# the later job waits in the queue (a NOTICE says so, pgdl.jobs shows it), each
# role sees only its own jobs, a queued job can be cancelled, every model equals
# the one its selection trains alone, and a worker that dies fails only its job.
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
	my ($role, $table, $workers) = @_;
	return "CREATE TABLE $table AS SELECT * FROM pgdl.fit_multiple('packed', 'set_$role', $EPOCHS, workers => $workers)";
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

# ---------------------------------------------------------------------------
# Two roles at once, and a third job queued and withdrawn.
# ---------------------------------------------------------------------------
my $a1 = start_psql($node, 'job_a1', 'alice', fit_sql('alice', 'lb_alice', 2));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'running' AND workers = 2", 30),
	'the first job runs with both worker slots');
my $b1 = start_psql($node, 'job_b1', 'bob', 'SET client_min_messages = notice', fit_sql('bob', 'lb_bob', 2));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'queued' AND position = 1", 30),
	'the second job waits, first in the queue');
my $a2 = start_psql($node, 'job_a2', 'alice', 'SET client_min_messages = notice', fit_sql('alice', 'lb_cancelled', 2));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.jobs WHERE state = 'queued' AND position = 2", 30),
	'a third job queues behind it');

is($node->safe_psql('postgres', "SELECT string_agg(owner || ':' || state, ',' ORDER BY state, owner::text) FROM pgdl.jobs"),
	'alice:queued,bob:queued,alice:running', 'pgdl.jobs shows the queue to a superuser');
is(jobs_as('bob', "SELECT string_agg(state || ':' || position, ',') FROM pgdl.jobs"), 'queued:1', 'bob sees only his own job');
is(jobs_as('alice', "SELECT string_agg(state, ',' ORDER BY state) FROM pgdl.jobs"), 'queued,running', 'alice sees only hers');
my $a1_run = jobs_as('alice', "SELECT run FROM pgdl.jobs WHERE state = 'running'");
like($a1_run, qr/^\d+$/, 'the running job names its run');
cmp_ok(jobs_as('alice', "SELECT configurations_left FROM pgdl.jobs WHERE state = 'running'"), '>=', 1,
	'... and how many configurations it has left');

# withdraw the third job: cancelling its statement
$node->safe_psql('postgres', "SELECT pg_cancel_backend(" . pid_of('job_a2') . ")");
my $rc = finish_psql($a2, 30);
isnt($rc, 0, 'a cancelled queued job ends with an error');
like($a2->{stderr}, qr/NOTICE:  pgdl job queued behind 1 other job\n/, 'the third job was told it queued behind one');
like($a2->{stderr}, qr/canceling statement due to user request/, '... and, cancelled, that it was');
ok(poll_until($node, "SELECT count(*) = 2 FROM pgdl.jobs", 10), 'and leaves the queue');

# never more than pgdl.max_workers pgdl workers, until both jobs end
my $most = 0;
while ($a1->{h}->pumpable || $b1->{h}->pumpable)
{
	my $n = $node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pgdl worker'");
	$most = $n if $n > $most;
	$a1->{h}->pump_nb if $a1->{h}->pumpable;
	$b1->{h}->pump_nb if $b1->{h}->pumpable;
	usleep(50_000);
}
is(finish_psql($a1, 120), 0, "alice's job finishes");
is(finish_psql($b1, 120), 0, "bob's job finishes after it");
like($b1->{stderr}, qr/NOTICE:  pgdl job waiting for a worker: all 2 are busy/, 'bob was told his job waits');
ok($most >= 1 && $most <= 2, "never more than 2 pgdl workers at once (at most $most seen)");
is(model_digests($node, 'lb_alice'), model_digests($node, 'alone_alice'), "alice's models equal her selection alone");
is(model_digests($node, 'lb_bob'), model_digests($node, 'alone_bob'), "bob's models equal his selection alone");
is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.jobs'), '0', 'no job left');

# ---------------------------------------------------------------------------
# Two jobs of one worker each: a worker that dies fails only its own job.
# ---------------------------------------------------------------------------
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
my $a3 = start_psql($node, 'job_a3', $superuser, 'SET ROLE alice', fit_sql('alice', 'lb_killed', 1));
my $b3 = start_psql($node, 'job_b3', 'bob', fit_sql('bob', 'lb_survivor', 1));
ok(poll_until($node, "SELECT count(*) = 2 FROM pgdl.jobs WHERE state = 'running' AND workers = 1 AND run IS NOT NULL", 30),
	'two jobs run side by side, a worker each');
my $victim_run = $node->safe_psql('postgres', "SELECT run FROM pgdl.jobs WHERE pid = " . pid_of('job_a3'));
is($node->safe_psql('postgres', "SELECT owner FROM pgdl.jobs WHERE pid = " . pid_of('job_a3')), 'alice',
	'a job started after SET ROLE belongs to that role');
is(jobs_as('alice', "SELECT count(*) FROM pgdl.jobs"), '1', '... and shows to it');
ok(poll_until($node, "SELECT EXISTS (SELECT FROM pgdl.progress WHERE run = $victim_run AND worker_pid IS NOT NULL)", 30),
	"alice's worker is training");
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(worker_pid) FROM pgdl.progress WHERE run = $victim_run AND worker_pid IS NOT NULL LIMIT 1");
isnt(finish_psql($a3, 60), 0, 'the job whose worker died fails');
is(finish_psql($b3, 120), 0, 'the other job finishes');
is(model_digests($node, 'lb_survivor'), model_digests($node, 'alone_bob'), '... with the models it trains alone');

done_testing();
