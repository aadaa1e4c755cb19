//! Parameters with named dims (`x: [Batch, Seq, 64]`) are taken through a trait generated for
//! that parameter, so a call with the axes in another order (`[Seq, Batch, 64]`) fails with a
//! message in shapes naming the function and the parameter, instead of rustc's mismatched-types
//! error between two tuple types. Parameters without named dims keep a plain `&Tensor<...>`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::ast::{DimAst, Param, TensorFn};
use crate::shape::{dim_from_ident, is_generic_dim};

/// Whether `param`'s shape names a dim declared with `rumus::dim!` (not a generic, not a
/// const).
fn has_named_dims(param: &Param) -> bool {
    param.shape.dims.iter().any(|d| match d {
        DimAst::Name(name) => {
            let name = name.to_string();
            !is_generic_dim(&name) && matches!(dim_from_ident(&name), crate::shape::Dim::Var(_))
        }
        DimAst::Lit(_) | DimAst::Infer(_) => false,
    })
}

/// The generic dims (`B`) of `param`'s shape, in order of first use.
fn param_generics(param: &Param) -> Vec<syn::Ident> {
    let mut names: Vec<syn::Ident> = Vec::new();
    for dim in &param.shape.dims {
        if let DimAst::Name(ident) = dim
            && is_generic_dim(&ident.to_string())
            && !names.contains(ident)
        {
            names.push(ident.clone());
        }
    }
    names
}

/// The parameter's trait, named to read well where rustc prints it ("the trait
/// `x_of_pool_sequence` is not implemented for ..."): `x_of_pool_sequence`, or
/// `x_of_Encoder_forward` for a method.
fn trait_name(function: &TensorFn, param: &Param) -> syn::Ident {
    match function.owner.as_deref() {
        Some(owner) => format_ident!("{}_of_{}_{}", param.name, owner, function.name),
        None => format_ident!("{}_of_{}", param.name, function.name),
    }
}

/// `[Batch, Seq, 64]` (or `[B, T; i64]`) as written.
pub fn written(param: &Param) -> String {
    let dims: Vec<String> = param
        .shape
        .dims
        .iter()
        .map(|d| match d {
            DimAst::Lit(n) => n.to_string(),
            DimAst::Name(name) => name.to_string(),
            DimAst::Infer(_) => "_".to_string(),
        })
        .collect();
    match &param.element {
        Some(element) => format!("[{}; {element}]", dims.join(", ")),
        None => format!("[{}]", dims.join(", ")),
    }
}

/// The type of `param` in the generated signature.
pub fn parameter_type(function: &TensorFn, param: &Param, tensor: &TokenStream) -> TokenStream {
    if !has_named_dims(param) {
        return quote!(&#tensor);
    }
    let name = trait_name(function, param);
    let generics = param_generics(param);
    quote!(&impl #name<#(#generics),*>)
}

/// The expression that turns the parameter into `&Tensor<...>` in the body.
pub fn as_tensor(param: &Param) -> TokenStream {
    let name = &param.name;
    if has_named_dims(param) {
        quote!(#name.__rumus_tensor())
    } else {
        quote!(#name)
    }
}

/// The traits behind the parameters with named dims; they go next to the function (outside an
/// impl block for methods).
pub fn traits(function: &TensorFn, tensor_type: impl Fn(&Param) -> TokenStream) -> TokenStream {
    let items = function.params.iter().filter(|p| has_named_dims(p)).map(|param| {
        let name = trait_name(function, param);
        let generics = param_generics(param);
        let tensor = tensor_type(param);
        let shape = written(param);
        let message = format!(
            "`{}` takes `{}` as {shape}, but this argument is `{{Self}}`",
            function.name, param.name
        );
        let label = format!("expected a tensor of shape {shape}");
        quote! {
            #[doc(hidden)]
            #[allow(non_camel_case_types)]
            #[diagnostic::on_unimplemented(
                message = #message,
                label = #label,
                note = "named dims only match themselves: reorder the argument's axes (`transpose`, `permute`) or pass the tensor the function was written for"
            )]
            pub trait #name<#(#generics: ::rumus::Dim),*> {
                #[doc(hidden)]
                fn __rumus_tensor(&self) -> &#tensor;
            }

            #[diagnostic::do_not_recommend]
            impl<#(#generics: ::rumus::Dim),*> #name<#(#generics),*> for #tensor {
                fn __rumus_tensor(&self) -> &#tensor {
                    self
                }
            }

            #[diagnostic::do_not_recommend]
            impl<#(#generics: ::rumus::Dim,)* __RumusInner: #name<#(#generics),*> + ?Sized> #name<#(#generics),*> for &__RumusInner {
                fn __rumus_tensor(&self) -> &#tensor {
                    (**self).__rumus_tensor()
                }
            }
        }
    });
    quote!(#(#items)*)
}
