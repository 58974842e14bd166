/*
 * devices.c -- where a model trains or predicts: the CPU or a CUDA device.
 *
 * A device is named "cpu", "cuda" (this process's CUDA device: cuda:0 for a
 * backend, the assigned one for a pgdl.fit_multiple worker) or "cuda:N".  A
 * configuration's "device" key says where it trains; without one, the
 * pgdl.device setting does.  A model moves there after its optimizer and
 * workspace are set (nn_model_use_backend), so everything is allocated on the
 * device once.  Listing the devices creates no CUDA context: the context is
 * created lazily, by the first model moved, in the process that trains (never
 * in the postmaster, whose children could not use it after fork).
 */
#include "postgres.h"

#include <errno.h>
#include <limits.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "backend.h"
#include "cuda/cuda_backend.h"
#include "base/base.h"

/*
 * Device names, a configuration's "device" key and pgdl.device's values (what
 * each means at run time is devices.c's).  The fuzzed
 * configuration reader links them alone (regress/fuzz).
 */
bool
pgdl_device_parse(const char *name, int32 *device)
{
	char	   *end;
	long		n;

	if (name == NULL)
		return false;
	if (strcmp(name, "cpu") == 0)
		*device = PGDL_DEVICE_CPU;
	else if (strcmp(name, "cuda") == 0)
		*device = PGDL_DEVICE_CUDA;
	else if (strncmp(name, "cuda:", 5) == 0 && name[5] >= '0' && name[5] <= '9')
	{
		errno = 0;
		n = strtol(name + 5, &end, 10);
		if (*end != '\0' || errno != 0 || n > PGDL_MAX_DEVICES - 1)
			return false;
		*device = PGDL_DEVICE_CUDA_N((int32) n);
	}
	else
		return false;
	return true;
}

char *
pgdl_device_name(int32 device)
{
	if (device == PGDL_DEVICE_CPU || device == PGDL_DEVICE_UNSET)
		return pstrdup("cpu");
	if (device == PGDL_DEVICE_CUDA)
		return pstrdup("cuda");
	return psprintf("cuda:%d", PGDL_DEVICE_ORDINAL(device));
}

char	   *pgdl_device_setting = NULL;

/* A device name, whether or not this server has the device: that is checked where a model moves. */
static bool
check_device(char **newval, void **extra, GucSource source)
{
	int32		device;

	if (pgdl_device_parse(*newval, &device))
		return true;
	GUC_check_errdetail("A device is \"cpu\", \"cuda\" or \"cuda:N\" (N from 0 to %d).", PGDL_MAX_DEVICES - 1);
	return false;
}

void
pgdl_devices_init(void)
{
	DefineCustomStringVariable("pgdl.device",
							   "Where models train and predict_batch and evaluate run when a configuration or argument does not say: cpu, cuda or cuda:N.",
							   "No CUDA context is made until a model moves to the device, in the process that trains it.",
							   &pgdl_device_setting,
							   "cpu",
							   PGC_USERSET,
							   0,
							   check_device, NULL, NULL);
}

/* A fit_multiple worker's device, which overrides configurations and pgdl.device; UNSET elsewhere. */
static int32 process_device = PGDL_DEVICE_UNSET;

void
pgdl_device_assign_process(int32 device)
{
	process_device = device;
}

int32
pgdl_device_for(const PgdlTrainConfig *config)
{
	int32		device = PGDL_DEVICE_CPU;

	if (process_device != PGDL_DEVICE_UNSET)
		return process_device;
	if (config != NULL && config->device != PGDL_DEVICE_UNSET)
		return config->device;
	if (!pgdl_device_parse(pgdl_device_setting, &device))
		device = PGDL_DEVICE_CPU;	/* the check hook let nothing else in */
	return device;
}

/* "cuda:0 (NAME), cuda:1 (NAME)", or "none" */
static char *
device_list_text(const NnCudaDevice *devs, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%scuda:%d (%s)", i ? ", " : "", devs[i].ordinal, devs[i].name);
	if (n == 0)
		appendStringInfoString(&buf, "none");
	return buf.data;
}

/*
 * The visible devices into devs[PGDL_MAX_DEVICES]; how many.  An error naming
 * `device` when there are none (no CUDA in this build, no driver, no GPU).
 */
static int
list_devices(NnCudaDevice *devs, int *driver, const char *device)
{
	char		reason[256] = "";
	int			n = nn_cuda_devices(devs, PGDL_MAX_DEVICES, driver, reason, sizeof(reason));

	if (n <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("device \"%s\" is not available", device),
				 errdetail("The CUDA backend says: %s.", reason[0] ? reason : "no device is visible"),
				 errhint("Use \"device\": \"cpu\", or SET pgdl.device = 'cpu'.")));
	return Min(n, PGDL_MAX_DEVICES);
}

/* The device of ordinal `ordinal` among devs, or an error that names the ones there are. */
static const NnCudaDevice *
find_device(const NnCudaDevice *devs, int n, int ordinal, const char *device)
{
	for (int i = 0; i < n; i++)
		if (devs[i].ordinal == ordinal)
			return &devs[i];
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("device \"%s\" does not exist", device),
			 errdetail("This server sees %d CUDA device%s: %s.", n, n == 1 ? "" : "s", device_list_text(devs, n))));
	return NULL;				/* not reached */
}

static char *
megabytes(int64 bytes)
{
	return psprintf("%.1f MB", (double) bytes / (1024.0 * 1024.0));
}

/* Refused up front: the model of spec (optimizer optim, NULL: none) and the workspace for batch examples (0: none) must fit on dev. */
static void
check_fits(const NnSpec *spec, const NnOptim *optim, int32 batch, const NnCudaDevice *dev, const char *device)
{
	NnMemory	mem;
	NnError		err;

	if (!nn_spec_memory(spec, optim, batch, &mem, &err))
		pgdl_report_nn_error("model spec", &err);
	if (mem.total > 0 && (uint64) mem.total > (uint64) dev->free_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("the model does not fit on device \"%s\"", device),
				 errdetail("It needs %s (parameters, gradients and optimizer state %s, workspace for a batch of %d %s); "
						   "%s has %s free of %s.",
						   megabytes(mem.total), megabytes(mem.model + mem.optim), batch, megabytes(mem.workspace),
						   dev->name, megabytes((int64) dev->free_bytes), megabytes((int64) dev->total_bytes)),
				 errhint("Use a smaller batch_size or model, or \"device\": \"cpu\".")));
}

/* The ordinal a device means in this process. */
static int
device_ordinal(int32 device)
{
	return device == PGDL_DEVICE_CUDA ? 0 : PGDL_DEVICE_ORDINAL(device);
}

void
pgdl_device_check_plan(const NnSpec *spec, const NnOptim *optim, int32 batch, int32 device)
{
	NnCudaDevice devs[PGDL_MAX_DEVICES];
	int			driver;
	int			n;
	char	   *name;

	if (device == PGDL_DEVICE_CPU || device == PGDL_DEVICE_UNSET)
		return;
	name = pgdl_device_name(device);
	n = list_devices(devs, &driver, name);
	check_fits(spec, optim, batch, find_device(devs, n, device_ordinal(device), name), name);
}

void
pgdl_device_move(NnModel *m, int32 device, const NnOptim *optim, int32 batch)
{
	NnCudaDevice devs[PGDL_MAX_DEVICES];
	const NnCudaDevice *dev;
	const NnBackend *be;
	char		reason[256] = "";
	int			driver;
	int			n;
	char	   *name;
	NnError		err;

	if (device == PGDL_DEVICE_CPU || device == PGDL_DEVICE_UNSET)
		return;
	name = pgdl_device_name(device);
	n = list_devices(devs, &driver, name);
	dev = find_device(devs, n, device_ordinal(device), name);
	check_fits(&m->spec, optim, batch, dev, name);
	if (batch > 0 && !nn_model_reserve(m, batch, &err))
		pgdl_report_nn_error("training configuration", &err);
	be = nn_backend_cuda_on(dev->ordinal, reason, sizeof(reason));
	if (be == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("could not start device \"%s\"", name),
				 errdetail("The CUDA backend says: %s.", reason[0] ? reason : "no reason given"),
				 errhint("Another process may hold the device exclusively; see nvidia-smi.")));
	if (!nn_model_use_backend(m, be, &err))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not move the model onto device \"%s\"", name),
				 errdetail("The engine says: %s.", err.msg)));
}

void
pgdl_device_check_errors(void)
{
	const char *failure = nn_cuda_last_error();

	if (failure != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYSTEM_ERROR),
				 errmsg("the CUDA device failed"),
				 errdetail("%s.", failure)));
}

/* ---- fit_multiple: the workers' devices ---- */

/* The run's device and workers per device: the configurations' keys, which must agree. */
static void
run_device(const PgdlTrainConfig *const *configs, int n, int32 *device, int32 *per_device)
{
	int			from = -1;

	*device = PGDL_DEVICE_UNSET;
	*per_device = 0;
	for (int i = 0; i < n; i++)
	{
		if (configs[i]->threads > 1)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("pgdl.fit_multiple does not take \"threads\": a configuration asks for %d",
							configs[i]->threads),
					 errdetail("Its workers train one model each on one core; \"threads\" is pgdl.fit's."),
					 errhint("Remove \"threads\" and give fit_multiple more workers.")));
		if (configs[i]->device != PGDL_DEVICE_UNSET)
		{
			if (*device != PGDL_DEVICE_UNSET && configs[i]->device != *device)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("configurations of one run name different devices: \"%s\" and \"%s\"",
								pgdl_device_name(*device), pgdl_device_name(configs[i]->device)),
						 errdetail("Workers, not configurations, hold devices in pgdl.fit_multiple; "
								   "\"device\" says which devices the run's workers use."),
						 errhint("Give every configuration the same \"device\", or none and SET pgdl.device.")));
			*device = configs[i]->device;
		}
		if (configs[i]->workers_per_device > 0)
		{
			if (from >= 0 && configs[i]->workers_per_device != *per_device)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("configurations of one run give different workers_per_device: %d and %d",
								*per_device, configs[i]->workers_per_device)));
			*per_device = configs[i]->workers_per_device;
			from = i;
		}
	}
	if (*device == PGDL_DEVICE_UNSET)
		*device = pgdl_device_for(NULL);
}

void
pgdl_device_plan(const PgdlTrainConfig *const *configs, const NnSpec *const *specs, int n,
				 int n_workers, int32 *worker_device)
{
	NnCudaDevice devs[PGDL_MAX_DEVICES];
	int32		device;
	int32		per_device;
	int			n_devs = 1;
	int			driver;
	int			gpu_workers;
	char	   *name;

	run_device(configs, n, &device, &per_device);
	for (int w = 0; w < n_workers; w++)
		worker_device[w] = PGDL_DEVICE_CPU;
	if (device == PGDL_DEVICE_CPU)
		return;
	name = pgdl_device_name(device);
	n_devs = list_devices(devs, &driver, name);
	if (device != PGDL_DEVICE_CUDA)
	{
		/* one named device: every GPU worker on it */
		devs[0] = *find_device(devs, n_devs, PGDL_DEVICE_ORDINAL(device), name);
		n_devs = 1;
	}
	gpu_workers = per_device > 0 ? Min(n_workers, per_device * n_devs) : n_workers;
	for (int w = 0; w < gpu_workers; w++)
		worker_device[w] = PGDL_DEVICE_CUDA_N(devs[w % n_devs].ordinal);

	/* a model hops between every worker: a plan with CPU workers too mixes devices */
	for (int i = 0; i < n; i++)
	{
		if (gpu_workers < n_workers && !configs[i]->mixed_devices)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("this run would train configuration %d on both a GPU and the CPU", i + 1),
					 errdetail("%d of %d workers have a CUDA device (workers_per_device %d, %d device%s); models hop between all of them, "
							   "and a model trained on two kinds of device differs, within rounding, from one trained on either.",
							   gpu_workers, n_workers, per_device, n_devs, n_devs == 1 ? "" : "s"),
					 errhint("Add \"mixed_devices\": true to the configurations to allow it, or run %d workers.", gpu_workers)));
		for (int d = 0; d < Min(n_devs, gpu_workers); d++)
		{
			char	   *dname = psprintf("cuda:%d", devs[d].ordinal);

			check_fits(specs[i], &configs[i]->optim, configs[i]->batch_size, &devs[d], dname);
		}
	}
}

/* ---- SQL ---- */

/* "available: cuda:0 NAME (compute M.m, T MB, F MB free), ...; driver X.Y", or why not: no context made. */
PG_FUNCTION_INFO_V1(pgdl_cuda_status);
Datum
pgdl_cuda_status(PG_FUNCTION_ARGS)
{
	NnCudaDevice devs[PGDL_MAX_DEVICES];
	char		reason[256] = "";
	int			driver = 0;
	int			n;
	StringInfoData buf;

	pgdl_engine_prepare();
	n = nn_cuda_devices(devs, PGDL_MAX_DEVICES, &driver, reason, sizeof(reason));
	if (n <= 0)
		PG_RETURN_TEXT_P(cstring_to_text(reason[0] ? reason : "no device: none visible"));
	initStringInfo(&buf);
	appendStringInfoString(&buf, "available: ");
	for (int i = 0; i < Min(n, PGDL_MAX_DEVICES); i++)
		appendStringInfo(&buf, "%scuda:%d %s (compute %d.%d, %.0f MB, %.0f MB free)", i ? ", " : "",
						 devs[i].ordinal, devs[i].name, devs[i].major, devs[i].minor,
						 devs[i].total_bytes / 1048576.0, devs[i].free_bytes / 1048576.0);
	appendStringInfo(&buf, "; driver %d.%d", driver / 1000, (driver % 1000) / 10);
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

/* pgdl.cuda_devices(): a row per visible device; none without CUDA.  Creates no context. */
PG_FUNCTION_INFO_V1(pgdl_cuda_devices);
Datum
pgdl_cuda_devices(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NnCudaDevice devs[PGDL_MAX_DEVICES];
	char		reason[256] = "";
	int			driver = 0;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	pgdl_engine_prepare();
	n = nn_cuda_devices(devs, PGDL_MAX_DEVICES, &driver, reason, sizeof(reason));
	for (int i = 0; i < Min(n, PGDL_MAX_DEVICES); i++)
	{
		Datum		values[7];
		bool		nulls[7] = {0};

		values[0] = Int32GetDatum(devs[i].ordinal);
		values[1] = CStringGetTextDatum(psprintf("cuda:%d", devs[i].ordinal));
		values[2] = CStringGetTextDatum(devs[i].name);
		values[3] = CStringGetTextDatum(psprintf("%d.%d", devs[i].major, devs[i].minor));
		values[4] = Float8GetDatum(devs[i].total_bytes / 1048576.0);
		values[5] = Float8GetDatum(devs[i].free_bytes / 1048576.0);
		values[6] = CStringGetTextDatum(psprintf("%d.%d", driver / 1000, (driver % 1000) / 10));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
