// A persistent thread pool for CLANG kernels, compiled once per toolchain and loaded with ctypes.
// pool_run(entry, args, vals, n) runs entry(args, vals, core, n) for core = 0..n-1: core 0 on the calling thread,
// the others on workers that spin briefly for new work and then sleep on a futex. It returns when all are done.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef void (*entry_t)(void **args, const int *vals, int core, int ncores);
#define MAXT 256
static entry_t job_fn; static void **job_args; static const int *job_vals; static int job_n;
static atomic_uint gen;        // bumped once per job; workers wait for it to change
static atomic_int pending;     // workers that have not finished the current job
static atomic_int sleepers;    // workers sleeping on the futex
static int nworkers = 0;
static int spin_iters = 20000;

static long futex(atomic_uint *addr, int op, unsigned val) { return syscall(SYS_futex, (unsigned *)addr, op, val, NULL, NULL, 0); }
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void *worker(void *p) {
  int id = (int)(long)p;
  unsigned seen = 0;  // no job ran before the workers were created
  for (;;) {
    unsigned g;
    int spins = 0;
    while ((g = atomic_load_explicit(&gen, memory_order_acquire)) == seen) {
      if (++spins < spin_iters) { cpu_relax(); continue; }
      atomic_fetch_add(&sleepers, 1);
      if (atomic_load(&gen) == seen) futex(&gen, FUTEX_WAIT_PRIVATE, seen);
      atomic_fetch_sub(&sleepers, 1);
      spins = 0;
    }
    seen = g;
    if (id < job_n) job_fn(job_args, job_vals, id, job_n);
    atomic_fetch_sub_explicit(&pending, 1, memory_order_release);
  }
  return NULL;
}

int pool_init(int nthreads, int spins) {
  if (nworkers) return nworkers + 1;
  if (nthreads > MAXT) nthreads = MAXT;
  spin_iters = spins;
  for (int i = 1; i < nthreads; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)(long)i) != 0) break;
    pthread_detach(t);
    nworkers++;
  }
  return nworkers + 1;
}

void pool_run(entry_t fn, void **args, const int *vals, int n) {
  if (n > nworkers + 1) n = nworkers + 1;
  if (n <= 1) { fn(args, vals, 0, 1); return; }
  job_fn = fn; job_args = args; job_vals = vals; job_n = n;
  atomic_store(&pending, nworkers);
  atomic_fetch_add_explicit(&gen, 1, memory_order_release);
  if (atomic_load(&sleepers)) futex(&gen, FUTEX_WAKE_PRIVATE, MAXT);
  fn(args, vals, 0, n);
  while (atomic_load_explicit(&pending, memory_order_acquire) > 0) cpu_relax();
}
