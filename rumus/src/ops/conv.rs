//! Convolution and pooling over `[N, C, H, W]` batches, the whole batch at once.
//!
//! Convolution is `unfold2d` (im2col: every sliding window copied into columns) followed by
//! one batched matrix product; the common f32 case on the CPU has a faster path of its own
//! (`direct_conv`). `unfold2d`'s gradient is `fold2d` (col2im: columns summed back
//! into planes) and vice versa, so gradients of any order stay inside this file.
//!
//! Pooling reduces each window without materialising its `KH * KW` columns, which would cost
//! `KH * KW` times the input's memory and several passes over it: average pooling is a window
//! sum (its adjoint, spreading each window's gradient over the window, is the other half of a
//! recorded pair like unfold/fold) divided by the window sizes; max pooling finds each
//! window's first maximum and gathers it, so its gradient is a `scatter_add` to that element,
//! as in PyTorch.

use super::BackwardOp;
use super::hooks::{OpCall, apply, autocast_applies};
use crate::autograd::record;
use crate::backend::kinds::{Window2d, WindowKernel};
use crate::error::{Error, Result, ShapeError};
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// `(height, width)` of a kernel, stride, padding, dilation or output size.
pub type Size2d = (usize, usize);

fn pair((h, w): Size2d) -> [usize; 2] {
    [h, w]
}

fn require_rank4(t: &DynTensor, context: &str, layout: &str) -> Result<()> {
    if t.rank() != 4 {
        return Err(ShapeError::RankMismatch {
            context: context.into(),
            expected: 4,
            expected_shape: layout.into(),
            found: t.rank(),
            found_shape: t.dims().to_vec(),
        }
        .into());
    }
    Ok(())
}

fn require_float(t: &DynTensor, op: &'static str) -> Result<()> {
    if !t.dtype().is_float() {
        return Err(Error::DType {
            op,
            expected: "a floating-point tensor (f32 or f64)",
            found: t.dtype(),
        });
    }
    Ok(())
}

/// Validates a sliding window over the last two axes of an `[N, C, H, W]` tensor with dims
/// `x` (rank already checked) for `op` and returns its geometry.
fn window_of(
    op: &'static str,
    x: &[usize],
    kernel: Size2d,
    stride: Size2d,
    padding: Size2d,
    dilation: Size2d,
) -> Result<Window2d> {
    let (input, kernel, stride, padding, dilation) = (
        [x[2], x[3]],
        pair(kernel),
        pair(stride),
        pair(padding),
        pair(dilation),
    );
    let invalid = |message: String| Error::InvalidArgument { op, message };
    for (name, value) in [
        ("kernel size", kernel),
        ("stride", stride),
        ("dilation", dilation),
    ] {
        if value.contains(&0) {
            return Err(invalid(format!(
                "{name} must be positive in both dims, got ({}, {})",
                value[0], value[1]
            )));
        }
    }
    if input.contains(&0) {
        return Err(invalid(format!(
            "the input planes ({}, {}) must be non-empty (input {x:?})",
            input[0], input[1]
        )));
    }
    // The kernels walk windows in signed offsets (a window may start in the padding).
    let overflow = || invalid("window sizes overflow isize".into());
    let fits = |size: usize| (size <= isize::MAX as usize).then_some(size);
    let mut span = [0; 2];
    let mut padded = [0; 2];
    for a in 0..2 {
        span[a] = dilation[a]
            .checked_mul(kernel[a] - 1)
            .and_then(|s| s.checked_add(1))
            .and_then(fits)
            .ok_or_else(overflow)?;
        padded[a] = padding[a]
            .checked_mul(2)
            .and_then(|p| p.checked_add(input[a]))
            .and_then(fits)
            .ok_or_else(overflow)?;
    }
    if span[0] > padded[0] || span[1] > padded[1] {
        return Err(ShapeError::Invalid {
            context: op.into(),
            message: format!(
                "the kernel spans {}x{} (kernel ({}, {}), dilation ({}, {})) but the padded input \
                 is only {}x{} (input {:?}, padding ({}, {}))",
                span[0],
                span[1],
                kernel[0],
                kernel[1],
                dilation[0],
                dilation[1],
                padded[0],
                padded[1],
                x,
                padding[0],
                padding[1]
            ),
        }
        .into());
    }
    let window = Window2d {
        input,
        kernel,
        stride,
        padding,
        dilation,
    };
    let [oh, ow] = window.output();
    // Each product on its own too: with no images or channels the whole one is 0 whatever
    // the others, yet the kernels multiply taps and positions.
    for dims in [
        &[kernel[0], kernel[1]][..],
        &[oh, ow],
        &[x[0], x[1], kernel[0], kernel[1], oh, ow],
    ] {
        crate::shape::checked_numel(dims, op)?;
    }
    Ok(window)
}

/// Dims of the columns of an `[N, C, ..]` input: `[N, C, K, L]`.
fn column_dims(n: usize, c: usize, w: &Window2d) -> [usize; 4] {
    [n, c, w.taps(), w.positions()]
}

/// Runs `which` over the `planes` planes of `x` and wraps the result as `dims`.
fn run_kernel(
    x: &DynTensor,
    which: WindowKernel,
    planes: usize,
    w: &Window2d,
    dims: &[usize],
) -> Result<DynTensor> {
    let out = Storage::window(x.operand(), which, planes, w, dims)?;
    Ok(DynTensor::computed(out, dims))
}

/// Pooling windows may not reach further into the padding than half their size (as in
/// PyTorch), so every window covers at least one input element.
fn check_pool_padding(op: &'static str, kernel: Size2d, padding: Size2d) -> Result<()> {
    if padding.0 > kernel.0 / 2 || padding.1 > kernel.1 / 2 {
        return Err(Error::InvalidArgument {
            op,
            message: format!(
                "padding ({}, {}) must be at most half the kernel size ({}, {})",
                padding.0, padding.1, kernel.0, kernel.1
            ),
        });
    }
    Ok(())
}

impl DynTensor {
    /// Columns `[N, C, K, L]` of a validated window of this `[N, C, H, W]` tensor; recorded.
    fn unfold_with(&self, w: Window2d) -> Result<DynTensor> {
        let (n, c) = (self.dims()[0], self.dims()[1]);
        let out = run_kernel(
            self,
            WindowKernel::Unfold,
            n * c,
            &w,
            &column_dims(n, c, &w),
        )?;
        Ok(record(out, &[self], || BackwardOp::Unfold2d { window: w }))
    }

    /// Sums `[N, C, K, L]` columns back into `[N, C, H, W]`; recorded.
    fn fold_with(&self, w: Window2d) -> Result<DynTensor> {
        let (n, c) = (self.dims()[0], self.dims()[1]);
        let dims = [n, c, w.input[0], w.input[1]];
        let out = run_kernel(self, WindowKernel::Fold, n * c, &w, &dims)?;
        Ok(record(out, &[self], || BackwardOp::Fold2d { window: w }))
    }

    /// Sum of each window of this `[N, C, H, W]` tensor: `[N, C, OH, OW]`; recorded.
    fn window_sum(&self, w: Window2d) -> Result<DynTensor> {
        let (n, c) = (self.dims()[0], self.dims()[1]);
        let [oh, ow] = w.output();
        let out = run_kernel(self, WindowKernel::Sum, n * c, &w, &[n, c, oh, ow])?;
        Ok(record(out, &[self], || BackwardOp::WindowSum2d {
            window: w,
        }))
    }

    /// The adjoint of `window_sum`: each of the `[N, C, OH, OW]` values added to every input
    /// element of its window, giving `[N, C, H, W]`; recorded.
    fn window_spread(&self, w: Window2d) -> Result<DynTensor> {
        let (n, c) = (self.dims()[0], self.dims()[1]);
        let dims = [n, c, w.input[0], w.input[1]];
        let out = run_kernel(self, WindowKernel::Spread, n * c, &w, &dims)?;
        Ok(record(out, &[self], || BackwardOp::WindowSpread2d {
            window: w,
        }))
    }

    /// Sliding windows (im2col): `[N, C, H, W]` to `[N, C, KH * KW, OH * OW]` where
    /// `OH = (H + 2 PH - DH (KH - 1) - 1) / SH + 1` (likewise `OW`), the input zero-padded by
    /// `padding` on both sides. Entry `[n, c, ki * KW + kj, oy * OW + ox]` is the input at row
    /// `oy * SH + ki * DH - PH` and column `ox * SW + kj * DW - PW`. PyTorch's
    /// `F.unfold` returns the same values as `[N, C * KH * KW, OH * OW]`.
    pub fn unfold2d(
        &self,
        kernel: Size2d,
        stride: Size2d,
        padding: Size2d,
        dilation: Size2d,
    ) -> Result<DynTensor> {
        require_rank4(self, "unfold2d input", "[N, C, H, W]")?;
        require_float(self, "unfold2d")?;
        let w = window_of("unfold2d", self.dims(), kernel, stride, padding, dilation)?;
        self.unfold_with(w)
    }

    /// The adjoint of [`unfold2d`](DynTensor::unfold2d) (col2im): `[N, C, KH * KW, OH * OW]`
    /// columns summed into an `[N, C, H, W]` tensor with `(H, W) = output_size`, overlapping
    /// windows adding up and entries that fall into the padding dropped.
    pub fn fold2d(
        &self,
        output_size: Size2d,
        kernel: Size2d,
        stride: Size2d,
        padding: Size2d,
        dilation: Size2d,
    ) -> Result<DynTensor> {
        require_rank4(self, "fold2d input", "[N, C, KH * KW, OH * OW]")?;
        require_float(self, "fold2d")?;
        let (n, c) = (self.dims()[0], self.dims()[1]);
        let output = [n, c, output_size.0, output_size.1];
        let w = window_of("fold2d", &output, kernel, stride, padding, dilation)?;
        let expected = column_dims(n, c, &w);
        if self.dims() != expected {
            let [oh, ow] = w.output();
            return Err(ShapeError::Invalid {
                context: "fold2d".into(),
                message: format!(
                    "columns have shape {:?}, expected {expected:?} ({} kernel taps x {oh}x{ow} \
                     windows for output size ({}, {}))",
                    self.dims(),
                    w.taps(),
                    output_size.0,
                    output_size.1
                ),
            }
            .into());
        }
        self.fold_with(w)
    }

    /// Transposed convolution (the gradient of `conv2d` with respect to its input), with
    /// PyTorch's layout: input `[N, C_in, H, W]`, weight `[C_in, C_out, K, K]`, output
    /// `[N, C_out, (H-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1, ...]`.
    /// Written as a matrix product followed by `fold2d`, so every gradient flows.
    #[allow(clippy::too_many_arguments)]
    pub fn conv_transpose2d(
        &self,
        weight: &DynTensor,
        bias: Option<&DynTensor>,
        stride: Size2d,
        padding: Size2d,
        output_padding: Size2d,
        dilation: Size2d,
    ) -> Result<DynTensor> {
        let operands: Vec<&DynTensor> = [self, weight].into_iter().chain(bias).collect();
        let call = OpCall::ConvTranspose2d {
            stride,
            padding,
            output_padding,
            dilation,
        };
        apply(call, &operands, |_| {
            require_rank4(self, "conv_transpose2d input", "[N, C_in, H, W]")?;
            require_rank4(weight, "conv_transpose2d weight", "[C_in, C_out, KH, KW]")?;
            let (n, c_in, h, w) = (
                self.dims()[0],
                self.dims()[1],
                self.dims()[2],
                self.dims()[3],
            );
            let (wc_in, c_out, kh, kw) = (
                weight.dims()[0],
                weight.dims()[1],
                weight.dims()[2],
                weight.dims()[3],
            );
            if wc_in != c_in {
                return Err(ShapeError::Invalid {
                    context: "conv_transpose2d".into(),
                    message: format!(
                        "input {:?} has {c_in} channels but weight {:?} expects {wc_in}",
                        self.dims(),
                        weight.dims()
                    ),
                }
                .into());
            }
            let invalid = |message: String| Error::InvalidArgument {
                op: "conv_transpose2d",
                message,
            };
            for (name, value) in [
                ("input size", (h, w)),
                ("kernel size", (kh, kw)),
                ("stride", stride),
                ("dilation", dilation),
            ] {
                if value.0 == 0 || value.1 == 0 {
                    return Err(invalid(format!(
                        "{name} must be positive in both dims, got ({}, {})",
                        value.0, value.1
                    )));
                }
            }
            if output_padding.0 >= stride.0.max(dilation.0)
                || output_padding.1 >= stride.1.max(dilation.1)
            {
                return Err(invalid(format!(
                    "output padding {output_padding:?} must be smaller than the stride {stride:?} or the dilation {dilation:?}"
                )));
            }
            // (input - 1) * s + d * (k - 1) + op + 1 - 2 * p, every size positive (checked above).
            let size = |input: usize,
                        s: usize,
                        p: usize,
                        d: usize,
                        k: usize,
                        op: usize|
             -> Result<usize> {
                let full = (input - 1)
                    .checked_mul(s)
                    .and_then(|x| x.checked_add(d.checked_mul(k - 1)?))
                    .and_then(|x| x.checked_add(op + 1))
                    .ok_or_else(|| invalid("output sizes overflow usize".into()))?;
                p.checked_mul(2)
                    .and_then(|p2| full.checked_sub(p2))
                    .filter(|&o| o > 0)
                    .ok_or_else(|| {
                        invalid(format!(
                            "padding {p} leaves no output for input size {input}"
                        ))
                    })
            };
            let oh = size(h, stride.0, padding.0, dilation.0, kh, output_padding.0)?;
            let ow = size(w, stride.1, padding.1, dilation.1, kw, output_padding.1)?;
            let columns = weight
                .reshape(&[c_in, c_out * kh * kw])?
                .transpose(0, 1)?
                .matmul(&self.reshape(&[n, c_in, h * w])?)?
                .reshape(&[n, c_out, kh * kw, h * w])?;
            let out = columns.fold2d((oh, ow), (kh, kw), stride, padding, dilation)?;
            match bias {
                Some(b) => out.add(&b.reshape(&[c_out, 1, 1])?),
                None => Ok(out),
            }
        })
    }

    /// 2-D convolution (cross-correlation, as PyTorch's `F.conv2d`) of an `[N, C, H, W]` input
    /// with an `[OC, C / groups, KH, KW]` weight and an optional `[OC]` bias; the result is
    /// `[N, OC, OH, OW]` (sizes as in [`unfold2d`](DynTensor::unfold2d)). Computed for the whole
    /// batch at once as `unfold2d` followed by one batched matrix product per group, except
    /// for f32 on the CPU with stride 1 and one group, which run direct kernels without
    /// columns (see `ops::direct_conv`).
    pub fn conv2d(
        &self,
        weight: &DynTensor,
        bias: Option<&DynTensor>,
        stride: Size2d,
        padding: Size2d,
        dilation: Size2d,
        groups: usize,
    ) -> Result<DynTensor> {
        let operands: Vec<&DynTensor> = [self, weight].into_iter().chain(bias).collect();
        let call = OpCall::Conv2d {
            stride,
            padding,
            dilation,
            groups,
        };
        apply(call, &operands, |_| {
            require_rank4(self, "conv2d input", "[N, C, H, W]")?;
            require_rank4(weight, "conv2d weight", "[OC, C / groups, KH, KW]")?;
            require_float(self, "conv2d")?;
            for other in std::iter::once(weight).chain(bias) {
                if other.dtype() != self.dtype() {
                    return Err(Error::DTypeMismatch {
                        op: "conv2d",
                        lhs: self.dtype(),
                        rhs: other.dtype(),
                    });
                }
            }
            let (n, c) = (self.dims()[0], self.dims()[1]);
            let [oc, wc, kh, kw] = [0, 1, 2, 3].map(|a| weight.dims()[a]);
            let shape_error = |message: String| -> Error {
                ShapeError::Invalid {
                    context: "conv2d".into(),
                    message,
                }
                .into()
            };
            if groups == 0 {
                return Err(Error::InvalidArgument {
                    op: "conv2d",
                    message: "groups must be positive".into(),
                });
            }
            if c % groups != 0 {
                return Err(shape_error(format!(
                    "groups = {groups} does not divide the {c} input channels of input {:?}",
                    self.dims()
                )));
            }
            if oc % groups != 0 {
                return Err(shape_error(format!(
                    "groups = {groups} does not divide the {oc} output channels of weight {:?}",
                    weight.dims()
                )));
            }
            if wc.checked_mul(groups) != Some(c) {
                return Err(shape_error(format!(
                    "input {:?} has {c} channels but weight {:?} expects {} ({wc} per group x \
                     {groups} groups)",
                    self.dims(),
                    weight.dims(),
                    wc as u128 * groups as u128
                )));
            }
            if let Some(b) = bias
                && b.dims() != [oc]
            {
                return Err(shape_error(format!(
                    "bias has shape {:?} but weight {:?} has {oc} output channels, so bias must \
                     have shape [{oc}]",
                    b.dims(),
                    weight.dims()
                )));
            }
            let w = window_of("conv2d", self.dims(), (kh, kw), stride, padding, dilation)?;
            let [oh, ow] = w.output();
            if groups == c
                && oc == c
                && let Some(out) = depthwise_inference(self, weight, bias, &w)?
            {
                return Ok(DynTensor::computed(out, &[n, c, oh, ow]));
            }
            if let Some(chunk) = Storage::conv_batch_chunk(self.operand(), w.taps() * oh * ow)? {
                // The whole batch's columns would not fit the backend at once: convolve in
                // slices of the batch (narrow and cat are on the graph, so gradients flow as
                // before).
                let parts = (0..n)
                    .step_by(chunk)
                    .map(|start| {
                        self.narrow(0, start, chunk.min(n - start))?
                            .conv2d(weight, bias, stride, padding, dilation, groups)
                    })
                    .collect::<Result<Vec<_>>>()?;
                return DynTensor::cat(&parts.iter().collect::<Vec<_>>(), 0);
            }
            // Under autocast the product below runs in f16; the direct kernels are f32 only.
            if !autocast_applies(&OpCall::Product, &[self, weight])
                && let Some(out) = super::direct_conv::conv2d(self, weight, bias, &w, groups)?
            {
                return Ok(out);
            }
            let per_group = wc * kh * kw;
            let pointwise = (kh, kw) == (1, 1) && stride == (1, 1) && padding == (0, 0);
            let columns = if pointwise {
                // A 1x1 kernel's columns are the input itself.
                self.reshape(&[n, groups, per_group, oh * ow])?
            } else {
                self.unfold_with(w)?
                    .reshape(&[n, groups, per_group, oh * ow])?
            };
            let out = weight
                .reshape(&[groups, oc / groups, per_group])?
                .matmul(&columns)?
                .reshape(&[n, oc, oh, ow])?;
            match bias {
                Some(b) => out.add(&b.reshape(&[oc, 1, 1])?),
                None => Ok(out),
            }
        })
    }

    /// Max over `kernel`-sized windows of an `[N, C, H, W]` input, moved by `stride`, with
    /// `padding` (at most half the kernel) that never wins; `[N, C, OH, OW]` out, sizes rounded
    /// down as PyTorch's `F.max_pool2d` (`ceil_mode=False`). As there, each window's gradient
    /// goes to its first maximum (a NaN counts as the maximum).
    pub fn max_pool2d(&self, kernel: Size2d, stride: Size2d, padding: Size2d) -> Result<DynTensor> {
        let call = OpCall::MaxPool2d {
            kernel,
            stride,
            padding,
        };
        apply(call, &[self], |_| {
            Ok(self.max_pool2d_with_indices(kernel, stride, padding)?.0)
        })
    }

    /// [`DynTensor::max_pool2d`] and where each maximum came from, as PyTorch's
    /// `F.max_pool2d(..., return_indices=True)`: an `i64` tensor `[N, C, OH, OW]` of flat
    /// offsets `h * W + w` into each input plane (the first maximum of a window; a NaN is
    /// the maximum where present), on the input's device.
    pub fn max_pool2d_with_indices(
        &self,
        kernel: Size2d,
        stride: Size2d,
        padding: Size2d,
    ) -> Result<(DynTensor, DynTensor)> {
        require_rank4(self, "max_pool2d input", "[N, C, H, W]")?;
        require_float(self, "max_pool2d")?;
        let w = window_of("max_pool2d", self.dims(), kernel, stride, padding, (1, 1))?;
        check_pool_padding("max_pool2d", kernel, padding)?;
        let (n, c, h, wd) = (
            self.dims()[0],
            self.dims()[1],
            self.dims()[2],
            self.dims()[3],
        );
        let [oh, ow] = w.output();
        // Max pooling is a gather of each window's argmax from the flattened planes: the
        // values are taken here in one pass and the op is recorded as that gather, so the
        // gradient is its adjoint, a scatter-add to the argmax (to any order).
        let flat = self.reshape(&[n, c, h * wd])?;
        let positions = oh * ow;
        let (values, offsets) = Storage::max_pool(flat.operand(), n * c, &w)?;
        let indices = DynTensor::computed(offsets, &[n, c, positions]);
        let values = match values {
            Some(values) => {
                let out = DynTensor::computed(values, &[n, c, positions]);
                record(out, &[&flat], || BackwardOp::Gather {
                    input_dims: crate::shape::Dims::from_slice(flat.dims()),
                    axis: 2,
                    indices: indices.clone(),
                })
            }
            // A backend with only the argmax kernel: the values are a gather.
            None => flat.gather(2, &indices)?,
        }
        .reshape(&[n, c, oh, ow])?;
        Ok((values, indices.reshape(&[n, c, oh, ow])?))
    }

    /// Mean over `kernel`-sized windows of an `[N, C, H, W]` input, moved by `stride`, with
    /// zero `padding` (at most half the kernel) on both sides; `[N, C, OH, OW]` out, as
    /// PyTorch's `F.avg_pool2d` (`ceil_mode=False`). With `count_include_pad` every window
    /// divides by `KH * KW`; without it, by the number of input elements it covers.
    pub fn avg_pool2d(
        &self,
        kernel: Size2d,
        stride: Size2d,
        padding: Size2d,
        count_include_pad: bool,
    ) -> Result<DynTensor> {
        let call = OpCall::AvgPool2d {
            kernel,
            stride,
            padding,
            count_include_pad,
        };
        apply(call, &[self], |_| {
            require_rank4(self, "avg_pool2d input", "[N, C, H, W]")?;
            require_float(self, "avg_pool2d")?;
            let w = window_of("avg_pool2d", self.dims(), kernel, stride, padding, (1, 1))?;
            check_pool_padding("avg_pool2d", kernel, padding)?;
            let sums = self.window_sum(w)?;
            if count_include_pad || padding == (0, 0) {
                return sums.div_scalar(w.taps() as f64);
            }
            // Input elements covered by each window along one axis.
            let covered = |a: usize, o: usize| {
                let start = (o * w.stride[a]) as isize - w.padding[a] as isize;
                let end = (start + w.kernel[a] as isize).min(w.input[a] as isize);
                (end - start.max(0)) as f64
            };
            let [oh, ow] = w.output();
            let counts: Vec<f64> = (0..oh)
                .flat_map(|oy| (0..ow).map(move |ox| (oy, ox)))
                .map(|(oy, ox)| covered(0, oy) * covered(1, ox))
                .collect();
            sums.div(
                &DynTensor::from_vec(counts, &[oh, ow])?
                    .to_dtype(self.dtype())?
                    .to(&self.device())?,
            )
        })
    }

    /// Mean over the windows PyTorch's `F.adaptive_avg_pool2d` uses to reach `output_size`
    /// from an `[N, C, H, W]` input: output row `i` averages input rows
    /// `floor(i * H / OH)..ceil((i + 1) * H / OH)` (likewise for columns).
    pub fn adaptive_avg_pool2d(&self, output_size: Size2d) -> Result<DynTensor> {
        apply(OpCall::AdaptiveAvgPool2d { output_size }, &[self], |_| {
            const OP: &str = "adaptive_avg_pool2d";
            require_rank4(self, "adaptive_avg_pool2d input", "[N, C, H, W]")?;
            require_float(self, OP)?;
            let (h, w) = (self.dims()[2], self.dims()[3]);
            let (oh, ow) = output_size;
            if oh == 0 || ow == 0 || h == 0 || w == 0 {
                return Err(Error::InvalidArgument {
                    op: OP,
                    message: format!(
                        "input planes ({h}, {w}) and output size ({oh}, {ow}) must be non-empty"
                    ),
                });
            }
            if h % oh == 0 && w % ow == 0 {
                // Equal, disjoint windows: plain average pooling.
                let kernel = (h / oh, w / ow);
                return self.avg_pool2d(kernel, kernel, (0, 0), true);
            }
            // Windows of unequal lengths: average rows, then columns, with two averaging matrices
            // (`rows @ x @ cols`, `rows[i, y] = 1 / len_i` for the rows `y` of window `i`).
            // The averaging matrices are built in f64 before they take the input's dtype.
            for (dims, element_bytes) in [
                (
                    &[self.dims()[0], self.dims()[1], oh, ow][..],
                    self.dtype().size_in_bytes(),
                ),
                (&[oh, h], 8),
                (&[w, ow], 8),
            ] {
                crate::alloc::ensure_output(OP, dims, element_bytes)?;
            }
            let averaging = |size: usize, out: usize, transposed: bool| -> Result<DynTensor> {
                let mut m = vec![0.0; out * size];
                for i in 0..out {
                    let (start, end) = (i * size / out, ((i + 1) * size).div_ceil(out));
                    for y in start..end {
                        let at = if transposed {
                            y * out + i
                        } else {
                            i * size + y
                        };
                        m[at] = 1.0 / (end - start) as f64;
                    }
                }
                let dims = if transposed { [size, out] } else { [out, size] };
                DynTensor::from_vec(m, &dims)?
                    .to_dtype(self.dtype())?
                    .to(&self.device())
            };
            averaging(h, oh, false)?
                .matmul(self)?
                .matmul(&averaging(w, ow, true)?)
        })
    }
}

pub(crate) fn unfold2d_backward(grad: &DynTensor, window: &Window2d) -> Result<DynTensor> {
    grad.fold_with(*window)
}

pub(crate) fn fold2d_backward(grad: &DynTensor, window: &Window2d) -> Result<DynTensor> {
    grad.unfold_with(*window)
}

pub(crate) fn window_sum2d_backward(grad: &DynTensor, window: &Window2d) -> Result<DynTensor> {
    grad.window_spread(*window)
}

pub(crate) fn window_spread2d_backward(grad: &DynTensor, window: &Window2d) -> Result<DynTensor> {
    grad.window_sum(*window)
}

/// A depthwise convolution through the backend's own kernel, when nothing is recorded for a
/// backward pass (inference, `no_grad`, an imported model) and the backend has one; `None`
/// sends it down the general path.
fn depthwise_inference(
    x: &DynTensor,
    weight: &DynTensor,
    bias: Option<&DynTensor>,
    window: &Window2d,
) -> Result<Option<triomphe::Arc<Storage>>> {
    let operands = || std::iter::once(x).chain([weight]).chain(bias);
    let recorded = crate::autograd::is_grad_enabled() && operands().any(DynTensor::requires_grad);
    let one_device = operands().all(|t| t.device() == x.device());
    if recorded || !one_device || autocast_applies(&OpCall::Product, &[x, weight]) {
        return Ok(None);
    }
    Storage::depthwise_conv2d(
        x.operand(),
        weight.operand(),
        bias.map(DynTensor::operand),
        window,
    )
}
