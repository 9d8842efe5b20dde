/* The kubectl-delivery image's entrypoint: copies the kubectl binary next to it (/kubectl) to
 * $TARGET_DIR/kubectl, executable by every user, and exits. The MPIJob launcher's init container
 * runs it, so that the launcher's kubexec.sh can run `kubectl exec` into the job's workers.
 * The copy is written beside its target and renamed, so a half-written kubectl never runs.
 * `deliver -v` prints the version and exits. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOURCE "/kubectl"

static int fail(const char *what, const char *path) {
    fprintf(stderr, "kubectl-delivery: %s %s: %s\n", what, path, strerror(errno));
    return 1;
}

static int copy(int from, int to) {
    char buffer[1 << 16];
    ssize_t read_bytes;
    while ((read_bytes = read(from, buffer, sizeof buffer)) > 0) {
        for (ssize_t done = 0; done < read_bytes;) {
            ssize_t written = write(to, buffer + done, (size_t)(read_bytes - done));
            if (written < 0) return -1;
            done += written;
        }
    }
    return read_bytes < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        printf("kubectl-delivery %s\n", VERSION);
        return 0;
    }
    const char *dir = getenv("TARGET_DIR");
    if (dir == NULL || dir[0] == '\0') {
        fprintf(stderr, "kubectl-delivery: TARGET_DIR is not set\n"
                        "hint: set TARGET_DIR to the directory of the volume kubectl goes to\n");
        return 2;
    }
    char target[4096], partial[4096];
    if (snprintf(target, sizeof target, "%s/kubectl", dir) >= (int)sizeof target ||
        snprintf(partial, sizeof partial, "%s/.kubectl.partial", dir) >= (int)sizeof partial) {
        fprintf(stderr, "kubectl-delivery: TARGET_DIR is too long\n");
        return 2;
    }
    int from = open(SOURCE, O_RDONLY | O_CLOEXEC);
    if (from < 0) return fail("cannot open", SOURCE);
    int to = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (to < 0) return fail("cannot create", partial);
    if (copy(from, to) != 0) return fail("cannot copy kubectl to", partial);
    /* The umask may have taken bits away: every user runs it. */
    if (fchmod(to, 0755) != 0 || close(to) != 0) return fail("cannot finish", partial);
    close(from);
    if (rename(partial, target) != 0) return fail("cannot rename to", target);
    printf("kubectl-delivery: delivered %s\n", target);
    return 0;
}
