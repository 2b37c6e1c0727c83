/* critmem_job.h: report soft real-time jobs to the critmem agent (job protocol version 1).
 *
 * One header, no library: include it in one or more C files (every function is static inline).
 * The agent listens on a Unix stream socket; each message is one JSON line:
 *
 *   {"v":1,"op":"release","job":12,"deadline_ns":1700000000,"at_ns":1680000000}
 *   {"v":1,"op":"complete","job":12,"at_ns":1690000000}
 *   {"v":1,"op":"drop","job":12,"at_ns":1690000000}
 *
 * and the agent may send {"v":1,"op":"drop","job":12} to ask the process to abandon job 12.
 * Times are CLOCK_MONOTONIC nanoseconds (critmem_job_now_ns()). The agent identifies the
 * sender with SO_PEERCRED, so a process reports only for the cgroup it is in.
 *
 * The agent checks the sender's cgroup when it reads each message, so a process should not
 * exit the instant after its last report (that report may be refused).
 *
 * Nothing here blocks or aborts (but critmem_job_flush, which waits as long as it is told).
 * A message the socket cannot take at once (the agent busy, or the kernel short of socket
 * memory: EAGAIN, ENOBUFS) waits in an outbox of CRITMEM_JOB_OUTBOX_BYTES and goes out, in
 * order, on the next send or critmem_job_drop_requested. A message that cannot be sent at all
 * (no agent, agent restarting, outbox full) is counted in `unsent`, and the next send
 * reconnects (at most every 200 ms). Every message ends up in exactly one of `sent`, `unsent`
 * and critmem_job_pending().
 *
 *   struct critmem_job_client c;
 *   critmem_job_init(&c, "/run/critmem/jobs.sock");
 *   critmem_job_release(&c, job, critmem_job_now_ns() + 20000000ULL);
 *   ... work; if (critmem_job_drop_requested(&c, job)) abandon ...
 *   critmem_job_complete(&c, job);
 *   critmem_job_flush(&c, 200);   (at exit: a moment for what is pending)
 *   critmem_job_close(&c);
 */
#ifndef CRITMEM_JOB_H
#define CRITMEM_JOB_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* SOCK_CLOEXEC, SOCK_NONBLOCK, MSG_NOSIGNAL */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CRITMEM_JOB_PROTOCOL_VERSION 1
#define CRITMEM_JOB_MAX_LINE_BYTES 512
#define CRITMEM_JOB_RETRY_NS 200000000ULL
/* What a client holds for an agent that is not reading (as the Rust and Python clients). */
#define CRITMEM_JOB_OUTBOX_BYTES 16384

struct critmem_job_client {
    char path[108];          /* sizeof(sockaddr_un.sun_path) */
    int fd;                  /* -1 when not connected */
    uint64_t last_attempt_ns;
    uint64_t sent, unsent, connects;
    char inbox[CRITMEM_JOB_MAX_LINE_BYTES];
    size_t inbox_len;
    char outbox[CRITMEM_JOB_OUTBOX_BYTES]; /* whole lines; only the first may be partly written */
    size_t outbox_len;
};

static inline uint64_t critmem_job_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Returns 0, or -1 (errno ENAMETOOLONG) when the path does not fit a socket address. */
static inline int critmem_job_init(struct critmem_job_client *c, const char *socket_path) {
    memset(c, 0, sizeof *c);
    c->fd = -1;
    if (strlen(socket_path) >= sizeof c->path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(c->path, socket_path);
    return 0;
}

static inline uint64_t critmem_job__lines(const char *bytes, size_t len) {
    uint64_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += bytes[i] == '\n';
    return lines;
}

/* Messages in the outbox, not yet written whole. */
static inline uint64_t critmem_job_pending(const struct critmem_job_client *c) {
    return critmem_job__lines(c->outbox, c->outbox_len);
}

/* Closes the connection; what is still pending counts as unsent (a partial line must not
 * start a new connection). Does not wait: call critmem_job_flush first for that. */
static inline void critmem_job_close(struct critmem_job_client *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->inbox_len = 0;
    c->unsent += critmem_job_pending(c);
    c->outbox_len = 0;
}

/* Writes what the socket takes now. */
static inline void critmem_job__write(struct critmem_job_client *c) {
    while (c->outbox_len > 0 && c->fd >= 0) {
        ssize_t n = send(c->fd, c->outbox, c->outbox_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) return;
        if (n <= 0) {
            critmem_job_close(c);
            return;
        }
        c->sent += critmem_job__lines(c->outbox, (size_t)n);
        memmove(c->outbox, c->outbox + n, c->outbox_len - (size_t)n);
        c->outbox_len -= (size_t)n;
    }
}

/* Waits up to `timeout_ms` for the agent to take what is pending; 0 when nothing is. */
static inline int critmem_job_flush(struct critmem_job_client *c, unsigned timeout_ms) {
    uint64_t end_ns = critmem_job_now_ns() + (uint64_t)timeout_ms * 1000000ULL;
    critmem_job__write(c);
    while (c->outbox_len > 0 && c->fd >= 0 && critmem_job_now_ns() < end_ns) {
        struct timespec pause = {0, 1000000L};
        nanosleep(&pause, NULL);
        critmem_job__write(c);
    }
    return c->outbox_len == 0 ? 0 : -1;
}

static inline int critmem_job__connect(struct critmem_job_client *c) {
    if (c->fd >= 0) return 0;
    uint64_t now = critmem_job_now_ns();
    if (c->last_attempt_ns != 0 && now - c->last_attempt_ns < CRITMEM_JOB_RETRY_NS) return -1;
    c->last_attempt_ns = now;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, c->path, strlen(c->path));
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->connects++;
    return 0;
}

/* Sends one formatted line; 0 when it went out or waits in the outbox, -1 when it is lost
 * (counted in unsent). */
static inline int critmem_job__send(struct critmem_job_client *c, const char *line, size_t len) {
    if (critmem_job__connect(c) != 0 || c->outbox_len + len > sizeof c->outbox) {
        c->unsent++;
        return -1;
    }
    memcpy(c->outbox + c->outbox_len, line, len);
    c->outbox_len += len;
    critmem_job__write(c);
    return 0;
}

/* Job `job` was released at `at_ns` (0: now) with absolute deadline `deadline_ns`. */
static inline int critmem_job_release_at(struct critmem_job_client *c, uint64_t job, uint64_t deadline_ns, uint64_t at_ns) {
    char line[CRITMEM_JOB_MAX_LINE_BYTES];
    int len = snprintf(line, sizeof line, "{\"v\":1,\"op\":\"release\",\"job\":%llu,\"deadline_ns\":%llu,\"at_ns\":%llu}\n",
                       (unsigned long long)job, (unsigned long long)deadline_ns, (unsigned long long)(at_ns ? at_ns : critmem_job_now_ns()));
    return critmem_job__send(c, line, (size_t)len);
}

static inline int critmem_job_release(struct critmem_job_client *c, uint64_t job, uint64_t deadline_ns) {
    return critmem_job_release_at(c, job, deadline_ns, 0);
}

static inline int critmem_job__end(struct critmem_job_client *c, const char *op, uint64_t job) {
    char line[CRITMEM_JOB_MAX_LINE_BYTES];
    int len = snprintf(line, sizeof line, "{\"v\":1,\"op\":\"%s\",\"job\":%llu,\"at_ns\":%llu}\n", op,
                       (unsigned long long)job, (unsigned long long)critmem_job_now_ns());
    return critmem_job__send(c, line, (size_t)len);
}

/* Job `job` completed now. */
static inline int critmem_job_complete(struct critmem_job_client *c, uint64_t job) {
    return critmem_job__end(c, "complete", job);
}

/* Job `job` was abandoned now (on the agent's request or the workload's own decision). */
static inline int critmem_job_drop(struct critmem_job_client *c, uint64_t job) {
    return critmem_job__end(c, "drop", job);
}

/* Reads what the agent sent without blocking; returns 1 if it asked to drop `job`. Requests
 * for other jobs are discarded (they are stale once their job is over). Also writes what is
 * pending. */
static inline int critmem_job_drop_requested(struct critmem_job_client *c, uint64_t job) {
    int requested = 0;
    critmem_job__write(c);
    while (c->fd >= 0) {
        if (c->inbox_len == sizeof c->inbox) c->inbox_len = 0; /* an overlong line: discard */
        ssize_t n = recv(c->fd, c->inbox + c->inbox_len, sizeof c->inbox - c->inbox_len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) {
            critmem_job_close(c);
            break;
        }
        c->inbox_len += (size_t)n;
        char *newline;
        while ((newline = memchr(c->inbox, '\n', c->inbox_len)) != NULL) {
            unsigned long long asked;
            *newline = '\0';
            if (strstr(c->inbox, "\"op\":\"drop\"") != NULL && strstr(c->inbox, "\"v\":1") != NULL) {
                const char *field = strstr(c->inbox, "\"job\":");
                if (field != NULL && sscanf(field + 6, "%llu", &asked) == 1 && asked == job) requested = 1;
            }
            size_t used = (size_t)(newline - c->inbox) + 1;
            memmove(c->inbox, newline + 1, c->inbox_len - used);
            c->inbox_len -= used;
        }
    }
    return requested;
}

#endif /* CRITMEM_JOB_H */
