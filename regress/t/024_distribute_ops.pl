# Operations on a distributed packed table: a coordinator and three nodes on
# this machine.
#
# pgdl.distribute is idempotent per partition: a re-run after a call that
# failed (a node killed half way, or the caller's transaction rolled back
# after every node committed its copy) copies only what the nodes do not
# already hold, judged by a checksum of the rows and not by the table's name
# (a copy changed on the node is copied again); a re-run with another server
# order drops the copies on the nodes the partitions no longer go to, so no
# node keeps an orphan.  pgdl.add_node moves the partitions its rule names
# (and nothing else) onto a new node, the old copies go at the next call, and
# fit_multiple over the result trains the models of one server, bit for bit.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord', "max_worker_processes = 24\n$LOG_CONF");
my %node = map { $_ => new_pgdl_node($_, $LOG_CONF) } qw(node1 node2 node3);
add_node_server($coord, $_, $node{$_}) for sort keys %node;

# The COPYs into a node since the log offset $from (log_statement = all on the test servers).
sub copies_since
{
	my ($name, $from) = @_;
	my $log = slurp_file($node{$name}->logfile, $from);
	my $n = () = $log =~ /(?:statement|execute [^:]*): COPY \S+ .* FROM STDIN/g;
	return $n;
}
sub log_at { return -s $node{ $_[0] }->logfile; }

# name:rows of the copies of tp's partitions on a node
sub node_tables
{
	my ($name) = @_;
	return $node{$name}->safe_psql(
		'postgres', q{
		SELECT coalesce(string_agg(c.relname || ':' || (xpath('/row/n/text()',
		         query_to_xml(format('SELECT count(*) AS n FROM %I.%I', n.nspname, c.relname), false, true, '')))[1]::text,
		         ' ' ORDER BY c.relname), '')
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE c.relkind = 'r' AND c.relname LIKE 'tp\_%'});
}

# part:server of each partition of tp ('-' for one here)
sub placement
{
	return $coord->safe_psql(
		'postgres', q{
		SELECT string_agg(substring(pg_get_expr(c.relpartbound, c.oid) FROM '\((\d+)\)') || ':' || coalesce(s.srvname, '-'),
		                  ' ' ORDER BY substring(pg_get_expr(c.relpartbound, c.oid) FROM '\((\d+)\)')::int)
		  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		  LEFT JOIN pg_foreign_table f ON f.ftrelid = c.oid LEFT JOIN pg_foreign_server s ON s.oid = f.ftserver
		 WHERE i.inhparent = 'tp'::regclass});
}

sub contents
{
	my ($table) = @_;
	return $coord->safe_psql('postgres',
		"SELECT count(*) || ' ' || md5(string_agg(part || ':' || buffer_id || ':' || n || ':' || x::text || ':' || y::text, ';' ORDER BY part, buffer_id)) FROM $table");
}

# The transaction that wrote each partition's rows on a node (a copy not made again keeps its xmin).
sub xmins
{
	my ($name) = @_;
	return $node{$name}->safe_psql('postgres',
		q{SELECT coalesce(string_agg(c.relname || ':' || (xpath('/row/x/text()',
		         query_to_xml(format('SELECT min(xmin::text) AS x FROM %I.%I', n.nspname, c.relname), false, true, '')))[1]::text,
		         ' ' ORDER BY c.relname), '')
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		 WHERE c.relkind = 'r' AND c.relname LIKE 'tp\_%'});
}

$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'tp', buffer_rows => 50, partitions => 6, seed => 7);
SELECT pgdl.pack('train_rows', 'x', 'label', 'ref', buffer_rows => 50, partitions => 6, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'vp', buffer_rows => 100, partitions => 1, reference => 'tp');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'grid', a.id, c::jsonb FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}',
                    '{"optimizer": "adam", "lr": 0.005, "batch_size": 25, "seed": 3}']) c
 WHERE a.name = 'small' ORDER BY c;
});
my $original = contents('tp');

# ---------------------------------------------------------------------------
# 1. A call that fails half way: partitions 0, 2, 4 go to node1 and 1, 3, 5
# to node2, where a table tp_1 that is not pgdl's is in the way: partition 0
# is copied and committed on node1, then the call fails at partition 1 and
# the caller's transaction rolls back.
# ---------------------------------------------------------------------------
$node{node2}->safe_psql('postgres', 'CREATE TABLE tp_p1 (a int)');
my ($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('tp', ARRAY['node1', 'node2'])");
isnt($rc, 0, 'distribute fails at partition 1');
like($err, qr/server "node2" has a table public.tp_p1 that pgdl.distribute did not make/, '... naming node2 and the table');
is(placement(), '0:- 1:- 2:- 3:- 4:- 5:-', '... every partition is still here');
is(node_tables('node1'), 'tp_p0:' . $coord->safe_psql('postgres', 'SELECT count(*) FROM tp WHERE part = 0'),
	'... node1 holds the copy of partition 0 it committed');
my $x0 = xmins('node1');
$node{node2}->safe_psql('postgres', 'DROP TABLE tp_p1');

my ($l1, $l2) = (log_at('node1'), log_at('node2'));
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('tp', ARRAY['node1', 'node2'])");
is($rc, 0, 'the re-run succeeds') or diag($err);
is($out, '6', '... and swaps all 6 partitions');
like($err, qr/partition 1 of 6 is on server "node1", which held the same copy of it already/,
	'... partition 0 (1 of 6) was not copied again');
is(copies_since('node1', $l1), 2, '... node1 took 2 COPYs (partitions 2 and 4), not 3');
is(copies_since('node2', $l2), 3, '... node2 took 3 (partitions 1, 3, 5)');
like(xmins('node1'), qr/^\Q$x0\E /, '... node1\'s copy of partition 0 is the one of the failed call (its xmin)');
is(contents('tp'), $original, '... the distributed table has the rows it had');

# ---------------------------------------------------------------------------
# 2. The caller's transaction rolls back after every node committed: the
# re-run copies nothing, except a copy changed on the node.
# ---------------------------------------------------------------------------
$coord->safe_psql('postgres', q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'tp2', buffer_rows => 50, partitions => 4, seed => 7);
BEGIN; SELECT pgdl.distribute('tp2', ARRAY['node1', 'node2']); ROLLBACK;});
$node{node1}->safe_psql('postgres', 'UPDATE tp2_p2 SET n = n WHERE buffer_id = (SELECT min(buffer_id) FROM tp2_p2)');
$node{node2}->safe_psql('postgres', 'DELETE FROM tp2_p3 WHERE buffer_id = (SELECT min(buffer_id) FROM tp2_p3)');
($l1, $l2) = (log_at('node1'), log_at('node2'));
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('tp2', ARRAY['node1', 'node2'])");
is($rc, 0, 'distribute after a rolled-back one succeeds') or diag($err);
is(copies_since('node1', $l1), 0, '... node1 took no COPY (partition 2 rewritten with the same bytes is the same copy)');
is(copies_since('node2', $l2), 1, '... node2 took one: partition 3, one buffer short on the node, is copied again');
my $held = () = $err =~ /held the same copy/g;
is($held, 3, '... 3 partitions swapped without a copy');

# ---------------------------------------------------------------------------
# 3. Another server order after a rolled-back call: no orphans.
# ---------------------------------------------------------------------------
$coord->safe_psql('postgres', q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'tp3', buffer_rows => 50, partitions => 4, seed => 7);
BEGIN; SELECT pgdl.distribute('tp3', ARRAY['node1', 'node2']); ROLLBACK;});
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('tp3', ARRAY['node2', 'node1'])");
is($rc, 0, 'distribute in the other order succeeds') or diag($err);
my $dropped = () = $err =~ /dropped .* that is not in use/g;
is($dropped, 4, '... dropping the 4 copies of the rolled-back call on the nodes the partitions no longer go to');
my $tables3 = sub {
	my ($name) = @_;
	return $node{$name}->safe_psql('postgres',
		q{SELECT string_agg(relname, ' ' ORDER BY relname) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'tp3\_%'});
};
is($tables3->('node1'), 'tp3_p1 tp3_p3', '... node1 holds only partitions 1 and 3');
is($tables3->('node2'), 'tp3_p0 tp3_p2', '... node2 holds only partitions 0 and 2');
is(contents('tp3'), contents('tp2'), '... the same rows as the other copy of the data');

# Two server names for one database: node2b is node2.  add_node('tp3', 'node2b') moves partition 2 (node2's
# highest; node2 holds partition 0) to a table node2 already has: swapped, not copied; and a later call does
# not drop that table through the name node2 as an orphan, since it is the very table partition 2 reads.
add_node_server($coord, 'node2b', $node{node2});
$l2 = log_at('node2');
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.add_node('tp3', 'node2b')");
is($rc, 0, 'add_node onto a second name of node2 succeeds') or diag($err);
like($err, qr/partition 3 of 4 is on server "node2b", which held the same copy/, '... partition 2 not copied');
is(copies_since('node2', $l2), 0, '... no COPY into node2');
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('tp3', ARRAY['node2', 'node1'])");
is($rc, 0, 'distribute again') or diag($err);
unlike($err, qr/dropped/, '... drops nothing');
is($tables3->('node2'), 'tp3_p0 tp3_p2', '... node2 keeps the table partition 2 reads through node2b');
is(contents('tp3'), contents('tp2'), '... the rows are all there');

# ---------------------------------------------------------------------------
# 4. add_node: 6 partitions on 2 servers, a third added gets floor(6 / 3) = 2,
# each the highest-numbered partition of the server holding most (node1 on a
# tie: it holds partition 0): 4 from node1, then 5 from node2.
# ---------------------------------------------------------------------------
my $before = placement();
is($before, '0:node1 1:node2 2:node1 3:node2 4:node1 5:node2', 'tp is on node1 and node2');
$l1 = log_at('node3');
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.add_node('tp', 'node3')");
is($rc, 0, 'add_node succeeds') or diag($err);
is($out, '2', '... moving 2 partitions');
is(placement(), '0:node1 1:node2 2:node1 3:node2 4:node3 5:node3', '... partitions 4 and 5, nothing else');
is(copies_since('node3', $l1), 2, '... node3 took 2 COPYs');
is(node_tables('node3'), $coord->safe_psql('postgres',
	q{SELECT string_agg('tp_p' || part || ':' || c, ' ' ORDER BY part) FROM (SELECT part, count(*) c FROM tp WHERE part >= 4 GROUP BY part) x}),
	'... node3 holds their copies, whole');
is(contents('tp'), $original, '... the distributed table has the rows it had');
like(node_tables('node1'), qr/tp_p4/, '... the old copy of partition 4 is on node1 until the next call');
($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('tp', ARRAY['node1', 'node2'])");
is($out, '0', 'a re-run of distribute moves nothing');
unlike(node_tables('node1'), qr/tp_p4/, '... and drops the old copy of partition 4 on node1');
unlike(node_tables('node2'), qr/tp_p5/, '... and of partition 5 on node2');
is(placement(), '0:node1 1:node2 2:node1 3:node2 4:node3 5:node3', '... leaving the partitions where they are');

($rc, $out, $err) = $coord->psql('postgres', "SELECT pgdl.add_node('tp', 'node3')");
like($err, qr/holds partitions of "tp" already/, 'add_node of a server the table uses is refused');

# ---------------------------------------------------------------------------
# 5. fit_multiple over the three nodes: the models of one server.
# ---------------------------------------------------------------------------
$coord->safe_psql(
	'postgres', q{
CREATE TABLE lb_local AS SELECT * FROM pgdl.fit_multiple('ref', 'grid', 2, 'vp', workers => 2);
CREATE TABLE lb_dist AS SELECT * FROM pgdl.fit_multiple('tp', 'grid', 2, 'vp');
});
my ($dl, $dd) = (model_digests($coord, 'lb_local'), model_digests($coord, 'lb_dist'));
like($dl, qr/:[0-9a-f]{32} .*:[0-9a-f]{32}/, 'two models on one server');
is($dd, $dl, 'fit_multiple over the table add_node spread on three nodes: the same models, bit for bit');

done_testing();
