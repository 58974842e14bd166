# pgdl 0.1.0, as released (sql/pgdl--0.1.0.sql), upgraded in place with
# ALTER EXTENSION pgdl UPDATE: the models it stored predict the same bytes, its
# rows get owners, users' views and foreign keys on the catalog stay, and the
# upgraded catalog is a fresh 0.7.0 one (through 0.2.0, 0.3.0, 0.4.0, 0.5.0 and 0.6.0), object for object.  Then DROP
# EXTENSION: it takes its schemas, says which packed tables it leaves, and a
# pgdl created again says what such a table is.
#
# 0.1.0's SQL runs here with this build's library (every C symbol it names is
# still there); the library's owner-aware lookups (names, fit_multiple,
# grid_search) need the 0.2.0 catalog, so 0.1.0's rows are made with what works
# on both: pack, fit of a spec, predict by id, and INSERTs, as 0.1.0 users did.
use strict;
use warnings;

use File::Temp qw(tempdir);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

$node->safe_psql('postgres', q{
CREATE DATABASE upgraded;
CREATE DATABASE fresh;
CREATE ROLE alice LOGIN;
});

# ---------------------------------------------------------------------------
# pgdl 0.1.0 and what its users stored
# ---------------------------------------------------------------------------
$node->safe_psql('upgraded', q{
CREATE EXTENSION pgdl VERSION '0.1.0';
GRANT CREATE ON SCHEMA public TO alice;
});
is( $node->safe_psql('upgraded',
		"SELECT extversion || ' ' || extnamespace::regnamespace FROM pg_extension WHERE extname = 'pgdl'"),
	'0.1.0 pgdl', 'pgdl 0.1.0 is installed, in schema pgdl');

# alice packs her table (pgdl.pack made the packed table as her); the superuser trains on it
$node->safe_psql('upgraded', q{
CREATE TABLE points AS
SELECT i, ARRAY[sin(i), cos(i), sin(i * 0.3), cos(i * 0.7)]::real[] AS x,
       (sin(i) + cos(i * 0.7) > 0)::int + (sin(i * 0.3) > 0.5)::int AS label
  FROM generate_series(1, 600) i;
SELECT pgdl.pack('points', 'x', 'label', 'points_packed', buffer_rows => 32, partitions => 2, seed => 3);
}, extra_params => [ '-U', 'alice' ]);
my $spec = '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"}, {"type": "dense", "units": 3}]}';
$node->safe_psql('upgraded', qq{
-- trained by the aggregate, which writes no catalog row: this build's pgdl.fit writes the 0.2.0 catalog's
-- columns, so the 0.1.0 catalog is filled as 0.1.0's pgdl.fit filled it, by hand
INSERT INTO pgdl.runs (kind, dataset, config, epochs, status)
SELECT 'fit', 1, c::jsonb, 1, 'finished'
  FROM unnest(ARRAY['{"lr": 0.1, "momentum": 0.9, "seed": 1}', '{"optimizer": "adam", "lr": 0.01, "seed": 2}']) c;
INSERT INTO pgdl.models (spec, config, dataset, run, weights)
SELECT pgdl.validate_spec('$spec'), r.config, 1, r.id,
       (SELECT pgdl.train(p.x, p.y, p.n, pgdl.init_model('$spec', r.config) ORDER BY p.part, p.buffer_id)
          FROM points_packed p)
  FROM pgdl.runs r ORDER BY r.id;
UPDATE pgdl.models SET name = 'sgd_model' WHERE id = 1;
UPDATE pgdl.models SET name = 'adam_model' WHERE id = 2;
INSERT INTO pgdl.architectures (name, spec) VALUES ('mlp', pgdl.validate_spec('$spec'));
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'grid', a.id, c::jsonb FROM pgdl.architectures a,
       unnest(ARRAY['{"lr": 0.1, "momentum": 0.9, "seed": 1}', '{"lr": 0.05, "seed": 5}']) c;
-- a transfer configuration: the first model's first two layers, frozen, and a head of its own
INSERT INTO pgdl.configs (set_name, config)
VALUES ('heads', '{"base_model": 1, "freeze": 2, "head": [{"type": "dense", "units": 3}], "lr": 0.05, "seed": 4}');
-- a run cancelled after its first epoch, with its checkpoint (a model of configuration 1's optimizer)
INSERT INTO pgdl.runs (kind, dataset, config, epochs, status)
VALUES ('fit_multiple', 1, '{"set": "grid", "workers": 1}', 3, 'cancelled');
INSERT INTO pgdl.run_metrics (run, config, epoch, train_loss) VALUES (3, 1, 1, 0.5);
INSERT INTO pgdl.checkpoints (run, config, epoch, weights) SELECT 3, 1, 1, weights FROM pgdl.models WHERE id = 1;
-- users' own objects on the catalog
CREATE VIEW my_models AS SELECT id, name FROM pgdl.models;
CREATE TABLE my_predictions (model bigint REFERENCES pgdl.models, p real[]);
INSERT INTO my_predictions SELECT id, NULL FROM pgdl.models;
});

# what the stored models answer, as text (every float printed whole) and as bytes
my $predictions_sql = q{
SELECT string_agg(m.id || ':' || pgdl.predict(m.id, p.x)::text || ':' || pgdl.predict_class(m.id, p.x)
                  || ':' || md5(array_send(pgdl.predict(m.id, p.x))), ' ' ORDER BY m.id, p.i)
  FROM pgdl.models m, (SELECT i, x FROM points WHERE i % 97 = 0) p};
my $evaluate_sql = q{
SELECT string_agg(m.id || ':' || e.loss || ':' || e.accuracy, ' ' ORDER BY m.id)
  FROM pgdl.models m, LATERAL pgdl.evaluate(m.id, 'points_packed') e};
my $before = $node->safe_psql('upgraded', $predictions_sql);
my $evaluated = $node->safe_psql('upgraded', $evaluate_sql);
like($before, qr/^1:\{.*\b2:\{/, 'pgdl 0.1.0 stored two models that predict');
my $weights_sql = "SELECT string_agg(id || ':' || md5(weights), ' ' ORDER BY id) FROM pgdl.models";
my $weights = $node->safe_psql('upgraded', $weights_sql);

# ---------------------------------------------------------------------------
# ALTER EXTENSION pgdl UPDATE
# ---------------------------------------------------------------------------
# pgdl's trigger functions attached to a table that is not pgdl's (0.6.0 let any role attach them, and
# base_model_changed ran as the extension's owner): the update drops those triggers, and says so
$node->safe_psql('upgraded', q{
CREATE TABLE attached (id bigint);
CREATE TRIGGER stale_caches AFTER DELETE ON attached FOR EACH ROW EXECUTE FUNCTION pgdl.base_model_changed();
CREATE TRIGGER flush AFTER INSERT ON attached FOR EACH STATEMENT EXECUTE FUNCTION pgdl.catalog_changed();
ALTER TABLE attached OWNER TO alice;
});
my ($update_rc, $update_out, $update_err) = $node->psql('upgraded', 'ALTER EXTENSION pgdl UPDATE');
is($update_rc, 0, 'ALTER EXTENSION pgdl UPDATE succeeds');
like($update_err, qr/WARNING:  dropped trigger "flush" on table public.attached, which called pgdl's trigger function pgdl.catalog_changed\(\)/,
	'the update drops a trigger of pgdl.catalog_changed() on a table that is not pgdl\'s, with a WARNING');
like($update_err, qr/WARNING:  dropped trigger "stale_caches" on table public.attached, which called pgdl's trigger function pgdl.base_model_changed\(\)/,
	'... and one of pgdl.base_model_changed()');
is($node->safe_psql('upgraded', "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'attached'::regclass"), '0',
	'the table keeps no trigger of pgdl\'s');
is( $node->safe_psql('upgraded',
		"SELECT extversion || ' ' || extnamespace::regnamespace FROM pg_extension WHERE extname = 'pgdl'"),
	'0.7.0 pg_catalog', 'ALTER EXTENSION pgdl UPDATE: 0.1.0 to 0.2.0 to 0.3.0 to 0.4.0 to 0.5.0 to 0.6.0 to 0.7.0, installed as a fresh 0.7.0 is');
is($node->safe_psql('upgraded', $weights_sql), $weights, 'the stored models keep their bytes');
is($node->safe_psql('upgraded', $predictions_sql), $before, 'and predict the same values and classes, bit for bit');
is($node->safe_psql('upgraded', $evaluate_sql), $evaluated, 'and evaluate the same');
is( $node->safe_psql('upgraded', q{
SELECT string_agg(t || ':' || o, ' ' ORDER BY t) FROM (
  SELECT 'datasets' AS t, string_agg(DISTINCT owner::text, ',') AS o FROM pgdl.datasets UNION ALL
  SELECT 'architectures', string_agg(DISTINCT owner::text, ',') FROM pgdl.architectures UNION ALL
  SELECT 'models', string_agg(DISTINCT owner::text, ',') FROM pgdl.models UNION ALL
  SELECT 'runs', string_agg(DISTINCT owner::text, ',') FROM pgdl.runs UNION ALL
  SELECT 'run_metrics', string_agg(DISTINCT owner::text, ',') FROM pgdl.run_metrics UNION ALL
  SELECT 'configs', string_agg(DISTINCT owner::text, ',') FROM pgdl.configs UNION ALL
  SELECT 'checkpoints', string_agg(DISTINCT owner::text, ',') FROM pgdl.checkpoints) s}),
	'architectures:postgres checkpoints:postgres configs:postgres datasets:alice models:postgres '
	  . 'run_metrics:postgres runs:postgres',
	'a dataset is its packed table\'s owner\'s; every other row the extension\'s owner\'s');
is($node->safe_psql('upgraded', "SELECT string_agg(name, ',' ORDER BY id) FROM my_models"),
	'sgd_model,adam_model', 'a user\'s view on pgdl.models stays');
is($node->safe_psql('upgraded', 'SELECT count(*) FROM my_predictions p JOIN pgdl.models m ON m.id = p.model'),
	'2', 'and a user\'s foreign key to it');

# ---------------------------------------------------------------------------
# The upgraded catalog is a fresh 0.7.0 one
# ---------------------------------------------------------------------------
$node->safe_psql('fresh', 'CREATE EXTENSION pgdl; GRANT CREATE ON SCHEMA public TO alice');

my $dir = tempdir(CLEANUP => 1);

# Every object of the extension with its definition, as pg_dump --binary-upgrade writes them (it dumps
# the extension's members one by one, columns in order, with their privileges), less object ids.
sub schema_of
{
	my ($db) = @_;
	my ($stdout, $stderr);
	# the upgraded database's own tables are in public
	IPC::Run::run([ 'pg_dump', '--binary-upgrade', '--schema-only', '--exclude-table=public.*', '-d', $node->connstr($db) ],
		'>', \$stdout, '2>', \$stderr)
	  or die "pg_dump $db failed: $stderr";
	# less what is data: the configuration sequences' values
	my @lines = grep { !/^\\(un)?restrict |binary_upgrade_set_next_|^-- Dumped |^SELECT pg_catalog\.setval\(/ }
	  split /\n/, $stdout;
	s/'\d+'/'N'/g for @lines;
	s/'\{[\d,]+\}'/'{N}'/g for @lines;
	return join("\n", @lines) . "\n";
}

# What pg_dump does not show: the extension's row, its members and dependencies, initial privileges.
my $catalog_sql = q{
SELECT 'extension ' || e.extname || ' schema ' || e.extnamespace::regnamespace || ' relocatable ' || e.extrelocatable
       || ' version ' || e.extversion || ' config ' ||
       coalesce((SELECT string_agg(c::regclass::text || ':' || coalesce(k, ''), ',' ORDER BY c::regclass::text)
                   FROM unnest(e.extconfig, e.extcondition) AS x(c, k)), '')
  FROM pg_extension e WHERE e.extname = 'pgdl'
UNION ALL
SELECT 'depend ' || pg_describe_object(d.classid, d.objid, d.objsubid) || ' -> ' ||
       pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' ' || d.deptype::text
  FROM pg_depend d, pg_extension e
 WHERE e.extname = 'pgdl' AND ((d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid)
                               OR (d.classid = 'pg_extension'::regclass AND d.objid = e.oid))
UNION ALL
SELECT 'init privileges ' || pg_describe_object(p.classoid, p.objoid, p.objsubid) || ' ' || p.privtype::text
       || ' ' || p.initprivs::text
  FROM pg_init_privs p
UNION ALL
SELECT 'table ' || c.oid::regclass || ' ' || c.relkind::text || ' rls ' || c.relrowsecurity || ' ' ||
       string_agg(a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' ||
                  a.attnotnull || ' ' || a.atthasmissing || ' ' || a.attstorage::text, ', ' ORDER BY a.attnum)
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
 WHERE c.relnamespace = 'pgdl'::regnamespace
 GROUP BY c.oid, c.relkind, c.relrowsecurity
ORDER BY 1};

for my $what ([ 'schema', \&schema_of ],
	[ 'catalog', sub { $node->safe_psql($_[0], $catalog_sql) . "\n" } ])
{
	my ($name, $get) = @$what;
	my %file;
	for my $db ('fresh', 'upgraded')
	{
		$file{$db} = "$dir/$name.$db";
		open(my $fh, '>', $file{$db}) or die "$file{$db}: $!";
		print $fh $get->($db);
		close $fh;
	}
	my $diff = `diff -u $file{fresh} $file{upgraded}`;
	is($diff, '', "the upgraded database's $name equals a fresh install's (diff fresh upgraded)");
	cmp_ok(-s $file{fresh}, '>', 1000, "... which is not empty ($name)");
}

# the upgraded catalog at work: names, row-level security, a transfer configuration, the cancelled run
is($node->safe_psql('upgraded', "SELECT pgdl.predict_class('sgd_model', x) = pgdl.predict_class(1, x) FROM points LIMIT 1"),
	't', 'models are found by name');
is($node->safe_psql('upgraded', 'SELECT count(*) FROM pgdl.models', extra_params => [ '-U', 'alice' ]),
	'0', 'alice does not see the extension owner\'s models');
is($node->safe_psql('upgraded', 'SELECT count(*) FROM pgdl.datasets', extra_params => [ '-U', 'alice' ]),
	'1', '... and sees her dataset');
is( $node->safe_psql('upgraded',
		"SELECT count(*) FROM pgdl.fit_multiple('points_packed', 'heads', 2, workers => 1, feature_cache => 'on')"),
	'1', 'the transfer configuration trains, through a feature cache');
is($node->safe_psql('upgraded', 'SELECT count(*) FROM pgdl.resume(3, workers => 1)'),
	'2', 'the cancelled run resumes from its checkpoint');

# ---------------------------------------------------------------------------
# DROP EXTENSION: no schema left behind, and a notice of the packed tables that stay
# ---------------------------------------------------------------------------
$node->safe_psql('upgraded', 'CREATE EXTENSION amcheck');
my ($ret, $out, $err) = $node->psql('upgraded', 'DROP EXTENSION amcheck');
is($ret . $err, '0', 'dropping another extension says nothing of pgdl');

($ret, $out, $err) = $node->psql('upgraded', 'DROP TABLE my_predictions; DROP VIEW my_models; DROP EXTENSION pgdl CASCADE');
is($ret, 0, 'DROP EXTENSION pgdl CASCADE');
like($err, qr/NOTICE:  DROP EXTENSION pgdl leaves 1 packed table\nDETAIL:  Packed tables belong to the roles that packed them: points_packed\.\nHINT:  A pgdl created again does not know them/,
	'... says which packed table it leaves');
is( $node->safe_psql('upgraded',
		"SELECT string_agg(nspname, ',') FROM pg_namespace WHERE nspname IN ('pgdl', 'pgdl_cache')"),
	'', '... and leaves no schema pgdl or pgdl_cache');
is($node->safe_psql('upgraded', "SELECT count(*) FROM points_packed"), '19', '... the packed table stays');
is($node->safe_psql('upgraded', "SELECT count(*) FROM pg_roles WHERE rolname = 'pgdl_admin'"),
	'1', '... and so does role pgdl_admin');

$node->safe_psql('upgraded', 'CREATE EXTENSION pgdl');
($ret, $out, $err) = $node->psql('upgraded', "SELECT pgdl.fit('points_packed', '$spec'::jsonb)");
like($err, qr/"points_packed" is not a packed dataset\nDETAIL:  It has the columns of a table pgdl.pack writes, but no row in pgdl.datasets: it was packed before pgdl was dropped/,
	'a pgdl created again says what the packed table left from before is');
($ret, $out, $err) = $node->psql('upgraded', "SELECT pgdl.pack('points', 'x', 'label', 'points_again', reference => 'points_packed')");
like($err, qr/DETAIL:  It has the columns of a table pgdl.pack writes/, '... also as a reference');
is( $node->safe_psql('upgraded',
		"SELECT pgdl.pack('points', 'x', 'label', 'points_again', buffer_rows => 32, partitions => 2, seed => 3) > 0;
		 SELECT count(*) FROM (SELECT * FROM points_again EXCEPT SELECT * FROM points_packed) d"),
	"t\n0", 'packing its source again gives the same table');

done_testing();
