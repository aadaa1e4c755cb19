//! Calls of the model's layers (`self.fc1(x)`), whose shapes come from the field types: the
//! per-layer shape rules and the messages when an input does not fit.

use proc_macro2::Span;
use quote::quote;
use syn::Ident;

use super::window::Window;
use super::{Lowering, Result, Value, err};
use crate::dsl::ast::Expr;
use crate::model::layers::{ConvFamily, Layer, LayerKind};
use crate::shape::{Dim, Same, Shape};

/// How to name the tensor fed to a layer in a hint: the variable when it is one.
fn input_name(arg: &Expr) -> String {
    match arg {
        Expr::Var(name) => name.to_string(),
        _ => "h".to_string(),
    }
}

impl Lowering<'_> {
    pub(super) fn layer(&mut self, field: &Ident, args: &[Expr]) -> Result<Value> {
        let span = field.span();
        let layer = self.find_layer(field, args)?;
        if let LayerKind::Parameter { .. } = layer.kind {
            return err(
                span,
                format!(
                    "`{field}` is a parameter tensor, not a layer; use it as a value: `x @ self.{field}`"
                ),
            );
        }
        if let LayerKind::Attention { embed, block } = &layer.kind {
            return self.attention(&layer, embed, *block, args, span);
        }
        if let LayerKind::Graph { input, output } = &layer.kind {
            return self.graph_layer(&layer, (input, output), args, span);
        }
        let [arg] = args else {
            return err(
                span,
                format!("layer `{field}` takes one tensor: `self.{field}(x)`"),
            );
        };
        let value = self.lower(arg)?;
        let (var, shape) = self.tensor(&value, arg.span(), &format!("layer `{field}`"))?;
        self.check_element(&layer, &var, &shape, arg.span())?;
        let call = layer.call(
            &[quote!(#var.as_dyn())],
            |layer, x| quote!(#layer.forward_dyn(#(#x),*)),
        );
        let out = match &layer.kind {
            LayerKind::Linear { input, output } => {
                self.linear_output(&layer, (input, output), &shape, arg, span)?
            }
            LayerKind::Conv {
                family,
                input,
                output,
                kernel,
                options,
            } => {
                self.channels(&layer, input, &shape, span, arg)?;
                let window = Window {
                    kernel: *kernel,
                    stride: options.stride,
                    padding: options.padding,
                    dilation: options.dilation,
                    exact: options.exact,
                };
                let what = format!("conv layer `{field}`");
                let mut dims = vec![shape.0[0].clone(), output.clone()];
                for size in &shape.0[2..] {
                    dims.push(match family {
                        ConvFamily::Transposed2d => {
                            window.transposed_output(size, options.output_padding)
                        }
                        _ => window.output(size, &what, &shape, span)?,
                    });
                }
                Shape(dims)
            }
            LayerKind::LastAxisNorm { features } => {
                self.last_axis(&layer, features, &shape, arg, span)?;
                shape.clone()
            }
            LayerKind::BatchNorm { channels } | LayerKind::GroupNorm { channels } => {
                self.channels(&layer, channels, &shape, span, arg)?;
                shape.clone()
            }
            LayerKind::Embedding { width } => {
                let mut dims = shape.0.clone();
                dims.push(width.clone());
                Shape(dims)
            }
            LayerKind::Recurrent { input, hidden } => {
                self.sequence(&layer, input, &shape, arg.span())?;
                let out = Shape(vec![shape.0[0].clone(), shape.0[1].clone(), hidden.clone()]);
                let call = layer.call(
                    &[quote!(#var.as_dyn())],
                    |layer, x| quote!(#layer.forward_dyn(#(#x),*, None).map(|(out, _)| out)),
                );
                return Ok(self.emit(span, out, call));
            }
            LayerKind::Pool {
                kernel,
                stride,
                padding,
                exact,
            } => {
                let what = format!("pool layer `{field}`");
                let (h, w) = self.spatial(&shape, &what, span)?;
                let window = Window::pool(*kernel, *stride, *padding, *exact);
                Shape(vec![
                    shape.0[0].clone(),
                    shape.0[1].clone(),
                    window.output(&h, &what, &shape, span)?,
                    window.output(&w, &what, &shape, span)?,
                ])
            }
            LayerKind::AdaptivePool { output: (oh, ow) } => {
                self.spatial(&shape, &format!("pool layer `{field}`"), span)?;
                Shape(vec![
                    shape.0[0].clone(),
                    shape.0[1].clone(),
                    Dim::Lit(*oh),
                    Dim::Lit(*ow),
                ])
            }
            LayerKind::Flatten => {
                if shape.rank() < 2 {
                    return err(
                        arg.span(),
                        format!("`{field}` flattens [B, ..] into [B, N], but receives {shape}"),
                    );
                }
                Shape(vec![shape.0[0].clone(), Dim::product(&shape.0[1..])])
            }
            LayerKind::ShapePreserving => shape.clone(),
            LayerKind::Other => {
                let mut sizes = vec![shape.0[0].to_string()];
                sizes.extend(std::iter::repeat_n("_".to_string(), shape.rank() - 1));
                return err(
                    span,
                    format!(
                        "the shape checker does not see what `{field}` ({}) returns; bind the result with the shape its forward declares, e.g. `let h: [{}] = self.{field}({});`, with the sizes you know in place of `_` (the type system checks them, and the input, against `{}`'s forward)",
                        layer_type(&layer),
                        sizes.join(", "),
                        input_name(arg),
                        layer_type(&layer),
                    ),
                );
            }
            LayerKind::Parameter { .. } | LayerKind::Attention { .. } | LayerKind::Graph { .. } => {
                unreachable!("handled above")
            }
        };
        Ok(self.emit(span, out, call))
    }

    fn find_layer(&self, field: &Ident, args: &[Expr]) -> Result<Layer> {
        if let Some(layer) = self.layers.iter().find(|l| l.name == *field) {
            return Ok(layer.clone());
        }
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
        err(
            field.span(),
            format!(
                "`self.{field}` is not a field of this model{input}; its layers are {}",
                fields.join(", ")
            ),
        )
    }

    /// Embeddings take integer indices; every other layer takes floats.
    fn check_element(&self, layer: &Layer, var: &Ident, shape: &Shape, span: Span) -> Result<()> {
        let element = self.element_name(var);
        let integer = matches!(element.as_str(), "i64" | "i32" | "u8" | "bool");
        let field = &layer.name;
        match (&layer.kind, integer) {
            (LayerKind::Embedding { .. }, false) => err(
                span,
                format!(
                    "`{field}` is an Embedding; it takes integer indices but receives {shape} of {element}\n  help: pass the token ids as i64, e.g. the parameter `ids: {}`",
                    with_element(shape, "i64")
                ),
            ),
            (LayerKind::Other, _) | (LayerKind::Embedding { .. }, true) => Ok(()),
            (_, true) => err(
                span,
                format!(
                    "`{field}` takes floating-point features but receives {shape} of {element}\n  help: embed integer ids first (an `Embedding` field), or pass f32 values"
                ),
            ),
            _ => Ok(()),
        }
    }

    /// `[.., IN] -> [.., OUT]`; a mismatch says how to fix the layer or its input, and a
    /// forgotten flatten after a conv stack is named as such.
    fn linear_output(
        &mut self,
        layer: &Layer,
        (input, output): (&Dim, &Dim),
        shape: &Shape,
        arg: &Expr,
        call: Span,
    ) -> Result<Shape> {
        let field = &layer.name;
        let Some(last) = shape.0.last() else {
            return err(
                arg.span(),
                format!(
                    "`{field}` is a Linear layer; it needs a tensor with a feature axis, got {shape}"
                ),
            );
        };
        let mut dims = shape.0.clone();
        match last.same(input) {
            Same::Yes | Same::Runtime => {}
            Same::Unknown => self.defer_same(
                arg.span(),
                last,
                input,
                format!("`{field}` takes [.., {input}] but receives {shape}"),
            ),
            Same::No => {
                let flat = Dim::product(&shape.0[1..]);
                let name = input_name(arg);
                let flattened = Shape(vec![shape.0[0].clone(), flat.clone()]);
                let help = if shape.rank() >= 3 && flat.same(input) == Same::Yes {
                    format!(
                        "flatten the feature axes first: `self.{field}({name}.flatten(1))` gives {flattened}"
                    )
                } else if shape.rank() == 4 {
                    format!(
                        "flatten the feature axes first (`{name}.flatten(1)` gives {flattened}) and declare `{field}: Linear<{flat}, {output}>`"
                    )
                } else {
                    format!(
                        "declare `{field}: Linear<{last}, {output}>`, or change the layer that feeds it"
                    )
                };
                let n = dims.len();
                dims[n - 1] = input.clone();
                let expected = if shape.rank() == 4 {
                    Shape(vec![shape.0[0].clone(), input.clone()])
                } else {
                    Shape(dims)
                };
                return err(
                    call,
                    format!("`{field}` takes {expected} but receives {shape}\n  help: {help}"),
                );
            }
        }
        *dims.last_mut().expect("checked non-empty") = output.clone();
        Ok(Shape(dims))
    }

    /// The last axis must be the layer's width (LayerNorm, RmsNorm).
    fn last_axis(
        &mut self,
        layer: &Layer,
        features: &Dim,
        shape: &Shape,
        arg: &Expr,
        call: Span,
    ) -> Result<()> {
        let (field, ty) = (&layer.name, &layer.type_name);
        let Some(last) = shape.0.last() else {
            return err(
                arg.span(),
                format!("`{field}` normalises a feature axis, but receives a scalar"),
            );
        };
        match last.same(features) {
            Same::Yes | Same::Runtime => Ok(()),
            Same::Unknown => {
                self.defer_same(
                    arg.span(),
                    last,
                    features,
                    format!("`{field}` normalises [.., {features}] but receives {shape}"),
                );
                Ok(())
            }
            Same::No => err(
                call,
                format!(
                    "`{field}` is a {ty} over {features} features; it takes [.., {features}] but receives {shape}\n  help: declare `{field}: {ty}<{last}>`"
                ),
            ),
        }
    }

    /// Axis 1 must be the layer's channel count (convolutions, BatchNorm, GroupNorm); the
    /// rank must be the layer's.
    fn channels(
        &mut self,
        layer: &Layer,
        expected: &Dim,
        shape: &Shape,
        span: Span,
        arg: &Expr,
    ) -> Result<Dim> {
        let arg_span = arg.span();
        let (field, ty) = (&layer.name, layer.type_name.as_str());
        let (layouts, ranks): (&str, &[usize]) = match &layer.kind {
            LayerKind::Conv {
                family: ConvFamily::Conv1d,
                ..
            } => ("[B, C, L]", &[3]),
            LayerKind::BatchNorm { .. } => ("[B, C], [B, C, L] or [B, C, H, W]", &[2, 3, 4]),
            LayerKind::GroupNorm { .. } => ("[B, C, H, W]", &[4]),
            _ => ("[B, C, H, W]", &[4]),
        };
        if !ranks.contains(&shape.rank()) {
            let hint = if ranks == [4] && shape.rank() == 2 {
                "\n  help: reshape the features into an image first, e.g. `x.reshape([B, 1, 28, 28])`"
            } else {
                ""
            };
            return err(
                arg_span,
                format!(
                    "`{field}` is a {ty} layer; it takes {} but receives {shape} (rank {}){hint}",
                    layouts.replace('C', &expected.to_string()),
                    shape.rank()
                ),
            );
        }
        let got = &shape.0[1];
        match got.same(expected) {
            Same::Yes | Same::Runtime => {}
            Same::Unknown => self.defer_same(
                arg_span,
                got,
                expected,
                format!("`{field}` takes {expected} channels but receives {shape}"),
            ),
            Same::No => {
                // The layout of the input's rank (BatchNorm takes several).
                let layout = layouts
                    .split_inclusive(']')
                    .filter_map(|part| part.find('[').map(|at| &part[at..]))
                    .find(|l| l.matches(',').count() + 1 == shape.rank())
                    .unwrap_or(layouts)
                    .replace('C', &expected.to_string())
                    .replace("[B, ", &format!("[{}, ", shape.0[0]));
                // Channels last (`[B, T, C]`, `[B, H, W, C]`): move them to axis 1.
                let channels_last = shape.rank() > 2
                    && shape
                        .0
                        .last()
                        .is_some_and(|last| last.same(expected) == Same::Yes);
                if channels_last {
                    let name = input_name(arg);
                    let (moved, back) = if shape.rank() == 3 {
                        (format!("{name}.transpose(1, 2)"), ".transpose(1, 2)")
                    } else {
                        (
                            format!("{name}.permute([0, 3, 1, 2])"),
                            ".permute([0, 2, 3, 1])",
                        )
                    };
                    let mut dims = shape.0.clone();
                    let last = dims.pop().expect("rank > 2");
                    dims.insert(1, last);
                    return err(
                        span,
                        format!(
                            "`{field}` takes {layout}, channels first, but receives {shape}, whose {expected} channels are last\n  help: move the channels to axis 1: `self.{field}({moved})` takes {} (and `{back}` turns the result back, if the rest of the model is channels-last)",
                            Shape(dims)
                        ),
                    );
                }
                if got.lit().is_none() {
                    return err(
                        span,
                        format!(
                            "`{field}` takes {layout} but receives {shape}: axis 1, the channels, is {got}, not {expected}\n  help: pass the tensor with its {expected} channels on axis 1"
                        ),
                    );
                }
                let declared = match &layer.kind {
                    LayerKind::Conv { output, kernel, .. } => {
                        format!("{ty}<{got}, {output}, {kernel}>")
                    }
                    LayerKind::GroupNorm { .. } => {
                        format!("GroupNorm<G, {got}> (G dividing {got})")
                    }
                    _ => format!("{ty}<{got}>"),
                };
                return err(
                    span,
                    format!(
                        "`{field}` takes {layout} but receives {shape} with {got} channels\n  help: declare `{field}: {declared}`"
                    ),
                );
            }
        }
        Ok(got.clone())
    }

    /// `[B, T, width]` for sequence layers (LSTM, GRU, attention).
    pub(super) fn sequence(
        &mut self,
        layer: &Layer,
        width: &Dim,
        shape: &Shape,
        span: Span,
    ) -> Result<()> {
        let (field, ty) = (&layer.name, &layer.type_name);
        if shape.rank() != 3 {
            let hint = if shape.rank() == 2 {
                "\n  help: add the time axis, e.g. `x.unsqueeze(1)` for sequences of length 1"
            } else {
                ""
            };
            return err(
                span,
                format!(
                    "`{field}` is a {ty}; it takes a batch of sequences [B, T, {width}] but receives {shape} (rank {}){hint}",
                    shape.rank()
                ),
            );
        }
        let last = &shape.0[2];
        match last.same(width) {
            Same::Yes | Same::Runtime => Ok(()),
            Same::Unknown => {
                self.defer_same(
                    span,
                    last,
                    width,
                    format!("`{field}` takes [B, T, {width}] but receives {shape}"),
                );
                Ok(())
            }
            Same::No => err(
                span,
                format!(
                    "`{field}` is a {ty} over {width} features; it takes [B, T, {width}] but receives {shape}\n  help: project the features to {width} first, or declare `{field}` with {last} input features"
                ),
            ),
        }
    }

    /// `[.., H, W]` of an image batch `[B, C, H, W]`. `op` is already quoted.
    pub(super) fn spatial(&self, shape: &Shape, op: &str, span: Span) -> Result<(Dim, Dim)> {
        if shape.rank() != 4 {
            return err(
                span,
                format!(
                    "{op} takes an image batch [B, C, H, W], got {shape} (rank {})",
                    shape.rank()
                ),
            );
        }
        Ok((shape.0[2].clone(), shape.0[3].clone()))
    }
}

/// The field's type as written, for messages.
fn layer_type(layer: &Layer) -> String {
    if layer.type_name.is_empty() {
        format!("`{}`'s type", layer.name)
    } else {
        layer.type_name.clone()
    }
}

/// `shape` written as a parameter with an element type: `[B, T; i64]`.
fn with_element(shape: &Shape, element: &str) -> String {
    let dims: Vec<String> = shape.0.iter().map(ToString::to_string).collect();
    format!("[{}; {element}]", dims.join(", "))
}
