//! Generates the OTG server's code from `proto/otg.proto`: the message types (prost), the
//! `Openapi` service's server side (tonic) and serde in the proto's JSON mapping with the
//! proto's own field names (pbjson), which are OTG's JSON names.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/otg.proto";
    println!("cargo:rerun-if-changed={proto}");
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let well_known = protoc_bin_vendored::include_path()?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptors = out.join("otg_descriptors.bin");

    let mut prost = prost_build::Config::new();
    prost
        .protoc_executable(protoc)
        // pbjson reads the messages from the descriptors. The one well-known type OTG uses
        // is google.protobuf.Empty, as the argument of calls only: prost makes it `()`.
        .file_descriptor_set_path(&descriptors);
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_with_config(
            prost,
            &[PathBuf::from(proto)],
            &[PathBuf::from("proto"), well_known],
        )?;

    let set = std::fs::read(&descriptors)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .preserve_proto_field_names()
        // strobe's replies carry its own detail (`x_strobe`) beside OTG's fields.
        .ignore_unknown_fields()
        .build(&[".otg"])?;
    Ok(())
}
