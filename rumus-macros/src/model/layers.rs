//! Layers the macros understand: their shapes are computed at expansion time from the field
//! type (`Linear<784, 256>`, `Conv2d<1, 32, 3>`, `LayerNorm<64>`, ...) and the field's
//! attributes (`#[conv(..)]`, `#[pool(..)]`, `#[dropout(..)]`). Every layer of `rumus::nn`
//! is known, also inside `Checkpointed<..>`; any other field type is a module whose shapes the
//! type system checks.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{Field, Ident, Type};

use super::field_type::{checkpointed_inner, generic_dims, tensor_shape};
use crate::shape::{Dim, Shape};

/// Options of a convolution field, from
/// `#[conv(stride = 2, padding = 1, dilation = 1, groups = 1, output_padding = 0, bias = false, exact)]`.
#[derive(Debug, Clone, Copy)]
pub struct ConvOptions {
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    /// Channel groups (`IN` and `OUT` must be multiples).
    pub groups: usize,
    /// Extra rows added on one side of a transposed convolution's output.
    pub output_padding: usize,
    /// Refuse sizes that do not divide evenly instead of flooring (PyTorch floors).
    pub exact: bool,
    /// Whether the layer has a bias term (PyTorch's `bias=`).
    pub bias: bool,
}

impl Default for ConvOptions {
    fn default() -> Self {
        ConvOptions {
            stride: 1,
            padding: 0,
            dilation: 1,
            groups: 1,
            output_padding: 0,
            exact: false,
            bias: true,
        }
    }
}

/// Options of a pooling field, from `#[pool(kernel = 2, stride = 2, padding = 0, exact)]`
/// (`MaxPool2d`, `AvgPool2d`) or `#[pool(output = 1)]` / `#[pool(output = [2, 3])]`
/// (`AdaptiveAvgPool2d`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolOptions {
    pub kernel: Option<usize>,
    pub stride: Option<usize>,
    pub padding: usize,
    pub exact: bool,
    pub output: Option<(usize, usize)>,
}

/// Which spatial layout a convolution works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvFamily {
    /// `Conv1d`: `[B, C, L]`.
    Conv1d,
    /// `Conv2d`: `[B, C, H, W]`.
    Conv2d,
    /// `ConvTranspose2d`: `[B, C, H, W]`, growing.
    Transposed2d,
}

/// What a field of a `#[model]` struct is.
#[derive(Debug, Clone)]
pub enum LayerKind {
    Linear {
        input: Dim,
        output: Dim,
    },
    Conv {
        family: ConvFamily,
        input: Dim,
        output: Dim,
        kernel: usize,
        options: ConvOptions,
    },
    /// `LayerNorm<D>` and `RmsNorm<D>`: normalise the last axis of width `features`.
    LastAxisNorm {
        features: Dim,
    },
    /// `BatchNorm<C>` (and its aliases): `[B, C]`, `[B, C, L]` or `[B, C, H, W]`.
    BatchNorm {
        channels: Dim,
    },
    /// `GroupNorm<G, C>`: `[B, C, ..]`.
    GroupNorm {
        channels: Dim,
    },
    /// `Embedding<V, D>`: integer indices of any shape get a trailing axis of width `D`.
    Embedding {
        width: Dim,
    },
    /// `MultiheadAttention<E, H>` and `TransformerEncoderBlock<E, H, FF>`: `[B, T, E]`.
    Attention {
        embed: Dim,
        /// Whether it is a whole encoder block (one input) rather than attention alone
        /// (self-attention on one input, or query, key and value).
        block: bool,
    },
    /// `Lstm<IN, H>` and `Gru<IN, H>`: `[B, T, IN] -> [B, T, H]`.
    Recurrent {
        input: Dim,
        hidden: Dim,
    },
    /// `MaxPool2d` / `AvgPool2d` with their window.
    Pool {
        kernel: usize,
        stride: usize,
        padding: usize,
        exact: bool,
    },
    /// `AdaptiveAvgPool2d` with its output size.
    AdaptivePool {
        output: (usize, usize),
    },
    /// `Flatten`: `[B, ..] -> [B, product]`.
    Flatten,
    /// `Dropout` and the activation modules (`Relu`, `Gelu`, ...): any shape, unchanged.
    ShapePreserving,
    /// A parameter tensor held directly (`Tensor<(D<10>, D<784>)>`), with its shape when
    /// the type spells it with static dims.
    Parameter {
        shape: Option<Shape>,
    },
    /// The graph layers (`GcnConv<IN, OUT>`, `SageConv`, `GinConv`, and `GatConv<IN, OUT,
    /// HEADS>` whose heads concatenate): node features `[N, IN]` and a graph give `[N,
    /// output]`; the node count is a runtime size.
    Graph {
        input: Dim,
        output: Dim,
    },
    /// Any other module (a nested model, a user layer): shapes come from the type system.
    Other,
}

/// A field of the model with what the macros know about it.
#[derive(Clone)]
pub struct Layer {
    /// The field's name; for a tuple struct's field `i`, `_i` (it appears only in messages).
    pub name: Ident,
    /// How `self` reaches the field: `self.fc1`, or `self.0` in a tuple struct.
    pub member: syn::Member,
    /// The field's segment of dotted state-dict names: `fc1`, or `0` as in PyTorch's
    /// `nn.Sequential`.
    pub key: String,
    pub kind: LayerKind,
    /// The layer type's name as written (`Linear`, `MultiheadAttention`), for messages.
    pub type_name: String,
    /// Span of the field's type, where chain errors point.
    pub type_span: Span,
    /// Dropout probability from `#[dropout(p = ..)]`.
    pub dropout: Option<f64>,
    /// Whether the field is `Checkpointed<T>`: `kind` and `type_name` are `T`'s, and calls go
    /// through `Checkpointed::forward_with`.
    pub checkpointed: bool,
    /// Compile-time checks of the declaration that involve consts the macro cannot see
    /// (heads dividing a width, groups dividing channels).
    pub checks: Vec<TokenStream>,
}

/// The field attributes `#[model]` reads; they are removed from the emitted struct.
pub const FIELD_ATTRIBUTES: &[&str] = &["conv", "pool", "dropout", "skip"];

fn conv_options(field: &Field) -> syn::Result<ConvOptions> {
    let mut options = ConvOptions::default();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("conv")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("exact") {
                options.exact = true;
                return Ok(());
            }
            if meta.path.is_ident("bias") {
                let value: syn::LitBool = meta.value()?.parse()?;
                options.bias = value.value;
                return Ok(());
            }
            let value: syn::LitInt = meta.value()?.parse()?;
            let value: usize = value.base10_parse()?;
            let at_least_one = ["stride", "dilation", "groups"];
            if at_least_one.iter().any(|n| meta.path.is_ident(n)) && value == 0 {
                return Err(meta.error("stride, dilation and groups must be at least 1"));
            }
            if meta.path.is_ident("stride") {
                options.stride = value;
            } else if meta.path.is_ident("padding") {
                options.padding = value;
            } else if meta.path.is_ident("dilation") {
                options.dilation = value;
            } else if meta.path.is_ident("groups") {
                options.groups = value;
            } else if meta.path.is_ident("output_padding") {
                options.output_padding = value;
            } else {
                return Err(meta.error(
                    "unknown conv option; use stride, padding, dilation, groups, output_padding, bias or exact",
                ));
            }
            Ok(())
        })?;
    }
    Ok(options)
}

fn positive(lit: &syn::LitInt) -> syn::Result<usize> {
    let value: usize = lit.base10_parse()?;
    if value == 0 {
        return Err(syn::Error::new(lit.span(), "must be at least 1"));
    }
    Ok(value)
}

fn pool_options(field: &Field) -> syn::Result<PoolOptions> {
    let mut options = PoolOptions::default();
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("pool")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("exact") {
                options.exact = true;
            } else if meta.path.is_ident("output") {
                let value: syn::Expr = meta.value()?.parse()?;
                options.output = Some(match &value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(n),
                        ..
                    }) => (positive(n)?, positive(n)?),
                    syn::Expr::Array(array) if array.elems.len() == 2 => {
                        let side = |e: &syn::Expr| match e {
                            syn::Expr::Lit(syn::ExprLit {
                                lit: syn::Lit::Int(n),
                                ..
                            }) => positive(n),
                            other => Err(syn::Error::new(other.span(), "expected an integer")),
                        };
                        (side(&array.elems[0])?, side(&array.elems[1])?)
                    }
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "the output size is `output = 1` or `output = [2, 3]`",
                        ));
                    }
                });
            } else {
                let lit: syn::LitInt = meta.value()?.parse()?;
                if meta.path.is_ident("kernel") {
                    options.kernel = Some(positive(&lit)?);
                } else if meta.path.is_ident("stride") {
                    options.stride = Some(positive(&lit)?);
                } else if meta.path.is_ident("padding") {
                    options.padding = lit.base10_parse()?;
                } else {
                    return Err(meta.error(
                        "unknown pool option; use kernel, stride, padding, exact (MaxPool2d, AvgPool2d) or output (AdaptiveAvgPool2d)",
                    ));
                }
            }
            Ok(())
        })?;
    }
    Ok(options)
}

fn dropout_option(field: &Field) -> syn::Result<Option<f64>> {
    let mut p = None;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("dropout")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("p") {
                return Err(meta.error("the dropout option is `#[dropout(p = 0.1)]`"));
            }
            let lit: syn::LitFloat = meta.value()?.parse()?;
            let value: f64 = lit.base10_parse()?;
            if !(0.0..=1.0).contains(&value) {
                return Err(syn::Error::new(
                    lit.span(),
                    format!("a dropout probability is in [0, 1], got {value}"),
                ));
            }
            p = Some(value);
            Ok(())
        })?;
    }
    Ok(p)
}

/// `width` must split evenly into `parts` (heads of an attention layer, groups of a norm):
/// an error now when both are literals, a compile-time check when a const is involved.
fn divisible(
    field: &Field,
    (width, width_what): (&Dim, &str),
    (parts, parts_what): (&Dim, &str),
    checks: &mut Vec<TokenStream>,
) -> syn::Result<()> {
    let name = field
        .ident
        .as_ref()
        .map_or_else(|| "the layer".to_string(), |i| format!("`{i}`"));
    match (width.lit(), parts.lit()) {
        (Some(_), Some(0)) => Err(syn::Error::new(
            field.ty.span(),
            format!("{name} needs at least one of its {parts_what}"),
        )),
        (Some(w), Some(p)) if w % p != 0 => {
            let fits: Vec<String> = (1..=w)
                .filter(|d| w % d == 0 && (d * 4 > p && *d < p * 4))
                .map(|d| d.to_string())
                .collect();
            Err(syn::Error::new(
                field.ty.span(),
                format!(
                    "{name}: {w} {width_what} do not split into {p} {parts_what} ({w} % {p} = {}); \
                     choose a count that divides {w}{}",
                    w % p,
                    if fits.is_empty() {
                        String::new()
                    } else {
                        format!(", e.g. {}", fits.join(", "))
                    }
                ),
            ))
        }
        (Some(_), Some(_)) => Ok(()),
        _ => {
            checks.push(crate::shape::deferred_divisible(
                field.ty.span(),
                width,
                parts,
                &format!(
                    "{name}: {width} {width_what} do not split evenly into {parts} {parts_what}"
                ),
            ));
            Ok(())
        }
    }
}

/// What the field's type `field_type` is (for a `Checkpointed<T>` field, `T`).
fn kind_of(
    field: &Field,
    field_type: &Type,
    checks: &mut Vec<TokenStream>,
) -> syn::Result<(String, LayerKind)> {
    if let Type::Path(path) = field_type
        && path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "Tensor")
    {
        let Some(shape) = tensor_shape(field_type) else {
            return Err(syn::Error::new(
                field_type.span(),
                "a parameter field needs static dims, so `new()` can create it and the shape checker can read it, e.g. `Tensor<(D<10>, D<784>)>`",
            ));
        };
        return Ok(("Tensor".into(), LayerKind::Parameter { shape: Some(shape) }));
    }
    let Some((ty, dims)) = generic_dims(field_type) else {
        return Ok((String::new(), LayerKind::Other));
    };
    let literal_kernel = |dim: &Dim| {
        dim.lit().ok_or_else(|| {
            syn::Error::new(
                field_type.span(),
                format!("the kernel size of a {ty} field must be a literal"),
            )
        })
    };
    let kind = match (ty.as_str(), dims.as_slice()) {
        ("Linear", [input, output]) => LayerKind::Linear {
            input: input.clone(),
            output: output.clone(),
        },
        ("Conv2d" | "Conv1d" | "ConvTranspose2d", [input, output, kernel]) => {
            let family = match ty.as_str() {
                "Conv1d" => ConvFamily::Conv1d,
                "Conv2d" => ConvFamily::Conv2d,
                _ => ConvFamily::Transposed2d,
            };
            let options = conv_options(field)?;
            let unsupported = match family {
                ConvFamily::Conv2d => None,
                ConvFamily::Conv1d => (options.groups != 1 || options.output_padding != 0)
                    .then_some("groups or output_padding"),
                ConvFamily::Transposed2d => {
                    (options.groups != 1 || options.dilation != 1).then_some("groups or dilation")
                }
            };
            if let Some(what) = unsupported {
                return Err(syn::Error::new(
                    field_type.span(),
                    format!("a {ty} field takes no {what} option"),
                ));
            }
            if options.groups != 1 {
                divisible(
                    field,
                    (input, "input channels"),
                    (&Dim::Lit(options.groups), "groups"),
                    checks,
                )?;
                divisible(
                    field,
                    (output, "output channels"),
                    (&Dim::Lit(options.groups), "groups"),
                    checks,
                )?;
            }
            LayerKind::Conv {
                family,
                input: input.clone(),
                output: output.clone(),
                kernel: literal_kernel(kernel)?,
                options,
            }
        }
        ("LayerNorm" | "RmsNorm", [features]) => LayerKind::LastAxisNorm {
            features: features.clone(),
        },
        ("BatchNorm" | "BatchNorm1d" | "BatchNorm2d", [channels]) => LayerKind::BatchNorm {
            channels: channels.clone(),
        },
        ("GroupNorm", [groups, channels]) => {
            divisible(field, (channels, "channels"), (groups, "groups"), checks)?;
            LayerKind::GroupNorm {
                channels: channels.clone(),
            }
        }
        ("Embedding", [_vocab, width]) => LayerKind::Embedding {
            width: width.clone(),
        },
        ("MultiheadAttention", [embed, heads]) | ("TransformerEncoderBlock", [embed, heads, _]) => {
            divisible(field, (embed, "features"), (heads, "heads"), checks)?;
            LayerKind::Attention {
                embed: embed.clone(),
                block: ty == "TransformerEncoderBlock",
            }
        }
        ("Lstm" | "Gru", [input, hidden]) => LayerKind::Recurrent {
            input: input.clone(),
            hidden: hidden.clone(),
        },
        ("MaxPool2d" | "AvgPool2d", []) => {
            let options = pool_options(field)?;
            let Some(kernel) = options.kernel else {
                return Err(syn::Error::new(
                    field_type.span(),
                    format!(
                        "a {ty} field needs its window: `#[pool(kernel = 2)]` (stride defaults to the kernel)"
                    ),
                ));
            };
            LayerKind::Pool {
                kernel,
                stride: options.stride.unwrap_or(kernel),
                padding: options.padding,
                exact: options.exact,
            }
        }
        ("AdaptiveAvgPool2d", []) => {
            let Some(output) = pool_options(field)?.output else {
                return Err(syn::Error::new(
                    field_type.span(),
                    "an AdaptiveAvgPool2d field needs its output size: `#[pool(output = 1)]` or `#[pool(output = [2, 3])]`",
                ));
            };
            LayerKind::AdaptivePool { output }
        }
        ("GcnConv" | "SageConv" | "GinConv", [input, output]) => LayerKind::Graph {
            input: input.clone(),
            output: output.clone(),
        },
        ("GatConv", [input, output, heads]) => LayerKind::Graph {
            input: input.clone(),
            output: Dim::product(&[output.clone(), heads.clone()]),
        },
        ("Flatten", []) => LayerKind::Flatten,
        ("Dropout" | "Relu" | "Sigmoid" | "Tanh" | "Gelu" | "Silu", []) => {
            LayerKind::ShapePreserving
        }
        _ => LayerKind::Other,
    };
    Ok((ty, kind))
}

impl Layer {
    /// Field `index` of the struct (its position among all fields, skipped ones included).
    pub fn from_field(index: usize, field: &Field) -> syn::Result<Self> {
        let (name, member, key) = match &field.ident {
            Some(ident) => (
                ident.clone(),
                syn::Member::Named(ident.clone()),
                ident.to_string(),
            ),
            None => (
                Ident::new(&format!("_{index}"), field.span()),
                syn::Member::Unnamed(syn::Index {
                    index: index as u32,
                    span: field.span(),
                }),
                index.to_string(),
            ),
        };
        let mut checks = Vec::new();
        let inner = checkpointed_inner(&field.ty);
        let ty = inner.unwrap_or(&field.ty);
        let (type_name, kind) = kind_of(field, ty, &mut checks)?;
        if let (Some(_), LayerKind::Parameter { .. }) = (inner, &kind) {
            return Err(syn::Error::new(
                field.ty.span(),
                "a parameter tensor cannot be checkpointed; wrap the layer that uses it",
            ));
        }
        Ok(Layer {
            name,
            member,
            key,
            kind,
            type_name,
            type_span: field.ty.span(),
            dropout: dropout_option(field)?,
            checkpointed: inner.is_some(),
            checks,
        })
    }

    /// The call of this layer on `inputs` (`&DynTensor` expressions): `call(layer, inputs)`
    /// builds the method call on the layer itself; a checkpointed field runs it inside
    /// `Checkpointed::forward_with`, on the inputs the checkpoint hands it.
    pub fn call(
        &self,
        inputs: &[TokenStream],
        call: impl Fn(&TokenStream, &[TokenStream]) -> TokenStream,
    ) -> TokenStream {
        let (member, key) = (&self.member, &self.key);
        // Run as the field, so anomaly mode can name it.
        if !self.checkpointed {
            let body = call(&quote!(self.#member), inputs);
            return quote!(::rumus::__private::in_field(#key, || #body));
        }
        let handed: Vec<TokenStream> = (0..inputs.len()).map(|i| quote!(&inputs[#i])).collect();
        let body = call(&quote!(layer), &handed);
        quote!(::rumus::__private::in_field(#key, || self.#member.forward_with(&[#(#inputs),*], |layer, inputs| #body)))
    }
}
