/*
 * param.h - the registry of GX_* environment variables.
 *
 * Every variable is declared exactly once, next to the code that reads it,
 * with GX_PARAM_DEFINE(). The definitions land in the "gx_params" linker
 * section, so the registry needs no central list: gx-info --env walks the
 * section, and gx_param_check_environment() warns about unknown GX_* names
 * (suggesting the nearest known one) and rejects malformed values.
 */
#ifndef GX_COMMON_PARAM_H
#define GX_COMMON_PARAM_H

#include <stdbool.h>
#include <stddef.h>

enum gx_param_type {
    GX_PARAM_INT,    /**< decimal integer */
    GX_PARAM_BOOL,   /**< 1/0, yes/no, true/false, on/off */
    GX_PARAM_SIZE,   /**< bytes, with optional K/M/G suffix (powers of 1024) */
    GX_PARAM_STRING, /**< free text */
    GX_PARAM_ENUM,   /**< one of the '|'-separated choices */
};

struct gx_param {
    const char *name;
    enum gx_param_type type;
    const char *default_value; /**< as text; "" means unset */
    const char *choices;       /**< GX_PARAM_ENUM: "a|b|c"; else NULL */
    const char *help;
};

#define GX_PARAM_DEFINE(var, NAME, TYPE, DEFAULT, CHOICES, HELP)               \
    __attribute__((used, section("gx_params"), aligned(sizeof(void *))))      \
    const struct gx_param var = { NAME, TYPE, DEFAULT, CHOICES, HELP }

/** Iterate over the registry: returns the i-th parameter or NULL past the end. */
const struct gx_param *gx_param_at(size_t i);
/** Look up a parameter by name, or NULL. */
const struct gx_param *gx_param_find(const char *name);
const char *gx_param_type_name(enum gx_param_type type);

/** Raw text: the environment value if set and non-empty, else the default
 *  (which may be ""). Never NULL. */
const char *gx_param_text(const struct gx_param *p);
/** True when the variable is set (non-empty) in the environment. */
bool gx_param_is_set(const struct gx_param *p);

/* Typed readers. On a malformed value they return GX_EINVAL with an error
 * that names the variable and the accepted form; *out is untouched. */
int gx_param_int(const struct gx_param *p, long long *out);
int gx_param_bool(const struct gx_param *p, bool *out);
int gx_param_size(const struct gx_param *p, size_t *out);
/** Index of the value within the choices of an ENUM parameter. */
int gx_param_enum(const struct gx_param *p, int *out);

/** The value of the NCCL_* variable standing in for `gx_name` (translated to
 *  gx's form), or NULL; `from` (may be NULL) gets its name. param_nccl.c. */
const char *gx_param_nccl_value(const char *gx_name, const char **from);
/** The i-th NCCL_* variable gx knows (0 or -1 past the end): its GX_*
 *  equivalent and whether gx reads it. */
int gx_param_nccl_at(size_t i, const char **nccl, const char **gx, bool *read);
/** Say once per variable which NCCL_* values gx reads and which it ignores. */
void gx_param_nccl_report(void);

/** Parse helpers shared with command-line tools. Return 0 or -1. */
int gx_parse_int(const char *text, long long *out);
int gx_parse_bool(const char *text, bool *out);
int gx_parse_size(const char *text, size_t *out);

/**
 * Check the environment once: warn about every unknown GX_* variable (naming
 * the nearest known one) and fail on the first malformed known value.
 */
int gx_param_check_environment(void);

#endif
