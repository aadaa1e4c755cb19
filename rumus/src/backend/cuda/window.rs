//! Window kernels of convolution and pooling on CUDA (`shaders/cuda/window.cu`): im2col and
//! its adjoint, window sums and their adjoint, and max pooling, one thread per output
//! element. Convolution is im2col followed by a cuBLASLt product (the op composes them).

use super::context::CudaDevice;
use super::launch::{check_floating, Arg, dtype_suffix, views};
use super::memory::CudaBuffer;
use crate::backend::kinds::{Window2d, WindowKernel};
use crate::backend::{Src, Windows};
use crate::dtype::DType;
use crate::error::Result;

const MODULE: &str = "window";

/// `struct Window` of window.cu.
#[repr(C)]
#[derive(Clone, Copy)]
struct Geometry([i64; 12]);

super::launch::plain_arg!(Geometry);

impl Geometry {
    fn of(w: &Window2d) -> Geometry {
        let [out_h, out_w] = w.output();
        Geometry(
            [
                w.input[0],
                w.input[1],
                w.kernel[0],
                w.kernel[1],
                w.stride[0],
                w.stride[1],
                w.padding[0],
                w.padding[1],
                w.dilation[0],
                w.dilation[1],
                out_h,
                out_w,
            ]
            .map(|v| v as i64),
        )
    }
}

impl CudaDevice {
    fn window_kernel(
        &self,
        name: &'static str,
        x: Src<'_, CudaBuffer>,
        window: &Window2d,
        outputs: &[&CudaBuffer],
        n: usize,
    ) -> Result<()> {
        let [vx] = views(name_of(name), x.dims(), [x.layout])?;
        let kernel = self.kernel(MODULE, name, [dtype_suffix(x.dtype()), ""])?;
        let (px, g, n64) = (x.memory.address(0), Geometry::of(window), n as i64);
        let addresses: Vec<u64> = outputs.iter().map(|o| o.address(0)).collect();
        let mut args: Vec<&dyn Arg> = addresses.iter().map(|a| a as &dyn Arg).collect();
        args.extend([&px as &dyn Arg, &vx, &g, &n64]);
        self.launch_elements(kernel, n, &args)
    }
}

/// The op a kernel of window.cu serves, for error messages.
fn name_of(kernel: &str) -> &'static str {
    match kernel {
        "unfold" => "unfold2d",
        "fold" => "fold2d",
        "window_sum" => "window_sum2d",
        "spread" => "window_spread2d",
        _ => "max_pool2d",
    }
}


impl Windows for CudaDevice {
    fn window(
        &self,
        x: Src<'_, CudaBuffer>,
        kernel: WindowKernel,
        _planes: usize,
        window: &Window2d,
        out_dims: &[usize],
    ) -> Result<CudaBuffer> {
        check_floating(kernel.name(), x.dtype())?;
        let n = out_dims.iter().product();
        let out = CudaBuffer::uninit(self, n, x.dtype())?;
        let name = match kernel {
            WindowKernel::Unfold => "unfold",
            WindowKernel::Fold => "fold",
            WindowKernel::Sum => "window_sum",
            WindowKernel::Spread => "spread",
        };
        self.window_kernel(name, x, window, &[&out], n)?;
        Ok(out)
    }

    fn max_pool(
        &self,
        x: Src<'_, CudaBuffer>,
        planes: usize,
        window: &Window2d,
    ) -> Result<(Option<CudaBuffer>, CudaBuffer)> {
        check_floating("max_pool2d", x.dtype())?;
        let n = planes * window.positions();
        let values = CudaBuffer::uninit(self, n, x.dtype())?;
        let offsets = CudaBuffer::uninit(self, n, DType::I64)?;
        self.window_kernel("max_pool", x, window, &[&values, &offsets], n)?;
        Ok((Some(values), offsets))
    }
}
