//! `#[model]` on an impl block: DSL methods (tensor parameters annotated with shapes) become
//! shape-checked typed methods that can call the struct's layers; other items pass through.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{ImplItem, ItemStruct, Token, Type};

use super::expand_struct::{const_params, impl_params, model_layers};
use crate::dsl::{self, ast::TensorFn};
use crate::shape::{dim_from_ident, is_generic_dim};

/// One item of the impl block.
enum Item {
    Dsl(Box<TensorFn>),
    Rust(Box<ImplItem>),
}

/// `{ struct ... } impl Name { ... }`, as the hidden table hands it over.
pub struct ModelImpl {
    structure: ItemStruct,
    /// The impl's own parameters (`impl<const C: usize> Block<C>`), with its where clause.
    generics: syn::Generics,
    self_ty: Type,
    items: Vec<Item>,
}

impl Parse for ModelImpl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let content;
        syn::braced!(content in input);
        let structure: ItemStruct = content.parse()?;
        input.call(syn::Attribute::parse_outer)?;
        input.parse::<Token![impl]>()?;
        let mut generics: syn::Generics = input.parse()?;
        let self_ty: Type = input.parse()?;
        generics.where_clause = input.parse()?;
        let body;
        syn::braced!(body in input);
        let mut items = Vec::new();
        while !body.is_empty() {
            match body.parse::<ImplItem>()? {
                // The DSL is not Rust syntax (`[B, 784]` shapes, `@`), so an impl holds it
                // inside `tensor_fn! { ... }`, which is valid in item position.
                ImplItem::Macro(m) if m.mac.path.is_ident("tensor_fn") => {
                    let functions = syn::parse::Parser::parse2(
                        |stream: ParseStream| {
                            let mut functions = Vec::new();
                            while !stream.is_empty() {
                                functions.push(Item::Dsl(Box::new(stream.parse::<TensorFn>()?)));
                            }
                            Ok(functions)
                        },
                        m.mac.tokens,
                    )?;
                    items.extend(functions);
                }
                other => items.push(Item::Rust(Box::new(other))),
            }
        }
        Ok(ModelImpl {
            structure,
            generics,
            self_ty,
            items,
        })
    }
}

/// `impl Forward<In> for Model` for a `forward` method with one tensor parameter (and no
/// other), so a model can be a layer of another model.
fn forward_impl(self_ty: &Type, impl_generics: &syn::Generics, function: &TensorFn) -> TokenStream {
    if function.name != "forward"
        || function.params.len() != 1
        || !function.context.is_empty()
        || !function.has_self
    {
        return TokenStream::new();
    }
    let param = &function.params[0];
    let to_type = |shape: &dsl::ast::ShapeAst| {
        let dims = shape.dims.iter().map(|d| match d {
            dsl::ast::DimAst::Lit(n) => quote!(::rumus::D<#n>),
            dsl::ast::DimAst::Name(name) => dim_from_ident(&name.to_string()).to_type(),
            dsl::ast::DimAst::Infer(_) => quote!(::rumus::Dyn),
        });
        quote!((#(#dims,)*))
    };
    let (input, output) = (to_type(&param.shape), to_type(&function.ret));
    let element = param.element_type();
    let mut generics: Vec<syn::Ident> = function.generics.clone();
    for d in &param.shape.dims {
        if let dsl::ast::DimAst::Name(n) = d
            && is_generic_dim(&n.to_string())
            && !generics.contains(n)
        {
            generics.push(n.clone());
        }
    }
    let dims: Vec<TokenStream> = generics.iter().map(|g| quote!(#g: ::rumus::Dim)).collect();
    let Type::Path(path) = self_ty else {
        return TokenStream::new();
    };
    let Some(model) = path.path.segments.last().map(|s| &s.ident) else {
        return TokenStream::new();
    };
    let written = dsl::arguments::written(param);
    super::input_contract::forward_through_contract(&super::input_contract::InputContract {
        model,
        self_ty: quote!(#self_ty),
        generics: impl_generics,
        dims,
        input,
        element,
        output,
        written,
    })
}

pub fn expand(model: ModelImpl) -> syn::Result<TokenStream> {
    let impl_names: Vec<String> = model
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect();
    let struct_names: Vec<String> = model
        .structure
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect();
    if impl_names != struct_names {
        let structure = &model.structure.ident;
        let written = |names: &[String]| format!("<{}>", names.join(", "));
        return Err(syn::Error::new_spanned(
            &model.self_ty,
            format!(
                "a `#[model]` impl names the struct's generic parameters as the struct does: the struct is `{structure}{}` but the impl declares `impl{}`; the field types and the forward methods' shapes are read with the struct's names",
                written(&struct_names),
                written(&impl_names)
            ),
        ));
    }
    crate::shape::with_const_params(const_params(&model.structure.generics), || {
        expand_in_scope(model)
    })
}

fn expand_in_scope(mut model: ModelImpl) -> syn::Result<TokenStream> {
    let owner = match &model.self_ty {
        Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    };
    for item in &mut model.items {
        if let Item::Dsl(function) = item {
            function.owner = owner.clone();
        }
    }
    let companions: Vec<TokenStream> = model
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Dsl(function) => Some(dsl::companions(function)),
            Item::Rust(_) => None,
        })
        .collect();
    let self_ty = &model.self_ty;
    let Ok(layers) = model_layers(&model.structure) else {
        // `#[model]` on the struct reported the field already; keep the methods' signatures
        // so callers type-check and that error is the only one.
        let items = model.items.iter().map(|item| match item {
            Item::Dsl(function) => dsl::stub(function),
            Item::Rust(item) => quote!(#item),
        });
        let (params, where_clause) = (
            impl_params(&model.generics, &[]),
            &model.generics.where_clause,
        );
        return Ok(quote!(impl #params #self_ty #where_clause { #(#items)* } #(#companions)*));
    };
    let mut methods = Vec::new();
    let mut extra = Vec::new();
    for item in &model.items {
        match item {
            Item::Dsl(function) => {
                methods.push(dsl::expand(function, &layers));
                extra.push(forward_impl(self_ty, &model.generics, function));
            }
            Item::Rust(item) => methods.push(quote!(#item)),
        }
    }
    let (params, where_clause) = (
        impl_params(&model.generics, &[]),
        &model.generics.where_clause,
    );
    Ok(quote! {
        impl #params #self_ty #where_clause {
            #(#methods)*
        }
        #(#extra)*
        #(#companions)*
    })
}
