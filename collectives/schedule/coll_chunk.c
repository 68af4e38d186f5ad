/*
 * coll_chunk.c - how finely a schedule cuts its vector: the pipelining
 * chunks of the ring, chain, tree and dbtree collectives (GX_COLL_CHUNK)
 * and the hierarchical all-reduce's segments. The builders and the cost
 * model (algorithms/) both read these, so a prediction counts the chunks
 * the schedule will have.
 *
 * Owns: GX_COLL_CHUNK. Must not touch: anything but the numbers.
 */
#include <pthread.h>

#include "collectives/schedule/schedule.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_coll_chunk, "GX_COLL_CHUNK", GX_PARAM_SIZE, "256K", NULL,
                "Pipelining chunk of the ring, chain and tree collectives (at most 64 chunks "
                "per block).");

#define MAX_CHUNKS 64

static size_t chunk_bytes = 256 << 10;

static void read_chunk_param(void)
{
    (void)gx_param_size(&gx_param_coll_chunk, &chunk_bytes);
    if (chunk_bytes < 4096)
        chunk_bytes = 4096;
}

int coll_chunks(size_t bytes)
{
    /* Read once: the environment lookup showed up in small collectives. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_chunk_param);
    size_t chunk = chunk_bytes;
    size_t k = (bytes + chunk - 1) / chunk;
    return k < 1 ? 1 : k > MAX_CHUNKS ? MAX_CHUNKS : (int)k;
}

int coll_hier_segments(size_t bytes)
{
    /* A segment costs its phases' latencies again; below ~8 chunks the
     * overlap does not pay that back (measured on 2 netns nodes x 2 ranks). */
    int k = coll_chunks(bytes) / 8;
    return k < 1 ? 1 : k > 4 ? 4 : k;
}
