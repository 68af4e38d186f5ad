/*
 * accept_json.h - a small strict JSON reader (RFC 8259) for gx-accept's spec
 * file. Every value remembers the line it starts on, so the spec checker can
 * name the line of a wrong key. No comments, no trailing commas, no
 * duplicate keys, no NaN/Infinity, nesting at most ACCEPT_JSON_MAX_DEPTH.
 *
 * Owns the value tree and its memory; knows nothing about the spec's keys.
 */
#ifndef GX_ACCEPT_JSON_H
#define GX_ACCEPT_JSON_H

#include <stddef.h>

#define ACCEPT_JSON_MAX_DEPTH 32

enum accept_json_type {
    ACCEPT_JSON_NULL,
    ACCEPT_JSON_BOOL,
    ACCEPT_JSON_NUMBER,
    ACCEPT_JSON_STRING,
    ACCEPT_JSON_ARRAY,
    ACCEPT_JSON_OBJECT,
};

struct accept_json {
    enum accept_json_type type;
    int line;          /* line (1-based) where the value starts */
    int key_line;      /* for an object member: the line of its key */
    char *key;         /* for an object member: its key, else NULL */
    int boolean;
    double number;
    char *string;      /* NUL-terminated UTF-8; strings holding NUL are refused */
    size_t count;      /* array elements / object members */
    struct accept_json *items;
};

/**
 * Parse `len` bytes of `text`. On success returns 0 and *out (free with
 * accept_json_free). On error returns -1 and writes "line N: what" to err.
 */
int accept_json_parse(const char *text, size_t len, struct accept_json **out, char *err,
                      size_t err_len);
void accept_json_free(struct accept_json *v);

/** Member `key` of object `obj`, or NULL. */
const struct accept_json *accept_json_get(const struct accept_json *obj, const char *key);

/** "null", "boolean", "number", "string", "array", "object". */
const char *accept_json_type_name(enum accept_json_type t);

#endif
