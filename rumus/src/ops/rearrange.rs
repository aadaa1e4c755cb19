//! Ops that move, repeat, mask or accumulate elements by position, as PyTorch has them:
//! `flip`, `roll`, `repeat`, `tril`, `triu` and `cumsum`. Each is written with views,
//! `index_select`, `cat`, `where_` and `matmul`, so it runs on every device and its gradient
//! (and ONNX form, where those ops have one) comes from theirs.

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
    /// `0..=i`. One matrix product with a triangle of ones, so a `[.., n]` axis costs an
    /// `[n, n]` matrix and `n` multiply-adds per element: meant for the axes it is used on
    /// (positions, masks), not for millions of elements.
    /// Integer tensors (position ids from a mask) are summed exactly on the host.
    pub fn cumsum(&self, axis: isize) -> Result<DynTensor> {
        let axis = normalize_axis(axis, self.rank(), "cumsum")?;
        let n = self.dims()[axis];
        if self.dtype() == crate::DType::I64 {
            let mut values = self.to_vec::<i64>()?;
            let inner: usize = self.dims()[axis + 1..].iter().product();
            for start in 0..values.len() {
                // every element past the first of its run along `axis` adds the one before
                if !(start / inner).is_multiple_of(n) {
                    values[start] = values[start].wrapping_add(values[start - inner]);
                }
            }
            return DynTensor::from_vec(values, self.dims())?.to(&self.device());
        }
        crate::alloc::ensure_output("cumsum", &[n, n], self.dtype().size_in_bytes())?;
        // ones[j][i] = 1 where j <= i: column i sums elements 0..=i.
        let ones: Vec<f64> = (0..n * n)
            .map(|at| if at / n <= at % n { 1.0 } else { 0.0 })
            .collect();
        let ones = DynTensor::from_vec(ones, &[n, n])?
            .to_dtype(self.dtype())?
            .to(&self.device())?;
        let last = self.rank() as isize - 1;
        self.transpose(axis as isize, last)?
            .matmul(&ones)?
            .transpose(axis as isize, last)
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
