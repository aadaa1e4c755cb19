//! Ways to make a tensor: from data (the checked boundary), filled, ranges, identity, random.

use super::DynTensor;
use crate::alloc::try_with_capacity;
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Error, Result, ShapeError};
use crate::rng::{Generator, with_global};
use crate::storage::{CpuBuffer, Storage};

/// A buffer of `dims` whose element `i` (row-major) is `value_at(i)`, converted to `dtype`;
/// memory for it is reserved fallibly, so an absurd size is an `Err`.
fn computed(
    op: &'static str,
    dims: &[usize],
    dtype: DType,
    mut value_at: impl FnMut(usize) -> f64,
) -> Result<CpuBuffer> {
    let n = crate::shape::checked_numel(dims, op)?;
    let what = format!("the tensor {dims:?}");
    macro_rules! build {
        ($variant:ident, $convert:expr) => {{
            let mut out = try_with_capacity(op, &what, n)?;
            out.extend((0..n).map(|i| $convert(value_at(i))));
            CpuBuffer::$variant(out)
        }};
    }
    Ok(match dtype {
        DType::F32 => build!(F32, |v| v as f32),
        DType::F64 => build!(F64, |v| v),
        DType::F16 => build!(F16, crate::element::f16_from_f64),
        DType::BF16 => build!(BF16, crate::element::bf16_from_f64),
        DType::I64 => build!(I64, |v| v as i64),
        DType::Bool => build!(Bool, |v| v != 0.0),
    })
}

/// Random samples are floating-point.
fn check_float(dtype: DType) -> Result<()> {
    if matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        Ok(())
    } else {
        Err(Error::DType {
            op: "random constructor",
            expected: "f32, f64, f16 or bf16",
            found: dtype,
        })
    }
}

impl DynTensor {
    /// Takes ownership of `data` as a tensor with `dims`; fails if the counts differ.
    pub fn from_vec<T: Element>(data: Vec<T>, dims: &[usize]) -> Result<DynTensor, ShapeError> {
        let expected = crate::shape::checked_numel(dims, "from_vec")?;
        if expected != data.len() {
            return Err(ShapeError::ElementCount {
                context: "from_vec".into(),
                shape: dims.to_vec(),
                expected,
                found: data.len(),
            });
        }
        Ok(DynTensor::from_buffer(T::into_buffer(data), dims))
    }

    /// Copies `data` into a tensor with `dims`.
    pub fn from_slice<T: Element>(data: &[T], dims: &[usize]) -> Result<DynTensor, ShapeError> {
        Self::from_vec(data.to_vec(), dims)
    }

    /// A rank-0 tensor holding `value`.
    pub fn scalar(value: f64, dtype: DType) -> Result<DynTensor> {
        Self::full_on(&[], value, dtype, &crate::Device::Cpu)
    }

    /// A tensor of `dims` filled with `value`, on the default device.
    pub fn full(dims: &[usize], value: f64, dtype: DType) -> Result<DynTensor> {
        Self::full_on(dims, value, dtype, &crate::device::default_device())
    }

    /// A tensor of `dims` filled with zeros, on the default device.
    pub fn zeros(dims: &[usize], dtype: DType) -> Result<DynTensor> {
        Self::full(dims, 0.0, dtype)
    }

    /// A tensor of `dims` filled with ones, on the default device.
    pub fn ones(dims: &[usize], dtype: DType) -> Result<DynTensor> {
        Self::full(dims, 1.0, dtype)
    }

    /// A tensor of `dims` filled with `value`, made on `device` (on a GPU by a fill kernel,
    /// without a host copy).
    pub fn full_on(
        dims: &[usize],
        value: f64,
        dtype: DType,
        device: &crate::Device,
    ) -> Result<DynTensor> {
        let out = Storage::full(device, dims, value, dtype)?;
        Ok(DynTensor::computed(out, dims))
    }

    /// A tensor of `dims` filled with zeros, made on `device`.
    pub fn zeros_on(dims: &[usize], dtype: DType, device: &crate::Device) -> Result<DynTensor> {
        Self::full_on(dims, 0.0, dtype, device)
    }

    /// Zeros of this tensor's shape, dtype and device.
    pub fn zeros_like(&self) -> Result<DynTensor> {
        Self::zeros_on(self.dims(), self.dtype(), &self.device())
    }

    /// Ones of this tensor's shape, dtype and device.
    pub fn ones_like(&self) -> Result<DynTensor> {
        Self::full_on(self.dims(), 1.0, self.dtype(), &self.device())
    }

    /// `start, start + step, ...` up to but excluding `end`.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<DynTensor> {
        let finite = start.is_finite() && end.is_finite() && step.is_finite();
        if !finite || step == 0.0 || (end - start) / step < 0.0 || (end - start) / step > 1e15 {
            return Err(Error::InvalidArgument {
                op: "arange",
                message: format!("step {step} never goes from {start} to {end}"),
            });
        }
        if dtype == DType::Bool {
            return Err(Error::DType {
                op: "arange",
                expected: "a numeric dtype",
                found: dtype,
            });
        }
        let n = ((end - start) / step).ceil() as usize;
        let buffer = computed("arange", &[n], dtype, |i| start + i as f64 * step)?;
        DynTensor::from_buffer(buffer, &[n]).to(&crate::device::default_device())
    }

    /// The `n x n` identity matrix.
    pub fn eye(n: usize, dtype: DType) -> Result<DynTensor> {
        // `n * n` is checked by `computed`: `eye(1 << 32)` once wrapped to an empty tensor.
        let buffer = computed("eye", &[n, n], dtype, |i| {
            if i / n == i % n { 1.0 } else { 0.0 }
        })?;
        DynTensor::from_buffer(buffer, &[n, n]).to(&crate::device::default_device())
    }

    /// Samples drawn with `sample` from the global generator (or `generator` if given).
    fn random(
        dims: &[usize],
        dtype: DType,
        generator: Option<&mut Generator>,
        sample: impl Fn(&mut Generator) -> f64,
    ) -> Result<DynTensor> {
        check_float(dtype)?;
        let draw = |g: &mut Generator| computed("random constructor", dims, dtype, |_| sample(g));
        let buffer = match generator {
            Some(g) => draw(g),
            None => with_global(draw),
        }?;
        DynTensor::from_buffer(buffer, dims).to(&crate::device::default_device())
    }

    /// Uniform samples in `[0, 1)` from the global generator (see [`crate::manual_seed`]).
    pub fn rand(dims: &[usize], dtype: DType) -> Result<DynTensor> {
        Self::random(dims, dtype, None, Generator::next_f64)
    }

    /// Standard normal samples from the global generator.
    pub fn randn(dims: &[usize], dtype: DType) -> Result<DynTensor> {
        Self::random(dims, dtype, None, Generator::next_normal)
    }

    /// Uniform samples in `[low, high)` from the global generator. The bounds must be finite
    /// with `low <= high` (PyTorch's `uniform_` refuses the others too), unless there is
    /// nothing to draw.
    pub fn uniform(dims: &[usize], low: f64, high: f64, dtype: DType) -> Result<DynTensor> {
        check_uniform_bounds(dims, low, high)?;
        Self::random(dims, dtype, None, |g| low + (high - low) * g.next_f64())
    }

    /// Normal samples with `mean` and `std` from an explicit generator.
    pub fn randn_with(
        dims: &[usize],
        mean: f64,
        std: f64,
        dtype: DType,
        generator: &mut Generator,
    ) -> Result<DynTensor> {
        Self::random(dims, dtype, Some(generator), |g| {
            mean + std * g.next_normal()
        })
    }

    /// Uniform samples in `[low, high)` from an explicit generator.
    pub fn uniform_with(
        dims: &[usize],
        low: f64,
        high: f64,
        dtype: DType,
        generator: &mut Generator,
    ) -> Result<DynTensor> {
        check_uniform_bounds(dims, low, high)?;
        Self::random(dims, dtype, Some(generator), |g| {
            low + (high - low) * g.next_f64()
        })
    }
}

/// `[low, high)` must be a range of finite numbers to draw from; bounds an empty tensor never
/// uses (a layer's init bound of 1/sqrt(0) for zero inputs) are let through.
fn check_uniform_bounds(dims: &[usize], low: f64, high: f64) -> Result<()> {
    if crate::shape::checked_numel(dims, "uniform")? == 0
        || (low.is_finite() && high.is_finite() && low <= high)
    {
        return Ok(());
    }
    Err(crate::Error::InvalidArgument {
        op: "uniform",
        message: format!("the range [{low}, {high}) must have finite bounds with low <= high"),
    })
}
