//! A model's input contract, stated where a caller's mistake is reported. A model that can be
//! a layer of another model implements `Forward` for any input through a hidden trait of its
//! own, implemented only for the tensors its forward takes. A parent model that feeds it the
//! wrong shape then fails that trait's bound, and rustc prints the trait's message: the
//! nested model's contract in the bracket notation its forward was written in (`` `Encoder`
//! takes its input as [B, 16] ``), on the argument, rather than `Forward`'s message in type
//! notation (`(B, D<8>)`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::Generics;

use super::expand_struct::{impl_params, where_bounded};

/// What a model's forward takes and gives, for [`forward_through_contract`].
pub struct InputContract<'a> {
    /// The model's name (`Encoder`), which names the trait and the message.
    pub model: &'a syn::Ident,
    /// The model's type with its parameters (`Block<C>`).
    pub self_ty: TokenStream,
    /// The model's generic parameters.
    pub generics: &'a Generics,
    /// The forward's own dims (`B: ::rumus::Dim`).
    pub dims: Vec<TokenStream>,
    /// The input shape and element type, and the output shape, as types.
    pub input: TokenStream,
    pub element: TokenStream,
    pub output: TokenStream,
    /// The input shape as the forward declares it: `[B, 16]`.
    pub written: String,
}

/// The contract trait, its one implementation (for the declared input), and `Forward` for
/// every input the trait accepts, which calls the model's `forward`.
pub fn forward_through_contract(contract: &InputContract<'_>) -> TokenStream {
    let InputContract {
        model,
        self_ty,
        generics,
        dims,
        input,
        element,
        output,
        written,
    } = contract;
    let name = format_ident!("{model}_takes");
    let message =
        format!("`{{__RumusModel}}` takes its input as {written}, but this argument is `{{Self}}`");
    let label = format!("expected a tensor of shape {written} (`{model}`'s forward)");
    let contract_params = impl_params(generics, dims);
    let own_where = where_bounded(generics, TokenStream::new(), &[]);
    let forward_params = impl_params(
        generics,
        &[
            quote!(__RumusIn: ::rumus::Shape),
            quote!(__RumusElement: ::rumus::element::Element),
        ],
    );
    let tensor = quote!(::rumus::Tensor<__RumusIn, __RumusElement>);
    let forward_where = where_bounded(
        generics,
        TokenStream::new(),
        &[quote!(#tensor: #name<#self_ty>)],
    );
    quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types)]
        #[diagnostic::on_unimplemented(
            message = #message,
            label = #label,
            note = "compare the argument's dims with the nested model's forward; change one of them, or reshape the argument (`transpose`, `reshape`) to the declared shape"
        )]
        pub trait #name<__RumusModel: ?Sized> {
            #[doc(hidden)]
            type Out: ::rumus::Shape;
            #[doc(hidden)]
            fn __rumus_forward(model: &__RumusModel, x: &Self) -> ::rumus::Result<::rumus::Tensor<Self::Out>>;
        }

        #[diagnostic::do_not_recommend]
        impl #contract_params #name<#self_ty> for ::rumus::Tensor<#input, #element> #own_where {
            type Out = #output;
            fn __rumus_forward(model: &#self_ty, x: &Self) -> ::rumus::Result<::rumus::Tensor<Self::Out>> {
                model.forward(x)
            }
        }

        impl #forward_params ::rumus::nn::Forward<__RumusIn, __RumusElement> for #self_ty #forward_where {
            type Out = <#tensor as #name<#self_ty>>::Out;
            fn forward_typed(&self, x: &#tensor) -> ::rumus::Result<::rumus::Tensor<Self::Out>> {
                <#tensor as #name<#self_ty>>::__rumus_forward(self, x)
            }
        }
    }
}
