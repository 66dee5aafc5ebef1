// synced.so: a recorder of synced bytes, for power-loss tests (bench/power_loss.py).
//
// Loaded into `searchd serve` with LD_PRELOAD, it wraps fsync(2) and fdatasync(2) and keeps,
// in the shadow directory $SYNCED_SHADOW, exactly what a power cut would leave under the
// strict POSIX model (the one ALICE and CrashMonkey test against):
//   - a file's bytes survive only up to its size when an fsync/fdatasync of it began and
//     returned 0;
//   - a directory entry (a create, rename or unlink) survives only when an fsync of that
//     directory began after it and returned 0.
// Real filesystems usually keep more (ext4 data=ordered, rename heuristics); this model keeps
// the least any of them may keep, so a server that passes it passes on all of them.
//
// Layout of the shadow:
//   files/KEY  the synced bytes of the inode KEY (KEY = "inode-generation", unique across
//              inode reuse)
//   dirs/KEY   the synced listing of directory KEY: lines "f|d KEY NAME"
//   root       KEY of $SYNCED_BASELINE, the directory recorded whole at load
//
// At load, everything under $SYNCED_BASELINE is recorded as synced (the caller runs sync(1)
// first, which makes that true). bench/power_loss.py rebuilds the image from the shadow.
//
// Assumption, true of searchd's files: a file is either append-only (the write-ahead log) or
// written whole before its first sync (segments, deleted sets, manifests, temp files then
// renamed), so bytes below the size at the start of a sync are not rewritten later.

#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static const char *shadow(void) {
    const char *s = getenv("SYNCED_SHADOW");
    return (s && *s) ? s : NULL;
}

// The key of the inode at (dirfd, path); flags AT_EMPTY_PATH with path "" for an fd.
// "inode-generation": ext4 gives every new inode a fresh random generation, so an inode
// number reused after a delete (tantivy's temp files, renamed-over manifests) gets a new key;
// the birth time alone is too coarse (one clock tick) for that.
// Returns 'f' for a regular file, 'd' for a directory, 0 for anything else or an error.
static char key_of(int dirfd, const char *path, int flags, char *key, size_t n,
                   unsigned long long *size) {
    struct statx sx;
    if (statx(dirfd, path, flags | AT_SYMLINK_NOFOLLOW,
              STATX_INO | STATX_TYPE | STATX_SIZE, &sx) != 0)
        return 0;
    char t = S_ISREG(sx.stx_mode) ? 'f' : S_ISDIR(sx.stx_mode) ? 'd' : 0;
    if (!t) return 0;
    // With AT_EMPTY_PATH the inode is the fd itself (the ioctl works on any open mode).
    int own = !(flags & AT_EMPTY_PATH);
    int fd = own ? openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : dirfd;
    unsigned int gen = 0;
    int r = fd < 0 ? -1 : ioctl(fd, FS_IOC_GETVERSION, &gen);
    if (own && fd >= 0) close(fd);
    if (r != 0) return 0;
    snprintf(key, n, "%llu-%u", (unsigned long long)sx.stx_ino, gen);
    if (size) *size = sx.stx_size;
    return t;
}

static int write_all(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

// Copies bytes [from, to) of `in` to the end of `out`.
static int copy_range(int in, int out, off_t from, off_t to) {
    char buf[1 << 16];
    while (from < to) {
        size_t want = (size_t)(to - from) < sizeof buf ? (size_t)(to - from) : sizeof buf;
        ssize_t r = pread(in, buf, want, from);
        if (r <= 0) return r == 0 ? 0 : -1;
        if (write_all(out, buf, (size_t)r) != 0) return -1;
        from += r;
    }
    return 0;
}

// Records the first `size` bytes of the file open as `fd` under files/KEY.
static void record_file(int fd, const char *key, off_t size) {
    const char *sh = shadow();
    char dst[4096], tmp[4200], src[64];
    snprintf(dst, sizeof dst, "%s/files/%s", sh, key);
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    int in = open(src, O_RDONLY | O_CLOEXEC);  // the fd itself may be write-only
    if (in < 0) return;
    struct stat st;
    if (stat(dst, &st) == 0 && st.st_size <= size) {
        // Append-only growth: add the new synced bytes.
        int out = open(dst, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (out >= 0) {
            copy_range(in, out, st.st_size, size);
            close(out);
        }
    } else {
        // First sync, or the file shrank (a rolled-back append): copy it whole, then rename,
        // so the shadow never holds a half-written copy.
        snprintf(tmp, sizeof tmp, "%s.tmp", dst);
        int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out >= 0) {
            int ok = copy_range(in, out, 0, size) == 0;
            close(out);
            if (ok) rename(tmp, dst);
        }
    }
    close(in);
}

// The listing of the directory open as `fd`, as "f|d KEY NAME\n" lines (malloc'd).
static char *list_dir(int fd) {
    int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0) return NULL;
    DIR *dir = fdopendir(d);
    if (!dir) {
        close(d);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *out = malloc(cap);
    out[0] = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char key[128];
        char t = key_of(dirfd(dir), e->d_name, 0, key, sizeof key, NULL);
        if (!t) continue;
        size_t need = strlen(key) + strlen(e->d_name) + 8;
        if (len + need >= cap) {
            while (len + need >= cap) cap *= 2;
            out = realloc(out, cap);
        }
        len += (size_t)snprintf(out + len, cap - len, "%c %s %s\n", t, key, e->d_name);
    }
    closedir(dir);
    return out;
}

static void record_dir(const char *key, const char *listing) {
    char dst[4096], tmp[4200];
    snprintf(dst, sizeof dst, "%s/dirs/%s", shadow(), key);
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) return;
    int ok = write_all(out, listing, strlen(listing)) == 0;
    close(out);
    if (ok) rename(tmp, dst);
}

// One wrapped sync: note what exists before it starts, call the real one, and on success
// record that state as durable.
static int wrapped(int fd, int (*real)(int)) {
    if (!shadow()) return real(fd);
    char key[128];
    unsigned long long size = 0;
    char t = key_of(fd, "", AT_EMPTY_PATH, key, sizeof key, &size);
    char *listing = t == 'd' ? list_dir(fd) : NULL;
    int r = real(fd);
    int saved = errno;
    if (r == 0 && t) {
        pthread_mutex_lock(&mu);
        if (t == 'f') record_file(fd, key, (off_t)size);
        else if (listing) record_dir(key, listing);
        pthread_mutex_unlock(&mu);
    }
    free(listing);
    errno = saved;
    return r;
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return wrapped(fd, real);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return wrapped(fd, real);
}

// Records the whole tree at `path` (already synced by the caller) into the shadow.
static void baseline(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char key[128];
    unsigned long long size = 0;
    char t = key_of(fd, "", AT_EMPTY_PATH, key, sizeof key, &size);
    if (t == 'f') {
        record_file(fd, key, (off_t)size);
    } else if (t == 'd') {
        char *listing = list_dir(fd);
        if (listing) {
            record_dir(key, listing);
            free(listing);
        }
        DIR *dir = fdopendir(fd);
        if (dir) {
            struct dirent *e;
            while ((e = readdir(dir))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char child[4096];
                snprintf(child, sizeof child, "%s/%s", path, e->d_name);
                baseline(child);
            }
            closedir(dir);
            return;
        }
    }
    close(fd);
}

__attribute__((constructor)) static void init(void) {
    const char *sh = shadow();
    const char *base = getenv("SYNCED_BASELINE");
    if (!sh || !base || !*base) return;
    char p[4096];
    snprintf(p, sizeof p, "%s/files", sh);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/dirs", sh);
    mkdir(p, 0755);
    baseline(base);
    char key[128];
    if (key_of(AT_FDCWD, base, 0, key, sizeof key, NULL) == 'd') {
        snprintf(p, sizeof p, "%s/root", sh);
        FILE *f = fopen(p, "w");
        if (f) {
            fputs(key, f);
            fclose(f);
        }
    }
    // Children (index builds, helpers) must not redo the baseline.
    unsetenv("SYNCED_BASELINE");
}
