/*
 * softverbs configuration: every SOFTVERBS_* environment variable is read
 * here, once, with its default. docs/testing.md lists them.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "sv_internal.h"

struct sv_config sv_cfg;
static pthread_once_t sv_config_once = PTHREAD_ONCE_INIT;

static const char *env_str(const char *name, const char *def)
{
	const char *v = getenv(name);
	return (v && *v) ? v : def;
}

static double env_pct(const char *name)
{
	double v = atof(env_str(name, "0"));
	if (v < 0)
		v = 0;
	if (v > 100)
		v = 100;
	return v;
}

static void config_load(void)
{
	const char *addr = env_str("SOFTVERBS_ADDR", "127.0.0.1");
	struct in_addr in;

	if (inet_pton(AF_INET, addr, &in) != 1) {
		fprintf(stderr, "softverbs: SOFTVERBS_ADDR=%s is not an IPv4 address, using 127.0.0.1\n",
			addr);
		in.s_addr = htonl(INADDR_LOOPBACK);
	}
	sv_cfg.ip = in.s_addr;
	sv_cfg.roce = strcasecmp(env_str("SOFTVERBS_LINK", "ib"), "roce") == 0 ||
		      strcasecmp(env_str("SOFTVERBS_LINK", "ib"), "eth") == 0;
	sv_cfg.ndev = atoi(env_str("SOFTVERBS_NDEV", "1"));
	if (sv_cfg.ndev < 0)
		sv_cfg.ndev = 0;
	if (sv_cfg.ndev > SV_MAX_DEVICES)
		sv_cfg.ndev = SV_MAX_DEVICES;
	sv_cfg.drop_pct = env_pct("SOFTVERBS_DROP_PCT");
	sv_cfg.dup_pct = env_pct("SOFTVERBS_DUP_PCT");
	sv_cfg.reorder_pct = env_pct("SOFTVERBS_REORDER_PCT");
	sv_cfg.delay_us = (uint32_t)strtoul(env_str("SOFTVERBS_DELAY_US", "0"), NULL, 0);
	sv_cfg.port_down = atoi(env_str("SOFTVERBS_PORT_DOWN", "0"));
	snprintf(sv_cfg.port_down_file, sizeof(sv_cfg.port_down_file), "%s",
		 env_str("SOFTVERBS_PORT_DOWN_FILE", ""));
	sv_cfg.seed = strtoull(env_str("SOFTVERBS_SEED", "1"), NULL, 0);
	sv_cfg.stats = atoi(env_str("SOFTVERBS_STATS", "0"));
	sv_cfg.debug = atoi(env_str("SOFTVERBS_DEBUG", "1"));
	sv_cfg.min_timeout_us =
		(uint32_t)strtoul(env_str("SOFTVERBS_MIN_TIMEOUT_US", "1000"), NULL, 0);
	sv_cfg.udp_port = (uint16_t)strtoul(env_str("SOFTVERBS_UDP_PORT", "12000"), NULL, 0);
	/* every device's port range below 0xc000, so that its base is a LID */
	if (sv_cfg.udp_port < 1024 ||
	    sv_cfg.udp_port + (uint32_t)SV_MAX_DEVICES * SV_NODE_PORTS > 0xc000) {
		fprintf(stderr, "softverbs: SOFTVERBS_UDP_PORT=%u out of range [1024, %u], using %u\n",
			sv_cfg.udp_port, 0xc000 - SV_MAX_DEVICES * SV_NODE_PORTS, SV_PORT_BASE);
		sv_cfg.udp_port = SV_PORT_BASE;
	}
	sv_cfg.no_resize_cq = atoi(env_str("SOFTVERBS_NO_RESIZE_CQ", "0")) != 0;
	sv_cfg.max_cqe = (uint32_t)strtoul(env_str("SOFTVERBS_MAX_CQE", "262143"), NULL, 0);
	if (sv_cfg.max_cqe < 1 || sv_cfg.max_cqe > SV_MAX_CQE)
		sv_cfg.max_cqe = SV_MAX_CQE;
}

void sv_config_init(void)
{
	pthread_once(&sv_config_once, config_load);
}

uint64_t sv_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sv_log(int level, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	if (level > sv_cfg.debug)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "softverbs[%d]: %s\n", (int)getpid(), buf);
}
