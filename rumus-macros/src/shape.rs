//! Symbolic shapes: what the macros know about a dim at expansion time, and how it prints in
//! error messages (`[B, 784]`, never as a type).

use std::fmt;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

/// One axis as the macro sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    /// A literal size.
    Lit(usize),
    /// A runtime dim bound by a parameter: a generic (`B`) or a named dim type (`Batch`).
    Var(String),
    /// A const the macro cannot see (`HIDDEN`): its value is known to the type system only.
    Const(String),
    /// A size computed from runtime dims, e.g. `T*64` after a flatten: runtime only.
    Derived { factor: usize, symbols: Vec<String> },
    /// A size some other arithmetic gives at run time, e.g. `(H-1)/2+1` after a strided conv
    /// of a runtime `H`: its type is `Dyn`, and equalities involving it are checked when the
    /// op runs.
    Computed(String),
}

/// Whether two dims are the same axis size, as far as the macro can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Same {
    Yes,
    No,
    /// Involves a const the macro cannot see: the type system decides.
    Unknown,
    /// Involves a size computed at run time: the op checks it when it runs.
    Runtime,
}

impl Dim {
    pub fn lit(&self) -> Option<usize> {
        match self {
            Dim::Lit(n) => Some(*n),
            _ => None,
        }
    }

    pub fn same(&self, other: &Dim) -> Same {
        match (self, other) {
            (a, b) if a == b => Same::Yes,
            (Dim::Const(_), Dim::Const(_) | Dim::Lit(_)) | (Dim::Lit(_), Dim::Const(_)) => {
                Same::Unknown
            }
            (Dim::Computed(_), _) | (_, Dim::Computed(_)) => Same::Runtime,
            _ => Same::No,
        }
    }

    /// The dim's Rust type in generated code.
    pub fn to_type(&self) -> TokenStream {
        match self {
            Dim::Lit(n) => quote!(::rumus::D<#n>),
            Dim::Var(name) => {
                let ident = format_ident!("{}", name);
                quote!(#ident)
            }
            Dim::Const(name) => {
                let path = const_path(name, proc_macro2::Span::call_site());
                quote!(::rumus::D<{ #path }>)
            }
            Dim::Derived { .. } | Dim::Computed(_) => quote!(::rumus::Dyn),
        }
    }

    /// `(literal factor, symbolic factors)` of this dim's size.
    fn factors(&self) -> (usize, Vec<String>) {
        match self {
            Dim::Lit(n) => (*n, Vec::new()),
            Dim::Var(s) | Dim::Const(s) | Dim::Computed(s) => (1, vec![s.clone()]),
            Dim::Derived { factor, symbols } => (*factor, symbols.clone()),
        }
    }

    /// The product of several dims, kept literal when it can be.
    pub fn product(dims: &[Dim]) -> Dim {
        let mut factor = 1usize;
        let mut symbols = Vec::new();
        for d in dims {
            let (f, s) = d.factors();
            factor = factor.saturating_mul(f);
            symbols.extend(s);
        }
        symbols.sort();
        match symbols.len() {
            0 => Dim::Lit(factor),
            1 if factor == 1 => dims
                .iter()
                .find(|d| !matches!(d, Dim::Lit(1)))
                .cloned()
                .unwrap_or(Dim::Lit(1)),
            _ => Dim::Derived { factor, symbols },
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Lit(n) => write!(f, "{n}"),
            Dim::Var(s) | Dim::Const(s) | Dim::Computed(s) => f.write_str(s),
            Dim::Derived { factor, symbols } => {
                let mut parts = symbols.clone();
                if *factor != 1 {
                    parts.push(factor.to_string());
                }
                f.write_str(&parts.join("*"))
            }
        }
    }
}

/// A const's path (`HIDDEN`, `config::HIDDEN`) as tokens.
pub fn const_path(name: &str, span: proc_macro2::Span) -> TokenStream {
    let segments = name
        .split("::")
        .map(|segment| proc_macro2::Ident::new(segment, span));
    quote!(#(#segments)::*)
}

/// The value of a static dim as a `usize` expression (a literal or a const's path).
fn value_expr(dim: &Dim, span: proc_macro2::Span) -> TokenStream {
    match dim {
        Dim::Lit(n) => quote_spanned!(span=> #n),
        Dim::Const(c) => const_path(c, span),
        other => unreachable!("only static dims are compared at compile time, got {other}"),
    }
}

/// A check the macro cannot decide (it involves a const it cannot see), left to the
/// compiler as a compile-time assertion spanned on the offending token. The message reads in
/// shapes and ends with the consts' values, which only the compiler knows:
/// `... (HIDDEN is 100, not 128)`.
pub fn deferred_check(span: proc_macro2::Span, a: &Dim, b: &Dim, message: &str) -> TokenStream {
    let (va, vb) = (value_expr(a, span), value_expr(b, span));
    let (first, second) = match (a, b) {
        (Dim::Const(_), Dim::Lit(_)) => ((a, va.clone()), (b, vb.clone())),
        (Dim::Lit(_), Dim::Const(_)) => ((b, vb.clone()), (a, va.clone())),
        _ => ((a, va.clone()), (b, vb.clone())),
    };
    let open = format!("{message} ({} is ", first.0);
    let (first_value, second_value) = (first.1, second.1);
    let tail = match second.0 {
        Dim::Lit(_) => quote!(.text(", not ").number(#second_value)),
        other => {
            let middle = format!(", {other} is ");
            quote!(.text(#middle).number(#second_value))
        }
    };
    let body = quote_spanned! {span=>
        if #va != #vb {
            let message = ::rumus::__private::ConstMessage::new()
                .text(#open)
                .number(#first_value)
                #tail
                .text(")");
            ::core::panic!("{}", message.as_str())
        }
    };
    compile_time_assertion(&[a, b], span, body)
}

/// A tensor shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// `(D0, D1, ...)` as a Rust type.
    pub fn to_type(&self) -> TokenStream {
        let dims = self.0.iter().map(Dim::to_type);
        quote!((#(#dims,)*))
    }

    /// Product of all dims (element count), as a comparable key.
    pub fn numel(&self) -> (usize, Vec<String>) {
        Dim::product(&self.0).factors()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "[{}]", dims.join(", "))
    }
}

thread_local! {
    /// The const generic parameters of the `#[model]` struct being expanded (`C` of
    /// `struct Block<const C: usize>`). A dim name is otherwise read from its spelling alone,
    /// and a single capital letter would pass for a runtime dim; every reader of dim names
    /// (field types, DSL shapes, the generated signatures) consults this list instead of
    /// taking it as an argument, so the struct's parameters reach them all.
    static CONST_PARAMS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with `params` read as consts (the struct's const generic parameters).
pub fn with_const_params<T>(params: Vec<String>, f: impl FnOnce() -> T) -> T {
    let previous = CONST_PARAMS.with(|p| std::mem::replace(&mut *p.borrow_mut(), params));
    let result = f();
    CONST_PARAMS.with(|p| *p.borrow_mut() = previous);
    result
}

/// Whether `name` is a const generic parameter of the struct being expanded.
pub fn is_const_param(name: &str) -> bool {
    CONST_PARAMS.with(|p| p.borrow().iter().any(|n| n == name))
}

/// How an identifier inside a shape is read: the struct's const generic parameters and
/// SCREAMING_CASE names (`HIDDEN`) are consts, everything else (`B`, `Batch`) a runtime dim.
pub fn dim_from_ident(name: &str) -> Dim {
    if is_const_param(name) {
        return Dim::Const(name.to_string());
    }
    let screaming = name.len() > 1
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.chars().any(|c| c.is_ascii_uppercase());
    if screaming {
        Dim::Const(name.to_string())
    } else {
        Dim::Var(name.to_string())
    }
}

/// A factor of a product dim (what [`Dim::product`] keeps as a symbol) back as a dim.
pub fn dim_from_symbol(symbol: &str) -> Dim {
    if symbol.contains("::") {
        Dim::Const(symbol.to_string())
    } else if symbol.chars().all(|c| c.is_alphanumeric() || c == '_') {
        dim_from_ident(symbol)
    } else {
        Dim::Computed(symbol.to_string())
    }
}

/// Whether a runtime dim name is a generic parameter of the generated function (a single
/// capital letter such as `B`) rather than a named dim type declared with `rumus::dim!`.
pub fn is_generic_dim(name: &str) -> bool {
    name.len() == 1 && name.chars().all(|c| c.is_ascii_uppercase()) && !is_const_param(name)
}

/// A compile-time assertion `body` (a `()` expression that panics with the message). As an
/// item (`const _`) where it names no generic parameter; inside a generic struct's code an
/// item may not name the parameters, so there it is an inline `const` block, evaluated
/// when the code is instantiated with the parameters' values.
fn compile_time_assertion(
    dims: &[&Dim],
    span: proc_macro2::Span,
    body: TokenStream,
) -> TokenStream {
    let generic = dims
        .iter()
        .any(|d| matches!(d, Dim::Const(name) if is_const_param(name)));
    if generic {
        quote_spanned!(span=> let () = const { #body };)
    } else {
        quote_spanned!(span=> const _: () = #body;)
    }
}

/// A divisibility the macro cannot decide (`EMBED % HEADS` with a const), left to the
/// compiler like [`deferred_check`], the values filled in: `... (EMBED is 100, HEADS is 8)`.
pub fn deferred_divisible(
    span: proc_macro2::Span,
    width: &Dim,
    parts: &Dim,
    message: &str,
) -> TokenStream {
    let (vw, vp) = (value_expr(width, span), value_expr(parts, span));
    let open = format!("{message} ({width} is ");
    let middle = format!(", {parts} is ");
    let body = quote_spanned! {span=>
        if #vp == 0 || #vw % #vp != 0 {
            let message = ::rumus::__private::ConstMessage::new()
                .text(#open)
                .number(#vw)
                .text(#middle)
                .number(#vp)
                .text(")");
            ::core::panic!("{}", message.as_str())
        }
    };
    compile_time_assertion(&[width, parts], span, body)
}

/// Whether a check made by [`deferred_check`] or [`deferred_divisible`] is a statement
/// (it names a generic parameter), which must sit inside a function body.
pub fn is_statement(check: &TokenStream) -> bool {
    matches!(check.clone().into_iter().next(), Some(proc_macro2::TokenTree::Ident(i)) if i == "let")
}
