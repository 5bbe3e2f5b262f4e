package main

// ML201 under Istio's CNI plugin: istio-cni, chained into the node's network (node.go), installs
// a pod's redirect with its network, before any init container runs; a classic proxy starts
// only after them. istiod injects for the CNI (istio-validation in place of istio-init) when
// its injector's values say pilot.cni.enabled, as an install with istio-cni sets them.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// injectorConfigMap holds the injector's templates and values, which istiod watches.
const injectorConfigMap = "istio-sidecar-injector"

// initWithoutNetwork, ML201: a user init container that calls out, under istio-cni. With a
// classic proxy its calls meet the redirect and no proxy: all refused, the pod never starts.
// Run as the proxy's UID (capture skips it) or under a native proxy that starts before it,
// its calls work. istiod injects the pods while its values say pilot.cni.enabled (dry runs in
// a namespace it serves, the values put back at once, as the other scenarios expect istio-init);
// they are created in a namespace it does not serve, where nothing injects them again.
func (r *reality) initWithoutNetwork(ctx context.Context) error {
	meshed, namespace := classicNamespace+"-cni-injector", classicNamespace+"-cni"
	if err := r.apply(ctx, meshedNamespace(meshed)+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: "+namespace+"}\n"); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, meshed)
	defer r.removeNamespace(ctx, namespace)
	proxyUID := int64(1337)
	variants := []struct {
		name, variant string
		annotations   []string
		runAsUser     *int64
		broken        bool
	}{
		{"cni-classic", "istio-cni, a classic proxy, an init container that calls out (broken)", nil, nil, true},
		{"cni-proxy-uid", "the same init container run as the proxy's UID 1337 (fixed)", nil, &proxyUID, false},
		{"cni-native", "the same under a native proxy (fixed)", []string{nativeAnnotation}, nil, false},
	}
	restore, err := r.injectForCNI(ctx, meshed)
	// Put back on every way out: every other scenario is injected with istio-init.
	defer func() {
		if restore != nil {
			_ = restore()
		}
	}()
	if err != nil {
		return err
	}
	injected := make([]*corev1.Pod, len(variants))
	for i, v := range variants {
		pod, err := r.injectedPod(ctx, podManifest(meshed, "init-"+v.name, v.annotations, 5, "serve", "-listen", ":8080"), func(pod *corev1.Pod) {
			migrate := r.migrateContainer()
			if v.runAsUser != nil {
				migrate.SecurityContext = &corev1.SecurityContext{RunAsUser: v.runAsUser}
			}
			pod.Spec.InitContainers = []corev1.Container{migrate}
		})
		if err != nil {
			return err
		}
		injected[i] = pod
	}
	// Put back at once, and waited for: the pods below are created where nothing injects.
	restoreErr := restore()
	restore = nil
	if restoreErr != nil {
		return restoreErr
	}
	for i, v := range variants {
		if !hasInitContainer(injected[i], "istio-validation") || hasInitContainer(injected[i], "istio-init") {
			return fmt.Errorf("init-%s: istiod did not inject for the CNI (init containers %s)", v.name, containerNames(injected[i]))
		}
		if err := r.createElsewhere(ctx, injected[i], namespace); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "init-" + v.name
		pod, happened, broke, err := r.migrateOutcome(ctx, namespace, name)
		if err != nil {
			return err
		}
		captured, err := r.cniRedirectInstalled(name)
		if err != nil {
			return err
		}
		happened = fmt.Sprintf("istio-cni installed the redirect at %s (init containers %s); %s",
			captured.UTC().Format("15:04:05.000"), containerNames(pod), happened)
		result := scenarioResult{rule: "ML201", variant: v.variant, happened: happened, ok: broke == v.broken}
		r.record(ctx, result, namespace, name, "ML201", v.broken)
	}
	return nil
}

// injectForCNI sets pilot.cni.enabled in the injector's values and waits until istiod injects
// by them (a dry run in namespace shows istio-validation). The function it returns puts the
// values back as they were and waits until istiod injects istio-init again; it is returned
// whenever the values were changed, an error or not.
func (r *reality) injectForCNI(ctx context.Context, namespace string) (func() error, error) {
	configMaps := r.h.k.core.CoreV1().ConfigMaps(istioNamespace)
	config, err := configMaps.Get(ctx, injectorConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	original := config.Data["values"]
	var values map[string]interface{}
	if err := json.Unmarshal([]byte(original), &values); err != nil {
		return nil, fmt.Errorf("%s's values: %w", injectorConfigMap, err)
	}
	pilot, _ := values["pilot"].(map[string]interface{})
	if pilot == nil {
		pilot = map[string]interface{}{}
		values["pilot"] = pilot
	}
	cni, _ := pilot["cni"].(map[string]interface{})
	if cni == nil {
		cni = map[string]interface{}{}
		pilot["cni"] = cni
	}
	cni["enabled"] = true
	if err := r.writeInjectorValues(ctx, values); err != nil {
		return nil, err
	}
	restore := func() error {
		var before map[string]interface{}
		_ = json.Unmarshal([]byte(original), &before)
		if err := r.writeInjectorValues(ctx, before); err != nil {
			return err
		}
		return r.waitInjecting(ctx, namespace, "istio-init")
	}
	return restore, r.waitInjecting(ctx, namespace, "istio-validation")
}

// writeInjectorValues replaces the values of istiod's injector ConfigMap.
func (r *reality) writeInjectorValues(ctx context.Context, values map[string]interface{}) error {
	configMaps := r.h.k.core.CoreV1().ConfigMaps(istioNamespace)
	config, err := configMaps.Get(ctx, injectorConfigMap, metav1.GetOptions{})
	if err != nil {
		return err
	}
	data, _ := json.Marshal(values)
	config.Data["values"] = string(data)
	_, err = configMaps.Update(ctx, config, metav1.UpdateOptions{})
	return err
}

// waitInjecting waits until a dry run in namespace is injected with the init container want.
func (r *reality) waitInjecting(ctx context.Context, namespace, want string) error {
	return waitUntil(ctx, 60*time.Second, "istiod injecting with "+want, func() (bool, error) {
		pod, err := r.injectedPod(ctx, podManifest(namespace, "cni-probe", nil, 5, "serve"), nil)
		if err != nil {
			return false, nil
		}
		return hasInitContainer(pod, want), nil
	})
}

func hasInitContainer(pod *corev1.Pod, name string) bool {
	for _, container := range pod.Spec.InitContainers {
		if container.Name == name {
			return true
		}
	}
	return false
}

// cniRedirectInstalled is when istio-cni finished the pod's iptables (its log's "End iptables
// configuration for POD" line).
func (r *reality) cniRedirectInstalled(pod string) (time.Time, error) {
	path := filepath.Join(r.node.istioCNIRunDir(), "istio-cni.log")
	file, err := os.Open(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("istio-cni's log: %w", err)
	}
	defer file.Close()
	marker := "End iptables configuration for " + pod + " "
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var line struct {
			Time string `json:"time"`
			Msg  string `json:"msg"`
		}
		if json.Unmarshal(scanner.Bytes(), &line) != nil || !strings.Contains(line.Msg, marker) {
			continue
		}
		return time.Parse(time.RFC3339Nano, line.Time)
	}
	return time.Time{}, fmt.Errorf("istio-cni's log (%s) has no redirect installed for %s", path, pod)
}
