# Row-level security with background workers: ordinary roles, logged in as
# themselves, run, cancel and resume pgdl.fit_multiple.  The workers write the
# run's metrics and checkpoints as the caller, under the catalog's policies;
# what a run writes belongs to the run's owner, also when a member of the
# owning role resumes it; nobody else sees the run, resumes it or writes into
# it; and the resumed models are those of an uninterrupted run, bit for bit.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 1200;    # many small steps: several seconds, so that a cancel lands mid-run
my $ROWS   = 2 * $EPOCHS;    # checkpoints and metrics of a whole run of the two configurations

my $node = PostgreSQL::Test::Cluster->new('owners');
$node->init;
# keep_checkpoints = -1: finished runs keep every epoch's checkpoints, whose owners are counted
$node->append_conf('postgresql.conf', "max_worker_processes = 16\npgdl.keep_checkpoints = -1\n");
$node->start;

# alice works alone; team is a group role that carol acts as, by SET ROLE or
# by membership; bob is a stranger.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pgdl;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
CREATE ROLE team NOLOGIN;
CREATE ROLE carol LOGIN IN ROLE team;
GRANT CREATE ON SCHEMA public TO alice, team;
CREATE TABLE points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s;
GRANT SELECT ON points TO alice, team;
});

# Each owner packs the same rows and makes the same set of its own.
my %session = (alice => [ 'alice', '' ], team => [ 'carol', 'SET ROLE team;' ]);
for my $owner (sort keys %session)
{
	my ($user, $set_role) = @{ $session{$owner} };
	$node->safe_psql(
		'postgres', qq{
$set_role
SELECT pgdl.pack('points', 'x', 'label', '${owner}_packed', buffer_rows => 50, partitions => 4, seed => 7);
SELECT pgdl.add_architecture('small', '{"input": [16], "layers": [{"type": "dense", "units": 32},
  {"type": "relu"}, {"type": "dense", "units": 4}]}');
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'long', a.id, c::jsonb
  FROM pgdl.architectures a,
       unnest(ARRAY['{"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 2, "seed": 11}',
                    '{"optimizer": "adam", "lr": 0.0005, "batch_size": 2, "seed": 12}']) c
 WHERE a.name = 'small' ORDER BY c;
}, extra_params => [ '-U', $user ]);
}
is( $node->safe_psql('postgres',
		"SELECT string_agg(owner::text || ':' || n, ' ' ORDER BY owner::text) FROM "
		  . "(SELECT owner, count(*) AS n FROM pgdl.configs WHERE set_name = 'long' GROUP BY owner) s"),
	'alice:2 team:2',
	'the set name "long" is two sets, one per owner');

# md5 of the models a leaderboard table names, in configuration order.
sub weights
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(md5(m.weights), ' ' ORDER BY l.config) FROM $table l JOIN pgdl.models m ON m.id = l.model"
	);
}

# Who owns the rows run $run wrote: its row, metrics, checkpoints and models (type:count:owners).
sub run_rows_owned_by
{
	my ($run) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT string_agg(t || ':' || n || ':' || owners, ' ' ORDER BY t) FROM (
  SELECT t, count(*) AS n, string_agg(DISTINCT owner::text, ',') AS owners FROM (
    SELECT 'run' AS t, owner FROM pgdl.runs WHERE id = $run UNION ALL
    SELECT 'metrics', owner FROM pgdl.run_metrics WHERE run = $run UNION ALL
    SELECT 'checkpoints', owner FROM pgdl.checkpoints WHERE run = $run UNION ALL
    SELECT 'models', owner FROM pgdl.models WHERE run = $run) r GROUP BY t) s});
}

# alice's uninterrupted run, as herself, with two workers.
$node->safe_psql('postgres',
	"CREATE TABLE alice_lb AS SELECT * FROM pgdl.fit_multiple('alice_packed', 'long', $EPOCHS, workers => 2)",
	extra_params => [ '-U', 'alice' ]);
my $uninterrupted = weights('alice_lb');
like($uninterrupted, qr/^[0-9a-f]{32} [0-9a-f]{32}$/, 'an ordinary role runs fit_multiple with workers: 2 models');
my $alice_run = $node->safe_psql('postgres', 'SELECT DISTINCT m.run FROM alice_lb l JOIN pgdl.models m ON m.id = l.model');
is(run_rows_owned_by($alice_run),
	"checkpoints:$ROWS:alice metrics:$ROWS:alice models:2:alice run:1:alice",
	'every row of her run is hers, the workers\' metrics and checkpoints too');

# Starts a long run in the background as $user (after @pre) and waits for its
# first checkpoint; returns the psql handle and the run id.
sub start_long_run
{
	my ($app, $user, $owner, @pre) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM pgdl.runs');
	my $bg = start_psql($node, $app, $user, @pre,
		"SELECT count(*) FROM pgdl.fit_multiple('${owner}_packed', 'long', $EPOCHS, workers => 2)");
	ok(poll_until($node, "SELECT EXISTS (SELECT FROM pgdl.checkpoints WHERE run > $before)", 20),
		"$app: the run checkpoints its first epoch");
	my $run = $node->safe_psql('postgres', "SELECT max(run) FROM pgdl.checkpoints WHERE run > $before");
	return ($bg, $run);
}

sub cancel_run
{
	my ($app, $bg, $run) = @_;
	$node->safe_psql('postgres', "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = '$app'");
	my $rc = finish_psql($bg, 10);
	ok(defined $rc && $rc != 0, "$app: the cancelled run fails");
	ok(workers_gone_within($node, 5), "$app: its workers are gone");
	cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.checkpoints WHERE run = $run"),
		'<', 2 * $EPOCHS, "$app: the run stopped before its end");
}

# ---------------------------------------------------------------------------
# alice: cancelled, then resumed by herself; bob can do nothing to the run.
# ---------------------------------------------------------------------------
{
	my ($bg, $run) = start_long_run('own_alice', 'alice', 'alice');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.progress WHERE run = $run",
			extra_params => [ '-U', 'alice' ]),
		'2', 'alice sees her run in flight in pgdl.progress');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.progress WHERE run = $run",
			extra_params => [ '-U', 'bob' ]),
		'0', '... bob does not');
	cancel_run('own_alice', $bg, $run);

	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT count(*) FROM pgdl.resume($run)", extra_params => [ '-U', 'bob' ]);
	like($err, qr/run $run does not exist/, 'bob cannot resume her run: for him it does not exist');
	($ret, $out, $err) = $node->psql(
		'postgres',
		"INSERT INTO pgdl.checkpoints (run, config, epoch, weights) SELECT run, config, epoch + 1, weights "
		  . "FROM pgdl.checkpoints WHERE run = $run;"
		  . "INSERT INTO pgdl.checkpoints (owner, run, config, epoch, weights) VALUES ('alice', $run, 1, $EPOCHS, '\\x00')",
		extra_params => [ '-U', 'bob' ]);
	like($err, qr/new row violates row-level security policy for table "checkpoints"/,
		'bob cannot plant a checkpoint into her run');

	$node->safe_psql('postgres', "CREATE TABLE alice_resumed AS SELECT * FROM pgdl.resume($run)",
		extra_params => [ '-U', 'alice' ]);
	is(weights('alice_resumed'), $uninterrupted,
		'alice resumes her run: the models of the uninterrupted run, bit for bit');
	is(run_rows_owned_by($run),
		"checkpoints:$ROWS:alice metrics:$ROWS:alice models:2:alice run:1:alice",
		'every row of the resumed run is hers');
}

# ---------------------------------------------------------------------------
# team: carol runs it as team (SET ROLE), and resumes it as herself, a member of
# team: what the resumed run writes is still team's.
# ---------------------------------------------------------------------------
{
	my ($bg, $run) = start_long_run('own_team', 'carol', 'team', 'SET ROLE team');
	cancel_run('own_team', $bg, $run);
	is($node->safe_psql('postgres', "SELECT owner FROM pgdl.runs WHERE id = $run"), 'team', 'the run is team\'s');

	$node->safe_psql('postgres', "CREATE TABLE team_resumed AS SELECT * FROM pgdl.resume($run)",
		extra_params => [ '-U', 'carol' ]);
	is(weights('team_resumed'), $uninterrupted,
		'carol, a member of team, resumes its run: the models of the uninterrupted run, bit for bit');
	is(run_rows_owned_by($run),
		"checkpoints:$ROWS:team metrics:$ROWS:team models:2:team run:1:team",
		'every row of the run is team\'s, those carol\'s workers wrote too');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.run_metrics WHERE run = $run",
			extra_params => [ '-U', 'bob' ]),
		'0', 'bob sees none of it');
}

# ---------------------------------------------------------------------------
# Attacks (issue 32): bob, an ordinary role, against alice and the server.
# After each: bob is no superuser, no backend restarted, alice's rows are as
# they were, and nothing bob holds makes alice wait more than a second.
# ---------------------------------------------------------------------------
my $started = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $alice_rows_sql = q{
SELECT md5(string_agg(t || ':' || r, ',' ORDER BY t, r)) FROM (
  SELECT 'models' AS t, md5(m::text) AS r FROM pgdl.models m WHERE owner = 'alice'::regrole UNION ALL
  SELECT 'runs', md5(x::text) FROM pgdl.runs x WHERE owner = 'alice'::regrole UNION ALL
  SELECT 'architectures', md5(a::text) FROM pgdl.architectures a WHERE owner = 'alice'::regrole UNION ALL
  SELECT 'datasets', md5(d::text) FROM pgdl.datasets d WHERE owner = 'alice'::regrole UNION ALL
  SELECT 'configs', md5(c::text) FROM pgdl.configs c WHERE owner = 'alice'::regrole UNION ALL
  SELECT 'run_metrics', md5(count(*)::text) FROM pgdl.run_metrics WHERE owner = 'alice'::regrole UNION ALL
  SELECT 'checkpoints', md5(count(*)::text) FROM pgdl.checkpoints WHERE owner = 'alice'::regrole) s};
my $alice_rows = $node->safe_psql('postgres', $alice_rows_sql);

# Runs $sql as $user with verbose errors; returns (exit code, stdout, stderr).
sub as_role
{
	my ($user, $sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql", extra_params => [ '-U', $user ]);
	return ($ret, $out, $err);
}

sub nothing_gained
{
	my ($what) = @_;
	is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'bob'"), 'f',
		"$what: bob is no superuser");
	is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'), $started,
		"$what: the server did not restart");
	is($node->safe_psql('postgres', $alice_rows_sql), $alice_rows, "$what: alice's rows are as they were");
}

$node->safe_psql('postgres', q{
CREATE SCHEMA bobs AUTHORIZATION bob;
CREATE TABLE bobs.t (id bigint, parent bigint, run bigint, owner regrole, set_name text, architecture bigint,
                     config jsonb, reference bigint, staged_from bigint);
ALTER TABLE bobs.t OWNER TO bob;
INSERT INTO bobs.t (id, parent) VALUES (1, NULL), (2, 1);
});

# The reported hole: bob attaches pgdl.forget_deleted_rows() (SECURITY DEFINER) to his own table, behind
# a trigger of his that makes him superuser when it runs as the extension's owner.
{
	my ($ret, $out, $err) = as_role('bob', q{
CREATE FUNCTION bobs.evil() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN EXECUTE 'ALTER ROLE bob SUPERUSER'; RETURN NEW; END$$;
CREATE TRIGGER z_evil BEFORE UPDATE ON bobs.t FOR EACH ROW EXECUTE FUNCTION bobs.evil();
CREATE TRIGGER fd AFTER DELETE ON bobs.t REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('parent');});
	like($err, qr/ERROR:  42501: permission denied for function (pgdl\.)?forget_deleted_rows/,
		'bob cannot attach pgdl.forget_deleted_rows() to his table');
	as_role('bob', 'DELETE FROM bobs.t WHERE id = 1');
	nothing_gained('forget_deleted_rows on his table');
}

# The class: no trigger or event-trigger function of pgdl is PUBLIC's or bob's to execute, and each
# refuses to fire on any table but pgdl's own, also when a superuser attaches it by mistake.
my @trigger_functions = split /\n/, $node->safe_psql('postgres', q{
SELECT p.oid::regprocedure FROM pg_proc p
 WHERE p.pronamespace = 'pgdl'::regnamespace AND p.prorettype IN ('trigger'::regtype, 'event_trigger'::regtype)
 ORDER BY 1});
cmp_ok(scalar @trigger_functions, '>=', 8, 'pgdl has trigger functions to check: ' . join(' ', @trigger_functions));
for my $f (@trigger_functions)
{
	is( $node->safe_psql('postgres',
			"SELECT has_function_privilege('bob', '$f', 'EXECUTE') OR p.proacl IS NULL OR EXISTS "
			  . "(SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0) FROM pg_proc p WHERE p.oid = '$f'::regprocedure"),
		'f', "$f: neither PUBLIC nor bob may execute it (nor so attach it)");
	next if $node->safe_psql('postgres', "SELECT prorettype = 'event_trigger'::regtype FROM pg_proc WHERE oid = '$f'::regprocedure") eq 't';
	my %shapes = (
		'BEFORE INSERT OR UPDATE OR DELETE ... FOR EACH ROW' =>
		  "BEFORE INSERT OR UPDATE OR DELETE ON bobs.t FOR EACH ROW EXECUTE FUNCTION $f",
		'AFTER INSERT OR UPDATE OR DELETE ... FOR EACH ROW' =>
		  "AFTER INSERT OR UPDATE OR DELETE ON bobs.t FOR EACH ROW EXECUTE FUNCTION $f",
		'AFTER DELETE ... REFERENCING OLD TABLE AS gone FOR EACH STATEMENT' =>
		  "AFTER DELETE ON bobs.t REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION $f");
	for my $shape (sort keys %shapes)
	{
		my $fn = $shapes{$shape};
		$fn =~ s/\(\)$/('parent')/;
		$node->safe_psql('postgres', "CREATE TRIGGER planted $fn");
		my ($ret, $out, $err) = as_role('bob',
			"INSERT INTO bobs.t (id, parent, run, architecture) VALUES (3, 1, 1, 1); DELETE FROM bobs.t WHERE id = 3");
		like($err, qr/ERROR:  39P01: /, "$f, attached by a superuser $shape: refuses to fire on bob's table");
		$node->safe_psql('postgres', 'DROP TRIGGER planted ON bobs.t');
	}
}
nothing_gained('every trigger function on his table');

# No ordinary role can LOCK a catalog table in a mode that blocks others' reads or writes.
my @catalog = split /\n/, $node->safe_psql('postgres', q{
SELECT c.oid::regclass FROM pg_class c WHERE c.relnamespace = 'pgdl'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm')
 ORDER BY 1});
my @blocking = ('ROW SHARE', 'SHARE UPDATE EXCLUSIVE', 'SHARE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE');
for my $table (@catalog)
{
	my @taken = grep {
		my ($ret) = as_role('bob', "BEGIN; LOCK TABLE $table IN $_ MODE; COMMIT;");
		$ret == 0
	} @blocking;
	is("@taken", '', "bob cannot LOCK $table in a mode that blocks others (ROW SHARE and stronger)");
}
{
	# bob holds what he may: ROW EXCLUSIVE on every table he may insert into, ACCESS SHARE on the rest,
	# and row locks on his own rows; alice reads, writes and predicts within a second
	my $locks = join '', map { "LOCK TABLE $_ IN ROW EXCLUSIVE MODE NOWAIT;" } grep {
		$node->safe_psql('postgres', "SELECT has_table_privilege('bob', '$_', 'INSERT')") eq 't'
	} @catalog;
	my $bg = start_psql($node, 'bob_holds', 'bob', 'BEGIN', $locks,
		'SELECT count(*) FROM (SELECT id FROM pgdl.models FOR UPDATE) s', 'SELECT pg_sleep(60)');
	ok(poll_until($node, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'bob_holds' AND query LIKE '%pg_sleep%')", 20),
		'bob holds his locks');
	my $t0 = time;
	my ($ret, $out, $err) = $node->psql('postgres', q{
SET lock_timeout = '1s';
SELECT count(*) FROM pgdl.models;
SELECT pgdl.predict_class(id, array_fill(0.5::real, ARRAY[16])) IS NOT NULL FROM pgdl.models WHERE owner = 'alice'::regrole ORDER BY id LIMIT 1;
UPDATE pgdl.models SET name = name WHERE owner = 'alice'::regrole;
INSERT INTO pgdl.architectures (name, spec) SELECT 'attack_probe', spec FROM pgdl.architectures WHERE name = 'small';
SELECT pgdl.delete_rows('pgdl.architectures', ARRAY(SELECT id FROM pgdl.architectures WHERE name = 'attack_probe'));},
		extra_params => [ '-U', 'alice' ]);
	unlike($err, qr/lock timeout|canceling statement/, 'alice is not held up by bob\'s locks');
	cmp_ok(time - $t0, '<', 5, 'her statements end at once');
	$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bob_holds'");
	finish_psql($bg, 10);
	nothing_gained('locks');
}

# A row that points at an id another role owns is refused exactly as one pointing at no row.
{
	my %ids = (
		architecture => "SELECT min(id) FROM pgdl.architectures WHERE owner = 'alice'::regrole",
		dataset      => "SELECT min(id) FROM pgdl.datasets WHERE owner = 'alice'::regrole",
		run          => "SELECT min(id) FROM pgdl.runs WHERE owner = 'alice'::regrole");
	my $missing = $node->safe_psql('postgres', 'SELECT 1000000 + max(id) FROM pgdl.runs');
	my $spec = q{'{"input": [16], "layers": [{"type": "dense", "units": 4}]}'};
	for my $target ([ 'pgdl.models', 'spec, weights', "$spec, pgdl.init_model($spec)", [qw(architecture dataset run)] ],
		[ 'pgdl.runs', 'kind, config, epochs', q{'fit', '{}', 1}, [qw(architecture dataset)] ],
		[ 'pgdl.feature_cache', 'source, base_hash, depth, view, rows, bytes, source_version',
		  q{'pgdl.models', 'h', 1, 'pgdl.runs', 0, 0, 'v'}, [qw(dataset)] ])
	{
		my ($table, $cols, $vals, $refs) = @$target;
		for my $col (@$refs)
		{
			my $hers = $node->safe_psql('postgres', $ids{$col});
			my @errors = map {
				my $id = $_;
				my (undef, undef, $err) = as_role('bob', "INSERT INTO $table ($cols, $col) VALUES ($vals, $id)");
				$err =~ s/\b$id\b/<id>/g;
				$err =~ s/psql:<stdin>:\d+: //g;
				$err
			} ($hers, $missing);
			like($errors[1], qr/23503: insert or update on table "\w+" violates foreign key constraint/,
				"$table.$col = a missing id: the foreign key's error");
			is($errors[0], $errors[1], "$table.$col = alice's id: the very same error");
		}
	}
	nothing_gained('references');
}

# One role's row never makes another's query fail: bob's model with a spec and weights that do not parse,
# granted to PUBLIC, is refused when written, and the zoo answers alice, pgdl_admin and the superuser.
{
	my (undef, undef, $err) = as_role('bob',
		q{INSERT INTO pgdl.models (name, spec, weights, acl) VALUES ('f', '"x"', '\xdeadbeef', '{=U/bob}')});
	like($err, qr/ERROR:  22023: invalid model spec/, 'bob\'s model of an invalid spec is refused when written');
	$node->safe_psql('postgres', 'CREATE ROLE admin_member LOGIN IN ROLE pgdl_admin');
	for my $reader ('alice', 'admin_member', 'postgres')
	{
		my ($ret, $out, $zoo_err) = $node->psql('postgres', 'SELECT count(*) FROM pgdl.zoo', extra_params => [ '-U', $reader ]);
		is($ret, 0, "$reader reads pgdl.zoo") or diag($zoo_err);
	}
	nothing_gained('an invalid model');
}

# pgdl.job_rows() shows bob no other role's job, as pgdl.jobs does not.
{
	my ($bg, $run) = start_long_run('attack_alice', 'alice', 'alice');
	cmp_ok($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.job_rows()'), '>=', 1, 'alice\'s job is in the queue');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.job_rows()', extra_params => [ '-U', 'bob' ]),
		'0', 'bob does not see it through pgdl.job_rows()');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.jobs', extra_params => [ '-U', 'bob' ]),
		'0', '... nor through pgdl.jobs');
	cancel_run('attack_alice', $bg, $run);
	$alice_rows = $node->safe_psql('postgres', $alice_rows_sql);    # her cancelled run is hers to keep
}

# Every SECURITY DEFINER function, and every trigger function PUBLIC may execute, is argued in
# docs/security.md (the table after "<!-- argued functions -->"), and every function argued there exists.
{
	my $doc = slurp_file("$FindBin::RealBin/../../docs/security.md");
	my ($table) = $doc =~ /<!-- argued functions -->\n(.*?)\n\n/s;
	ok(defined $table, 'docs/security.md has the table of argued functions');
	my %argued = map { $_ => 1 } ($table // '') =~ /^\| `(pgdl\.[a-z_]+\([^)]*\))`/mg;
	my @definer = split /\n/, $node->safe_psql('postgres', q{
SELECT p.oid::regprocedure FROM pg_proc p
 WHERE p.pronamespace = 'pgdl'::regnamespace
   AND (p.prosecdef OR (p.prorettype IN ('trigger'::regtype, 'event_trigger'::regtype)
						AND (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))))
 ORDER BY 1});
	cmp_ok(scalar @definer, '>=', 4, 'pgdl has SECURITY DEFINER functions: ' . join(' ', @definer));
	ok($argued{$_}, "$_ is argued in docs/security.md") for @definer;
	for my $f (sort keys %argued)
	{
		is($node->safe_psql('postgres', "SELECT to_regprocedure('$f') IS NOT NULL"), 't', "the argued $f exists");
	}
}

$node->stop;
unlike(slurp_file($node->logfile), qr/PANIC|terminated by signal/, 'no backend crashed');

done_testing();
