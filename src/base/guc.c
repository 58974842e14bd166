/*
 * guc.c -- pgdl.* settings.
 *
 * Settings only record values here; pgdl_engine_prepare() applies them to the
 * engine in the backend that uses it, never in the postmaster.  A subsystem's
 * own settings are defined by its init (pgdl.device: devices.c,
 * pgdl.keep_checkpoints: lifecycle.c), which _PG_init calls before this one
 * reserves the prefix.
 */
#include "postgres.h"

#include <limits.h>
#include <unistd.h>

#include "utils/guc.h"

#include "backend.h"
#include "base/base.h"

int			pgdl_blas_threads = 1;
int			pgdl_train_cache_mem = 256 * 1024;	/* kB */
int			pgdl_max_workers = 2;
int			pgdl_max_fit_threads = 2;
int			pgdl_worker_cache_mem = 512 * 1024; /* kB */
int			pgdl_node_cache_mem = 0;	/* kB */
int			pgdl_feature_cache_budget = 4 * 1024 * 1024;	/* kB */
double		pgdl_cpu_gflops = 40.0;
int			pgdl_progress_interval = 5; /* s */
int			pgdl_max_model_memory = 1024 * 1024;	/* kB */
double		pgdl_node_deadline_multiple = 10.0;
int			pgdl_node_deadline_floor = 60;	/* s */
bool		pgdl_fuse_models = true;
int			pgdl_cpu_isa = PGDL_CPU_ISA_AUTO;

/* pgdl.cpu_isa's values: the ISA of pgdl's own vector kernels, capped; "auto": the CPU's best */
static const struct config_enum_entry cpu_isa_options[] = {
	{"auto", PGDL_CPU_ISA_AUTO, false},
	{"avx512", NN_ISA_AVX512, false},
	{"avx2", NN_ISA_AVX2, false},
	{"baseline", NN_ISA_BASELINE, false},
	{NULL, 0, false}
};

/* Threads and workers: BLAS threads per process, pgdl's workers, a fit's threads. */
static void
define_thread_settings(void)
{
	DefineCustomIntVariable("pgdl.blas_threads",
							"Threads each backend's BLAS calls may use.",
							"Takes effect at the next pgdl call in the session. "
							"Parallel workers and pgdl's own workers each use this many.",
							&pgdl_blas_threads,
							1, 1, 64,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	/* one worker per core by default: a worker is one BLAS thread */
	{
		long		cores = sysconf(_SC_NPROCESSORS_ONLN);

		pgdl_max_workers = cores < 1 ? 1 : (cores > 64 ? 64 : (int) cores);
	}
	DefineCustomIntVariable("pgdl.max_workers",
							"pgdl workers that train at once on this server, all jobs together; also a job's workers when not told how many.",
							"Defaults to the number of cores; each worker also needs a slot of max_worker_processes. "
							"Jobs that find none free wait in a queue (pgdl.jobs).",
							&pgdl_max_workers,
							pgdl_max_workers, 1, 64,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
	/* the same default: a fit's threads are cores, as workers are */
	pgdl_max_fit_threads = pgdl_max_workers;
	DefineCustomIntVariable("pgdl.max_fit_threads",
							"Most threads one pgdl.fit may train with (its configuration's \"threads\").",
							"Defaults to the number of cores; a configuration asking for more is refused. "
							"Only superusers may raise it.",
							&pgdl_max_fit_threads,
							pgdl_max_fit_threads, 1, 64,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);
}

/* Memory: the caches of packed buffers and features, and the most one model may take. */
static void
define_memory_settings(void)
{
	DefineCustomIntVariable("pgdl.train_cache_mem",
							"Memory a training run may use to keep packed buffers between epochs.",
							"pgdl.fit reads each buffer from its table in the first epoch and keeps "
							"it in memory for later epochs while this budget allows; 0 reads every epoch.",
							&pgdl_train_cache_mem,
							256 * 1024, 0, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgdl.worker_cache_mem",
							"Memory each pgdl.fit_multiple worker may use to keep its partitions' buffers.",
							"Buffers beyond it are read from the packed table at every visit.",
							&pgdl_worker_cache_mem,
							512 * 1024, 0, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgdl.node_cache_mem",
							"Memory a session may use to keep the partitions pgdl.train_partitions reads, between its calls.",
							"A coordinator's worker sets it on its session on a node to its pgdl.worker_cache_mem, so that "
							"the node reads each partition once per run, as a worker on one server does; 0 reads them at every call.",
							&pgdl_node_cache_mem,
							0, 0, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	DefineCustomIntVariable("pgdl.feature_cache_budget",
							"Storage all feature caches (materialized views in schema pgdl_cache) may take together.",
							"pgdl.fit_multiple recomputes a frozen prefix rather than cache its features beyond it; "
							"0 never caches.",
							&pgdl_feature_cache_budget,
							4 * 1024 * 1024, 0, MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	/*
	 * A guard for a shared server, so a superuser's: each model lives in one
	 * backend or worker, and a user who could raise the limit could take the
	 * server's memory.  1 GB by default, as large as a stored model may be
	 * (a bytea); GRANT SET ON PARAMETER lets a role raise it.
	 */
	DefineCustomIntVariable("pgdl.max_model_memory",
							"Memory one model may take: parameters, gradients, optimizer state and the workspace for a batch.",
							"A model, or a batch for it, that would take more is refused before anything is allocated.",
							&pgdl_max_model_memory,
							1024 * 1024, 64, MAX_KILOBYTES,
							PGC_SUSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
}

/*
 * An ISA this CPU lacks is refused rather than lowered to the best it has:
 * the setting is there to run, test and reproduce one path, and a run on
 * another one would record bytes of a path nobody asked for.
 */
static bool
check_cpu_isa(int *newval, void **extra, GucSource source)
{
	NnCpuIsa	best = nn_cpu_isa_detected();

	if (*newval == PGDL_CPU_ISA_AUTO || *newval <= (int) best)
		return true;
	GUC_check_errmsg("this CPU has no %s", nn_cpu_isa_name((NnCpuIsa) *newval));
	GUC_check_errdetail("The best instruction set pgdl's kernels can use on this CPU is %s.", nn_cpu_isa_name(best));
	GUC_check_errhint("Set pgdl.cpu_isa to auto, or to an instruction set at or below that one.");
	return false;
}

/* Speed: how fast plans take a CPU worker to be (pgdl.device is devices.c's), and the kernels' ISA. */
static void
define_speed_settings(void)
{
	DefineCustomEnumVariable("pgdl.cpu_isa",
							 "Highest instruction set pgdl's own CPU kernels use: auto, avx512, avx2 or baseline.",
							 "auto uses the best the CPU has; a lower one runs the kernels written for it, with the same values. "
							 "BLAS chooses its own kernels. Runs and models record the instruction set that trained them.",
							 &pgdl_cpu_isa,
							 PGDL_CPU_ISA_AUTO,
							 cpu_isa_options,
							 PGC_USERSET,
							 0,
							 check_cpu_isa, NULL, NULL);

	DefineCustomRealVariable("pgdl.cpu_gflops",
							 "Billions of floating-point operations per second one worker runs, for plans.",
							 "The feature cache planner, and pgdl.estimate and pgdl.explain_fit_multiple on a server without a profile (pgdl.calibrate), turn FLOPs into seconds with it.",
							 &pgdl_cpu_gflops,
							 40.0, 0.001, 1e6,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	/* off trains each configuration as a unit of its own: the same bytes, for comparisons */
	DefineCustomBoolVariable("pgdl.fuse_models",
							 "Whether pgdl.fit_multiple trains configurations that share architecture, batch size and seed as one fused unit.",
							 "A fused unit hops as one model and makes one pass over each partition's buffers, stepping each member on them; "
							 "every member ends with the bytes it has trained alone.",
							 &pgdl_fuse_models,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/*
 * Nodes: how long a visit on a node may take before the node is fenced.  The
 * floor covers a node's first visit of a partition (it reads it then) and a
 * loaded machine; the multiple, a model whose prediction is long.
 */
static void
define_node_settings(void)
{
	DefineCustomRealVariable("pgdl.node_deadline_multiple",
							 "A visit on a node is given this many times its predicted time before the node is fenced.",
							 "The prediction is the larger of the calibrated estimate and the model's measured visits so far; "
							 "the deadline is never below pgdl.node_deadline_floor. 0 sets no deadline.",
							 &pgdl_node_deadline_multiple,
							 10.0, 0.0, 1e6,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("pgdl.node_deadline_floor",
							"The shortest deadline of a visit on a node.",
							"A node that has not answered a visit within its deadline is fenced: its query is cancelled "
							"and its connection closed, so that a late answer is never read.",
							&pgdl_node_deadline_floor,
							60, 1, INT_MAX / 1000,
							PGC_USERSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

/* Messages: how often pgdl.fit reports an epoch. */
static void
define_message_settings(void)
{
	DefineCustomIntVariable("pgdl.progress_interval",
							"Least time between two of pgdl.fit's per-epoch progress NOTICEs.",
							"The last epoch is always reported; 0 reports every epoch, -1 none. "
							"Divergence warnings and early stopping are reported whatever the setting.",
							&pgdl_progress_interval,
							5, -1, INT_MAX / 1000,
							PGC_USERSET,
							GUC_UNIT_S,
							NULL, NULL, NULL);
}

void
pgdl_guc_init(void)
{
	define_thread_settings();
	define_memory_settings();
	define_speed_settings();
	define_node_settings();
	define_message_settings();
	MarkGUCPrefixReserved("pgdl");
}
