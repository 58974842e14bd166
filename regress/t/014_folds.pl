# pgdl.fit_multiple(..., folds => true): cross-validation over the packed partitions.
#
# Each (configuration, fold) is a model that trains on every partition but the
# one it holds out and is validated on that one: the same bytes as
# pgdl.fit(..., holdout => k), whatever the number of workers.  The
# leaderboard ranks configurations by the mean of their folds' validation loss,
# pgdl.cross_validation gives the mean and spread; a fold run keeps no
# checkpoints, and pgdl.resume refuses it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 3;
my $FOLDS  = 4;

my $node = PostgreSQL::Test::Cluster->new('folds');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

# 2,000 points in 4 partitions; two configurations, the second stops early on its held-out partition
$node->safe_psql(
	'postgres', 'CREATE EXTENSION pgdl;' . points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'cv', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}',
                    '{"optimizer": "adam", "lr": 0.05, "batch_size": 25, "seed": 3, "patience": 1}']) c
 WHERE a.name = 'small' ORDER BY c;
});

for my $w (1, 2)
{
	$node->safe_psql('postgres',
		"CREATE TABLE lb_w$w AS SELECT * FROM pgdl.fit_multiple('train_packed', 'cv', $EPOCHS, workers => $w, folds => true)"
	);
}
my %run;
@run{ 1, 2 } = split /\n/,
  $node->safe_psql('postgres', "SELECT id FROM pgdl.runs WHERE kind = 'fit_multiple' ORDER BY id");
isnt($run{1}, $run{2}, 'two runs');

# (config, fold) -> md5 of the stored model, per run
sub fold_digests
{
	my ($run) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(rm.config || '/' || rm.fold || ':' || md5(m.weights), ' ' ORDER BY rm.config, rm.fold)
		  FROM (SELECT DISTINCT run, config, fold, model FROM pgdl.run_metrics WHERE run = $run) rm
		  JOIN pgdl.models m ON m.id = rm.model});
}
my $d1 = fold_digests($run{1});
my $n  = () = $d1 =~ /:[0-9a-f]{32}/g;
is($n, 2 * $FOLDS, '1 worker: a model per (configuration, fold), each linked to its metrics rows');
is(fold_digests($run{2}), $d1, '2 workers: the same fold models as 1 worker, bit for bit');

# pgdl.fit(..., holdout => k) of each configuration and fold: the same bytes
$node->safe_psql(
	'postgres', qq{
SET client_min_messages = warning;
CREATE TABLE fits AS
SELECT c.id AS config, k AS fold, pgdl.fit('train_packed', a.name, c.config, $EPOCHS, holdout => k) AS model
  FROM pgdl.configs c JOIN pgdl.architectures a ON a.id = c.architecture, generate_series(0, $FOLDS - 1) k
 WHERE c.set_name = 'cv' ORDER BY c.id, k;
});
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg(f.config || '/' || f.fold || ':' || md5(m.weights), ' ' ORDER BY f.config, f.fold)
	  FROM fits f JOIN pgdl.models m ON m.id = f.model}),
	$d1,
	'pgdl.fit(..., holdout => k) of each configuration: the same models as fold k of fit_multiple');
is( $node->safe_psql(
		'postgres', qq{
	SELECT bool_and((m.metrics->>'validation_loss')::float8 = (fm.metrics->>'validation_loss')::float8
	            AND (m.metrics->>'epoch') = (fm.metrics->>'epoch') AND (m.metrics->>'fold')::int = f.fold)
	  FROM fits f JOIN pgdl.models m ON m.id = f.model
	  JOIN pgdl.run_metrics rm ON rm.run = $run{1} AND rm.config = f.config AND rm.fold = f.fold
	  JOIN pgdl.models fm ON fm.id = rm.model}),
	't',
	'a fold and its pgdl.fit(..., holdout => k) validate alike on the held-out partition and stop at the same epoch');

# the leaderboard: a row per configuration, the means of its folds' last epochs, ranked by the mean loss
is( $node->safe_psql(
		'postgres', qq{
	WITH last AS (
		SELECT DISTINCT ON (config, fold) config, fold, epoch, train_loss, validation_loss, validation_accuracy
		  FROM pgdl.run_metrics WHERE run = $run{1} ORDER BY config, fold, epoch DESC),
	means AS (
		SELECT config, count(*) AS folds, max(epoch) AS epochs, avg(train_loss) AS tl, avg(validation_loss) AS vl,
		       avg(validation_accuracy) AS va, rank() OVER (ORDER BY avg(validation_loss)) AS r
		  FROM last GROUP BY config)
	SELECT count(*) = 2
	   AND bool_and(l.model IS NULL AND m.folds = $FOLDS AND l.rank = m.r AND l.epochs = m.epochs
	                AND abs(l.validation_loss - m.vl) < 1e-12 AND abs(l.validation_accuracy - m.va) < 1e-12
	                AND abs(l.train_loss - m.tl) < 1e-12)
	  FROM lb_w1 l JOIN means m USING (config)}),
	't',
	'the leaderboard ranks configurations by the mean validation loss of their folds, from pgdl.run_metrics');
is( $node->safe_psql('postgres', 'SELECT count(*) FROM (TABLE lb_w1 EXCEPT TABLE lb_w2) x'),
	'0', '2 workers: the same leaderboard');

# pgdl.cross_validation: mean and population standard deviation, computed here from the fold rows
my $rows = $node->safe_psql('postgres', qq{
	SELECT DISTINCT ON (config, fold) config, validation_loss
	  FROM pgdl.run_metrics WHERE run = $run{1} ORDER BY config, fold, epoch DESC});
my %loss;
for (split /\n/, $rows)
{
	my ($c, $v) = split /\|/;
	push @{ $loss{$c} }, $v;
}
for my $c (sort keys %loss)
{
	my @v    = @{ $loss{$c} };
	my $mean = 0;
	$mean += $_ / @v for @v;
	my $var = 0;
	$var += ($_ - $mean)**2 / @v for @v;
	my ($vm, $vs, $folds) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT validation_loss, validation_loss_std, folds FROM pgdl.cross_validation WHERE run = $run{1} AND config = $c");
	ok(abs($vm - $mean) < 1e-9 && abs($vs - sqrt($var)) < 1e-9 && $folds == $FOLDS && $vs > 0,
		"pgdl.cross_validation: configuration ${c}'s mean and spread over its $FOLDS folds");
	# the leaderboard view gives them too, on each of the configuration's fold rows
	my ($lm, $ls, $n) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT min(rank_value), min(rank_value_std), count(*) FROM pgdl.leaderboard WHERE run = $run{1} AND config = $c");
	ok(abs($lm - $mean) < 1e-9 && abs($ls - sqrt($var)) < 1e-9 && $n == $FOLDS,
		"pgdl.leaderboard: configuration ${c}'s mean (rank_value) and spread (rank_value_std) over its folds");
}

# rows, checkpoints and resume
is( $node->safe_psql(
		'postgres', qq{
	SELECT count(*) FILTER (WHERE fold IS NULL) = 0
	   AND (SELECT count(*) FROM pgdl.checkpoints WHERE run = $run{1}) = 0
	   AND (SELECT count(DISTINCT (config, fold)) FROM pgdl.run_metrics WHERE run = $run{1}) = 2 * $FOLDS
	   AND (SELECT status FROM pgdl.runs WHERE id = $run{1}) = 'finished'
	  FROM pgdl.run_metrics WHERE run = $run{1}}),
	't',
	'a fold run: metrics rows with their fold, no checkpoints, finished');
# as if cancelled: nothing to continue from
$node->safe_psql('postgres', "UPDATE pgdl.runs SET status = 'cancelled' WHERE id = $run{2}");
my ($rc, $out, $err) = $node->psql('postgres', "SELECT * FROM pgdl.resume($run{2})");
like($err, qr/run \d+ is a cross-validation and cannot be resumed/, 'pgdl.resume refuses a fold run');

# what folds refuse
my @refused = (
	[ "folds => true, validation => 'valid_packed'", qr/folds and validation do not combine/ ],
	[ "folds => true, strategy => 'hyperband'",     qr/folds work with strategy 'all' only/ ],
	[ "folds => NULL",                              qr/folds must not be NULL/ ],);
for my $r (@refused)
{
	($rc, $out, $err) = $node->psql('postgres', "SELECT * FROM pgdl.fit_multiple('train_packed', 'cv', 1, $r->[0])");
	like($err, $r->[1], "fit_multiple refuses $r->[0]");
}
($rc, $out, $err) = $node->psql('postgres', "SELECT * FROM pgdl.fit_multiple('valid_packed', 'cv', 1, folds => true)");
like($err, qr/folds need a packed table of at least 2 partitions/, 'fit_multiple refuses folds over 1 partition');
for my $r (["holdout => 4", qr/holdout must be a partition of the packed table, got 4/],
	["holdout => -1", qr/holdout must be a partition of the packed table, got -1/],
	["holdout => 0, validation => 'valid_packed'", qr/holdout and validation do not combine/])
{
	($rc, $out, $err) = $node->psql('postgres', "SELECT pgdl.fit('train_packed', 'small', '{}', 1, $r->[0])");
	like($err, $r->[1], "fit refuses $r->[0]");
}

$node->stop;
done_testing();
