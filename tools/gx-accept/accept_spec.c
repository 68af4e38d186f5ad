/*
 * accept_spec.c - the spec schema (one table per section), its defaults and
 * the checks that name file, line and key for every fault.
 */
#include "accept_spec.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accept_json.h"

#define SPEC_MAX_BYTES (1 << 20)

enum field_kind { F_INT, F_NUM, F_BOOL, F_STR, F_SECTION };

struct field {
    const char *key;
    enum field_kind kind;
    int required;
    double min, max;        /* numbers: allowed range */
    size_t off, len;        /* where the value goes in the target struct (len: strings) */
    const char *const *choices; /* strings: allowed values, NULL = any */
};

static const char *const path_names[] = { "PIX", "PXB", "PHB", "NODE", "SYS", NULL };

#define NODE_FIELD(k, kind, req, lo, hi, member)                                               \
    { k, kind, req, lo, hi, offsetof(struct accept_node_spec, member),                         \
      sizeof(((struct accept_node_spec *)0)->member), NULL }

static const struct field node_fields[] = {
    NODE_FIELD("gpus", F_INT, 1, 0, 1024, gpus),
    NODE_FIELD("nics", F_INT, 1, 0, 1024, nics),
    NODE_FIELD("nic_min_gbps", F_NUM, 0, 0, 1e6, nic_min_gbps),
    { "max_nic_path", F_STR, 0, 0, 0, offsetof(struct accept_node_spec, max_nic_path),
      sizeof(((struct accept_node_spec *)0)->max_nic_path), path_names },
    NODE_FIELD("cpu_governor", F_STR, 0, 0, 0, cpu_governor),
    NODE_FIELD("dpdk", F_BOOL, 0, 0, 0, dpdk),
    NODE_FIELD("hugepages_min_mb", F_NUM, 0, 0, 1e9, hugepages_min_mb),
    NODE_FIELD("topology_xml", F_STR, 0, 0, 0, topology_xml),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

#define SPEC_FIELD(k, kind, req, lo, hi, member)                                               \
    { k, kind, req, lo, hi, offsetof(struct accept_spec, member),                              \
      sizeof(((struct accept_spec *)0)->member), NULL }
#define SECTION(k, req) { k, F_SECTION, req, 0, 0, 0, 0, NULL }

static const struct field top_fields[] = {
    SPEC_FIELD("version", F_INT, 1, 1, 1, version),
    SPEC_FIELD("name", F_STR, 0, 0, 0, name),
    SPEC_FIELD("nodes", F_INT, 0, 1, 100000, nodes),
    SPEC_FIELD("ranks_per_node", F_INT, 0, 1, 4096, ranks_per_node),
    SECTION("node", 1), SECTION("node_overrides", 0), SECTION("clock", 0), SECTION("p2p", 0),
    SECTION("allreduce", 0), SECTION("allgather", 0), SECTION("soak", 0),
    SECTION("outliers", 0),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

static const struct field clock_fields[] = {
    SPEC_FIELD("max_skew_ms", F_NUM, 0, 1e-3, 1e6, max_clock_skew_ms),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

static const struct field p2p_fields[] = {
    SPEC_FIELD("bytes", F_INT, 0, 1, 1 << 30, p2p_bytes),
    SPEC_FIELD("message_bytes", F_INT, 0, 1, 64 << 20, p2p_message_bytes),
    SPEC_FIELD("repeats", F_INT, 0, 1, 100, p2p_repeats),
    SPEC_FIELD("min_gbs", F_NUM, 0, 0, 1e6, p2p_min_gbs),
    SPEC_FIELD("max_latency_us", F_NUM, 0, 1e-3, 1e9, p2p_max_latency_us),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

#define SWEEP_FIELD(k, kind, lo, hi, member)                                                   \
    { k, kind, 0, lo, hi, offsetof(struct accept_sweep_spec, member),                          \
      sizeof(((struct accept_sweep_spec *)0)->member), NULL }

static const struct field sweep_fields[] = {
    SWEEP_FIELD("min_bytes", F_INT, 8, 1 << 30, min_bytes),
    SWEEP_FIELD("max_bytes", F_INT, 8, 1 << 30, max_bytes),
    SWEEP_FIELD("factor", F_INT, 2, 1024, factor),
    SWEEP_FIELD("iters", F_INT, 1, 100000, iters),
    SWEEP_FIELD("min_busbw_gbs", F_NUM, 0, 1e6, min_busbw_gbs),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

static const struct field soak_fields[] = {
    SPEC_FIELD("seconds", F_NUM, 0, 0.1, 7 * 86400, soak_seconds),
    SPEC_FIELD("max_bytes", F_INT, 0, 64, 1 << 30, soak_max_bytes),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

static const struct field outlier_fields[] = {
    SPEC_FIELD("fraction", F_NUM, 0, 0.01, 0.99, outlier_fraction),
    { NULL, 0, 0, 0, 0, 0, 0, NULL },
};

struct checker {
    const char *path;
    char *err;
    size_t err_len;
};

static int spec_error(const struct checker *c, int line, const char *key, const char *fmt, ...)
{
    int n = snprintf(c->err, c->err_len, "%s:%d: %s: ", c->path, line, key);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < c->err_len)
        vsnprintf(c->err + n, c->err_len - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static void known_keys(const struct field *fields, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (const struct field *f = fields; f->key && n < len; f++)
        n += (size_t)snprintf(out + n, len - n, "%s%s", n ? ", " : "", f->key);
}

static int store_field(const struct checker *c, const struct field *f,
                       const struct accept_json *v, const char *dotted, void *base)
{
    char *dst = (char *)base + f->off;
    switch (f->kind) {
    case F_INT:
    case F_NUM:
        if (v->type != ACCEPT_JSON_NUMBER)
            return spec_error(c, v->line, dotted, "expected a number, found %s %s",
                              v->type == ACCEPT_JSON_ARRAY || v->type == ACCEPT_JSON_OBJECT
                                  ? "an" : "a", accept_json_type_name(v->type));
        if (f->kind == F_INT && v->number != floor(v->number))
            return spec_error(c, v->line, dotted, "expected a whole number, found %g",
                              v->number);
        if (v->number < f->min || v->number > f->max)
            return spec_error(c, v->line, dotted, "%g is out of range (%g to %g)", v->number,
                              f->min, f->max);
        *(double *)dst = v->number;
        return 0;
    case F_BOOL:
        if (v->type != ACCEPT_JSON_BOOL)
            return spec_error(c, v->line, dotted, "expected true or false, found %s %s",
                              v->type == ACCEPT_JSON_ARRAY || v->type == ACCEPT_JSON_OBJECT
                                  ? "an" : "a", accept_json_type_name(v->type));
        *(int *)dst = v->boolean;
        return 0;
    case F_STR:
        if (v->type != ACCEPT_JSON_STRING)
            return spec_error(c, v->line, dotted, "expected a string, found %s %s",
                              v->type == ACCEPT_JSON_ARRAY || v->type == ACCEPT_JSON_OBJECT
                                  ? "an" : "a", accept_json_type_name(v->type));
        if (strlen(v->string) >= f->len)
            return spec_error(c, v->line, dotted, "longer than %zu characters", f->len - 1);
        if (f->choices) {
            int ok = 0;
            for (const char *const *ch = f->choices; *ch; ch++)
                ok |= strcmp(*ch, v->string) == 0;
            if (!ok)
                return spec_error(c, v->line, dotted,
                                  "'%s' is not one of PIX, PXB, PHB, NODE, SYS", v->string);
        }
        memcpy(dst, v->string, strlen(v->string) + 1);
        return 0;
    case F_SECTION:
        return 0;
    }
    return 0;
}

/* Check every member of `obj` against `fields` and store the values into base.
 * `prefix` is the dotted name of obj ("" at the top). */
static int check_object(const struct checker *c, const struct accept_json *obj,
                        const char *prefix, const struct field *fields, void *base,
                        int require)
{
    char dotted[160], known[400];
    if (obj->type != ACCEPT_JSON_OBJECT)
        return spec_error(c, obj->line, prefix[0] ? prefix : "(top level)",
                          "expected an object, found %s %s",
                          obj->type == ACCEPT_JSON_ARRAY ? "an" : "a",
                          accept_json_type_name(obj->type));
    for (size_t i = 0; i < obj->count; i++) {
        const struct accept_json *m = &obj->items[i];
        const struct field *f = fields;
        while (f->key && strcmp(f->key, m->key) != 0)
            f++;
        snprintf(dotted, sizeof(dotted), "%s%s%s", prefix, prefix[0] ? "." : "", m->key);
        if (!f->key) {
            known_keys(fields, known, sizeof(known));
            return spec_error(c, m->key_line, dotted, "unknown key (known here: %s)", known);
        }
        if (store_field(c, f, m, dotted, base))
            return -1;
    }
    for (const struct field *f = fields; require && f->key; f++) {
        if (f->required && !accept_json_get(obj, f->key)) {
            snprintf(dotted, sizeof(dotted), "%s%s%s", prefix, prefix[0] ? "." : "", f->key);
            return spec_error(c, obj->line, dotted, "missing required key (in the object "
                              "starting on line %d)", obj->line);
        }
    }
    return 0;
}

static void set_defaults(struct accept_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->nodes = ACCEPT_UNSET;
    s->ranks_per_node = ACCEPT_UNSET;
    s->node.nic_min_gbps = ACCEPT_UNSET;
    s->node.hugepages_min_mb = ACCEPT_UNSET;
    s->max_clock_skew_ms = 10;
    s->p2p_bytes = 16 << 20;
    s->p2p_message_bytes = 1 << 20;
    s->p2p_repeats = 3;
    s->p2p_min_gbs = ACCEPT_UNSET;
    s->p2p_max_latency_us = ACCEPT_UNSET;
    struct accept_sweep_spec sw = { 0, 1024, 64 << 20, 4, 10, ACCEPT_UNSET };
    s->allreduce = sw;
    s->allgather = sw;
    s->soak_seconds = 10;
    s->soak_max_bytes = 1 << 20;
    s->outlier_fraction = 0.8;
}

static int check_sweep(const struct checker *c, const struct accept_json *v, const char *name,
                       struct accept_sweep_spec *sw)
{
    if (check_object(c, v, name, sweep_fields, sw, 1))
        return -1;
    sw->enabled = 1;
    if (sw->min_bytes > sw->max_bytes) {
        char key[64];
        snprintf(key, sizeof(key), "%s.min_bytes", name);
        return spec_error(c, v->line, key, "%.0f is larger than max_bytes %.0f", sw->min_bytes,
                          sw->max_bytes);
    }
    return 0;
}

static int check_overrides(const struct checker *c, const struct accept_json *v,
                           struct accept_spec *s)
{
    if (v->type != ACCEPT_JSON_OBJECT)
        return spec_error(c, v->line, "node_overrides", "expected an object of node names, "
                          "found %s", accept_json_type_name(v->type));
    for (size_t i = 0; i < v->count; i++) {
        const struct accept_json *m = &v->items[i];
        char prefix[160];
        snprintf(prefix, sizeof(prefix), "node_overrides.%s", m->key);
        if (s->noverrides == ACCEPT_MAX_OVERRIDES)
            return spec_error(c, m->key_line, prefix, "more than %d overrides",
                              ACCEPT_MAX_OVERRIDES);
        if (!m->key[0] || strlen(m->key) >= ACCEPT_NAME_MAX)
            return spec_error(c, m->key_line, prefix, "a node name must have 1 to %d "
                              "characters", ACCEPT_NAME_MAX - 1);
        struct accept_override *o = &s->overrides[s->noverrides++];
        memcpy(o->node, m->key, strlen(m->key) + 1);
        o->spec = s->node; /* an override changes only the keys it names */
        if (check_object(c, m, prefix, node_fields, &o->spec, 0))
            return -1;
    }
    return 0;
}

int accept_spec_parse(const char *path, const char *text, size_t len, struct accept_spec *spec,
                      char *err, size_t err_len)
{
    struct checker c = { path, err, err_len };
    char jerr[256];
    struct accept_json *root;
    struct accept_spec s;
    set_defaults(&s);
    if (accept_json_parse(text, len, &root, jerr, sizeof(jerr))) {
        snprintf(err, err_len, "%s:%s (not valid JSON)", path, jerr + 5); /* "line N: " -> "N: " */
        return -1;
    }
    int rc = -1;
    if (check_object(&c, root, "", top_fields, &s, 1))
        goto out;
    const struct accept_json *v;
    const struct accept_json *node = accept_json_get(root, "node");
    if (check_object(&c, node, "node", node_fields, &s.node, 1))
        goto out;
    /* Overrides start from the node section, so they are read after it. */
    if ((v = accept_json_get(root, "node_overrides")) && check_overrides(&c, v, &s))
        goto out;
    if ((v = accept_json_get(root, "clock")) &&
        check_object(&c, v, "clock", clock_fields, &s, 1))
        goto out;
    if ((v = accept_json_get(root, "p2p"))) {
        if (check_object(&c, v, "p2p", p2p_fields, &s, 1))
            goto out;
        s.p2p_enabled = 1;
        if (s.p2p_message_bytes > s.p2p_bytes) {
            spec_error(&c, v->line, "p2p.message_bytes", "%.0f is larger than p2p.bytes %.0f",
                       s.p2p_message_bytes, s.p2p_bytes);
            goto out;
        }
    }
    if ((v = accept_json_get(root, "allreduce")) && check_sweep(&c, v, "allreduce", &s.allreduce))
        goto out;
    if ((v = accept_json_get(root, "allgather")) && check_sweep(&c, v, "allgather", &s.allgather))
        goto out;
    if ((v = accept_json_get(root, "soak"))) {
        if (check_object(&c, v, "soak", soak_fields, &s, 1))
            goto out;
        s.soak_enabled = 1;
    }
    if ((v = accept_json_get(root, "outliers")) &&
        check_object(&c, v, "outliers", outlier_fields, &s, 1))
        goto out;
    *spec = s;
    rc = 0;
out:
    accept_json_free(root);
    return rc;
}

int accept_spec_load(const char *path, struct accept_spec *spec, char *err, size_t err_len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot open the spec file: %s%s", path, strerror(errno),
                 errno == ELOOP ? " (a symbolic link is refused)" : "");
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > SPEC_MAX_BYTES ||
        (st.st_uid != geteuid() && st.st_uid != 0)) {
        snprintf(err, err_len, "%s: the spec must be a regular file of at most %d bytes owned "
                 "by you or root", path, SPEC_MAX_BYTES);
        close(fd);
        return -1;
    }
    char *text = malloc((size_t)st.st_size + 1);
    ssize_t got = text ? read(fd, text, (size_t)st.st_size) : -1;
    close(fd);
    if (got != st.st_size) {
        snprintf(err, err_len, "%s: cannot read the spec file", path);
        free(text);
        return -1;
    }
    int rc = accept_spec_parse(path, text, (size_t)got, spec, err, err_len);
    free(text);
    return rc;
}

const struct accept_node_spec *accept_spec_for_node(const struct accept_spec *spec,
                                                    const char *name)
{
    for (int i = 0; i < spec->noverrides; i++)
        if (strcmp(spec->overrides[i].node, name) == 0)
            return &spec->overrides[i].spec;
    return &spec->node;
}
