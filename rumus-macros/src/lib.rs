//! Procedural macros of rumus: `#[model]` and `tensor_fn!`.
//!
//! Both compute every tensor shape at expansion time. A mismatch becomes a `compile_error!`
//! spanned on the offending operand or field, written in shapes (`[B, 784]`), never in types.
//! The generated code is ordinary typed rumus code, one statement per op, keeping the user's
//! spans, so whatever the type system still checks lands on the right line.
//!
//! Layout, in the order the macros run: [`dsl::parse`] (syntax) -> [`dsl::lower`] (shape
//! inference + emission) for `tensor_fn!`; [`model::expand_struct`] and
//! [`model::expand_impl`] for `#[model]`. The tensor methods both understand, and the typed
//! `Tensor` methods generated from the same list, are one table: [`methods`].

use proc_macro::TokenStream;
use syn::parse::Parser;

mod dsl;
mod methods;
mod model;
mod shape;

/// Shape-checked tensor functions.
///
/// ```ignore
/// tensor_fn! {
///     /// Scaled dot-product attention scores.
///     pub fn scores(q: [B, T, 64], k: [B, T, 64]) -> [B, T, T] {
///         let s = q @ k.transpose(1, 2);
///         (s * 0.125).softmax(-1)
///     }
/// }
/// ```
///
/// Tensor methods are those of the typed `Tensor` (`x.relu()`, `x.powf(2.0)`, `x.matmul(y)`,
/// `x.linear(w, b)`, `x.t()`, `x.reshape([B, 8, 64])`; `x.softmax(axis)` names its axis) and
/// the views and reductions only the DSL can type (`x.sum(1)`, `x.transpose(1, 2)`,
/// `x.permute([0, 2, 1])`, `x.split_heads(8)`, ...).
///
/// Parameters and the return value carry shapes in brackets: literal sizes, runtime dims
/// (single capital letters such as `B` become generic parameters; `CamelCase` names are dim
/// types declared with `rumus::dim!`), and consts (`HIDDEN`). The generated function takes
/// `&Tensor<...>` arguments and returns `rumus::Result<Tensor<...>>`; runtime dims used by
/// several parameters are checked once on entry.
#[proc_macro]
pub fn tensor_fn(input: TokenStream) -> TokenStream {
    let parser = |stream: syn::parse::ParseStream| {
        let mut functions = Vec::new();
        while !stream.is_empty() {
            functions.push(stream.parse::<dsl::ast::TensorFn>()?);
        }
        Ok(functions)
    };
    match parser.parse(input) {
        Ok(functions) => functions
            .iter()
            .map(|f| {
                let (companions, function) = (dsl::companions(f), dsl::expand(f, &[]));
                quote::quote!(#companions #function)
            })
            .collect::<proc_macro2::TokenStream>()
            .into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// A model: on a struct of layers it implements `Module`, `Display`, `new()`; on the struct's
/// `impl` it turns shape-annotated methods into checked forward passes.
///
/// Struct options: `#[model(sequential, activation = relu)]` generates `forward` as the chain
/// of the struct's `Linear` fields and checks the chain.
///
/// Every layer of `rumus::nn` is known to the shape checker, so forward methods need no shape
/// annotations: `Linear`, `Conv1d`/`Conv2d`/`ConvTranspose2d`, `BatchNorm1d/2d`, `LayerNorm`,
/// `RmsNorm`, `GroupNorm`, `Embedding` (i64 indices), `MultiheadAttention` (`self.attn(x)`,
/// `self.attn(q, k, v)`, a trailing `causal`), `TransformerEncoderBlock` (`self.block(x)`,
/// `self.block(x, causal)`), `Lstm`, `Gru`, `MaxPool2d`/`AvgPool2d`, `AdaptiveAvgPool2d`,
/// `Flatten`, `Dropout`, the activation modules, and the graph layers `GcnConv`, `SageConv`,
/// `GinConv`, `GatConv` (`self.conv(x, graph)` on node features `[N, IN]`, with `graph: &Graph`
/// a parameter of the function: parameters written with a reference type are not tensors
/// and pass through unchecked); parameter fields
/// (`w: Tensor<(D<10>, D<784>)>`) are values (`x @ self.w.t()`). Dims in field types are
/// literals or consts (`Linear<784, HIDDEN>`, `Linear<784, { config::HIDDEN }>`).
/// Convolutions and pools keep runtime spatial dims: a "same" window passes `H` through, any
/// other gives a size computed at run time (checked against a declared result when the
/// function runs).
///
/// Field attributes: `#[conv(stride = 2, padding = 1, dilation = 1, groups = 1,
/// output_padding = 0, bias = false, exact)]` on convolutions; `#[pool(kernel = 2, stride = 2,
/// padding = 0, exact)]` on `MaxPool2d`/`AvgPool2d` (required: the window), `#[pool(output =
/// 1)]` or `#[pool(output = [2, 3])]` on `AdaptiveAvgPool2d`; `#[dropout(p = 0.1)]` on
/// `Dropout` (default 0.5), `MultiheadAttention` and `TransformerEncoderBlock`; `#[skip]` on
/// fields that are not modules (they are initialised with `Default`).
#[proc_macro_attribute]
pub fn model(args: TokenStream, input: TokenStream) -> TokenStream {
    let input2: proc_macro2::TokenStream = input.clone().into();
    let result = if let Ok(item) = syn::parse2::<syn::ItemStruct>(input2.clone()) {
        model::expand_struct::ModelOptions::parse(args.into())
            .and_then(|options| model::expand_struct::expand(options, item))
    } else {
        expand_impl_attribute(input2)
    };
    result.unwrap_or_else(|e| e.to_compile_error()).into()
}

/// `#[model] impl Name { ... }` becomes a call of the table `#[model]` left next to `Name`.
fn expand_impl_attribute(input: proc_macro2::TokenStream) -> syn::Result<proc_macro2::TokenStream> {
    // The type's name, past any generic parameters of the impl (`impl<const C: usize> Block<C>`).
    if let Ok(item) = syn::parse2::<syn::ItemImpl>(input.clone())
        && let syn::Type::Path(path) = &*item.self_ty
        && let Some(last) = path.path.segments.last()
    {
        let table = quote::format_ident!("__rumus_model_{}", last.ident);
        return Ok(quote::quote!(#table! { #input }));
    }
    let mut tokens = input
        .clone()
        .into_iter()
        .skip_while(|t| !matches!(t, proc_macro2::TokenTree::Ident(i) if i == "impl"));
    tokens.next();
    let name = tokens
        .find_map(|t| match t {
            proc_macro2::TokenTree::Ident(i) => Some(i),
            _ => None,
        })
        .ok_or_else(|| {
            syn::Error::new(
                proc_macro2::Span::call_site(),
                "#[model] goes on a struct or on `impl StructName { ... }`",
            )
        })?;
    let table = quote::format_ident!("__rumus_model_{}", name);
    Ok(quote::quote!(#table! { #input }))
}

#[doc(hidden)]
#[proc_macro]
pub fn __model_impl(input: TokenStream) -> TokenStream {
    match syn::parse::<model::expand_impl::ModelImpl>(input) {
        Ok(model) => model::expand_impl::expand(model)
            .unwrap_or_else(|e| e.to_compile_error())
            .into(),
        Err(error) => error.to_compile_error().into(),
    }
}

/// The typed methods of the method table ([`methods`]), expanded inside
/// `impl<S: Shape, E: Float> Tensor<S, E>` in rumus.
#[doc(hidden)]
#[proc_macro]
pub fn __typed_methods(_input: TokenStream) -> TokenStream {
    methods::typed::expand().into()
}

/// The test that every typed method of the method table agrees with `tensor_fn!`, and the
/// table's typed method names (`TABLE_METHODS`), expanded in rumus's tests.
#[doc(hidden)]
#[proc_macro]
pub fn __method_cases(_input: TokenStream) -> TokenStream {
    methods::cases::expand().into()
}
