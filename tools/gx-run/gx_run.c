/*
 * gx-run - start the ranks of a gx job on this node, in the spirit of
 * torchrun / mpirun.
 *
 * It sets each rank's environment (GX_* and torchrun's RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, ...), generates the job key, hands rank 0 an
 * already-bound rendezvous socket (no port race), forwards SIGINT/SIGTERM,
 * and when a rank fails it stops the others and exits with that rank's
 * status, naming it. Ranks die with it: each is started with
 * PR_SET_PDEATHSIG(SIGKILL), so a gx-run killed by kill -9 or the OOM killer
 * leaves no orphans holding CPUs and ports.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/param.h"
#include "common/sock.h"
#include "gx/gx.h"
#include "run_output.h"

#define KILL_GRACE_MS 3000

struct rank_proc {
    pid_t pid;
    int rank;
    bool running;
    int status; /* wait status */
    struct run_stream out, err;
};

struct run_opts {
    int nlocal;
    int nnodes;
    int node_rank;
    const char *master;
    double timeout_s;
    bool tag_output;
    bool keep_going;
    int max_restarts;
    const char *job_key;
    const char *job_key_file;
    const char *node_id;
    char **argv;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gx-run -n N [options] PROGRAM [ARGS...]\n"
            "Start N ranks of PROGRAM on this node as one gx job.\n\n"
            "  -n, --nproc N        ranks on this node (required, >= 1); also -np N, --np N\n"
            "                       as mpirun spells it\n"
            "      --nnodes M       nodes in the job (default 1); run one gx-run per node\n"
            "      --node-rank R    this node's index, 0..M-1 (default 0)\n"
            "      --master H:P     rendezvous address (rank 0's node listens there);\n"
            "                       default 127.0.0.1 with a free port (single node only)\n"
            "      --job-key-file F shared secret: the first line of file F, which must be\n"
            "                       yours and not group/other-readable (default:\n"
            "                       GX_JOB_KEY_FILE, GX_JOB_KEY, or a generated 128-bit key;\n"
            "                       a key is required with --nnodes > 1)\n"
            "      --job-key KEY    the same, given on the command line: visible to every\n"
            "                       user in ps; prefer --job-key-file\n"
            "      --node-id ID     node identity for the ranks (sets GX_NODE_ID)\n"
            "      --timeout S      stop every rank after S seconds (exit 124)\n"
            "      --tag-output     prefix each output line with [rank N]\n"
            "      --keep-going     when a rank fails, let the others finish\n"
            "      --max-restarts N when a rank fails, stop the job and start it again, up\n"
            "                       to N times (GX_RESTART_COUNT and torchrun's\n"
            "                       TORCHELASTIC_RESTART_COUNT tell the ranks which run;\n"
            "                       not after a signal or --timeout); every node's gx-run\n"
            "                       restarts its own ranks\n"
            "  -h, --help           this help\n\n"
            "Each rank gets GX_RANK, GX_SIZE, GX_LOCAL_RANK, GX_LOCAL_SIZE, GX_MASTER_ADDR,\n"
            "GX_MASTER_PORT, GX_JOB_KEY and torchrun's RANK, WORLD_SIZE, LOCAL_RANK,\n"
            "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. MASTER_PORT is for torch's store\n"
            "(init_process_group), not gx's: a free port reserved for the job, or P+1\n"
            "with --master H:P.\n"
            "Exit status: 0 when every rank exits 0; else the first failing rank's\n"
            "status (128+signal if killed).\n"
            "SIGINT, SIGTERM and SIGHUP are passed on to every rank; if gx-run itself is\n"
            "killed (kill -9, the OOM killer), its ranks are killed with it.\n");
}

static int parse_count(const char *opt, const char *text, int min, int max, int *out)
{
    long long v;
    if (gx_parse_int(text, &v) != 0 || v < min || v > max) {
        fprintf(stderr, "gx-run: %s '%s' is not a number from %d to %d\n", opt, text, min, max);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* mpirun's "-np N": getopt would read it as -n with argument "p", so spell it
 * --np before parsing (only among gx-run's own options, not the program's). */
static void accept_mpirun_np(int argc, char **argv)
{
    static const char *const with_arg[] = { "-n", "-np", "--np", "--nproc", "--nnodes",
                                            "--node-rank", "--master", "--job-key", "--node-id",
                                            "--timeout", "--max-restarts", NULL };
    static char np_long[] = "--np";
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' || strcmp(argv[i], "--") == 0)
            return;
        if (strcmp(argv[i], "-np") == 0)
            argv[i] = np_long;
        for (const char *const *w = with_arg; *w; w++)
            if (strcmp(argv[i], *w) == 0) {
                i++;
                break;
            }
    }
}

static int parse_args(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {
        { "nproc", required_argument, NULL, 'n' },
        { "np", required_argument, NULL, 'n' },
        { "nnodes", required_argument, NULL, 'N' },
        { "node-rank", required_argument, NULL, 'R' },
        { "master", required_argument, NULL, 'm' },
        { "job-key", required_argument, NULL, 'k' },
        { "job-key-file", required_argument, NULL, 'F' },
        { "node-id", required_argument, NULL, 'i' },
        { "timeout", required_argument, NULL, 't' },
        { "tag-output", no_argument, NULL, 'T' },
        { "keep-going", no_argument, NULL, 'K' },
        { "max-restarts", required_argument, NULL, 'r' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    *o = (struct run_opts){ .nlocal = -1, .nnodes = 1 };
    accept_mpirun_np(argc, argv);
    int c;
    while ((c = getopt_long(argc, argv, "+n:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_count("-n", optarg, 1, 4096, &o->nlocal))
                return 2;
            break;
        case 'N':
            if (parse_count("--nnodes", optarg, 1, 100000, &o->nnodes))
                return 2;
            break;
        case 'R':
            if (parse_count("--node-rank", optarg, 0, 99999, &o->node_rank))
                return 2;
            break;
        case 'm': o->master = optarg; break;
        case 'k': o->job_key = optarg; break;
        case 'F': o->job_key_file = optarg; break;
        case 'i': o->node_id = optarg; break;
        case 't': {
            char *end;
            o->timeout_s = strtod(optarg, &end);
            if (*end || o->timeout_s <= 0) {
                fprintf(stderr, "gx-run: --timeout '%s' is not a positive number of seconds\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'T': o->tag_output = true; break;
        case 'K': o->keep_going = true; break;
        case 'r':
            if (parse_count("--max-restarts", optarg, 0, 1000, &o->max_restarts))
                return 2;
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (o->nlocal < 0) {
        fprintf(stderr, "gx-run: the rank count is required: -n N\n");
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "gx-run: no program given\n");
        return 2;
    }
    if (o->node_rank >= o->nnodes) {
        fprintf(stderr, "gx-run: --node-rank %d is out of range for --nnodes %d\n",
                o->node_rank, o->nnodes);
        return 2;
    }
    if (o->nnodes > 1 && !o->master) {
        fprintf(stderr, "gx-run: --nnodes %d needs --master HOST:PORT (reachable from every "
                "node)\n", o->nnodes);
        return 2;
    }
    if (o->job_key && o->job_key_file) {
        fprintf(stderr, "gx-run: give --job-key or --job-key-file, not both\n");
        return 2;
    }
    const char *env_file = getenv("GX_JOB_KEY_FILE");
    if (!o->job_key && !o->job_key_file) {
        o->job_key = getenv("GX_JOB_KEY");
        if ((!o->job_key || !o->job_key[0]) && env_file && env_file[0])
            o->job_key_file = env_file;
    }
    if (o->job_key_file) {
        static char file_key[256];
        char err[768];
        if (gx_auth_read_key_file(o->job_key_file, file_key, sizeof(file_key), err,
                                  sizeof(err)) != GX_OK) {
            fprintf(stderr, "gx-run: %s: %s\n", o->job_key_file == env_file ? "GX_JOB_KEY_FILE"
                    : "--job-key-file", err);
            return 2;
        }
        o->job_key = file_key;
    }
    if (o->nnodes > 1 && (!o->job_key || !o->job_key[0])) {
        fprintf(stderr, "gx-run: --nnodes %d needs a shared job key: pass --job-key-file (or "
                "set GX_JOB_KEY_FILE) with the same secret on every node\n", o->nnodes);
        return 2;
    }
    o->argv = argv + optind;
    return 0;
}

static void setenv_int(const char *name, long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v);
    setenv(name, buf, 1);
}

static const char *signal_name(int sig)
{
    const char *d = sigdescr_np(sig);
    return d ? d : "unknown signal";
}

static void describe_exit(const struct rank_proc *p, char *buf, size_t len)
{
    if (WIFSIGNALED(p->status))
        snprintf(buf, len, "rank %d (pid %d) was killed by signal %d (%s)", p->rank,
                 (int)p->pid, WTERMSIG(p->status), signal_name(WTERMSIG(p->status)));
    else
        snprintf(buf, len, "rank %d (pid %d) exited with status %d", p->rank, (int)p->pid,
                 WEXITSTATUS(p->status));
}

static int exit_code_of(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

static void signal_all(struct rank_proc *procs, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (procs[i].running)
            kill(procs[i].pid, sig);
}

/* The rendezvous listener rank 0 inherits; NULL master = loopback, free port. */
static int bind_master(const struct run_opts *o, int *fd, char *host, size_t hlen, int *port)
{
    struct gx_sockaddr addr;
    const char *master = o->master ? o->master : "127.0.0.1:0";
    if (gx_sock_resolve(master, -1, "--master", &addr) != GX_OK) {
        fprintf(stderr, "gx-run: %s\n", gx_last_error());
        return -1;
    }
    if (gx_sock_listen(&addr, 1024, fd) != GX_OK) {
        fprintf(stderr, "gx-run: cannot listen on %s: %s\n", master, strerror(errno));
        return -1;
    }
    *port = gx_sock_port(&addr);
    const char *colon = strrchr(master, ':');
    size_t n = colon ? (size_t)(colon - master) : strlen(master);
    if (n && master[0] == '[' && master[n - 1] == ']') {
        master++;
        n -= 2;
    }
    snprintf(host, hlen, "%.*s", (int)n, master);
    return 0;
}

static int spawn_rank(const struct run_opts *o, struct rank_proc *p, int local, int listen_fd,
                      const char *master_host, const int ports[2], const char *job_key)
{
    int out_pipe[2] = { -1, -1 }, err_pipe[2] = { -1, -1 };
    if (o->tag_output && (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC))) {
        perror("gx-run: pipe");
        return -1;
    }
    int world = o->nlocal * o->nnodes;
    int rank = o->node_rank * o->nlocal + local;
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("gx-run: fork");
        return -1;
    }
    if (pid == 0) {
        /* Die with gx-run. If it died between fork and prctl, the signal was
         * never armed: the parent is then no longer gx-run, so leave now. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
            fprintf(stderr, "gx-run: rank %d: prctl(PR_SET_PDEATHSIG): %s\n", rank,
                    strerror(errno));
            _exit(127);
        }
        if (getppid() != launcher)
            _exit(128 + SIGKILL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (o->tag_output) {
            dup2(out_pipe[1], 1);
            dup2(err_pipe[1], 2);
        }
        setenv_int("GX_RANK", rank);
        setenv_int("GX_SIZE", world);
        setenv_int("GX_LOCAL_RANK", local);
        setenv_int("GX_LOCAL_SIZE", o->nlocal);
        setenv("GX_MASTER_ADDR", master_host, 1);
        setenv_int("GX_MASTER_PORT", ports[0]);
        setenv("GX_JOB_KEY", job_key, 1); /* the environment is readable by us only */
        unsetenv("GX_JOB_KEY_FILE");
        setenv("GX_INIT_METHOD", "env://", 1);
        setenv_int("RANK", rank);
        setenv_int("WORLD_SIZE", world);
        setenv_int("LOCAL_RANK", local);
        setenv_int("LOCAL_WORLD_SIZE", o->nlocal);
        setenv("MASTER_ADDR", master_host, 1);
        setenv_int("MASTER_PORT", ports[1]); /* torch's store: not gx's port */
        if (o->node_id)
            setenv("GX_NODE_ID", o->node_id, 1);
        if (rank == 0 && listen_fd >= 0) {
            fcntl(listen_fd, F_SETFD, 0); /* inherit across exec */
            setenv_int("GX_BOOT_LISTEN_FD", listen_fd);
        } else {
            unsetenv("GX_BOOT_LISTEN_FD");
        }
        execvp(o->argv[0], o->argv);
        fprintf(stderr, "gx-run: cannot execute '%s': %s\n", o->argv[0], strerror(errno));
        _exit(127);
    }
    *p = (struct rank_proc){ .pid = pid, .rank = rank, .running = true };
    p->out = (struct run_stream){ .fd = -1 };
    p->err = (struct run_stream){ .fd = -1 };
    if (o->tag_output) {
        close(out_pipe[1]);
        close(err_pipe[1]);
        p->out = (struct run_stream){ .fd = out_pipe[0], .out_fd = 1, .rank = rank };
        p->err = (struct run_stream){ .fd = err_pipe[0], .out_fd = 2, .rank = rank };
    }
    return 0;
}

/* MASTER_PORT for torch's store (init_process_group's env://), which must not
 * be gx's listener: with --master H:P every node agrees on P+1; on one node
 * a free loopback port, held for the job by a socket that is bound with
 * SO_REUSEADDR but never listens. Nothing else is handed that port (no port
 * race with other jobs), while torch's store, which binds with SO_REUSEADDR
 * too, can still take it. *reserve_fd is that socket (-1 with --master). */
static int torch_port(const struct run_opts *o, int gx_port, int *reserve_fd)
{
    *reserve_fd = -1;
    if (o->master) {
        if (gx_port >= 65535) {
            fprintf(stderr, "gx-run: --master port %d leaves no port above it for torch's "
                    "MASTER_PORT (gx uses P, torch P+1)\n", gx_port);
            return -1;
        }
        return gx_port + 1;
    }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(a);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        fprintf(stderr, "gx-run: cannot reserve a port for MASTER_PORT: %s\n", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *reserve_fd = fd;
    return ntohs(a.sin_port);
}

/* 128 random bits with a prefix that tells gx not to stretch them. */
static int make_job_key(char *out, size_t len)
{
    unsigned char raw[16];
    if (gx_random_bytes(raw, sizeof(raw)) != GX_OK) {
        fprintf(stderr, "gx-run: cannot generate a job key: getrandom: %s\n", strerror(errno));
        return -1;
    }
    size_t n = (size_t)snprintf(out, len, "%s", GX_AUTH_GENERATED_PREFIX);
    for (size_t i = 0; i < sizeof(raw) && n + 3 < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%02x", raw[i]);
    return 0;
}

/* One run of the job: start this node's ranks, pump their output, stop
 * them all when one fails (unless --keep-going), a signal arrives or the
 * deadline passes. *restartable says whether --max-restarts may run it
 * again (a rank failed; not a signal, not the timeout). */
static int run_job(const struct run_opts *o, int listen_fd, const char *master_host,
                   const int ports[2], const char *key, int sfd, uint64_t timeout_at,
                   bool *restartable)
{
    *restartable = true;
    struct rank_proc *procs = calloc((size_t)o->nlocal, sizeof(*procs));
    int started = 0;
    for (int i = 0; i < o->nlocal; i++, started++)
        if (spawn_rank(o, &procs[i], i, listen_fd, master_host, ports, key))
            break;
    if (listen_fd >= 0)
        close(listen_fd);

    int running = started, first_fail = -1, exit_code = 0;
    bool stopping = started < o->nlocal;
    uint64_t kill_at = stopping ? gx_now_ns() : UINT64_MAX;
    if (stopping) {
        exit_code = 1;
        signal_all(procs, started, SIGTERM);
    }
    struct pollfd *pfds = calloc(1 + 2 * (size_t)o->nlocal, sizeof(*pfds));
    struct run_stream **streams = calloc(1 + 2 * (size_t)o->nlocal, sizeof(*streams));
    for (;;) {
        size_t nfds = 0;
        pfds[nfds++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
        for (int i = 0; i < started; i++) {
            struct run_stream *s[2] = { &procs[i].out, &procs[i].err };
            for (int k = 0; k < 2; k++) {
                if (s[k]->fd >= 0) {
                    streams[nfds] = s[k];
                    pfds[nfds++] = (struct pollfd){ .fd = s[k]->fd, .events = POLLIN };
                }
            }
        }
        if (running == 0 && nfds == 1)
            break;
        uint64_t next = kill_at < timeout_at ? kill_at : timeout_at;
        int wait_ms = next == UINT64_MAX ? -1 : gx_ms_left(next);
        poll(pfds, nfds, running == 0 ? 100 : wait_ms);
        for (size_t i = 1; i < nfds; i++)
            if (pfds[i].revents)
                run_stream_pump(streams[i]);
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
            if (si.ssi_signo == SIGCHLD)
                continue;
            fprintf(stderr, "gx-run: got %s, passing it to the ranks\n",
                    signal_name((int)si.ssi_signo));
            signal_all(procs, started, (int)si.ssi_signo);
            *restartable = false; /* the operator stops the job: no restart */
            if (!stopping) {
                stopping = true;
                exit_code = 128 + (int)si.ssi_signo;
                kill_at = gx_now_ns() + KILL_GRACE_MS * 1000000ull;
            }
        }
        for (;;) {
            int status;
            pid_t pid = waitpid(-1, &status, WNOHANG);
            if (pid <= 0)
                break;
            for (int i = 0; i < started; i++) {
                if (procs[i].pid != pid)
                    continue;
                procs[i].running = false;
                procs[i].status = status;
                running--;
                bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
                if (failed && first_fail < 0 && !stopping) {
                    first_fail = i;
                    exit_code = exit_code_of(status);
                    char what[160];
                    describe_exit(&procs[i], what, sizeof(what));
                    if (o->keep_going) {
                        fprintf(stderr, "gx-run: %s; letting the others finish\n", what);
                    } else {
                        fprintf(stderr, "gx-run: %s; stopping the other ranks\n", what);
                        stopping = true;
                        signal_all(procs, started, SIGTERM);
                        kill_at = gx_now_ns() + KILL_GRACE_MS * 1000000ull;
                    }
                } else if (failed && o->keep_going) {
                    char what[160];
                    describe_exit(&procs[i], what, sizeof(what));
                    fprintf(stderr, "gx-run: %s\n", what);
                }
            }
        }
        uint64_t now = gx_now_ns();
        if (running > 0 && now >= timeout_at) {
            fprintf(stderr, "gx-run: --timeout %.0f s reached; still running:", o->timeout_s);
            for (int i = 0; i < started; i++)
                if (procs[i].running)
                    fprintf(stderr, " rank %d (pid %d)", procs[i].rank, (int)procs[i].pid);
            fprintf(stderr, "\n");
            signal_all(procs, started, SIGTERM);
            stopping = true;
            exit_code = 124;
            *restartable = false;
            timeout_at = UINT64_MAX;
            kill_at = now + KILL_GRACE_MS * 1000000ull;
        }
        if (running > 0 && now >= kill_at) {
            signal_all(procs, started, SIGKILL);
            kill_at = UINT64_MAX;
        }
    }
    free(pfds);
    free(streams);
    free(procs);
    if (first_fail < 0)
        *restartable = false;
    return exit_code;
}

int main(int argc, char **argv)
{
    struct run_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    char key[256];
    if (o.job_key && o.job_key[0])
        snprintf(key, sizeof(key), "%s", o.job_key);
    else if (make_job_key(key, sizeof(key)) != 0)
        return 1;

    int listen_fd = -1, master_port = 0;
    char master_host[256] = "127.0.0.1";
    if (o.node_rank != 0) {
        struct gx_sockaddr addr;
        if (gx_sock_resolve(o.master, -1, "--master", &addr) != GX_OK) {
            fprintf(stderr, "gx-run: %s\n", gx_last_error());
            return 2;
        }
        master_port = gx_sock_port(&addr);
        const char *colon = strrchr(o.master, ':');
        snprintf(master_host, sizeof(master_host), "%.*s", (int)(colon - o.master), o.master);
    }

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    uint64_t timeout_at = o.timeout_s > 0 ? gx_now_ns() + (uint64_t)(o.timeout_s * 1e9)
                                          : UINT64_MAX;
    for (int attempt = 0;; attempt++) {
        /* A fresh rendezvous per run, and a key of its own, so ranks of an
         * earlier run can never join this one. */
        if (o.node_rank == 0 &&
            bind_master(&o, &listen_fd, master_host, sizeof(master_host), &master_port))
            return 1;
        char run_key[300];
        if (attempt == 0)
            snprintf(run_key, sizeof(run_key), "%s", key);
        else
            snprintf(run_key, sizeof(run_key), "%s-restart%d", key, attempt);
        setenv_int("GX_RESTART_COUNT", attempt);
        setenv_int("TORCHELASTIC_RESTART_COUNT", attempt);
        bool restartable = false;
        int reserve_fd;
        int ports[2] = { master_port, torch_port(&o, master_port, &reserve_fd) };
        if (ports[1] < 0)
            return 1;
        int job_rc = run_job(&o, listen_fd, master_host, ports, run_key, sfd, timeout_at,
                             &restartable);
        if (reserve_fd >= 0)
            close(reserve_fd);
        if (job_rc == 0 || !restartable || attempt >= o.max_restarts)
            return job_rc;
        fprintf(stderr, "gx-run: restarting the job (restart %d of %d, GX_RESTART_COUNT=%d)\n",
                attempt + 1, o.max_restarts, attempt + 1);
    }
}
