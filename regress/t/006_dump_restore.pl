# pg_dump of a database that uses pgdl, restored two ways: pg_dump -Fc and
# pg_restore, and a plain pg_dump piped to psql -v ON_ERROR_STOP=1.  The
# database has datasets, an architecture, models (one shared with bob, one
# given to him), transfer configurations of two owners with their feature
# caches, a finished run and a cancelled one with their checkpoints.  Both
# restores run without an error or a warning, and give the same catalog, rows
# and owners, the same feature caches, the same predictions, and a cancelled
# run that resumes to the models it resumes to in the original.
#
# The catalog is under row-level security: the dumps run as a superuser
# (docs/security.md); the cache views are refreshed as their owners.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

$node->safe_psql('postgres', q{
CREATE DATABASE original;
CREATE DATABASE restored;
CREATE DATABASE piped;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
});
$node->safe_psql('original', q{
CREATE EXTENSION pgdl;
GRANT CREATE ON SCHEMA public TO alice, bob;
CREATE TABLE points AS
SELECT i, ARRAY[sin(i), cos(i), sin(i * 0.3), cos(i * 0.7)]::real[] AS x,
       (sin(i) + cos(i * 0.7) > 0)::int + (sin(i * 0.3) > 0.5)::int AS label
  FROM generate_series(1, 600) i;
GRANT SELECT ON points TO alice, bob;
});

# alice: datasets, a base model, a finished model selection, transfer heads through feature caches, a
# cancelled run
$node->safe_psql('original', q{
SELECT pgdl.pack('points', 'x', 'label', 'points_packed', buffer_rows => 32, partitions => 2, seed => 3);
SELECT pgdl.pack('points', 'x', 'label', 'points_valid', buffer_rows => 64, partitions => 1,
                 reference => 'points_packed');
SELECT pgdl.add_architecture('mlp', '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
  {"type": "dense", "units": 3}]}');
SELECT pgdl.fit('points_packed', 'mlp', '{"lr": 0.1, "momentum": 0.9, "seed": 1}', 4, name => 'base');
SELECT pgdl.grid_search('grid', '{mlp}', '{"lr": [0.05, 0.1], "seed": 5}');
SELECT count(*) FROM pgdl.fit_multiple('points_packed', 'grid', 3, 'points_valid', workers => 1);
SELECT pgdl.grid_search('heads', '{}', '{"base_model": "base", "freeze": 2, "lr": [0.05, 0.1], "seed": 4,
  "head": [[{"type": "dense", "units": 3}], [{"type": "dense", "units": 8}, {"type": "relu"}, {"type": "dense", "units": 3}]]}');
SELECT count(*) FROM pgdl.fit_multiple('points_packed', 'heads', 2, 'points_valid', workers => 2,
                                       feature_cache => 'on', name_prefix => 'head_');
SET pgdl.keep_checkpoints = -1;
SELECT count(*) FROM pgdl.fit_multiple('points_packed', 'grid', 2, workers => 1);
UPDATE pgdl.runs SET status = 'cancelled', epochs = 4, finished = NULL WHERE id = (SELECT max(id) FROM pgdl.runs);
SELECT pgdl.delete_rows('pgdl.models', ARRAY(SELECT id FROM pgdl.models WHERE run = (SELECT max(id) FROM pgdl.runs)));
SELECT pgdl.grant_model('base', 'bob');
-- a deployment with a history: a head, then base again by a rollback; shared with bob
SELECT pgdl.deploy('svc', 'base');
SELECT pgdl.deploy('svc', (SELECT max(name) FROM pgdl.models WHERE name LIKE 'head\_%'));
SELECT pgdl.rollback('svc');
SELECT pgdl.grant_deployment('svc', 'bob');
}, extra_params => [ '-U', 'alice' ]);
my $cancelled = $node->safe_psql('original', 'SELECT max(id) FROM pgdl.runs');

# bob: heads on alice's shared base, trained on rows of his own packed against hers, with a cache of his
$node->safe_psql('original', q{
CREATE TABLE bob_points AS SELECT * FROM points WHERE i <= 300;
SELECT pgdl.pack('bob_points', 'x', 'label', 'bob_packed', buffer_rows => 32, partitions => 2, seed => 3,
                 reference => 'points_packed');
SELECT pgdl.grid_search('bob_heads', '{}', '{"base_model": "base", "freeze": 2, "lr": 0.1, "seed": 6,
  "head": [[{"type": "dense", "units": 3}]]}');
SELECT count(*) FROM pgdl.fit_multiple('bob_packed', 'bob_heads', 2, workers => 1, feature_cache => 'on',
                                       name_prefix => 'bob_head_');
}, extra_params => [ '-U', 'bob' ]);
# a model alice's run wrote, given to bob afterwards
$node->safe_psql('original', "UPDATE pgdl.models SET owner = 'bob' WHERE name = (SELECT min(name) FROM pgdl.models WHERE name LIKE 'head\\_%')");

is( $node->safe_psql('original', q{
SELECT (SELECT count(*) FROM pgdl.feature_cache) || ' caches of ' ||
       (SELECT count(DISTINCT owner) FROM pgdl.feature_cache) || ' owners, ' ||
       (SELECT count(*) FROM pgdl.configs WHERE config ? 'base_model') || ' transfer configurations, ' ||
       (SELECT count(DISTINCT run) FROM pgdl.checkpoints) || ' runs with checkpoints'}),
	'3 caches of 2 owners, 5 transfer configurations, 4 runs with checkpoints',
	'the original database');

# ---------------------------------------------------------------------------
# Dump, restore both ways
# ---------------------------------------------------------------------------
my $archive = $node->basedir . '/original.dump';
my ($stdout, $stderr);
ok(IPC::Run::run([ 'pg_dump', '-Fc', '-f', $archive, '-d', $node->connstr('original') ], '2>', \$stderr),
	'pg_dump -Fc');
is($stderr, '', '... without a warning (no circular foreign keys)');

$stderr = '';
ok(IPC::Run::run([ 'pg_restore', '-d', $node->connstr('restored'), $archive ], '2>', \$stderr),
	'pg_restore into a new database');
is($stderr, '', '... without an error or a warning');

my ($dump_err, $psql_out, $psql_err) = ('', '', '');
ok( IPC::Run::run(
		[ 'pg_dump', '-d', $node->connstr('original') ], '2>', \$dump_err, '|',
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('piped') ],
		'>', \$psql_out, '2>', \$psql_err),
	'pg_dump | psql -v ON_ERROR_STOP=1 into another');
is($dump_err . $psql_err, '', '... without an error or a warning');

# ---------------------------------------------------------------------------
# The same database
# ---------------------------------------------------------------------------
# every row of every catalog table, in order (ids, owners, grants, regclass names, weights and all)
my $rows_sql = join(' UNION ALL ', map {
	"SELECT '$_', count(*) || ' ' || md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM pgdl.$_ t"
} qw(datasets architectures models runs run_metrics configs checkpoints feature_cache deployment_names
  deployment_history));
# the cache views' rows
my @views = split /\n/, $node->safe_psql('original', 'SELECT view FROM pgdl.feature_cache ORDER BY view::text');
my $caches_sql = join(' UNION ALL ',
	map { "SELECT '$_', count(*) || ' ' || md5(string_agg(v::text, E'\\n' ORDER BY v::text)) FROM $_ v" } @views);
my $predict_sql = q{
SELECT string_agg(m.id || ':' || md5(array_send(pgdl.predict(m.id, p.x))), ' ' ORDER BY m.id, p.i)
  FROM pgdl.models m, (SELECT i, x FROM points WHERE i % 61 = 0) p};
my $bob_sql = q{
SELECT string_agg(m.name || ':' || pgdl.predict_class(m.name, p.x), ' ' ORDER BY m.name, p.i)
  FROM pgdl.models m, (SELECT i, x FROM points WHERE i % 61 = 0) p
UNION ALL
SELECT string_agg(d.version || ':' || d.active || ':' || pgdl.predict_class('svc', p.x), ' ' ORDER BY d.version, p.i)
  FROM pgdl.deployments d, (SELECT i, x FROM points WHERE i % 61 = 0) p};

my %want = (
	rows => $node->safe_psql('original', $rows_sql),
	caches => $node->safe_psql('original', $caches_sql),
	predictions => $node->safe_psql('original', $predict_sql),
	bob => $node->safe_psql('original', $bob_sql, extra_params => [ '-U', 'bob' ]));
like($want{rows}, qr/^datasets\|3 /, 'the original catalog has its rows');
for my $db ('restored', 'piped')
{
	is($node->safe_psql($db, $rows_sql), $want{rows}, "$db: every catalog row, owner and grant as in the original");
	is($node->safe_psql($db, $caches_sql), $want{caches}, "$db: the feature caches, refreshed as their owners");
	is($node->safe_psql($db, $predict_sql), $want{predictions}, "$db: every model predicts the same bytes");
	is($node->safe_psql($db, $bob_sql, extra_params => [ '-U', 'bob' ]),
		$want{bob}, "$db: bob sees and uses what he saw and used (his models, the one given him, alice's shared base)");
}

# the cancelled run goes on from its checkpoints, to the same models everywhere
# (the leaderboard in a table first: a query's snapshot does not see the models its resume stores)
my $resume_sql = "CREATE TABLE resumed AS SELECT * FROM pgdl.resume($cancelled, workers => 1); "
  . "SELECT string_agg(l.config || ':' || md5(m.weights), ' ' ORDER BY l.config) "
  . "FROM resumed l JOIN pgdl.models m ON m.id = l.model";
my $resumed = $node->safe_psql('original', $resume_sql, extra_params => [ '-U', 'alice' ]);
like($resumed, qr/^\d+:\w{32} \d+:\w{32}$/, 'the original\'s cancelled run resumes');
for my $db ('restored', 'piped')
{
	is($node->safe_psql($db, $resume_sql, extra_params => [ '-U', 'alice' ]),
		$resumed, "$db: the cancelled run resumes to the same models");
}

done_testing();
