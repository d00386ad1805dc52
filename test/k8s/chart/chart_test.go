package chart

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"tandem/test/k8s/kubetest"
)

const (
	chartDir = "../../../deploy/helm/tandem"
	release  = "tandem"
)

// opts start the control plane with the CRDs of the chart's optional kinds.
var opts = kubetest.Options{CRDDirs: []string{"../testdata/crds"}}

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// restricted labels a namespace to enforce, and warn about, the restricted
// Pod Security Standard.
var restricted = map[string]string{
	"pod-security.kubernetes.io/enforce": "restricted",
	"pod-security.kubernetes.io/warn":    "restricted",
	"pod-security.kubernetes.io/audit":   "restricted",
}

// configs returns the chart's ci/*-values.yaml files by short name
// ("default", "all-options", ...).
func configs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = f
	}
	for _, need := range []string{"default", "all-options"} {
		if out[need] == "" {
			t.Fatalf("the chart has no ci/%s-values.yaml (found %v)", need, files)
		}
	}
	return out
}

func TestHelmLint(t *testing.T) {
	bin := kubetest.FindBinaries(t)
	state := t.TempDir()
	lint := func(t *testing.T, args ...string) {
		out, err := kubetest.RunHelm(bin.Helm, "", state, append([]string{"lint", "--strict", chartDir}, args...)...)
		if err != nil {
			t.Fatalf("helm lint --strict %v: %v\n%s", args, err, out)
		}
		if !strings.Contains(string(out), "0 chart(s) failed") {
			t.Fatalf("helm lint --strict %v did not report success:\n%s", args, out)
		}
	}
	t.Run("no-values", func(t *testing.T) { lint(t) })
	for name, file := range configs(t) {
		t.Run(name, func(t *testing.T) { lint(t, "-f", file) })
	}
}

// TestHelmRefusesBadValues checks the chart's own value checks.
func TestHelmRefusesBadValues(t *testing.T) {
	bin := kubetest.FindBinaries(t)
	state := t.TempDir()
	for _, c := range []struct{ set, want string }{
		{"clusterToken.value=short", "at least 16 characters"},
		{"drain.timeoutSeconds=60,decode.terminationGracePeriodSeconds=65", "must be larger than"},
		{"model.source=path", "model.path is required"},
		{"model.source=s3", "is not supported"},
		{"logFormat=xml", "is not supported"},
	} {
		_, err := kubetest.RunHelm(bin.Helm, "", state, "template", release, chartDir, "--set", c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template --set %s: got %v, want an error saying %q", c.set, err, c.want)
		}
	}
}

// render runs helm template for the namespace with the values file and
// decodes the objects.
func render(t *testing.T, env *kubetest.Env, ns, values string) []*unstructured.Unstructured {
	t.Helper()
	out := env.Helm(t, "template", release, chartDir, "--namespace", ns, "-f", values,
		"--kube-version", env.Version, "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
		"--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	objs, err := kubetest.DecodeManifests(out)
	if err != nil {
		t.Fatalf("decode helm template's output: %v", err)
	}
	return objs
}

// wantKinds are the objects each configuration renders, by kind.
var wantKinds = map[string]map[string]int{
	"default": {"Deployment": 3, "Service": 3, "Secret": 1, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1,
		"PodDisruptionBudget": 3, "NetworkPolicy": 3},
	"all-options": {"Deployment": 3, "Service": 3, "Secret": 2, "ServiceAccount": 1, "Role": 1, "RoleBinding": 1,
		"PodDisruptionBudget": 3, "NetworkPolicy": 3, "HorizontalPodAutoscaler": 2, "ServiceMonitor": 1, "PrometheusRule": 1},
	"model-path": {"Deployment": 3, "Service": 3, "Role": 1, "RoleBinding": 1},
}

// TestChartAccepted applies every configuration to the API server: each
// object by server-side apply as a dry run, then for real, and a Pod made
// from each Deployment's template, in a namespace that enforces the
// restricted Pod Security Standard. Any error or API warning fails.
func TestChartAccepted(t *testing.T) {
	env := kubetest.Shared(t, opts)
	ctx := context.Background()
	for name, file := range configs(t) {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t, "chart-"+name, restricted)
			objs := render(t, env, ns, file)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			if want, ok := wantKinds[name]; ok && fmt.Sprint(kinds) != fmt.Sprint(want) {
				t.Errorf("rendered %v, want %v", kinds, want)
			}
			checkRendered(t, ns, objs)

			env.Warnings()
			for _, dry := range []bool{true, false} {
				for _, o := range objs {
					if _, err := env.Apply(ctx, o, dry); err != nil {
						t.Error(err)
					}
				}
				if w := env.Warnings(); len(w) > 0 {
					t.Errorf("the API server warned (dry run %v):\n  %s", dry, strings.Join(w, "\n  "))
				}
			}
			for _, o := range objs {
				got, err := env.Get(ctx, o)
				if err != nil {
					t.Errorf("read back %s %s: %v", o.GetKind(), o.GetName(), err)
				} else if got.GetUID() == "" {
					t.Errorf("%s %s has no uid", o.GetKind(), o.GetName())
				}
			}
			for _, d := range ofKind[appsv1.Deployment](t, objs, "Deployment") {
				pod := podFromTemplate(t, ns, d)
				if _, err := env.Apply(ctx, pod, true); err != nil {
					t.Errorf("a pod of Deployment %s is refused: %v", d.Name, err)
				}
			}
			if w := env.Warnings(); len(w) > 0 {
				t.Errorf("the API server warned about the pods:\n  %s", strings.Join(w, "\n  "))
			}
			t.Logf("%d objects accepted: %v", len(objs), kinds)
			if sas := ofKind[rbacv1.RoleBinding](t, objs, "RoleBinding"); len(sas) == 1 {
				checkRouterRBAC(t, env, ns, sas[0].Subjects[0].Name)
			}
		})
	}
}

// podFromTemplate makes the Pod a Deployment's ReplicaSet would create.
func podFromTemplate(t *testing.T, ns string, d *appsv1.Deployment) *unstructured.Unstructured {
	t.Helper()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name + "-probe", Labels: d.Spec.Template.Labels, Annotations: d.Spec.Template.Annotations},
		Spec:       d.Spec.Template.Spec,
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u
}

// ofKind converts the objects of kind to their typed form.
func ofKind[T any](t *testing.T, objs []*unstructured.Unstructured, kind string) []*T {
	t.Helper()
	var out []*T
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		v := new(T)
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v); err != nil {
			t.Fatalf("%s %s: %v", kind, o.GetName(), err)
		}
		out = append(out, v)
	}
	return out
}

// argValue returns the value of --name=VALUE among args.
func argValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkRendered checks what the API server does not: that the routers'
// discovery finds the workers and only them, the drain budget, the probes,
// the security contexts and the routers' Role.
func checkRendered(t *testing.T, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	deps := map[string]*appsv1.Deployment{}
	for _, d := range ofKind[appsv1.Deployment](t, objs, "Deployment") {
		deps[d.Spec.Template.Labels["app.kubernetes.io/component"]] = d
	}
	router, prefill, decode := deps["router"], deps["prefill"], deps["decode"]
	if router == nil || prefill == nil || decode == nil {
		t.Fatalf("want router, prefill and decode Deployments, got %v", slices.Collect(maps.Keys(deps)))
	}
	rc := router.Spec.Template.Spec.Containers[0]
	if rc.Args[0] != "route" || !slices.Contains(rc.Args, "--discovery=k8s") {
		t.Errorf("router args %v: want `route --discovery=k8s ...`", rc.Args)
	}
	if v, _ := argValue(rc.Args, "discovery-namespace"); v != ns {
		t.Errorf("router --discovery-namespace=%q, want %q", v, ns)
	}
	selText, _ := argValue(rc.Args, "discovery-selector")
	sel, err := labels.Parse(selText)
	if err != nil {
		t.Fatalf("router --discovery-selector=%q: %v", selText, err)
	}
	if sel.Matches(labels.Set(router.Spec.Template.Labels)) {
		t.Errorf("the routers' selector %q matches the router pods", selText)
	}
	for role, d := range map[string]*appsv1.Deployment{"prefill": prefill, "decode": decode} {
		l := d.Spec.Template.Labels
		if !sel.Matches(labels.Set(l)) {
			t.Errorf("the routers' selector %q does not match the %s pods (labels %v)", selText, role, l)
		}
		if l["llm-d.ai/role"] != role || l["llm-d.ai/inferenceServing"] != "true" {
			t.Errorf("%s pods carry %v: want llm-d.ai/role=%s, llm-d.ai/inferenceServing=true", role, l, role)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if c.Args[0] != role {
			t.Errorf("%s container runs %v", role, c.Args)
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" }) {
			t.Errorf("%s container has no port named http: %v", role, c.Ports)
		}
		for other, od := range deps {
			if other != role && labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(od.Spec.Template.Labels)) {
				t.Errorf("the %s Deployment's selector matches the %s pods", role, other)
			}
		}
	}
	if v, _ := argValue(prefill.Spec.Template.Spec.Containers[0].Args, "transfer-advertise"); v != "$(POD_IP)" {
		t.Errorf("prefill --transfer-advertise=%q, want $(POD_IP) alone: decode workers dial the pod's IP, and the worker adds the port (an IPv6 address needs brackets)", v)
	}
	for _, d := range deps {
		checkPod(t, d)
	}
	roles := ofKind[rbacv1.Role](t, objs, "Role")
	if len(roles) != 1 || len(roles[0].Rules) != 1 {
		t.Fatalf("want one Role with one rule, got %+v", roles)
	}
	r := roles[0].Rules[0]
	if fmt.Sprint(r.APIGroups, r.Resources, r.Verbs) != "[] [pods] [get list watch]" {
		t.Errorf("the routers' Role grants %v %v %v; want only get, list, watch on pods", r.APIGroups, r.Resources, r.Verbs)
	}
}

// checkPod checks a Deployment's pod template: grace period above the drain
// budget, probes, and the security contexts.
func checkPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	var budget time.Duration
	for _, f := range []string{"drain-settle", "drain-timeout"} {
		v, ok := argValue(c.Args, f)
		dur, err := time.ParseDuration(v)
		if !ok || err != nil {
			t.Errorf("%s: --%s=%q: %v", d.Name, f, v, err)
		}
		budget += dur
	}
	if spec.TerminationGracePeriodSeconds == nil || time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second <= budget {
		t.Errorf("%s: terminationGracePeriodSeconds %v is not above --drain-settle + --drain-timeout (%v)", d.Name, spec.TerminationGracePeriodSeconds, budget)
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s: %s probe %+v, want GET %s on port http", d.Name, what, p, path)
		}
	}
	probe("startup", c.StartupProbe, "/health")
	probe("readiness", c.ReadinessProbe, "/ready")
	probe("liveness", c.LivenessProbe, "/health")
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("%s: pod security context %+v: want runAsNonRoot and a non-zero runAsUser", d.Name, ps)
	}
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		s := c.SecurityContext
		if s == nil || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
			s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
			s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) > 0 {
			t.Errorf("%s: container %s security context %+v: want a read-only root, no privilege escalation, all capabilities dropped", d.Name, c.Name, s)
		}
	}
}

// checkRouterRBAC checks, as the routers' ServiceAccount, that it may get,
// list and watch pods in its namespace and nothing else.
func checkRouterRBAC(t *testing.T, env *kubetest.Env, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	as, err := env.Impersonate("system:serviceaccount:"+ns+":"+sa, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the routers' ServiceAccount cannot list pods: %v", err)
	}
	w, err := as.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("the routers' ServiceAccount cannot watch pods: %v", err)
	} else {
		w.Stop()
	}
	forbidden := func(what string, err error) {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the routers' ServiceAccount %s: got %v, want Forbidden", what, err)
		}
	}
	_, err = as.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	forbidden("lists secrets", err)
	_, err = as.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	forbidden("lists pods of another namespace", err)
	err = as.CoreV1().Pods(ns).Delete(ctx, "any", metav1.DeleteOptions{})
	forbidden("deletes a pod", err)
	_, err = as.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{})
	forbidden("creates a pod", err)
}

// TestTokenKeptOnUpgrade installs the chart with helm (a generated cluster
// token), upgrades it, and checks that the token stayed; another release
// gets a token of its own.
func TestTokenKeptOnUpgrade(t *testing.T) {
	env := kubetest.Shared(t, opts)
	ctx := context.Background()
	token := func(ns string) string {
		s, err := env.Client.CoreV1().Secrets(ns).Get(ctx, release+"-cluster-token", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("read the cluster token Secret: %v", err)
		}
		return string(s.Data["token"])
	}
	ns := env.Namespace(t, "chart-upgrade", restricted)
	env.Helm(t, "install", release, chartDir, "--namespace", ns)
	first := token(ns)
	if len(first) != 48 {
		t.Fatalf("generated token has %d characters, want 48", len(first))
	}
	env.Helm(t, "upgrade", release, chartDir, "--namespace", ns, "--set", "router.replicas=3")
	if got := token(ns); got != first {
		t.Errorf("helm upgrade changed the generated token")
	}
	given := "0123456789abcdef-given"
	env.Helm(t, "upgrade", release, chartDir, "--namespace", ns, "--set", "clusterToken.value="+given)
	if got := token(ns); got != given {
		t.Errorf("with clusterToken.value the Secret holds %q, want %q", got, given)
	}
	other := env.Namespace(t, "chart-upgrade-other", restricted)
	env.Helm(t, "install", release, chartDir, "--namespace", other)
	if token(other) == first {
		t.Errorf("two releases got the same generated token")
	}
}
