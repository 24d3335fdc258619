//! `signal_table!`: turns the one declaration of each signal (in
//! `signals/table/`) into everything that has to agree on it, so nothing
//! is kept in step by hand:
//!
//! - the signal's struct, its `NUMBER` and its `Signal` variant (with
//!   `From`), `Signal::number` and `Signal::name`;
//! - for wire signals, the codec: fields are written in declaration order,
//!   each through its [`Field`](crate::codec::Field) impl, and read back in
//!   the same order with every value checked, then the whole signal through
//!   its `checked_by` function if it names one (`Signal::encode_body`,
//!   `decode_body`); node-local signals are refused by the encoder and are
//!   unknown numbers to the decoder;
//! - which signals an API node may send and to which block
//!   ([`is_api_request`](crate::codec::is_api_request),
//!   `Signal::api_receiver`), and the REF each is refused with when it
//!   reaches a block that does not serve it (`Signal::refusal`); an API
//!   request without a `refused_by` does not compile;
//! - [`SIGNALS`](crate::signals::SIGNALS), the table itself as data, for
//!   tests and for the signal list in docs/wire-format.md.
//!
//! A declaration reads
//!
//! ```text
//! /// doc comment and derives, as for any struct
//! NUMBER Name: Sender | Sender -> Receiver, class
//!     refused_by Ref { echoed_field, other_field = value }   (API requests)
//!     checked_by path::to_check                              (optional)
//! {
//!     /// doc
//!     field: Type,
//! }
//! ```
//!
//! where class is `api_request` (an API node sends it to a data node's
//! block: the receiver), `api_reply` (a data node sends it to an API node),
//! `node` (between blocks of data nodes, on the wire between nodes) or
//! `local` (inside one node only; no wire form).

macro_rules! signal_table {
    (
        $(
            $(#[$meta:meta])*
            $number:literal $name:ident : $($from:ident)|+ -> $($to:ident)|+ , $class:ident
                $( refused_by $refusal:ident { $($refusal_field:ident $(= $refusal_value:expr)?),* } )?
                $( checked_by $check:path )?
            {
                $( $(#[$field_meta:meta])* $field:ident : $type:ty ),* $(,)?
            }
        )*
    ) => {
        $(
            $(#[$meta])*
            pub struct $name {
                $( $(#[$field_meta])* pub $field: $type, )*
            }

            impl $name {
                /// The signal's number (NDB: GSN), as on the wire.
                pub const NUMBER: u16 = $number;
            }

            impl From<$name> for Signal {
                fn from(value: $name) -> Signal {
                    Signal::$name(value)
                }
            }

            signal_table!(@codec $class $name [$($check)?] { $($field: $type),* });
        )*

        /// Every signal. One variant per signal struct, with the same name.
        #[derive(Debug)]
        pub enum Signal {
            $( #[doc = concat!("See [`", stringify!($name), "`].")] $name($name), )*
        }

        impl Signal {
            /// The signal's global number (NDB: GSN), as on the wire.
            pub fn number(&self) -> u16 {
                match self {
                    $( Signal::$name(_) => $number, )*
                }
            }

            /// The signal's name, for traces.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Signal::$name(_) => stringify!($name), )*
                }
            }

            /// The block kind that serves this signal when an API node sends
            /// it; `None` for every signal an API node may not send.
            pub fn api_receiver(&self) -> Option<$crate::ids::BlockKind> {
                match self {
                    $( Signal::$name(_) => signal_table!(@receiver $class [$($to)|+]), )*
                }
            }

            /// The refusal owed to this API request by a block that does not
            /// serve it: its REF with `BadRequest` and the request's echoed
            /// ids. `None` when this is not an API request. The request
            /// itself (and its sections) stays with the caller.
            pub fn refusal(&self) -> Option<Signal> {
                self.refusal_with($crate::error::ErrorCode::BadRequest)
            }

            /// As [`Signal::refusal`], with `error`.
            pub fn refusal_with(&self, error: $crate::error::ErrorCode) -> Option<Signal> {
                match self {
                    $(
                        Signal::$name(request) => signal_table!(
                            @refusal $class request error
                            $( $refusal { $($refusal_field $(= $refusal_value)?),* } )?
                        ),
                    )*
                }
            }

            /// Writes the signal's fields (the body of its record);
            /// node-local signals have no wire form.
            pub(crate) fn encode_body(
                &self,
                writer: &mut $crate::codec::Writer<'_>,
            ) -> Result<(), $crate::codec::WireError> {
                match self {
                    $( Signal::$name(signal) => signal_table!(@encode $class $name signal writer), )*
                }
            }
        }

        /// Reads the body of a signal record numbered `number`, checking
        /// every field.
        pub(crate) fn decode_body(
            number: u16,
            reader: &mut $crate::codec::Reader<'_>,
            sections: $crate::codec::Sections,
        ) -> Result<Signal, $crate::codec::WireError> {
            match number {
                $( $number => signal_table!(@decode $class $name reader sections), )*
                other => Err($crate::codec::WireError::UnknownSignal(other)),
            }
        }

        /// Whether an API node may send signal `number` (to a data node).
        pub const fn is_api_request(number: u16) -> bool {
            match number {
                $( $number => signal_table!(@is_api_request $class), )*
                _ => false,
            }
        }

        /// One value of every wire signal, each field from its `Sample`
        /// (for the table's round-trip test).
        #[cfg(test)]
        #[allow(clippy::vec_init_then_push)] // one push per declaration
        pub(crate) fn sample_wire_signals(
            pool: &'static $crate::section::SectionPool,
        ) -> Vec<Signal> {
            let mut signals = Vec::new();
            $( signal_table!(@sample $class $name pool signals { $($field: $type),* }); )*
            signals
        }

        /// The table as data: one entry per signal, in declaration order.
        pub const SIGNALS: &[SignalInfo] = &[
            $(
                SignalInfo {
                    number: $number,
                    name: stringify!($name),
                    from: &[$(stringify!($from)),+],
                    to: &[$(stringify!($to)),+],
                    class: signal_table!(@class $class),
                    refused_with: signal_table!(@refused_with $($refusal)?),
                },
            )*
        ];
    };

    (@codec local $name:ident [$($check:path)?] { $($field:ident : $type:ty),* }) => {};
    (@codec $class:ident $name:ident [$($check:path)?] { $($field:ident : $type:ty),* }) => {
        impl $name {
            fn encode_fields(&self, writer: &mut $crate::codec::Writer<'_>) {
                $( $crate::codec::Field::put(&self.$field, writer); )*
            }

            fn decode_fields(
                reader: &mut $crate::codec::Reader<'_>,
                sections: $crate::codec::Sections,
            ) -> Result<Self, $crate::codec::WireError> {
                let signal = $name {
                    $(
                        $field: <$type as $crate::codec::Field>::take(
                            reader,
                            sections,
                            concat!(stringify!($name), " ", stringify!($field)),
                        )?,
                    )*
                };
                $( $check(&signal)?; )?
                Ok(signal)
            }
        }
    };

    (@sample local $name:ident $pool:ident $signals:ident { $($field:ident : $type:ty),* }) => {};
    (@sample $class:ident $name:ident $pool:ident $signals:ident
        { $($field:ident : $type:ty),* }) => {
        $signals.push(Signal::from($name {
            $( $field: <$type as $crate::signals::table_tests::Sample>::sample($pool), )*
        }));
    };

    (@encode local $name:ident $signal:ident $writer:ident) => {{
        let _ = $signal;
        Err($crate::codec::WireError::NotWireSignal(stringify!($name)))
    }};
    (@encode $class:ident $name:ident $signal:ident $writer:ident) => {{
        $signal.encode_fields($writer);
        Ok(())
    }};

    (@decode local $name:ident $reader:ident $sections:ident) => {
        Err($crate::codec::WireError::UnknownSignal($name::NUMBER))
    };
    (@decode $class:ident $name:ident $reader:ident $sections:ident) => {
        $name::decode_fields($reader, $sections).map(Signal::from)
    };

    (@receiver api_request [$to:ident]) => { Some($crate::ids::BlockKind::$to) };
    (@receiver api_request [$($to:ident)|+]) => {
        compile_error!("an API request has exactly one receiving block")
    };
    (@receiver $class:ident [$($to:ident)|+]) => { None };

    (@is_api_request api_request) => { true };
    (@is_api_request $class:ident) => { false };

    (@class api_request) => { SignalClass::ApiRequest };
    (@class api_reply) => { SignalClass::ApiReply };
    (@class node) => { SignalClass::Node };
    (@class local) => { SignalClass::Local };
    (@class $other:ident) => {
        compile_error!(concat!("unknown signal class ", stringify!($other)))
    };

    (@refused_with) => { None };
    (@refused_with $refusal:ident) => { Some(stringify!($refusal)) };

    (@refusal api_request $request:ident $error:ident
        $refusal:ident { $($field:ident $(= $value:expr)?),* }) => {{
        let _ = &$request; // a REF may echo nothing (ApiRegRef)
        Some(Signal::from($refusal {
            $( $field: signal_table!(@refusal_field $request $field $(= $value)?), )*
            error: $error,
        }))
    }};
    (@refusal api_request $request:ident $error:ident) => {
        compile_error!("an API request needs `refused_by`: the REF a misaddressed one gets")
    };
    (@refusal $class:ident $request:ident $error:ident) => {{
        let _ = ($request, $error);
        None
    }};
    (@refusal $class:ident $request:ident $error:ident $($rest:tt)+) => {
        compile_error!("only an API request has a `refused_by`")
    };
    (@refusal_field $request:ident $field:ident = $value:expr) => { $value };
    (@refusal_field $request:ident $field:ident) => { $request.$field };
}
