/*
 * pause: the first process of every pod on the real node (containerd's sandbox image).
 *
 * It holds the pod's namespaces open and does nothing else: it waits for signals, reaps any
 * child handed to it (it is PID 1 of the pod when the pod shares one PID namespace, so orphans
 * of the other containers become its children), and exits 0 on SIGINT or SIGTERM.
 *
 * The signals are blocked and taken with sigwaitinfo(), so no work runs in a signal handler.
 * Each still gets a handler that does nothing: a PID 1 drops signals left at SIG_DFL, and a
 * handler makes sure SIGTERM reaches the loop whichever way the kernel treats a blocked one.
 *
 *   pause        wait until SIGINT or SIGTERM
 *   pause -v     print the version and exit
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef VERSION
#define VERSION "unknown"
#endif

static void ignore(int sig) { (void)sig; }

/* Collects every child that has exited, without waiting for those still running. */
static void reap_children(void) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

static int wait_for_signals(const sigset_t *signals) {
    for (;;) {
        int sig = sigwaitinfo(signals, NULL);
        if (sig == SIGCHLD) {
            reap_children();
        } else if (sig == SIGINT || sig == SIGTERM) {
            fprintf(stderr, "pause: got %s, exiting\n", strsignal(sig));
            return 0;
        } else if (sig < 0 && errno != EINTR) {
            perror("pause: sigwaitinfo");
            return 1;
        }
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        printf("pause %s\n", VERSION);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: pause [-v]\n");
        return 2;
    }
    if (getpid() != 1) {
        fprintf(stderr, "pause: warning: not the first process of its PID namespace\n");
    }

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &signals, NULL) != 0) {
        perror("pause: sigprocmask");
        return 1;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = ignore;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGINT, &action, NULL) != 0 || sigaction(SIGTERM, &action, NULL) != 0 ||
        sigaction(SIGCHLD, &action, NULL) != 0) {
        perror("pause: sigaction");
        return 1;
    }
    reap_children();
    return wait_for_signals(&signals);
}
