//! Calls of the model's layers (`self.fc1(x)`), whose shapes come from the field types, and the
//! sliding-window arithmetic of convolutions and pools.

use proc_macro2::Span;
use quote::quote;
use syn::Ident;

use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::model::layers::{Layer, LayerKind};
use crate::shape::{Dim, Same, Shape};

impl Lowering<'_> {
    pub(super) fn layer(&mut self, field: &Ident, args: &[Expr]) -> Result<Value> {
        let span = field.span();
        let Some(layer) = self.layers.iter().find(|l| l.name == *field).cloned() else {
            let fields: Vec<String> = self
                .layers
                .iter()
                .map(|l| format!("`{}`", l.name))
                .collect();
            let input = args
                .first()
                .and_then(|a| self.shape_of(a))
                .map(|s| format!(" (called with {s})"))
                .unwrap_or_default();
            return err(
                span,
                format!(
                    "`self.{field}` is not a field of this model{input}; its layers are {}",
                    fields.join(", ")
                ),
            );
        };
        let [arg] = args else {
            return err(
                span,
                format!("layer `{field}` takes one tensor: `self.{field}(x)`"),
            );
        };
        let value = self.lower(arg)?;
        let (var, shape) = self.tensor(&value, arg.span(), &format!("layer `{field}`"))?;
        match &layer.kind {
            LayerKind::Linear { input, output } => {
                let Some(last) = shape.0.last() else {
                    return err(
                        arg.span(),
                        format!(
                            "`{field}` is a Linear layer; it needs a tensor with a feature axis, got {shape}"
                        ),
                    );
                };
                match last.same(input) {
                    Same::Yes => {}
                    Same::Unknown => self.defer_same(
                        arg.span(),
                        last,
                        input,
                        format!(
                            "`{field}` takes [.., {input}] but receives {shape} ({last} != {input})"
                        ),
                    ),
                    Same::No => {
                        let mut dims = shape.0.clone();
                        let expected = {
                            let n = dims.len();
                            dims[n - 1] = input.clone();
                            Shape(dims)
                        };
                        let out = layer_output_name(&layer);
                        return err(
                            span,
                            format!(
                                "`{field}` takes {expected} but receives {shape}\n  help: declare `{field}: Linear<{last}, {out}>`, or change the layer that feeds it"
                            ),
                        );
                    }
                }
                let mut dims = shape.0.clone();
                *dims.last_mut().expect("checked non-empty") = output.clone();
                Ok(self.emit(
                    span,
                    Shape(dims),
                    quote!(self.#field.forward_dyn(#var.as_dyn())),
                ))
            }
            LayerKind::Conv2d {
                input,
                output,
                kernel,
                options,
            } => {
                if shape.rank() != 4 {
                    return err(
                        arg.span(),
                        format!(
                            "`{field}` is a Conv2d layer; it takes [B, {input}, H, W] but receives {shape} (rank {})",
                            shape.rank()
                        ),
                    );
                }
                match shape.0[1].same(input) {
                    Same::Yes => {}
                    Same::Unknown => {
                        let message = format!(
                            "`{field}` takes [B, {input}, H, W] but receives {shape} ({} != {input})",
                            shape.0[1]
                        );
                        self.defer_same(arg.span(), &shape.0[1], input, message)
                    }
                    Same::No => {
                        return err(
                            span,
                            format!(
                                "`{field}` takes [B, {input}, H, W] but receives {shape} with {} channels\n  help: declare `{field}: Conv2d<{}, {output}, {kernel}>`",
                                shape.0[1], shape.0[1]
                            ),
                        );
                    }
                }
                let (h, w) = self.spatial(&shape, &format!("conv layer `{field}`"), span)?;
                let what = format!("conv layer `{field}`");
                let oh = window_output(
                    h,
                    *kernel,
                    options.stride,
                    options.padding,
                    options.dilation,
                    options.exact,
                    &what,
                    &shape,
                    span,
                )?;
                let ow = window_output(
                    w,
                    *kernel,
                    options.stride,
                    options.padding,
                    options.dilation,
                    options.exact,
                    &what,
                    &shape,
                    span,
                )?;
                let out = Shape(vec![
                    shape.0[0].clone(),
                    output.clone(),
                    Dim::Lit(oh),
                    Dim::Lit(ow),
                ]);
                Ok(self.emit(span, out, quote!(self.#field.forward_dyn(#var.as_dyn()))))
            }
            LayerKind::Parameter => err(
                span,
                format!(
                    "`{field}` is a parameter tensor, not a layer; use it as a value (`{field}` is not callable)"
                ),
            ),
            LayerKind::Other => err(
                span,
                format!(
                    "the shape checker does not know what `{field}` returns; bind the result with its shape, e.g. `let h: [B, 64] = self.{field}(x);` (the type system then checks it)"
                ),
            ),
        }
    }

    /// `[.., H, W]` of an image batch `[B, C, H, W]`, which must be static.
    pub(super) fn spatial(&self, shape: &Shape, op: &str, span: Span) -> Result<(usize, usize)> {
        if shape.rank() != 4 {
            return err(
                span,
                format!(
                    "`{op}` takes an image batch [B, C, H, W], got {shape} (rank {})",
                    shape.rank()
                ),
            );
        }
        match (shape.0[2].lit(), shape.0[3].lit()) {
            (Some(h), Some(w)) => Ok((h, w)),
            _ => err(
                span,
                format!(
                    "`{op}` needs static spatial dims to compute its output size, but {shape} has runtime dims there; declare them as literals (e.g. [B, 1, 28, 28])"
                ),
            ),
        }
    }
}

fn layer_output_name(layer: &Layer) -> String {
    match &layer.kind {
        LayerKind::Linear { output, .. } => output.to_string(),
        _ => "_".into(),
    }
}

/// Output size of a sliding window (conv or pool) along one axis.
#[allow(clippy::too_many_arguments)]
pub(super) fn window_output(
    size: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    exact: bool,
    op: &str,
    shape: &Shape,
    span: Span,
) -> Result<usize> {
    if kernel == 0 || stride == 0 {
        return err(
            span,
            format!("{op}: kernel size and stride must be at least 1"),
        );
    }
    let reach = dilation * (kernel - 1) + 1;
    let padded = size + 2 * padding;
    if reach > padded {
        return err(
            span,
            format!(
                "{op}: the kernel ({reach} wide) is larger than the input {shape} ({size} + 2*{padding} padding = {padded}); use a smaller kernel or more padding"
            ),
        );
    }
    let span_len = padded - reach;
    if exact && !span_len.is_multiple_of(stride) {
        return err(
            span,
            format!(
                "{op}: the output size is not integral for {shape}: ({padded} - {reach}) / {stride} = {:.2}; the last {} row(s) would be dropped (adjust padding or stride)",
                span_len as f64 / stride as f64,
                span_len % stride
            ),
        );
    }
    Ok(span_len / stride + 1)
}
