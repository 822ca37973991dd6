/*
 * cbload - the Cellbed guest workload (DESIGN.md section 5).
 *
 * Runs inside the guest's initramfs as the main process started by /init.
 * It
 *   - burns a target fraction of the vCPU (duty cycle in 100 ms periods),
 *   - holds a working set of W MiB, every page written with a non-zero
 *     pattern (QEMU skips zero pages during migration, so zero pages would
 *     make migrations look cheaper than they are),
 *   - re-dirties the working set at D MiB/s (paced in 10 ms slices, or
 *     unthrottled for "max"),
 *   - keeps a heartbeat that increments every 100 ms and a random boot_id,
 *     so the host can prove that the guest kept running (no reboot/reset)
 *     across a live migration,
 *   - answers a memory-integrity check: every page must hold the pattern
 *     of the generation last written to it.
 *
 * Control protocol: line-based ASCII over a virtio-serial port.
 *   request:  <id> <verb> [k=v ...]\n
 *   reply:    <id> ok k=v ...\n   or   <id> err <message>\n
 * Verbs: status, set [cpu=F] [wss=N] [dirty=F|max], check,
 *        fault kind=corrupt|panic.  See guest/README.md.
 *
 * Initial parameters come from the kernel command line:
 *   cb.cpu=F cb.wss=N cb.dirty=F|max
 *
 * Usage: cbload [-c CMDLINE_FILE] PORT_PATH
 *   CMDLINE_FILE defaults to /proc/cmdline. -c exists for tests outside a
 *   guest (e.g. on a pty); it also disables "fault kind=panic", so a test
 *   run as root on a host can never crash the host.
 *
 * Build: gcc -static -O2 -pthread -o cbload cbload.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Constants                                                           */
/* ------------------------------------------------------------------ */

#define PAGE_BYTES 4096u
#define PAGE_WORDS (PAGE_BYTES / sizeof(uint64_t))
#define PAGES_PER_MIB (1048576u / PAGE_BYTES)

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

#define BURN_PERIOD_NS (100 * NS_PER_MS)   /* CPU duty-cycle period */
#define DIRTY_SLICE_NS (10 * NS_PER_MS)    /* dirty-rate pacing slice */
#define HEARTBEAT_NS (100 * NS_PER_MS)     /* heartbeat / sampling tick */
#define RATE_WINDOW 10                     /* ticks in the ~1 s window */
#define DIRTY_BATCH 64                     /* pages written per lock hold */

#define WSS_MARGIN_MIB 16        /* kept free below MemAvailable */
#define DIRTY_MAX_MIB_S 65536.0  /* largest finite dirty target */

#define LINE_MAX_BYTES 512       /* longest request line accepted */
#define ID_MAX_BYTES 64          /* longest request id echoed back */
#define MAX_TOKENS 16
#define HUP_BACKOFF_NS (50 * NS_PER_MS)   /* host not connected: back off */
#define REPLY_TIMEOUT_NS (1 * NS_PER_S)   /* give up on an unwritable reply */
#define REPLY_RETRY_NS (5 * NS_PER_MS)     /* back-off while the port shows HUP */

/* Page layout: word 0 = PAGE_MAGIC ^ index, word 1 = generation,
 * words 2.. = pattern derived from (index, generation). Word 0 is never
 * zero, so no page of the working set is ever a zero page. */
#define PAGE_MAGIC 0xCE11BEDC0FFEE000ull
/* XORed into the generation of the page hit by "fault kind=corrupt". */
#define POISON_MASK 0x5A5A000000000000ull

/* ------------------------------------------------------------------ */
/* Shared state                                                        */
/* ------------------------------------------------------------------ */

static uint64_t boot_id;
static int sysrq_fd = -1;   /* /proc/sysrq-trigger, opened at start */

static _Atomic uint64_t heartbeat;      /* +1 every 100 ms, never reset */
static _Atomic double cpu_target;       /* fraction of one vCPU, 0..1 */
static _Atomic double dirty_target;     /* MiB/s, INFINITY = "max" */
static _Atomic uint64_t total_writes;   /* page writes ever (= generation) */
static _Atomic uint64_t dirtier_writes; /* page writes by the dirtier */

/*
 * The working set. One region of ws_max_pages pages is reserved at start
 * (MAP_NORESERVE: pages cost memory only once written); the first ws_pages
 * pages are live. ws_lock guards ws_pages, ws_cursor, ws_poisoned, the
 * expected-generation array and the content of live pages. Only the control
 * thread resizes, so pages beyond ws_pages are touched by it alone.
 */
static pthread_mutex_t ws_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast (under ws_lock) whenever parameters change: an idle burner or
 * dirtier sleeps on it instead of polling, which keeps an idle guest cheap
 * for the host. */
static pthread_cond_t params_changed = PTHREAD_COND_INITIALIZER;
static uint8_t *ws_base;
static uint64_t *ws_expected;  /* generation last written, per page */
static size_t ws_max_pages;
static size_t ws_pages;
static size_t ws_cursor;        /* next page the dirtier writes */
static long ws_poisoned = -1;   /* page index hit by fault kind=corrupt */

/* Rate samples taken by the heartbeat thread, one per tick. */
struct sample {
    uint64_t t_ns;          /* CLOCK_MONOTONIC */
    uint64_t cpu_ns;        /* process CPU time, all threads */
    uint64_t dirty_pages;   /* dirtier_writes */
};
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sample samples[RATE_WINDOW + 1];
static unsigned sample_count;   /* total samples ever taken */

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

static uint64_t clock_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t mono_ns)
{
    struct timespec ts = { .tv_sec = (time_t)(mono_ns / NS_PER_S),
                           .tv_nsec = (long)(mono_ns % NS_PER_S) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void sleep_ns(uint64_t ns)
{
    sleep_until(clock_ns(CLOCK_MONOTONIC) + ns);
}

/* Console log line (stdout is /dev/console under /init). */
static void logmsg(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cbload: ", stdout);
    vfprintf(stdout, fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
    va_end(ap);
}

/* splitmix64 finaliser: a cheap, well-mixing 64-bit hash. */
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

/* Reads MemTotal and MemAvailable (KiB) from /proc/meminfo. */
static bool read_meminfo(uint64_t *total_kib, uint64_t *avail_kib)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    bool got_total = false, got_avail = false;
    unsigned long long v;

    if (!f)
        return false;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &v) == 1) {
            *total_kib = v;
            got_total = true;
        } else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
            *avail_kib = v;
            got_avail = true;
        }
    }
    fclose(f);
    return got_total && got_avail;
}

/* ------------------------------------------------------------------ */
/* Working-set pages                                                   */
/* ------------------------------------------------------------------ */

static inline uint64_t *page_ptr(size_t page)
{
    return (uint64_t *)(ws_base + page * PAGE_BYTES);
}

/* Writes the full pattern of (page, gen) over the whole page. */
static void page_fill(size_t page, uint64_t gen)
{
    uint64_t *w = page_ptr(page);
    uint64_t x = mix64(page * 0x9E3779B97F4A7C15ull ^ mix64(gen));

    w[0] = PAGE_MAGIC ^ page;
    w[1] = gen;
    for (size_t i = 2; i < PAGE_WORDS; i++)
        w[i] = x + i * 0xD1B54A32D192ED03ull;
}

/* True if the page holds exactly the pattern of (page, gen). */
static bool page_matches(size_t page, uint64_t gen)
{
    const uint64_t *w = page_ptr(page);
    uint64_t x = mix64(page * 0x9E3779B97F4A7C15ull ^ mix64(gen));

    if (w[0] != (PAGE_MAGIC ^ page) || w[1] != gen)
        return false;
    for (size_t i = 2; i < PAGE_WORDS; i++)
        if (w[i] != x + i * 0xD1B54A32D192ED03ull)
            return false;
    return true;
}

/*
 * Writes one page with a fresh generation and records it as expected.
 * A poisoned page (fault kind=corrupt) keeps being written, but always with
 * a wrong generation, so the corruption persists like a lost write would.
 * Caller holds ws_lock, or owns the page (beyond ws_pages, control thread).
 */
static void page_write_new_gen(size_t page)
{
    uint64_t gen = atomic_fetch_add(&total_writes, 1) + 1;

    ws_expected[page] = gen;
    page_fill(page, (long)page == ws_poisoned ? gen ^ POISON_MASK : gen);
}

/* ------------------------------------------------------------------ */
/* Worker threads                                                      */
/* ------------------------------------------------------------------ */

/* Heartbeat and rate sampling, every 100 ms. */
static void *heartbeat_main(void *arg)
{
    uint64_t next = clock_ns(CLOCK_MONOTONIC);

    (void)arg;
    for (;;) {
        next += HEARTBEAT_NS;
        sleep_until(next);
        uint64_t now = clock_ns(CLOCK_MONOTONIC);
        if (now > next + HEARTBEAT_NS)   /* e.g. VM paused: no catch-up burst */
            next = now;
        atomic_fetch_add(&heartbeat, 1);

        struct sample s = { now, clock_ns(CLOCK_PROCESS_CPUTIME_ID),
                            atomic_load(&dirtier_writes) };
        pthread_mutex_lock(&sample_lock);
        samples[sample_count % (RATE_WINDOW + 1)] = s;
        sample_count++;
        pthread_mutex_unlock(&sample_lock);
    }
    return NULL;
}

/* CPU fraction and dirty rate (MiB/s) over the last ~1 s of samples. */
static void measured_rates(double *cpu_actual, double *dirty_mib_s)
{
    *cpu_actual = 0.0;
    *dirty_mib_s = 0.0;
    pthread_mutex_lock(&sample_lock);
    if (sample_count >= 2) {
        unsigned n = sample_count < RATE_WINDOW + 1 ? sample_count : RATE_WINDOW + 1;
        const struct sample *newest = &samples[(sample_count - 1) % (RATE_WINDOW + 1)];
        const struct sample *oldest = &samples[(sample_count - n) % (RATE_WINDOW + 1)];
        double dt = (double)(newest->t_ns - oldest->t_ns) / NS_PER_S;
        if (dt > 0) {
            *cpu_actual = (double)(newest->cpu_ns - oldest->cpu_ns) / NS_PER_S / dt;
            *dirty_mib_s = (double)(newest->dirty_pages - oldest->dirty_pages)
                           / PAGES_PER_MIB / dt;
        }
    }
    pthread_mutex_unlock(&sample_lock);
}

/*
 * CPU burner. The target is the whole workload's share of the vCPU
 * (burner + dirtier + control), i.e. what the host sees as the guest's CPU
 * demand. Each 100 ms period the burner spins, measured on its own thread
 * CPU clock, for
 *     target*P - others + debt/2
 * and then sleeps to the period's end, where
 *   others = smoothed CPU time of the other threads per period (most of the
 *            dirtier's work happens after the burner has stopped, so it is
 *            taken from past periods), and
 *   debt   = accumulated shortfall (target*P - used) of past periods,
 *            clamped to +-P/2, so one-off spikes (e.g. the control thread
 *            writing a grown working set) are paid back within a few
 *            periods instead of skewing the 1 s average.
 */
static void *burner_main(void *arg)
{
    const double period = (double)BURN_PERIOD_NS;
    volatile uint64_t sink = 1;
    uint64_t period_start = clock_ns(CLOCK_MONOTONIC);
    uint64_t proc_prev = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    uint64_t self_prev = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    double others = 0.0, debt = 0.0, last_target = -1.0;

    (void)arg;
    for (;;) {
        if (atomic_load(&cpu_target) <= 0.0) {
            pthread_mutex_lock(&ws_lock);
            while (atomic_load(&cpu_target) <= 0.0)
                pthread_cond_wait(&params_changed, &ws_lock);
            pthread_mutex_unlock(&ws_lock);
            period_start = clock_ns(CLOCK_MONOTONIC);
            proc_prev = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            self_prev = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        }
        uint64_t period_end = period_start + BURN_PERIOD_NS;
        double target = atomic_load(&cpu_target);
        if (target != last_target) {   /* new target: forget old shortfall */
            debt = 0.0;
            last_target = target;
        }
        double want = target * period - others + debt / 2;
        uint64_t budget = want > 0 ? (uint64_t)want : 0;
        uint64_t self0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

        while (budget > 0 &&
               clock_ns(CLOCK_THREAD_CPUTIME_ID) - self0 < budget &&
               clock_ns(CLOCK_MONOTONIC) < period_end) {
            /* ~tens of microseconds of integer work between clock reads */
            uint64_t x = sink;
            for (int i = 0; i < 4096; i++)
                x = x * 6364136223846793005ull + 1442695040888963407ull;
            sink = x;
        }
        sleep_until(period_end);

        /* Account for the period just finished. */
        uint64_t proc_now = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        uint64_t self_now = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        double used = (double)(proc_now - proc_prev);
        double others_now = used - (double)(self_now - self_prev);
        others = 0.7 * others + 0.3 * (others_now > 0 ? others_now : 0.0);
        debt += target * period - used;
        if (debt > period / 2)
            debt = period / 2;
        if (debt < -period / 2)
            debt = -period / 2;
        proc_prev = proc_now;
        self_prev = self_now;

        uint64_t now = clock_ns(CLOCK_MONOTONIC);
        period_start = now > period_end + BURN_PERIOD_NS ? now : period_end;
    }
    return NULL;
}

static size_t ws_pages_now(void)
{
    size_t n;

    pthread_mutex_lock(&ws_lock);
    n = ws_pages;
    pthread_mutex_unlock(&ws_lock);
    return n;
}

/* Writes up to n pages round-robin; returns the number written. */
static size_t dirty_pages(size_t n)
{
    size_t done = 0;

    while (done < n) {
        size_t batch = n - done < DIRTY_BATCH ? n - done : DIRTY_BATCH;
        pthread_mutex_lock(&ws_lock);
        if (ws_pages == 0) {
            pthread_mutex_unlock(&ws_lock);
            break;
        }
        for (size_t i = 0; i < batch; i++) {
            if (ws_cursor >= ws_pages)
                ws_cursor = 0;
            page_write_new_gen(ws_cursor++);
        }
        pthread_mutex_unlock(&ws_lock);
        atomic_fetch_add(&dirtier_writes, batch);
        done += batch;
    }
    return done;
}

/*
 * Dirtier. Finite targets are paced in 10 ms slices with a fractional page
 * credit carried between slices; a slice that overruns drops its backlog
 * instead of bursting later. "max" writes batches back to back.
 */
static void *dirtier_main(void *arg)
{
    uint64_t next = clock_ns(CLOCK_MONOTONIC);
    double credit = 0.0;

    (void)arg;
    for (;;) {
        double target = atomic_load(&dirty_target);

        if (target <= 0.0 || ws_pages_now() == 0) {
            /* Nothing to do: sleep until the parameters change. */
            pthread_mutex_lock(&ws_lock);
            while (atomic_load(&dirty_target) <= 0.0 || ws_pages == 0)
                pthread_cond_wait(&params_changed, &ws_lock);
            pthread_mutex_unlock(&ws_lock);
            next = clock_ns(CLOCK_MONOTONIC);
            credit = 0.0;
            continue;
        }
        if (isinf(target)) {
            dirty_pages(DIRTY_BATCH);
            next = clock_ns(CLOCK_MONOTONIC);
            credit = 0.0;
            continue;
        }
        credit += target * PAGES_PER_MIB * ((double)DIRTY_SLICE_NS / NS_PER_S);
        size_t n = (size_t)credit;
        credit -= (double)n;
        if (dirty_pages(n) < n)
            credit = 0.0;   /* working set emptied meanwhile */
        next += DIRTY_SLICE_NS;
        uint64_t now = clock_ns(CLOCK_MONOTONIC);
        if (now > next) {       /* overran the slice: drop the backlog */
            next = now;
            credit = credit > 1.0 ? 1.0 : credit;
            continue;
        }
        sleep_until(next);
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Parameters: parsing and validation                                 */
/* ------------------------------------------------------------------ */

/* Largest wss (MiB) allowed now: current wss + MemAvailable - margin. */
static unsigned wss_limit_mib(uint64_t *avail_kib_out)
{
    uint64_t total_kib = 0, avail_kib = 0;
    size_t cur_pages;
    uint64_t limit;

    cur_pages = ws_pages_now();

    if (!read_meminfo(&total_kib, &avail_kib))
        avail_kib = 0;
    if (avail_kib_out)
        *avail_kib_out = avail_kib;
    limit = cur_pages / PAGES_PER_MIB;
    if (avail_kib / 1024 > WSS_MARGIN_MIB)
        limit += avail_kib / 1024 - WSS_MARGIN_MIB;
    if (limit > ws_max_pages / PAGES_PER_MIB)
        limit = ws_max_pages / PAGES_PER_MIB;
    return (unsigned)limit;
}

struct params {
    bool has_cpu, has_wss, has_dirty;
    double cpu;
    unsigned wss_mib;
    double dirty;    /* INFINITY = max */
};

/* Strict decimal float: whole string consumed, finite. */
static bool parse_double(const char *s, double *out)
{
    char *end;

    if (*s == '\0')
        return false;
    errno = 0;
    *out = strtod(s, &end);
    return errno == 0 && *end == '\0' && isfinite(*out);
}

/* Strict unsigned decimal integer. */
static bool parse_uint(const char *s, unsigned long long *out)
{
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

/*
 * Validates one key=value into p. On error writes a message naming the
 * field and its allowed range into err and returns false.
 */
static bool parse_param(const char *key, const char *val, struct params *p,
                        char *err, size_t errlen)
{
    if (strcmp(key, "cpu") == 0) {
        double v;
        if (!parse_double(val, &v) || v < 0.0 || v > 1.0) {
            snprintf(err, errlen,
                     "cpu=%s invalid: cpu must be a number in 0..1 (fraction of one vCPU)", val);
            return false;
        }
        p->cpu = v;
        p->has_cpu = true;
    } else if (strcmp(key, "wss") == 0) {
        unsigned long long v;
        uint64_t avail_kib = 0;
        unsigned limit = wss_limit_mib(&avail_kib);
        if (!parse_uint(val, &v) || v > limit) {
            snprintf(err, errlen,
                     "wss=%s invalid: wss must be an integer in 0..%u (MiB; "
                     "limit = current wss + MemAvailable %" PRIu64 " KiB - %u MiB margin)",
                     val, limit, avail_kib, WSS_MARGIN_MIB);
            return false;
        }
        p->wss_mib = (unsigned)v;
        p->has_wss = true;
    } else if (strcmp(key, "dirty") == 0) {
        double v;
        if (strcmp(val, "max") == 0) {
            v = INFINITY;
        } else if (!parse_double(val, &v) || v < 0.0 || v > DIRTY_MAX_MIB_S) {
            snprintf(err, errlen,
                     "dirty=%s invalid: dirty must be a number in 0..%.0f (MiB/s) or max",
                     val, DIRTY_MAX_MIB_S);
            return false;
        }
        p->dirty = v;
        p->has_dirty = true;
    } else {
        snprintf(err, errlen, "unknown field '%s': set takes cpu=0..1 wss=MiB dirty=MiB/s|max", key);
        return false;
    }
    return true;
}

/*
 * Applies validated parameters. A growing working set is written before it
 * becomes visible; then wss, cpu and dirty change together under ws_lock;
 * a shrinking working set's tail is released afterwards.
 */
static void apply_params(const struct params *p)
{
    size_t old_pages, new_pages;

    old_pages = ws_pages_now();
    new_pages = p->has_wss ? (size_t)p->wss_mib * PAGES_PER_MIB : old_pages;

    /* Grow: pages beyond ws_pages belong to this (the control) thread. */
    for (size_t i = old_pages; i < new_pages; i++)
        page_write_new_gen(i);

    pthread_mutex_lock(&ws_lock);
    ws_pages = new_pages;
    if (ws_cursor >= ws_pages)
        ws_cursor = 0;
    if (ws_poisoned >= 0 && (size_t)ws_poisoned >= ws_pages)
        ws_poisoned = -1;
    if (p->has_cpu)
        atomic_store(&cpu_target, p->cpu);
    if (p->has_dirty)
        atomic_store(&dirty_target, p->dirty);
    pthread_cond_broadcast(&params_changed);
    pthread_mutex_unlock(&ws_lock);

    /* Shrink: return the tail's memory to the kernel. */
    if (new_pages < old_pages)
        madvise(ws_base + new_pages * PAGE_BYTES,
                (old_pages - new_pages) * PAGE_BYTES, MADV_DONTNEED);
}

/*
 * Reads cb.cpu=, cb.wss=, cb.dirty= from the kernel command line file.
 * Returns false (after logging) if any value is invalid.
 */
static bool parse_cmdline(const char *path, struct params *p)
{
    char buf[4096], err[256];
    FILE *f = fopen(path, "r");
    size_t n;
    bool ok = true;

    if (!f) {
        logmsg("cannot read %s: %s", path, strerror(errno));
        return false;
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';

    for (char *save, *tok = strtok_r(buf, " \t\n", &save); tok;
         tok = strtok_r(NULL, " \t\n", &save)) {
        char *eq;
        if (strncmp(tok, "cb.", 3) != 0 || !(eq = strchr(tok, '=')))
            continue;
        *eq = '\0';
        if (!parse_param(tok + 3, eq + 1, p, err, sizeof err)) {
            logmsg("kernel command line: cb.%s", err);
            ok = false;
        }
    }
    return ok;
}

/* ------------------------------------------------------------------ */
/* Control protocol                                                    */
/* ------------------------------------------------------------------ */

/*
 * Writes a whole reply line, or drops it after REPLY_TIMEOUT_NS.
 *
 * POLLHUP is not taken as final here: when a host connects and sends at once,
 * the request reaches us (virtqueue interrupt) before the driver has handled
 * the "host connected" control message (work queue), so for a moment the port
 * still looks disconnected and write() says EAGAIN. Dropping the reply then
 * loses the request; retrying with a short back-off until the deadline does
 * not. A host that really left costs the control loop at most the deadline.
 */
static void send_reply(int fd, const char *line, size_t len)
{
    uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + REPLY_TIMEOUT_NS;
    size_t off = 0;

    while (off < len) {
        ssize_t w = write(fd, line + off, len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN && clock_ns(CLOCK_MONOTONIC) < deadline) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            if (poll(&pfd, 1, 10) > 0 && (pfd.revents & POLLHUP))
                sleep_ns(REPLY_RETRY_NS);   /* poll does not wait on HUP */
            continue;
        }
        logmsg("reply dropped (%s): host not connected?",
               w < 0 ? strerror(errno) : "short write");
        return;
    }
}

/* Appends formatted text to a reply buffer. */
static void appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*len >= cap)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = (size_t)n < cap - *len ? *len + (size_t)n : cap - 1;
}

static void append_status(char *buf, size_t cap, size_t *len)
{
    uint64_t total_kib = 0, avail_kib = 0;
    double cpu_actual, dirty_actual;
    double dirty = atomic_load(&dirty_target);
    size_t pages;

    pages = ws_pages_now();
    measured_rates(&cpu_actual, &dirty_actual);
    read_meminfo(&total_kib, &avail_kib);

    appendf(buf, cap, len, " boot_id=%016" PRIx64 " hb=%" PRIu64 " uptime_ms=%" PRIu64,
            boot_id, atomic_load(&heartbeat),
            clock_ns(CLOCK_BOOTTIME) / NS_PER_MS);
    appendf(buf, cap, len, " cpu_target=%.3f cpu_actual=%.3f wss_mib=%zu",
            atomic_load(&cpu_target), cpu_actual, pages / PAGES_PER_MIB);
    if (isinf(dirty))
        appendf(buf, cap, len, " dirty_target=max");
    else
        appendf(buf, cap, len, " dirty_target=%.3f", dirty);
    appendf(buf, cap, len, " dirty_actual=%.3f gen=%" PRIu64
            " mem_total_kib=%" PRIu64 " mem_avail_kib=%" PRIu64,
            dirty_actual, atomic_load(&total_writes), total_kib, avail_kib);
}

/* Scans the live working set with the dirtier paused. */
static void append_check(char *buf, size_t cap, size_t *len)
{
    size_t pages, bad = 0;
    long first_bad = -1;

    pthread_mutex_lock(&ws_lock);
    pages = ws_pages;
    for (size_t i = 0; i < pages; i++) {
        if (!page_matches(i, ws_expected[i])) {
            if (bad++ == 0)
                first_bad = (long)i;
        }
    }
    pthread_mutex_unlock(&ws_lock);
    appendf(buf, cap, len, " pages=%zu bad=%zu first_bad=%ld", pages, bad, first_bad);
}

/*
 * Handles one request line; writes the reply (without newline) to out.
 * Returns true if the guest must panic after the reply is sent.
 */
static bool handle_request(char *line, char *out, size_t cap, size_t *len)
{
    char *tok[MAX_TOKENS];
    int ntok = 0;
    char err[320];

    for (char *save, *t = strtok_r(line, " \t\r", &save); t;
         t = strtok_r(NULL, " \t\r", &save)) {
        if (ntok == MAX_TOKENS) {
            appendf(out, cap, len, "%s err too many fields (max %d)", tok[0], MAX_TOKENS - 2);
            return false;
        }
        tok[ntok++] = t;
    }
    if (ntok == 0)
        return false;                       /* blank line: ignored */
    if (strlen(tok[0]) > ID_MAX_BYTES) {
        appendf(out, cap, len, "- err id too long (max %d bytes)", ID_MAX_BYTES);
        return false;
    }
    appendf(out, cap, len, "%s", tok[0]);   /* the id, echoed */
    if (ntok < 2) {
        appendf(out, cap, len, " err missing verb (verbs: status set check fault)");
        return false;
    }
    const char *verb = tok[1];

    /* Split k=v arguments in place. */
    char *keys[MAX_TOKENS], *vals[MAX_TOKENS];
    int nargs = 0;
    for (int i = 2; i < ntok; i++) {
        char *eq = strchr(tok[i], '=');
        if (!eq || eq == tok[i]) {
            appendf(out, cap, len, " err malformed argument '%s' (expected key=value)", tok[i]);
            return false;
        }
        *eq = '\0';
        keys[nargs] = tok[i];
        vals[nargs++] = eq + 1;
    }

    if (strcmp(verb, "status") == 0 || strcmp(verb, "check") == 0) {
        if (nargs > 0) {
            appendf(out, cap, len, " err %s takes no fields (got '%s')", verb, keys[0]);
            return false;
        }
        appendf(out, cap, len, " ok");
        if (strcmp(verb, "status") == 0)
            append_status(out, cap, len);
        else
            append_check(out, cap, len);
        return false;
    }

    if (strcmp(verb, "set") == 0) {
        struct params p = { 0 };
        for (int i = 0; i < nargs; i++) {   /* validate everything first */
            if (!parse_param(keys[i], vals[i], &p, err, sizeof err)) {
                appendf(out, cap, len, " err %s", err);
                return false;
            }
        }
        apply_params(&p);
        appendf(out, cap, len, " ok");
        append_status(out, cap, len);
        return false;
    }

    if (strcmp(verb, "fault") == 0) {
        const char *kind = NULL;
        for (int i = 0; i < nargs; i++) {
            if (strcmp(keys[i], "kind") != 0) {
                appendf(out, cap, len, " err unknown field '%s': fault takes kind=corrupt|panic", keys[i]);
                return false;
            }
            kind = vals[i];
        }
        if (kind && strcmp(kind, "corrupt") == 0) {
            long page;
            pthread_mutex_lock(&ws_lock);
            if (ws_pages == 0) {
                pthread_mutex_unlock(&ws_lock);
                appendf(out, cap, len, " err fault kind=corrupt needs wss 1..N MiB (wss is 0)");
                return false;
            }
            /* The page just behind the dirtier's cursor: a lost write. */
            page = ws_cursor == 0 ? (long)ws_pages - 1 : (long)ws_cursor - 1;
            ws_poisoned = page;
            page_fill((size_t)page, ws_expected[page] ^ POISON_MASK);
            pthread_mutex_unlock(&ws_lock);
            appendf(out, cap, len, " ok kind=corrupt page=%ld", page);
            return false;
        }
        if (kind && strcmp(kind, "panic") == 0) {
            if (sysrq_fd < 0) {
                appendf(out, cap, len, " err fault kind=panic unavailable: no writable "
                        "/proc/sysrq-trigger (CONFIG_MAGIC_SYSRQ) or cbload runs with -c");
                return false;
            }
            appendf(out, cap, len, " ok kind=panic");
            return true;   /* the caller panics after sending the reply */
        }
        appendf(out, cap, len, " err kind=%s invalid: kind must be corrupt or panic",
                kind ? kind : "(missing)");
        return false;
    }

    appendf(out, cap, len, " err unknown verb '%s' (verbs: status set check fault)", verb);
    return false;
}

/* Crashes the kernel through magic SysRq; pvpanic reports it to the host. */
static void trigger_panic(void)
{
    logmsg("fault kind=panic: crashing the kernel via /proc/sysrq-trigger");
    if (write(sysrq_fd, "c", 1) != 1)
        logmsg("sysrq crash failed: %s", strerror(errno));
}

/*
 * Serves the control port forever. The port is non-blocking: a host that
 * is not connected shows as POLLHUP / read()==0, in which case any partial
 * line is dropped and we back off 50 ms instead of spinning.
 */
static void control_loop(int fd)
{
    char line[LINE_MAX_BYTES];
    size_t used = 0;
    bool overlong = false;

    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, -1) < 0) {
            if (errno != EINTR)
                sleep_ns(HUP_BACKOFF_NS);
            continue;
        }

        char chunk[1024];
        ssize_t n = 0;
        if (pfd.revents & POLLIN)
            n = read(fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            /* Host not connected (POLLHUP, read() == 0): drop any partial
             * line from the old connection and back off. */
            used = 0;
            overlong = false;
            sleep_ns(HUP_BACKOFF_NS);
            continue;
        }

        for (ssize_t i = 0; i < n; i++) {
            char c = chunk[i];
            if (c != '\n') {
                if (used < sizeof line - 1)
                    line[used++] = c;
                else
                    overlong = true;
                continue;
            }
            line[used] = '\0';
            char reply[1024];
            size_t rlen = 0;
            bool panic = false;
            if (overlong) {
                /* Echo the id (first token) if it is a plausible one. */
                size_t idlen = strcspn(line, " \t");
                bool id_ok = idlen > 0 && idlen <= ID_MAX_BYTES;
                appendf(reply, sizeof reply, &rlen,
                        "%.*s err line too long (max %d bytes)",
                        id_ok ? (int)idlen : 1, id_ok ? line : "-",
                        LINE_MAX_BYTES - 1);
            } else {
                panic = handle_request(line, reply, sizeof reply, &rlen);
            }
            used = 0;
            overlong = false;
            if (rlen == 0)
                continue;   /* blank line */
            appendf(reply, sizeof reply, &rlen, "\n");
            if (reply[rlen - 1] != '\n')
                reply[rlen - 1] = '\n';   /* truncated: keep it one line */
            send_reply(fd, reply, rlen);
            if (panic)
                trigger_panic();
        }
    }
}

/* ------------------------------------------------------------------ */
/* Start-up                                                            */
/* ------------------------------------------------------------------ */

/*
 * 64 random bits for the boot_id. getrandom(GRND_INSECURE) never blocks:
 * early in boot under TCG the crng is not initialised yet, and reading
 * /dev/urandom would make the 6.x kernel first spend about a second
 * generating jitter entropy. The id needs uniqueness, not secrecy, so the
 * kernel's best-effort bytes are mixed with the wall clock and the
 * monotonic clock.
 */
static uint64_t make_boot_id(void)
{
    uint64_t id = 0;

    if (getrandom(&id, sizeof id, GRND_INSECURE) != sizeof id)
        id = 0;
    id ^= mix64(clock_ns(CLOCK_REALTIME) ^ mix64(clock_ns(CLOCK_MONOTONIC)));
    return id ? id : 1;
}

static void start_thread(void *(*fn)(void *), const char *name)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, fn, NULL);

    if (rc != 0) {
        logmsg("cannot start %s thread: %s", name, strerror(rc));
        exit(1);
    }
    pthread_setname_np(t, name);
}

int main(int argc, char **argv)
{
    const char *cmdline_path = "/proc/cmdline";
    bool outside_guest = false;
    const char *port_path = NULL;
    struct params p = { 0 };
    uint64_t total_kib = 0, avail_kib = 0;
    int opt, fd;

    while ((opt = getopt(argc, argv, "c:")) != -1) {
        if (opt == 'c') {
            cmdline_path = optarg;
            outside_guest = true;
        } else {
            fprintf(stderr, "usage: %s [-c CMDLINE_FILE] PORT_PATH\n", argv[0]);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: %s [-c CMDLINE_FILE] PORT_PATH\n", argv[0]);
        return 2;
    }
    port_path = argv[optind];
    setvbuf(stdout, NULL, _IOLBF, 0);

    boot_id = make_boot_id();
    atomic_store(&dirty_target, 0.0);
    atomic_store(&cpu_target, 0.0);

    /* Reserve the largest possible working set; pages cost memory only once
     * written. Hugepages off: THP would round the footprint up to 2 MiB and
     * make resize costs lumpy. */
    if (!read_meminfo(&total_kib, &avail_kib)) {
        logmsg("cannot read MemTotal/MemAvailable from /proc/meminfo");
        return 1;
    }
    ws_max_pages = (size_t)(total_kib / 4);
    ws_base = mmap(NULL, ws_max_pages * PAGE_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ws_expected = mmap(NULL, ws_max_pages * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ws_base == MAP_FAILED || ws_expected == MAP_FAILED) {
        logmsg("cannot reserve %zu pages for the working set: %s",
               ws_max_pages, strerror(errno));
        return 1;
    }
    madvise(ws_base, ws_max_pages * PAGE_BYTES, MADV_NOHUGEPAGE);

    if (!parse_cmdline(cmdline_path, &p))
        return 2;
    apply_params(&p);

    /* Opened up front, so "fault kind=panic" can be refused if unavailable. */
    if (!outside_guest)
        sysrq_fd = open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);

    fd = open(port_path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        logmsg("cannot open control port %s: %s", port_path, strerror(errno));
        return 1;
    }

    start_thread(heartbeat_main, "cb-heartbeat");
    start_thread(burner_main, "cb-burner");
    start_thread(dirtier_main, "cb-dirtier");

    double dirty = atomic_load(&dirty_target);
    char dirty_s[32];
    if (isinf(dirty))
        snprintf(dirty_s, sizeof dirty_s, "max");
    else
        snprintf(dirty_s, sizeof dirty_s, "%.3f", dirty);
    printf("CELLBED-READY boot_id=%016" PRIx64 " cpu=%.3f wss_mib=%zu dirty=%s port=%s\n",
           boot_id, atomic_load(&cpu_target), ws_pages / PAGES_PER_MIB, dirty_s, port_path);
    fflush(stdout);

    control_loop(fd);
    return 0;
}
