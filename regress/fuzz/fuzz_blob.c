/*
 * fuzz_blob.c -- libFuzzer target: the model blob reader (src/nn/serialize.c).
 *
 * Blobs come from users (pgdl.models.weights, checkpoints, MOP's shared
 * memory).  Each input is read twice: as it is, and with its length field and
 * checksum made right, so that mutations reach the checks behind the checksum.
 * A blob that is accepted must be one the engine can use: it is trained,
 * evaluated, cut and joined, and must serialize back to the same bytes; and
 * its summary (nn_model_blob_check) must be its model's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_engine.h"

#define HEADER_BYTES	(8 + 4 + 8)

static void
reseal(uint8_t *blob, size_t len)
{
	uint32_t	crc;

	for (int i = 0; i < 8; i++)
		blob[12 + i] = (uint8_t) ((uint64_t) len >> (8 * i));
	crc = nn_crc32(0, blob, len - 4);
	for (int i = 0; i < 4; i++)
		blob[len - 4 + i] = (uint8_t) (crc >> (8 * i));
}

/*
 * The summary a coordinator compares a node's model by: read from any bytes
 * without a crash, and of an accepted blob, its model's.
 */
static void
summarize_blob(const uint8_t *data, size_t size, const NnModel *m)
{
	NnError		err = {0};
	NnSpec	   *spec = malloc(sizeof(NnSpec));
	NnBlobSummary sum;
	bool		ok = nn_model_blob_check(data, size, spec, &sum, &err);

	if (!ok && err.msg[0] == '\0')
		fuzz_fail("a blob is not summarized, without a message");
	if (m != NULL && (!ok || memcmp(spec, &m->spec, sizeof(NnSpec)) != 0 || sum.seed != m->seed ||
					  sum.step != m->step || sum.n_params != m->n_params || sum.n_buffers != m->n_buffers ||
					  sum.n_opt_state != m->n_opt_state || sum.optim.type != m->optim.type ||
					  sum.optim.lr != m->optim.lr))
		fuzz_fail("an accepted blob's summary is not its model's");
	free(spec);
}

static void
read_blob(const uint8_t *data, size_t size)
{
	NnError		err = {0};
	NnModel    *m = nn_model_deserialize(data, size, &err);
	size_t		len;
	uint8_t    *again;

	summarize_blob(data, size, m);

	if (m == NULL)
	{
		if (err.msg[0] == '\0')
			fuzz_fail("a blob is refused without a message");
		fuzz_note("blob refused: %s", err.msg);
		return;
	}
	/* an accepted blob is canonical: it is exactly what its model serializes to */
	len = nn_model_serialized_size(m);
	again = malloc(len);
	nn_model_serialize(m, again);
	if (len != size || memcmp(again, data, size) != 0)
		fuzz_fail("an accepted blob of %zu bytes serializes back to %zu other bytes", size, len);
	free(again);
	if (fuzz_spec_small(&m->spec))
		fuzz_use_model(m);
	fuzz_note("blob accepted");
	nn_model_free(m);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	read_blob(data, size);
	if (size >= HEADER_BYTES + 4)
	{
		uint8_t    *copy = malloc(size);

		memcpy(copy, data, size);
		reseal(copy, size);
		read_blob(copy, size);
		free(copy);
	}
	return 0;
}
