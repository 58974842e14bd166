# Devices: the "device" configuration key, pgdl.device, fit_multiple's workers
# on devices, predict_batch and evaluate on a device, and the errors.
#
# CI has no GPU.  Without PGDL_FAKE_CUDA a build without CUDA must refuse
# "device": "cuda" clearly.  With PGDL_FAKE_CUDA in the server's environment
# the engine's fake device (CPU kernels behind the CUDA entry points) stands in
# for one: results equal the CPU's bit for bit, and its context line in the log
# says which process made it, and when.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use PgdlTest;

my $EPOCHS = 3;
my $MLP    = '{"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 25, "seed": 1}';

delete $ENV{PGDL_FAKE_CUDA};
my $node = PostgreSQL::Test::Cluster->new('devices');
$node->init;
$node->append_conf('postgresql.conf', "max_worker_processes = 16\n");
$node->start;

$node->safe_psql(
	'postgres', 'CREATE EXTENSION pgdl;' . points_sql() . q{
SELECT pgdl.pack('train_rows', 'x', 'label', 'train_packed', buffer_rows => 50, partitions => 2, seed => 7);
SELECT pgdl.pack('valid_rows', 'x', 'label', 'valid_packed', buffer_rows => 100, partitions => 1,
                 reference => 'train_packed');
});

# The SQLSTATE, message and detail of an error, or '' if there was none.
sub error_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nLOAD 'pgdl';\nSET client_min_messages = warning;\n$sql");
	return $ret == 0 ? '' : $err;
}

sub fit_sql
{
	my ($name, $config, $arch) = @_;
	$arch //= 'small';
	return "SELECT pgdl.fit('train_packed', '$arch', '$config', $EPOCHS, 'valid_packed', name => '$name')";
}

sub weights_md5
{
	my ($name) = @_;
	return $node->safe_psql('postgres', "SELECT md5(weights) FROM pgdl.models WHERE name = '$name'");
}

my $built_with_cuda = $node->safe_psql('postgres', 'SELECT pgdl.version()') =~ /cuda: yes/;

# ---------------------------------------------------------------------------
# No device: the setting, the keys, the listing, and the refusals.
# ---------------------------------------------------------------------------
is($node->safe_psql('postgres', "LOAD 'pgdl'; SHOW pgdl.device"), 'cpu', 'pgdl.device is cpu by default');
is($node->safe_psql('postgres', "LOAD 'pgdl'; SET pgdl.device = 'cuda:3'; SHOW pgdl.device"),
	'cuda:3', 'pgdl.device takes cuda:N');
like(error_of("SET pgdl.device = 'gpu'"),
	qr/22023: invalid value for parameter "pgdl.device": "gpu".*A device is "cpu", "cuda" or "cuda:N"/s,
	'pgdl.device refuses an unknown device');
like(error_of(q{SELECT pgdl.validate_config('{"device": "tpu"}')}),
	qr/22023: invalid training configuration at device.*Unknown device "tpu"/s,
	'"device" is validated with the other keys, and the error names it');
like(error_of(q{SELECT pgdl.validate_config('{"workers_per_device": 0}')}),
	qr/invalid training configuration at workers_per_device/, 'workers_per_device must be positive');
like(error_of(q{SELECT pgdl.validate_config('{"mixed_devices": "yes"}')}),
	qr/invalid training configuration at mixed_devices.*Expected true or false/s, 'mixed_devices is a boolean');
is( $node->safe_psql('postgres',
		q{SELECT pgdl.validate_config('{"device": "cuda:1", "mixed_devices": true, "workers_per_device": 2}')
		         @> '{"device": "cuda:1", "mixed_devices": true, "workers_per_device": 2}'
		     AND NOT pgdl.validate_config('{}') ? 'device'}),
	't', 'the canonical form keeps the device keys given, and adds none');

is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.cuda_devices()'), '0', 'no device listed');
unlike($node->safe_psql('postgres', 'SELECT pgdl.cuda_status()'), qr/^available/, 'cuda_status: none available');

my $no_cuda = $built_with_cuda ? qr/0A000: device "cuda" is not available.*DETAIL:  The CUDA backend says: no device/s
  : qr/0A000: device "cuda" is not available.*DETAIL:  The CUDA backend says: pgdl was built without CUDA support/s;
like(error_of(fit_sql('nope', '{"device": "cuda"}')), $no_cuda, '"device": "cuda" without CUDA: a clear error');
is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.runs"), '0', 'refused before any run began');
$node->safe_psql('postgres', fit_sql('m_cpu', $MLP));
$node->safe_psql('postgres', fit_sql('m_cpu_named', '{"device": "cpu", ' . substr($MLP, 1)));
is(weights_md5('m_cpu_named'), weights_md5('m_cpu'), '"device": "cpu" trains the same model as no device');
like(error_of("SET pgdl.device = 'cuda'; " . fit_sql('nope', $MLP)), $no_cuda, 'pgdl.device applies to pgdl.fit');
like(error_of("SET pgdl.device = 'cuda'; SELECT * FROM pgdl.evaluate('m_cpu', 'valid_packed')"),
	$no_cuda, 'pgdl.device applies to pgdl.evaluate');
like(error_of("SET pgdl.device = 'cuda'; SELECT count(*) FROM pgdl.predict_batch('m_cpu', 'points', 'i', 'x')"),
	$no_cuda, 'pgdl.device applies to pgdl.predict_batch');
is( $node->safe_psql('postgres',
		"LOAD 'pgdl'; SET pgdl.device = 'cuda'; SELECT pgdl.predict_class('m_cpu', x) IS NOT NULL FROM points WHERE i = 1"),
	't', 'per-row pgdl.predict_class stays on the CPU');
$node->safe_psql('postgres',
	qq{INSERT INTO pgdl.configs (set_name, architecture, config) SELECT 'gpu', id, '{"device": "cuda"}' FROM pgdl.architectures WHERE name = 'small'}
);
like(error_of("SELECT * FROM pgdl.fit_multiple('train_packed', 'gpu', 1, workers => 2)"),
	$no_cuda, 'fit_multiple: refused up front');

# ---------------------------------------------------------------------------
# The fake device.
# ---------------------------------------------------------------------------

# The pids of the fake context lines in the log since $offset.
sub context_pids
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	return [ $log =~ /pgdl: fake CUDA device \d+ initialized in process (\d+)/g ];
}

sub restart_with
{
	my ($fake) = @_;
	$ENV{PGDL_FAKE_CUDA} = $fake;
	$node->restart;
	delete $ENV{PGDL_FAKE_CUDA};
}

restart_with('1');
{
	is($node->safe_psql('postgres', 'SELECT count(*) FROM pgdl.cuda_devices()'), '1', 'every build answers the fake device');

	my $offset = -s $node->logfile;
	my $postmaster = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
	is($node->safe_psql('postgres', 'SELECT device || \' \' || name FROM pgdl.cuda_devices()'),
		'cuda:0 pgdl fake CUDA device (PGDL_FAKE_CUDA)', 'the fake device is listed');
	like($node->safe_psql('postgres', 'SELECT pgdl.cuda_status()'),
		qr/^available: cuda:0 pgdl fake CUDA device/, 'cuda_status lists it');
	is(scalar @{ context_pids($offset) }, 0, 'listing the devices made no context (lazy)');

	# pgdl.fit on the device: the CPU's bytes
	$node->safe_psql('postgres', fit_sql('m_cuda', '{"device": "cuda", ' . substr($MLP, 1)));
	is(weights_md5('m_cuda'), weights_md5('m_cpu'), 'pgdl.fit on the device stores the CPU\'s model, byte for byte');
	$node->safe_psql('postgres', "LOAD 'pgdl'; SET pgdl.device = 'cuda:0'; " . fit_sql('m_guc', $MLP));
	is(weights_md5('m_guc'), weights_md5('m_cpu'), 'pgdl.device = cuda:0: the same model');
	my $pids = context_pids($offset);
	ok(@$pids >= 2, 'each training backend made a context');
	ok(!grep({ $_ == $postmaster } @$pids), 'never in the postmaster');

	# predict_batch and evaluate on the device
	for my $q ("SELECT md5(string_agg(id || ':' || class || ':' || probability, ',' ORDER BY id)) FROM pgdl.predict_batch('m_cpu', 'points', 'i', 'x', 64)",
		"SELECT loss || ' ' || accuracy || ' ' || n FROM pgdl.evaluate('m_cpu', 'valid_packed')")
	{
		my $cpu = $node->safe_psql('postgres', $q);
		my $off = -s $node->logfile;
		is($node->safe_psql('postgres', "LOAD 'pgdl'; SET pgdl.device = 'cuda'; $q"), $cpu, "on the device, as on the CPU: $q");
		is(scalar @{ context_pids($off) }, 1, 'and it ran there');
	}

	# fit_multiple: 2 workers, each on the device (round robin over one), as pgdl.fit
	$node->safe_psql('postgres',
		qq{INSERT INTO pgdl.configs (set_name, architecture, config)
		   SELECT 'pair', a.id, c::jsonb FROM pgdl.architectures a,
		     unnest(ARRAY['$MLP', '{"optimizer": "adam", "lr": 0.005, "batch_size": 50, "seed": 3}']) c
		    WHERE a.name = 'small' ORDER BY c;
		   SET client_min_messages = warning;
		   CREATE TABLE lb_fit AS SELECT c.id AS config, pgdl.fit('train_packed', 'small', c.config, $EPOCHS, 'valid_packed') AS model
		     FROM pgdl.configs c WHERE c.set_name = 'pair' ORDER BY c.id;});
	$offset = -s $node->logfile;
	$node->safe_psql('postgres',
		"LOAD 'pgdl'; SET pgdl.device = 'cuda'; CREATE TABLE lb_gpu AS SELECT * FROM pgdl.fit_multiple('train_packed', 'pair', $EPOCHS, 'valid_packed', workers => 2)"
	);
	is(model_digests($node, 'lb_gpu'), model_digests($node, 'lb_fit'),
		'fit_multiple with 2 workers on the device: pgdl.fit\'s models, bit for bit');
	$pids = context_pids($offset);
	is(scalar @$pids, 2, 'one context per worker');
	ok(!grep({ $_ == $postmaster } @$pids), 'none in the postmaster');

	# a plan that mixes devices is refused unless the configurations allow it
	$node->safe_psql('postgres',
		q{INSERT INTO pgdl.configs (set_name, architecture, config) SELECT 'half', id, '{"device": "cuda", "workers_per_device": 1}' FROM pgdl.architectures WHERE name = 'small';
		  INSERT INTO pgdl.configs (set_name, architecture, config) SELECT 'mixed', id, '{"device": "cuda", "workers_per_device": 1, "mixed_devices": true}' FROM pgdl.architectures WHERE name = 'small'}
	);
	like(error_of("SELECT * FROM pgdl.fit_multiple('train_packed', 'half', 1, workers => 2)"),
		qr/22023: this run would train configuration 1 on both a GPU and the CPU.*1 of 2 workers/s,
		'a GPU worker and a CPU worker: refused up front');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pgdl.fit_multiple('train_packed', 'mixed', 1, workers => 2)"),
		'1', '"mixed_devices": true allows it');

	# no such device: the error names those there are
	like(error_of(fit_sql('nope', '{"device": "cuda:7"}')),
		qr/42704: device "cuda:7" does not exist.*This server sees 1 CUDA device: cuda:0 \(pgdl fake CUDA device/s,
		'cuda:7: names the devices that exist');
	like(error_of("SET pgdl.device = 'cuda:7'; SELECT * FROM pgdl.fit_multiple('train_packed', 'pair', 1, workers => 2)"),
		qr/42704: device "cuda:7" does not exist/, 'fit_multiple too, up front');

	# busy: the context cannot be made
	restart_with('busy');
	like(error_of(fit_sql('nope', '{"device": "cuda"}')),
		qr/55006: could not start device "cuda".*DETAIL:  The CUDA backend says: \S/s, 'a busy device: the reason');

	# a small device: refused before any context, with both sizes
	restart_with('mem=65536');
	$offset = -s $node->logfile;
	like(error_of(fit_sql('nope', '{"device": "cuda"}', 'wide')),
		qr/53000: the model does not fit on device "cuda".*It needs [\d.]+ MB .* has [\d.]+ MB free of [\d.]+ MB/s,
		'a model too large for the device: refused up front, with both sizes');
	is(scalar @{ context_pids($offset) }, 0, 'before any context was made');

	restart_with('devices=2');
	is($node->safe_psql('postgres', 'SELECT string_agg(device, \',\' ORDER BY ordinal) FROM pgdl.cuda_devices()'),
		'cuda:0,cuda:1', 'two fake devices listed');
	$offset = -s $node->logfile;
	$node->safe_psql('postgres',
		"LOAD 'pgdl'; SET pgdl.device = 'cuda'; CREATE TABLE lb_two AS SELECT * FROM pgdl.fit_multiple('train_packed', 'pair', $EPOCHS, 'valid_packed', workers => 2)"
	);
	is(model_digests($node, 'lb_two'), model_digests($node, 'lb_fit'), 'workers on two devices: the same models');
	is( join(',', sort(slurp_file($node->logfile, $offset) =~ /fake CUDA device (\d+) initialized/g)),
		'0,1', 'the workers went round robin over the devices');
}

$node->stop;
done_testing();
