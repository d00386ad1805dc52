package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// FieldManager is the field manager of the tier's server-side applies.
const FieldManager = "tandem-k8s-test"

// DecodeManifests splits a multi-document YAML stream (helm template's
// output) into objects, leaving out empty documents.
func DecodeManifests(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode manifest %d: %w", len(objs)+1, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("manifest %d has no kind, apiVersion or name: %v", len(objs)+1, m)
		}
		objs = append(objs, u)
	}
}

// Resource returns the client of obj's resource (namespaced in obj's
// namespace when the kind is namespaced), found through discovery.
func (e *Env) Resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		e.Mapper.Reset() // a CRD installed since the last discovery
		m, err = e.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: the API server does not serve this kind: %w", gvk, obj.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return e.Dynamic.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	return e.Dynamic.Resource(m.Resource), nil
}

// Apply applies obj with server-side apply (forcing ownership of its
// fields), only as a dry run when dryRun (every admission step runs, nothing
// is stored), and returns what the server answered.
func (e *Env) Apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	r, err := e.Resource(obj)
	if err != nil {
		return nil, err
	}
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := r.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		return nil, fmt.Errorf("apply %s %s/%s (dry run %v): %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), dryRun, err)
	}
	return out, nil
}

// Get reads obj back from the server.
func (e *Env) Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r, err := e.Resource(obj)
	if err != nil {
		return nil, err
	}
	return r.Get(ctx, obj.GetName(), metav1.GetOptions{})
}
