# A statement sees one model for its whole run: a deployment changed while a
# long predict (row by row) and a long predict_batch run by its name leaves
# both answering with the model the name served when they began, and the next
# statement answers with the new one.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $ROWS = 400;		# at 10 ms a row, each statement runs about 4 s; as many pause_i tables

my $node = PostgreSQL::Test::Cluster->new('deployments');
$node->init;
$node->start;
$node->safe_psql(
	'postgres', 'CREATE EXTENSION pgdl;' . points_sql() . q{
SET client_min_messages = warning;
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 1);
SELECT pgdl.fit('train_packed', 'small', '{"lr": 0.001, "seed": 1}', 1, name => 'model_a');
SELECT pgdl.fit('train_packed', 'small', '{"lr": 0.1, "seed": 2}', 5, name => 'model_b');
SELECT pgdl.deploy('svc', 'model_a');
DO $$ BEGIN FOR i IN 1 .. 400 LOOP EXECUTE format('CREATE TABLE pause_%s ()', i); END LOOP; END $$;
});
my ($a, $b) = split /\n/, $node->safe_psql('postgres', q{SELECT id FROM pgdl.models ORDER BY name});

# the two models answer differently, or the test could not tell them apart
cmp_ok($node->safe_psql('postgres', qq{
	SELECT count(*) FROM points
	 WHERE i <= $ROWS AND pgdl.predict_class($a, x::float8[]) <> pgdl.predict_class($b, x::float8[])}),
	'>', 0, 'model_a and model_b predict different classes for some rows');

# pg_sleep in the select list runs once a row, as the row is read; so does a lock on a table not
# locked before, at which a backend reads the invalidations others sent (the deploy's among them)
my $slow_rows = "(SELECT i, x::float8[] AS x, pg_sleep(0.01) AS pause,"
  . " pg_relation_size(('pause_' || i)::regclass) AS lock FROM points WHERE i <= $ROWS)";
my $rows = start_psql($node, 'by_rows', 'postgres', qq{
	SELECT count(*) || ' ' || bool_and(pgdl.predict('svc', x) = pgdl.predict($a, x)) FROM $slow_rows s});
my $batch = start_psql($node, 'by_batch', 'postgres', qq{
	SELECT count(*) || ' ' || bool_and(b.class = pgdl.predict_class($a, p.x::float8[]))
	  FROM pgdl.predict_batch('svc', \$q\$$slow_rows\$q\$, 'i', 'x', batch_size => 16) b
	  JOIN points p ON p.i = b.id});
ok(poll_until($node, q{SELECT count(*) = 2 FROM pg_stat_activity
						WHERE application_name IN ('by_rows', 'by_batch') AND state = 'active'}, 30),
	'both statements run');
usleep(1_000_000);
is($node->safe_psql('postgres', q{SELECT pgdl.deploy('svc', 'model_b')}), $b, 'model_b deployed meanwhile');
is($node->safe_psql('postgres', qq{
	SELECT bool_and(pgdl.predict('svc', x::float8[]) = pgdl.predict($b, x::float8[])) FROM points WHERE i <= 50}),
	't', 'a new statement answers with model_b');
cmp_ok($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
										WHERE application_name IN ('by_rows', 'by_batch') AND state = 'active'}),
	'==', 2, 'the deploy came while both statements still ran');

is(finish_psql($rows, 60), 0, 'the row-by-row statement ends') or diag($rows->{stderr});
is($rows->{stdout}, "$ROWS true\n", 'every row of the statement begun before the deploy answered with model_a');
is(finish_psql($batch, 60), 0, 'predict_batch ends') or diag($batch->{stderr});
is($batch->{stdout}, "$ROWS true\n", 'every batch of predict_batch begun before the deploy answered with model_a');

# and back: a rollback is seen by the next statement too
is($node->safe_psql('postgres', q{SELECT pgdl.rollback('svc')}), $a, 'rolled back to model_a');
is($node->safe_psql('postgres', qq{
	SELECT bool_and(pgdl.predict('svc', x::float8[]) = pgdl.predict($a, x::float8[])) FROM points WHERE i <= 50}),
	't', 'the next statement answers with model_a again');

$node->stop;
done_testing();
