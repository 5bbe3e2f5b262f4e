// kyverno-compat: Kyverno's own CLI (`kyverno apply`, built from its Go module by run.sh) runs
// meshlife's Kyverno policies over every example object against a live `meshlife serve`, and
// its verdicts must equal `meshlife check`'s: each errors policy fails exactly the objects
// check reports an error finding for, each warnings policy exactly those with a finding it
// selects, naming the same rule ids. See compat/README-kyverno.md.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

const (
	installedURL = "https://meshlife.meshlife-system.svc:8443/kyverno"
	// What the ClusterPolicies send, and what the harness sends in its place: the Namespace
	// the server's watch adds in a cluster, which the CLI's server (no cluster) cannot have.
	sentReview             = `"{{ to_string(request) }}"`
	reviewWithItsNamespace = `"{{ to_string(merge(request, {namespaceObject: meshlifeNamespace})) }}"`
)

// The rules meshlife-warnings leaves to meshlife-errors (its excludeRules) when no cluster
// file gives the facts.
var errorRules = map[string]bool{"ML104": true, "ML301": true, "ML302": true, "ML304": true, "ML405": true}

// The cluster files run besides the policies' own defaults: one per mesh and sidecar mode.
var clusterFiles = []string{
	"constraints/gatekeeper/clusters/istio-1.26-classic.yaml",
	"constraints/gatekeeper/clusters/linkerd-2.20-native.yaml",
}

var (
	ruleID      = regexp.MustCompile(`\[(ML[0-9]{3}) `)
	certificate = regexp.MustCompile(`(?m)^( *)-----BEGIN CERTIFICATE-----\n(?:.*\n)*? *-----END CERTIFICATE-----`)
)

func main() {
	meshlife := flag.String("meshlife", "", "the meshlife binary")
	kyverno := flag.String("kyverno", "", "the Kyverno CLI binary")
	repo := flag.String("repo", ".", "the meshlife repository")
	flag.Parse()
	if err := run(*meshlife, *kyverno, *repo); err != nil {
		fmt.Fprintln(os.Stderr, "kyverno-compat: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("kyverno-compat: PASS")
}

// object names one example object as Kyverno's report and meshlife's JSON both name it.
type object struct{ Kind, Namespace, Name string }

func (o object) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

type verdict struct {
	failed bool
	rules  []string
}

func run(meshlife, kyverno, repo string) error {
	dir, err := os.MkdirTemp("", "kyverno-compat")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	caPEM, err := makeCertificates(dir)
	if err != nil {
		return err
	}
	// The CLI runs in the harness's process environment; SSL_CERT_FILE is set per call.
	tokenFile := filepath.Join(dir, "token")
	var disagreements []string
	compared, denials := 0, 0
	started := time.Now()
	for _, cluster := range append([]string{""}, clusterFiles...) {
		policies, token, err := installedPolicies(meshlife, repo, dir, cluster, caPEM)
		if err != nil {
			return err
		}
		// The token the install made, as its Secret gives it to the server.
		if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return err
		}
		server, address, err := startServer(meshlife, dir)
		if err != nil {
			return err
		}
		for i, policy := range policies {
			text, err := os.ReadFile(policy)
			if err != nil {
				return err
			}
			rendered := strings.ReplaceAll(string(text), installedURL, "https://"+address+"/kyverno")
			if err := os.WriteFile(policy, []byte(rendered), 0o644); err != nil {
				return err
			}
			policies[i] = policy
		}
		n, f, found, err := compareFiles(meshlife, kyverno, repo, dir, policies, cluster, caPEM)
		calls, refused := serverCounts(healthAddress)
		stopServer(server)
		if err != nil {
			return err
		}
		name := cluster
		if name == "" {
			name = "the policies' default facts"
		}
		fmt.Printf("kyverno-compat: %s: %d verdicts (%d of them policy denials, as meshlife check predicts); meshlife serve answered %d calls, refused %d\n",
			name, n, f, calls, refused)
		if refused > 0 {
			return fmt.Errorf("%s: meshlife serve refused %d calls (the installed token did not reach it)", name, refused)
		}
		if calls < n {
			return fmt.Errorf("%s: %d verdicts but only %d calls reached meshlife serve", name, n, calls)
		}
		compared += n
		denials += f
		disagreements = append(disagreements, found...)
	}
	fmt.Printf("kyverno-compat: %d (object, policy) verdicts compared (%d policy denials), %d disagreements, in %s\n",
		compared, denials, len(disagreements), time.Since(started).Round(time.Millisecond))
	if compared < 300 {
		return fmt.Errorf("only %d verdicts compared: the examples were not all judged", compared)
	}
	if len(disagreements) > 0 {
		return fmt.Errorf("%d disagreements:\n  %s", len(disagreements), strings.Join(disagreements, "\n  "))
	}
	return nil
}

// compareFiles runs kyverno apply and meshlife check (under the same cluster file, if any)
// on every example file.
// denials counts the verdicts in which Kyverno's policy failed the object (what the examples
// are for), not failures of the comparison.
func compareFiles(meshlife, kyverno, repo, dir string, policies []string, cluster, caPEM string) (compared, denials int, disagreements []string, err error) {
	var files []string
	for _, mesh := range []string{"istio", "linkerd"} {
		found, err := filepath.Glob(filepath.Join(repo, "examples", mesh, "*.yaml"))
		if err != nil {
			return 0, 0, nil, err
		}
		files = append(files, found...)
	}
	sort.Strings(files)
	for _, file := range files {
		kyvernoVerdicts, err := kyvernoApply(kyverno, dir, policies, file, caPEM)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("%s: %w", file, err)
		}
		checkFindings, err := meshlifeCheck(meshlife, repo, dir, cluster, file)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("%s: %w", file, err)
		}
		where := filepath.Base(file)
		if cluster != "" {
			where += " under " + filepath.Base(cluster)
		}
		for obj := range checkFindings {
			if _, judged := kyvernoVerdicts[obj]; !judged {
				disagreements = append(disagreements, fmt.Sprintf("%s: %s has check findings but Kyverno judged it under no policy", where, obj))
			}
		}
		for obj, byPolicy := range kyvernoVerdicts {
			expected := expectedVerdicts(checkFindings[obj], cluster != "")
			for policy, got := range byPolicy {
				compared++
				want := expected[strings.TrimSuffix(policy, "-cel")]
				if got.failed {
					denials++
				}
				if got.failed != want.failed || strings.Join(got.rules, ",") != strings.Join(want.rules, ",") {
					disagreements = append(disagreements, fmt.Sprintf(
						"%s: %s under %s: kyverno apply says failed=%v rules=%v, meshlife check says failed=%v rules=%v",
						where, obj, policy, got.failed, got.rules, want.failed, want.rules))
				}
			}
			if len(byPolicy) != 4 {
				disagreements = append(disagreements, fmt.Sprintf("%s: %s was judged by %d of the 4 policies", where, obj, len(byPolicy)))
			}
		}
	}
	return compared, denials, disagreements, nil
}

// expectedVerdicts is what each policy must say given check's findings for one object. Under
// a cluster file, the errors policy carries its deny constraint's facts and the warnings
// policy its warn constraint's, so each must fail on exactly that constraint's findings.
// Without one, the errors policy fails on error findings (its minSeverity) and the warnings
// policy on every finding outside its excludeRules.
func expectedVerdicts(findings []finding, underCluster bool) map[string]verdict {
	errorsRules, warningRules := map[string]bool{}, map[string]bool{}
	for _, f := range findings {
		if underCluster {
			switch f.EnforcementAction {
			case "deny":
				errorsRules[f.Rule] = true
			case "warn":
				warningRules[f.Rule] = true
			}
			continue
		}
		if f.Severity == "error" {
			errorsRules[f.Rule] = true
		}
		if !errorRules[f.Rule] {
			warningRules[f.Rule] = true
		}
	}
	return map[string]verdict{
		"meshlife-errors":   {failed: len(errorsRules) > 0, rules: sortedKeys(errorsRules)},
		"meshlife-warnings": {failed: len(warningRules) > 0, rules: sortedKeys(warningRules)},
	}
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for key := range set {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

// installedPolicies takes the policies `meshlife install kyverno [--constraint FILE]` prints
// (the ValidatingPolicy pair, and with --cluster-policy the ClusterPolicy pair), with the harness's CA in
// place of the one the install made, and returns them with the install's token. One change
// more (README-kyverno.md): in a cluster meshlife serve adds each review's Namespace from its
// watch, and the CLI's server has no cluster to watch, so the ClusterPolicies' review gets the
// Namespace the values file supplies as `meshlifeNamespace`. The CEL pair's http.Post trusts the system roots, which the
// CLI is given through SSL_CERT_FILE, as the install's ConfigMap meshlife-ca is given to the
// admission controller in a cluster.
func installedPolicies(meshlife, repo, dir, cluster, caPEM string) ([]string, string, error) {
	var paths []string
	token := ""
	for _, cel := range []bool{false, true} {
		args := []string{"install", "kyverno"}
		if cluster != "" {
			args = append(args, "--constraint", filepath.Join(repo, cluster))
		}
		kind := "ValidatingPolicy"
		if !cel {
			args = append(args, "--cluster-policy")
			kind = "ClusterPolicy"
		}
		cmd := exec.Command(meshlife, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		output, err := cmd.Output()
		if err != nil {
			return nil, "", fmt.Errorf("meshlife %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
		var policies []string
		for _, document := range strings.Split(string(output), "\n---\n") {
			if strings.Contains(document, "\nkind: "+kind+"\n") {
				policies = append(policies, document)
			}
			if strings.Contains(document, "name: meshlife-kyverno-token\n") {
				match := regexp.MustCompile(`(?m)^  token: (\S+)$`).FindStringSubmatch(document)
				if match == nil {
					return nil, "", errors.New("the install's token Secret has no token")
				}
				if cel && match[1] == token {
					return nil, "", errors.New("two installs printed the same token")
				}
				if !cel {
					token = match[1]
				}
			}
		}
		if len(policies) != 2 {
			return nil, "", fmt.Errorf("meshlife %s printed %d %ss, not 2", strings.Join(args, " "), len(policies), kind)
		}
		rendered := strings.Join(policies, "\n---\n") + "\n"
		// The CEL pair comes from a second install with a token of its own: the server takes
		// the first's, so the CEL pair is given it too.
		rendered = regexp.MustCompile(`Bearer [0-9a-f]{64}`).ReplaceAllString(rendered, "Bearer "+token)
		// The ClusterPolicies carry the CA in each service call; the ValidatingPolicies none.
		// meshlife-errors-cel calls twice (its match condition and, for the message, its
		// variable), the others once.
		cas, calls := 2, 2
		if cel {
			cas, calls = 0, 3
		}
		if found := certificate.FindAllString(rendered, -1); len(found) != cas {
			return nil, "", fmt.Errorf("%d CA certificates in the installed %ss, not %d", len(found), kind, cas)
		}
		rendered = certificate.ReplaceAllStringFunc(rendered, func(block string) string {
			indent := certificate.FindStringSubmatch(block)[1]
			var lines []string
			for _, line := range strings.Split(strings.TrimSpace(caPEM), "\n") {
				lines = append(lines, indent+line)
			}
			return strings.Join(lines, "\n")
		})
		if !cel {
			if strings.Count(rendered, sentReview) != 2 {
				return nil, "", errors.New("the review both ClusterPolicy rules send is not where the harness expects it")
			}
			rendered = strings.ReplaceAll(rendered, sentReview, reviewWithItsNamespace)
		}
		if strings.Count(rendered, "Bearer "+token) != calls || strings.Count(rendered, installedURL) != calls {
			return nil, "", fmt.Errorf("the installed %ss do not make their %d calls to %s with the token", kind, calls, installedURL)
		}
		path := filepath.Join(dir, strings.ToLower(kind)+".yaml")
		if err := os.WriteFile(path, []byte(rendered), 0o644); err != nil {
			return nil, "", err
		}
		paths = append(paths, path)
	}
	return paths, token, nil
}

type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// valuesFile gives the CLI each example file's Namespaces: as `namespaces` (the CEL policies'
// namespaceObject) and as each resource's `meshlifeNamespace` (what the ClusterPolicies fetch
// in a cluster).
func valuesFile(dir, file string) (string, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	namespaces := map[string]map[string]any{}
	var objects []manifest
	for _, document := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(text), -1) {
		var raw map[string]any
		if err := yaml.Unmarshal([]byte(document), &raw); err != nil {
			return "", err
		}
		if raw == nil {
			continue
		}
		var m manifest
		data, _ := json.Marshal(raw)
		if err := json.Unmarshal(data, &m); err != nil {
			return "", err
		}
		if m.Kind == "Namespace" {
			namespaces[m.Metadata.Name] = raw
		} else {
			objects = append(objects, m)
		}
	}
	var namespaceList []any
	for _, namespace := range namespaces {
		namespaceList = append(namespaceList, namespace)
	}
	var policies []any
	for _, policy := range []string{"meshlife-errors", "meshlife-warnings"} {
		var resources []any
		for _, m := range objects {
			var value any = map[string]any{}
			if namespace, ok := namespaces[m.Metadata.Namespace]; ok {
				value = namespace
			}
			resources = append(resources, map[string]any{
				"name":   m.Metadata.Name,
				"values": map[string]any{"meshlifeNamespace": value},
			})
		}
		policies = append(policies, map[string]any{"name": policy, "resources": resources})
	}
	values := map[string]any{
		"apiVersion": "cli.kyverno.io/v1alpha1",
		"kind":       "Value",
		"policies":   policies,
		"namespaces": namespaceList,
	}
	data, err := yaml.Marshal(values)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "values.yaml")
	return path, os.WriteFile(path, data, 0o644)
}

type report struct {
	Results []struct {
		Policy    string `json:"policy"`
		Result    string `json:"result"`
		Message   string `json:"message"`
		Resources []struct {
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"resources"`
	} `json:"results"`
}

func kyvernoApply(kyverno, dir string, policies []string, file, caPEM string) (map[object]map[string]verdict, error) {
	values, err := valuesFile(dir, file)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	args := append([]string{"apply"}, policies...)
	args = append(args, "--resource", file, "--values-file", values, "--policy-report", "--output-format", "json", "--remove-color")
	cmd := exec.Command(kyverno, args...)
	// FLAG_HTTP_BLOCKLIST="": the default blocklist holds 127.0.0.0/8, where the server listens.
	cmd.Env = append(os.Environ(), "FLAG_HTTP_BLOCKLIST=", "SSL_CERT_FILE="+caFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	output, err := cmd.Output()
	// Failures make apply exit 1; the report says what happened.
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, err
	}
	text := string(output)
	start := strings.Index(text, "{\"kind\":\"ClusterReport\"")
	if start < 0 {
		return nil, fmt.Errorf("kyverno apply printed no report (%v):\n%s\n%s", err, text, stderr.String())
	}
	var parsed report
	if err := json.NewDecoder(strings.NewReader(text[start:])).Decode(&parsed); err != nil {
		return nil, fmt.Errorf("kyverno apply's report: %w", err)
	}
	verdicts := map[object]map[string]verdict{}
	for _, result := range parsed.Results {
		if len(result.Resources) != 1 {
			return nil, fmt.Errorf("a result of %s names %d resources", result.Policy, len(result.Resources))
		}
		r := result.Resources[0]
		obj := object{r.Kind, r.Namespace, r.Name}
		switch {
		case result.Result == "pass" || result.Result == "fail":
		case result.Result == "skip" && result.Policy == "meshlife-errors-cel":
			// Its match condition is meshlife's `deny`: false, so nothing to refuse.
			continue
		default:
			return nil, fmt.Errorf("%s under %s: result %q: %s", obj, result.Policy, result.Result, result.Message)
		}
		if verdicts[obj] == nil {
			verdicts[obj] = map[string]verdict{}
		}
		rules := map[string]bool{}
		for _, match := range ruleID.FindAllStringSubmatch(result.Message, -1) {
			rules[match[1]] = true
		}
		verdicts[obj][result.Policy] = verdict{failed: result.Result == "fail", rules: sortedKeys(rules)}
	}
	// meshlife-errors-cel makes its call in a match condition (`.deny == true`), so an object
	// meshlife does not refuse gets no result of it. That is its pass, not a silent one: the
	// same call from meshlife-warnings-cel judged the object (an unreachable server or a
	// refused token is an error there, which fails this run).
	for _, byPolicy := range verdicts {
		if _, judged := byPolicy["meshlife-warnings-cel"]; judged {
			if _, refused := byPolicy["meshlife-errors-cel"]; !refused {
				byPolicy["meshlife-errors-cel"] = verdict{}
			}
		}
	}
	return verdicts, nil
}

type finding struct {
	Kind              string `json:"kind"`
	Namespace         string `json:"namespace"`
	Name              string `json:"name"`
	Rule              string `json:"rule"`
	Severity          string `json:"severity"`
	EnforcementAction string `json:"enforcementAction"`
}

func meshlifeCheck(meshlife, repo, dir, cluster, file string) (map[object][]finding, error) {
	args := []string{"check", "--output", "json", "--fail-on", "none"}
	if cluster != "" {
		args = append(args, "--constraint", filepath.Join(repo, cluster))
	} else {
		// Installed without a cluster file, the server judges under the parameters' defaults;
		// check given no constraint would judge as today's releases, so it is given those
		// defaults too.
		defaults := filepath.Join(dir, "parameter-defaults.yaml")
		constraint := "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: MeshLifecycle\n" +
			"metadata: {name: parameter-defaults}\nspec: {parameters: {}}\n"
		if err := os.WriteFile(defaults, []byte(constraint), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--constraint", defaults)
	}
	cmd := exec.Command(meshlife, append(args, file)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	output, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("meshlife check: %w: %s", err, stderr.String())
	}
	// -o json is an envelope; its findings are the list.
	var envelope struct {
		Findings []finding `json:"findings"`
	}
	if err := json.Unmarshal(output, &envelope); err != nil {
		return nil, fmt.Errorf("meshlife check's JSON: %w", err)
	}
	byObject := map[object][]finding{}
	for _, f := range envelope.Findings {
		obj := object{f.Kind, f.Namespace, f.Name}
		byObject[obj] = append(byObject[obj], f)
	}
	return byObject, nil
}

func makeCertificates(dir string) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kyverno-compat-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	files := map[string][]byte{
		"ca.crt":  []byte(caPEM),
		"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return caPEM, nil
}

// startServer runs `meshlife serve` on ports it picks itself and reads them from its log.
func startServer(meshlife, dir string) (*exec.Cmd, string, error) {
	cmd := exec.Command(meshlife, "serve",
		"--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "tls.crt"), "--tls-key", filepath.Join(dir, "tls.key"),
		"--kyverno-token-file", filepath.Join(dir, "token"), "--no-namespace-watch")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	ready := make(chan [2]string, 1)
	go func() {
		scanner := bufio.NewScanner(stderr)
		routes := regexp.MustCompile(`routes=(\S+) health=(\S+)`)
		for scanner.Scan() {
			if match := routes.FindStringSubmatch(scanner.Text()); match != nil {
				ready <- [2]string{match[1], match[2]}
			}
		}
	}()
	select {
	case addresses := <-ready:
		healthAddress = addresses[1]
		return cmd, addresses[0], nil
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, "", errors.New("meshlife serve did not report ready within 60 s")
	}
}

var healthAddress string

func stopServer(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
	}
}

// serverCounts reads the server's own count of answered Kyverno calls and token refusals.
func serverCounts(healthAddress string) (answered, refused int) {
	client := &http.Client{Timeout: 5 * time.Second}
	response, err := client.Get("http://" + healthAddress + "/metrics")
	if err != nil {
		return -1, -1
	}
	defer response.Body.Close()
	output, err := io.ReadAll(response.Body)
	if err != nil {
		return -1, -1
	}
	for _, line := range strings.Split(string(output), "\n") {
		var value float64
		if strings.HasPrefix(line, `meshlife_requests_total{route="kyverno",outcome="answered"}`) {
			fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &value)
			answered = int(value)
		}
		if strings.HasPrefix(line, `meshlife_refusals_total{reason="unauthenticated"}`) {
			fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &value)
			refused = int(value)
		}
	}
	return answered, refused
}
