//! Window ops of convolution and pooling as storage runs them.

use std::cell::Cell;

use super::Storage;
use super::dispatch::{IntoStorage, Operand, on_backend};
use crate::backend::Windows;
use crate::backend::kinds::{DirectConv, Window2d, WindowKernel};
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// `kernel` over the `planes` planes of `x`, shaped `out_dims`.
    pub(crate) fn window(
        x: Operand<'_>,
        kernel: WindowKernel,
        planes: usize,
        window: &Window2d,
        out_dims: &[usize],
    ) -> Result<Arc<Storage>> {
        on_backend!(kernel.name(), [x], |be, [x]| be
            .window(x, kernel, planes, window, out_dims))
    }

    /// Max pooling of the `planes` planes of `x`: the maxima, when the backend gathers them
    /// itself, and the offsets of the first maximum of each window.
    pub(crate) fn max_pool(
        x: Operand<'_>,
        planes: usize,
        window: &Window2d,
    ) -> Result<(Option<Arc<Storage>>, Arc<Storage>)> {
        // The second output leaves each backend's closure through this cell.
        let values = Cell::new(None);
        let indices = on_backend!("max_pool2d", [x], |be, [x]| {
            let (v, i) = be.max_pool(x, planes, window)?;
            values.set(v.map(IntoStorage::into_storage));
            Ok(Some(i))
        })?
        .expect("both backends return the offsets");
        Ok((values.into_inner(), indices))
    }

    /// `conv2d` through the backend's direct kernels, with their plan, when it has them for
    /// this case.
    pub(crate) fn conv2d_direct(
        x: Operand<'_>,
        weight: Operand<'_>,
        bias: Option<Operand<'_>>,
        window: &Window2d,
        groups: usize,
    ) -> Result<Option<(Arc<Storage>, DirectConv)>> {
        let plan = Cell::new(None);
        let out = match bias {
            None => on_backend!("conv2d", [x, weight], |be, [x, w]| planned(
                be.conv2d_direct(x, w, None, window, groups),
                &plan
            )),
            Some(bias) => on_backend!("conv2d", [x, weight, bias], |be, [x, w, b]| planned(
                be.conv2d_direct(x, w, Some(b), window, groups),
                &plan
            )),
        }?;
        Ok(out.zip(plan.into_inner()))
    }

    /// Depthwise `conv2d` for inference, where the backend has a kernel for it.
    pub(crate) fn depthwise_conv2d(
        x: Operand<'_>,
        weight: Operand<'_>,
        bias: Option<Operand<'_>>,
        window: &Window2d,
    ) -> Result<Option<Arc<Storage>>> {
        match bias {
            None => on_backend!("conv2d", [x, weight], |be, [x, w]| be
                .depthwise_conv2d(x, w, None, window)),
            Some(bias) => on_backend!("conv2d", [x, weight, bias], |be, [x, w, b]| be
                .depthwise_conv2d(x, w, Some(b), window)),
        }
    }

    /// The input gradient of the direct convolution `plan`.
    pub(crate) fn conv2d_direct_input_grad(
        dy: Operand<'_>,
        weight: Operand<'_>,
        plan: &DirectConv,
    ) -> Result<Arc<Storage>> {
        on_backend!("conv2d", [dy, weight], |be, [dy, w]| be
            .conv2d_direct_input_grad(dy, w, plan))
    }

    /// The weight gradient of the direct convolution `plan`.
    pub(crate) fn conv2d_direct_weight_grad(
        x: Operand<'_>,
        dy: Operand<'_>,
        plan: &DirectConv,
    ) -> Result<Arc<Storage>> {
        on_backend!("conv2d", [x, dy], |be, [x, dy]| be
            .conv2d_direct_weight_grad(x, dy, plan))
    }

    /// The bias gradient of the direct convolution `plan`.
    pub(crate) fn conv2d_direct_bias_grad(
        dy: Operand<'_>,
        plan: &DirectConv,
    ) -> Result<Arc<Storage>> {
        on_backend!("conv2d", [dy], |be, [dy]| be
            .conv2d_direct_bias_grad(dy, plan))
    }

    /// Samples per slice when the backend cannot hold `conv2d`'s columns of the whole batch
    /// `x` at once (`columns_per_channel` per channel of a sample); `None` when it can.
    pub(crate) fn conv_batch_chunk(
        x: Operand<'_>,
        columns_per_channel: usize,
    ) -> Result<Option<usize>> {
        let chunk = Cell::new(None);
        on_backend!("conv2d", [x], |be, [x]| {
            chunk.set(be.conv_batch_chunk(x, columns_per_channel));
            Ok(())
        })?;
        Ok(chunk.into_inner())
    }
}

/// The memory of a planned kernel's result, its plan left in `plan`.
fn planned<M>(
    result: Result<Option<(M, DirectConv)>>,
    plan: &Cell<Option<DirectConv>>,
) -> Result<Option<M>> {
    Ok(result?.map(|(memory, p)| {
        plan.set(Some(p));
        memory
    }))
}
