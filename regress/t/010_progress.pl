# Every long call in pgdl.progress, seen from another session while it runs:
# pgdl.fit (with its run 'running' and its epochs committed before it returns,
# then 'finished'; 'failed' when cancelled or rolled back), pgdl.pack,
# pgdl.distribute and a feature cache build.  Rows have sensible values, the
# estimate of the seconds left is finite and falls, no row outlives its call,
# and a role sees only its own calls.  With no worker slot free, or in a
# transaction that has written already, pgdl.fit records its run as before.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $node = new_pgdl_node('progress', "max_worker_processes = 16\n");
$node->safe_psql(
	'postgres', q{
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE TABLE points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s;
SELECT pgdl.pack('points', 'x', 'label', 'packed', buffer_rows => 50, partitions => 4, seed => 7);
GRANT SELECT ON packed TO alice;
});
$node->safe_psql('postgres',
	q{SELECT pgdl.add_architecture('small', '{"input": [16], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}')}, extra_params => [ '-U', 'alice' ]);

my $EPOCHS = 3000;    # small steps: a few seconds
my $SLOW = q{'{"optimizer": "sgd", "lr": 0.01, "batch_size": 1, "seed": 3}'};

sub fit_sql
{
	my ($epochs) = @_;
	return "SELECT pgdl.fit('packed', 'small', $SLOW, $epochs)";
}

sub q_as
{
	my ($user, $sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', $user ]);
}

# Samples $sql (one row of '|'-separated columns, or none) every 50 ms while $bg runs.
sub watch
{
	my ($bg, $user, $sql, $secs) = @_;
	my @rows;
	my $deadline = time + $secs;
	while ($bg->{h}->pumpable && time < $deadline)
	{
		$bg->{h}->pump_nb;
		my ($ret, $out) = $node->psql('postgres', $sql, extra_params => [ '-U', $user ]);
		push @rows, [ time, split(/\|/, $out, -1) ] if $ret == 0 && $out ne '';
		usleep(50_000);
	}
	return @rows;
}

# The finite estimates of a watch (column $col), in order: at least one, and the last below the first.
sub estimates_fall
{
	my ($what, $col, @rows) = @_;
	my @est = grep { $_ ne '' } map { $_->[$col] } @rows;
	ok(@est >= 1 && !grep({ $_ !~ /^[0-9.e+-]+$/ || $_ < 0 } @est), "$what: the estimate of seconds left is finite");
	ok(@est >= 2 && $est[-1] < $est[0], "$what: and falls ($est[0] .. $est[-1])");
	return;
}

sub no_progress_rows
{
	my ($what) = @_;
	ok(poll_until($node, 'SELECT count(*) = 0 FROM pgdl.progress', 10), "$what: no row is left in pgdl.progress");
	return;
}

# ---------------------------------------------------------------------------
# pgdl.fit in flight
# ---------------------------------------------------------------------------
my $bg = start_psql($node, 'fit', 'alice', fit_sql($EPOCHS));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.progress WHERE kind = 'fit'", 30), 'pgdl.fit appears in pgdl.progress');
# the row appears while the fit prepares (no run, epoch or total yet): read it once it trains
poll_until($node, "SELECT count(*) = 1 FROM pgdl.progress WHERE kind = 'fit' AND phase = 'training'", 30);
my $row = $node->safe_psql('postgres',
	qq{SELECT p.run IS NOT NULL, p.state = 'training' AND p.phase = 'training', p.epoch BETWEEN 1 AND $EPOCHS,
	         p.pid = a.pid, a.application_name, p.target = 'packed'::regclass, p.unit, p.total, p.done <= p.total,
	         p.worker_pid IS NULL
	    FROM pgdl.progress p JOIN pg_stat_activity a ON a.pid = p.pid WHERE p.kind = 'fit'});
is($row, 't|t|t|t|fit|t|examples|2000|t|t', 'its row: run, phase, epoch, pid, target, examples done of 2000');
is(q_as('bob', "SELECT count(*) FROM pgdl.progress WHERE kind = 'fit'"), '0', 'bob does not see alice\'s fit');
is(q_as('alice', "SELECT count(*) FROM pgdl.progress WHERE kind = 'fit'"), '1', 'alice sees her own fit');
$node->safe_psql('postgres', 'GRANT pg_read_all_stats TO bob');
is(q_as('bob', "SELECT count(*) FROM pgdl.progress WHERE kind = 'fit'"), '1', 'bob with pg_read_all_stats sees it');
my $run = $node->safe_psql('postgres', "SELECT run FROM pgdl.progress WHERE kind = 'fit'");
is(q_as('alice', "SELECT status FROM pgdl.runs WHERE id = $run"), 'running', 'its run is running, seen from another session');
is(q_as('alice', "SELECT pgdl.run_in_progress($run)"), 't', '... and in progress');
ok(poll_until($node, "SELECT count(*) >= 2 FROM pgdl.run_metrics WHERE run = $run", 30),
	'its epochs are committed as they come');
ok($bg->{h}->pumpable, '... before pgdl.fit returns');
my @rows = watch($bg, 'alice',
	"SELECT epoch, done, total, images_per_second, call_seconds_left, seconds_left = call_seconds_left FROM pgdl.progress WHERE kind = 'fit'",
	120);
ok(@rows > 5, 'sampled while it trains');
ok(!grep({ $_->[1] < 1 || $_->[1] > $EPOCHS || $_->[2] < 0 || $_->[2] > $_->[3] } @rows), 'epochs within 1 .. EPOCHS, done within total');
ok(grep({ $_->[4] ne '' && $_->[4] > 0 } @rows), 'images per second');
estimates_fall('pgdl.fit', 5, @rows);
is(finish_psql($bg, 60), 0, 'pgdl.fit returns');
is(q_as('alice', "SELECT status FROM pgdl.runs WHERE id = $run"), 'finished', 'then its run is finished');
is(q_as('alice', "SELECT count(*), count(DISTINCT config), bool_and(model IS NOT NULL) FROM pgdl.run_metrics WHERE run = $run"),
	"$EPOCHS|1|t", 'with every epoch, one configuration, linked to the model');
is(q_as('alice',
	"SELECT c.set_name, a.name FROM pgdl.run_metrics m JOIN pgdl.configs c ON c.id = m.config
	   JOIN pgdl.architectures a ON a.id = c.architecture WHERE m.run = $run LIMIT 1"),
	'pgdl.fit|small', 'run_metrics.config names a pgdl.configs row of the fit\'s configuration');
no_progress_rows('after pgdl.fit');
ok(poll_until($node, "SELECT NOT pgdl.run_in_progress($run)", 30), 'its run is no longer in progress');
q_as('alice', fit_sql(1));
is(q_as('alice', "SELECT count(*) FROM pgdl.configs WHERE set_name = 'pgdl.fit'"), '1',
	'a second fit of the same configuration names the same row');

# ---------------------------------------------------------------------------
# Cancelled, rolled back
# ---------------------------------------------------------------------------
$bg = start_psql($node, 'fit_cancel', 'alice', fit_sql(10 * $EPOCHS));
ok(poll_until($node, "SELECT count(*) = 1 FROM pgdl.progress WHERE kind = 'fit' AND epoch >= 2", 30), 'a second fit trains');
$run = $node->safe_psql('postgres', "SELECT run FROM pgdl.progress WHERE kind = 'fit'");
$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'fit_cancel'");
isnt(finish_psql($bg, 60), 0, 'cancelled');
like($bg->{stderr}, qr/canceling statement due to user request/, '... by the user');
ok(poll_until($node, "SELECT status = 'failed' FROM pgdl.runs WHERE id = $run", 30), 'a cancelled fit leaves its run failed');
no_progress_rows('after a cancel');

$bg = start_psql($node, 'fit_rollback', 'alice', 'BEGIN', fit_sql(2), 'SELECT pg_sleep(3)', 'ROLLBACK');
ok(poll_until($node,
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'fit_rollback' AND query LIKE '%pg_sleep%'", 60),
	'a fit in a transaction returns, and the transaction goes on');
$run = q_as('alice', "SELECT max(id) FROM pgdl.runs");
is(q_as('alice', "SELECT status FROM pgdl.runs WHERE id = $run"), 'running',
	'its run is running until the transaction ends');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.progress'), '0', 'the fit that returned is not in pgdl.progress');
is(finish_psql($bg, 60), 0, 'the transaction is rolled back');
ok(poll_until($node, "SELECT status = 'failed' FROM pgdl.runs WHERE id = $run", 30), 'a fit rolled back leaves its run failed');
ok(poll_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pgdl run recorder'", 30),
	'no run recorder is left');

# in a transaction that wrote already, the run is the transaction's
my ($ret, $out, $err) = $node->psql('postgres', 'BEGIN; CREATE TEMP TABLE t (); ' . fit_sql(1) . '; COMMIT;',
	extra_params => [ '-U', 'alice' ]);
like($err, qr/NOTICE:  pgdl.fit records its run in the current transaction\nDETAIL:  This transaction has written/,
	'a transaction that wrote: the run is recorded in it, with a NOTICE');
is(q_as('alice', 'SELECT status FROM pgdl.runs ORDER BY id DESC LIMIT 1'), 'finished', '... and finished');

# progress NOTICEs: every epoch with pgdl.progress_interval 0; a quick fit's last epoch only at the default
# (5 s, far longer than its epochs); none with -1.  In rows/s.
for my $case ([ '0', 5, 5 ], [ 'default', 1, 5 ], [ '-1', 0, 0 ])
{
	my ($interval, $lines, $last) = @$case;
	($ret, $out, $err) = $node->psql('postgres',
		"SET pgdl.progress_interval = $interval; SELECT pgdl.fit('packed', 'small', '{\"lr\": 0.01}', 5)",
		extra_params => [ '-U', 'alice' ]);
	my @epochs = ($err =~ /NOTICE:  epoch (\d+)\/5: loss [0-9.]+, accuracy [0-9.]+, \d+ rows\/s$/mg);
	is(scalar @epochs, $lines, "pgdl.progress_interval = $interval: $lines progress NOTICEs");
	is($epochs[-1] // 0, $last, '... the last for the last epoch') if $lines;
}

# ---------------------------------------------------------------------------
# pgdl.pack
# ---------------------------------------------------------------------------
my $features = join(', ', map { "sin(i * $_)::real" } 1 .. 32);
$node->safe_psql('postgres',
	"CREATE TABLE big AS SELECT i, ARRAY[$features] AS x, i % 4 AS label FROM generate_series(1, 200000) i; ANALYZE big;");
my $planned = $node->safe_psql('postgres', "SELECT reltuples::bigint FROM pg_class WHERE oid = 'big'::regclass");
$bg = start_psql($node, 'pack', 'postgres', "SELECT pgdl.pack('big', 'x', 'label', 'big_packed', buffer_rows => 1)");
@rows = watch($bg, 'postgres',
	"SELECT phase, done, total, unit, target, call_seconds_left, pid = (SELECT pid FROM pg_stat_activity WHERE application_name = 'pack')
	   FROM pgdl.progress WHERE kind = 'pack'", 300);
is(finish_psql($bg, 60), 0, 'pgdl.pack returns');
ok(@rows >= 2, 'pgdl.pack appears in pgdl.progress (' . scalar(@rows) . ' samples)');
my %phases = map { $_->[1] => 1 } @rows;
ok(!grep({ !/^(reading|preparing|writing)$/ } keys %phases), 'phases: reading, preparing, writing');
ok(!grep({ $_->[5] ne 'big' || $_->[7] ne 't' } @rows), 'its target and pid');
ok(!grep({ $_->[1] eq 'reading' && ($_->[4] ne 'rows' || $_->[3] ne $planned) } @rows),
	'reading: rows done of the planner\'s count');
ok(!grep({ $_->[1] eq 'writing' && ($_->[4] ne 'buffers' || $_->[3] ne '200000' || $_->[2] > 200000) } @rows),
	'writing: buffers done of 200000');
estimates_fall('pgdl.pack', 6, @rows);
no_progress_rows('after pgdl.pack');

# ---------------------------------------------------------------------------
# A feature cache build: a REFRESH of a cache view, as fit_multiple's workers run it
# ---------------------------------------------------------------------------
my $model = q_as('alice', 'SELECT max(id) FROM pgdl.models');
$node->safe_psql('postgres', qq{
CREATE FUNCTION slow_buffer(n integer) RETURNS integer LANGUAGE plpgsql AS \$\$BEGIN PERFORM pg_sleep(0.05); RETURN n; END\$\$;
CREATE MATERIALIZED VIEW cache_view AS SELECT part, buffer_id, n,
  pgdl.cache_features($model, 0, 1, pgdl.prefix_hash($model, 1), x, slow_buffer(n)) AS x, y FROM packed WITH NO DATA;
});
$bg = start_psql($node, 'cache', 'postgres', 'BEGIN',
	"SELECT set_config('pgdl_cache.build', 'cache_view'::regclass::oid || ' 40', true)",
	'REFRESH MATERIALIZED VIEW cache_view', 'COMMIT');
@rows = watch($bg, 'postgres',
	"SELECT phase, done, total, unit, target, call_seconds_left, images_per_second > 0 FROM pgdl.progress WHERE kind = 'feature_cache'",
	60);
is(finish_psql($bg, 60), 0, 'the cache view is refreshed');
ok(@rows >= 2, 'the build appears in pgdl.progress (' . scalar(@rows) . ' samples)');
ok(!grep({ $_->[1] ne 'computing' || $_->[4] ne 'buffers' || $_->[3] ne '40' || $_->[2] > 40 || $_->[5] ne 'cache_view' } @rows),
	'computing: buffers done of 40, of the view');
estimates_fall('a feature cache build', 6, @rows);
no_progress_rows('after a cache build');

# ---------------------------------------------------------------------------
# pgdl.distribute: a node whose COPY is slowed by a trigger on every table made there
# ---------------------------------------------------------------------------
my $remote = new_pgdl_node('progress_node');
$remote->safe_psql('postgres', q{
CREATE FUNCTION public.slow_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_catalog.pg_sleep(0.04); RETURN NEW; END$$;
CREATE FUNCTION public.add_slow() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM pg_catalog.pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' LOOP
    EXECUTE pg_catalog.format('CREATE TRIGGER slow BEFORE INSERT ON %s FOR EACH ROW EXECUTE FUNCTION public.slow_row()', r.object_identity);
  END LOOP;
END$$;
CREATE EVENT TRIGGER add_slow ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION public.add_slow();
});
add_node_server($node, 'remote', $remote);
$node->safe_psql('postgres',
	"SELECT pgdl.pack('points', 'x', 'label', 'shipped', buffer_rows => 50, partitions => 4, seed => 7)");
$bg = start_psql($node, 'distribute', 'postgres', "SELECT pgdl.distribute('shipped', ARRAY['remote'])");
@rows = watch($bg, 'postgres',
	"SELECT phase, done, total, unit, target, call_seconds_left FROM pgdl.progress WHERE kind = 'distribute'", 120);
is(finish_psql($bg, 60), 0, 'pgdl.distribute returns') or diag($bg->{stderr});
ok(@rows >= 2, 'pgdl.distribute appears in pgdl.progress (' . scalar(@rows) . ' samples)');
ok(!grep({ $_->[1] ne 'copying' || $_->[4] ne 'partitions' || $_->[3] ne '4' || $_->[2] > 4 || $_->[5] ne 'shipped' } @rows),
	'copying: partitions moved of 4');
estimates_fall('pgdl.distribute', 6, @rows);
no_progress_rows('after pgdl.distribute');

# ---------------------------------------------------------------------------
# No worker slot free: the run is recorded in the caller's transaction
# ---------------------------------------------------------------------------
$node->append_conf('postgresql.conf', "max_worker_processes = 1\n");
$node->restart;
($ret, $out, $err) = $node->psql('postgres', fit_sql(2), extra_params => [ '-U', 'alice' ]);
is($ret, 0, 'with max_worker_processes exhausted, pgdl.fit still trains');
like($err, qr/NOTICE:  pgdl.fit records its run in the current transaction\nDETAIL:  No background worker was free/,
	'... with a NOTICE that the run is recorded in its transaction');
is(q_as('alice', 'SELECT status, (SELECT count(*) FROM pgdl.run_metrics m WHERE m.run = r.id) FROM pgdl.runs r ORDER BY id DESC LIMIT 1'),
	'finished|2', '... finished, with its epochs');

done_testing();
