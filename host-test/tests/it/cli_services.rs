//! ML404 through the Services of the same input: a gRPC port is often named only on the
//! Service that selects the pods, not on the container.

use crate::cli_support;

use cli_support::*;

fn deployment_with_unnamed_port() -> String {
    r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
spec:
  selector:
    matchLabels: {app: checkout}
  template:
    metadata:
      labels:
        app: checkout
        sidecar.istio.io/inject: "true"
      annotations:
        proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": true}'
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: app
        image: registry.example/checkout:1
        ports:
        - containerPort: 5050
        readinessProbe:
          tcpSocket: {port: 5050}
"#
    .to_string()
}

fn service(name: &str, selector: &str, port: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  selector: {{{selector}}}\n  ports:\n  - {port}\n"
    )
}

#[test]
fn a_grpc_port_named_on_the_selecting_service_marks_the_stream() {
    let workspace = Workspace::new();
    workspace.write("alone.yaml", &deployment_with_unnamed_port());
    let alone = workspace.run(&["check", "alone.yaml", "-o", "json"]);
    assert!(!alone.rules().contains(&"ML404".to_string()), "{alone:?}");

    for port in [
        "{name: grpc, port: 5050, targetPort: 5050}",
        "{name: api, port: 80, targetPort: 5050, appProtocol: kubernetes.io/h2c}",
    ] {
        workspace.write(
            "app.yaml",
            &stream(&[
                deployment_with_unnamed_port(),
                service("checkout", "app: checkout", port),
            ]),
        );
        let outcome = workspace.run(&["check", "app.yaml", "-o", "json"]);
        assert!(
            outcome.rules().contains(&"ML404".to_string()),
            "{port}: {outcome:?}"
        );
        let finding = outcome
            .json()
            .into_iter()
            .find(|finding| finding["rule"] == "ML404")
            .unwrap_or_default();
        assert!(
            finding["msg"]
                .as_str()
                .unwrap_or_default()
                .contains("Service \"checkout\""),
            "the message says what marked the stream: {finding}"
        );
    }

    // A Service that selects other pods, or is in another namespace, says nothing about these.
    workspace.write(
        "other.yaml",
        &stream(&[
            deployment_with_unnamed_port(),
            service("payments", "app: payments", "{name: grpc, port: 5050}"),
        ]),
    );
    let outcome = workspace.run(&["check", "other.yaml", "-o", "json"]);
    assert!(
        !outcome.rules().contains(&"ML404".to_string()),
        "{outcome:?}"
    );
}
