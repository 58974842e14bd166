# What a node's log sees of the models it trains: a coordinator and one node
# on this machine, the node logging every statement with its parameters in
# full (log_statement = all, log_parameter_max_length = -1, its default).
#
# Models of more than a megabyte go to the node as COPY data, which PostgreSQL
# does not log, and come back as result rows, which it does not log either: a
# distributed pgdl.fit_multiple and a pgdl.fit_federated run leave the node's
# log under a megabyte, with no bytea in it, and train the bytes they train on
# one server.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $LOG_CONF = "log_statement = all\nlog_parameter_max_length = -1\nlog_min_duration_statement = 0\n";
my $coord = new_pgdl_node('coord', "max_worker_processes = 16\n");
my $node1 = new_pgdl_node('node1', $LOG_CONF);
add_node_server($coord, 'node1', $node1);

# 16 -> 512 -> 512 -> 4: 273,668 parameters, a model (with momentum) of about 2 MB
$coord->safe_psql(
	'postgres', points_sql() . q{
SELECT pgdl.add_architecture('big', '{"input": [16], "layers": [{"type": "dense", "units": 512},
  {"type": "relu"}, {"type": "dense", "units": 512}, {"type": "relu"}, {"type": "dense", "units": 4}]}');
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('train_rows', 'x', 'label', 'ref_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
SELECT pgdl.distribute('train_packed', ARRAY['node1']);
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'big', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 25, "seed": 1}',
                    '{"optimizer": "adam", "lr": 0.001, "batch_size": 25, "seed": 3}']) c
 WHERE a.name = 'big' ORDER BY c;
});

my $log = $node1->logfile;
my $log_start = -s $log;

$coord->safe_psql(
	'postgres', q{
SET client_min_messages = warning;
CREATE TABLE lb_dist AS SELECT * FROM pgdl.fit_multiple('train_packed', 'big', 2, 'valid_packed');
CREATE TABLE lb_local AS SELECT * FROM pgdl.fit_multiple('ref_packed', 'big', 2, 'valid_packed', workers => 1);
});
my $cfg = '{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 25, "seed": 5}';
$coord->safe_psql(
	'postgres', qq{
SET client_min_messages = warning;
SELECT pgdl.fit_federated('train_packed', 'big', '$cfg', 2, 1, 'valid_packed', 'fed');
SELECT pgdl.fit('ref_packed', 'big', '$cfg', 2, name => 'one_server');
});

# the models: over a megabyte, and the bytes of one server
my $digests = model_digests($coord, 'lb_dist');
like($digests, qr/^\d+:[0-9a-f]{32} \d+:[0-9a-f]{32}$/, 'fit_multiple over the node trains both configurations');
is($digests, model_digests($coord, 'lb_local'), 'fit_multiple over the node: the models of one server, bit for bit');
is( $coord->safe_psql(
		'postgres', q{SELECT (SELECT md5(weights) FROM pgdl.models WHERE name = 'fed')
		                   = (SELECT md5(weights) FROM pgdl.models WHERE name = 'one_server')}),
	't', 'fit_federated with every partition on one node: the bytes of pgdl.fit on one server');
my $smallest = $coord->safe_psql('postgres',
	q{SELECT min(octet_length(weights)) FROM pgdl.models WHERE name = 'fed' OR id IN (SELECT model FROM lb_dist)});
cmp_ok($smallest, '>', 1024 * 1024, 'each model is over a megabyte');

# the node's log: it logged the visits, not the models
my $text = slurp_file($log, $log_start);
my $visits = () = $text =~ /statement: .*COPY pg_temp\.pgdl_visit_blobs/g;
my $calls  = () = $text =~ /pgdl\.train_partitions\(\(SELECT b FROM pg_temp\.pgdl_visit_blobs/g;
# 2 configurations x 2 epochs x 4 partitions, then 2 rounds x 4 partitions
cmp_ok($visits, '>=', 24, "the node logged every visit's COPY ($visits)");
cmp_ok($calls,  '>=', 24, "the node logged every visit's call ($calls)");
like($text, qr/parameters: \$1 = '\{/, 'the node logs the calls\' parameters (the configuration)');
note(sprintf('the node logged %d bytes for %d visits of models of %d bytes', length($text), $visits, $smallest));
cmp_ok(length($text), '<', 1024 * 1024, 'the node\'s log grew by less than a megabyte');
unlike($text, qr/\\x[0-9a-f]{64}/, 'no bytea in the node\'s log');
my @slices = split /\n/, $coord->safe_psql('postgres',
	q{SELECT encode(substring(weights FROM octet_length(weights) / 2 FOR 24), 'hex')
	    FROM pgdl.models WHERE name = 'fed' OR id IN (SELECT model FROM lb_dist)});
is(scalar(@slices), 3, 'three models to look for');
is((grep { index($text, $_) >= 0 } @slices), 0, 'no trained model\'s bytes in the node\'s log');

# the node's table of a visit's model is its session's: gone with it
ok(node_sessions_gone($node1, 30), 'the runs\' sessions on the node are gone');
is($node1->safe_psql('postgres', "SELECT count(*) FROM pg_class WHERE relname = 'pgdl_visit_blobs'"),
	'0', 'no table of visits is left on the node');

# a mapped role that may not create temporary tables: the node's error, named
$node1->safe_psql(
	'postgres', q{
CREATE ROLE plain LOGIN;
DO $$ DECLARE t record; BEGIN
  FOR t IN SELECT schemaname, tablename FROM pg_tables WHERE tablename LIKE 'train_packed%' LOOP
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO plain', t.schemaname);
    EXECUTE format('GRANT SELECT ON %I.%I TO plain', t.schemaname, t.tablename);
  END LOOP;
END $$;
REVOKE TEMPORARY ON DATABASE postgres FROM PUBLIC;
});
$coord->safe_psql('postgres',
	"ALTER USER MAPPING FOR CURRENT_USER SERVER node1 OPTIONS (ADD user 'plain', ADD password_required 'false')");
my ($ret, $out, $err) = $coord->psql('postgres',
	"SELECT pgdl.fit_federated('train_packed', 'big', '$cfg', 1, 1, NULL, 'fed_no_temp')");
isnt($ret, 0, 'a mapped role without TEMPORARY on the node: the run fails');
like($err, qr/server "node1": permission denied to create temporary tables in database "postgres"/,
	'... with the node\'s error, naming the node');

done_testing();
