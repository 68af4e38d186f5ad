/*
 * param.c - reading, validating and listing GX_* parameters. The parameters
 * themselves are defined by the modules that use them (GX_PARAM_DEFINE).
 */
#include "common/param.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "gx/gx.h"

extern char **environ;
extern const struct gx_param __start_gx_params[] __attribute__((visibility("hidden")));
extern const struct gx_param __stop_gx_params[] __attribute__((visibility("hidden")));

const struct gx_param *gx_param_at(size_t i)
{
    size_t n = (size_t)(__stop_gx_params - __start_gx_params);
    return i < n ? &__start_gx_params[i] : NULL;
}

const struct gx_param *gx_param_find(const char *name)
{
    for (size_t i = 0; gx_param_at(i); i++)
        if (strcmp(gx_param_at(i)->name, name) == 0)
            return gx_param_at(i);
    return NULL;
}

const char *gx_param_type_name(enum gx_param_type type)
{
    switch (type) {
    case GX_PARAM_INT: return "int";
    case GX_PARAM_BOOL: return "bool";
    case GX_PARAM_SIZE: return "size";
    case GX_PARAM_STRING: return "string";
    case GX_PARAM_ENUM: return "enum";
    }
    return "?";
}

bool gx_param_is_set(const struct gx_param *p)
{
    const char *v = getenv(p->name);
    return (v && v[0]) || gx_param_nccl_value(p->name, NULL);
}

const char *gx_param_text(const struct gx_param *p)
{
    const char *v = getenv(p->name);
    if (v && v[0])
        return v;
    v = gx_param_nccl_value(p->name, NULL); /* NCCL_* equivalent (param_nccl.c) */
    return v ? v : p->default_value;
}

int gx_parse_int(const char *text, long long *out)
{
    if (!text || !text[0])
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int gx_parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = { "1", "y", "yes", "true", "on" };
    static const char *const no[] = { "0", "n", "no", "false", "off" };
    if (!text)
        return -1;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

int gx_parse_size(const char *text, size_t *out)
{
    if (!text || !text[0] || text[0] == '-')
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int malformed(const struct gx_param *p, const char *form)
{
    const char *from = NULL;
    const char *gx = getenv(p->name);
    if (!gx || !gx[0])
        gx_param_nccl_value(p->name, &from);
    return gx_fail(GX_EINVAL, GX_SUB_PARAM, "%s%s%s%s='%s' is malformed: expected %s", p->name,
                   from ? " (read from " : "", from ? from : "", from ? ")" : "",
                   gx_param_text(p), form);
}

int gx_param_int(const struct gx_param *p, long long *out)
{
    long long v;
    if (gx_parse_int(gx_param_text(p), &v) != 0)
        return malformed(p, "a decimal integer");
    *out = v;
    return GX_OK;
}

int gx_param_bool(const struct gx_param *p, bool *out)
{
    bool v;
    if (gx_parse_bool(gx_param_text(p), &v) != 0)
        return malformed(p, "1/0, yes/no, true/false or on/off");
    *out = v;
    return GX_OK;
}

int gx_param_size(const struct gx_param *p, size_t *out)
{
    size_t v;
    if (gx_parse_size(gx_param_text(p), &v) != 0)
        return malformed(p, "a byte count with an optional K, M or G suffix");
    *out = v;
    return GX_OK;
}

int gx_param_enum(const struct gx_param *p, int *out)
{
    const char *v = gx_param_text(p);
    size_t vlen = strlen(v);
    int index = 0;
    for (const char *c = p->choices; c && *c; index++) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == vlen && strncasecmp(c, v, len) == 0) {
            *out = index;
            return GX_OK;
        }
        if (!bar)
            break;
        c = bar + 1;
    }
    char form[256];
    snprintf(form, sizeof(form), "one of %s", p->choices ? p->choices : "(none)");
    return malformed(p, form);
}

static int validate(const struct gx_param *p)
{
    union {
        long long i;
        bool b;
        size_t s;
        int e;
    } v;
    switch (p->type) {
    case GX_PARAM_INT: return gx_param_int(p, &v.i);
    case GX_PARAM_BOOL: return gx_param_bool(p, &v.b);
    case GX_PARAM_SIZE: return gx_param_size(p, &v.s);
    case GX_PARAM_ENUM: return gx_param_enum(p, &v.e);
    case GX_PARAM_STRING: return GX_OK;
    }
    return GX_OK;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return SIZE_MAX;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

int gx_param_check_environment(void)
{
    int status = GX_OK;
    gx_param_nccl_report();
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "GX_", 3) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        char name[128];
        size_t len = (size_t)(eq - *e);
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
        memcpy(name, *e, len);
        name[len] = '\0';
        const struct gx_param *p = gx_param_find(name);
        if (p) {
            if (status == GX_OK)
                status = validate(p);
            continue;
        }
        const struct gx_param *best = NULL;
        size_t best_d = SIZE_MAX;
        for (size_t i = 0; gx_param_at(i); i++) {
            size_t d = edit_distance(name, gx_param_at(i)->name);
            if (d < best_d) {
                best_d = d;
                best = gx_param_at(i);
            }
        }
        if (best)
            GX_WARN(GX_SUB_PARAM, "unknown variable %s ignored; did you mean %s?", name,
                    best->name);
        else
            GX_WARN(GX_SUB_PARAM, "unknown variable %s ignored", name);
    }
    return status;
}
