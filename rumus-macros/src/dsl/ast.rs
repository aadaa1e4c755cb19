//! The syntax tree of the tensor DSL used by `tensor_fn!` and `#[model]` forward methods.

use proc_macro2::Span;
use syn::{Attribute, Ident, Visibility};

/// One axis written in a shape annotation: a literal, a name, or `_`.
#[derive(Debug, Clone)]
pub enum DimAst {
    Lit(usize),
    Name(Ident),
    /// `_` in a `let` annotation: whatever size the called module gives (a strided
    /// convolution's output inside a sub-model), left to the type system.
    Infer(Span),
}

/// `[B, 784]` as written.
#[derive(Debug, Clone)]
pub struct ShapeAst {
    pub dims: Vec<DimAst>,
}

/// A tensor parameter `x: [B, 784]`, or `ids: [B, T; i64]` for elements other than `f32`.
pub struct Param {
    pub name: Ident,
    pub shape: ShapeAst,
    /// The element type after `;` in the brackets, when one is written.
    pub element: Option<Ident>,
}

impl Param {
    /// The Rust element type of the parameter's tensor.
    pub fn element_type(&self) -> proc_macro2::TokenStream {
        match &self.element {
            Some(element) => quote::quote!(#element),
            None => quote::quote!(f32),
        }
    }
}

/// A parameter that is not a tensor, written with its Rust type (`graph: &Graph`): passed
/// through to the generated function as it is, for the layers that take one beside a tensor
/// (the graph layers).
pub struct ContextParam {
    pub name: Ident,
    pub ty: syn::Type,
    /// Its place among all the parameters, tensors included.
    pub position: usize,
}

/// A function written in the DSL.
pub struct TensorFn {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    /// Dim names declared in `<...>`.
    pub generics: Vec<Ident>,
    pub has_self: bool,
    /// The type whose impl holds the function (for methods of `#[model]`), naming the
    /// generated items that must live outside the impl.
    pub owner: Option<String>,
    pub params: Vec<Param>,
    /// The parameters that are not tensors.
    pub context: Vec<ContextParam>,
    pub ret: ShapeAst,
    pub body: Vec<Stmt>,
    pub tail: Expr,
}

/// `let name (: [shape])? = expr;`
pub struct Stmt {
    pub name: Ident,
    pub annotation: Option<ShapeAst>,
    pub expr: Expr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Matmul,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Matmul => "@",
        }
    }
}

/// An expression of the DSL.
#[derive(Debug, Clone)]
pub enum Expr {
    /// A tensor variable or a dim name (inside shape lists).
    Var(Ident),
    /// A number literal.
    Number(f64, Span),
    /// `_` inside a shape list: inferred.
    Infer(Span),
    /// `[a, b, ...]`: a list argument (shapes, axes, tensors to join).
    List(Vec<Expr>, Span),
    /// `a..b` with literal ends.
    Range(Box<Expr>, Box<Expr>, Span),
    Neg(Box<Expr>, Span),
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: Span,
    },
    /// `receiver.name(args)`.
    Method {
        receiver: Box<Expr>,
        name: Ident,
        args: Vec<Expr>,
    },
    /// `name(args)`: a free function (`relu(x)`, `cat([a, b], 1)`) or another `tensor_fn`.
    Call {
        name: Ident,
        args: Vec<Expr>,
    },
    /// `self.field(args)`: a layer of the model.
    Layer {
        field: Ident,
        args: Vec<Expr>,
    },
    /// `self.field` without a call: a parameter tensor of the model.
    Field(Ident),
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Var(i) => i.span(),
            Expr::Number(_, s)
            | Expr::Infer(s)
            | Expr::List(_, s)
            | Expr::Range(_, _, s)
            | Expr::Neg(_, s) => *s,
            Expr::Binary { span, .. } => *span,
            Expr::Method { name, .. } => name.span(),
            Expr::Call { name, .. } => name.span(),
            Expr::Layer { field, .. } | Expr::Field(field) => field.span(),
        }
    }

    /// The spans of the expression's first and last tokens, so an error can underline all
    /// of it.
    pub fn span_range(&self) -> (Span, Span) {
        match self {
            Expr::Var(i) | Expr::Layer { field: i, .. } | Expr::Field(i) => (i.span(), i.span()),
            Expr::Number(_, s) | Expr::Infer(s) | Expr::List(_, s) => (*s, *s),
            Expr::Neg(inner, s) => (*s, inner.span_range().1),
            Expr::Range(a, b, _) | Expr::Binary { lhs: a, rhs: b, .. } => {
                (a.span_range().0, b.span_range().1)
            }
            Expr::Method { receiver, name, .. } => (receiver.span_range().0, name.span()),
            Expr::Call { name, args } => (
                name.span(),
                args.last().map_or(name.span(), |a| a.span_range().1),
            ),
        }
    }

    /// An error underlining the whole expression.
    pub fn error(&self, message: impl std::fmt::Display) -> syn::Error {
        let (first, last) = self.span_range();
        let tokens = quote::quote_spanned!(first=> __rumus_start);
        let end = quote::quote_spanned!(last=> __rumus_end);
        syn::Error::new_spanned(quote::quote!(#tokens #end), message)
    }

    /// The value of an integer literal (possibly negated).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Expr::Number(v, _) if v.fract() == 0.0 => Some(*v as i64),
            Expr::Neg(inner, _) => inner.as_int().map(|v| -v),
            _ => None,
        }
    }
}
