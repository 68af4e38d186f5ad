/*
 * softverbs shared receive queues: a ring of receive WQEs that the
 * responder of any attached QP consumes from. The limit event
 * (IBV_EVENT_SRQ_LIMIT_REACHED) fires once when the number of posted WQEs
 * drops below an armed limit, and disarms it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sv_internal.h"

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	struct sv_srq *srq;

	if (init->attr.max_wr < 1 || init->attr.max_wr > SV_MAX_SRQ_WR ||
	    init->attr.max_sge > SV_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq || !(srq->ring = calloc(init->attr.max_wr, sizeof(*srq->ring)))) {
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	srq->ctx = sv_ctx_of(pd->context);
	srq->cap = init->attr.max_wr;
	srq->max_sge = init->attr.max_sge ? init->attr.max_sge : 1;
	srq->limit = init->attr.srq_limit;
	srq->srq.context = pd->context;
	srq->srq.srq_context = init->srq_context;
	srq->srq.pd = pd;
	srq->srq.handle = (uint32_t)(uintptr_t)srq;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	pthread_mutex_lock(&srq->ctx->lock);
	((struct sv_pd *)(void *)pd)->refs++;
	pthread_mutex_unlock(&srq->ctx->lock);
	return &srq->srq;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_srq *srq = (struct sv_srq *)(void *)ibsrq;

	if (mask & IBV_SRQ_MAX_WR)
		return EINVAL; /* resizing is not modelled */
	if (mask & IBV_SRQ_LIMIT) {
		if (attr->srq_limit > srq->cap)
			return EINVAL;
		pthread_mutex_lock(&srq->ctx->lock);
		srq->limit = attr->srq_limit;
		pthread_mutex_unlock(&srq->ctx->lock);
	}
	return 0;
}

SV_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sv_srq *srq = (struct sv_srq *)(void *)ibsrq;

	pthread_mutex_lock(&srq->ctx->lock);
	attr->max_wr = srq->cap;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->ctx->lock);
	return 0;
}

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sv_srq *srq = (struct sv_srq *)(void *)ibsrq;
	struct sv_ctx *c = srq->ctx;

	pthread_mutex_lock(&c->lock);
	if (srq->refs) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	((struct sv_pd *)(void *)ibsrq->pd)->refs--;
	pthread_mutex_unlock(&c->lock);
	free(srq->ring);
	free(srq);
	return 0;
}
