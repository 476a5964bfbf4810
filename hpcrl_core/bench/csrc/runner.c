/* hpcrl kernel runner: the only project code inside the kernel's process.
 *
 * Linked with one model-written kernel object after the link-level screen, started by the monitor
 * (monitor.c), never run by hand. Its process is hostile: nothing it says is believed. The monitor owns the
 * inputs, the clock, the verification and the report; this runner only
 *   1. maps the shared matrices (fd 3, a memfd of REGION bytes),
 *   2. installs the system-call filter (seccomp; no_new_privs is set by the monitor before exec),
 *   3. answers the monitor on two pipes: reads a command on fd 4, calls dgemm or answers a ping, writes a
 *      message on fd 5.
 * Usage: runner REGION OFF_A OFF_B OFF_C NMAX
 *
 * The filter allows what a DGEMM kernel with OpenMP needs (memory, futex, threads of this process, exit,
 * reading its own affinity) and the two handshake pipes; a refused call raises SIGSYS, whose handler reports
 * the call's number on the handshake pipe and ends the process. clone3 answers ENOSYS (its flags sit behind a
 * pointer the filter cannot read), so libc falls back to clone, whose flags must include CLONE_THREAD.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "protocol.h"

void dgemm(int n, const double *A, const double *B, double *C);

#if defined(__x86_64__)
#define ARCH_NR AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH_NR AUDIT_ARCH_AARCH64
#else
#error "the runner's system-call filter knows x86-64 and aarch64 only"
#endif

static void send_msg(uint32_t tag, uint32_t value) {
    struct hpcrl_msg m = {tag, value};
    (void)!write(HPCRL_DONE_FD, &m, sizeof m);
}

static void on_sigsys(int sig, siginfo_t *info, void *ctx) {
    (void)sig; (void)ctx;
    send_msg(HPCRL_MSG_REFUSED, (uint32_t)info->si_syscall);
    syscall(SYS_exit_group, HPCRL_EXIT_REFUSED);
}

#define LD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARG_LO(i) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
/* if nr == N: allow */
#define ALLOW(N) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (N), 0, 1), RET(SECCOMP_RET_ALLOW)

static int install_filter(void) {
    uint32_t self = (uint32_t)getpid();
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_NR, 1, 0),
        RET(SECCOMP_RET_KILL_PROCESS),
        LD_NR,
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1), /* the x32 ABI */
        RET(SECCOMP_RET_KILL_PROCESS),
#endif
        ALLOW(__NR_munmap), ALLOW(__NR_mremap), ALLOW(__NR_brk), ALLOW(__NR_madvise), ALLOW(__NR_futex),
        ALLOW(__NR_exit), ALLOW(__NR_exit_group), ALLOW(__NR_rt_sigprocmask), ALLOW(__NR_rt_sigreturn),
        ALLOW(__NR_sched_yield), ALLOW(__NR_sched_getaffinity), ALLOW(__NR_getpid), ALLOW(__NR_gettid),
        ALLOW(__NR_set_robust_list), ALLOW(__NR_clock_gettime), ALLOW(__NR_clock_nanosleep),
        ALLOW(__NR_nanosleep), ALLOW(__NR_getcpu), ALLOW(__NR_getrandom), ALLOW(__NR_membarrier),
        ALLOW(__NR_rseq), /* glibc aborts a new thread whose rseq registration fails */
        /* clone3: ENOSYS, libc falls back to clone */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1), RET(SECCOMP_RET_ERRNO | ENOSYS),
        /* read: the command pipe only */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_read, 0, 4), LD_ARG_LO(0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HPCRL_CMD_FD, 0, 1), RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_TRAP),
        /* write: the handshake pipe and stderr (a size-limited log) only */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 0, 5), LD_ARG_LO(0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, HPCRL_DONE_FD, 1, 0), BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 1),
        RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_TRAP),
        /* mmap / mprotect: never executable memory */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 0, 4), LD_ARG_LO(2),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 1, 0), RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_TRAP),
        /* clone: threads of this process only (no new process, no new namespace) */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 5), LD_ARG_LO(0),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 2),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET, 1, 0),
        RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_TRAP),
        /* rt_sigaction: any signal but SIGSYS, whose handler reports refused calls */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigaction, 0, 4), LD_ARG_LO(0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SIGSYS, 1, 0), RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_ERRNO | EPERM),
        /* tgkill (abort() raising SIGABRT): to this process only */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_tgkill, 0, 4), LD_ARG_LO(0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 0, 1), RET(SECCOMP_RET_ALLOW), RET(SECCOMP_RET_TRAP),
        RET(SECCOMP_RET_TRAP),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static int die(const char *why) {
    (void)!write(2, why, strlen(why));
    send_msg(HPCRL_MSG_SETUP_FAILED, (uint32_t)errno);
    return HPCRL_EXIT_SETUP;
}

int main(int argc, char **argv) {
    if (argc != 6) return die("runner: expected REGION OFF_A OFF_B OFF_C NMAX\n");
    size_t region = strtoull(argv[1], NULL, 10);
    size_t off[3] = {strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10)};
    uint64_t nmax = strtoull(argv[5], NULL, 10);
    for (int i = 0; i < 3; i++)
        if (off[i] % 64 || off[i] + nmax * nmax * sizeof(double) > region) return die("runner: bad layout\n");
    char *base = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_SHARED, HPCRL_SHM_FD, 0);
    if (base == MAP_FAILED) return die("runner: cannot map the shared matrices\n");
    close(HPCRL_SHM_FD);
    double *A = (double *)(base + off[0]), *B = (double *)(base + off[1]), *C = (double *)(base + off[2]);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigfillset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) != 0) return die("runner: cannot install the SIGSYS handler\n");
    /* where the host refuses the filter, the monitor leaves "seccomp" out of the result's isolation */
    int filtered = install_filter() == 0;
    send_msg(HPCRL_MSG_READY, (uint32_t)filtered);

    for (;;) {
        struct hpcrl_cmd cmd;
        ssize_t got = read(HPCRL_CMD_FD, &cmd, sizeof cmd);
        if (got != (ssize_t)sizeof cmd || cmd.op == HPCRL_OP_EXIT) syscall(SYS_exit_group, 0);
        if (cmd.op == HPCRL_OP_CALL && cmd.m >= 1 && cmd.m <= nmax) dgemm((int)cmd.m, A, B, C);
        send_msg(HPCRL_MSG_DONE, cmd.seq);
    }
}
