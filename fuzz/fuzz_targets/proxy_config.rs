//! The `proxy.istio.io/config` reader: never panics, and every problem it reports is a
//! sentence the ML601 message can carry (it is printed after "annotation ... "), for any text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meshlife_policy::proxy_config::{ProxyConfig, parse_proxy_config};

fuzz_target!(|input: &[u8]| {
    // Annotation values are JSON strings, so UTF-8; other bytes never reach the reader.
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let (config, problems) = parse_proxy_config(text);
    for problem in &problems {
        assert!(!problem.trim().is_empty(), "an empty problem for {text:?}");
        // ML601 says "annotation proxy.istio.io/config <problem>": a problem starts with a
        // lower-case verb ("is ...", "holds ...", "nests ...").
        assert!(
            problem.starts_with(|c: char| c.is_ascii_lowercase()),
            "problem {problem:?} for {text:?} is not the rest of a sentence"
        );
    }
    // Blank text is no config at all, with nothing to report.
    if text.trim().is_empty() {
        assert_eq!((config, problems.len()), (ProxyConfig::default(), 0));
    }
});
