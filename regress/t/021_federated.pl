# pgdl.fit_federated across servers: a coordinator and two sites (nodes) on
# this machine, reached through postgres_fdw.
#
# A run records each round with a checkpoint as it ends.  A site killed in
# round 2 fails a run without min_sites, naming the site and the run, and
# pgdl.resume after the site is back ends with the bytes of an uninterrupted
# run; with min_sites = 1 the run goes on without the site, whose absence each
# later round's metrics name; a site that hangs (a lock wait) is fenced at its
# round's deadline and left out of that round.  A private run reports its privacy per round as
# mu-GDP and as epsilon at delta, which this test computes again on its own
# (Dong, Roth and Su's conversion, solved by bisection here).
use strict;
use warnings;

use POSIX qw(erfc);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $ROUNDS = 5;
my $LOCAL  = 600;   # local epochs of a round: about a second a round here, so that a kill lands in round 2
my $CFG    = '{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 5, "seed": 5}';

# log_parameter_max_length = 0: under the tests' log_statement = all, a node
# would log every model sent to it, in hex
my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord', "max_worker_processes = 16\npgdl.keep_checkpoints = -1\n$LOG_CONF");
my $node1 = new_pgdl_node('node1', $LOG_CONF);
my $node2 = new_pgdl_node('node2', $LOG_CONF);
add_node_server($coord, 'node1', $node1);
add_node_server($coord, 'node2', $node2);

$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2']);
});

sub fed_sql
{
	my ($name, $extra) = @_;
	$extra //= '';
	return "SELECT pgdl.fit_federated('train_packed', 'small', '$CFG', $ROUNDS, $LOCAL, 'valid_packed', '$name'$extra)";
}

sub model_md5
{
	my ($name) = @_;
	return $coord->safe_psql('postgres', "SELECT md5(weights) FROM pgdl.models WHERE name = '$name'");
}

sub latest_run
{
	return $coord->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE kind = 'fit_federated'");
}

# round:sites:missing of each round's row of a run
sub federation
{
	my ($run) = @_;
	return $coord->safe_psql(
		'postgres', qq{
SELECT string_agg(epoch || ':' || array_to_string(ARRAY(SELECT jsonb_array_elements_text(federation -> 'sites')), ',')
                  || ':' || array_to_string(ARRAY(SELECT jsonb_array_elements_text(federation -> 'missing')), ','),
                  ' ' ORDER BY epoch)
  FROM pgdl.run_metrics WHERE run = $run AND node IS NULL});
}

# Waits for the first round of the run in progress to be committed; returns the run.
sub wait_for_round_1
{
	my ($name) = @_;
	ok( poll_until(
			$coord,
			"SELECT EXISTS (SELECT FROM pgdl.checkpoints c JOIN pgdl.runs r ON r.id = c.run
			                 WHERE r.kind = 'fit_federated' AND r.status = 'running' AND c.epoch = 1)",
			60),
		"$name: round 1 is committed with its checkpoint while the run goes on");
	return latest_run();
}

# Starts a run in the background, waits for its first round to be committed,
# then stops node2 at once (immediate: its backends are gone, as in a crash);
# returns the psql and the run.
sub kill_node2_in_round_2
{
	my ($name, $extra) = @_;
	my $bg  = start_psql($coord, $name, 'postgres', fed_sql($name, $extra));
	my $run = wait_for_round_1($name);
	$node2->stop('immediate');
	return ($bg, $run);
}

# ---------------------------------------------------------------------------
# 1. An uninterrupted run: every round with both sites' rows and a checkpoint
# ---------------------------------------------------------------------------
my $t0 = time;
$coord->safe_psql('postgres', fed_sql('fed_full'));
note(sprintf('the uninterrupted run of %d rounds took %.1f s', $ROUNDS, time - $t0));
my $full = model_md5('fed_full');
like($full, qr/^[0-9a-f]{32}$/, 'the uninterrupted run stores its model');
my $full_run = latest_run();
is(federation($full_run), join(' ', map { "$_:node1,node2:" } 1 .. $ROUNDS),
	'each round names the sites that answered, none missing');
is( $coord->safe_psql(
		'postgres',
		"SELECT string_agg(DISTINCT node, ',') || ' ' || count(*) FROM pgdl.run_metrics WHERE run = $full_run AND node IS NOT NULL"
	),
	'node1,node2 ' . (2 * $ROUNDS),
	'each round has a row of each site');
is( $coord->safe_psql('postgres',
		"SELECT string_agg(epoch::text, ',' ORDER BY epoch) FROM pgdl.checkpoints WHERE run = $full_run"),
	join(',', 1 .. $ROUNDS),
	'a checkpoint of every round');

# ---------------------------------------------------------------------------
# 2. Without min_sites, a site killed in round 2 fails the run; resume ends
#    with the bytes of the uninterrupted run
# ---------------------------------------------------------------------------
{
	my ($bg, $run) = kill_node2_in_round_2('fed_cut');
	my $rc = finish_psql($bg, 60);
	ok(defined $rc && $rc != 0, 'without min_sites the run fails when node2 is killed');
	like($bg->{stderr}, qr/server "node2"/, '... with an error naming node2') or diag($bg->{stderr});
	like($bg->{stderr}, qr/round \d+ of pgdl\.fit_federated run $run \(continue it with pgdl\.resume\)/,
		'... in a round of the run, with how to continue it');
	ok(poll_until($coord, "SELECT status = 'failed' FROM pgdl.runs WHERE id = $run", 30), '... and the run is failed');
	my $done = $coord->safe_psql('postgres', "SELECT max(epoch) FROM pgdl.checkpoints WHERE run = $run");
	ok($done >= 1 && $done < $ROUNDS, "... after round $done of $ROUNDS, committed with its checkpoint");
	is($coord->safe_psql('postgres', "SELECT count(DISTINCT epoch) FROM pgdl.run_metrics WHERE run = $run"),
		$done, '... and its rows, no more');

	ok(poll_until($coord, "SELECT NOT pgdl.run_in_progress($run)", 30), 'the run is no longer in flight');
	my ($ret, $out, $err) = $coord->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)");
	isnt($ret, 0, 'resume while node2 is down fails');
	like($err, qr/"node2"/, '... naming node2');
	is($coord->safe_psql('postgres', "SELECT status FROM pgdl.runs WHERE id = $run"), 'failed', '... leaving the run failed');
	$node2->start;
	is( $coord->safe_psql('postgres', "SELECT rank || ' ' || epochs FROM pgdl.resume($run)"),
		"1 $ROUNDS", 'pgdl.resume after node2 is back trains the rounds left');
	is(model_md5('fed_cut'), $full, '... to the bytes of the uninterrupted run');
	is(federation($run), federation($full_run), '... with the same rounds, each with both sites');
	is($coord->safe_psql('postgres', "SELECT status FROM pgdl.runs WHERE id = $run"), 'finished', '... and finished');
}

# ---------------------------------------------------------------------------
# 3. With min_sites = 1 the run goes on without the site killed in round 2
# ---------------------------------------------------------------------------
{
	my ($bg, $run) = kill_node2_in_round_2('fed_partial', ', min_sites => 1');
	my $rc = finish_psql($bg, 90);
	is($rc, 0, 'with min_sites = 1 the run goes on when node2 is killed') or diag($bg->{stderr});
	like($bg->{stderr}, qr/WARNING:  site "node2" is missing from round \d+ of $ROUNDS/,
		'... warning that node2 is missing');
	my $rounds = federation($run);
	like($rounds, qr/^1:node1,node2: /, '... round 1 had both sites');
	like($rounds, qr/ $ROUNDS:node1:node2$/, "... the last round names node2 as missing");
	my ($first_missing) = $rounds =~ /(\d+):node1:node2/;
	cmp_ok($first_missing, '>=', 2, "... node2 is missing from round $first_missing on");
	is( $coord->safe_psql(
			'postgres',
			"SELECT count(*) FROM pgdl.run_metrics WHERE run = $run AND node = 'node2' AND epoch >= $first_missing"),
		'0',
		'... with no row of node2 in those rounds');
	# the average is over the sites present: with node1 alone, the round's figures are node1's
	is( $coord->safe_psql(
			'postgres', qq{
SELECT bool_and(a.train_loss = s.train_loss AND a.train_accuracy = s.train_accuracy)
  FROM pgdl.run_metrics a JOIN pgdl.run_metrics s ON s.run = a.run AND s.epoch = a.epoch AND s.node = 'node1'
 WHERE a.run = $run AND a.node IS NULL AND a.epoch >= $first_missing}),
		't',
		'... and those rounds are averaged over node1 alone');
	is($coord->safe_psql('postgres', "SELECT status FROM pgdl.runs WHERE id = $run"), 'finished', '... and finishes');
	my $partial = model_md5('fed_partial');
	like($partial, qr/^[0-9a-f]{32}$/, '... storing its model');
	isnt($partial, $full, '... averaged over the site that answered');
	$node2->start;
}

# ---------------------------------------------------------------------------
# 3b. A site that stops answering but keeps its connection (here a lock wait
#     on its partition's table) is fenced at its round's deadline (2 s; rounds
#     of two local epochs take a fraction of it), and with min_sites = 1 the
#     round goes on without it; once the lock is gone, the next round has it.
# ---------------------------------------------------------------------------
{
	my $rounds = 3;
	my $locker = start_psql($node2, 'locker', 'postgres',
		'BEGIN; LOCK TABLE public.train_packed_p1 IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(120)');
	ok(poll_until($node2, "SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'public.train_packed_p1'::regclass AND mode = 'AccessExclusiveLock' AND granted)", 30),
		"node2's partition is locked");
	my $bg = start_psql($coord, 'fed_hung', 'postgres',
		"SET pgdl.node_deadline_floor = '2s'", 'SET pgdl.node_deadline_multiple = 0.001',
		"SELECT pgdl.fit_federated('train_packed', 'small', '$CFG', $rounds, 2, 'valid_packed', 'fed_hung', min_sites => 1)");
	my $run = wait_for_round_1('fed_hung');
	$node2->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'");
	finish_psql($locker, 10);
	my $rc = finish_psql($bg, 60);
	is($rc, 0, 'node2 hung in round 1, min_sites = 1: the run finishes') or diag($bg->{stderr});
	like($bg->{stderr}, qr/WARNING:  site "node2" is missing from round 1 of $rounds\nDETAIL:  server "node2" did not answer within its deadline/,
		'... node2 fenced at its deadline and left out of that round') or diag($bg->{stderr});
	like(federation($run), qr/^1:node1:node2 .* $rounds:node1,node2:$/, '... whose row names it missing, and the last round has it again');
}

# ---------------------------------------------------------------------------
# 4. A private run: mu and epsilon per round, as Dong, Roth and Su define them
# ---------------------------------------------------------------------------
sub phi { return 0.5 * erfc(-$_[0] / sqrt(2)); }

# delta(eps) of mu-GDP; its root in eps by bisection
sub gdp_delta
{
	my ($mu, $eps) = @_;
	return phi(-$eps / $mu + $mu / 2) - exp($eps) * phi(-$eps / $mu - $mu / 2);
}

sub gdp_epsilon
{
	my ($mu, $delta) = @_;
	my ($lo, $hi) = (0, 1);
	return 0 if gdp_delta($mu, 0) <= $delta;
	$hi *= 2 while gdp_delta($mu, $hi) > $delta;
	for (1 .. 200)
	{
		my $mid = ($lo + $hi) / 2;
		if (gdp_delta($mu, $mid) > $delta) { $lo = $mid } else { $hi = $mid }
	}
	return $hi;
}

{
	my ($z, $delta) = (1.3, 1e-5);
	$coord->safe_psql('postgres',
		"SELECT pgdl.fit_federated('train_packed', 'small', '$CFG', 4, 1, 'valid_packed', 'fed_private', clip => 1.5, noise_multiplier => $z, delta => $delta)"
	);
	my $run = latest_run();
	my @rows = split /\n/,
	  $coord->safe_psql('postgres',
		"SELECT epoch, federation ->> 'mu', federation ->> 'epsilon', federation ->> 'delta' FROM pgdl.run_metrics WHERE run = $run AND node IS NULL ORDER BY epoch"
	  );
	is(scalar(@rows), 4, 'a private run reports its privacy in each of its 4 rounds');
	for my $row (@rows)
	{
		my ($round, $mu, $eps, $d) = split /\|/, $row;
		my $want_mu  = sqrt($round) / $z;
		my $want_eps = gdp_epsilon($want_mu, $delta);
		cmp_ok(abs($mu - $want_mu), '<', 1e-12, "round $round: mu = sqrt($round) / $z");
		cmp_ok(abs($eps - $want_eps) / $want_eps, '<', 1e-6,
			sprintf('round %d: epsilon %.6f at delta %g, as the formula gives (%.6f)', $round, $eps, $delta, $want_eps));
		cmp_ok(abs(gdp_delta($mu, $eps) - $delta), '<', 1e-9, "round $round: delta(epsilon) is delta");
	}
	is($coord->safe_psql('postgres', "SELECT count(*) FROM pgdl.run_metrics WHERE run = $run AND node IS NOT NULL"),
		'0', 'a private run records no site rows (they are of the sites\' data, unnoised)');
	is(federation($run), '1:node1,node2: 2:node1,node2: 3:node1,node2: 4:node1,node2:',
		'... and names the sites of each round');
}

$_->stop for ($coord, $node1, $node2);
done_testing();
