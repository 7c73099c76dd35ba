//! Prints how many heap bytes one zone file takes once loaded.
//! `cargo run --release -p heron-zone --example zone_size ORIGIN FILE`
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let origin = heron_proto::Name::parse(&args[1]).expect("origin");
    let loaded = heron_zone::load_zone_file(std::path::Path::new(&args[2]), &origin)
        .unwrap_or_else(|p| panic!("{p:?}"));
    let z = &loaded.zone;
    println!(
        "{} records, {} nodes, {} heap bytes in shards, struct {} bytes",
        z.record_count(),
        z.node_count(),
        z.heap_bytes(),
        std::mem::size_of::<heron_zone::Zone>()
    );
}
