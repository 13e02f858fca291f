"""Compiling a schedule's programs: small kernels several to one compiler process, the compiles side by side.

A compiler process has a fixed cost (GCC: its driver, cc1 and the linker start for each kernel, ~50 ms of CPU) that is
most of a small kernel's compile: a model's first step has a hundred or more such kernels (elementwise ops, small
reduces). A compiler that can compile several sources into one binary (`Compiler.compile_batch`) gets the small ones
in batches of BATCH_MAX (their kernel names distinct: they share one library); every kernel's disk-cache entry is that
binary (a program loads it once per process, see the CLANG backend), so the cache stays one entry per source and a
damaged entry is rebuilt alone. Sources of BATCH_SRC_MAX bytes and more are compiled one per process: their
optimization is most of their cost, and alone they spread over the cores. A batch that fails to compile is compiled
one source at a time, so that the failing kernel is the one reported."""
from __future__ import annotations
import concurrent.futures, os
from typing import Sequence
from tinycore.backend import CompileError, Compiler
from tinycore.helpers import diskcache_get, diskcache_put, getenv

BATCH_MAX = getenv("COMPILE_BATCH", 8)
BATCH_SRC_MAX = 8192

_pool: concurrent.futures.ThreadPoolExecutor | None = None

def batches(jobs: Sequence[tuple[str, str]], most: int = BATCH_MAX) -> list[list[int]]:
  """Indices of (name, src) jobs grouped for compiling: small sources up to `most` a group with distinct names, each
  large source alone (a group per core at least, where there are that many sources), the largest first (the pool takes
  them in order: a long compile taken last runs alone at the end while the other cores wait)."""
  small = [i for i, (_, src) in enumerate(jobs) if len(src) < BATCH_SRC_MAX]
  out: list[list[int]] = [[i] for i in sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1])) if len(jobs[i][1]) >= BATCH_SRC_MAX]
  cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
  most = max(1, min(most, -(-len(small) // cores)))
  groups: list[tuple[list[int], set[str]]] = []
  for i in small:
    name = jobs[i][0]
    g = next((g for g in groups if len(g[0]) < most and name not in g[1]), None)
    if g is None: groups.append(g := ([], set()))
    g[0].append(i)
    g[1].add(name)
  return out + [g for g, _ in groups]

def _compile_group(comp: Compiler, srcs: list[str]) -> list[bytes | None]:
  if len(srcs) > 1:
    try: return [diskcache_put(comp.cachekey, s, lib) if comp.cachekey else lib for s, lib in zip(srcs, comp.compile_batch(srcs))]
    except CompileError: pass  # one at a time: the kernel that fails is reported where its runner is made
  out: list[bytes | None] = []
  for s in srcs:
    try: out.append(comp.compile_cached(s))
    except CompileError: out.append(None)
  return out

def compile_all(comp: Compiler, jobs: Sequence[tuple[str, str]]) -> list[bytes | None]:
  """The binary of every (kernel name, source) job for one compiler, through its disk cache; None where a source does
  not compile (the caller compiles it again to report the error)."""
  global _pool
  out: list[bytes | None] = [diskcache_get(comp.cachekey, src) if comp.cachekey else None for _, src in jobs]
  todo = [i for i, lib in enumerate(out) if lib is None]
  if not todo: return out
  groups = [[todo[j] for j in g] for g in batches([jobs[i] for i in todo])]
  if _pool is None: _pool = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2)
  for g, libs in zip(groups, _pool.map(lambda g: _compile_group(comp, [jobs[i][1] for i in g]), groups)):
    for i, lib in zip(g, libs): out[i] = lib
  return out
