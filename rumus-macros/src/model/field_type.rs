//! Reading dims out of a field's type: `Linear<784, { config::HIDDEN }>` and
//! `Tensor<(D<10>, D<784>)>`.

use syn::{GenericArgument, PathArguments, Type};

use crate::shape::{Dim, Shape, dim_from_ident};

/// A path written as a const generic argument (`HIDDEN`, `config::HIDDEN`), as text.
fn const_path(path: &syn::Path) -> Option<String> {
    let segments: Vec<String> = path
        .segments
        .iter()
        .map(|s| matches!(s.arguments, PathArguments::None).then(|| s.ident.to_string()))
        .collect::<Option<_>>()?;
    Some(segments.join("::"))
}

/// One const generic argument as a dim: a literal, a const (`HIDDEN`, `{ HIDDEN }`,
/// `{ config::HIDDEN }`).
fn argument_dim(arg: &GenericArgument) -> Option<Dim> {
    match arg {
        GenericArgument::Const(syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(lit),
            ..
        })) => Some(Dim::Lit(lit.base10_parse().ok()?)),
        GenericArgument::Const(syn::Expr::Path(syn::ExprPath { path, .. }))
        | GenericArgument::Type(Type::Path(syn::TypePath { path, .. }))
            if path.get_ident().is_some() =>
        {
            Some(dim_from_ident(&path.get_ident()?.to_string()))
        }
        GenericArgument::Const(syn::Expr::Block(block)) => match block.block.stmts.as_slice() {
            [
                syn::Stmt::Expr(
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(lit),
                        ..
                    }),
                    None,
                ),
            ] => Some(Dim::Lit(lit.base10_parse().ok()?)),
            [syn::Stmt::Expr(syn::Expr::Path(p), None)] => Some(Dim::Const(const_path(&p.path)?)),
            _ => None,
        },
        _ => None,
    }
}

/// The last segment's name and its const generic dims: `Linear<784, 256>` ->
/// `("Linear", [784, 256])`. `None` when an argument is not a dim the macro can read.
pub fn generic_dims(ty: &Type) -> Option<(String, Vec<Dim>)> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    let mut dims = Vec::new();
    if let PathArguments::AngleBracketed(args) = &last.arguments {
        for arg in &args.args {
            dims.push(argument_dim(arg)?);
        }
    }
    Some((last.ident.to_string(), dims))
}

/// The shape of a parameter field `Tensor<(D<10>, D<784>)>`, when every dim is static; `None`
/// otherwise.
pub fn tensor_shape(ty: &Type) -> Option<Shape> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut args = args.args.iter();
    let Some(GenericArgument::Type(Type::Tuple(tuple))) = args.next() else {
        return None;
    };
    let dims = tuple
        .elems
        .iter()
        .map(|elem| {
            let (name, dims) = generic_dims(elem)?;
            match (name.as_str(), dims.as_slice()) {
                ("D", [dim]) => Some(dim.clone()),
                _ => None,
            }
        })
        .collect::<Option<Vec<Dim>>>()?;
    Some(Shape(dims))
}

/// `T` of a field type `Checkpointed<T>` (a layer run under activation checkpointing).
pub fn checkpointed_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Checkpointed" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(inner) if args.args.len() == 1 => Some(inner),
        _ => None,
    }
}
