/*
 * subxact.c -- one call in a subtransaction, its error handed back.
 *
 * Several callers let one kind of error pass without failing their whole
 * statement: a node that does not answer (cluster.c), a site lost in a
 * federated round (federated.c), /dev/shm too small for a shared partition
 * (shared_scan.c), one role's invalid spec in a query over every role's
 * (zoo.c).  Each runs the call here and decides from the ErrorData whether to
 * go on or rethrow it; anything it does not expect, a cancel included, must
 * be rethrown.  The caller's memory context and resource owner are back as
 * they were either way.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/resowner.h"

#include "base/base.h"

/*
 * Runs fn(arg) in a subtransaction: NULL when it returned (the subtransaction
 * committed), else its error copied into the caller's memory context, the
 * subtransaction rolled back.
 */
ErrorData *
pgdl_call_in_subxact(void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile failed = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		failed = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return failed;
}
