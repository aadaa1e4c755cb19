//! Sliding-window arithmetic of convolutions and pools along one axis, on literal sizes
//! (checked and computed now) and on runtime ones (passed through when the window keeps the
//! size, otherwise a size the op computes at run time).

use proc_macro2::Span;

use super::{Result, err};
use crate::shape::{Dim, Shape};

/// The geometry of a window along one axis.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    /// Refuse sizes that do not divide evenly instead of flooring.
    pub exact: bool,
}

impl Window {
    /// A pool's window: no dilation.
    pub fn pool(kernel: usize, stride: usize, padding: usize, exact: bool) -> Self {
        Window {
            kernel,
            stride,
            padding,
            dilation: 1,
            exact,
        }
    }

    /// Output size along one axis of input size `size`, as PyTorch computes it:
    /// `(size + 2*padding - dilation*(kernel-1) - 1) / stride + 1`. `op` names the layer in
    /// messages (already quoted), `shape` is the whole input.
    pub fn output(&self, size: &Dim, op: &str, shape: &Shape, span: Span) -> Result<Dim> {
        if self.kernel == 0 || self.stride == 0 {
            return err(
                span,
                format!("{op}: kernel size and stride must be at least 1"),
            );
        }
        let reach = self.dilation * (self.kernel - 1) + 1;
        let Some(size) = size.lit() else {
            return Ok(self.runtime_output(size, reach));
        };
        let padded = size + 2 * self.padding;
        if reach > padded {
            return err(
                span,
                format!(
                    "{op}: the kernel ({reach} wide) is larger than the input {shape} ({size} + 2*{} padding = {padded}); use a smaller kernel or more padding",
                    self.padding
                ),
            );
        }
        let span_len = padded - reach;
        if self.exact && !span_len.is_multiple_of(self.stride) {
            return err(
                span,
                format!(
                    "{op}: the output size is not integral for {shape}: ({padded} - {reach}) / {} = {:.2}; the last {} row(s) would be dropped (adjust padding or stride)",
                    self.stride,
                    span_len as f64 / self.stride as f64,
                    span_len % self.stride
                ),
            );
        }
        Ok(Dim::Lit(span_len / self.stride + 1))
    }

    /// A runtime size: unchanged by a "same" window (stride 1, padding covering the reach),
    /// otherwise computed when the op runs.
    fn runtime_output(&self, size: &Dim, reach: usize) -> Dim {
        let grow = 2 * self.padding as isize - (reach as isize - 1);
        if self.stride == 1 && grow == 0 {
            return size.clone();
        }
        let shifted = offset(&size.to_string(), grow);
        if self.stride == 1 {
            Dim::Computed(shifted)
        } else {
            Dim::Computed(format!("({shifted})/{}+1", self.stride))
        }
    }

    /// Output size of a transposed convolution along one axis:
    /// `(size-1)*stride - 2*padding + dilation*(kernel-1) + output_padding + 1`.
    pub fn transposed_output(&self, size: &Dim, output_padding: usize) -> Dim {
        let reach = self.dilation * (self.kernel - 1) + 1;
        match size.lit() {
            Some(n) => {
                let grown = (n.saturating_sub(1)) * self.stride + reach + output_padding;
                Dim::Lit(grown.saturating_sub(2 * self.padding))
            }
            None => {
                let grow = reach as isize - 1 + output_padding as isize - 2 * self.padding as isize;
                if self.stride == 1 && grow == 0 {
                    return size.clone();
                }
                let scaled = if self.stride == 1 {
                    size.to_string()
                } else {
                    format!("({size}-1)*{}+1", self.stride)
                };
                Dim::Computed(offset(&scaled, grow))
            }
        }
    }
}

/// `base+n` / `base-n` / `base`, for sizes computed at run time.
fn offset(base: &str, by: isize) -> String {
    match by {
        0 => base.to_string(),
        n if n > 0 => format!("{base}+{n}"),
        n => format!("{base}{n}"),
    }
}
