//! Prints the mesh verdicts of one Gatekeeper input file (one per pod spec of its object):
//! `cargo run -p meshlife-policy --example mesh_verdicts -- input.json`.
use std::io::Read;

fn main() {
    let mut input = Vec::new();
    match std::env::args().nth(1) {
        Some(path) => {
            input = std::fs::read(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
        }
        None => {
            std::io::stdin().read_to_end(&mut input).expect("stdin");
        }
    }
    let verdicts = meshlife_policy::mesh_verdicts(&input);
    println!(
        "{}",
        serde_json::to_string_pretty(&verdicts).expect("serialisable")
    );
}
