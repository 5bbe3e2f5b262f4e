package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// kube is a client of the API server as kubectl is one: objects from YAML, mapped to their
// resources by discovery, created or applied server-side, each request's warnings kept.
type kube struct {
	config *rest.Config
	core   kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// warningsKey carries a request's warning collector in its context.
type warningsKey struct{}

type warningCollector struct {
	mu       sync.Mutex
	warnings []string
}

// contextWarnings hands each warning header to the collector of the request's context; the
// API server's own deprecation warnings are collected the same way.
type contextWarnings struct{}

func (contextWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, message string) {
	if code != 299 || message == "" {
		return
	}
	if collector, ok := ctx.Value(warningsKey{}).(*warningCollector); ok {
		collector.mu.Lock()
		collector.warnings = append(collector.warnings, message)
		collector.mu.Unlock()
	}
}

func newKube(config *rest.Config) (*kube, error) {
	config = rest.CopyConfig(config)
	config.WarningHandlerWithContext = contextWarnings{}
	core, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	return &kube{
		config: config, core: core, dyn: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
	}, nil
}

// decodeObjects reads every document of a YAML (or JSON) stream; empty documents are skipped.
func decodeObjects(text []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	var out []*unstructured.Unstructured
	for index := 0; ; index++ {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", index+1, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		out = append(out, obj)
	}
}

// resource is where obj lives: its resource client, namespaced when the kind is.
func (k *kube) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A kind whose CRD was created since discovery last ran.
		k.mapper.Reset()
		mapping, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		namespace := obj.GetNamespace()
		if namespace == "" {
			namespace = "default"
		}
		return k.dyn.Resource(mapping.Resource).Namespace(namespace), nil
	}
	return k.dyn.Resource(mapping.Resource), nil
}

func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if obj.GetNamespace() != "" {
		name = obj.GetNamespace() + "/" + name
	}
	return obj.GetKind() + " " + name
}

// apply is `kubectl apply --server-side --force-conflicts`; it returns the API server's
// warnings.
func (k *kube) apply(ctx context.Context, obj *unstructured.Unstructured) ([]string, error) {
	client, err := k.resource(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describe(obj), err)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	collector := &warningCollector{}
	ctx = context.WithValue(ctx, warningsKey{}, collector)
	_, err = client.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "cluster-compat", Force: new(true)})
	if err != nil {
		return collector.warnings, fmt.Errorf("%s: %w", describe(obj), err)
	}
	return collector.warnings, nil
}

// applyAll applies every object in order, retrying for a while when a kind is not served yet
// (a CRD an engine makes from what was just applied, as Gatekeeper makes a constraint's).
func (k *kube) applyAll(ctx context.Context, objs []*unstructured.Unstructured, patience time.Duration) ([]string, error) {
	var all []string
	for _, obj := range objs {
		deadline := time.Now().Add(patience)
		for {
			warnings, err := k.apply(ctx, obj)
			if err == nil {
				all = append(all, warnings...)
				break
			}
			if time.Now().After(deadline) || !retryable(err) {
				return all, err
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return all, nil
}

func retryable(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || strings.Contains(err.Error(), "no matches for kind") ||
		strings.Contains(err.Error(), "connection refused")
}

// create is `kubectl create [--dry-run=server]`: the admission chain's answer for obj.
func (k *kube) create(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) ([]string, error) {
	client, err := k.resource(obj)
	if err != nil {
		return nil, err
	}
	options := metav1.CreateOptions{FieldManager: "cluster-compat"}
	if dryRun {
		options.DryRun = []string{metav1.DryRunAll}
	}
	collector := &warningCollector{}
	ctx = context.WithValue(ctx, warningsKey{}, collector)
	_, err = client.Create(ctx, obj.DeepCopy(), options)
	return collector.warnings, err
}

// remove deletes obj, ignoring one that is gone already.
func (k *kube) remove(ctx context.Context, obj *unstructured.Unstructured) error {
	client, err := k.resource(obj)
	if err != nil {
		return err
	}
	// Background: no finalizer waits for a garbage collector (kube-controller-manager is not
	// run), so the name is free again at once.
	background := metav1.DeletePropagationBackground
	err = client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (k *kube) get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	client, err := k.resource(obj)
	if err != nil {
		return nil, err
	}
	return client.Get(ctx, obj.GetName(), metav1.GetOptions{})
}

// waitUntil polls check until it says done, fails, or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, what string, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		done, err := check()
		if done {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s: not within %v: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func objectFor(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

var _ = schema.GroupVersionResource{}
