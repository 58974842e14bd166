# Replicated partitions: a coordinator and three nodes on this machine.
#
# pgdl.distribute(..., replicas => 2) puts partition k on node (k % 3) + 1
# and a checksummed replica on node ((k + 1) % 3) + 1, recorded in
# pgdl.partition_replicas; calling it again copies nothing that is whole.  A
# worker whose node holds a replica of a partition takes its visits while the
# partition's owner is busy, with the bytes of one server.  A run keeps going when a node is lost: kill -9 of a node's postmaster mid-run,
# or SIGSTOP of a node's backends past the visit's deadline (fenced); the
# worker redoes the visit from the model bytes it sent on the replica, and the
# models are those of one server, bit for bit.  A fenced node that runs again
# changes nothing.  A node down as a run starts is left out (a WARNING names
# it) when each of its partitions has a replica on a live node; else the
# error names it and says how to go on.  A copy whose rows changed since
# (its checksum, summed on its node before the run's first visit there) is
# left like a lost one.  (Without replicas, a lost node ends the run:
# 009_cluster.pl, 018_cluster_deadlines.pl.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 200;    # a few seconds of short visits, to be mid-run when a node goes
my $FLOOR  = 2;      # s: pgdl.node_deadline_floor for the SIGSTOP run

my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord', "max_worker_processes = 24\npgdl.keep_checkpoints = -1\n$LOG_CONF");
my @nodes = map { new_pgdl_node("node$_", $LOG_CONF) } 1 .. 3;
add_node_server($coord, "node$_", $nodes[ $_ - 1 ]) for 1 .. 3;

$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 3, seed => 7);
SELECT pgdl.pack('train_rows', 'x', 'label', 'ref_packed', buffer_rows => 50, partitions => 3, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'long', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 4, "seed": 11}',
                    '{"optimizer": "adam", "lr": 0.0005, "batch_size": 4, "seed": 12}']) c
 WHERE a.name = 'small' ORDER BY c;
});

sub replicas
{
	return $coord->safe_psql('postgres',
		"SELECT string_agg(part || ':' || replica || ':' || server, ' ' ORDER BY part, replica) FROM pgdl.partition_replicas WHERE packed = 'train_packed'::regclass"
	);
}

# the checksum pgdl.distribute uses, of a node's table
sub node_checksum
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*)::text || ':' || coalesce(md5(string_agg(md5(int4send(part) || int4send(buffer_id) || int4send(n) || array_send(x) || array_send(y)), '' ORDER BY buffer_id)), '') FROM $table"
	);
}

# ---------------------------------------------------------------------------
# Placement: partition k on servers[k % 3], its replica on servers[(k + 1) % 3].
# ---------------------------------------------------------------------------
{
	my ($ret, $out, $err) = $coord->psql('postgres',
		"SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2', 'node3'], replicas => 2)");
	is($ret, 0, 'distribute with replicas => 2') or diag($err);
	is($out, '3', '... moves the 3 partitions');
	like($err, qr/replica 1 of partition 1 of 3 is on server "node2"/, '... and says where each replica is');
	is(replicas(), '0:1:node2 1:1:node3 2:1:node1', 'pgdl.partition_replicas: each partition on the next server');
	for my $k (0 .. 2)
	{
		my $sum = $coord->safe_psql('postgres',
			"SELECT checksum FROM pgdl.partition_replicas WHERE packed = 'train_packed'::regclass AND part = $k");
		my $primary = $nodes[$k];
		my $replica = $nodes[ ($k + 1) % 3 ];
		is(node_checksum($replica, "public.train_packed_p$k"), $sum, "partition $k: the replica has the recorded checksum");
		is(node_checksum($primary, "public.train_packed_p$k"), $sum, '... and so has the primary');
	}
	is($nodes[2]->safe_psql('postgres', "SELECT to_regclass('public.train_packed_p0') IS NULL"), 't',
		'node3 holds no copy of partition 0');

	# a replica changed on its node is copied again; whole ones are not
	$nodes[1]->safe_psql('postgres', 'DELETE FROM public.train_packed_p0 WHERE buffer_id = (SELECT max(buffer_id) FROM public.train_packed_p0)');
	($ret, $out, $err) = $coord->psql('postgres',
		"SELECT pgdl.distribute('train_packed', ARRAY['node1', 'node2', 'node3'], replicas => 2)");
	is($out, '0', 'distribute again: no partition moves');
	like($err, qr/replica 1 of partition 1 of 3 is on server "node2"\n/, '... the damaged replica is copied again')
	  or diag($err);
	like($err, qr/replica 1 of partition 2 of 3 is on server "node3", which held the same copy/, '... the whole ones are not');
	is(node_checksum($nodes[1], 'public.train_packed_p0'),
		$coord->safe_psql('postgres', "SELECT checksum FROM pgdl.partition_replicas WHERE packed = 'train_packed'::regclass AND part = 0"),
		'... and it has the checksum again');
	is(replicas(), '0:1:node2 1:1:node3 2:1:node1', '... with the same records');
}

# ---------------------------------------------------------------------------
# The reference: one server.
# ---------------------------------------------------------------------------
$coord->safe_psql('postgres',
	"CREATE TABLE lb_ref AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'long', $EPOCHS, 'valid_packed', workers => 3)");
my $ref_digests = model_digests($coord, 'lb_ref');
like($ref_digests, qr/^\d+:[0-9a-f]{32} \d+:[0-9a-f]{32}$/, 'the reference run stores two models');

# ---------------------------------------------------------------------------
# A visit of partition p goes to a replica on a free node while p's owner is
# busy: the workers say where each visit goes at DEBUG1.
# ---------------------------------------------------------------------------
{
	$coord->safe_psql('postgres', 'ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()');
	my $offset = -s $coord->logfile;
	$coord->safe_psql('postgres',
		"CREATE TABLE lb_spread AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', 20, 'valid_packed')");
	$coord->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf()');
	my $log = substr(slurp_file($coord->logfile), $offset);
	my ($primary, $replica) = (0, 0);
	while ($log =~ /visits partition (\d) on server "node(\d)"/g)
	{
		if ($2 == $1 + 1) { $primary++ }
		elsif ($2 == ($1 + 1) % 3 + 1) { $replica++ }
		else { fail("partition $1 visited on node$2, which holds no copy of it") }
	}
	is($primary + $replica, 2 * 20 * 3, 'the workers say where each of the 120 visits goes');
	cmp_ok($replica, '>', 0, "some visits go to a partition's replica while its owner is busy ($replica of 120)");
	my $ref20 = $coord->safe_psql('postgres',
		"CREATE TABLE lb_ref20 AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'long', 20, 'valid_packed', workers => 3)");
	is(model_digests($coord, 'lb_spread'), model_digests($coord, 'lb_ref20'), '... and the models are those of one server');
}

# ---------------------------------------------------------------------------
# A copy whose rows changed on its node since pgdl.distribute is not used:
# partition 0's primary on node1 loses a buffer, and its visits go to the
# replica on node2, with the bytes of one server.  Both copies changed: the
# error names the partition and a node.
# ---------------------------------------------------------------------------
{
	my $p0  = 'public.train_packed_p0';
	my $cut = "CREATE TABLE cut AS SELECT * FROM $p0 WHERE buffer_id = (SELECT max(buffer_id) FROM $p0);"
	  . " DELETE FROM $p0 WHERE buffer_id IN (SELECT buffer_id FROM cut)";
	$nodes[0]->safe_psql('postgres', $cut);
	my $offset = -s $coord->logfile;
	my ($ret, $out, $err) = $coord->psql('postgres',
		"CREATE TABLE lb_changed AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', 20, 'valid_packed')");
	is($ret, 0, "partition 0's primary changed on node1: fit_multiple runs") or diag($err);
	is(model_digests($coord, 'lb_changed'), model_digests($coord, 'lb_ref20'),
		'... on the replica, with the models of one server');
	like(substr(slurp_file($coord->logfile), $offset),
		qr/the copy of partition 0 on server "node1" does not have its recorded checksum; this run does not use it/,
		'... and the log names the copy it left');
	$nodes[1]->safe_psql('postgres', $cut);
	($ret, $out, $err) = $coord->psql('postgres',
		"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', 1, 'valid_packed')");
	isnt($ret, 0, 'both copies of partition 0 changed: fit_multiple fails');
	like($err, qr/the copy of partition 0 on server "node[12]" does not have its recorded checksum, and no other copy is left/,
		'... naming the partition and the node') or diag($err);
	$nodes[$_]->safe_psql('postgres', "INSERT INTO $p0 SELECT * FROM cut; DROP TABLE cut") for 0, 1;
}

# Starts the run on train_packed; returns it once its first epoch is checkpointed.
sub start_run
{
	my ($app, $settings) = @_;
	my $before = $coord->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($coord, $app, 'postgres', $settings,
		"CREATE TABLE lb_$app AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', $EPOCHS, 'valid_packed')");
	ok(poll_until($coord, "SELECT EXISTS (SELECT FROM pgdl.runs WHERE id > $before)", 20), "$app: the run started");
	my $run = $coord->safe_psql('postgres', "SELECT max(id) FROM pgdl.runs WHERE id > $before");
	ok(poll_until($coord, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run = $run)", 20),
		"$app: the run checkpoints its first epoch");
	return ($bg, $run);
}

# ---------------------------------------------------------------------------
# kill -9 of node1's postmaster mid-run: the run goes on on the replicas.
# ---------------------------------------------------------------------------
{
	my $offset = -s $coord->logfile;
	my ($bg, $run) = start_run('killed', 'SET client_min_messages = warning');
	my @pids = split /\n/, $nodes[0]->safe_psql('postgres', 'SELECT pid FROM pg_stat_activity');
	$nodes[0]->kill9;
	my $rc = finish_psql($bg, 120);
	is($rc, 0, 'node1 killed mid-run: fit_multiple finishes') or diag($bg->{stderr});
	is(model_digests($coord, 'lb_killed'), $ref_digests, '... with the models of one server, bit for bit');
	cmp_ok($coord->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"), '==', 2 * $EPOCHS,
		'... and every epoch checkpointed');
	# node1 holds partition 0 and the replica of partition 2
	my ($part, $to) = substr(slurp_file($coord->logfile), $offset)
	  =~ /server "node1" is dropped for the rest of the run; the visit of partition (\d) with configuration \d+ is redone on server "(node\d)"/;
	ok(defined $part && (($part == 0 && $to eq 'node2') || ($part == 2 && $to eq 'node3')),
		'... the worker says it dropped node1 and redid the visit on the other copy: ' . ($part // '?') . ' on ' . ($to // '?'));

	# node1 still down as a run starts: the run starts without it, on the replicas
	$offset = -s $coord->logfile;
	my ($ret, $out, $err) = $coord->psql('postgres',
		"CREATE TABLE lb_down AS SELECT * FROM pgdl.fit_multiple('train_packed', 'long', 20, 'valid_packed')");
	is($ret, 0, 'node1 down as a run starts: fit_multiple runs without it') or diag($err);
	like($err, qr/WARNING:  server "node1" is down: the run starts without it\nDETAIL:  Its partitions are visited on their replicas \(partition 0 on server "node2"\)/,
		'... a WARNING names it and where its partition goes') or diag($err);
	is(model_digests($coord, 'lb_down'), model_digests($coord, 'lb_ref20'), '... with the models of one server, bit for bit');
	unlike(substr(slurp_file($coord->logfile), $offset), qr/server "node1" is (?:lost|dropped)/,
		'... and no worker tries node1');

	# node2 down too: partition 0 has no live copy, and the error says so
	$nodes[1]->stop;
	($ret, $out, $err) = $coord->psql('postgres',
		"SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'long', 1, 'valid_packed')");
	isnt($ret, 0, 'node1 and node2 down: fit_multiple fails');
	like($err, qr/ERROR:  could not connect to server "node1".*HINT:  Every server that holds a replica of partition 0 is down too: start server "node1" or one of them again and repeat the call/s,
		'... naming node1 and saying how to go on') or diag($err);
	$nodes[1]->start;

	# node1 back for what follows, once its old processes are gone
	my $deadline = time + 30;
	Time::HiRes::usleep(50_000) while time < $deadline && grep { kill(0, $_) } @pids;
	ok($nodes[0]->start(fail_ok => 1), 'node1 starts again');
}

# ---------------------------------------------------------------------------
# SIGSTOP of node2's backends mid-run: fenced at the deadline, the run goes
# on on the replicas; node2 answering late changes nothing.
# ---------------------------------------------------------------------------
{
	my $offset = -s $coord->logfile;
	my @node_offsets = map { -s $_->logfile } @nodes;
	my ($bg, $run) = start_run('stopped', "SET pgdl.node_deadline_floor = '${FLOOR}s'; SET client_min_messages = warning");
	my @pids = split /\n/,
	  $nodes[1]->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgdl'");
	ok(@pids >= 1, 'node2 has a session of the run');
	my $start = time;
	kill 'STOP', @pids;
	my $rc = finish_psql($bg, 120);
	my $elapsed = time - $start;
	is($rc, 0, 'node2 stopped mid-run: fit_multiple finishes') or diag($bg->{stderr});
	note(sprintf('the run finished %.1f s after the stop', $elapsed));
	is(model_digests($coord, 'lb_stopped'), $ref_digests, '... with the models of one server, bit for bit');
	# node2 holds partition 1 and the replica of partition 0: its visit goes to the other copy
	my ($part, $to) = substr(slurp_file($coord->logfile), $offset)
	  =~ /server "node2" is dropped for the rest of the run; the visit of partition (\d) with configuration \d+ is redone on server "(node\d)"/;
	ok(defined $part && (($part == 1 && $to eq 'node3') || ($part == 0 && $to eq 'node1')),
		'... node2 fenced and its visit redone on the other copy of its partition: ' . ($part // '?') . ' on ' . ($to // '?'));
	my $stored = $coord->safe_psql('postgres', "SELECT count(*) || ' ' || md5(string_agg(md5(c.weights), ',' ORDER BY c.config, c.epoch)) FROM pgdl.checkpoints c WHERE run = $run");

	kill 'CONT', @pids;
	ok(node_sessions_gone($nodes[1], 10), "node2's stopped session ends once it runs again");
	like(substr(slurp_file($nodes[1]->logfile), $node_offsets[1]),
		qr/canceling statement due to user request|connection to client lost|could not (?:receive|send) data (?:from|to) client|unexpected EOF on client connection/,
		"... as the fence's cancel or the closed connection says in node2's log");
	is($coord->safe_psql('postgres', "SELECT count(*) || ' ' || md5(string_agg(md5(c.weights), ',' ORDER BY c.config, c.epoch)) FROM pgdl.checkpoints c WHERE run = $run"),
		$stored, '... and its late answer changes nothing of the run');
	is(model_digests($coord, 'lb_stopped'), $ref_digests, '... nor of its models');
}

unlike(slurp_file($coord->logfile), qr/was terminated by signal/, 'no process of the coordinator was killed by a signal');

done_testing();
