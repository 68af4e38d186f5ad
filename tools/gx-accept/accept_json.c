/*
 * accept_json.c - strict recursive-descent JSON reader with line numbers.
 * Written for gx-accept's spec (a few hundred bytes to a few KiB), so the
 * tree is built with plain malloc/realloc and errors stop at the first fault.
 */
#include "accept_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    const char *p, *end;
    int line;
    char *err;
    size_t err_len;
    int failed;
};

static int fail(struct reader *r, const char *fmt, ...)
{
    if (r->failed)
        return -1;
    r->failed = 1;
    int n = snprintf(r->err, r->err_len, "line %d: ", r->line);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->err_len)
        vsnprintf(r->err + n, r->err_len - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static void skip_space(struct reader *r)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (c == '\n')
            r->line++;
        else if (c != ' ' && c != '\t' && c != '\r')
            return;
        r->p++;
    }
}

static const char *describe(const struct reader *r)
{
    static __thread char buf[32];
    if (r->p >= r->end)
        return "the end of the file";
    unsigned char c = (unsigned char)*r->p;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, sizeof(buf), "'%c'", c);
    else
        snprintf(buf, sizeof(buf), "byte 0x%02x", c);
    return buf;
}

static int literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return fail(r, "unexpected %s (a value must be an object, array, string, number, "
                       "true, false or null)", describe(r));
    r->p += n;
    return 0;
}

static void put_utf8(char *out, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xc0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xe0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*n)++] = (char)(0xf0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

static int hex4(struct reader *r, unsigned *out)
{
    if (r->end - r->p < 4)
        return fail(r, "\\u escape needs four hex digits");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail(r, "\\u escape needs four hex digits");
    }
    r->p += 4;
    *out = v;
    return 0;
}

/* r->p is on the opening quote. The decoded string is never longer than the source. */
static int parse_string(struct reader *r, char **out)
{
    const char *start = ++r->p;
    const char *q = start;
    while (q < r->end && *q != '"') {
        if (*q == '\\' && q + 1 < r->end)
            q++;
        q++;
    }
    if (q >= r->end)
        return fail(r, "string not closed (missing '\"')");
    char *s = malloc((size_t)(q - start) + 1);
    if (!s)
        return fail(r, "out of memory");
    size_t n = 0;
    while (*r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20) {
            free(s);
            return fail(r, "control character 0x%02x inside a string (escape it)", c);
        }
        if (c != '\\') {
            s[n++] = (char)c;
            r->p++;
            continue;
        }
        r->p++;
        char e = *r->p++;
        unsigned cp;
        switch (e) {
        case '"': s[n++] = '"'; break;
        case '\\': s[n++] = '\\'; break;
        case '/': s[n++] = '/'; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u':
            if (hex4(r, &cp))
                goto err_free;
            if (cp >= 0xd800 && cp < 0xdc00) {
                unsigned lo;
                if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u') {
                    fail(r, "\\u%04x is half of a surrogate pair without its other half", cp);
                    goto err_free;
                }
                r->p += 2;
                if (hex4(r, &lo))
                    goto err_free;
                if (lo < 0xdc00 || lo > 0xdfff) {
                    fail(r, "\\u%04x is not the low half of a surrogate pair", lo);
                    goto err_free;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                fail(r, "\\u%04x is a lone low surrogate", cp);
                goto err_free;
            } else if (cp == 0) {
                fail(r, "\\u0000 is not allowed in a spec string");
                goto err_free;
            }
            put_utf8(s, &n, cp);
            break;
        default:
            fail(r, "unknown escape '\\%c' in a string", e);
            goto err_free;
        }
    }
    r->p++; /* closing quote */
    s[n] = '\0';
    *out = s;
    return 0;
err_free:
    free(s);
    return -1;
}

static int parse_number(struct reader *r, double *out)
{
    const char *s = r->p;
    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return fail(r, "bad number: a digit must follow '-'");
    if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9')
        return fail(r, "bad number: no leading zeros");
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
        r->p++;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(r, "bad number: a digit must follow '.'");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(r, "bad number: the exponent has no digits");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    char buf[64];
    size_t n = (size_t)(r->p - s);
    if (n >= sizeof(buf))
        return fail(r, "number too long");
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    double v = strtod(buf, NULL);
    if (errno == ERANGE && isinf(v))
        return fail(r, "number %s is out of range", buf);
    *out = v;
    return 0;
}

static int parse_value(struct reader *r, struct accept_json *v, int depth);

static int grow(struct reader *r, struct accept_json *v, size_t *cap)
{
    if (v->count < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 4;
    struct accept_json *n = realloc(v->items, ncap * sizeof(*n));
    if (!n)
        return fail(r, "out of memory");
    v->items = n;
    *cap = ncap;
    return 0;
}

static int parse_container(struct reader *r, struct accept_json *v, int depth, int object)
{
    char close = object ? '}' : ']';
    size_t cap = 0;
    r->p++;
    skip_space(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        skip_space(r);
        if (grow(r, v, &cap))
            return -1;
        struct accept_json *item = &v->items[v->count];
        memset(item, 0, sizeof(*item));
        if (object) {
            if (r->p >= r->end || *r->p != '"')
                return fail(r, "expected a key in double quotes, found %s%s", describe(r),
                            r->p < r->end && *r->p == '}' ? " (trailing comma?)" : "");
            item->key_line = r->line;
            char *key;
            if (parse_string(r, &key))
                return -1;
            for (size_t i = 0; i < v->count; i++)
                if (strcmp(v->items[i].key, key) == 0) {
                    fail(r, "key '%s' appears twice in one object (first on line %d)", key,
                         v->items[i].key_line);
                    free(key);
                    return -1;
                }
            item->key = key;
            v->count++; /* owned by the tree from here on, for freeing */
            skip_space(r);
            if (r->p >= r->end || *r->p != ':')
                return fail(r, "expected ':' after key '%s', found %s", key, describe(r));
            r->p++;
            if (parse_value(r, item, depth + 1))
                return -1;
        } else {
            v->count++;
            if (parse_value(r, item, depth + 1))
                return -1;
        }
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_space(r);
            if (r->p < r->end && *r->p == close)
                return fail(r, "trailing comma before '%c'", close);
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return 0;
        }
        return fail(r, "expected ',' or '%c', found %s", close, describe(r));
    }
}

static int parse_value(struct reader *r, struct accept_json *v, int depth)
{
    if (depth > ACCEPT_JSON_MAX_DEPTH)
        return fail(r, "nested deeper than %d levels", ACCEPT_JSON_MAX_DEPTH);
    skip_space(r);
    v->line = r->line;
    if (r->p >= r->end)
        return fail(r, "unexpected end of the file (a value is missing)");
    switch (*r->p) {
    case '{': v->type = ACCEPT_JSON_OBJECT; return parse_container(r, v, depth, 1);
    case '[': v->type = ACCEPT_JSON_ARRAY; return parse_container(r, v, depth, 0);
    case '"': v->type = ACCEPT_JSON_STRING; return parse_string(r, &v->string);
    case 't': v->type = ACCEPT_JSON_BOOL; v->boolean = 1; return literal(r, "true");
    case 'f': v->type = ACCEPT_JSON_BOOL; return literal(r, "false");
    case 'n': v->type = ACCEPT_JSON_NULL; return literal(r, "null");
    default:
        if (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) {
            v->type = ACCEPT_JSON_NUMBER;
            return parse_number(r, &v->number);
        }
        return fail(r, "unexpected %s (a value must be an object, array, string, number, "
                       "true, false or null)", describe(r));
    }
}

static void free_members(struct accept_json *v)
{
    for (size_t i = 0; i < v->count; i++)
        free_members(&v->items[i]);
    free(v->items);
    free(v->key);
    free(v->string);
}

void accept_json_free(struct accept_json *v)
{
    if (!v)
        return;
    free_members(v);
    free(v);
}

int accept_json_parse(const char *text, size_t len, struct accept_json **out, char *err,
                      size_t err_len)
{
    struct reader r = { .p = text, .end = text + len, .line = 1, .err = err,
                        .err_len = err_len };
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        r.p += 3; /* a UTF-8 byte-order mark, as some editors write */
    if (memchr(text, '\0', len)) {
        fail(&r, "the file holds a NUL byte (not a text file?)");
        return -1;
    }
    struct accept_json *v = calloc(1, sizeof(*v));
    if (!v) {
        fail(&r, "out of memory");
        return -1;
    }
    if (parse_value(&r, v, 0) == 0) {
        skip_space(&r);
        if (r.p < r.end)
            fail(&r, "unexpected %s after the top-level value", describe(&r));
    }
    if (r.failed) {
        accept_json_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

const struct accept_json *accept_json_get(const struct accept_json *obj, const char *key)
{
    if (!obj || obj->type != ACCEPT_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->items[i].key, key) == 0)
            return &obj->items[i];
    return NULL;
}

const char *accept_json_type_name(enum accept_json_type t)
{
    static const char *const names[] = { "null", "boolean", "number", "string", "array", "object" };
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "?";
}
