//! Ops that move, repeat, mask or accumulate elements by position, as PyTorch has them:
//! `flip`, `roll`, `repeat`, `tril`, `triu` and `cumsum`. Each is written with views,
//! `index_select`, `cat`, `add` and `where_`, so it runs on every device and its gradient
//! (and ONNX form, where those ops have one) comes from theirs; `cumsum` on the host scans
//! the values directly when nothing records it.

use crate::error::{Error, Result};
use crate::shape::normalize_axis;
use crate::tensor::DynTensor;

impl DynTensor {
    /// The elements in reverse order along each of `axes`, as PyTorch's `flip`.
    pub fn flip(&self, axes: &[isize]) -> Result<DynTensor> {
        let mut out = self.clone();
        for &axis in axes {
            let axis = normalize_axis(axis, self.rank(), "flip")?;
            let len = self.dims()[axis];
            // A broadcast view's axis can be far longer than its memory: the index list is
            // checked before it is made (`index_select` checks the copy).
            crate::alloc::ensure_output("flip", &[len], 8)?;
            let reversed: Vec<i64> = (0..len as i64).rev().collect();
            let indices = DynTensor::from_vec(reversed, &[len])?.to(&self.device())?;
            out = out.index_select(axis as isize, &indices)?;
        }
        Ok(out)
    }

    /// The elements shifted by `shift` places along `axis`, those pushed past the end coming
    /// back at the start (a negative shift moves them the other way), as PyTorch's `roll`.
    pub fn roll(&self, shift: i64, axis: isize) -> Result<DynTensor> {
        let axis = normalize_axis(axis, self.rank(), "roll")?;
        let len = self.dims()[axis];
        if len == 0 {
            return Ok(self.clone());
        }
        let start = (len as i64 - shift.rem_euclid(len as i64)) as usize % len;
        if start == 0 {
            return Ok(self.clone());
        }
        let head = self.narrow(axis as isize, start, len - start)?;
        let tail = self.narrow(axis as isize, 0, start)?;
        DynTensor::cat(&[&head, &tail], axis as isize)
    }

    /// The tensor repeated `times[k]` times along each axis `k`, as PyTorch's
    /// `x.repeat(*times)`; more counts than axes add leading axes of size 1 first.
    pub fn repeat(&self, times: &[usize]) -> Result<DynTensor> {
        if times.len() < self.rank() {
            return Err(Error::InvalidArgument {
                op: "repeat",
                message: format!(
                    "{} repeat counts for a rank-{} tensor {:?}: give one per axis, as \
                     PyTorch's repeat does",
                    times.len(),
                    self.rank(),
                    self.dims()
                ),
            });
        }
        let mut dims = vec![1; times.len() - self.rank()];
        dims.extend_from_slice(self.dims());
        // [d0, d1, ..] viewed as [1, d0, 1, d1, ..], broadcast to [t0, d0, t1, d1, ..], merged.
        let spread: Vec<usize> = dims.iter().flat_map(|&d| [1, d]).collect();
        let broadcast: Vec<usize> = dims.iter().zip(times).flat_map(|(&d, &t)| [t, d]).collect();
        let merged = dims
            .iter()
            .zip(times)
            .map(|(&d, &t)| d.checked_mul(t))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| Error::InvalidArgument {
                op: "repeat",
                message: format!("{:?} repeated {times:?} times overflows a dim", self.dims()),
            })?;
        crate::alloc::ensure_output("repeat", &merged, self.dtype().size_in_bytes())?;
        self.reshape(&spread)?
            .broadcast_to(&broadcast)?
            .contiguous()?
            .reshape(&merged)
    }

    /// Running sums along `axis`, as PyTorch's `cumsum`: element `i` is the sum of elements
    /// `0..=i`. On the host, with nothing recording the op (no gradient, no ONNX trace), one
    /// pass over the values; integers are summed exactly there on every device. Otherwise
    /// `ceil(log2 n)` shifted additions (each element adds the running sum `2^k` places
    /// back), built from `narrow`, `add` and `cat`, so any device runs it, the gradient (the
    /// reverse running sum of the incoming one) comes from those ops, and memory stays a few
    /// copies of the tensor.
    pub fn cumsum(&self, axis: isize) -> Result<DynTensor> {
        let axis = normalize_axis(axis, self.rank(), "cumsum")?;
        let recorded =
            (self.requires_grad() && crate::autograd::is_grad_enabled()) || super::hooks::tracing();
        let on_host = matches!(self.device(), crate::Device::Cpu);
        if self.dtype() == crate::DType::I64 || (on_host && !recorded) {
            return self.scanned(axis);
        }
        let n = self.dims()[axis];
        let mut sums = self.clone();
        let mut shift = 1;
        while shift < n {
            let ahead = sums.narrow(axis as isize, shift, n - shift)?;
            let behind = sums.narrow(axis as isize, 0, n - shift)?;
            let head = sums.narrow(axis as isize, 0, shift)?;
            sums = DynTensor::cat(&[&head, &ahead.add(&behind)?], axis as isize)?;
            shift = shift.saturating_mul(2);
        }
        Ok(sums)
    }

    /// `cumsum` as one pass over host values, on `self`'s device; not recorded.
    fn scanned(&self, axis: usize) -> Result<DynTensor> {
        use crate::storage::CpuBuffer;
        let n = self.dims()[axis];
        let inner: usize = self.dims()[axis + 1..].iter().product();
        // Every element past the first of its run along `axis` adds the sum before it.
        fn scan<T: Copy>(values: &mut [T], n: usize, inner: usize, add: impl Fn(T, T) -> T) {
            for (at, outer) in (0..values.len()).map(|at| (at, at / inner)) {
                if !outer.is_multiple_of(n) {
                    values[at] = add(values[at], values[at - inner]);
                }
            }
        }
        // Half-precision values summed in f32, rounded once.
        fn scan_wide<T: Copy>(
            values: &mut [T],
            (n, inner): (usize, usize),
            widen: fn(T) -> f32,
            round: fn(f32) -> T,
        ) -> Result<()> {
            let mut wide = crate::alloc::try_map("cumsum", "the f32 sums", values, |&x| widen(x))?;
            scan(&mut wide, n, inner, |a, b| a + b);
            values.iter_mut().zip(wide).for_each(|(x, w)| *x = round(w));
            Ok(())
        }
        let mut buffer = self
            .detach()
            .to(&crate::Device::Cpu)?
            .to_contiguous_buffer()?;
        match &mut buffer {
            CpuBuffer::F32(v) => scan(v, n, inner, |a, b| a + b),
            CpuBuffer::F64(v) => scan(v, n, inner, |a, b| a + b),
            // Summed in f32, as PyTorch accumulates half precision, rounded once.
            CpuBuffer::F16(v) => scan_wide(v, (n, inner), half::f16::to_f32, half::f16::from_f32)?,
            CpuBuffer::BF16(v) => {
                scan_wide(v, (n, inner), half::bf16::to_f32, half::bf16::from_f32)?;
            }
            CpuBuffer::I64(v) => scan(v, n, inner, i64::wrapping_add),
            CpuBuffer::Bool(_) => {
                return Err(Error::InvalidArgument {
                    op: "cumsum",
                    message: format!(
                        "cumsum of a bool tensor {:?}: convert it to i64 first",
                        self.dims()
                    ),
                });
            }
        }
        DynTensor::from_buffer(buffer, self.dims()).to(&self.device())
    }

    /// The elements of each matrix (the last two axes) on and below the `diagonal`-th
    /// diagonal (0 the main one, positive above it), zeros elsewhere, as PyTorch's `tril`.
    pub fn tril(&self, diagonal: i64) -> Result<DynTensor> {
        self.triangle(diagonal, false, "tril")
    }

    /// The elements of each matrix on and above the `diagonal`-th diagonal, zeros
    /// elsewhere, as PyTorch's `triu` (`triu(1)` is the causal mask's hidden part).
    pub fn triu(&self, diagonal: i64) -> Result<DynTensor> {
        self.triangle(diagonal, true, "triu")
    }

    fn triangle(&self, diagonal: i64, upper: bool, op: &'static str) -> Result<DynTensor> {
        if self.rank() < 2 {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "{op} of a rank-{} tensor {:?}: it takes matrices (the last two axes)",
                    self.rank(),
                    self.dims()
                ),
            });
        }
        let (rows, cols) = (self.dims()[self.rank() - 2], self.dims()[self.rank() - 1]);
        crate::alloc::ensure_output(op, &[rows, cols], 1)?;
        let kept: Vec<bool> = (0..rows * cols)
            .map(|at| {
                let offset = (at % cols) as i64 - (at / cols) as i64;
                if upper {
                    offset >= diagonal
                } else {
                    offset <= diagonal
                }
            })
            .collect();
        let device = self.device();
        let kept = DynTensor::from_vec(kept, &[rows, cols])?.to(&device)?;
        let zero = DynTensor::zeros(&[], self.dtype())?.to(&device)?;
        DynTensor::where_(&kept, self, &zero)
    }
}
