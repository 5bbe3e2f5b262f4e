//! Constraint parameters (`spec.parameters`), with the defaults of the rule catalogue.
//! Unknown keys are refused: a typo in a constraint must not silently switch a rule off.

use crate::catalogue::Rule;
use crate::duration::parse_go_duration;
use crate::input::{Fields, InputError, Parsed, Path};
use crate::node::Node;
use crate::violation::Severity;

#[derive(Debug, Clone)]
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
    /// What the Gatekeeper template does when the External Data provider fails
    /// ([`PROVIDER_FAILURE_VALUES`]). No rule reads it; it is accepted here so that one
    /// constraint's parameters work unchanged in Gatekeeper, `meshlife check --constraint` and
    /// `meshlife verify`, and checked so that a typo cannot silently change the failure mode.
    pub provider_failure: String,
}

/// `providerFailure` values: `ignore` (the constraint reports nothing when the provider
/// fails: fail open) and `report` (a provider failure is an ML000 violation of the
/// constraint, so it takes the constraint's enforcementAction: a deny constraint fails
/// closed). The first is the default, so that an outage of the provider never blocks
/// admission unless a cluster asks for it.
pub const PROVIDER_FAILURE_VALUES: &[&str] = &["ignore", "report"];

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
            provider_failure: PROVIDER_FAILURE_VALUES[0].into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct IstioParameters {
    pub native_sidecars: bool,
    pub hold_application_until_proxy_starts: bool,
    pub hold_forced: bool,
    pub cni: bool,
    pub termination_drain_duration: String,
    /// `meshConfig.defaultConfig.drainDuration`: how long Envoy drains its listeners (45s).
    pub drain_duration: String,
    pub injected_namespaces: Vec<String>,
    pub ambient_namespaces: Vec<String>,
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
            drain_duration: "45s".into(),
            injected_namespaces: Vec::new(),
            ambient_namespaces: Vec::new(),
            proxy_uid: 1337,
        }
    }
}

#[derive(Debug, Clone)]
pub struct LinkerdParameters {
    pub native_sidecars: bool,
    pub proxy_await: bool,
    pub cni: bool,
    pub shutdown_endpoint: bool,
    pub injected_namespaces: Vec<String>,
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

/// Refuses keys outside the schema: a typo must not silently switch a rule off.
fn refuse_unknown_keys(fields: &Fields, known: &[&str]) -> Parsed<()> {
    match fields.keys().find(|key| !known.contains(key)) {
        None => Ok(()),
        Some(key) => Err(InputError::new(
            fields.child_path(key),
            format!(
                "unknown parameter `{key}`, expected one of {}",
                known.join(", ")
            ),
        )),
    }
}

fn non_negative(fields: &Fields, key: &str) -> Parsed<Option<i64>> {
    match fields.int(key) {
        Ok(Some(value)) if value < 0 => Err(InputError::new(
            fields.child_path(key),
            format!("expected a non-negative integer, got {value}"),
        )),
        Ok(value) => Ok(value),
        Err(error) => Err(InputError::new(
            error.path,
            error
                .problem
                .replace("an integer", "a non-negative integer"),
        )),
    }
}

fn string_list(fields: &Fields, key: &str, into: &mut Vec<String>) -> Parsed<()> {
    if let Some(list) = fields.strings(key)? {
        *into = list.iter().map(ToString::to_string).collect();
    }
    Ok(())
}

impl Parameters {
    /// Reads `parameters` (absent, null or `{}` give every default).
    pub fn read(node: Option<&Node>) -> Parsed<Parameters> {
        let mut parameters = Parameters::default();
        let Some(node) = node else {
            return Ok(parameters);
        };
        let Some(fields) = Fields::of(node, Path::Root("parameters"))? else {
            return Ok(parameters);
        };
        refuse_unknown_keys(
            &fields,
            &[
                "kubernetesMinorVersion",
                "istio",
                "linkerd",
                "rules",
                "excludeRules",
                "minSeverity",
                "exemptNamespaces",
                "exemptImages",
                "exitMarkers",
                "minAvailable",
                "providerFailure",
            ],
        )?;
        if let Some(minor) = non_negative(&fields, "kubernetesMinorVersion")? {
            parameters.kubernetes_minor_version = u32::try_from(minor).unwrap_or(u32::MAX);
        }
        if let Some(istio) = fields.object("istio", IstioParameters::read)? {
            parameters.istio = istio;
        }
        if let Some(linkerd) = fields.object("linkerd", LinkerdParameters::read)? {
            parameters.linkerd = linkerd;
        }
        string_list(&fields, "rules", &mut parameters.rules)?;
        string_list(&fields, "excludeRules", &mut parameters.exclude_rules)?;
        string_list(
            &fields,
            "exemptNamespaces",
            &mut parameters.exempt_namespaces,
        )?;
        string_list(&fields, "exemptImages", &mut parameters.exempt_images)?;
        string_list(&fields, "exitMarkers", &mut parameters.exit_markers)?;
        if let Some(severity) = fields.string("minSeverity")? {
            parameters.min_severity = severity.to_string();
        }
        if let Some(min_available) = non_negative(&fields, "minAvailable")? {
            parameters.min_available = min_available;
        }
        if let Some(mode) = fields.string("providerFailure")? {
            parameters.provider_failure = mode.to_string();
        }
        Ok(parameters)
    }
}

impl IstioParameters {
    fn read(fields: &Fields) -> Parsed<IstioParameters> {
        refuse_unknown_keys(
            fields,
            &[
                "nativeSidecars",
                "holdApplicationUntilProxyStarts",
                "holdForced",
                "cni",
                "terminationDrainDuration",
                "drainDuration",
                "injectedNamespaces",
                "ambientNamespaces",
                "proxyUID",
            ],
        )?;
        let defaults = IstioParameters::default();
        let mut istio = IstioParameters {
            native_sidecars: fields
                .boolean("nativeSidecars")?
                .unwrap_or(defaults.native_sidecars),
            hold_application_until_proxy_starts: fields
                .boolean("holdApplicationUntilProxyStarts")?
                .unwrap_or(defaults.hold_application_until_proxy_starts),
            hold_forced: fields
                .boolean("holdForced")?
                .unwrap_or(defaults.hold_forced),
            cni: fields.boolean("cni")?.unwrap_or(defaults.cni),
            termination_drain_duration: fields
                .string("terminationDrainDuration")?
                .map_or(defaults.termination_drain_duration, |text| text.to_string()),
            drain_duration: fields
                .string("drainDuration")?
                .map_or(defaults.drain_duration, |text| text.to_string()),
            proxy_uid: non_negative(fields, "proxyUID")?.unwrap_or(defaults.proxy_uid),
            ..IstioParameters::default()
        };
        string_list(fields, "injectedNamespaces", &mut istio.injected_namespaces)?;
        string_list(fields, "ambientNamespaces", &mut istio.ambient_namespaces)?;
        Ok(istio)
    }
}

impl LinkerdParameters {
    fn read(fields: &Fields) -> Parsed<LinkerdParameters> {
        refuse_unknown_keys(
            fields,
            &[
                "nativeSidecars",
                "proxyAwait",
                "cni",
                "shutdownEndpoint",
                "injectedNamespaces",
                "proxyUID",
            ],
        )?;
        let defaults = LinkerdParameters::default();
        let mut linkerd = LinkerdParameters {
            native_sidecars: fields
                .boolean("nativeSidecars")?
                .unwrap_or(defaults.native_sidecars),
            proxy_await: fields
                .boolean("proxyAwait")?
                .unwrap_or(defaults.proxy_await),
            cni: fields.boolean("cni")?.unwrap_or(defaults.cni),
            shutdown_endpoint: fields
                .boolean("shutdownEndpoint")?
                .unwrap_or(defaults.shutdown_endpoint),
            proxy_uid: non_negative(fields, "proxyUID")?.unwrap_or(defaults.proxy_uid),
            ..LinkerdParameters::default()
        };
        string_list(
            fields,
            "injectedNamespaces",
            &mut linkerd.injected_namespaces,
        )?;
        Ok(linkerd)
    }
}

/// Parameters after the checks that span fields (durations, severities, rule names), with
/// parsed values.
#[derive(Debug, Clone)]
pub struct Settings {
    pub raw: Parameters,
    /// `istio.terminationDrainDuration` in milliseconds.
    pub istio_drain_ms: u64,
    /// `istio.drainDuration` in milliseconds.
    pub istio_envoy_drain_ms: u64,
    pub min_severity: Severity,
}

impl Settings {
    /// Whether `parameters.rules` and `excludeRules` let `rule` report.
    pub fn selects(&self, rule: &Rule) -> bool {
        let raw = &self.raw;
        let included =
            raw.rules.is_empty() || raw.rules.iter().any(|entry| rule.is_named_by(entry));
        included
            && !raw
                .exclude_rules
                .iter()
                .any(|entry| rule.is_named_by(entry))
    }

    pub fn from_parameters(raw: Parameters) -> Result<Settings, InputError> {
        let istio_drain_ms =
            parse_go_duration(&raw.istio.termination_drain_duration).map_err(|problem| {
                InputError::new(
                    "parameters.istio.terminationDrainDuration",
                    format!("expected a Go duration such as \"5s\": {problem}"),
                )
            })?;
        let istio_envoy_drain_ms =
            parse_go_duration(&raw.istio.drain_duration).map_err(|problem| {
                InputError::new(
                    "parameters.istio.drainDuration",
                    format!("expected a Go duration such as \"45s\": {problem}"),
                )
            })?;
        let min_severity = Severity::parse(&raw.min_severity).ok_or_else(|| {
            InputError::new(
                "parameters.minSeverity",
                format!(
                    "expected one of info, warning, error, got \"{}\"",
                    raw.min_severity
                ),
            )
        })?;
        if !PROVIDER_FAILURE_VALUES.contains(&raw.provider_failure.as_str()) {
            return Err(InputError::new(
                "parameters.providerFailure",
                format!(
                    "expected one of {}, got \"{}\"",
                    PROVIDER_FAILURE_VALUES.join(", "),
                    raw.provider_failure
                ),
            ));
        }
        for (key, list) in [("rules", &raw.rules), ("excludeRules", &raw.exclude_rules)] {
            for (index, entry) in list.iter().enumerate() {
                if crate::catalogue::find(entry).is_none() {
                    return Err(InputError::new(
                        format!("parameters.{key}[{index}]"),
                        format!(
                            "unknown rule \"{entry}\": expected a rule id such as ML101 or a name such as startup-no-hold"
                        ),
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
        Ok(Settings {
            raw,
            istio_drain_ms,
            istio_envoy_drain_ms,
            min_severity,
        })
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::from_parameters(Parameters::default()).expect("the defaults are valid")
    }
}
