//! The typed methods of the table's [`Typed::Generated`] entries, for
//! `impl<S: Shape, E: Float> Tensor<S, E>`: each a `try_name` returning the run-time error and
//! a `name` panicking with it, both documented with the entry's doc line.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};

use super::{METHODS, Method, Rule, Typed};

/// Every generated method, in table order.
pub fn expand() -> TokenStream {
    METHODS
        .iter()
        .filter_map(|m| match m.typed {
            Typed::Generated(doc) => Some(method(m, doc)),
            Typed::No | Typed::Written => None,
        })
        .collect()
}

/// The two forms of one method. The signature follows from the rule: `Self` for the
/// element-wise rules, `Tensor<(), E>` for a full reduction, the `Elementwise` broadcast
/// for a second tensor.
fn method(m: &Method, doc: &str) -> TokenStream {
    let name = format_ident!("{}", m.name);
    let try_name = format_ident!("try_{}", m.name);
    let doc = format!(" {doc}");
    let scalars: Vec<syn::Ident> = match m.rule {
        Rule::Scalars(names) => names.iter().map(|n| format_ident!("{}", n)).collect(),
        _ => Vec::new(),
    };
    let (generics, params, args, out, bounds, body) = match m.rule {
        Rule::Same | Rule::Scalars(_) => (
            quote!(),
            quote!(#(, #scalars: f64)*),
            quote!(#(#scalars),*),
            quote!(Self),
            quote!(),
            quote!(t.#name(#(#scalars),*)),
        ),
        Rule::AlongAxis => (
            quote!(),
            quote!(),
            quote!(),
            quote!(Self),
            quote!(),
            quote!(t.#name(-1)),
        ),
        Rule::ReduceAll => (
            quote!(),
            quote!(),
            quote!(),
            quote!(Tensor<(), E>),
            quote!(),
            quote!(t.#name()),
        ),
        Rule::Binary(_) => (
            quote!(<R: Shape>),
            quote!(, rhs: &Tensor<R, E>),
            quote!(rhs),
            quote!(Tensor<S::Output, E>),
            quote!(where S: Elementwise<R>),
            quote!(t.#name(&rhs.inner)),
        ),
        other => {
            let message = format!(
                "the method table marks `{}` as generated, but its rule {other:?} has no generated typed form; mark it `written` and write it in rumus",
                m.name
            );
            return syn::Error::new(Span::call_site(), message).to_compile_error();
        }
    };
    quote! {
        #[doc = #doc]
        pub fn #try_name #generics (&self #params) -> Result<#out> #bounds {
            let t = &self.inner;
            Ok(Tensor::wrap(#body?))
        }
        #[doc = #doc]
        #[doc = ""]
        #[doc = " Panics where the `try_` form returns an error."]
        #[track_caller]
        pub fn #name #generics (&self #params) -> #out #bounds {
            proven(self.#try_name(#args))
        }
    }
}
