//! Evaluates one Gatekeeper input file natively and prints the result set:
//! `cargo run -p meshlife-policy --example evaluate -- input.json`.
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
    let violations = meshlife_policy::evaluate(&input);
    println!(
        "{}",
        serde_json::to_string_pretty(&violations).expect("serialisable")
    );
}
