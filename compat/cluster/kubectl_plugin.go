package main

// The kubectl plugin: meshlife installed as kubectl-meshlife on PATH, run through the real
// kubectl of the pinned Kubernetes version (cmd/kubectl) the way a user runs it. kubectl finds
// the plugin (`kubectl plugin list`) and runs it with the arguments after `meshlife`; meshlife
// reads the cluster from the kubeconfig kubectl's user has (KUBECONFIG) and takes the flags
// kubectl users type by habit (-n, --context) as kubectl does; its usage and errors name
// `kubectl meshlife`.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// toolRun is one run of kubectl, krew or krew's validator.
type toolRun struct {
	stdout, stderr string
	code           int
}

// runTool runs path with args (env nil: this process's environment).
func runTool(path string, env []string, args ...string) toolRun {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := toolRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		out.code = exit.ExitCode()
	} else if err != nil {
		out.code = -1
		out.stderr += err.Error()
	}
	return out
}

// krewTemplateTag and krewTemplateURIAndSha are what krew-release-bot fills in .krew.yaml: the
// release tag, and `uri:` and `sha256:` lines for each platform's archive.
var (
	krewTemplateTag       = regexp.MustCompile(`\{\{ *\.TagName *\}\}`)
	krewTemplateURIAndSha = regexp.MustCompile(`(?m)^( *)\{\{ *addURIAndSha +"([^"]+)" +\.TagName *\}\}$`)
)

// krewRelease makes what a release gives krew for this binary: the archive
// (meshlife-vX-linux-amd64.tar.gz: the binary and LICENSE) and the repository's .krew.yaml
// rendered as krew-release-bot renders it (the tag, the archive's URI and sha256), written as
// meshlife.yaml (krew wants the file named after the plugin). Returns their paths.
func (h *harness) krewRelease(dir string) (manifest, archive string, err error) {
	version, err := h.runMeshlife("--version")
	if err != nil {
		return "", "", err
	}
	fields := strings.Fields(version.stdout)
	if len(fields) != 2 {
		return "", "", fmt.Errorf("meshlife --version printed %q", version.stdout)
	}
	tag := "v" + fields[1]
	archive = filepath.Join(dir, "meshlife-"+tag+"-linux-amd64.tar.gz")
	if err := writeTarGz(archive, map[string]string{
		"meshlife": h.meshlife,
		"LICENSE":  filepath.Join(h.repo, "LICENSE"),
	}); err != nil {
		return "", "", err
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(data)
	template, err := os.ReadFile(filepath.Join(h.repo, ".krew.yaml"))
	if err != nil {
		return "", "", err
	}
	rendered := krewTemplateURIAndSha.ReplaceAllStringFunc(string(template), func(call string) string {
		parts := krewTemplateURIAndSha.FindStringSubmatch(call)
		uri := krewTemplateTag.ReplaceAllString(parts[2], tag)
		return fmt.Sprintf("%suri: %s\n%ssha256: %s", parts[1], uri, parts[1], hex.EncodeToString(sum[:]))
	})
	rendered = krewTemplateTag.ReplaceAllString(rendered, tag)
	if strings.Contains(rendered, "{{") {
		return "", "", fmt.Errorf(".krew.yaml holds a template call krew-release-bot's two (.TagName, addURIAndSha) do not cover")
	}
	manifest = filepath.Join(dir, "meshlife.yaml")
	return manifest, archive, os.WriteFile(manifest, []byte(rendered), 0o644)
}

// writeTarGz writes a gzipped tar of the files (name in the archive -> path), executable
// when the file is.
func writeTarGz(path string, files map[string]string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	zipped := gzip.NewWriter(out)
	archive := tar.NewWriter(zipped)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		data, err := os.ReadFile(files[name])
		if err != nil {
			return err
		}
		info, err := os.Stat(files[name])
		if err != nil {
			return err
		}
		header := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), Size: int64(len(data)), ModTime: info.ModTime()}
		if err := archive.WriteHeader(header); err != nil {
			return err
		}
		if _, err := archive.Write(data); err != nil {
			return err
		}
	}
	if err := archive.Close(); err != nil {
		return err
	}
	if err := zipped.Close(); err != nil {
		return err
	}
	return out.Close()
}

// kubectlPluginCheck runs `kubectl meshlife diagnose pod/NAME` for the case whose live diagnosis
// is byPod, and expects the same conclusions.
func (h *harness) kubectlPluginCheck(c *diagnoseCase, byPod diagnosis) {
	kubectl := filepath.Join(h.bin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		h.fail("kubectl plugin: %s is missing (compat/cluster/install.sh builds it): %v", kubectl, err)
		return
	}
	dir := filepath.Join(h.dir, "kubectl-plugin")
	os.RemoveAll(dir)
	krewRoot := filepath.Join(dir, "krew")
	if err := os.MkdirAll(krewRoot, 0o755); err != nil {
		h.fail("kubectl plugin: %v", err)
		return
	}
	manifest, archive, err := h.krewRelease(dir)
	if err != nil {
		h.fail("kubectl plugin: the krew release of %s: %v", h.meshlife, err)
		return
	}
	// krew's own validator, as krew-index's CI runs it (structure, platforms, overlaps); the
	// install it would do downloads the release, which krew does below from the archive.
	validated := runTool(filepath.Join(h.bin, "validate-krew-manifest"), nil, "-manifest", manifest, "-skip-install")
	h.check(validated.code == 0, "validate-krew-manifest passes .krew.yaml rendered for this binary (exit %d)%s",
		validated.code, indentLines(lastLines(validated.stdout+validated.stderr, 4)))
	krewEnv := append(os.Environ(), "KREW_ROOT="+krewRoot, "KREW_NO_UPGRADE_CHECK=1")
	installed := runTool(filepath.Join(h.bin, "krew"), krewEnv, "install", "--manifest="+manifest, "--archive="+archive)
	plugin := filepath.Join(krewRoot, "bin", "kubectl-meshlife")
	_, statErr := os.Stat(plugin)
	if !h.check(installed.code == 0 && statErr == nil, "krew install --manifest --archive puts %s on krew's PATH (exit %d)%s",
		plugin, installed.code, indentLines(lastLines(installed.stdout+installed.stderr, 6))) {
		return
	}
	plugins := filepath.Dir(plugin)
	// The user's kubeconfig: the control plane as the context `cluster-compat`, and a current
	// context that reaches nothing, so that only --context finds the cluster.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeTwoContextKubeconfig(h.cp.adminKC, kubeconfig); err != nil {
		h.fail("kubectl plugin: writing %s: %v", kubeconfig, err)
		return
	}
	env := append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kubeconfig, "NO_COLOR=1")
	run := func(args ...string) toolRun { return runTool(kubectl, env, args...) }

	listed := run("plugin", "list")
	h.check(listed.code == 0 && strings.Contains(listed.stdout, plugin),
		"kubectl plugin list finds %s (exit %d)%s", plugin, listed.code, indentLines(listed.stdout+listed.stderr))

	help := run("meshlife", "--help")
	h.check(help.code == 0 && strings.Contains(help.stdout, "Usage: kubectl meshlife"),
		"kubectl meshlife --help: its usage names `kubectl meshlife` (exit %d): %s", help.code, firstLine(help.stdout+help.stderr))

	target := "pod/" + c.pod.Name
	viaKubectl := run("meshlife", "diagnose", target, "-n", c.namespace, "--context", "cluster-compat", "-o", "json")
	var d diagnosis
	if err := json.Unmarshal([]byte(viaKubectl.stdout), &d); err != nil {
		h.fail("kubectl meshlife diagnose %s (exit %d) printed no JSON: %v\n%s", target, viaKubectl.code, err, indentLines(viaKubectl.stderr))
	} else {
		d.code, d.stderr = viaKubectl.code, viaKubectl.stderr
		h.check(d.code != 2 && len(d.Errors) == 0 && len(d.Diagnoses) == 1,
			"%s: kubectl meshlife diagnose %s -n %s --context cluster-compat (KUBECONFIG): exit %d, %d pods, errors %v",
			c.name, target, c.namespace, d.code, len(d.Diagnoses), d.Errors)
		h.compareDiagnoses(c.name, "meshlife diagnose --kubeconfig", "kubectl meshlife diagnose --context", byPod, d)
	}

	// Without --context, the kubeconfig's current context: the cluster that is not there, as
	// kubectl itself would read it; the error names what the user typed.
	elsewhere := run("meshlife", "diagnose", target, "-n", c.namespace)
	h.check(elsewhere.code == 2 && strings.HasPrefix(elsewhere.stderr, "kubectl meshlife: error:") && strings.Contains(elsewhere.stderr, "127.0.0.1:1"),
		"kubectl meshlife diagnose without --context reads the current context (127.0.0.1:1, nothing there) and says so as `kubectl meshlife: error:` (exit %d): %s",
		elsewhere.code, firstLine(elsewhere.stderr))
}

// writeTwoContextKubeconfig copies the admin kubeconfig with a second context, `elsewhere`
// (a server where nothing listens), made the current one.
func writeTwoContextKubeconfig(admin, out string) error {
	config, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		return err
	}
	compat, ok := config.Contexts["cluster-compat"]
	if !ok {
		return fmt.Errorf("%s has no context cluster-compat", admin)
	}
	config.Clusters["elsewhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	config.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "elsewhere", AuthInfo: compat.AuthInfo}
	config.CurrentContext = "elsewhere"
	return clientcmd.WriteToFile(*config, out)
}
