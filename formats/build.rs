//! Generates the Rust types of `proto/hbase.proto` with prost. The .proto file is parsed by
//! protox (a protobuf compiler written in Rust), so building needs no `protoc` binary.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/hbase.proto");
    let descriptors = protox::compile(["proto/hbase.proto"], ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
