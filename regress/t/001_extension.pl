# pgdl loaded by the postmaster (shared_preload_libraries): _PG_init runs there,
# and every backend forked from it must still be able to start the engine,
# including its BLAS thread pool, alone and several at once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('preload');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'pgdl'\n");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION pgdl');
is( $node->safe_psql(
		'postgres', "SELECT pg_describe_object(classid, objid, 0) FROM pg_depend
		  WHERE classid = 'pg_namespace'::regclass AND objid = 'pgdl'::regnamespace AND deptype = 'e'"),
	'schema pgdl', 'CREATE EXTENSION creates schema pgdl, a member of the extension');

# Preloaded: the settings exist before any pgdl function is called.
is($node->safe_psql('postgres', 'SHOW pgdl.blas_threads'), '1', 'pgdl.blas_threads defaults to 1');

my $extversion = $node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pgdl'");
like(
	$node->safe_psql('postgres', 'SELECT pgdl.version()'),
	qr/^pgdl \Q$extversion\E \(engine format \d+, blas: .+, cuda: (yes|no)\)$/,
	'pgdl.version() answers in a backend forked from a postmaster that loaded pgdl');
like(
	$node->safe_psql('postgres', 'SELECT pgdl.cuda_status()'),
	qr/\S/,
	'pgdl.cuda_status() answers');

# Sessions that start BLAS pools of different sizes, one after another.
for my $threads (2, 1, 4)
{
	is( $node->safe_psql(
			'postgres',
			"SET pgdl.blas_threads = $threads; SELECT pgdl.cuda_status() <> ''; SHOW pgdl.blas_threads"),
		"t\n$threads",
		"a new session uses the engine with pgdl.blas_threads = $threads");
}

# Two sessions open at once, each with its own pool.
my @sessions = map { $node->background_psql('postgres') } 1 .. 2;
for my $i (0 .. 1)
{
	$sessions[$i]->query_safe('SET pgdl.blas_threads = 2');
	is($sessions[$i]->query_safe('SELECT pgdl.version() IS NOT NULL AND pgdl.cuda_status() IS NOT NULL'),
		't', "concurrent session $i uses the engine");
}
is($sessions[0]->query_safe('SELECT pgdl.cuda_status() IS NOT NULL'), 't', 'the first session still answers');
$_->quit for @sessions;

# Many short-lived backends (-C: a new connection per transaction), four at a time.
$node->pgbench(
	'--no-vacuum --connect --client=4 --jobs=2 --transactions=25',
	0,
	[qr{processed: 100/100}],
	[qr{^$}],
	'100 forked backends start the engine, four at a time',
	{
		'001_engine' => q{
			SET pgdl.blas_threads = 2;
			SELECT pgdl.version();
			SELECT pgdl.cuda_status();
			RESET pgdl.blas_threads;
			SELECT pgdl.cuda_status();
		}
	});

# The postmaster, with pgdl loaded, restarts cleanly and serves again.
$node->restart;
is($node->safe_psql('postgres', 'SELECT pgdl.version() IS NOT NULL'), 't', 'pgdl answers after a restart');

$node->stop;
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|server process .* exited with exit code [1-9]/,
	'no backend crashed');

done_testing();
