/*
 * The DPDK side of fibre's lookup benchmarks: a thin C layer over rte_lpm, rte_fib (DIR24_8),
 * rte_lpm6 and rte_fib6 (TRIE), so that Rust calls one function per measured loop and DPDK's
 * static-inline lookups (rte_lpm_lookup, rte_lpm_lookup_bulk) are inlined into loops compiled
 * with DPDK's own cflags, exactly as a DPDK application would compile them.
 *
 * Conventions shared with src/dpdk.rs:
 * - every lookup writes one uint32_t per address, FB_NO_ROUTE (UINT32_MAX, fibre_lpm's NO_ROUTE)
 *   for a miss, so fibre's and DPDK's answers compare element by element;
 * - IPv6 addresses arrive as 16-byte big-endian arrays, the form DPDK's API takes;
 * - bulk lookups go through the array in batches of `batch` addresses (the last one may be
 *   shorter); single lookups call the single-address API once per address.
 * Functions returning int return 0 or a negative errno.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_fib.h>
#include <rte_fib6.h>
#include <rte_lcore.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#define FB_NO_ROUTE UINT32_MAX

/* rte_fib and rte_fib6 return their default next hop for a miss; with 4-byte next hops the largest
 * storable value is 2^31 - 1 (one bit marks extended entries), so that is the miss marker, and the
 * benchmark's next hops (asn % 64) never collide with it. */
#define FB_FIB_MISS ((uint64_t)INT32_MAX)

/* The largest batch the shim converts in one go; the benchmark uses 64, DPDK's customary burst. */
#define FB_MAX_BATCH 256

/* Starts EAL without hugetlbfs: DPDK then backs its heap with a memfd of 4 KiB pages (shared
 * memory, which transparent huge pages do not cover on this machine). Returns 0 or a negative
 * errno. */
int fb_eal_init(unsigned int mem_mb, unsigned int cpus)
{
	char mem[16], lcores[32];
	snprintf(mem, sizeof(mem), "%u", mem_mb);
	/* One lcore, allowed on every CPU: on a shared machine the scheduler may then run the
	 * benchmark wherever there is room (figures come from per-thread CPU time anyway). */
	snprintf(lcores, sizeof(lcores), "0@(0-%u)", cpus > 0 ? cpus - 1 : 0);
	char *argv[] = {
		"fibre-bench", "--no-huge", "-m", mem, "--no-pci", "--no-telemetry", "--no-shconf",
		"--lcores", lcores, "--log-level=*:error", NULL,
	};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;
	if (rte_eal_init(argc, argv) < 0)
		return -rte_errno;
	return 0;
}

/* Why the last create call returned NULL (rte_errno is a per-lcore variable Rust cannot name). */
int fb_errno(void) { return rte_errno; }

/* Bytes allocated on DPDK's heap (all sockets): read before and after building a structure, the
 * difference is that structure's whole footprint (lookup tables, rules or RIB, pools). */
size_t fb_heap_allocated(void)
{
	size_t total = 0;
	for (unsigned int i = 0; i < rte_socket_count(); i++) {
		struct rte_malloc_socket_stats st;
		if (rte_malloc_get_socket_stats(rte_socket_id_by_idx(i), &st) == 0)
			total += st.heap_allocsz_bytes;
	}
	return total;
}

/* ---- rte_lpm ---- */

struct rte_lpm *fb_lpm_create(const char *name, uint32_t max_rules, uint32_t number_tbl8s)
{
	struct rte_lpm_config cfg = {
		.max_rules = max_rules, .number_tbl8s = number_tbl8s, .flags = 0,
	};
	return rte_lpm_create(name, SOCKET_ID_ANY, &cfg);
}

void fb_lpm_free(struct rte_lpm *lpm) { rte_lpm_free(lpm); }

int fb_lpm_add(struct rte_lpm *lpm, uint32_t ip, uint8_t depth, uint32_t nh)
{
	return rte_lpm_add(lpm, ip, depth, nh);
}

int fb_lpm_delete(struct rte_lpm *lpm, uint32_t ip, uint8_t depth)
{
	return rte_lpm_delete(lpm, ip, depth);
}

void fb_lpm_lookup_each(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t nh;
		out[i] = rte_lpm_lookup(lpm, ips[i], &nh) == 0 ? nh : FB_NO_ROUTE;
	}
}

void fb_lpm_lookup_bulk(const struct rte_lpm *lpm, const uint32_t *ips, uint32_t *out, size_t n,
			unsigned int batch)
{
	for (size_t i = 0; i < n; i += batch) {
		unsigned int k = n - i < batch ? (unsigned int)(n - i) : batch;
		rte_lpm_lookup_bulk(lpm, ips + i, out + i, k);
		for (unsigned int j = 0; j < k; j++) {
			uint32_t r = out[i + j];
			out[i + j] = (r & RTE_LPM_LOOKUP_SUCCESS) ? (r & 0x00ffffff) : FB_NO_ROUTE;
		}
	}
}

/* ---- rte_fib (DIR24_8, 4-byte next hops) ---- */

struct rte_fib *fb_fib_create(const char *name, int max_routes, uint32_t num_tbl8)
{
	struct rte_fib_conf cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.type = RTE_FIB_DIR24_8;
	cfg.default_nh = FB_FIB_MISS;
	cfg.max_routes = max_routes;
	cfg.dir24_8.nh_sz = RTE_FIB_DIR24_8_4B;
	cfg.dir24_8.num_tbl8 = num_tbl8;
	return rte_fib_create(name, SOCKET_ID_ANY, &cfg);
}

void fb_fib_free(struct rte_fib *fib) { rte_fib_free(fib); }

int fb_fib_add(struct rte_fib *fib, uint32_t ip, uint8_t depth, uint32_t nh)
{
	return rte_fib_add(fib, ip, depth, nh);
}

int fb_fib_delete(struct rte_fib *fib, uint32_t ip, uint8_t depth)
{
	return rte_fib_delete(fib, ip, depth);
}

void fb_fib_lookup_bulk(struct rte_fib *fib, const uint32_t *ips, uint32_t *out, size_t n,
			unsigned int batch)
{
	uint64_t nh[FB_MAX_BATCH];
	if (batch > FB_MAX_BATCH)
		batch = FB_MAX_BATCH;
	for (size_t i = 0; i < n; i += batch) {
		unsigned int k = n - i < batch ? (unsigned int)(n - i) : batch;
		/* rte_fib_lookup_bulk does not write through ips; its prototype just lacks const. */
		rte_fib_lookup_bulk(fib, (uint32_t *)(ips + i), nh, (int)k);
		for (unsigned int j = 0; j < k; j++)
			out[i + j] = nh[j] == FB_FIB_MISS ? FB_NO_ROUTE : (uint32_t)nh[j];
	}
}

/* ---- rte_lpm6 ---- */

struct rte_lpm6 *fb_lpm6_create(const char *name, uint32_t max_rules, uint32_t number_tbl8s)
{
	struct rte_lpm6_config cfg = {
		.max_rules = max_rules, .number_tbl8s = number_tbl8s, .flags = 0,
	};
	return rte_lpm6_create(name, SOCKET_ID_ANY, &cfg);
}

void fb_lpm6_free(struct rte_lpm6 *lpm) { rte_lpm6_free(lpm); }

int fb_lpm6_add(struct rte_lpm6 *lpm, const uint8_t *ip, uint8_t depth, uint32_t nh)
{
	return rte_lpm6_add(lpm, ip, depth, nh);
}

int fb_lpm6_delete(struct rte_lpm6 *lpm, const uint8_t *ip, uint8_t depth)
{
	return rte_lpm6_delete(lpm, ip, depth);
}

void fb_lpm6_lookup_each(const struct rte_lpm6 *lpm, const uint8_t (*ips)[16], uint32_t *out,
			 size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t nh;
		out[i] = rte_lpm6_lookup(lpm, ips[i], &nh) == 0 ? nh : FB_NO_ROUTE;
	}
}

void fb_lpm6_lookup_bulk(const struct rte_lpm6 *lpm, const uint8_t (*ips)[16], uint32_t *out,
			 size_t n, unsigned int batch)
{
	int32_t nh[FB_MAX_BATCH];
	if (batch > FB_MAX_BATCH)
		batch = FB_MAX_BATCH;
	for (size_t i = 0; i < n; i += batch) {
		unsigned int k = n - i < batch ? (unsigned int)(n - i) : batch;
		rte_lpm6_lookup_bulk_func(lpm, (uint8_t (*)[16])(ips + i), nh, k);
		for (unsigned int j = 0; j < k; j++)
			out[i + j] = nh[j] < 0 ? FB_NO_ROUTE : (uint32_t)nh[j];
	}
}

/* ---- rte_fib6 (TRIE, 4-byte next hops) ---- */

struct rte_fib6 *fb_fib6_create(const char *name, int max_routes, uint32_t num_tbl8)
{
	struct rte_fib6_conf cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.type = RTE_FIB6_TRIE;
	cfg.default_nh = FB_FIB_MISS;
	cfg.max_routes = max_routes;
	cfg.trie.nh_sz = RTE_FIB6_TRIE_4B;
	cfg.trie.num_tbl8 = num_tbl8;
	return rte_fib6_create(name, SOCKET_ID_ANY, &cfg);
}

void fb_fib6_free(struct rte_fib6 *fib) { rte_fib6_free(fib); }

int fb_fib6_add(struct rte_fib6 *fib, const uint8_t *ip, uint8_t depth, uint32_t nh)
{
	return rte_fib6_add(fib, ip, depth, nh);
}

int fb_fib6_delete(struct rte_fib6 *fib, const uint8_t *ip, uint8_t depth)
{
	return rte_fib6_delete(fib, ip, depth);
}

void fb_fib6_lookup_bulk(struct rte_fib6 *fib, const uint8_t (*ips)[16], uint32_t *out, size_t n,
			 unsigned int batch)
{
	uint64_t nh[FB_MAX_BATCH];
	if (batch > FB_MAX_BATCH)
		batch = FB_MAX_BATCH;
	for (size_t i = 0; i < n; i += batch) {
		unsigned int k = n - i < batch ? (unsigned int)(n - i) : batch;
		/* rte_fib6_lookup_bulk does not write through ips; its prototype just lacks const. */
		rte_fib6_lookup_bulk(fib, (uint8_t (*)[16])(ips + i), nh, (int)k);
		for (unsigned int j = 0; j < k; j++)
			out[i + j] = nh[j] == FB_FIB_MISS ? FB_NO_ROUTE : (uint32_t)nh[j];
	}
}
