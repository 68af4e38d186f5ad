/*
 * softverbs completion queues and completion channels.
 *
 * A channel's fd is an eventfd in semaphore mode: one count per queued
 * event, so it is readable exactly when ibv_get_cq_event() has something to
 * return, and poll()/epoll and O_NONBLOCK work as with uverbs. Event
 * accounting follows uverbs: ibv_destroy_cq() waits until every event handed
 * out for the CQ has been acknowledged (with a deadline, see
 * SV_DESTROY_WAIT_S) and drops events still queued for it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sv_internal.h"

#define SV_DESTROY_WAIT_S 10

SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct sv_channel *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		int err = errno;
		free(ch);
		errno = err;
		return NULL;
	}
	ch->ch.context = ctx;
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_channel *ch = (struct sv_channel *)(void *)channel;
	int refs;

	pthread_mutex_lock(&ch->lock);
	refs = ch->ch.refcnt;
	pthread_mutex_unlock(&ch->lock);
	if (refs)
		return EBUSY;
	close(ch->ch.fd);
	pthread_mutex_destroy(&ch->lock);
	free(ch->q);
	free(ch);
	return 0;
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct sv_cq *cq;

	if (cqe < 1 || (uint32_t)cqe > sv_cfg.max_cqe || comp_vector < 0 ||
	    comp_vector >= ctx->num_comp_vectors ||
	    (channel && channel->context != ctx)) {
		sv_log(1, "ibv_create_cq(cqe %d, comp_vector %d): EINVAL: %s", cqe, comp_vector,
		       cqe < 1 || (uint32_t)cqe > sv_cfg.max_cqe ? "cqe outside 1..max_cqe"
		       : channel && channel->context != ctx ? "channel of another context"
		       : "comp_vector outside 0..num_comp_vectors-1");
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq || !(cq->ring = calloc((size_t)cqe, sizeof(*cq->ring)))) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->ctx = sv_ctx_of(ctx);
	cq->cap = (uint32_t)cqe;
	cq->cq.context = ctx;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	cq->cq.handle = (uint32_t)(uintptr_t)cq;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	if (channel) {
		struct sv_channel *ch = (struct sv_channel *)(void *)channel;
		pthread_mutex_lock(&ch->lock);
		ch->ch.refcnt++;
		pthread_mutex_unlock(&ch->lock);
	}
	return &cq->cq;
}

SV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_cq *cq = (struct sv_cq *)(void *)ibcq;
	struct sv_ctx *c = cq->ctx;
	struct ibv_wc *n;

	if (sv_cfg.no_resize_cq) {
		/* SOFTVERBS_NO_RESIZE_CQ: a provider without resize_cq */
		sv_log(2, "ibv_resize_cq: EOPNOTSUPP (SOFTVERBS_NO_RESIZE_CQ)");
		return EOPNOTSUPP;
	}
	if (cqe < 1 || (uint32_t)cqe > sv_cfg.max_cqe) {
		sv_log(1, "ibv_resize_cq(cqe %d): EINVAL: cqe outside 1..max_cqe %u", cqe,
		       sv_cfg.max_cqe);
		return EINVAL;
	}
	pthread_mutex_lock(&c->lock);
	if ((uint32_t)cqe < cq->count) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	n = calloc((size_t)cqe, sizeof(*n));
	if (!n) {
		pthread_mutex_unlock(&c->lock);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < cq->count; i++)
		n[i] = cq->ring[(cq->head + i) % cq->cap];
	free(cq->ring);
	cq->ring = n;
	cq->head = 0;
	cq->cap = (uint32_t)cqe;
	cq->cq.cqe = cqe;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_cq *cq = (struct sv_cq *)(void *)ibcq;
	struct sv_channel *ch = (struct sv_channel *)(void *)ibcq->channel;
	struct timespec deadline;
	uint32_t reported = 0;
	int refs, rc = 0;

	pthread_mutex_lock(&cq->ctx->lock);
	refs = cq->refs;
	pthread_mutex_unlock(&cq->ctx->lock);
	if (refs)
		return EBUSY;
	if (ch) {
		/* forget queued, not yet read events of this CQ */
		pthread_mutex_lock(&ch->lock);
		for (unsigned i = 0; i < ch->qcount; i++) {
			unsigned k = (ch->qhead + i) % ch->qcap;
			if (ch->q[k] == cq)
				ch->q[k] = NULL;
		}
		reported = cq->events_reported;
		pthread_mutex_unlock(&ch->lock);
	}
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += SV_DESTROY_WAIT_S;
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != reported && rc == 0)
		rc = pthread_cond_timedwait(&ibcq->cond, &ibcq->mutex, &deadline);
	pthread_mutex_unlock(&ibcq->mutex);
	if (rc) {
		sv_log(1, "ibv_destroy_cq: %u of %u completion events never acknowledged "
			  "(call ibv_ack_cq_events)",
		       reported - ibcq->comp_events_completed, reported);
		return EBUSY;
	}
	if (ch) {
		pthread_mutex_lock(&ch->lock);
		ch->ch.refcnt--;
		pthread_mutex_unlock(&ch->lock);
	}
	free(cq->ring);
	free(cq);
	return 0;
}

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq_out,
			       void **cq_context)
{
	struct sv_channel *ch = (struct sv_channel *)(void *)channel;
	struct sv_cq *cq = NULL;
	uint64_t v;

	while (!cq) {
		/* blocks unless the application made the fd non-blocking */
		if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
			return -1;
		pthread_mutex_lock(&ch->lock);
		if (ch->qcount) {
			cq = ch->q[ch->qhead];
			ch->qhead = (ch->qhead + 1) % ch->qcap;
			ch->qcount--;
			if (cq)
				cq->events_reported++;
		}
		pthread_mutex_unlock(&ch->lock);
	}
	*cq_out = &cq->cq;
	*cq_context = cq->cq.cq_context;
	return 0;
}

static void sv_channel_post(struct sv_channel *ch, struct sv_cq *cq)
{
	uint64_t one = 1;

	pthread_mutex_lock(&ch->lock);
	if (ch->qcount == ch->qcap) {
		unsigned ncap = ch->qcap ? ch->qcap * 2 : 16;
		struct sv_cq **n = calloc(ncap, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&ch->lock);
			sv_log(1, "completion event lost: out of memory");
			return;
		}
		for (unsigned i = 0; i < ch->qcount; i++)
			n[i] = ch->q[(ch->qhead + i) % ch->qcap];
		free(ch->q);
		ch->q = n;
		ch->qhead = 0;
		ch->qcap = ncap;
	}
	ch->q[(ch->qhead + ch->qcount) % ch->qcap] = cq;
	ch->qcount++;
	pthread_mutex_unlock(&ch->lock);
	if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one))
		sv_log(1, "completion channel write failed: %m");
}

/* Called with the context lock held. */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited)
{
	if (cq->count == cq->cap) {
		if (!cq->overflowed) {
			cq->overflowed = 1;
			sv_log(1, "CQ overrun (%u entries): completions are being lost", cq->cap);
			sv_async_event(cq->ctx, IBV_EVENT_CQ_ERR, &cq->cq);
		}
		return;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
	cq->count++;
	if (cq->armed && cq->cq.channel &&
	    (!cq->solicited_only || solicited || wc->status != IBV_WC_SUCCESS)) {
		cq->armed = 0;
		sv_channel_post((struct sv_channel *)(void *)cq->cq.channel, cq);
	}
}

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_cq *cq = (struct sv_cq *)(void *)ibcq;
	struct sv_ctx *c = cq->ctx;
	int k = 0;

	if (n < 0)
		return -1;
	/* Busy-polling applications drive the engine themselves: on a machine
	 * with few cores the progress thread may not get to run. */
	if (pthread_mutex_trylock(&c->lock) == 0)
		sv_progress(c);
	else
		pthread_mutex_lock(&c->lock);
	while (k < n && cq->count) {
		wc[k++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	pthread_mutex_unlock(&c->lock);
	return k;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_cq *cq = (struct sv_cq *)(void *)ibcq;

	pthread_mutex_lock(&cq->ctx->lock);
	cq->armed = 1;
	cq->solicited_only = solicited_only;
	pthread_mutex_unlock(&cq->ctx->lock);
	return 0;
}
