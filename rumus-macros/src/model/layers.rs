//! Layers the macros understand: their shapes are computed at expansion time from the field
//! type (`Linear<784, 256>`, `Conv2d<1, 32, 3>`) and its `#[conv(...)]` attribute.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Field, GenericArgument, Ident, PathArguments, Type};

use crate::shape::{Dim, dim_from_ident};

/// Options of a convolution field, from
/// `#[conv(stride = 2, padding = 1, dilation = 1, groups = 1, bias = false, exact)]`.
#[derive(Debug, Clone, Copy)]
pub struct ConvOptions {
    pub stride: usize,
    pub padding: usize,
    pub dilation: usize,
    /// Channel groups (`IN` and `OUT` must be multiples).
    pub groups: usize,
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
            exact: false,
            bias: true,
        }
    }
}

/// What a field of a `#[model]` struct is.
#[derive(Debug, Clone)]
pub enum LayerKind {
    Linear {
        input: Dim,
        output: Dim,
    },
    Conv2d {
        input: Dim,
        output: Dim,
        kernel: usize,
        options: ConvOptions,
    },
    /// A parameter tensor held directly (`Tensor<...>`).
    Parameter,
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
    /// Span of the field's type, where chain errors point.
    pub type_span: Span,
}

fn generic_dims(ty: &Type) -> Option<(String, Vec<Dim>)> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    let mut dims = Vec::new();
    if let PathArguments::AngleBracketed(args) = &last.arguments {
        for arg in &args.args {
            match arg {
                GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Int(lit),
                    ..
                })) => dims.push(Dim::Lit(lit.base10_parse().ok()?)),
                GenericArgument::Const(syn::Expr::Path(syn::ExprPath { path, .. }))
                | GenericArgument::Type(Type::Path(syn::TypePath { path, .. }))
                    if path.get_ident().is_some() =>
                {
                    dims.push(dim_from_ident(&path.get_ident()?.to_string()))
                }
                GenericArgument::Const(syn::Expr::Block(block)) => {
                    // `{ HIDDEN }`
                    let syn::Stmt::Expr(syn::Expr::Path(p), None) = block.block.stmts.first()?
                    else {
                        return None;
                    };
                    dims.push(Dim::Const(p.path.get_ident()?.to_string()));
                }
                _ => return None,
            }
        }
    }
    Some((last.ident.to_string(), dims))
}

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
            if meta.path.is_ident("stride") {
                options.stride = value;
            } else if meta.path.is_ident("padding") {
                options.padding = value;
            } else if meta.path.is_ident("dilation") {
                options.dilation = value;
            } else if meta.path.is_ident("groups") {
                options.groups = value;
            } else {
                return Err(meta.error(
                    "unknown conv option; use stride, padding, dilation, groups, bias or exact",
                ));
            }
            if value == 0 && !meta.path.is_ident("padding") {
                return Err(meta.error("stride, dilation and groups must be at least 1"));
            }
            Ok(())
        })?;
    }
    Ok(options)
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
        let kind = match generic_dims(&field.ty) {
            Some((ty, dims)) if ty == "Linear" && dims.len() == 2 => LayerKind::Linear {
                input: dims[0].clone(),
                output: dims[1].clone(),
            },
            Some((ty, dims)) if ty == "Conv2d" && dims.len() == 3 => {
                let kernel = dims[2].lit().ok_or_else(|| {
                    syn::Error::new(
                        field.ty.span(),
                        "the kernel size of a Conv2d field must be a literal",
                    )
                })?;
                LayerKind::Conv2d {
                    input: dims[0].clone(),
                    output: dims[1].clone(),
                    kernel,
                    options: conv_options(field)?,
                }
            }
            Some((ty, _)) if ty == "Tensor" => LayerKind::Parameter,
            _ => LayerKind::Other,
        };
        Ok(Layer {
            name,
            member,
            key,
            kind,
            type_span: field.ty.span(),
        })
    }
}
