//! `#[model]` on a struct: `Module`, `Display`, `new()`, the hidden table for the impl, and for
//! `#[model(sequential)]` a forward pass with the layer chain checked at expansion time.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::{Fields, GenericParam, Generics, ItemStruct};

use super::field_type::checkpointed_inner;
use super::layers::{ConvFamily, FIELD_ATTRIBUTES, Layer, LayerKind};
use crate::shape::{Dim, Same};

/// Options of `#[model(...)]` on a struct.
#[derive(Default)]
pub struct ModelOptions {
    /// Generate `forward` as a chain of the Linear fields.
    pub sequential: bool,
    /// Activation applied between chained layers (`relu`, `tanh`, ...).
    pub activation: Option<syn::Ident>,
}

impl ModelOptions {
    pub fn parse(args: TokenStream) -> syn::Result<Self> {
        let mut options = ModelOptions::default();
        let parser = syn::meta::parser(|meta| {
            if meta.path.is_ident("sequential") {
                options.sequential = true;
                Ok(())
            } else if meta.path.is_ident("activation") {
                options.activation = Some(meta.value()?.parse()?);
                Ok(())
            } else {
                Err(meta.error("unknown #[model] option; use `sequential` and `activation = relu`"))
            }
        });
        syn::parse::Parser::parse2(parser, args)?;
        Ok(options)
    }
}

fn is_skipped(field: &syn::Field) -> bool {
    field.attrs.iter().any(|a| a.path().is_ident("skip"))
}

/// The model's layers (fields not marked `#[skip]`), read from the struct. A tuple struct's
/// fields are named `0`, `1`, ... in state dicts, as PyTorch's `nn.Sequential` names its
/// children.
pub fn model_layers(item: &ItemStruct) -> syn::Result<Vec<Layer>> {
    if matches!(item.fields, Fields::Unit) {
        return Err(syn::Error::new_spanned(
            &item.ident,
            "#[model] needs a struct with fields (named, or a tuple struct)",
        ));
    }
    item.fields
        .iter()
        .enumerate()
        .filter(|(_, f)| !is_skipped(f))
        .map(|(index, f)| Layer::from_field(index, f))
        .collect()
}

/// The const generic parameters of a struct (`C` of `struct Block<const C: usize>`), which
/// the shape checker reads as consts in its field types and forward methods.
pub fn const_params(generics: &Generics) -> Vec<String> {
    generics
        .const_params()
        .map(|p| p.ident.to_string())
        .collect()
}

pub fn expand(options: ModelOptions, item: ItemStruct) -> syn::Result<TokenStream> {
    crate::shape::with_const_params(const_params(&item.generics), || {
        expand_in_scope(options, item)
    })
}

/// `<P1, P2, extra..>`: the struct's parameters with their bounds (defaults dropped, as an
/// impl needs them), followed by `extra`.
pub fn impl_params(generics: &Generics, extra: &[TokenStream]) -> TokenStream {
    let own = generics.params.iter().map(|param| match param {
        GenericParam::Type(t) => {
            let mut t = t.clone();
            t.default = None;
            quote!(#t)
        }
        GenericParam::Const(c) => {
            let mut c = c.clone();
            c.default = None;
            quote!(#c)
        }
        GenericParam::Lifetime(l) => quote!(#l),
    });
    let all: Vec<TokenStream> = own.chain(extra.iter().cloned()).collect();
    if all.is_empty() {
        TokenStream::new()
    } else {
        quote!(<#(#all),*>)
    }
}

/// The struct's where clause with `bound` added for each of its type parameters (`L:
/// Module` for a model generic over a layer type), and `extra` predicates after.
pub fn where_bounded(
    generics: &Generics,
    bound: TokenStream,
    extra: &[TokenStream],
) -> TokenStream {
    let own = generics
        .where_clause
        .iter()
        .flat_map(|w| w.predicates.iter().map(|p| quote!(#p)));
    let bounded = generics.type_params().map(|t| {
        let ident = &t.ident;
        quote!(#ident: #bound)
    });
    let all: Vec<TokenStream> = own
        .chain(if bound.is_empty() {
            Vec::new()
        } else {
            bounded.collect()
        })
        .chain(extra.iter().cloned())
        .collect();
    if all.is_empty() {
        TokenStream::new()
    } else {
        quote!(where #(#all),*)
    }
}

fn expand_in_scope(options: ModelOptions, item: ItemStruct) -> syn::Result<TokenStream> {
    let name = &item.ident;
    let generics = &item.generics;
    let (_, ty_generics, _) = generics.split_for_impl();
    let impl_generics = impl_params(generics, &[]);
    let module_where = where_bounded(generics, quote!(::rumus::nn::Module), &[]);
    let construct_where = where_bounded(generics, quote!(::rumus::nn::Construct), &[]);
    let type_params: Vec<syn::Ident> = generics.type_params().map(|t| t.ident.clone()).collect();
    let name_str = name.to_string();
    let mut clean = item.clone();
    for field in clean.fields.iter_mut() {
        field
            .attrs
            .retain(|a| !FIELD_ATTRIBUTES.iter().any(|name| a.path().is_ident(name)));
    }
    let table_macro = table(&item);
    let layers = match model_layers(&item) {
        Ok(layers) => layers,
        // A field the macro rejects: the struct, its table and stand-ins for what `#[model]`
        // gives it stay, so this error is the only one (the impl's forward methods expand to
        // stubs, and callers of `new()` or of `Module` methods still type-check).
        Err(error) => {
            let error = error.to_compile_error();
            return Ok(quote! {
                #error
                #clean
                impl #impl_generics ::rumus::nn::Module for #name #ty_generics #module_where {
                    fn visit(&self, _: &str, _: &mut dyn FnMut(&str, &::rumus::DynTensor)) {}
                    fn describe(&self) -> ::std::string::String {
                        ::std::string::String::from(#name_str)
                    }
                }
                impl #impl_generics #name #ty_generics #construct_where {
                    #[allow(dead_code)]
                    pub fn new() -> ::rumus::Result<Self> {
                        ::core::unreachable!("the struct did not expand")
                    }
                }
                #table_macro
            });
        }
    };
    // Checks naming a const parameter run where the parameters have values: in `new()`.
    let (checks_in_new, declaration_checks): (Vec<&TokenStream>, Vec<&TokenStream>) = layers
        .iter()
        .flat_map(|l| l.checks.iter())
        .partition(|check| crate::shape::is_statement(check));

    let visits = layers.iter().map(|l| {
        let (field, key) = (&l.member, &l.key);
        match l.kind {
            LayerKind::Parameter { .. } => quote!(f(&::std::format!("{prefix}{}", #key), self.#field.as_dyn());),
            _ => quote!(::rumus::nn::Module::visit(&self.#field, &::std::format!("{prefix}{}.", #key), f);),
        }
    });
    let modules: Vec<&Layer> = layers
        .iter()
        .filter(|l| !matches!(l.kind, LayerKind::Parameter { .. }))
        .collect();
    let buffer_visits = modules.iter().map(|l| {
        let (field, key) = (&l.member, &l.key);
        quote!(::rumus::nn::Module::visit_buffers(&self.#field, &::std::format!("{prefix}{}.", #key), f);)
    });
    let set_training = modules.iter().map(|l| {
        let field = &l.member;
        quote!(::rumus::nn::Module::set_training(&self.#field, training);)
    });
    let training = modules.iter().map(|l| {
        let field = &l.member;
        quote!(.or_else(|| ::rumus::nn::Module::training(&self.#field)))
    });
    let children = modules.iter().map(|l| {
        let (field, key) = (&l.member, &l.key);
        quote!((#key, &self.#field as &dyn ::rumus::nn::Module))
    });
    let mut layers_in_order = layers.iter();
    let inits = item.fields.iter().map(|f| {
        let ty = &f.ty;
        let value = if is_skipped(f) {
            quote!(::core::default::Default::default())
        } else {
            let layer = layers_in_order
                .next()
                .expect("every unskipped field is a layer");
            layer_init(layer, ty, &type_params)
        };
        match &f.ident {
            Some(field) => quote!(#field: #value),
            None => value,
        }
    });
    let construct = match &item.fields {
        Fields::Unnamed(_) => quote!(Self(#(#inits),*)),
        _ => quote!(Self { #(#inits),* }),
    };
    let sequential = if options.sequential {
        sequential_forward(&item, &layers, options.activation.as_ref())?
    } else if matches!(item.fields, Fields::Unnamed(_)) {
        tuple_forward(&item, &layers)
    } else {
        TokenStream::new()
    };

    Ok(quote! {
        #clean

        #(#declaration_checks)*

        impl #impl_generics ::rumus::nn::Module for #name #ty_generics #module_where {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &::rumus::DynTensor)) {
                #(#visits)*
            }
            fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &::rumus::DynTensor)) {
                #(#buffer_visits)*
                let _ = (prefix, f);
            }
            fn set_training(&self, training: bool) {
                #(#set_training)*
                let _ = training;
            }
            fn training(&self) -> ::core::option::Option<bool> {
                ::core::option::Option::None #(#training)*
            }
            fn describe(&self) -> ::std::string::String {
                ::std::string::String::from(#name_str)
            }
            fn children(&self) -> ::std::vec::Vec<(&'static str, &dyn ::rumus::nn::Module)> {
                ::std::vec![#(#children),*]
            }
        }

        impl #impl_generics ::core::fmt::Display for #name #ty_generics #module_where {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                ::core::writeln!(f, "{}", ::rumus::nn::Module::summary(self, #name_str))?;
                ::core::write!(f, "Trainable parameters: {}", ::rumus::nn::group_digits(::rumus::nn::Module::num_parameters(self)))
            }
        }

        impl #impl_generics #name #ty_generics #construct_where {
            /// Builds the model with every layer initialised from the global generator
            /// (`rumus::manual_seed`).
            pub fn new() -> ::rumus::Result<Self> {
                #(#checks_in_new)*
                ::core::result::Result::Ok(#construct)
            }
        }

        impl #impl_generics ::rumus::nn::Construct for #name #ty_generics #construct_where {
            fn construct() -> ::rumus::Result<Self> {
                Self::new()
            }
        }

        #sequential

        #table_macro
    })
}

/// The hidden `macro_rules!` table that hands the struct to `#[model]` on its impl.
fn table(item: &ItemStruct) -> TokenStream {
    let table = format_ident!("__rumus_model_{}", item.ident);
    quote! {
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #table {
            ($($item:tt)*) => {
                ::rumus::__private::model_impl! { { #item } $($item)* }
            };
        }
        #[allow(unused_imports)]
        pub(crate) use #table;
    }
}

/// The expression that builds `layer`, of type `ty`, from the global generator; a
/// `Checkpointed<T>` field wraps the `T` built as a field of its own type would be.
fn layer_init(layer: &Layer, ty: &syn::Type, type_params: &[syn::Ident]) -> TokenStream {
    if let syn::Type::Path(path) = ty
        && path
            .path
            .get_ident()
            .is_some_and(|ident| type_params.contains(ident))
    {
        return quote_spanned!(layer.type_span=> <#ty as ::rumus::nn::Construct>::construct()?);
    }
    match checkpointed_inner(ty) {
        Some(inner) => {
            let init = layer_init(layer, inner, type_params);
            quote_spanned!(layer.type_span=> ::rumus::nn::Checkpointed::new(#init))
        }
        None => unwrapped_layer_init(layer, ty),
    }
}

fn unwrapped_layer_init(layer: &Layer, ty: &syn::Type) -> TokenStream {
    let span = layer.type_span;
    match &layer.kind {
        LayerKind::Conv {
            family, options, ..
        } => {
            let (s, p, d, g, o) = (
                options.stride,
                options.padding,
                options.dilation,
                options.groups,
                options.output_padding,
            );
            let build = match family {
                ConvFamily::Conv2d => quote_spanned!(span=> <#ty>::with_groups(#s, #p, #d, #g)?),
                ConvFamily::Conv1d => quote_spanned!(span=> <#ty>::with_options(#s, #p, #d)?),
                ConvFamily::Transposed2d => {
                    quote_spanned!(span=> <#ty>::with_options(#s, #p, #o)?)
                }
            };
            let without_bias = (!options.bias).then(|| quote!(.without_bias()));
            quote!(#build #without_bias)
        }
        LayerKind::Parameter { .. } => {
            quote_spanned!(span=> <#ty>::zeros().requires_grad_()?)
        }
        LayerKind::Pool {
            kernel,
            stride,
            padding,
            ..
        } => quote_spanned! {span=> {
            let mut pool = <#ty>::new(#kernel);
            pool.stride = #stride;
            pool.padding = #padding;
            pool
        }},
        LayerKind::AdaptivePool { output: (oh, ow) } => quote_spanned!(span=> <#ty>::new(#oh, #ow)),
        LayerKind::Flatten => quote_spanned!(span=> <#ty>::new()),
        LayerKind::ShapePreserving if layer.type_name == "Dropout" => {
            let p = layer.dropout.unwrap_or(0.5);
            quote_spanned!(span=> <#ty>::new(#p)?)
        }
        LayerKind::Attention { block, .. } => match layer.dropout {
            Some(p) if *block => {
                quote_spanned!(span=> <#ty>::with_options(#p, ::core::default::Default::default())?)
            }
            Some(p) => quote_spanned!(span=> <#ty>::with_options(#p, true)?),
            None => quote_spanned!(span=> <#ty>::new()?),
        },
        _ => quote_spanned!(span=> <#ty>::new()?),
    }
}

/// `forward` for a chain of Linear layers; each layer's input must be its predecessor's output,
/// and a mismatch is reported on the field that does not fit.
fn sequential_forward(
    item: &ItemStruct,
    layers: &[Layer],
    activation: Option<&syn::Ident>,
) -> syn::Result<TokenStream> {
    let name = &item.ident;
    let (_, ty_generics, _) = item.generics.split_for_impl();
    let impl_generics = impl_params(&item.generics, &[]);
    let where_clause = where_bounded(&item.generics, TokenStream::new(), &[]);
    let mut chain = Vec::new();
    for layer in layers {
        match &layer.kind {
            LayerKind::Linear { input, output } => {
                chain.push((layer, input.clone(), output.clone()))
            }
            _ => {
                return Err(syn::Error::new(
                    layer.type_span,
                    format!(
                        "`#[model(sequential)]` chains Linear layers, but `{}` is not one; write the forward pass in a `#[model] impl` instead",
                        layer.name
                    ),
                ));
            }
        }
    }
    let Some(first) = chain.first() else {
        return Err(syn::Error::new_spanned(
            name,
            "a sequential model needs at least one Linear layer",
        ));
    };
    let mut checks = Vec::new();
    for pair in chain.windows(2) {
        let ((prev, _, produced), (next, expected, next_out)) = (&pair[0], &pair[1]);
        match expected.same(produced) {
            Same::Yes | Same::Runtime => {}
            Same::Unknown => {
                let message = format!(
                    "layer `{}` takes [B, {expected}] but `{}` produces [B, {produced}]",
                    next.name, prev.name
                );
                checks.push(crate::shape::deferred_check(
                    next.type_span,
                    expected,
                    produced,
                    &message,
                ));
            }
            Same::No => {
                return Err(syn::Error::new(
                    next.type_span,
                    format!(
                        "layer `{}` takes [B, {expected}] but `{}` produces [B, {produced}]\n  help: declare `{}: Linear<{produced}, {next_out}>`",
                        next.name, prev.name, next.name
                    ),
                ));
            }
        }
    }
    let (input, output) = (first.1.clone(), chain.last().expect("non-empty").2.clone());
    let (in_ty, out_ty) = (Dim::to_type(&input), Dim::to_type(&output));
    let steps = chain.iter().enumerate().map(|(i, (layer, _, out))| {
        let out_ty = out.to_type();
        let act = match (activation, i + 1 < chain.len()) {
            (Some(act), true) => quote!(.#act()?),
            _ => quote!(),
        };
        let call = layer.call(
            &[quote!(h.as_dyn())],
            |layer, x| quote!(#layer.forward_dyn(#(#x),*)),
        );
        quote!(let h: ::rumus::Tensor<(B, #out_ty)> = ::rumus::__private::wrap(#call?#act);)
    });
    let forward =
        super::input_contract::forward_through_contract(&super::input_contract::InputContract {
            model: name,
            self_ty: quote!(#name #ty_generics),
            generics: &item.generics,
            dims: vec![quote!(B: ::rumus::Dim)],
            input: quote!((B, #in_ty)),
            element: quote!(f32),
            output: quote!((B, #out_ty)),
            written: format!("[B, {input}]"),
        });
    Ok(quote! {
        impl #impl_generics #name #ty_generics #where_clause {
            /// The layers applied in declaration order.
            pub fn forward<B: ::rumus::Dim>(&self, x: &::rumus::Tensor<(B, #in_ty)>) -> ::rumus::Result<::rumus::Tensor<(B, #out_ty)>> {
                #(#checks)*
                let h: ::rumus::Tensor<(B, #in_ty)> = x.clone();
                #(#steps)*
                ::core::result::Result::Ok(h)
            }
        }

        #forward
    })
}

/// A tuple struct's forward pass, as PyTorch's `nn.Sequential` runs its children: each field
/// fed the previous one's output, through [`Forward`](rumus::nn::Forward), so the type
/// system checks the chain where the model is used. Tuple structs whose fields cannot chain
/// (a parameter tensor, a graph layer that needs its graph) get none.
fn tuple_forward(item: &ItemStruct, layers: &[Layer]) -> TokenStream {
    let chainable = layers.iter().all(|l| {
        !matches!(
            l.kind,
            LayerKind::Parameter { .. } | LayerKind::Graph { .. }
        )
    });
    let Some(last_index) = layers.len().checked_sub(1).filter(|_| chainable) else {
        return TokenStream::new();
    };
    let name = &item.ident;
    let (_, ty_generics, _) = item.generics.split_for_impl();
    let fields: Vec<&syn::Type> = item
        .fields
        .iter()
        .filter(|f| !is_skipped(f))
        .map(|f| &f.ty)
        .collect();
    let forward = quote!(::rumus::nn::Forward);
    // `Forward<In>` of each field, `In` being the previous field's output.
    let mut inputs = vec![quote!(__S, __E)];
    for (i, ty) in fields.iter().enumerate().take(last_index) {
        let previous = &inputs[i];
        inputs.push(quote!(<#ty as #forward<#previous>>::Out));
    }
    let bounds: Vec<TokenStream> = fields
        .iter()
        .zip(&inputs)
        .map(|(ty, input)| quote!(#ty: #forward<#input>))
        .collect();
    let (last_ty, last_input) = (fields[last_index], &inputs[last_index]);
    let steps = layers
        .iter()
        .zip(fields.iter().zip(&inputs))
        .enumerate()
        .map(|(i, (layer, (ty, input)))| {
            let (member, key) = (&layer.member, &layer.key);
            let argument = if i == 0 { quote!(x) } else { quote!(&h) };
            quote!(let h = ::rumus::__private::in_field(#key, || <#ty as #forward<#input>>::forward_typed(&self.#member, #argument))?;)
        });
    let generics = impl_params(
        &item.generics,
        &[
            quote!(__S: ::rumus::Shape),
            quote!(__E: ::rumus::element::Element),
        ],
    );
    let where_clause = where_bounded(&item.generics, TokenStream::new(), &bounds);
    let method_generics = impl_params(&item.generics, &[]);
    let method_where = where_bounded(&item.generics, TokenStream::new(), &[]);
    quote! {
        impl #generics #forward<__S, __E> for #name #ty_generics #where_clause {
            type Out = <#last_ty as #forward<#last_input>>::Out;
            fn forward_typed(&self, x: &::rumus::Tensor<__S, __E>) -> ::rumus::Result<::rumus::Tensor<Self::Out>> {
                #(#steps)*
                ::core::result::Result::Ok(h)
            }
        }

        impl #method_generics #name #ty_generics #method_where {
            /// The fields applied in order, each to the previous one's output (PyTorch's
            /// `nn.Sequential`).
            pub fn forward<__S: ::rumus::Shape, __E: ::rumus::element::Element>(
                &self,
                x: &::rumus::Tensor<__S, __E>,
            ) -> ::rumus::Result<::rumus::Tensor<<Self as #forward<__S, __E>>::Out>>
            where
                Self: #forward<__S, __E>,
            {
                #forward::<__S, __E>::forward_typed(self, x)
            }
        }
    }
}
