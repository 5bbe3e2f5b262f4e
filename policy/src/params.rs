//! Constraint parameters (`spec.parameters`), with the defaults of the rule catalogue.
//! Unknown keys are refused: a typo in a constraint must not silently switch a rule off.

use serde::Deserialize;

use crate::duration::parse_go_duration;
use crate::input::InputError;
use crate::violation::Severity;

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Parameters {
    pub kubernetes_minor_version: u32,
    pub istio: IstioParameters,
    pub linkerd: LinkerdParameters,
    pub rules: Vec<String>,
    pub exclude_rules: Vec<String>,
    pub min_severity: String,
    pub exempt_namespaces: Vec<String>,
    pub exempt_images: Vec<String>,
    pub exit_markers: Vec<String>,
    pub min_available: i64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            kubernetes_minor_version: 33,
            istio: IstioParameters::default(),
            linkerd: LinkerdParameters::default(),
            rules: Vec::new(),
            exclude_rules: Vec::new(),
            min_severity: "info".into(),
            exempt_namespaces: Vec::new(),
            exempt_images: Vec::new(),
            exit_markers: Vec::new(),
            min_available: 1,
        }
    }
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct IstioParameters {
    pub native_sidecars: bool,
    pub hold_application_until_proxy_starts: bool,
    pub hold_forced: bool,
    pub cni: bool,
    pub termination_drain_duration: String,
    pub injected_namespaces: Vec<String>,
    pub ambient_namespaces: Vec<String>,
    #[serde(rename = "proxyUID")]
    pub proxy_uid: i64,
}

impl Default for IstioParameters {
    fn default() -> Self {
        IstioParameters {
            native_sidecars: false,
            hold_application_until_proxy_starts: false,
            hold_forced: false,
            cni: false,
            termination_drain_duration: "5s".into(),
            injected_namespaces: Vec::new(),
            ambient_namespaces: Vec::new(),
            proxy_uid: 1337,
        }
    }
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LinkerdParameters {
    pub native_sidecars: bool,
    pub proxy_await: bool,
    pub cni: bool,
    pub shutdown_endpoint: bool,
    pub injected_namespaces: Vec<String>,
    #[serde(rename = "proxyUID")]
    pub proxy_uid: i64,
}

impl Default for LinkerdParameters {
    fn default() -> Self {
        LinkerdParameters {
            native_sidecars: false,
            proxy_await: true,
            cni: false,
            shutdown_endpoint: false,
            injected_namespaces: Vec::new(),
            proxy_uid: 2102,
        }
    }
}

/// Parameters after the checks serde cannot express, with parsed values.
#[derive(Debug, Clone)]
pub struct Settings {
    pub raw: Parameters,
    /// `istio.terminationDrainDuration` in milliseconds.
    pub istio_drain_ms: u64,
    pub min_severity: Severity,
}

impl Settings {
    pub fn from_parameters(raw: Parameters) -> Result<Settings, InputError> {
        let istio_drain_ms = parse_go_duration(&raw.istio.termination_drain_duration)
            .map_err(|problem| {
                InputError::new(
                    "parameters.istio.terminationDrainDuration",
                    format!("expected a Go duration such as \"5s\": {problem}"),
                )
            })?;
        let min_severity = Severity::parse(&raw.min_severity).ok_or_else(|| {
            InputError::new(
                "parameters.minSeverity",
                format!("expected one of info, warning, error, got \"{}\"", raw.min_severity),
            )
        })?;
        for (key, list) in [("rules", &raw.rules), ("excludeRules", &raw.exclude_rules)] {
            for (index, entry) in list.iter().enumerate() {
                if crate::catalogue::find(entry).is_none() {
                    return Err(InputError::new(
                        format!("parameters.{key}[{index}]"),
                        format!("unknown rule \"{entry}\": expected a rule id such as ML101 or a name such as startup-no-hold"),
                    ));
                }
            }
        }
        if raw.min_available < 0 {
            return Err(InputError::new(
                "parameters.minAvailable",
                format!("expected a non-negative integer, got {}", raw.min_available),
            ));
        }
        Ok(Settings { raw, istio_drain_ms, min_severity })
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_parameters(Parameters::default()).expect("the defaults are valid")
    }
}
