// chartcheck holds charts/meshlife to `meshlife install`: for every engine, every shipped
// cluster file and the other choices both offer, `helm template` (the real Helm, built by
// ../install.sh) must print the same objects as `meshlife install` with the same choices,
// object by object, with only these differences:
//
//   - the certificates, keys and Kyverno's token, which each side makes anew (every occurrence,
//     in Secrets, caBundles and the policies' text, is replaced by a placeholder on both sides;
//     the chart's are then checked for what they are: a CA, a serving certificate it signed for
//     the same names as the install's, a key that is the certificate's);
//   - the Namespace `meshlife install` prints, which Helm makes with --create-namespace;
//   - Helm's labels (app.kubernetes.io/managed-by, helm.sh/chart), its resource policy (kept
//     constraints: _gatekeeper.tpl says why) and the chart's
//     meshlife.dev/certificate-* annotations, which let an upgrade keep the certificates.
//
// Choices that one side refuses, the other must refuse too.
package main

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

type object = map[string]any

// A choice made both ways: `meshlife install` arguments and `helm template` ones.
type choice struct {
	name      string
	namespace string
	install   []string
	helm      []string
	refused   bool // both must refuse it
}

var engines = []struct{ value, install string }{
	{"gatekeeper", "gatekeeper"},
	{"kyverno", "kyverno"},
	{"kyverno-clusterpolicy", "kyverno --cluster-policy"},
	{"kyverno-cel", "kyverno"},
	{"webhook", "webhook"},
}

func main() {
	helm := flag.String("helm", "compat/helm/bin/helm", "the helm binary")
	meshlife := flag.String("meshlife", "target/release/meshlife", "the meshlife binary")
	chart := flag.String("chart", "charts/meshlife", "the chart")
	clusters := flag.String("clusters", "constraints/gatekeeper/clusters", "the shipped cluster files")
	flag.Parse()

	if err := sameVersion(*meshlife, *chart); err != nil {
		fatal(err)
	}
	own, err := ownConstraintFile(*meshlife)
	if err != nil {
		fatal(err)
	}
	defer os.Remove(own)
	// Another team's, under other names: files whose constraints share a name are refused.
	team, err := ownConstraintFile(*meshlife, "--name", "team-lifecycle", "--linkerd", "2.19")
	if err != nil {
		fatal(err)
	}
	defer os.Remove(team)
	choices, err := allChoices(*clusters, own, team)
	if err != nil {
		fatal(err)
	}
	failed := 0
	for _, c := range choices {
		if err := check(c, *helm, *meshlife, *chart); err != nil {
			failed++
			fmt.Printf("FAIL %s\n     %s\n", c.name, strings.ReplaceAll(err.Error(), "\n", "\n     "))
			continue
		}
		fmt.Printf("ok   %s\n", c.name)
	}
	fmt.Printf("chartcheck: %d choices, %d differ\n", len(choices), failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// The chart's version and appVersion are the binary's, whose install prints the image of that
// version: the chart's default image is compared with it below, in every choice.
func sameVersion(meshlife, chart string) error {
	out, err := exec.Command(meshlife, "--version").Output()
	if err != nil {
		return fmt.Errorf("meshlife --version: %w", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		return fmt.Errorf("meshlife --version printed %q", out)
	}
	text, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return err
	}
	var metadata struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(text, &metadata); err != nil {
		return fmt.Errorf("%s/Chart.yaml: %w", chart, err)
	}
	if metadata.Version != fields[1] || metadata.AppVersion != fields[1] {
		return fmt.Errorf("%s/Chart.yaml: version %s, appVersion %s; meshlife is %s: give both the crate's version",
			chart, metadata.Version, metadata.AppVersion, fields[1])
	}
	return nil
}

// A constraint file of the user's own kind, written by `meshlife constraint`.
func ownConstraintFile(meshlife string, more ...string) (string, error) {
	args := append([]string{"constraint", "--kubernetes", "1.31", "--istio", "1.26", "--istio-hold"}, more...)
	out, err := exec.Command(meshlife, args...).Output()
	if err != nil {
		return "", fmt.Errorf("meshlife constraint: %w", err)
	}
	file, err := os.CreateTemp("", "meshlife-constraint-*.yaml")
	if err != nil {
		return "", err
	}
	defer file.Close()
	_, err = file.Write(out)
	return file.Name(), err
}

func allChoices(clusters, own, team string) ([]choice, error) {
	files, err := filepath.Glob(filepath.Join(clusters, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no cluster files in %s", clusters)
	}
	var choices []choice
	for _, engine := range engines {
		namespace := "meshlife-system"
		if engine.value == "gatekeeper" {
			namespace = "gatekeeper-system"
		}
		base := choice{namespace: namespace, install: strings.Fields("install " + engine.install),
			helm: []string{"--set", "engine=" + engine.value}}
		if engine.value == "gatekeeper" {
			// As on an upgrade, once Gatekeeper has made the constraints' kind from the template.
			base.helm = append(base.helm, "--api-versions", "constraints.gatekeeper.sh/v1beta1/MeshLifecycle")
		}
		with := func(name string, install, helm []string) choice {
			c := base
			c.name = engine.value + ": " + name
			c.install = append(append([]string{}, base.install...), install...)
			c.helm = append(append([]string{}, base.helm...), helm...)
			return c
		}
		choices = append(choices, with("defaults", nil, nil))
		for _, file := range files {
			cluster := strings.TrimSuffix(filepath.Base(file), ".yaml")
			choices = append(choices, with("cluster "+cluster,
				[]string{"--constraint", file}, []string{"--set", "cluster=" + cluster}))
		}
		choices = append(choices, with("a constraint file of meshlife constraint's",
			[]string{"--constraint", own}, []string{"--set-file", "constraints[0]=" + own}))
		choices = append(choices, with("replicas, image, cert-manager and an external URL",
			[]string{"--replicas", "3", "--image", "registry.example/meshlife:dev", "--cert-manager",
				"--url", "https://meshlife.example.com:9443", "--constraint", files[0]},
			[]string{"--set", "replicas=3", "--set", "image=registry.example/meshlife:dev",
				"--set", "certManager=true", "--set", "url=https://meshlife.example.com:9443",
				"--set", "cluster=" + strings.TrimSuffix(filepath.Base(files[0]), ".yaml")}))
		choices = append(choices, with("the monitoring: PodMonitor, PrometheusRule and dashboard",
			[]string{"--monitoring"}, []string{"--set", "monitoring=true"}))
		choices = append(choices, with("an external URL by IP address",
			[]string{"--url", "https://10.0.0.7"}, []string{"--set", "url=https://10.0.0.7"}))
		if engine.value == "gatekeeper" || engine.value == "webhook" {
			refused := with("two constraint files naming the same constraints",
				[]string{"--constraint", files[0], "--constraint", own},
				[]string{"--set", "cluster=" + strings.TrimSuffix(filepath.Base(files[0]), ".yaml"),
					"--set-file", "constraints[0]=" + own})
			refused.refused = true
			choices = append(choices, refused)
		}
		switch engine.value {
		case "gatekeeper":
			other := with("another namespace, with a copy of Gatekeeper's CA",
				[]string{"--namespace", "admission", "--gatekeeper-cert-secret", "gatekeeper-ca"},
				[]string{"--set", "gatekeeper.certSecret=gatekeeper-ca"})
			other.namespace = "admission"
			refused := with("another namespace, without a copy of Gatekeeper's CA",
				[]string{"--namespace", "admission"}, nil)
			refused.namespace, refused.refused = "admission", true
			choices = append(choices, other, refused)
		case "webhook":
			choices = append(choices, with("failure policy fail, timeout 10 s, two constraint files",
				[]string{"--failure-policy", "fail", "--timeout-seconds", "10", "--constraint", files[0],
					"--constraint", team},
				[]string{"--set", "failurePolicy=fail", "--set", "timeoutSeconds=10",
					"--set", "cluster=" + strings.TrimSuffix(filepath.Base(files[0]), ".yaml"),
					"--set-file", "constraints[0]=" + team}))
			refused := with("timeout 31 s", []string{"--timeout-seconds", "31"},
				[]string{"--set", "timeoutSeconds=31"})
			refused.refused = true
			choices = append(choices, refused)
		default:
			other := with("another namespace", []string{"--namespace", "admission"}, nil)
			other.namespace = "admission"
			refused := with("two constraint files",
				[]string{"--constraint", files[0], "--constraint", own},
				[]string{"--set", "cluster=" + strings.TrimSuffix(filepath.Base(files[0]), ".yaml"),
					"--set-file", "constraints[0]=" + own})
			refused.refused = true
			choices = append(choices, other, refused)
		}
		if engine.value != "webhook" {
			refused := with("a failure policy (the webhook's only)", nil, []string{"--set", "failurePolicy=fail"})
			refused.install = nil // nothing to ask the install: it has no such flag here
			refused.refused = true
			choices = append(choices, refused)
		}
	}
	return choices, nil
}

func check(c choice, helm, meshlife, chart string) error {
	var installed []object
	var installErr error
	if c.install != nil {
		args := append([]string{}, c.install...)
		if c.namespace != "gatekeeper-system" && c.namespace != "meshlife-system" && !contains(args, "--namespace") {
			args = append(args, "--namespace", c.namespace)
		}
		installed, installErr = run(meshlife, args...)
	}
	helmArgs := append([]string{"template", "meshlife", chart, "--namespace", c.namespace}, c.helm...)
	charted, helmErr := run(helm, helmArgs...)
	if c.refused {
		if helmErr == nil {
			return errors.New("helm template accepted what should be refused")
		}
		if c.install != nil && installErr == nil {
			return errors.New("meshlife install accepted it, so the chart should not refuse it")
		}
		return nil
	}
	if installErr != nil {
		return installErr
	}
	if helmErr != nil {
		return helmErr
	}
	return compare(installed, charted)
}

func contains(list []string, item string) bool {
	for _, each := range list {
		if each == item {
			return true
		}
	}
	return false
}

// Runs a command and parses its standard output as YAML documents.
func run(command string, args ...string) ([]object, error) {
	cmd := exec.Command(command, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %v: %s", filepath.Base(command), strings.Join(args, " "), err,
			lastLines(stderr.String()))
	}
	return documents(stdout.Bytes())
}

func lastLines(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var kept []string
	for _, line := range lines {
		if !strings.Contains(line, "found symbolic link") {
			kept = append(kept, line)
		}
	}
	if len(kept) > 4 {
		kept = kept[len(kept)-4:]
	}
	return strings.Join(kept, " / ")
}

func documents(text []byte) ([]object, error) {
	reader := k8syaml.NewYAMLReader(bufioReader(text))
	var out []object
	for {
		document, err := reader.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var value object
		if err := yaml.Unmarshal(document, &value); err != nil {
			return nil, fmt.Errorf("%w in:\n%s", err, document)
		}
		if value != nil {
			out = append(out, value)
		}
	}
}

// The secrets of one side: each PEM and token, with the placeholder that stands for it.
type secret struct{ value, placeholder string }

func compare(installed, charted []object) error {
	installedSecrets, err := secretsOf(installed)
	if err != nil {
		return fmt.Errorf("meshlife install: %w", err)
	}
	chartedSecrets, err := secretsOf(charted)
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	if err := sameCertificates(installedSecrets, chartedSecrets); err != nil {
		return err
	}
	want := index(installed, installedSecrets, false)
	got := index(charted, chartedSecrets, true)
	var problems []string
	for key, object := range want {
		if strings.HasPrefix(key, "v1/Namespace/") {
			if _, ok := got[key]; ok {
				problems = append(problems, key+": the chart makes the release's Namespace, which helm --create-namespace makes")
			}
			continue
		}
		other, ok := got[key]
		if !ok {
			problems = append(problems, key+": printed by meshlife install, not by the chart")
			continue
		}
		if !reflect.DeepEqual(object, other) {
			problems = append(problems, key+": "+difference("", object, other))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			problems = append(problems, key+": made by the chart, not printed by meshlife install")
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// The objects by apiVersion/kind/namespace/name, with every secret replaced by its placeholder
// and, for the chart's, Helm's labels and the certificate annotations taken out.
func index(objects []object, secrets []secret, chart bool) map[string]object {
	out := map[string]object{}
	for _, object := range objects {
		masked := mask(object, secrets).(map[string]any)
		metadata, _ := masked["metadata"].(map[string]any)
		if chart && metadata != nil {
			for _, field := range []string{"labels", "annotations"} {
				values, _ := metadata[field].(map[string]any)
				for key := range values {
					if key == "app.kubernetes.io/managed-by" || key == "helm.sh/chart" || key == "helm.sh/resource-policy" ||
						strings.HasPrefix(key, "meshlife.dev/certificate-") {
						delete(values, key)
					}
				}
				if values != nil && len(values) == 0 {
					delete(metadata, field)
				}
			}
		}
		namespace, _ := metadata["namespace"].(string)
		name, _ := metadata["name"].(string)
		out[fmt.Sprintf("%v/%v/%s/%s", masked["apiVersion"], masked["kind"], namespace, name)] = masked
	}
	return out
}

func mask(value any, secrets []secret) any {
	switch value := value.(type) {
	case map[string]any:
		out := map[string]any{}
		for key, item := range value {
			out[key] = mask(item, secrets)
		}
		return out
	case []any:
		out := make([]any, len(value))
		for i, item := range value {
			out[i] = mask(item, secrets)
		}
		return out
	case string:
		for _, secret := range secrets {
			value = strings.ReplaceAll(value, secret.value, secret.placeholder)
		}
		return value
	default:
		return value
	}
}

// Reads the TLS material and the token from one side's Secrets.
func secretsOf(objects []object) ([]secret, error) {
	var out []secret
	add := func(value any, placeholder string) {
		text, _ := value.(string)
		text = strings.TrimSpace(text)
		if text == "" {
			return
		}
		out = append(out, secret{text, placeholder})
		if strings.HasPrefix(text, "-----BEGIN") {
			out = append(out, secret{base64.StdEncoding.EncodeToString([]byte(text + "\n")), placeholder + "-base64"})
			// Block scalars indent every line: the PEM as it sits in a policy's text.
			for _, indent := range []int{4, 12} {
				pad := strings.Repeat(" ", indent)
				out = append(out, secret{strings.ReplaceAll(text, "\n", "\n"+pad), placeholder + "-indented"})
			}
		}
	}
	for _, object := range objects {
		if object["kind"] != "Secret" {
			continue
		}
		metadata, _ := object["metadata"].(map[string]any)
		name, _ := metadata["name"].(string)
		data, _ := object["stringData"].(map[string]any)
		switch {
		case strings.HasSuffix(name, "-tls"):
			add(data["ca.crt"], "<CA>")
			add(data["tls.crt"], "<CERT>")
			add(data["tls.key"], "<KEY>")
		case strings.HasSuffix(name, "-ca"):
			add(data["tls.crt"], "<CA>")
			add(data["tls.key"], "<CA-KEY>")
		case name == "meshlife-kyverno-token":
			add(data["token"], "<TOKEN>")
		}
	}
	// The longest first, so a PEM's base64 is never cut by a shorter value inside it.
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].value) > len(out[j].value) })
	return out, nil
}

// The chart's TLS material is what the install's is: a CA, and (without cert-manager) a serving
// certificate it signed, whose key is its own, for the same names.
func sameCertificates(installed, charted []secret) error {
	find := func(secrets []secret, placeholder string) string {
		for _, s := range secrets {
			if s.placeholder == placeholder {
				return s.value
			}
		}
		return ""
	}
	for _, placeholder := range []string{"<CA>", "<CERT>", "<KEY>", "<CA-KEY>", "<TOKEN>"} {
		if (find(installed, placeholder) == "") != (find(charted, placeholder) == "") {
			return fmt.Errorf("%s: one side has it, the other not", placeholder)
		}
	}
	if token := find(charted, "<TOKEN>"); token != "" && len(token) < 32 {
		return fmt.Errorf("the chart's Kyverno token is %d characters, too short to be secret", len(token))
	}
	caPEM := find(charted, "<CA>")
	ca, err := parseCertificate(caPEM)
	if err != nil {
		return fmt.Errorf("the chart's CA: %w", err)
	}
	if !ca.IsCA {
		return errors.New("the chart's CA is not a CA certificate")
	}
	if caKey := find(charted, "<CA-KEY>"); caKey != "" {
		if _, err := tls.X509KeyPair([]byte(caPEM), []byte(caKey)); err != nil {
			return fmt.Errorf("the chart's CA key is not its CA's: %w", err)
		}
	}
	certPEM := find(charted, "<CERT>")
	if certPEM == "" {
		return nil
	}
	if _, err := tls.X509KeyPair([]byte(certPEM), []byte(find(charted, "<KEY>"))); err != nil {
		return fmt.Errorf("the chart's serving key is not its certificate's: %w", err)
	}
	cert, err := parseCertificate(certPEM)
	if err != nil {
		return fmt.Errorf("the chart's serving certificate: %w", err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("the chart's serving certificate is not signed by its CA: %w", err)
	}
	if _, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok {
		return fmt.Errorf("the chart's serving key is %T, not ECDSA as the install's", cert.PublicKey)
	}
	theirs, err := parseCertificate(find(installed, "<CERT>"))
	if err != nil {
		return fmt.Errorf("the install's serving certificate: %w", err)
	}
	if a, b := names(cert), names(theirs); a != b {
		return fmt.Errorf("the chart's serving certificate names %s, the install's %s", a, b)
	}
	return nil
}

func parseCertificate(text string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func names(cert *x509.Certificate) string {
	var out []string
	out = append(out, cert.DNSNames...)
	for _, ip := range cert.IPAddresses {
		out = append(out, ip.String())
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Where two values first differ, as a path and both sides in JSON.
func difference(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if ok {
			keys := map[string]bool{}
			for key := range w {
				keys[key] = true
			}
			for key := range g {
				keys[key] = true
			}
			sorted := make([]string, 0, len(keys))
			for key := range keys {
				sorted = append(sorted, key)
			}
			sort.Strings(sorted)
			for _, key := range sorted {
				if !reflect.DeepEqual(w[key], g[key]) {
					return difference(path+"."+key, w[key], g[key])
				}
			}
		}
	case []any:
		g, ok := got.([]any)
		if ok && len(g) == len(w) {
			for i := range w {
				if !reflect.DeepEqual(w[i], g[i]) {
					return difference(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])
				}
			}
		}
	}
	show := func(value any) string {
		text, _ := json.Marshal(value)
		if len(text) > 600 {
			return string(text[:600]) + "..."
		}
		return string(text)
	}
	return fmt.Sprintf("%s: install %s, chart %s", path, show(want), show(got))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chartcheck:", err)
	os.Exit(2)
}

func bufioReader(text []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(text)) }
