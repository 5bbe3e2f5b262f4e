//! The typed view of a `networking.k8s.io` NetworkPolicy: the one object meshlife reviews that
//! holds no pod spec. Istio's ambient mode needs two things from the policies that select its
//! pods (ML604), and this view keeps what the rule reads: which pods, which directions, and
//! what each ingress rule admits.

use core::net::Ipv4Addr;
use std::collections::BTreeMap;

use crate::input::{Fields, InputError, IntOrString, ObjectMeta, Parsed, Text};
use crate::node::Node;

/// The API group of the NetworkPolicy kind; another group's NetworkPolicy (Calico's
/// `crd.projectcalico.org`, Cilium's) has another schema.
const API_GROUP: &str = "networking.k8s.io/";

/// Whether `kind` and `apiVersion` name the Kubernetes NetworkPolicy. An object without
/// `apiVersion` (a review that only names the kind) is taken for it.
pub fn is_network_policy(kind: &str, api_version: Option<&str>) -> bool {
    kind == "NetworkPolicy" && api_version.is_none_or(|version| version.starts_with(API_GROUP))
}

pub struct NetworkPolicy<'a> {
    pub meta: ObjectMeta<'a>,
    /// The object's namespace, else the review's, else the Namespace object's name.
    pub namespace: Option<Text<'a>>,
    /// The Namespace object, when the review carries it.
    pub namespace_meta: Option<ObjectMeta<'a>>,
    /// `spec.podSelector.matchLabels`; the expressions are not read (see `selected_mode`).
    pub pod_selector_labels: BTreeMap<Text<'a>, Text<'a>>,
    /// `spec.policyTypes` as written; `None` when absent.
    pub policy_types: Option<Vec<Text<'a>>>,
    /// `spec.ingress`; `None` when absent.
    pub ingress: Option<Vec<IngressRule<'a>>>,
}

#[derive(Default)]
pub struct IngressRule<'a> {
    /// `None` or empty: every port.
    pub ports: Option<Vec<PolicyPort<'a>>>,
    /// `None` or empty: every source.
    pub from: Option<Vec<Peer>>,
}

#[derive(Default)]
pub struct PolicyPort<'a> {
    /// TCP when absent.
    pub protocol: Option<Text<'a>>,
    /// Every port of the protocol when absent; a name matches a container port's name.
    pub port: Option<IntOrString<'a>>,
    pub end_port: Option<i64>,
}

/// A source of an ingress rule, as far as an address outside every pod is concerned.
#[derive(Default)]
pub struct Peer {
    /// `ipBlock`: the CIDR and its exceptions, parsed. `None` for a pod or namespace selector,
    /// which never selects an address outside the cluster's pods.
    pub ip_block: Option<IpBlock>,
}

pub struct IpBlock {
    pub cidr: Cidr,
    pub except: Vec<Cidr>,
}

/// An IPv4 network, or an IPv6 one (which holds no IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cidr {
    V4 { address: u32, prefix: u32 },
    V6,
}

impl Cidr {
    fn parse(text: &str) -> Option<Cidr> {
        let (address, prefix) = text.split_once('/')?;
        let prefix: u32 = prefix.parse().ok()?;
        if address.contains(':') {
            return (prefix <= 128).then_some(Cidr::V6);
        }
        let address: Ipv4Addr = address.parse().ok()?;
        (prefix <= 32).then_some(Cidr::V4 {
            address: u32::from(address),
            prefix,
        })
    }

    pub fn contains_v4(self, ip: Ipv4Addr) -> bool {
        match self {
            Cidr::V4 { address, prefix } => {
                let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
                address & mask == u32::from(ip) & mask
            }
            Cidr::V6 => false,
        }
    }
}

impl<'a> NetworkPolicy<'a> {
    pub fn read(
        object: &Fields<'a, '_>,
        review_namespace: Option<Text<'a>>,
        namespace_meta: Option<ObjectMeta<'a>>,
    ) -> Parsed<NetworkPolicy<'a>> {
        let meta = object
            .object("metadata", ObjectMeta::read)?
            .unwrap_or_default();
        let namespace = meta
            .namespace
            .clone()
            .or(review_namespace)
            .or_else(|| namespace_meta.as_ref().and_then(|meta| meta.name.clone()));
        let spec = object.object("spec", |spec| {
            Ok((
                spec.object("podSelector", |selector| selector.string_map("matchLabels"))?
                    .flatten()
                    .unwrap_or_default(),
                spec.strings("policyTypes")?,
                spec.objects("ingress", IngressRule::read)?,
            ))
        })?;
        let (pod_selector_labels, policy_types, ingress) = spec.unwrap_or_default();
        Ok(NetworkPolicy {
            meta,
            namespace,
            namespace_meta,
            pod_selector_labels,
            policy_types,
            ingress,
        })
    }

    /// Whether the policy restricts ingress: `policyTypes` says so, or, when absent, always
    /// (the API server defaults it to `Ingress`, plus `Egress` when egress rules are set).
    pub fn restricts_ingress(&self) -> bool {
        match &self.policy_types {
            Some(types) => types.iter().any(|kind| *kind == "Ingress"),
            None => true,
        }
    }

    pub fn pod_label(&self, key: &str) -> Option<&str> {
        self.pod_selector_labels.get(key).map(Text::as_str)
    }
}

impl<'a> IngressRule<'a> {
    fn read(rule: &Fields<'a, '_>) -> Parsed<IngressRule<'a>> {
        Ok(IngressRule {
            ports: rule.objects("ports", |port| {
                Ok(PolicyPort {
                    protocol: port.string("protocol")?,
                    port: port.int_or_string("port")?,
                    end_port: port.int("endPort")?,
                })
            })?,
            from: rule.objects("from", |peer| {
                Ok(Peer {
                    ip_block: peer.object("ipBlock", IpBlock::read)?,
                })
            })?,
        })
    }

    /// Whether the rule admits TCP traffic to `port`, from whichever sources it names.
    pub fn admits_tcp_port(&self, port: i64) -> bool {
        let ports = self.ports.as_deref().unwrap_or_default();
        ports.is_empty()
            || ports.iter().any(|entry| {
                let tcp = entry.protocol.as_deref().is_none_or(|p| p == "TCP");
                let covered = match &entry.port {
                    None => true,
                    Some(IntOrString::Int(first)) => {
                        *first == port || (*first < port && entry.end_port >= Some(port))
                    }
                    // A name matches the pods' container ports; ztunnel's 15008 is none of them.
                    Some(IntOrString::Str(_)) => false,
                };
                tcp && covered
            })
    }

    /// Whether the rule admits traffic from the IPv4 address `ip`, on whichever ports it names.
    pub fn admits_source(&self, ip: Ipv4Addr) -> bool {
        let peers = self.from.as_deref().unwrap_or_default();
        peers.is_empty()
            || peers.iter().any(|peer| {
                peer.ip_block.as_ref().is_some_and(|block| {
                    block.cidr.contains_v4(ip)
                        && !block.except.iter().any(|except| except.contains_v4(ip))
                })
            })
    }
}

impl IpBlock {
    fn read(block: &Fields<'_, '_>) -> Parsed<IpBlock> {
        let cidr_of = |text: &str, path: String| {
            Cidr::parse(text).ok_or_else(|| {
                InputError::new(
                    path,
                    format!(
                        "\"{text}\" is not a CIDR such as 10.0.0.0/8; the API server requires one"
                    ),
                )
            })
        };
        let cidr = match block.string("cidr")? {
            Some(text) => cidr_of(&text, block.child_path("cidr"))?,
            None => {
                return Err(InputError::new(
                    block.child_path("cidr"),
                    "missing; the API server requires a CIDR such as 10.0.0.0/8",
                ));
            }
        };
        let except = block
            .list("except", |item, path| match item {
                Node::Str(text) => cidr_of(text, path.render()),
                _ => Err(InputError::new(
                    path.render(),
                    "expected a CIDR string such as 10.0.0.0/8",
                )),
            })?
            .unwrap_or_default();
        Ok(IpBlock { cidr, except })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_hold_what_their_prefix_says() {
        let probe = Ipv4Addr::new(169, 254, 7, 127);
        for (text, holds) in [
            ("169.254.7.127/32", true),
            ("169.254.0.0/16", true),
            ("0.0.0.0/0", true),
            ("169.254.7.126/32", false),
            ("10.0.0.0/8", false),
            ("::/0", false),
        ] {
            assert_eq!(
                Cidr::parse(text).unwrap().contains_v4(probe),
                holds,
                "{text}"
            );
        }
        for bad in [
            "169.254.7.127",
            "300.1.1.1/32",
            "1.2.3.4/33",
            "a.b.c.d/8",
            "1.2.3/8",
        ] {
            assert_eq!(Cidr::parse(bad), None, "{bad}");
        }
    }
}
