//! [`Mpi`]: the [`Collective`] engine over MPI (the `mpi` crate, OpenMPI or MPICH
//! underneath), for jobs started by `mpirun`.
//!
//! Every collective is issued non-blocking and polled against a deadline, so a rank that
//! died or hangs turns into an [`Error::Distributed`](crate::Error::Distributed) on the
//! others instead of a job that waits forever. After such a failure the communicator is
//! unusable (MPI cannot take back a half-finished collective): every later call returns the
//! same error at once, the buffers MPI may still hold are leaked rather than freed, and the
//! process leaves without `MPI_Finalize`, which would wait for the dead rank.
//!
//! OpenMPI's `mpirun` ends the whole job itself when one process dies, unless it is started
//! with `--enable-recovery`; then the survivors keep running and see the error: within the
//! liveness limit ([`DEFAULT_LIVENESS`]), through a heartbeat every rank answers from a
//! thread of its own (`mpi_heartbeat.rs`), rather than after the much longer timeout a
//! slow rank is allowed.
//!
//! Before moving data, every collective all-gathers a small fingerprint of each rank's
//! call (`fingerprint.rs`): ranks that pass different counts, element types or roots fail
//! together with an error naming the rank, instead of MPI writing past a buffer.

use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mpi::ffi;

use super::collective::{
    Collective, Elements, check_gather, check_root, check_summable, distributed_error,
};
use super::fingerprint::{self, Fingerprint, Op, WORDS};
use super::mpi_heartbeat::Heartbeat;
use crate::error::Result;

/// How long a collective may wait for the slowest rank before [`Mpi`] gives up. Long
/// enough for rank 0 to write a large checkpoint while the others wait at the next
/// all-reduce.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the heartbeat may go unanswered before a collective fails because a rank is
/// gone. Every rank answers from a thread of its own, busy or not, so this can be short.
pub const DEFAULT_LIVENESS: Duration = Duration::from_secs(10);

/// How long a collective polls without sleeping.
const SPIN: Duration = Duration::from_millis(50);

/// Finished collectives' buffers kept for reuse.
const SPARE_BUFFERS: usize = 2;

/// Bytes of the largest buffer kept for reuse: a few all-reduce buckets' worth.
const LARGEST_SPARE: usize = 256 << 20;

/// Elements per MPI call: MPI counts are C ints.
const MAX_COUNT: usize = 1 << 30;

/// The processes `mpirun` started, joined in one communicator.
pub struct Mpi {
    universe: ManuallyDrop<mpi::environment::Universe>,
    comm: ffi::MPI_Comm,
    rank: usize,
    world_size: usize,
    timeout: Duration,
    /// Held for a whole collective, so that two threads' collectives never interleave, and
    /// remembers a failure.
    state: Mutex<Option<String>>,
    /// Held around every single MPI call, by collectives and by the heartbeat thread alike
    /// (the library is initialised for `MPI_THREAD_SERIALIZED`).
    calls: Arc<Mutex<()>>,
    /// The heartbeat's thread and its own communicator (none in a world of one).
    heartbeat: Option<(Heartbeat, ffi::MPI_Comm)>,
    /// Buffers of finished collectives, reused so that a training step's all-reduces do not
    /// allocate (and page-fault) megabytes each time.
    spare: Mutex<Vec<Owned>>,
}

// SAFETY: the communicator handles are only used under `calls`' lock, which serialises every
// MPI call as MPI_THREAD_SERIALIZED requires.
unsafe impl Send for Mpi {}
// SAFETY: as above.
unsafe impl Sync for Mpi {}

impl Mpi {
    /// Initialises MPI from `mpirun`'s environment (a single process without it) with
    /// [`DEFAULT_TIMEOUT`].
    pub fn init() -> Result<Mpi> {
        Self::init_with_timeout(DEFAULT_TIMEOUT)
    }

    /// Initialises MPI; a collective that has not finished on every rank after `timeout`
    /// fails (and one whose ranks stopped answering the heartbeat, after
    /// [`DEFAULT_LIVENESS`]).
    pub fn init_with_timeout(timeout: Duration) -> Result<Mpi> {
        Self::init_with_limits(timeout, DEFAULT_LIVENESS)
    }

    /// Initialises MPI; a collective fails when it has not finished on every rank after
    /// `timeout`, or sooner when some rank has not answered the heartbeat for `liveness`
    /// (it died, or its process was stopped).
    pub fn init_with_limits(timeout: Duration, liveness: Duration) -> Result<Mpi> {
        let Some((universe, threading)) =
            mpi::initialize_with_threading(mpi::Threading::Serialized)
        else {
            return Err(distributed_error(
                "Mpi::init",
                "MPI is already initialised in this process; create one `Mpi` and share it (it is Sync)",
            ));
        };
        if threading < mpi::Threading::Serialized {
            return Err(distributed_error(
                "Mpi::init",
                format!(
                    "the MPI library offers only {threading:?} threading; rumus needs Serialized (OpenMPI and MPICH provide it)"
                ),
            ));
        }
        let comm = duplicate_world()?;
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        // SAFETY: valid communicator, out-parameters on the stack.
        unsafe {
            ffi::MPI_Comm_rank(comm, &mut rank);
            ffi::MPI_Comm_size(comm, &mut size);
        }
        let calls = Arc::new(Mutex::new(()));
        let heartbeat = if size > 1 {
            let beat_comm = duplicate_world()?;
            Some((
                Heartbeat::start(beat_comm, Arc::clone(&calls), liveness),
                beat_comm,
            ))
        } else {
            None
        };
        Ok(Mpi {
            universe: ManuallyDrop::new(universe),
            comm,
            rank: rank as usize,
            world_size: size as usize,
            timeout,
            state: Mutex::new(None),
            calls,
            heartbeat,
            spare: Mutex::new(Vec::new()),
        })
    }

    /// How long a collective may wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `f`, which may call MPI directly (through the `mpi` crate, say), while no
    /// thread of rumus's is inside MPI. MPI is initialised for `MPI_THREAD_SERIALIZED`, and
    /// rumus calls it from a heartbeat thread as well as from collectives, so any other MPI
    /// call in the process must go through here. `f` must not call rumus's collectives (they
    /// take the same lock).
    pub fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        self.call(f)
    }

    /// Starts a collective: the lock that keeps collectives whole, or the error of an
    /// earlier failure.
    fn begin(&self, op: &'static str) -> Result<MutexGuard<'_, Option<String>>> {
        let failure = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(message) = failure.as_ref() {
            return Err(distributed_error(
                op,
                format!("an earlier collective failed ({message}); the job cannot continue"),
            ));
        }
        Ok(failure)
    }

    /// Runs one MPI call under the lock that serialises them.
    fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        let _mpi = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        f()
    }

    /// Checks, before any data moves, that every rank is about to run the same collective
    /// over as many elements of the same type. `local` is this rank's own check of its
    /// arguments: a rank whose arguments are wrong still takes part in the comparison, so
    /// the others fail with it instead of waiting for it.
    fn agree(
        &self,
        failure: &mut MutexGuard<'_, Option<String>>,
        op: &'static str,
        fingerprint: Fingerprint,
        local: Result<()>,
    ) -> Result<()> {
        if self.world_size == 1 {
            return local;
        }
        let send = fingerprint.valid(local.is_ok()).words();
        let gathered = vec![0i64; WORDS * self.world_size];
        let (_, gathered) = self.complete(
            failure,
            op,
            (send, gathered),
            |(send, gathered), comm, request| {
                // SAFETY: every rank sends WORDS i64 words and receives WORDS per rank into
                // a buffer of that size; both live until completion (or are leaked).
                unsafe {
                    ffi::MPI_Iallgather(
                        send.as_ptr().cast(),
                        WORDS as c_int,
                        ffi::RSMPI_INT64_T,
                        gathered.as_ptr().cast_mut().cast(),
                        WORDS as c_int,
                        ffi::RSMPI_INT64_T,
                        comm,
                        request,
                    )
                }
            },
        )?;
        local?;
        fingerprint::check_agreement(op, &gathered)
    }

    /// Starts one non-blocking collective with `start` and polls it until it completes, the
    /// deadline passes, a rank stops answering the heartbeat or MPI reports an error.
    /// `keep_alive` owns the buffers MPI reads and writes; on failure they are leaked,
    /// because MPI may still touch them.
    fn complete<K>(
        &self,
        failure: &mut MutexGuard<'_, Option<String>>,
        op: &'static str,
        keep_alive: K,
        start: impl FnOnce(&K, ffi::MPI_Comm, *mut ffi::MPI_Request) -> c_int,
    ) -> Result<K> {
        // SAFETY: reading the library's null-request constant.
        let mut request = unsafe { ffi::RSMPI_REQUEST_NULL };
        let code = self.call(|| start(&keep_alive, self.comm, &mut request));
        if code != 0 {
            return Err(self.fail(failure, op, keep_alive, describe(code)));
        }
        let started = Instant::now();
        let deadline = started + self.timeout;
        loop {
            let mut done: c_int = 0;
            // SAFETY: `request` came from the start call; the status is ignored.
            let code = self.call(|| unsafe {
                ffi::MPI_Test(&mut request, &mut done, ffi::RSMPI_STATUS_IGNORE)
            });
            if code != 0 {
                return Err(self.fail(failure, op, keep_alive, describe(code)));
            }
            if done != 0 {
                return Ok(keep_alive);
            }
            if self.heartbeat.as_ref().is_some_and(|(beat, _)| beat.lost()) {
                let message = format!(
                    "a rank stopped answering the heartbeat every rank sends from a thread of its own: it died or its process was stopped (a rank that is only slow keeps answering). Restart the job from its last checkpoint; waited {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                return Err(self.fail(failure, op, keep_alive, message));
            }
            if Instant::now() >= deadline {
                let message = format!(
                    "not every one of the {} ranks took part within {:?}: a rank died, hangs, or called a different collective. Restart the job from its last checkpoint",
                    self.world_size, self.timeout
                );
                return Err(self.fail(failure, op, keep_alive, message));
            }
            // MPI advances a non-blocking collective only inside calls like this one, so
            // poll busily (as MPI's own blocking calls do: yielding to a busy machine's other
            // processes costs milliseconds per poll) for the length of a training step's
            // all-reduces; a rank still waiting after that is waiting for a slower rank, and
            // backs off.
            if started.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// A buffer of at least `bytes` bytes (contents unspecified), from the spares if one is
    /// there.
    fn buffer(&self, bytes: usize) -> Owned {
        let spare = self.spare.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut owned = spare.unwrap_or(Owned(Vec::new()));
        if owned.0.len() < bytes.div_ceil(8) {
            owned.0.resize(bytes.div_ceil(8), 0);
        }
        owned
    }

    /// A buffer holding a copy of `bytes`.
    fn copy_of(&self, bytes: &[u8]) -> Owned {
        let mut owned = self.buffer(bytes.len());
        owned.bytes_mut(bytes.len()).copy_from_slice(bytes);
        owned
    }

    /// Returns the buffers of a finished collective to the spares (as many as one collective
    /// uses, none larger than [`LARGEST_SPARE`]).
    fn recycle(&self, buffers: impl IntoIterator<Item = Owned>) {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        for owned in buffers {
            if spare.len() < SPARE_BUFFERS && owned.0.len() * 8 <= LARGEST_SPARE {
                spare.push(owned);
            }
        }
    }

    fn fail<K>(
        &self,
        failure: &mut Option<String>,
        op: &'static str,
        keep_alive: K,
        message: String,
    ) -> crate::Error {
        std::mem::forget(keep_alive);
        *failure = Some(message.clone());
        distributed_error(op, format!("rank {}: {message}", self.rank))
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        let failed = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if failed {
            // A collective never finished: freeing the communicator or finalising would wait
            // for the rank that is gone. Leave MPI as it is; the process is ending.
            if let Some((beat, _)) = self.heartbeat.as_mut() {
                beat.abandon();
            }
            return;
        }
        if let Some((mut beat, mut beat_comm)) = self.heartbeat.take() {
            if !beat.stop() {
                // A rank is gone: finalising would wait for it forever.
                return;
            }
            // SAFETY: the heartbeat's communicator, with no request pending on it.
            unsafe { ffi::MPI_Comm_free(&mut beat_comm) };
        }
        // SAFETY: the communicator is ours and no request is pending on it.
        unsafe { ffi::MPI_Comm_free(&mut self.comm) };
        // SAFETY: dropped exactly once, here; this finalises MPI.
        unsafe { ManuallyDrop::drop(&mut self.universe) };
    }
}

/// A byte buffer aligned for any element type, owned for the duration of a collective.
struct Owned(Vec<u64>);

impl Owned {
    fn ptr(&self) -> *mut std::ffi::c_void {
        self.0.as_ptr() as *mut std::ffi::c_void
    }

    fn bytes(&self, len: usize) -> &[u8] {
        // SAFETY: the vector holds at least `len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), len) }
    }

    fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: as above, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), len) }
    }
}

fn datatype(data: &Elements<'_>) -> ffi::MPI_Datatype {
    // SAFETY: reading the library's datatype constants.
    unsafe {
        match data {
            Elements::F32(_) => ffi::RSMPI_FLOAT,
            Elements::F64(_) => ffi::RSMPI_DOUBLE,
            Elements::I64(_) => ffi::RSMPI_INT64_T,
            Elements::U8(_) => ffi::RSMPI_UINT8_T,
        }
    }
}

/// MPI's text for an error code.
fn describe(code: c_int) -> String {
    let mut text = vec![0u8; 512];
    let mut len: c_int = 0;
    // SAFETY: the buffer is larger than MPI_MAX_ERROR_STRING (256 in OpenMPI and MPICH).
    unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr().cast(), &mut len) };
    text.truncate(len.max(0) as usize);
    format!("MPI error {code}: {}", String::from_utf8_lossy(&text))
}

/// Ranges of at most [`MAX_COUNT`] elements covering `len`, in bytes.
fn chunks(len: usize, element_size: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len.div_ceil(MAX_COUNT).max(1)).map(move |c| {
        let start = c * MAX_COUNT;
        let end = (start + MAX_COUNT).min(len);
        (start * element_size, end * element_size)
    })
}

impl Collective for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn all_reduce_sum(&self, mut data: Elements<'_>) -> Result<()> {
        let op = "all_reduce_sum";
        let mut failure = self.begin(op)?;
        let fingerprint = Fingerprint::new(Op::AllReduceSum, Some(&data), 0);
        self.agree(&mut failure, op, fingerprint, check_summable(op, &data))?;
        let kind = datatype(&data);
        let size = data.element_size();
        for (start, end) in chunks(data.len(), size) {
            let bytes = end - start;
            let send = self.copy_of(&data.as_bytes()[start..end]);
            let recv = self.buffer(bytes);
            let (send, recv) = self.complete(
                &mut failure,
                op,
                (send, recv),
                |(send, recv), comm, request| {
                    // SAFETY: both buffers hold `bytes` bytes and live until completion (or
                    // are leaked); the count fits a C int, and every rank passes the same
                    // one (agreed above).
                    unsafe {
                        ffi::MPI_Iallreduce(
                            send.ptr(),
                            recv.ptr(),
                            (bytes / size) as c_int,
                            kind,
                            ffi::RSMPI_SUM,
                            comm,
                            request,
                        )
                    }
                },
            )?;
            data.as_bytes_mut()[start..end].copy_from_slice(recv.bytes(bytes));
            self.recycle([send, recv]);
        }
        Ok(())
    }

    fn broadcast(&self, mut data: Elements<'_>, root: usize) -> Result<()> {
        let op = "broadcast";
        let mut failure = self.begin(op)?;
        let fingerprint = Fingerprint::new(Op::Broadcast, Some(&data), root as u64);
        let local = check_root(op, root, self.world_size);
        self.agree(&mut failure, op, fingerprint, local)?;
        let kind = datatype(&data);
        let size = data.element_size();
        for (start, end) in chunks(data.len(), size) {
            let bytes = end - start;
            let buffer = self.copy_of(&data.as_bytes()[start..end]);
            let buffer = self.complete(&mut failure, op, buffer, |buffer, comm, request| {
                // SAFETY: the buffer holds `bytes` bytes and lives until completion; every
                // rank passes the same count (agreed above).
                unsafe {
                    ffi::MPI_Ibcast(
                        buffer.ptr(),
                        (bytes / size) as c_int,
                        kind,
                        root as c_int,
                        comm,
                        request,
                    )
                }
            })?;
            data.as_bytes_mut()[start..end].copy_from_slice(buffer.bytes(bytes));
            self.recycle([buffer]);
        }
        Ok(())
    }

    fn all_gather(
        &self,
        local: Elements<'_>,
        mut gathered: Elements<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let op = "all_gather";
        let mut failure = self.begin(op)?;
        // The ranks' local counts differ by design; what they must agree on is the total,
        // and the counts themselves.
        let fingerprint = Fingerprint::new(
            Op::AllGather,
            Some(&gathered),
            fingerprint::counts_hash(counts),
        );
        let checked = check_gather(&local, &gathered, counts, self.rank, self.world_size)
            .and_then(|()| check_gather_size(counts));
        self.agree(&mut failure, op, fingerprint, checked)?;
        let mut displacements = Vec::with_capacity(counts.len());
        let mut offset = 0;
        for &count in counts {
            displacements.push(offset as c_int);
            offset += count;
        }
        let counts: Vec<c_int> = counts.iter().map(|&c| c as c_int).collect();
        let kind = datatype(&local);
        let bytes = gathered.as_bytes().len();
        let send = self.copy_of(local.as_bytes());
        let own = counts[self.rank];
        let recv = self.buffer(bytes);
        let (send, recv, _, _) = self.complete(
            &mut failure,
            op,
            (send, recv, counts, displacements),
            |(send, recv, counts, displacements), comm, request| {
                // SAFETY: the buffers match the counts, which every rank agreed on above,
                // and live until completion, as do the count and displacement arrays.
                unsafe {
                    ffi::MPI_Iallgatherv(
                        send.ptr(),
                        own,
                        kind,
                        recv.ptr(),
                        counts.as_ptr(),
                        displacements.as_ptr(),
                        kind,
                        comm,
                        request,
                    )
                }
            },
        )?;
        gathered.as_bytes_mut().copy_from_slice(recv.bytes(bytes));
        self.recycle([send, recv]);
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        // The agreement is an all-gather, which no rank leaves before every rank joined it.
        let mut failure = self.begin("barrier")?;
        self.agree(
            &mut failure,
            "barrier",
            Fingerprint::new(Op::Barrier, None, 0),
            Ok(()),
        )
    }
}

/// An all-gather moves at most [`MAX_COUNT`] elements (MPI counts and displacements are C
/// ints).
fn check_gather_size(counts: &[usize]) -> Result<()> {
    let total = counts.iter().try_fold(0usize, |sum, &c| sum.checked_add(c));
    match total {
        Some(total) if total <= MAX_COUNT => Ok(()),
        _ => Err(distributed_error(
            "all_gather",
            format!(
                "{} elements in one all-gather; gather at most {MAX_COUNT} at a time",
                counts.iter().fold(0u128, |s, &c| s + c as u128)
            ),
        )),
    }
}

/// A duplicate of `MPI_COMM_WORLD` whose errors come back as codes instead of aborting the
/// process.
fn duplicate_world() -> Result<ffi::MPI_Comm> {
    // SAFETY: reading the library's null-communicator constant.
    let mut comm: ffi::MPI_Comm = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: MPI is initialised; `comm` receives a new communicator handle.
    let code = unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm) };
    if code != 0 {
        return Err(distributed_error("Mpi::init", describe(code)));
    }
    // SAFETY: `comm` is the valid communicator made above.
    unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) };
    Ok(comm)
}
