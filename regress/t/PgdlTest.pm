# PgdlTest -- helpers the TAP tests of background workers share.  Every wait
# is bounded.
package PgdlTest;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(poll_until start_psql finish_psql workers_gone_within model_digests
  new_pgdl_node add_node_server prepend_hba node_training_gone node_sessions_gone points_sql);

# The tests' data: 2,500 points of 16 features in 4 classes, the first 2,000
# to train on and the rest to validate, and two architectures for them.
sub points_sql
{
	return q{
CREATE TABLE points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2500) i, generate_series(1, 16) j GROUP BY i) s;
CREATE TABLE train_rows AS SELECT * FROM points WHERE i <= 2000;
CREATE TABLE valid_rows AS SELECT * FROM points WHERE i > 2000;
SELECT pgdl.add_architecture('small', '{"input": [16], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}');
SELECT pgdl.add_architecture('wide', '{"input": [16], "layers": [{"type": "dense", "units": 64},
  {"type": "relu"}, {"type": "dense", "units": 32}, {"type": "relu"}, {"type": "dense", "units": 4}]}');
};
}

# Runs $sql on $node until it answers 't' (errors, as while the node restarts,
# are retried) or $secs pass; returns whether it answered.
sub poll_until
{
	my ($node, $sql, $secs) = @_;
	my $deadline = time + $secs;
	while (time < $deadline)
	{
		# psql can die writing to a server that is not up yet
		my ($ret, $out) = eval { $node->psql('postgres', $sql) };
		return 1 if defined $ret && $ret == 0 && $out eq 't';
		usleep(20_000);
	}
	diag("poll_until gave up after ${secs}s: $sql");
	return 0;
}

# Starts psql on some SQL commands (one -c each) as $user without waiting for
# it; $app names the session in pg_stat_activity.
sub start_psql
{
	my ($node, $app, $user, @commands) = @_;
	my %bg = (stdout => '', stderr => '');
	$bg{h} = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres') . " application_name=$app user=$user",
			map { ('-c', $_) } @commands
		],
		'<', \undef, '>', \$bg{stdout}, '2>', \$bg{stderr});
	return \%bg;
}

# Waits up to $secs for a started psql to exit; returns its exit code, or undef
# (after killing it) if it did not exit in time.
sub finish_psql
{
	my ($bg, $secs) = @_;
	my $deadline = time + $secs;
	while ($bg->{h}->pumpable && time < $deadline)
	{
		$bg->{h}->pump_nb;
		usleep(10_000);
	}
	if ($bg->{h}->pumpable)
	{
		$bg->{h}->kill_kill;
		return undef;
	}
	$bg->{h}->finish;
	return $bg->{h}->result(0);
}

sub workers_gone_within
{
	my ($node, $secs) = @_;
	return poll_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pgdl worker'",
		$secs);
}

# config:md5(weights) of the models a leaderboard table names, in config order.
sub model_digests
{
	my ($node, $table) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(l.config || ':' || md5(m.weights), ' ' ORDER BY l.config)
		   FROM $table l JOIN pgdl.models m ON m.id = l.model");
}

# ---------------------------------------------------------------------------
# Several servers: a coordinator reaches its nodes through postgres_fdw.
# ---------------------------------------------------------------------------

# A started server with pgdl installed in its postgres database; $conf is
# appended to its postgresql.conf first.
sub new_pgdl_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', $conf) if defined $conf;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION pgdl');
	return $node;
}

# On $coord, the postgres_fdw server $server for database $db (default
# postgres) of $node, over its unix socket, and a user mapping of the
# bootstrap superuser to the node's.
sub add_node_server
{
	my ($coord, $server, $node, $db) = @_;
	$db //= 'postgres';
	my ($host, $port) = ($node->host, $node->port);
	$coord->safe_psql(
		'postgres', qq{
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SERVER $server FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$host', port '$port', dbname '$db');
CREATE USER MAPPING FOR CURRENT_USER SERVER $server;
});
	return;
}

# Puts lines before the first line of $node's pg_hba.conf (the first line that
# matches a connection decides), then reloads.
sub prepend_hba
{
	my ($node, @lines) = @_;
	my $file = $node->data_dir . '/pg_hba.conf';
	open my $in, '<', $file or die "could not read $file: $!";
	my $old = do { local $/; <$in> };
	close $in;
	open my $out, '>', $file or die "could not write $file: $!";
	print $out join('', map { "$_\n" } @lines), $old;
	close $out;
	$node->reload;
	return;
}

# Within $secs, no pgdl.train_partitions query is running on $node.
sub node_training_gone
{
	my ($node, $secs) = @_;
	return poll_until($node,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%train_partitions%' AND pid <> pg_backend_pid()",
		$secs);
}

# Within $secs, no session a coordinator opened (application_name pgdl) is left on $node.
sub node_sessions_gone
{
	my ($node, $secs) = @_;
	return poll_until($node,
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'pgdl' AND pid <> pg_backend_pid()", $secs);
}

1;
