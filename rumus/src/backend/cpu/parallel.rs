//! When to use the second core. Splitting tiny tensors across threads costs more than it
//! saves (rayon's fork-join is a few microseconds), so work is split only above a grain size.

use std::sync::Once;

use rayon::prelude::*;

/// Elements below which a loop stays on the calling thread.
pub const PARALLEL_GRAIN: usize = 1 << 15;

/// Whether `work` element visits are worth handing to rayon: above the grain, and only when
/// rayon has more than one thread. With one thread a parallel loop run from outside the pool
/// still hands its work to the pool's thread and sleeps until it is done (two context
/// switches an op: 11% of an MLP step's samples under `perf` with `RAYON_NUM_THREADS=1`).
pub fn worth_splitting(work: usize) -> bool {
    work >= PARALLEL_GRAIN && threads() > 1
}

/// Threads the CPU kernels split work across: rayon's global pool, started on first use.
///
/// Started from the program's main thread with two or more threads (`RAYON_NUM_THREADS`,
/// else every core), the pool counts the main thread as one of its own, so a kernel called
/// from it runs a share of each parallel loop itself. Otherwise it would hand the whole loop
/// to the pool and sleep until the pool's threads finish: measured with two threads, an
/// MLP step at batch 256 spent 16% of its samples in the scheduler, and running the steps
/// on a pool thread made it 12% faster and a transformer step 18%. The main thread lives as
/// long as the process, so the pool never loses it; other threads (test threads, loader
/// workers) hand their loops to the pool as before. With one thread nothing is adopted: a
/// pool whose only thread is the caller would never run loops handed to it from elsewhere.
/// A pool the program built itself (`rayon::ThreadPoolBuilder::build_global`) is kept.
///
/// ```
/// // Run as a program (as doc tests are), this is the main thread.
/// let x = rumus::DynTensor::randn(&[256, 256], rumus::DType::F32)?;
/// let product = x.matmul(&x)?;
/// let threads = rumus::backend::cpu::parallel::threads();
/// assert_eq!(rumus::backend::cpu::parallel::main_thread_in_pool(), threads > 1);
/// // Another thread still gets its products from the pool.
/// let elsewhere = std::thread::spawn(move || x.matmul(&x)).join().unwrap()?;
/// assert_eq!(elsewhere.to_vec::<f32>()?, product.to_vec::<f32>()?);
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn threads() -> usize {
    static START: Once = Once::new();
    START.call_once(|| {
        if std::thread::current().name() == Some("main") {
            adopt_current_thread();
        }
    });
    rayon::current_num_threads()
}

/// Makes the calling thread one of the kernels' pool threads, as [`threads`] does for the
/// main thread: call it first thing on a long-lived thread that runs a program's kernels
/// (a server's model thread), so that its parallel loops run a share on it instead of
/// leaving it asleep beside a full pool (measured: a third of a batched decode's samples
/// were the caller's serial work while the pool's two threads shared the cores with it).
/// The thread must live as long as the process. Returns whether it joined: `false` with
/// one thread, or when the pool already exists.
pub fn adopt_current_thread() -> bool {
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1);
    // Fails only when the pool already exists; then it stays as it is.
    threads > 1
        && rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .use_current_thread()
            .build_global()
            .is_ok()
}

/// Whether the program's main thread is one of the kernels' pool threads (see [`threads`]).
pub fn main_thread_in_pool() -> bool {
    rayon::current_thread_index() == Some(0) && std::thread::current().name() == Some("main")
}

/// Runs `f(row_index, row)` for every `row_len`-sized row of `out`, in parallel when the
/// total size is worth it.
pub fn for_each_row<O: Send>(out: &mut [O], row_len: usize, f: impl Fn(usize, &mut [O]) + Sync) {
    if row_len == 0 {
        return;
    }
    if worth_splitting(out.len()) && out.len() / row_len > 1 {
        let rows_per_task = (PARALLEL_GRAIN / row_len).max(1);
        let task = |task: usize, chunk: &mut [O]| {
            for (i, row) in chunk.chunks_mut(row_len).enumerate() {
                f(task * rows_per_task + i, row);
            }
        };
        for_each_chunk(out, rows_per_task * row_len, &task);
    } else {
        for (i, row) in out.chunks_mut(row_len).enumerate() {
            f(i, row);
        }
    }
}

/// Hands `chunk_len`-sized chunks of `out` to rayon, `task(chunk_index, chunk)` each.
///
/// The task comes as a trait object so rayon's fork-join machinery is compiled once per
/// element type rather than once per caller: generic over the closure, it was 45% of the
/// crate's LLVM IR (300 copies) and most of a cold build's time. A task covers at least
/// [`PARALLEL_GRAIN`] elements, so the indirect call costs nothing measurable.
fn for_each_chunk<O: Send>(
    out: &mut [O],
    chunk_len: usize,
    task: &(dyn Fn(usize, &mut [O]) + Sync),
) {
    out.par_chunks_mut(chunk_len)
        .enumerate()
        .for_each(|(index, chunk)| task(index, chunk));
}
