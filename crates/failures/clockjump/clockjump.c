/*
 * clockjump: an LD_PRELOAD shim that shifts the wall clock of the process it
 * is loaded into by an offset another process can change while it runs.
 *
 * CLOCKJUMP_FILE names a file of 8 bytes: a little-endian int64 of
 * milliseconds added to CLOCK_REALTIME (and its coarse variant),
 * gettimeofday() and time(). The file is mapped once and read at every
 * call, so writing a new offset makes the clock jump at once. Monotonic
 * clocks are left alone, as when NTP steps a server's clock.
 *
 * Why not libfaketime: it resolves the real functions with dlsym, which
 * allocates, and Debian's redis-server allocates with jemalloc, which reads
 * the clock while it initialises: the two recurse and redis-server never
 * starts (libfaketime issue #130, open). This shim calls the kernel
 * directly and never allocates.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const int64_t *mapped;
static int opened;

static int64_t offset_ms(void) {
  if (!__atomic_load_n(&opened, __ATOMIC_ACQUIRE)) {
    const char *path = getenv("CLOCKJUMP_FILE");
    if (path) {
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        void *p = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (p != MAP_FAILED) __atomic_store_n(&mapped, (const int64_t *)p, __ATOMIC_RELEASE);
      }
    }
    __atomic_store_n(&opened, 1, __ATOMIC_RELEASE);
  }
  const int64_t *m = __atomic_load_n(&mapped, __ATOMIC_ACQUIRE);
  return m ? __atomic_load_n(m, __ATOMIC_RELAXED) : 0;
}

static int real_clock(clockid_t clk, struct timespec *ts) {
  return (int)syscall(SYS_clock_gettime, clk, ts);
}

static void shift(struct timespec *ts) {
  int64_t ns = (int64_t)ts->tv_nsec + (offset_ms() % 1000) * 1000000;
  ts->tv_sec += offset_ms() / 1000;
  if (ns >= 1000000000) { ts->tv_sec += 1; ns -= 1000000000; }
  if (ns < 0) { ts->tv_sec -= 1; ns += 1000000000; }
  ts->tv_nsec = ns;
}

int clock_gettime(clockid_t clk, struct timespec *ts) {
  int r = real_clock(clk, ts);
  if (r == 0 && (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)) shift(ts);
  return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  (void)tz;
  struct timespec ts;
  int r = real_clock(CLOCK_REALTIME, &ts);
  if (r != 0) return r;
  shift(&ts);
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

time_t time(time_t *t) {
  struct timespec ts;
  if (real_clock(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  shift(&ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
