/* hpcrl benchmark monitor: verifies and times one DGEMM kernel that runs in another, sandboxed process.
 * This file is the process and the protocol; checks.c holds the inputs, the checks and the speed probe.
 *
 * Owned by the project and never linked with model code. The kernel runs in a child process (runner.c linked
 * with the kernel object) that gets A, B and C in shared memory, waits for "go", calls dgemm and says "done".
 * This process owns everything a result is made of:
 *   - the inputs: fresh random A and B for every call, from 256 bits of getrandom() per call, never visible
 *     to the kernel's process before the call (nothing of the generator's state is shared);
 *   - the clock: started before the kernel's process is resumed with "go", stopped when "done" arrives; the
 *     process is then frozen (SIGSTOP, waited for) before C is read, so a thread that goes on writing C after
 *     "done" cannot finish the work unseen;
 *   - the checks: the full check at each size of SIZES against its own reference, every timed call by
 *     Freivalds products with private random vectors, A and B compared with private copies, guard zones;
 *   - the report: one JSON object on OUT_FD, which the kernel's process never holds.
 * The child is isolated before exec: new PID, mount, network, IPC and UTS namespaces where the host allows (a
 * read-only view of the file system, an empty private tmpfs as working directory, a /proc of its own), an
 * unprivileged user, rlimits, its slot's cores, no_new_privs; the runner then installs a seccomp filter.
 *
 * Usage (the engine builds it):  monitor OUT_FD key=value ...   or   monitor probe key=value ... (the isolation
 * the host allows)
 * keys: runner work n sizes warmup min_reps max_reps min_time max_time tol fv cores mem_mb cpu_s file_mb
 *       nofile nproc uid gid ns timeout pings probe_limit min_clean gate_time
 * Timing goes on past min_reps and min_time until min_clean calls were made with the host at full speed (speed
 * probe <= probe_limit seconds; 0: no such condition), for at most gate_time seconds of calls (and within
 * max_time and max_reps).
 * Reports: {"status":"ok","times":[...],"probes":[...],"sizes":[...],"max_err":x,"handshake_s":h,"cpu_s":c,
 *           "isolation":[...]}  (probes: the host-speed probe before each timed call)
 *   or {"status":S,"detail":"...",...} with S in wrong, refused (with "syscall"), crashed (with "signal"),
 *   exited (with "code"), timeout, violation (the handshake was broken), driver_error (the machinery).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "protocol.h"

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#define MOUNT_ATTR_NOSUID 0x00000002
#define MOUNT_ATTR_NODEV 0x00000004
#endif
struct hpcrl_mount_attr { uint64_t attr_set, attr_clr, propagation, userns_fd; };

#define MAX_SIZES 8
#define MAX_REPS_CAP 100000

/* ---------- parameters ---------- */
static struct {
    const char *runner, *work, *sizes, *cores;
    int n, warmup, min_reps, max_reps, fv, ns, pings, min_clean;
    double min_time, max_time, tol, timeout, probe_limit, gate_time;
    long mem_mb, cpu_s, file_mb, nofile, nproc, uid, gid;
} P = {.uid = -1, .gid = -1, .pings = 16, .timeout = 60, .ns = 1, .tol = 4, .fv = 2, .warmup = 1, .min_reps = 5,
       .max_reps = 200, .min_time = 0.3, .max_time = 5, .mem_mb = 2048, .cpu_s = 120, .file_mb = 1, .nofile = 64,
       .nproc = 256, .min_clean = 3, .gate_time = 1e9};

static int out_fd = -1;
static pid_t child = -1;
static double deadline;
/* Isolation in force, as bits: the child's own (set before exec, sent to the parent) and the parent's. */
static const char *const ISO_NAMES[] = {"affinity", "userns", "pidns", "netns", "ipcns", "readonly-fs",
                                        "private-tmpfs", "private-proc", "rlimits", "unprivileged-user",
                                        "no-new-privs", "seccomp"};
enum { ISO_AFFINITY, ISO_USERNS, ISO_PIDNS, ISO_NETNS, ISO_IPCNS, ISO_ROFS, ISO_TMPFS, ISO_PROC, ISO_RLIMITS,
       ISO_UNPRIV, ISO_NNP, ISO_SECCOMP, ISO_COUNT };
static uint32_t iso_bits;

static void iso_add(int bit) { iso_bits |= 1u << bit; }

static void iso_json(char *buf, size_t cap) {
    size_t off = (size_t)snprintf(buf, cap, ",\"isolation\":[");
    for (int i = 0, first = 1; i < ISO_COUNT; i++)
        if (iso_bits & (1u << i)) {
            off += (size_t)snprintf(buf + off, cap - off, "%s\"%s\"", first ? "" : ",", ISO_NAMES[i]);
            first = 0;
        }
    snprintf(buf + off, cap - off, "]");
}

double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void emit(const char *json) {
    size_t len = strlen(json), off = 0;
    while (off < len) {
        ssize_t w = write(out_fd, json + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3);
        off += (size_t)w;
    }
}

static void end_child(void) {
    if (child > 0) {
        kill(child, SIGKILL);
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
        child = -1;
    }
}

/* Report a failure (extra: more JSON members, e.g. ",\"signal\":11") and end, the child with it. */
void finish(const char *status, int size, const char *extra, const char *fmt, ...) {
    char detail[768], buf[1600], isolation[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    for (char *p = detail; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) *p = ' ';
    end_child();
    iso_json(isolation, sizeof isolation);
    snprintf(buf, sizeof buf, "{\"status\":\"%s\",\"size\":%d%s%s,\"detail\":\"%s\"}\n", status, size,
             extra ? extra : "", isolation, detail);
    emit(buf);
    _exit(0);
}

/* ---------- the kernel's process ---------- */
static int cmd_w = -1, done_r = -1;
static uint32_t seq;


/* The child's end of how it died, as a failure report (never returns). */
static void report_death(int status, int m, const char *phase) {
    char extra[64];
    child = -1;
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(extra, sizeof extra, ",\"signal\":%d", sig);
        finish("crashed", m, extra, "the kernel's process was killed by signal %d (%s) %s", sig, strsignal(sig), phase);
    }
    int code = WEXITSTATUS(status);
    snprintf(extra, sizeof extra, ",\"code\":%d", code);
    finish("exited", m, extra, "the kernel's process exited with code %d %s", code, phase);
}

/* Wait until the child is stopped; reports its death if it died instead. */
static void wait_stopped(int m, const char *phase) {
    for (;;) {
        int st;
        pid_t got = waitpid(child, &st, WUNTRACED | WNOHANG);
        if (got == child) {
            if (WIFSTOPPED(st)) return;
            report_death(st, m, phase);
        }
        if (got < 0 && errno != EINTR) finish("driver_error", m, NULL, "waitpid: %s", strerror(errno));
        if (now() > deadline) finish("timeout", m, NULL, "the kernel's process did not stop %s", phase);
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Read one message; 1 on success, 0 on EOF, -1 on timeout. */
static int read_msg(struct hpcrl_msg *msg, double until) {
    size_t got = 0;
    while (got < sizeof *msg) {
        int ms = (int)((until - now()) * 1000.0) + 1;
        if (ms <= 0) return -1;
        struct pollfd pfd = {done_r, POLLIN, 0};
        int r = poll(&pfd, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return -1;
        ssize_t k = read(done_r, (char *)msg + got, sizeof *msg - got);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return 0;
        got += (size_t)k;
    }
    return 1;
}

static void refused(uint32_t nr, int m) {
    char extra[48];
    snprintf(extra, sizeof extra, ",\"syscall\":%u", nr);
    finish("refused", m, extra, "the kernel's process made system call %u, which the sandbox refuses", nr);
}

/* After a stop: anything more on the handshake pipe is a broken protocol (or a refusal report). */
static void drain(int m) {
    struct hpcrl_msg extra;
    struct pollfd pfd = {done_r, POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN)) return;
    ssize_t k = read(done_r, &extra, sizeof extra);
    if (k == (ssize_t)sizeof extra && extra.tag == HPCRL_MSG_REFUSED) refused(extra.value, m);
    if (k > 0) finish("violation", m, NULL, "the kernel's process wrote on the handshake channel (n=%d)", m);
}

/* One round trip with the (stopped) child: resume, command, wait for its answer, stop it again.
 * Returns seconds from before the resume to the answer. */
static double round_trip(uint32_t op, int m, const char *phase) {
    struct hpcrl_cmd cmd = {op, (uint32_t)m, ++seq, 0};
    struct hpcrl_msg msg;
    double t0 = now();
    kill(child, SIGCONT);
    if (write(cmd_w, &cmd, sizeof cmd) != (ssize_t)sizeof cmd) {
        int st;
        if (waitpid(child, &st, 0) == child) report_death(st, m, phase);
        finish("driver_error", m, NULL, "cannot send a command: %s", strerror(errno));
    }
    int r = read_msg(&msg, deadline);
    double t1 = now();
    if (r < 0) finish("timeout", m, NULL, "the kernel did not finish %s within the run's time limit of %g s", phase,
                      P.timeout);
    /* judged before the process's state: it may be gone already (a refusal report is followed by an exit) */
    if (r > 0 && msg.tag == HPCRL_MSG_REFUSED) refused(msg.value, m);
    if (r > 0 && (msg.tag != HPCRL_MSG_DONE || msg.value != seq))
        finish("violation", m, NULL, "the kernel's process wrote on the handshake channel %s", phase);
    kill(child, SIGSTOP);
    wait_stopped(m, phase);
    if (r == 0) finish("violation", m, NULL, "the kernel's process closed the handshake channel %s", phase);
    drain(m);
    return t1 - t0;
}

/* In the child: isolate, limit, drop privileges, exec the runner. probe_fd >= 0: report instead of exec. */
static void child_setup(int probe_fd, int cmd_r, int done_w) {
    char scratch[4096];
    snprintf(scratch, sizeof scratch, "%s/tmp", P.work);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (P.ns && unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == 0) {
        iso_add(ISO_NETNS);
        iso_add(ISO_IPCNS);
        struct hpcrl_mount_attr ro = {MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0};
        char opts[160];
        snprintf(opts, sizeof opts, "size=%ldk,nr_inodes=64,mode=0700,uid=%ld,gid=%ld", P.file_mb > 0 ? P.file_mb * 1024 : 4,
                 P.uid >= 0 ? P.uid : (long)getuid(), P.gid >= 0 ? P.gid : (long)getgid());
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0
            && syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof ro) == 0) {
            iso_add(ISO_ROFS);
            if (mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) == 0) iso_add(ISO_TMPFS);
            if (getpid() == 1 && mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
                iso_add(ISO_PROC);
        }
    }
    if (chdir(scratch) != 0) {
        dprintf(2, "monitor: cannot enter %s: %s\n", scratch, strerror(errno));
        _exit(HPCRL_EXIT_SETUP);
    }
    struct { int res; rlim_t v; } lim[] = {
        {RLIMIT_AS, (rlim_t)P.mem_mb << 20}, {RLIMIT_CPU, (rlim_t)P.cpu_s}, {RLIMIT_FSIZE, (rlim_t)P.file_mb << 20},
        {RLIMIT_NOFILE, (rlim_t)P.nofile}, {RLIMIT_NPROC, (rlim_t)P.nproc}, {RLIMIT_CORE, 0},
        {RLIMIT_STACK, (rlim_t)64 << 20}};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        struct rlimit rl = {lim[i].v, lim[i].v};
        if (setrlimit(lim[i].res, &rl) != 0) _exit(HPCRL_EXIT_SETUP);
    }
    iso_add(ISO_RLIMITS);
    if (P.uid >= 0 && geteuid() == 0) {
        if (setgroups(0, NULL) != 0 || setresgid((gid_t)P.gid, (gid_t)P.gid, (gid_t)P.gid) != 0
            || setresuid((uid_t)P.uid, (uid_t)P.uid, (uid_t)P.uid) != 0)
            _exit(HPCRL_EXIT_SETUP);
        iso_add(ISO_UNPRIV);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(HPCRL_EXIT_SETUP);
    iso_add(ISO_NNP);
    if (probe_fd >= 0) { /* can this process install a filter? (the runner installs the real one) */
        struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        struct sock_fprog prog = {1, allow};
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0) iso_add(ISO_SECCOMP);
    }
    struct hpcrl_msg mine = {HPCRL_MSG_ISOLATION, iso_bits};
    if (write(probe_fd >= 0 ? probe_fd : done_w, &mine, sizeof mine) != (ssize_t)sizeof mine) _exit(HPCRL_EXIT_SETUP);
    if (probe_fd >= 0) _exit(0);
    /* fds: 0 /dev/null, 1+2 the log (the monitor's own stdout), 3 shared matrices, 4 commands, 5 messages */
    int hi[3] = {fcntl(shm_fd, F_DUPFD, 20), fcntl(cmd_r, F_DUPFD, 20), fcntl(done_w, F_DUPFD, 20)};
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(1, 2) < 0 || dup2(hi[0], HPCRL_SHM_FD) < 0
        || dup2(hi[1], HPCRL_CMD_FD) < 0 || dup2(hi[2], HPCRL_DONE_FD) < 0)
        _exit(HPCRL_EXIT_SETUP);
    syscall(SYS_close_range, 6u, ~0u, 0u);
    char a0[32], a1[32], a2[32], a3[32], a4[32];
    snprintf(a0, sizeof a0, "%zu", region_len);
    snprintf(a1, sizeof a1, "%zu", off_abc[0]); snprintf(a2, sizeof a2, "%zu", off_abc[1]);
    snprintf(a3, sizeof a3, "%zu", off_abc[2]);
    int nmax = 0;
    for (const char *s = P.sizes; s && *s;) { int v = atoi(s); if (v > nmax) nmax = v; s = strchr(s, ','); if (s) s++; }
    snprintf(a4, sizeof a4, "%d", nmax);
    char *argv[] = {(char *)P.runner, a0, a1, a2, a3, a4, NULL};
    extern char **environ;
    execve(P.runner, argv, environ);
    dprintf(2, "monitor: cannot exec the kernel's runner %s: %s\n", P.runner, strerror(errno));
    _exit(HPCRL_EXIT_SETUP);
}

/* PID namespace first (it applies to children), then fork; where the host refuses, go without it. */
static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t w = write(fd, text, strlen(text));
    close(fd);
    return w == (ssize_t)strlen(text) ? 0 : -1;
}

/* Without root: a user namespace that maps only our own ids gives the namespaces below without privilege. */
static void enter_userns(void) {
    uid_t u = geteuid();
    gid_t g = getegid();
    if (u == 0 || unshare(CLONE_NEWUSER) != 0) return;
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)u, (unsigned)u);
    int ok = write_file("/proc/self/uid_map", map) == 0;
    ok = ok && write_file("/proc/self/setgroups", "deny") == 0;
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)g, (unsigned)g);
    ok = ok && write_file("/proc/self/gid_map", map) == 0;
    if (ok) iso_add(ISO_USERNS);
}

/* PID namespace first (it applies to children), then fork; where the host refuses, go without it. */
static pid_t spawn(int probe_fd, int cmd_r, int done_w) {
    if (P.ns) enter_userns();
    if (P.ns && unshare(CLONE_NEWPID) == 0) iso_add(ISO_PIDNS);
    pid_t pid = fork();
    if (pid == 0) child_setup(probe_fd, cmd_r, done_w);
    return pid;
}

static void parse(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) finish("driver_error", 0, NULL, "bad argument %s", argv[i]);
        *eq = 0;
        const char *k = argv[i], *v = eq + 1;
#define S(name) if (!strcmp(k, #name)) { P.name = v; continue; }
#define I(name) if (!strcmp(k, #name)) { P.name = atol(v); continue; }
#define D(name) if (!strcmp(k, #name)) { P.name = atof(v); continue; }
        S(runner) S(work) S(sizes) S(cores)
        I(n) I(warmup) I(min_reps) I(max_reps) I(fv) I(ns) I(pings) I(mem_mb) I(cpu_s) I(file_mb) I(nofile)
        I(nproc) I(uid) I(gid) I(min_clean)
        D(min_time) D(max_time) D(tol) D(timeout) D(probe_limit) D(gate_time)
        finish("driver_error", 0, NULL, "unknown argument %s", k);
    }
}

static void pin(void) {
    if (!P.cores) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const char *s = P.cores; *s;) {
        CPU_SET(atoi(s), &set);
        s = strchr(s, ',');
        if (!s) break;
        s++;
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        finish("driver_error", 0, NULL, "cannot pin to cores %s: %s", P.cores, strerror(errno));
    iso_add(ISO_AFFINITY);
}

/* What the host allows: the child's setup without the exec; prints {"isolation":[...]} */
static int probe(void) {
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pid_t pid = spawn(fds[1], -1, -1);
    close(fds[1]);
    struct hpcrl_msg msg = {0, 0};
    ssize_t k = read(fds[0], &msg, sizeof msg);
    int st = 0;
    waitpid(pid, &st, 0);
    if (k == (ssize_t)sizeof msg && msg.tag == HPCRL_MSG_ISOLATION) iso_bits |= msg.value;
    char buf[320];
    iso_json(buf, sizeof buf);
    printf("{\"ok\":%s%s}\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "true" : "false", buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: monitor OUT_FD|probe key=value ...\n"); return 2; }
    int probing = !strcmp(argv[1], "probe");
    out_fd = probing ? 1 : atoi(argv[1]);
    parse(argc, argv);
    deadline = now() + P.timeout;
    if (probing) return probe();
    pin();
    int n = P.n, sizes[MAX_SIZES], nsizes = 0, nmax = n;
    char sizes_copy[256];
    snprintf(sizes_copy, sizeof sizes_copy, "%s", P.sizes ? P.sizes : "");
    for (char *s = strtok(sizes_copy, ","); s && nsizes < MAX_SIZES; s = strtok(NULL, ",")) {
        sizes[nsizes] = atoi(s);
        if (sizes[nsizes] < 1) finish("driver_error", sizes[nsizes], NULL, "bad check size");
        if (sizes[nsizes] > nmax) nmax = sizes[nsizes];
        nsizes++;
    }
    if (n < 1 || P.fv < 1 || P.max_reps < 1 || P.max_reps > MAX_REPS_CAP || !P.runner || !P.work)
        finish("driver_error", n, NULL, "bad monitor arguments");
    layout(nmax);
    double *times = malloc((size_t)P.max_reps * sizeof(double)), *probes = malloc((size_t)P.max_reps * sizeof(double));
    if (!checks_init(nmax, P.fv, P.tol) || !times || !probes)
        finish("driver_error", n, NULL, "the monitor could not allocate its buffers");

    int cmd[2], done[2];
    if (pipe2(cmd, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0)
        finish("driver_error", 0, NULL, "pipe: %s", strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    child = spawn(-1, cmd[0], done[1]);
    if (child < 0) finish("driver_error", 0, NULL, "fork: %s", strerror(errno));
    close(cmd[0]); close(done[1]);
    cmd_w = cmd[1]; done_r = done[0];

    struct hpcrl_msg ready;
    int r = read_msg(&ready, deadline);
    if (r > 0 && ready.tag == HPCRL_MSG_ISOLATION) { /* from the child's own setup, before any exec */
        iso_bits |= ready.value;
        r = read_msg(&ready, deadline);
    }
    if (r <= 0 || ready.tag != HPCRL_MSG_READY) {
        int st;
        if (r == 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == HPCRL_EXIT_SETUP) {
            child = -1;
            finish("driver_error", 0, NULL, "the kernel's process could not be set up (see its log)");
        }
        if (r == 0 && waitpid(child, &st, WNOHANG) == child) report_death(st, 0, "while starting");
        finish("driver_error", 0, NULL, "the kernel's runner did not start (no ready message)");
    }
    kill(child, SIGSTOP);
    wait_stopped(0, "while starting");
    if (ready.value == 1) iso_add(ISO_SECCOMP);

    /* 0. the handshake's own cost, measured before any code of the kernel has run */
    double hs = 1e9;
    for (int i = 0; i < P.pings; i++) {
        double t = round_trip(HPCRL_OP_PING, 0, "during a ping");
        if (t < hs) hs = t;
    }

    /* 1. full checks */
    double worst = 0.0;
    for (int i = 0; i < nsizes; i++) {
        fresh_inputs(sizes[i]);
        round_trip(HPCRL_OP_CALL, sizes[i], "during the full check");
        check_integrity(sizes[i]);
        double w = full_check(sizes[i]);
        if (w > worst) worst = w;
    }

    /* 2. timed calls, each on fresh inputs and checked */
    int reps = 0, clean = 0;
    double total = 0.0;
    for (int call = 0;; call++) {
        fresh_inputs(n);
        freivalds_prepare(n);
        double pt = speed_probe();
        double t = round_trip(HPCRL_OP_CALL, n, "during a timed call");
        check_integrity(n);
        freivalds_check(n, call);
        if (call < P.warmup) continue;
        probes[reps] = pt;
        times[reps++] = t;
        total += t;
        clean += P.probe_limit > 0 && pt <= P.probe_limit;
        int settled = P.probe_limit <= 0 || clean >= P.min_clean || total >= P.gate_time;
        int enough = reps >= P.min_reps && total >= P.min_time && settled;
        if (reps >= P.max_reps || enough || (reps >= 3 && total >= P.max_time)) break;
    }

    /* 3. end the child, then report */
    struct rusage ru;
    kill(child, SIGKILL);
    int st;
    while (wait4(child, &st, 0, &ru) < 0 && errno == EINTR) {}
    child = -1;
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec
                 + 1e-6 * ru.ru_stime.tv_usec;
    size_t cap = 1024 + (size_t)reps * 52 + (size_t)nsizes * 12;
    char *buf = malloc(cap);
    if (!buf) finish("driver_error", n, NULL, "the monitor could not allocate its report");
    char isolation[320];
    iso_json(isolation, sizeof isolation);
    size_t off = (size_t)snprintf(buf, cap, "{\"status\":\"ok\",\"max_err\":%.6g,\"handshake_s\":%.9e,\"cpu_s\":%.6f%s"
                                  ",\"sizes\":[", worst, hs, cpu, isolation);
    for (int i = 0; i < nsizes; i++) off += (size_t)snprintf(buf + off, cap - off, "%s%d", i ? "," : "", sizes[i]);
    off += (size_t)snprintf(buf + off, cap - off, "],\"times\":[");
    for (int i = 0; i < reps; i++) off += (size_t)snprintf(buf + off, cap - off, "%s%.9e", i ? "," : "", times[i]);
    off += (size_t)snprintf(buf + off, cap - off, "],\"probes\":[");
    for (int i = 0; i < reps; i++) off += (size_t)snprintf(buf + off, cap - off, "%s%.9e", i ? "," : "", probes[i]);
    snprintf(buf + off, cap - off, "]}\n");
    emit(buf);
    return 0;
}
