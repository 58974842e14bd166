/*
 * call_progress.c -- pgdl.progress for the calls that run in one backend:
 * pgdl.fit, pgdl.pack, pgdl.distribute and feature cache builds.
 *
 * Such a call publishes where it stands in its backend's progress slots of
 * PgBackendStatus (st_progress_param, which CREATE INDEX or VACUUM fill for the
 * pg_stat_progress_* views), with no progress command set: those views ignore
 * the slots, and nothing needs shared_preload_libraries.  Another backend reads
 * them with pgstat_fetch_stat_local_beentry, as pg_stat_get_progress_info does.
 *
 * Slot 0 holds a marker, so that slots another command left behind are not
 * read as ours; slot 1 the start of the statement the call runs in, so that
 * slots an ended call left behind (an error, a FATAL) show nothing once the
 * backend runs another statement or idles.  A command of PostgreSQL's own that
 * a call runs (COPY, CREATE INDEX, ANALYZE) zeroes the slots while it runs and
 * leaves its values: every update writes every slot again, and none is
 * written while such a command owns them.  The slots are cleared when the call
 * ends and when its transaction or subtransaction aborts.
 *
 * Calls do not nest in the view: a call made inside another (a cache build
 * inside a pack's source query) leaves the slots to the outer one.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/acl.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/timestamp.h"

#include "base/base.h"

/* "pgdl" and a layout version */
#define CALL_MARKER		INT64CONST(0x7067646c00000001)

enum
{
	SLOT_MARKER,
	SLOT_STATEMENT,				/* st_activity_start_timestamp when the call began */
	SLOT_KIND,
	SLOT_PHASE,
	SLOT_TARGET,				/* a relation's oid, or 0 */
	SLOT_RUN,
	SLOT_CONFIG,
	SLOT_EPOCH,
	SLOT_EPOCHS,
	SLOT_DONE,
	SLOT_TOTAL,					/* -1: unknown */
	SLOT_RATE,					/* float8 bits: examples per second; NaN: none */
	SLOT_SECONDS_LEFT,			/* float8 bits: of the whole call; NaN: no estimate yet */
	SLOT_LOSS,					/* float8 bits: the last epoch's training loss; NaN: none yet */
	N_SLOTS
};

StaticAssertDecl(N_SLOTS <= PGSTAT_NUM_PROGRESS_PARAM, "pgdl's progress needs more slots than a backend has");

static const char *const kind_names[] = {
	[PGDL_CALL_FIT] = "fit", [PGDL_CALL_PACK] = "pack", [PGDL_CALL_DISTRIBUTE] = "distribute",
	[PGDL_CALL_FEATURE_CACHE] = "feature_cache"
};
static const char *const phase_names[] = {
	[PGDL_PHASE_STARTING] = "starting", [PGDL_PHASE_READING] = "reading", [PGDL_PHASE_PREPARING] = "preparing",
	[PGDL_PHASE_WRITING] = "writing", [PGDL_PHASE_TRAINING] = "training", [PGDL_PHASE_VALIDATING] = "validating",
	[PGDL_PHASE_STORING] = "storing", [PGDL_PHASE_COPYING] = "copying", [PGDL_PHASE_COMPUTING] = "computing"
};
/* what done and total count, per kind and phase */
static const char *
unit_name(PgdlCallKind kind, PgdlCallPhase phase)
{
	if (kind == PGDL_CALL_FIT || (kind == PGDL_CALL_PACK && phase == PGDL_PHASE_READING))
		return kind == PGDL_CALL_FIT ? "examples" : "rows";
	if (kind == PGDL_CALL_DISTRIBUTE)
		return "partitions";
	return "buffers";
}

#define MAX_NESTING 8

/* The call this backend publishes (the outermost), and the calls made inside it. */
typedef struct CallState
{
	int			depth;			/* pgdl calls in flight here */
	int			levels[MAX_NESTING];	/* the transaction nest level each began at */
	PgdlCallKind kind;
	PgdlCallPhase phase;
	Oid			target;
	int64		run;
	int64		config;
	int32		epoch;
	int32		epochs;
	int64		done;
	int64		total;
	double		rate;
	double		seconds_left;
	double		loss;
	TimestampTz statement;
	TimestampTz phase_start;
	double		fraction;		/* of the whole call, at the last update */
	TimestampTz pace_start;		/* the pace of the call is measured since */
	double		pace_fraction;	/* the fraction done then */
	int64		pace_updates;	/* since: the first sets pace_start, what came before being set up */
} CallState;

static CallState call;

static int64
float8_bits(double v)
{
	int64		bits;

	memcpy(&bits, &v, sizeof(bits));
	return bits;
}

static double
bits_float8(int64 bits)
{
	double		v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}

/* Every slot written, ours or zeros; none while a command of PostgreSQL's own owns them. */
static void
write_slots(bool clear)
{
	volatile PgBackendStatus *be = MyBEEntry;
	int			index[PGSTAT_NUM_PROGRESS_PARAM];
	int64		val[PGSTAT_NUM_PROGRESS_PARAM] = {0};

	if (be == NULL || be->st_progress_command != PROGRESS_COMMAND_INVALID)
		return;
	if (clear && be->st_progress_param[SLOT_MARKER] != CALL_MARKER)
		return;
	for (int i = 0; i < PGSTAT_NUM_PROGRESS_PARAM; i++)
		index[i] = i;
	if (!clear)
	{
		val[SLOT_MARKER] = CALL_MARKER;
		val[SLOT_STATEMENT] = call.statement;
		val[SLOT_KIND] = call.kind;
		val[SLOT_PHASE] = call.phase;
		val[SLOT_TARGET] = call.target;
		val[SLOT_RUN] = call.run;
		val[SLOT_CONFIG] = call.config;
		val[SLOT_EPOCH] = call.epoch;
		val[SLOT_EPOCHS] = call.epochs;
		val[SLOT_DONE] = call.done;
		val[SLOT_TOTAL] = call.total;
		val[SLOT_RATE] = float8_bits(call.rate);
		val[SLOT_SECONDS_LEFT] = float8_bits(call.seconds_left);
		val[SLOT_LOSS] = float8_bits(call.loss);
	}
	pgstat_progress_update_multi_param(PGSTAT_NUM_PROGRESS_PARAM, index, val);
}

void
pgdl_call_progress_begin(PgdlCallKind kind, Oid target)
{
	if (call.depth < MAX_NESTING)
		call.levels[call.depth] = GetCurrentTransactionNestLevel();
	if (call.depth++ > 0)
		return;
	memset((char *) &call + offsetof(CallState, kind), 0, sizeof(call) - offsetof(CallState, kind));
	call.kind = kind;
	call.target = target;
	call.total = -1;
	call.rate = call.seconds_left = call.loss = get_float8_nan();
	call.statement = MyBEEntry ? MyBEEntry->st_activity_start_timestamp : 0;
	call.phase_start = GetCurrentTimestamp();
	write_slots(false);
}

PgdlCallKind
pgdl_call_progress_kind(void)
{
	return call.depth > 0 ? call.kind : 0;
}

void
pgdl_call_progress_run(int64 run, int64 config, int32 epochs)
{
	if (call.depth != 1)
		return;
	call.run = run;
	call.config = config;
	call.epochs = epochs;
	write_slots(false);
}

void
pgdl_call_progress_phase(PgdlCallPhase phase, int32 epoch, int64 total, bool own_pace)
{
	if (call.depth != 1)
		return;
	call.phase = phase;
	call.epoch = epoch;
	call.total = total;
	call.done = 0;
	call.rate = get_float8_nan();
	call.phase_start = GetCurrentTimestamp();
	if (own_pace)
		call.pace_updates = 0;
	write_slots(false);
}

void
pgdl_call_progress_loss(double loss)
{
	if (call.depth == 1)
		call.loss = loss;
}

/*
 * done units of the phase, `examples` of them in all (for the rate; 0: none),
 * and the share of the whole call done so far, from which the seconds left
 * are estimated: what is left at the pace since the call's first update (or
 * the first of a phase with a pace of its own), what came before it being
 * set up rather than work.
 */
void
pgdl_call_progress_update(int64 done, int64 examples, double fraction)
{
	TimestampTz now;
	double		phase_seconds;
	double		pace_seconds;
	double		pace;

	if (call.depth != 1)
		return;
	now = GetCurrentTimestamp();
	phase_seconds = (double) (now - call.phase_start) / USECS_PER_SEC;
	call.fraction = isnan(fraction) ? call.fraction : Min(Max(fraction, 0), 1);
	if (call.pace_updates++ == 0)
	{
		call.pace_start = now;
		call.pace_fraction = call.fraction;
	}
	pace_seconds = (double) (now - call.pace_start) / USECS_PER_SEC;
	pace = pace_seconds > 0 ? (call.fraction - call.pace_fraction) / pace_seconds : 0;
	call.done = done;
	call.rate = examples > 0 && phase_seconds > 0 ? examples / phase_seconds : get_float8_nan();
	call.seconds_left = pace > 0 ? (1 - call.fraction) / pace : get_float8_nan();
	write_slots(false);
}

void
pgdl_call_progress_end(void)
{
	if (call.depth == 0)
		return;
	if (--call.depth > 0)
		return;
	write_slots(true);
}

/* An aborted (sub)transaction ends the calls it began, which had no chance to end themselves. */
static void
forget_calls_from(int level)
{
	while (call.depth > 0 && (call.depth > MAX_NESTING || call.levels[call.depth - 1] >= level))
		call.depth--;
	if (call.depth == 0)
		write_slots(true);
}

static void
on_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PREPARE)
		forget_calls_from(0);
}

static void
on_subxact(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget_calls_from(GetCurrentTransactionNestLevel());
}

void
pgdl_call_progress_init(void)
{
	RegisterXactCallback(on_xact, NULL);
	RegisterSubXactCallback(on_subxact, NULL);
}

/* ---- reading: the rows of pgdl.progress_rows() for other backends' calls ---- */

static Datum
float8_or_null(double v, bool *isnull)
{
	*isnull = isnan(v) || isinf(v);
	return Float8GetDatum(v);
}

static void
put_call(ReturnSetInfo *rsinfo, const PgBackendStatus *be)
{
	const int64 *s = be->st_progress_param;
	Datum		values[PGDL_PROGRESS_COLUMNS] = {0};
	bool		nulls[PGDL_PROGRESS_COLUMNS];
	int64		kind = s[SLOT_KIND];
	int64		phase = s[SLOT_PHASE];

	if (kind < 0 || kind >= lengthof(kind_names) || phase < 0 || phase >= lengthof(phase_names))
		return;
	memset(nulls, true, sizeof(nulls));
	values[0] = Int64GetDatum(s[SLOT_RUN]);
	nulls[0] = s[SLOT_RUN] <= 0;
	values[1] = Int64GetDatum(s[SLOT_CONFIG]);
	nulls[1] = s[SLOT_CONFIG] <= 0;
	values[2] = CStringGetTextDatum(phase_names[phase]);
	nulls[2] = false;
	values[3] = Int32GetDatum((int32) s[SLOT_EPOCH]);
	nulls[3] = kind != PGDL_CALL_FIT || s[SLOT_EPOCH] <= 0;
	values[7] = float8_or_null(bits_float8(s[SLOT_RATE]), &nulls[7]);
	values[8] = float8_or_null(bits_float8(s[SLOT_SECONDS_LEFT]), &nulls[8]);
	values[9] = float8_or_null(bits_float8(s[SLOT_LOSS]), &nulls[9]);
	values[11] = CStringGetTextDatum(kind_names[kind]);
	values[12] = values[2];
	values[13] = Int32GetDatum(be->st_procpid);
	values[14] = ObjectIdGetDatum((Oid) s[SLOT_TARGET]);
	nulls[14] = s[SLOT_TARGET] == InvalidOid;
	values[15] = Int64GetDatum(s[SLOT_DONE]);
	values[16] = Int64GetDatum(s[SLOT_TOTAL]);
	nulls[16] = s[SLOT_TOTAL] < 0;
	values[17] = CStringGetTextDatum(unit_name(kind, phase));
	values[18] = values[8];
	nulls[11] = nulls[12] = nulls[13] = nulls[15] = nulls[17] = false;
	nulls[18] = nulls[8];
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

/* A backend's slots are a call of pgdl's, in the statement it runs now. */
static bool
call_in_flight(const PgBackendStatus *be)
{
	return be->st_procpid > 0 && be->st_progress_command == PROGRESS_COMMAND_INVALID &&
		be->st_progress_param[SLOT_MARKER] == CALL_MARKER &&
		be->st_progress_param[SLOT_STATEMENT] == be->st_activity_start_timestamp &&
		be->st_state != STATE_IDLE && be->st_state != STATE_IDLEINTRANSACTION &&
		be->st_state != STATE_IDLEINTRANSACTION_ABORTED && be->st_state != STATE_DISABLED;
}

/* One row per call in flight that the current role may see: its own, or any with pg_read_all_stats. */
void
pgdl_call_progress_rows(ReturnSetInfo *rsinfo)
{
	int			n = pgstat_fetch_stat_numbackends();
	bool		all = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);

	for (int i = 1; i <= n; i++)
	{
		LocalPgBackendStatus *local = pgstat_fetch_stat_local_beentry(i);
		PgBackendStatus *be = local ? &local->backendStatus : NULL;

		CHECK_FOR_INTERRUPTS();
		if (be == NULL || !call_in_flight(be))
			continue;
		if (!all && !has_privs_of_role(GetUserId(), be->st_userid))
			continue;
		put_call(rsinfo, be);
	}
}
