/*
 * ddp_buckets_test - the bucket assignment rule without communication: caps,
 * the small first bucket, one bucket per datatype, launch order, the rebuild
 * order (observed order + unused parameters) and bad orders.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "collectives/ddp/ddp_internal.h"

/* Bucket b as a string "9,8,7" for compact comparisons. */
static const char *bucket_str(const struct ddp_assignment *a, size_t b)
{
    static char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t j = a->start[b]; j < a->start[b + 1]; j++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%zu", len ? "," : "",
                                a->members[j]);
    return buf;
}

static void expect(const struct ddp_assignment *a, const char *const *want, size_t n,
                   const char *what)
{
    CHECK(a->nbuckets == n, "%s: %zu buckets, want %zu", what, a->nbuckets, n);
    for (size_t b = 0; b < n && b < a->nbuckets; b++)
        CHECK(strcmp(bucket_str(a, b), want[b]) == 0, "%s: bucket %zu is {%s}, want {%s}", what,
              b, bucket_str(a, b), want[b]);
}

static void caps_and_first_bucket(void)
{
    /* Ten 400-byte float32 parameters, first cap 1000 B, cap 2000 B, reverse
     * registration order: the first bucket closes at 1200 B (3 params), the
     * next at 2000 B (5), the rest is left over. */
    struct ddp_param_shape s[10];
    for (int i = 0; i < 10; i++)
        s[i] = (struct ddp_param_shape){ 400, GX_FLOAT32 };
    size_t order[10];
    ddp_default_order(order, 10);
    struct ddp_assignment a;
    CHECK(ddp_assign(s, 10, order, 1000, 2000, &a) == GX_OK, "assign");
    const char *want[] = { "9,8,7", "6,5,4,3,2", "1,0" };
    expect(&a, want, 3, "caps");
    ddp_assignment_free(&a);

    /* Cap of 1 byte: one bucket per parameter, in fill order. */
    CHECK(ddp_assign(s, 10, order, 1, 1, &a) == GX_OK, "assign cap 1");
    CHECK(a.nbuckets == 10, "cap 1: %zu buckets", a.nbuckets);
    for (size_t b = 0; b < a.nbuckets; b++)
        CHECK(a.members[a.start[b]] == 9 - b, "cap 1: bucket %zu holds %zu", b,
              a.members[a.start[b]]);
    ddp_assignment_free(&a);

    /* Huge caps: everything in one bucket. */
    CHECK(ddp_assign(s, 10, order, 1 << 30, 1 << 30, &a) == GX_OK, "assign huge cap");
    const char *one[] = { "9,8,7,6,5,4,3,2,1,0" };
    expect(&a, one, 1, "huge cap");
    ddp_assignment_free(&a);
}

static void oversized_parameter(void)
{
    /* A parameter bigger than the cap closes the bucket it lands in. */
    struct ddp_param_shape s[4] = {
        { 100, GX_FLOAT32 }, { 5000, GX_FLOAT32 }, { 100, GX_FLOAT32 }, { 100, GX_FLOAT32 },
    };
    size_t order[4];
    ddp_default_order(order, 4);
    struct ddp_assignment a;
    CHECK(ddp_assign(s, 4, order, 150, 1000, &a) == GX_OK, "assign");
    const char *want[] = { "3,2", "1", "0" };
    expect(&a, want, 3, "oversized");
    ddp_assignment_free(&a);
}

static void datatypes(void)
{
    /* Alternating float32 / float16 parameters: each bucket has one datatype,
     * and buckets are ordered by the position of their last member. */
    struct ddp_param_shape s[6];
    for (int i = 0; i < 6; i++)
        s[i] = (struct ddp_param_shape){ 100, i % 2 ? GX_FLOAT16 : GX_FLOAT32 };
    size_t order[6];
    ddp_default_order(order, 6); /* 5(f16) 4(f32) 3(f16) 2(f32) 1(f16) 0(f32) */
    struct ddp_assignment a;
    CHECK(ddp_assign(s, 6, order, 200, 1000, &a) == GX_OK, "assign");
    /* f16: {5,3} closes at 200 B (pos 2); f32: {4,2} closes at pos 3;
     * leftovers {1} (pos 4) and {0} (pos 5). */
    const char *want[] = { "5,3", "4,2", "1", "0" };
    expect(&a, want, 4, "datatypes");
    for (size_t b = 0; b < a.nbuckets; b++) {
        enum gx_datatype d = s[a.members[a.start[b]]].dtype;
        for (size_t j = a.start[b]; j < a.start[b + 1]; j++)
            CHECK(s[a.members[j]].dtype == d, "bucket %zu mixes datatypes", b);
    }
    ddp_assignment_free(&a);
}

static void rebuild_order(void)
{
    /* Observed order 2,0,4 of 6 parameters; 5,3,1 never marked (unused):
     * they follow in reverse registration order. */
    size_t observed[] = { 2, 0, 4 }, order[6];
    ddp_rebuild_order(observed, 3, 6, order);
    size_t want[] = { 2, 0, 4, 5, 3, 1 };
    for (int i = 0; i < 6; i++)
        CHECK(order[i] == want[i], "rebuild order[%d] = %zu, want %zu", i, order[i], want[i]);

    /* The rebuilt buckets follow the observed order. */
    struct ddp_param_shape s[6];
    for (int i = 0; i < 6; i++)
        s[i] = (struct ddp_param_shape){ 400, GX_FLOAT32 };
    struct ddp_assignment a;
    CHECK(ddp_assign(s, 6, order, 800, 1200, &a) == GX_OK, "assign rebuilt");
    const char *wantb[] = { "2,0", "4,5,3", "1" };
    expect(&a, wantb, 3, "rebuilt");
    ddp_assignment_free(&a);

    /* Garbage in the observed list (out of range, repeats) is ignored. */
    size_t bad[] = { 7, 1, 1, 0 };
    ddp_rebuild_order(bad, 4, 3, order);
    CHECK(order[0] == 1 && order[1] == 0 && order[2] == 2, "rebuild order from garbage: %zu %zu "
          "%zu", order[0], order[1], order[2]);
}

static void bad_orders(void)
{
    struct ddp_param_shape s[3] = { { 4, GX_FLOAT32 }, { 4, GX_FLOAT32 }, { 4, GX_FLOAT32 } };
    struct ddp_assignment a = { 0, NULL, NULL };
    size_t dup[] = { 0, 1, 1 }, range[] = { 0, 1, 3 };
    CHECK(ddp_assign(s, 3, dup, 10, 10, &a) == GX_EINVAL, "duplicate entry accepted");
    CHECK(strstr(gx_last_error(), "listed twice") != NULL, "message: %s", gx_last_error());
    CHECK(ddp_assign(s, 3, range, 10, 10, &a) == GX_EINVAL, "out of range entry accepted");
    CHECK(strstr(gx_last_error(), "out of range") != NULL, "message: %s", gx_last_error());
    CHECK(a.start == NULL, "output written on failure");
    struct ddp_param_shape bad[1] = { { 4, (enum gx_datatype)99 } };
    size_t o[1] = { 0 };
    CHECK(ddp_assign(bad, 1, o, 10, 10, &a) == GX_EINVAL, "invalid datatype accepted");
}

static void zero_sized(void)
{
    /* Zero-byte parameters are legal and land in buckets like the others. */
    struct ddp_param_shape s[3] = { { 0, GX_FLOAT32 }, { 0, GX_FLOAT32 }, { 8, GX_FLOAT32 } };
    size_t order[3];
    ddp_default_order(order, 3);
    struct ddp_assignment a;
    CHECK(ddp_assign(s, 3, order, 8, 8, &a) == GX_OK, "assign zero-sized");
    const char *want[] = { "2", "1,0" };
    expect(&a, want, 2, "zero-sized");
    ddp_assignment_free(&a);
}

int main(void)
{
    caps_and_first_bucket();
    oversized_parameter();
    datatypes();
    rebuild_order();
    bad_orders();
    zero_sized();
    CHECK_DONE("ddp_buckets_test");
}
