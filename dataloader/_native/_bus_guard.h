/* SIGBUS guard for copies from or into memory that may map a file (used by _rowcopy.pyx).

   A file truncated while mapped makes any access past its new end fault with SIGBUS.
   dl_bus_guarded(ranges, nranges, fn, arg, fault) runs fn(arg) with a sigsetjmp point and
   the address ranges the copy may fault in ([lo, hi) each: a mapped .ndf file; a NumPy
   array's source or destination bytes) in a thread-local slot; one process-wide SIGBUS
   handler siglongjmps back when the faulting thread is inside a guard and the address
   lies in one of its ranges (or faulthandler, installed after us, re-raises that fault: a
   tgkill of the thread by this process), and dl_bus_guarded then returns `fault`; the
   faulting address is kept for the thread (dl_bus_fault_address(), NULL for a re-raised
   fault, whose siginfo carries no address), so the caller can name the file that faulted.
   Any other SIGBUS, also one sent with kill() to a thread inside a guard, goes to the
   handler installed before ours (faulthandler's, or the default action), as without us;
   where that was SIG_IGN, a fault ends the process as the kernel would (returning would
   run the faulting access again forever).

   dl_bus_install() installs the handler when the first mapped Reader is made (and at a
   gather whose source or destination is not NumPy's own memory: take_rows at each call,
   RowJobs once an epoch), and again by a later one if ours was replaced by the default
   action (faulthandler.disable() may restore that) or by the handler it had replaced:
   so a handler reset while an epoch runs leaves its workers' gathers unguarded until the
   next epoch (a Reader's until the next Reader is made).  A handler that only returns
   (a Python-level signal.signal(SIGBUS, ...)) installed after ours makes a fault in a
   guarded copy run again forever, as it does NumPy's own reads.  Any other handler
   installed after ours is left alone: it may chain to ours (faulthandler, enabled later,
   prints the fault and re-raises it into ours, which still recovers), and replacing it
   would close a loop.

   The handler is SA_NODEFER, so the jump leaves the signal mask as it was, and the guard
   is a plain sigsetjmp(env, 0): no system call, a few ns a gather.  Only a memcpy from
   or into the ranges is interrupted; it holds no lock and no Python state, so abandoning
   it is safe.  The thread-local slot is initial-exec (static TLS), so the handler reads it
   without __tls_get_addr, which may allocate on a thread's first access. */

#ifndef DATALOADER_BUS_GUARD_H
#define DATALOADER_BUS_GUARD_H

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* An address range a guarded copy may fault in: [lo, hi). */
typedef struct {
    const char *lo, *hi;
} dl_bus_range;

typedef struct {
    sigjmp_buf env;
    const dl_bus_range *ranges;  /* the ranges this guard covers */
    int nranges;
} dl_bus_guard;

/* The guard of the calling thread (NULL outside a guarded copy). */
static __thread __attribute__((tls_model("initial-exec")))
    dl_bus_guard *volatile dl_bus_current = NULL;
/* Where the calling thread's last guarded copy faulted (NULL: a re-raised fault). */
static __thread __attribute__((tls_model("initial-exec")))
    const char *volatile dl_bus_fault_at = NULL;
static struct sigaction dl_bus_previous;
static pthread_mutex_t dl_bus_install_lock = PTHREAD_MUTEX_INITIALIZER;

static int dl_bus_in_ranges(const dl_bus_guard *guard, const char *addr) {
    int k;
    for (k = 0; k < guard->nranges; k++) {
        if (addr >= guard->ranges[k].lo && addr < guard->ranges[k].hi) return 1;
    }
    return 0;
}

static void dl_bus_handler(int sig, siginfo_t *info, void *context) {
    dl_bus_guard *guard = dl_bus_current;
    if (guard != NULL) {
        const char *addr = (const char *)info->si_addr;
        /* A fault (si_code > 0) in one of the guard's ranges, or the same fault re-raised
           by faulthandler after it printed it: raise() is a tgkill of this very thread by
           this process (SI_TKILL; its siginfo has no address).  A SIGBUS sent with kill()
           (SI_USER, by this process or another) is not a fault of the copy: it goes on as
           without us. */
        int fault = info->si_code > 0 && dl_bus_in_ranges(guard, addr);
        if (fault || (info->si_code == SI_TKILL && info->si_pid == getpid())) {
            dl_bus_fault_at = fault ? addr : NULL;
            dl_bus_current = NULL;
            siglongjmp(guard->env, 1);
        }
    }
    if (dl_bus_previous.sa_flags & SA_SIGINFO) {
        dl_bus_previous.sa_sigaction(sig, info, context);
    } else if (dl_bus_previous.sa_handler == SIG_IGN && info->si_code <= 0) {
        return;  /* a sent SIGBUS, ignored as before us */
    } else if (dl_bus_previous.sa_handler == SIG_DFL || dl_bus_previous.sa_handler == SIG_IGN) {
        /* SIG_IGN and a fault: returning would fault again forever; the kernel ends the
           process for a fault it cannot deliver (force_sig_fault), and so do we. */
        /* as if we were never installed: the default action ends the process */
        signal(sig, SIG_DFL);
        raise(sig);
    } else {
        dl_bus_previous.sa_handler(sig);
    }
}

static int dl_bus_installed = 0;

static int dl_same_handler(const struct sigaction *a, const struct sigaction *b) {
    if ((a->sa_flags & SA_SIGINFO) != (b->sa_flags & SA_SIGINFO)) return 0;
    return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction == b->sa_sigaction
                                      : a->sa_handler == b->sa_handler;
}

static int dl_terminal_handler(const struct sigaction *a) {
    return !(a->sa_flags & SA_SIGINFO) && (a->sa_handler == SIG_DFL || a->sa_handler == SIG_IGN);
}

/* Make dl_bus_handler the SIGBUS handler: the first time, and again when ours was
   replaced by a handler that cannot chain to it: the default action (what
   faulthandler.disable() restores) or the handler ours had replaced.  Any other
   handler installed after ours is left in place: it may chain to ours (faulthandler
   does, after printing the fault), and replacing it would close a loop.
   Returns 0 or an errno. */
static int dl_bus_install(void) {
    struct sigaction current, ours;
    int err = 0;
    pthread_mutex_lock(&dl_bus_install_lock);
    if (sigaction(SIGBUS, NULL, &current) != 0) {
        err = errno;
    } else if (!dl_bus_installed || dl_terminal_handler(&current)
               || dl_same_handler(&current, &dl_bus_previous)) {
        memset(&ours, 0, sizeof ours);
        ours.sa_sigaction = dl_bus_handler;
        ours.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&ours.sa_mask);
        if (sigaction(SIGBUS, &ours, &dl_bus_previous) != 0) err = errno;
        else dl_bus_installed = 1;
    }
    pthread_mutex_unlock(&dl_bus_install_lock);
    return err;
}

/* fn(arg) with SIGBUS in any of ranges[0 .. nranges) turned into the return value
   `fault` (then dl_bus_fault_address() says where).  `ranges` must outlive the call. */
static int dl_bus_guarded(const dl_bus_range *ranges, int nranges, int (*fn)(void *),
                          void *arg, int fault) {
    dl_bus_guard guard;
    int status;
    guard.ranges = ranges;
    guard.nranges = nranges;
    if (sigsetjmp(guard.env, 0) != 0) {
        return fault;  /* back from the handler, which cleared dl_bus_current */
    }
    dl_bus_current = &guard;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  /* set before the copy starts */
    status = fn(arg);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  /* cleared only after it ends */
    dl_bus_current = NULL;
    return status;
}

/* The address where the calling thread's last guarded copy that returned `fault`
   faulted; NULL when the fault reached us re-raised (faulthandler), without its address. */
static const char *dl_bus_fault_address(void) {
    return dl_bus_fault_at;
}

#endif /* DATALOADER_BUS_GUARD_H */
