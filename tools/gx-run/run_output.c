/* run_output.c - line tagging for gx-run --tag-output. */
#include "run_output.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void emit_line(struct run_stream *s, const char *line, size_t n)
{
    char prefix[32];
    int plen = snprintf(prefix, sizeof(prefix), "[rank %d] ", s->rank);
    char out[sizeof(s->buf) + 40];
    memcpy(out, prefix, (size_t)plen);
    memcpy(out + plen, line, n);
    size_t total = (size_t)plen + n;
    if (total == 0 || out[total - 1] != '\n')
        out[total++] = '\n';
    write_all(s->out_fd, out, total); /* one write per line keeps lines whole */
}

int run_stream_pump(struct run_stream *s)
{
    if (s->fd < 0)
        return -1;
    ssize_t n = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0) {
        run_stream_flush(s);
        close(s->fd);
        s->fd = -1;
        return -1;
    }
    s->len += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] == '\n') {
            emit_line(s, s->buf + start, i + 1 - start);
            start = i + 1;
        }
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    if (s->len == sizeof(s->buf)) { /* a very long line: emit it in pieces */
        emit_line(s, s->buf, s->len);
        s->len = 0;
    }
    return 0;
}

void run_stream_flush(struct run_stream *s)
{
    if (s->len) {
        emit_line(s, s->buf, s->len);
        s->len = 0;
    }
}
