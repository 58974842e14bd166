# pgdl.tpe_search is byte-reproducible from its seed whatever the workers.
#
# A search proposes its later batches from the scores of the earlier ones, and
# a score is read from a model that fit_multiple trains to the same bytes with
# any number of workers and any timing; so the configurations each batch
# proposes, and the models trained from them, must be the same with 1, 2 and 4
# workers.  Each search's batches are compared position by position (batch,
# then the configuration's place in its set): the architecture, the
# configuration and the md5 of the stored weights; the leaderboards alike.  A
# search with another seed proposes other configurations, so the comparison
# can tell searches apart; and TPE's batches differ from the random draws a
# random_search of the same seed would have made.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $SPACE = q{'{"lr": {"log_uniform": [0.001, 0.3]}, "optimizer": {"choice": ["sgd", "adam"]},
  "batch_size": {"int": [16, 64]}, "momentum": {"uniform": [0.0, 0.95]}, "seed": 5}'};

my $node = PostgreSQL::Test::Cluster->new('tpe');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

$node->safe_psql(
	'postgres', 'CREATE EXTENSION pgdl;' . points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
});

# One search: 12 trials in batches of 4 over both architectures, 2 epochs each, ranked by validation loss.
sub search
{
	my ($name, $workers, $seed) = @_;
	$node->safe_psql('postgres', qq{
SET client_min_messages = warning;
CREATE TABLE lb_$name AS
SELECT * FROM pgdl.tpe_search('train_packed', ARRAY['small', 'wide'], $SPACE, trials => 12, batch => 4,
                              epochs => 2, validation => 'valid_packed', seed => $seed, workers => $workers,
                              set_name => '$name');
});
}

# Each configuration a search proposed, in batch order and its place in its set, with its model's md5.
sub proposals
{
	my ($name) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(batch || '.' || place || ' ' || architecture || ' ' || config || ' ' || md5, E'\n'
                  ORDER BY batch, place)
  FROM (SELECT split_part(c.set_name, '/', 2)::int AS batch,
               row_number() OVER (PARTITION BY c.set_name ORDER BY c.id) AS place,
               a.name AS architecture, c.config, md5(m.weights) AS md5
          FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture
          JOIN lb_$name l ON l.config = c.id JOIN pgdl.models m ON m.id = l.model
         WHERE c.set_name LIKE '$name/%') p});
}

# The leaderboard without ids: rank, batch, configuration, score, the model's md5.
sub leaderboard
{
	my ($name) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(l.rank || ' ' || l.batch || ' ' || l.config_json || ' ' || l.score || ' ' || md5(m.weights),
                  E'\n' ORDER BY l.rank)
  FROM lb_$name l JOIN pgdl.models m ON m.id = l.model});
}

search('w1', 1, 42);
search('w2', 2, 42);
search('w4', 4, 42);
search('other_seed', 2, 43);

my $p1 = proposals('w1');
my $n = () = $p1 =~ /^\d+\.\d+ /mg;
is($n, 12, '1 worker: 12 configurations in 3 batches, each with its model');
like($p1, qr/^3\.4 /m, 'the third batch has 4 configurations');
is(proposals('w2'), $p1, '2 workers: the same configurations in each batch, and the same model bytes');
is(proposals('w4'), $p1, '4 workers: the same configurations in each batch, and the same model bytes');
is(leaderboard('w2'), leaderboard('w1'), '2 workers: the same leaderboard (ranks, batches, scores, models)');
is(leaderboard('w4'), leaderboard('w1'), '4 workers: the same leaderboard');
isnt(proposals('other_seed'), $p1, 'another seed proposes other configurations');

# the first batch is random_search's sample of the seed; the later ones are not its next samples
$node->safe_psql('postgres',
	"SELECT pgdl.random_search('random', ARRAY['small', 'wide'], $SPACE, 12, seed => 42)");
my $same_as_random = sub {
	my ($sets) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FROM pgdl.configs r JOIN pgdl.configs t USING (architecture, config)
 WHERE r.set_name = 'random' AND t.set_name IN ($sets)});
};
is($same_as_random->(q{'w1/1'}), '4', "the first batch is random_search's sample of the same seed");
is($same_as_random->(q{'w1/2', 'w1/3'}), '0', 'the later batches are proposed, not drawn at random');

# the workers' runs: one per batch, each finished, with the workers asked for
is( $node->safe_psql('postgres', q{
SELECT string_agg(n::text, ' ' ORDER BY w) FROM (
  SELECT (r.config->>'workers')::int AS w, count(DISTINCT r.id) AS n
    FROM pgdl.runs r WHERE r.kind = 'fit_multiple' AND r.status = 'finished' AND r.config->>'set' ~ '^w[124]/'
   GROUP BY 1) s}),
	'3 3 3',
	'a finished fit_multiple run per batch, for each worker count');

$node->stop;
done_testing();
