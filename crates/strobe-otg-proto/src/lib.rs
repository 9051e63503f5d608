//! The Open Traffic Generator (OTG) 1.61.0 model and `Openapi` gRPC service, generated at
//! build time from `proto/otg.proto` (see build.rs): prost messages, tonic's server side,
//! and serde impls in the proto's JSON mapping with OTG's field names.
//! Generated code only, kept in a crate of its own so that it is compiled once.

#[allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all,
    nonstandard_style
)]
pub mod otg {
    include!(concat!(env!("OUT_DIR"), "/otg.rs"));
    include!(concat!(env!("OUT_DIR"), "/otg.serde.rs"));
}
