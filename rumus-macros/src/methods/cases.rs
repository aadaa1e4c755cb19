//! The agreement test of the table, generated from it: for every method of the typed
//! `Tensor` (entries [`Typed::Generated`] and [`Typed::Written`]), a `tensor_fn!` that calls
//! it and a `#[test]` that calls it on the typed API too, then checks that both results have
//! one type, the dims this file expects of the rule, and equal values. The expected dims are
//! written here per rule, independently of the DSL's shape inference and of the typed
//! signatures, so both are checked against them.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{format_ident, quote};

use super::{METHODS, Method, Rule, Typed};

/// One call of a method on small inputs.
struct Case {
    /// The inputs' names and dims; the first is the receiver `x`.
    inputs: Vec<(&'static str, Vec<usize>)>,
    /// The call inside `tensor_fn!`.
    dsl: TokenStream,
    /// The call on the typed API.
    typed: TokenStream,
    /// The dims of the result.
    out: Vec<usize>,
}

/// The tests, plus `TABLE_METHODS`: the names of the typed methods in the table, for the
/// test that checks rumus's `impl Tensor` blocks against it.
pub fn expand() -> TokenStream {
    let typed: Vec<&Method> = METHODS.iter().filter(|m| m.typed != Typed::No).collect();
    let names = typed.iter().map(|m| m.name);
    let mut functions = Vec::new();
    let mut tests = Vec::new();
    for m in &typed {
        let Some(case) = case(m) else {
            let message = format!(
                "no agreement test is written for rule {:?} (method `{}`); add a case in rumus-macros/src/methods/cases.rs",
                m.rule, m.name
            );
            return syn::Error::new(Span::call_site(), message).to_compile_error();
        };
        let name = format_ident!("{}", m.name);
        let test = format_ident!("{}_agrees_with_tensor_fn", m.name);
        let params = case.inputs.iter().map(|(input, dims)| {
            let input = format_ident!("{}", input);
            quote!(#input: [#(#dims),*])
        });
        let (out, dsl) = (&case.out, &case.dsl);
        functions.push(quote! {
            pub fn #name(#(#params),*) -> [#(#out),*] { #dsl }
        });
        let bindings = case.inputs.iter().enumerate().map(|(k, (input, dims))| {
            let input = format_ident!("{}", input);
            let ty = shape_type(dims);
            quote!(let #input = __input::<#ty>(#k);)
        });
        let args = case.inputs.iter().map(|(input, _)| {
            let input = format_ident!("{}", input);
            quote!(&#input)
        });
        let (method, typed_call) = (m.name, &case.typed);
        tests.push(quote! {
            #[test]
            fn #test() {
                #(#bindings)*
                let typed = #typed_call;
                let dsl = __dsl::#name(#(#args),*).unwrap();
                __agree(#method, &typed, &dsl, &[#(#out),*]);
            }
        });
    }
    quote! {
        /// The methods of the typed `Tensor` in the method table, in table order.
        const TABLE_METHODS: &[&str] = &[#(#names),*];

        mod __dsl {
            ::rumus::tensor_fn! { #(#functions)* }
        }

        /// Input `k` of a case: positive values (in the domain of `log`, `sqrt`, ...), each
        /// input different.
        fn __input<S: ::rumus::StaticShape>(k: usize) -> ::rumus::Tensor<S> {
            let n: usize = S::dims().iter().product();
            let values = (0..n)
                .map(|i| (i + 1) as f32 / (n + 1) as f32 + 0.1 * k as f32)
                .collect();
            ::rumus::Tensor::from_vec(values).unwrap()
        }

        /// Both results have one type (the signature), the expected dims and equal values.
        fn __agree<S: ::rumus::Shape>(
            method: &str,
            typed: &::rumus::Tensor<S>,
            dsl: &::rumus::Tensor<S>,
            dims: &[usize],
        ) {
            assert_eq!(typed.dims(), dims, "`{method}` on the typed API");
            assert_eq!(dsl.dims(), dims, "`{method}` in tensor_fn!");
            assert_eq!(
                typed.to_vec().unwrap(),
                dsl.to_vec().unwrap(),
                "`{method}`: the typed API and tensor_fn! computed different values"
            );
        }

        #(#tests)*
    }
}

/// The case of a method, from its rule; `None` for rules without one (the DSL-only ones).
fn case(m: &Method) -> Option<Case> {
    let name = format_ident!("{}", m.name);
    let x = |dims: &[usize]| vec![("x", dims.to_vec())];
    let same = |call: TokenStream| Case {
        inputs: x(&[2, 3]),
        dsl: call.clone(),
        typed: call,
        out: vec![2, 3],
    };
    Some(match m.rule {
        Rule::Same | Rule::SameInfallible => same(quote!(x.#name())),
        Rule::Scalars(names) => {
            let values = [0.5, 0.75][..names.len()]
                .iter()
                .map(|&v| Literal::f64_unsuffixed(v));
            same(quote!(x.#name(#(#values),*)))
        }
        Rule::AlongAxis => Case {
            dsl: quote!(x.#name(-1)),
            ..same(quote!(x.#name()))
        },
        Rule::ReduceAll => Case {
            out: vec![],
            ..same(quote!(x.#name()))
        },
        Rule::Binary(_) => Case {
            inputs: vec![("x", vec![2, 3]), ("y", vec![3])],
            dsl: quote!(x.#name(y)),
            typed: quote!(x.#name(&y)),
            out: vec![2, 3],
        },
        Rule::Product { rank } => {
            let batch = vec![2; rank.unwrap_or(2) - 2];
            let dims = |tail: [usize; 2]| [batch.clone(), tail.to_vec()].concat();
            Case {
                inputs: vec![("x", dims([2, 3])), ("y", dims([3, 4]))],
                dsl: quote!(x.#name(y)),
                typed: quote!(x.#name(&y)),
                out: dims([2, 4]),
            }
        }
        Rule::Linear => Case {
            inputs: vec![("x", vec![2, 3]), ("w", vec![4, 3]), ("b", vec![4])],
            dsl: quote!(x.#name(w, b)),
            typed: quote!(x.#name(&w, Some(&b))),
            out: vec![2, 4],
        },
        Rule::MatrixTranspose => Case {
            out: vec![3, 2],
            ..same(quote!(x.#name()))
        },
        Rule::Reshape => {
            let ty = shape_type(&[3, 2]);
            Case {
                inputs: x(&[2, 3]),
                dsl: quote!(x.#name([3, 2])),
                typed: quote!(x.#name::<#ty>().unwrap()),
                out: vec![3, 2],
            }
        }
        _ => return None,
    })
}

/// The shape type of static `dims`: `(D<2>, D<3>,)`.
fn shape_type(dims: &[usize]) -> TokenStream {
    quote!((#(::rumus::D<#dims>,)*))
}
