# Deadlines of visits on nodes: a coordinator and two nodes on this machine.
#
# A node whose backend stops answering (SIGSTOP: it keeps its TCP connection,
# as a stuck disk or a lock wait would) is fenced when its visit's deadline
# passes: the call ends with an error that names the node and the run to
# resume, within the deadline and not long after; the node's query is
# cancelled and its connection closed, so that when the backend runs again its
# late answer is never read, and pgdl.resume ends with the bytes of an
# uninterrupted run.  A node that is only loaded (busy loops on every core)
# under the same deadline settings is not dropped: the run finishes, with the
# same bytes.  pgdl.explain_fit_multiple predicts a distributed run from the
# nodes' own paces (their pgdl.estimate), and a node's answer is checked.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 400;    # a few seconds of many short visits
my $FLOOR  = 2;      # s: pgdl.node_deadline_floor for the runs here

my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord', "max_worker_processes = 24\npgdl.keep_checkpoints = -1\n$LOG_CONF");
my $node1 = new_pgdl_node('node1', $LOG_CONF);
my $node2 = new_pgdl_node('node2', $LOG_CONF);
add_node_server($coord, 'node1', $node1);
add_node_server($coord, 'node2', $node2);

$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'long', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 2, "seed": 11}',
                    '{"optimizer": "adam", "lr": 0.0005, "batch_size": 2, "seed": 12}']) c
 WHERE a.name = 'small' ORDER BY c;
-- explained, not run: visits whose training outweighs a hop and a checkpoint
SELECT pgdl.add_architecture('big', '{"input": [16], "layers": [{"type": "dense", "units": 1024},
  {"type": "relu"}, {"type": "dense", "units": 1024}, {"type": "relu"}, {"type": "dense", "units": 4}]}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'big', a.id, jsonb_build_object('optimizer', 'sgd', 'lr', 0.01, 'batch_size', 2, 'seed', s)
  FROM pgdl.architectures a, generate_series(21, 22) s WHERE a.name = 'big' ORDER BY s;
SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2']);
});

my $SETTINGS = "SET pgdl.node_deadline_floor = '${FLOOR}s'";

sub run_of
{
	my ($table) = @_;
	return $coord->safe_psql('postgres',
		"SELECT DISTINCT m.run FROM $table l JOIN pgdl.models m ON m.id = l.model");
}

# the settings show and reset as documented
# (the library loaded first: its settings are checked from then on)
my $LOAD = 'SELECT FROM pgdl.version()';
is($coord->safe_psql('postgres', "$LOAD; SHOW pgdl.node_deadline_floor"), '1min', 'the floor is a minute by default');
is($coord->safe_psql('postgres', "$LOAD; SHOW pgdl.node_deadline_multiple"), '10', 'the multiple is 10 by default');
{
	my ($ret, $out, $err) = $coord->psql('postgres', "$LOAD; SET pgdl.node_deadline_floor = 0");
	isnt($ret, 0, 'a floor of 0 is refused');
	($ret, $out, $err) = $coord->psql('postgres', "$LOAD; SET pgdl.node_deadline_multiple = -1");
	isnt($ret, 0, 'a negative multiple is refused');
}

# ---------------------------------------------------------------------------
# The reference: the run, uninterrupted, under the deadline settings.
# ---------------------------------------------------------------------------
my $t0 = time;
$coord->safe_psql('postgres', "$SETTINGS; " .
	"CREATE TABLE lb_ref AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', $EPOCHS, 'valid_packed')");
my $ref_seconds = time - $t0;
note(sprintf('the uninterrupted run took %.1f s', $ref_seconds));
my $ref_digests = model_digests($coord, 'lb_ref');
like($ref_digests, qr/^\d+:[0-9a-f]{32} \d+:[0-9a-f]{32}$/, 'the reference run stores two models');

# ---------------------------------------------------------------------------
# A loaded node is not dropped: busy loops on every core (two here) while the
# run trains, the same deadline settings.
# ---------------------------------------------------------------------------
{
	my @loops = map { IPC::Run::start([ 'perl', '-e', '1 while 1' ]) } 1 .. 2;
	$t0 = time;
	my ($ret, $out, $err) = $coord->psql('postgres',
		"$SETTINGS; CREATE TABLE lb_loaded AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', $EPOCHS, 'valid_packed')"
	);
	my $loaded_seconds = time - $t0;
	$_->kill_kill for @loops;
	is($ret, 0, 'a run on loaded nodes finishes: no node is fenced') or diag($err);
	note(sprintf('the run on loaded nodes took %.1f s', $loaded_seconds));
	is(model_digests($coord, 'lb_loaded'), $ref_digests, '... and ends with the bytes of the reference run');
}

# ---------------------------------------------------------------------------
# pgdl.explain_fit_multiple reads the nodes' paces: each node's pgdl.estimate
# of the configurations (its profile, or its pgdl.cpu_gflops) over this
# server's.  A node a quarter as fast makes the run 4 times as long without
# a profile here (the slowest node sets the pace); with one, the simulation
# runs its visits 4 times slower.
# ---------------------------------------------------------------------------
my $EXPLAIN = "SELECT round(predicted_seconds::numeric, 6) || '|' || reason FROM pgdl.explain_fit_multiple('train_packed', 'big', 10, 'valid_packed') WHERE action = 'total'";

sub explain_total
{
	my ($what) = @_;
	my ($seconds, $note) = split /\|/, $coord->safe_psql('postgres', $EXPLAIN), 2;
	note("$what: predicted $seconds s ($note)");
	return ($seconds, $note);
}

sub set_gflops
{
	my ($node, $value) = @_;
	$node->safe_psql('postgres', "SELECT FROM pgdl.version(); ALTER SYSTEM SET pgdl.cpu_gflops = $value; SELECT pg_reload_conf()");
	return;
}
{
	my ($even, $note) = explain_total('nodes as fast as this server');
	like($note, qr/; node1 at 1\.00x this server's time; node2 at 1\.00x this server's time$/,
		"explain names each node's pace: as this server's without profiles");
	set_gflops($node1, 10);
	my ($slow, $slow_note) = explain_total('node1 a quarter as fast');
	like($slow_note, qr/; node1 at 4\.00x this server's time; node2 at 1\.00x/, "... node1's own pgdl.cpu_gflops read there");
	cmp_ok(abs($slow / $even - 4), '<', 0.01, '... and the run predicted 4 times as long: the slowest node sets the pace');

	# with a profile here, the schedule is simulated with each node's pace
	$coord->safe_psql('postgres', 'SELECT pgdl.calibrate(1)');
	my ($sim_slow) = explain_total('profiled here, node1 a quarter as fast');
	set_gflops($node1, 40);
	my ($sim_even) = explain_total('profiled here, nodes alike');
	cmp_ok($sim_slow, '>', 1.5 * $sim_even, '... simulated: a slow node lengthens the predicted run');
}

# ---------------------------------------------------------------------------
# A node that stops answering: its backends SIGSTOPped mid-run.
# ---------------------------------------------------------------------------
{
	my $before = $coord->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my @offsets = map { -s $_->logfile } ($node1, $coord);
	my $bg = start_psql($coord, 'cl_stop', 'postgres', $SETTINGS,
		"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', $EPOCHS, 'valid_packed')");
	ok(poll_until($coord, "SELECT EXISTS (SELECT FROM pgdl.runs WHERE id > $before)", 20), 'the run started');
	my $run = $coord->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE id > $before");
	ok(poll_until($coord, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run = $run)", 20),
		'the run checkpoints its first epoch');
	my @pids = split /\n/,
	  $node1->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgdl'");
	ok(@pids >= 1, 'node1 has a session of the run');
	my $start = time;
	kill 'STOP', @pids;
	my $rc = finish_psql($bg, 30);
	my $elapsed = time - $start;
	ok(defined $rc && $rc != 0, 'fit_multiple fails when node1 stops answering, without hanging');
	note(sprintf('the call failed %.1f s after the stop', $elapsed));
	cmp_ok($elapsed, '<', $FLOOR + 10, '... soon after the deadline');
	like($bg->{stderr}, qr/ERROR:  pgdl worker \d+ failed: server "node1" did not answer within its deadline of [\d.]+ s/,
		'... with an error naming server node1 and its deadline')
	  or diag($bg->{stderr});
	like($bg->{stderr}, qr/HINT:  Run $run can continue from each model's last epoch with pgdl\.resume\($run\)/,
		'... and a hint naming the run to resume');
	like(substr(slurp_file($coord->logfile), $offsets[1]),
		qr/server "node1" did not answer within its deadline[^\n]*\n[^\n]*DETAIL:  Its visit of partition \d+ with configuration \d+ was cancelled and its connection closed\./,
		"the worker's error says which visit was cancelled");
	ok(workers_gone_within($coord, 5), 'no pgdl worker is left on the coordinator');
	my $stored = $coord->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run");
	cmp_ok($stored, '<', 2 * $EPOCHS, 'the run stopped before its end');

	# the stopped backend runs again: the fence's cancel (or its closed
	# connection) ends it, and nothing it sends is read
	kill 'CONT', @pids;
	ok(node_sessions_gone($node1, 10), "node1's stopped session ends once it runs again");
	like(substr(slurp_file($node1->logfile), $offsets[0]),
		qr/canceling statement due to user request|connection to client lost|could not (?:receive|send) data (?:from|to) client|unexpected EOF on client connection/,
		"... as the fence's cancel or the closed connection says in node1's log");
	is($coord->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"),
		$stored, '... and the run on the coordinator is unchanged by it');

	$coord->safe_psql('postgres', "$SETTINGS; CREATE TABLE lb_resumed AS SELECT * FROM pgdl.resume($run)");
	is(run_of('lb_resumed'), $run, 'pgdl.resume continues the run');
	is(model_digests($coord, 'lb_resumed'), $ref_digests,
		'node fenced and resumed: the models of the uninterrupted run, bit for bit');
}

# A node that predicts itself slower gets longer deadlines, one that predicts
# itself faster no shorter ones: node1 at 0.001 GFLOP/s predicts seconds for a
# visit of 500 examples of the small network (its pace is over both
# configurations, so each one's deadline is 10 times its own prediction here
# times that pace); node2's visits keep the floor of 1 s.  The workers say
# each visit's deadline at DEBUG1.
{
	set_gflops($node1, 0.001);
	$coord->safe_psql('postgres', 'ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()');
	my $offset = -s $coord->logfile;
	$coord->safe_psql('postgres', "SET pgdl.node_deadline_floor = '1s'; "
		  . "SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', 1, 'valid_packed')");
	$coord->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()');
	set_gflops($node1, 40);
	my $log = substr(slurp_file($coord->logfile), $offset);
	my %deadlines;
	push @{ $deadlines{$1} }, $2 while $log =~ /visits partition \d+ on server "(node\d)", deadline ([\d.]+) s/g;
	is(scalar(@{ $deadlines{node1} // [] }) + scalar(@{ $deadlines{node2} // [] }), 8,
		'the workers say the deadline of each of the 8 visits');
	ok((grep { $_ > 2 } @{ $deadlines{node1} // [] }) == 4,
		'a node that predicts itself 0.001 GFLOP/s gets deadlines well above the floor: '
		  . join(' ', @{ $deadlines{node1} // [] }));
	ok((grep { $_ == 1 } @{ $deadlines{node2} // [] }) == 4,
		'a node that predicts itself faster keeps the floor: ' . join(' ', @{ $deadlines{node2} // [] }));
}

# A node's answer to pgdl.estimate is checked: one positive number.
{
	$node2->safe_psql(
		'postgres', q{
CREATE OR REPLACE FUNCTION pgdl.estimate(spec jsonb, config jsonb DEFAULT '{}', examples bigint DEFAULT NULL,
		OUT parameters bigint, OUT flops_forward bigint, OUT flops_train bigint,
		OUT activation_bytes bigint, OUT batch_size integer, OUT memory_bytes bigint,
		OUT profile bigint, OUT basis text, OUT images_per_second double precision,
		OUT seconds_per_epoch double precision, OUT workers jsonb, OUT memory jsonb)
	LANGUAGE sql AS $$SELECT 0::bigint, 0::bigint, 0::bigint, 0::bigint, 1, 0::bigint, NULL::bigint, 'x',
	                         '-Infinity'::float8, NULL::float8, NULL::jsonb, NULL::jsonb$$});
	my ($ret, $out, $err) = $coord->psql('postgres', $EXPLAIN);
	isnt($ret, 0, 'explain fails when a node predicts a pace that is not a positive number');
	like($err, qr/server "node2" returned an unexpected result for pgdl\.estimate/, '... naming the node');
}

unlike(slurp_file($coord->logfile), qr/was terminated by signal/, 'no process of the coordinator was killed by a signal');

done_testing();
