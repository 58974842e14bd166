# TLS between a coordinator and a node: sslmode=verify-full over TCP on
# localhost, with a throw-away certificate authority made here by openssl and a
# server certificate for "localhost".  The node accepts TCP connections only
# with TLS.  pgdl.distribute and pgdl.fit_federated train over the verified
# connection; a server reached by another name than its certificate's, one
# whose certificate another authority signed, and one reached without TLS are
# refused, each saying why.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $dir = PostgreSQL::Test::Utils::tempdir();

sub openssl
{
	my @cmd = ('openssl', @_);
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err) or die "openssl @_ failed: $err";
	return;
}

# Two authorities (the node's certificate is signed by the first), and the node's key and certificate.
for my $ca (qw(ca other_ca))
{
	openssl('req', '-new', '-x509', '-nodes', '-days', '2', '-newkey', 'rsa:2048', '-subj', "/CN=pgdl test $ca",
		'-keyout', "$dir/$ca.key", '-out', "$dir/$ca.crt");
}
openssl('req', '-new', '-nodes', '-newkey', 'rsa:2048', '-subj', '/CN=localhost', '-keyout', "$dir/server.key",
	'-out', "$dir/server.csr");
open my $ext, '>', "$dir/san.ext" or die "could not write $dir/san.ext: $!";
print $ext "subjectAltName = DNS:localhost\n";
close $ext;
openssl('x509', '-req', '-in', "$dir/server.csr", '-CA', "$dir/ca.crt", '-CAkey', "$dir/ca.key",
	'-CAcreateserial', '-days', '2', '-extfile', "$dir/san.ext", '-out', "$dir/server.crt");
chmod 0600, "$dir/server.key";

my $LOG_CONF = "log_parameter_max_length = 0\n";
my $coord = new_pgdl_node('coord', $LOG_CONF);
my $node = new_pgdl_node('tls_node', $LOG_CONF . qq{
listen_addresses = 'localhost'
ssl = on
ssl_cert_file = '$dir/server.crt'
ssl_key_file = '$dir/server.key'
log_connections = on
});
# over TCP, TLS or nothing
prepend_hba($node, 'hostnossl all all all reject', 'hostssl all all all trust');
my $port = $node->port;

$coord->safe_psql(
	'postgres', qq{
CREATE EXTENSION postgres_fdw;
CREATE SERVER tls_ok FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host 'localhost', port '$port', dbname 'postgres', sslmode 'verify-full', sslrootcert '$dir/ca.crt');
CREATE SERVER tls_by_ip FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres', sslmode 'verify-full', sslrootcert '$dir/ca.crt');
CREATE SERVER tls_other_ca FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host 'localhost', port '$port', dbname 'postgres', sslmode 'verify-full', sslrootcert '$dir/other_ca.crt');
CREATE SERVER tls_none FOREIGN DATA WRAPPER postgres_fdw
  OPTIONS (host 'localhost', port '$port', dbname 'postgres', sslmode 'disable');
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_ok;
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_by_ip;
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_other_ca;
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_none;
} . points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'tls_packed', buffer_rows => 100, partitions => 2, seed => 7);
SELECT pgdl.pack('train_rows', 'x', 'label', 'refused_packed', buffer_rows => 100, partitions => 2, seed => 7);
});

# ---------------------------------------------------------------------------
# Refused: the wrong name, another authority, no TLS
# ---------------------------------------------------------------------------
my %refused = (
	tls_by_ip    => qr/server certificate for "localhost" (\(and 1 other name\) )?does not match host name "127\.0\.0\.1"/,
	tls_other_ca => qr/certificate verify failed/,
	tls_none     => qr/no encryption/,
);
for my $server (sort keys %refused)
{
	my ($ret, $out, $err) = $coord->psql('postgres', "SELECT pgdl.distribute('refused_packed', ARRAY['$server'])");
	isnt($ret, 0, "distribute over $server is refused");
	like($err, qr/could not connect to server "$server"/, '... naming the server') or diag($err);
	like($err, $refused{$server}, '... and saying why');
}
is( $coord->safe_psql(
		'postgres',
		q{SELECT count(*) FROM pg_foreign_table f JOIN pg_class c ON c.oid = f.ftrelid WHERE c.relname LIKE 'refused_packed%'}
	),
	'0',
	'... and no partition moved');

# ---------------------------------------------------------------------------
# verify-full over TCP: distribute, then a federated run
# ---------------------------------------------------------------------------
my $log_offset = -s $node->logfile;
is($coord->safe_psql('postgres', "SELECT pgdl.distribute('tls_packed', ARRAY['tls_ok'])"),
	'2', 'distribute over a verified TLS connection moves both partitions');
my $model = $coord->safe_psql(
	'postgres', q{
SET client_min_messages = warning;
SELECT pgdl.fit_federated('tls_packed', 'small', '{"optimizer": "sgd", "lr": 0.1, "batch_size": 25, "seed": 1}', 2, 1, name => 'tls_model');
});
like($model, qr/^\d+$/, 'fit_federated over it trains and stores its model');
is( $coord->safe_psql(
		'postgres',
		q{SELECT federation -> 'sites' FROM pgdl.run_metrics r JOIN pgdl.models m ON m.run = r.run
		   WHERE m.name = 'tls_model' AND r.node IS NULL AND r.epoch = 2}),
	'["tls_ok"]',
	'... with the node as its site');
my $log = substr(slurp_file($node->logfile), $log_offset);
my @authorized = $log =~ /connection authorized: user=\S+ database=postgres application_name=pgdl[^\n]*/g;
cmp_ok(scalar(@authorized), '>=', 2, 'the node logged the coordinator\'s connections');
is(scalar(grep { !/SSL enabled \(protocol=TLSv1\.[23]/ } @authorized), 0, '... every one with TLS') or diag(join("\n", @authorized));

$_->stop for ($coord, $node);
done_testing();
