# PgdlTest -- helpers the TAP tests of background workers share.  Every wait
# is bounded.
package PgdlTest;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(poll_until start_psql finish_psql workers_gone_within model_digests);

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

1;
