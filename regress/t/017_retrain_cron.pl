# A nightly retrain scheduled by pg_cron (Debian's postgresql-15-cron): the node
# loads pg_cron with shared_preload_libraries and names its database with
# cron.database_name, the job is scheduled with cron.schedule and seen in
# cron.job, and its command is then run as the job would run it (rather than
# waiting for 03:00): a refit on new rows deployed because it beats the model
# the name serves, and one that does not, kept.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $node = PostgreSQL::Test::Cluster->new('retrain_cron');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
});
$node->start;
is($node->safe_psql('postgres', q{SHOW shared_preload_libraries}), 'pg_cron', 'pg_cron is preloaded');
$node->safe_psql('postgres', 'CREATE EXTENSION pg_cron; CREATE EXTENSION pgdl;' . points_sql() . q{
SET client_min_messages = warning;
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 1, standardize => true);
SELECT pgdl.fit('train_packed', 'small', '{"optimizer": "adam", "lr": 0.001, "seed": 1}', 1, name => 'first');
SELECT pgdl.deploy('svc', 'first');
-- the rows that arrived since: what the job refits on
CREATE TABLE new_rows AS SELECT x, label FROM points;
});

# the job, as the guide schedules it
my $command = q{SELECT deployed FROM pgdl.retrain('svc', 'new_rows', epochs => 5, metric => 'accuracy')};
my $job = $node->safe_psql('postgres', qq{SELECT cron.schedule('retrain-svc', '0 3 * * *', \$\$$command\$\$)});
like($job, qr/^\d+$/, 'cron.schedule returns the job id');
is($node->safe_psql('postgres', qq{SELECT schedule || ' | ' || database || ' | ' || username || ' | ' || active
										FROM cron.job WHERE jobid = $job}),
	'0 3 * * * | postgres | ' . $node->safe_psql('postgres', 'SELECT current_user') . ' | true',
	'cron.job holds the nightly schedule, database and role');
is($node->safe_psql('postgres', qq{SELECT command FROM cron.job WHERE jobname = 'retrain-svc'}), $command,
	'cron.job holds the retrain command');

# run the command as pg_cron would (its own connection, one statement), not waiting for 03:00
my $before = $node->safe_psql('postgres', q{SELECT model FROM pgdl.deployments WHERE name = 'svc' AND active});
is($node->safe_psql('postgres', $node->safe_psql('postgres', qq{SELECT command FROM cron.job WHERE jobid = $job})),
	't', 'the job refits and deploys a model that beats one trained for one epoch');
my $after = $node->safe_psql('postgres', q{SELECT model FROM pgdl.deployments WHERE name = 'svc' AND active});
isnt($after, $before, 'the name serves the refit');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM pgdl.deployments WHERE name = 'svc'}), '2',
	'the history keeps the model it served before');
is($node->safe_psql('postgres', q{SELECT x.normalization = p.normalization FROM pgdl.datasets x, pgdl.datasets p
									WHERE x.packed = 'retrain_svc_train'::regclass AND p.packed = 'train_packed'::regclass}),
	't', "the refit was packed with the served model's preprocessing");

# the next night: a refit of one epoch from scratch does not beat it, and the name keeps its model
is($node->safe_psql('postgres', q{SELECT deployed FROM pgdl.retrain('svc', 'new_rows', epochs => 1,
									warm_start => false, metric => 'accuracy', seed => 7)}),
	'f', 'a refit that does not beat the served model is not deployed');
is($node->safe_psql('postgres', q{SELECT model FROM pgdl.deployments WHERE name = 'svc' AND active}), $after,
	'the name still serves the better model');

# unscheduled: cron.job is empty again
$node->safe_psql('postgres', q{SELECT cron.unschedule('retrain-svc')});
is($node->safe_psql('postgres', q{SELECT count(*) FROM cron.job}), '0', 'cron.unschedule removes the job');

$node->stop;
done_testing();
