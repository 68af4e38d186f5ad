/*
 * softverbs protection domains and memory regions. A memory region is a
 * record (address, length, iova, access, PD) in its context's key table;
 * lkey == rkey == slot << 8 | generation byte, so a stale key of a freed
 * region is rejected. Memory is not pinned: the emulator accesses it with
 * plain loads and stores in the owning process (a dmabuf region through its
 * own mapping of the fd).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sv_internal.h"

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct sv_pd *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = ctx;
	p->pd.handle = (uint32_t)(uintptr_t)p;
	return &p->pd;
}

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sv_pd *p = (struct sv_pd *)(void *)pd;
	struct sv_ctx *c = sv_ctx_of(pd->context);
	int refs;

	pthread_mutex_lock(&c->lock);
	refs = p->refs;
	pthread_mutex_unlock(&c->lock);
	if (refs)
		return EBUSY;
	free(p);
	return 0;
}

static int sv_mr_slot_alloc(struct sv_ctx *c, uint32_t *slot)
{
	for (uint32_t i = 1; i < c->mr_cap; i++) {
		if (!c->mrs[i]) {
			*slot = i;
			return 0;
		}
	}
	uint32_t ncap = c->mr_cap ? c->mr_cap * 2 : 64;
	if (ncap > (1u << 24))
		return ENOMEM;
	struct sv_mr **n = realloc(c->mrs, ncap * sizeof(*n));
	if (!n)
		return ENOMEM;
	memset(n + c->mr_cap, 0, (ncap - c->mr_cap) * sizeof(*n));
	*slot = c->mr_cap ? c->mr_cap : 1;
	c->mrs = n;
	c->mr_cap = ncap;
	return 0;
}

static struct ibv_mr *sv_reg(struct ibv_pd *pd, void *addr, size_t length,
			     uint64_t iova, unsigned access)
{
	struct sv_ctx *c = sv_ctx_of(pd->context);
	struct sv_pd *p = (struct sv_pd *)(void *)pd;
	const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
			       IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ZERO_BASED;
	struct sv_mr *m;
	uint32_t slot;
	int err;

	/* No memory windows: an HCA without them refuses MW_BIND access so. */
	if (access & IBV_ACCESS_MW_BIND) {
		sv_log(2, "ibv_reg_mr: EOPNOTSUPP: IBV_ACCESS_MW_BIND (no memory windows)");
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* The spec: remote write or atomic access needs local write. */
	if ((access & ~known) ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE)) ||
	    (!addr && length) || length > (1ull << 40)) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	err = sv_mr_slot_alloc(c, &slot);
	if (err) {
		pthread_mutex_unlock(&c->lock);
		free(m);
		errno = err;
		return NULL;
	}
	c->key_gen++;
	m->slot = slot;
	m->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	m->access = access;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = slot;
	m->mr.lkey = slot << 8 | c->key_gen;
	m->mr.rkey = m->mr.lkey;
	c->mrs[slot] = m;
	p->refs++;
	pthread_mutex_unlock(&c->lock);
	return &m->mr;
}

#undef ibv_reg_mr
SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				    int access)
{
	return sv_reg(pd, addr, length, (uint64_t)(uintptr_t)addr, (unsigned)access);
}

#undef ibv_reg_mr_iova
SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return sv_reg(pd, addr, length, iova, (unsigned)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	return sv_reg(pd, addr, length, iova, access);
}

/*
 * dmabuf: off by default (EOPNOTSUPP, as a kernel without dmabuf support);
 * SOFTVERBS_DMABUF=1 maps the fd (the fake libcuda's device memory is a
 * memfd, so its "dmabuf" maps) and the region is addressed by iova, locally
 * and remotely, as with a real HCA. fd -1 then fails with EBADF, which is
 * how a consumer probes for support.
 */
SV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
					   size_t length, uint64_t iova, int fd,
					   int access)
{
	const char *on = getenv("SOFTVERBS_DMABUF");

	if (!on || strcmp(on, "1") != 0) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	uint64_t page = offset & ~(uint64_t)4095;
	size_t map_len = (size_t)(offset - page) + (length ? length : 1);
	void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)page);

	if (map == MAP_FAILED) {
		sv_log(2, "ibv_reg_dmabuf_mr: mmap of fd %d at %llu failed: %s", fd,
		       (unsigned long long)offset, strerror(errno));
		return NULL;
	}
	struct ibv_mr *mr = sv_reg(pd, (void *)(uintptr_t)iova, length, iova,
				   (unsigned)access & ~IBV_ACCESS_ZERO_BASED);
	if (!mr) {
		int err = errno;

		munmap(map, map_len);
		errno = err;
		return NULL;
	}
	struct sv_mr *m = (struct sv_mr *)(void *)mr;

	m->dmabuf_map = map;
	m->dmabuf_map_len = map_len;
	m->dmabuf_data = (uint8_t *)map + (offset - page);
	return mr;
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct sv_ctx *c = sv_ctx_of(mr->context);
	struct sv_mr *m = (struct sv_mr *)(void *)mr;

	pthread_mutex_lock(&c->lock);
	c->mrs[m->slot] = NULL;
	((struct sv_pd *)(void *)mr->pd)->refs--;
	pthread_mutex_unlock(&c->lock);
	if (m->dmabuf_map)
		munmap(m->dmabuf_map, m->dmabuf_map_len);
	free(m);
	return 0;
}

SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
			   void *addr, size_t length, int access)
{
	/* not modelled: what rdma-core answers for a provider without rereg */
	(void)mr; (void)flags; (void)pd; (void)addr; (void)length; (void)access;
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}

int sv_mr_check(struct sv_ctx *c, uint32_t key, struct ibv_pd *pd, uint64_t addr,
		uint64_t len, unsigned need, int remote, uint8_t **ptr)
{
	uint32_t slot = key >> 8;
	const int bad = remote ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR;
	struct sv_mr *m;
	uint64_t base;

	if (slot >= c->mr_cap || !(m = c->mrs[slot]) || m->mr.lkey != key)
		return bad;
	if (m->mr.pd != pd || (m->access & need) != need)
		return bad;
	base = remote || m->dmabuf_data ? m->iova : (uint64_t)(uintptr_t)m->mr.addr;
	if (addr < base || len > m->mr.length || addr - base > m->mr.length - len)
		return bad;
	*ptr = (m->dmabuf_data ? m->dmabuf_data : (uint8_t *)m->mr.addr) + (addr - base);
	return 0;
}
