package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// install runs `meshlife install TARGET ARGS... --url URL` and reads what it prints.
func install(meshlife, repo string, args ...string) ([]*unstructured.Unstructured, []byte, error) {
	cmd := exec.Command(meshlife, append([]string{"install"}, args...)...)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, nil, fmt.Errorf("meshlife install %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	objs, err := decodeObjects(stdout.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("meshlife install %s printed YAML that does not decode: %w", strings.Join(args, " "), err)
	}
	return objs, stdout.Bytes(), nil
}

// server is `meshlife serve` run as the install's Deployment runs it: its arguments, its
// volumes (Secrets and ConfigMaps read from the API server, as the kubelet mounts them) and,
// when the pod mounts one, a token of its ServiceAccount; only the listening addresses are
// the harness's, on loopback.
type server struct {
	name       string
	meshlife   string
	args       []string
	env        []string
	dir        string
	routesPort int
	healthPort int
	proc       *process
	procs      *processes
}

func (s *server) url() string    { return fmt.Sprintf("https://127.0.0.1:%d", s.routesPort) }
func (s *server) health() string { return fmt.Sprintf("http://127.0.0.1:%d", s.healthPort) }

// serverOf prepares the server of the Deployment among objs (already applied to the cluster).
func serverOf(ctx context.Context, k *kube, cp *controlPlane, procs *processes, meshlife, dir, name string, routesPort int, objs []*unstructured.Unstructured) (*server, error) {
	var deployment *unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" {
			deployment = obj
		}
	}
	if deployment == nil {
		return nil, errors.New("the install prints no Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		return nil, fmt.Errorf("the install's Deployment has %d containers, expected 1", len(containers))
	}
	container := containers[0].(map[string]interface{})
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	volumes, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "volumes")
	mounts, _, _ := unstructured.NestedSlice(container, "volumeMounts")
	healthPort, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{name: name, meshlife: meshlife, dir: dir, routesPort: routesPort, healthPort: healthPort, procs: procs}
	namespace := deployment.GetNamespace()
	// Each mount path becomes a folder of the server's own, filled as the kubelet fills it.
	paths := map[string]string{}
	for _, m := range mounts {
		mount := m.(map[string]interface{})
		volumeName, _ := mount["name"].(string)
		mountPath, _ := mount["mountPath"].(string)
		local := filepath.Join(dir, "mounts", volumeName)
		if err := os.MkdirAll(local, 0o700); err != nil {
			return nil, err
		}
		paths[mountPath] = local
		for _, v := range volumes {
			volume := v.(map[string]interface{})
			if volume["name"] != volumeName {
				continue
			}
			if err := fillVolume(ctx, k, namespace, volume, local); err != nil {
				return nil, fmt.Errorf("volume %s of the Deployment: %w", volumeName, err)
			}
		}
	}
	for _, arg := range args {
		switch {
		case strings.HasPrefix(arg, "--listen="):
			arg = fmt.Sprintf("--listen=127.0.0.1:%d", routesPort)
		case strings.HasPrefix(arg, "--health-listen="):
			arg = fmt.Sprintf("--health-listen=127.0.0.1:%d", healthPort)
		case strings.HasPrefix(arg, "--log-format="):
			arg = "--log-format=text"
		}
		for mountPath, local := range paths {
			arg = strings.Replace(arg, "="+mountPath+"/", "="+local+"/", 1)
		}
		s.args = append(s.args, arg)
	}
	if cache, ok := paths["/cache"]; ok {
		s.env = append(s.env, "XDG_CACHE_HOME="+cache)
	}
	automount, _, _ := unstructured.NestedBool(deployment.Object, "spec", "template", "spec", "automountServiceAccountToken")
	if automount {
		account, _, _ := unstructured.NestedString(deployment.Object, "spec", "template", "spec", "serviceAccountName")
		kubeconfig, err := serviceAccountKubeconfig(ctx, k, cp, namespace, account, dir)
		if err != nil {
			return nil, err
		}
		s.env = append(s.env, "KUBECONFIG="+kubeconfig)
	} else {
		// No token in the pod, so no configuration: the harness's own must not leak in.
		s.env = append(s.env, "KUBECONFIG=", "HOME="+dir, "KUBERNETES_SERVICE_HOST=")
	}
	return s, nil
}

// fillVolume writes a secret or configMap volume's keys (or its items) into dir.
func fillVolume(ctx context.Context, k *kube, namespace string, volume map[string]interface{}, dir string) error {
	var data map[string][]byte
	var items []interface{}
	switch {
	case volume["secret"] != nil:
		source := volume["secret"].(map[string]interface{})
		name, _ := source["secretName"].(string)
		secret, err := k.core.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		data = secret.Data
		items, _ = source["items"].([]interface{})
	case volume["configMap"] != nil:
		source := volume["configMap"].(map[string]interface{})
		name, _ := source["name"].(string)
		configMap, err := k.core.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		data = map[string][]byte{}
		for key, value := range configMap.Data {
			data[key] = []byte(value)
		}
		items, _ = source["items"].([]interface{})
	case volume["emptyDir"] != nil:
		return nil
	default:
		return fmt.Errorf("a volume the harness cannot fill: %v", volume)
	}
	files := map[string]string{}
	for key := range data {
		files[key] = key
	}
	if len(items) > 0 {
		files = map[string]string{}
		for _, item := range items {
			entry := item.(map[string]interface{})
			files[entry["key"].(string)] = entry["path"].(string)
		}
	}
	for key, path := range files {
		value, ok := data[key]
		if !ok {
			return fmt.Errorf("key %s is missing", key)
		}
		if err := os.WriteFile(filepath.Join(dir, path), value, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountKubeconfig is what an in-cluster pod of that account authenticates with: a
// token the API server issues for it (TokenRequest), in a kubeconfig the server reads.
func serviceAccountKubeconfig(ctx context.Context, k *kube, cp *controlPlane, namespace, account, dir string) (string, error) {
	token, err := accountToken(ctx, k, namespace, account)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, account+".kubeconfig")
	return path, writeKubeconfig(path, cp.admin.Host, cp.ca.certPEM, func(auth *clientcmdapi.AuthInfo) {
		auth.Token = token
	})
}

func accountToken(ctx context.Context, k *kube, namespace, account string) (string, error) {
	request := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600 * 4))}}
	answer, err := k.core.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, account, request, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for ServiceAccount %s/%s: %w", namespace, account, err)
	}
	return answer.Status.Token, nil
}

func (s *server) start(ctx context.Context) error {
	// The container's args begin with the subcommand, as the image's entrypoint is meshlife.
	proc, err := s.procs.start(s.name, s.meshlife, s.args, s.env)
	if err != nil {
		return err
	}
	s.proc = proc
	return waitHTTP(ctx, proc, s.health()+"/readyz", 60*time.Second)
}

// stop sends SIGTERM and returns the exit code.
func (s *server) stop() int {
	s.proc.stop(30 * time.Second)
	s.procs.forget(s.proc)
	if s.proc.cmd.ProcessState == nil {
		return -1
	}
	return s.proc.cmd.ProcessState.ExitCode()
}

// metric reads one sample of the server's /metrics (0 when absent).
func (s *server) metric(prefix string) float64 {
	output, err := httpGet(s.health() + "/metrics")
	if err != nil {
		return -1
	}
	total := 0.0
	for _, line := range strings.Split(output, "\n") {
		if strings.HasPrefix(line, prefix) {
			value, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			total += value
		}
	}
	return total
}

// finding is one line of `meshlife check -o json`.
type finding struct {
	File              string `json:"file"`
	Kind              string `json:"kind"`
	Namespace         string `json:"namespace"`
	Name              string `json:"name"`
	Rule              string `json:"rule"`
	Severity          string `json:"severity"`
	Msg               string `json:"msg"`
	Fix               string `json:"fix"`
	EnforcementAction string `json:"enforcementAction"`
	Constraint        string `json:"constraint"`
}

func (f finding) object() string {
	return f.Kind + " " + f.Namespace + "/" + f.Name
}

// meshlifeCheck is `meshlife check --constraint CLUSTER -o json FILES...` from the repository.
func meshlifeCheck(meshlife, repo, cluster string, files []string) ([]finding, error) {
	args := []string{"check", "-o", "json"}
	if cluster != "" {
		args = append(args, "--constraint", cluster)
	}
	cmd := exec.Command(meshlife, append(args, files...)...)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return nil, fmt.Errorf("meshlife %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	// -o json is an envelope; its findings are the list.
	var out struct {
		Findings []finding `json:"findings"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("meshlife check -o json printed no JSON envelope: %w", err)
	}
	return out.Findings, nil
}

var ruleID = regexp.MustCompile(`\bML[0-9]{3}\b`)

// rulesIn are the rule ids a text names, sorted and once each.
func rulesIn(texts ...string) []string {
	set := map[string]bool{}
	for _, text := range texts {
		for _, id := range ruleID.FindAllString(text, -1) {
			set[id] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}
