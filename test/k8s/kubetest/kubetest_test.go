package kubetest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestPodLifecycle drives a pod through what a router's discovery sees:
// created (not ready), ready with a loopback IP, not ready, terminating, gone;
// a watch through a kubeconfig file, as a local process would open it, sees
// each step.
func TestPodLifecycle(t *testing.T) {
	e := Shared(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := e.Namespace(t, "pod-lifecycle", nil)

	// A user bound to nothing but a Role on pods, through a kubeconfig file.
	kc, err := e.UserKubeconfig("pod-watcher")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("load %s: %v", kc, err)
	}
	watcher := kubernetes.NewForConfigOrDie(cfg)
	if _, err := watcher.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a user with no binding lists pods: %v", err)
	}
	grantPodReader(t, e, ns, "pod-watcher")
	// The authorizer sees the new binding through its informers, shortly.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := watcher.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the user cannot list pods after the Role binding: %v", err)
	}
	w, err := watcher.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "llm-d.ai/role=decode"})
	if err != nil {
		t.Fatalf("watch pods through the kubeconfig file: %v", err)
	}
	defer w.Stop()
	next := func(want watch.EventType, check func(*corev1.Pod) bool, what string) {
		t.Helper()
		for {
			select {
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					t.Fatalf("watch event %v: %T", ev.Type, ev.Object)
				}
				if ev.Type == want && check(p) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %s event showing %s", want, what)
			}
		}
	}

	_, err = e.CreatePod(ctx, Pod{Namespace: ns, Name: "decode-0",
		Labels:      map[string]string{"llm-d.ai/role": "decode", "llm-d.ai/inferenceServing": "true"},
		Annotations: map[string]string{"example.com/port": "8001"},
		Ports:       []corev1.ContainerPort{{Name: "http", ContainerPort: 8001}}})
	if err != nil {
		t.Fatal(err)
	}
	next(watch.Added, func(p *corev1.Pod) bool { return !ready(p) && p.Spec.Containers[0].Ports[0].Name == "http" }, "a new pod, not ready")

	if _, err := e.SetPodReady(ctx, ns, "decode-0", "127.0.0.2", true); err != nil {
		t.Fatal(err)
	}
	next(watch.Modified, func(p *corev1.Pod) bool { return ready(p) && p.Status.PodIP == "127.0.0.2" }, "ready at 127.0.0.2")

	if _, err := e.SetPodReady(ctx, ns, "decode-0", "127.0.0.2", false); err != nil {
		t.Fatal(err)
	}
	next(watch.Modified, func(p *corev1.Pod) bool { return !ready(p) }, "not ready")

	p, err := e.TerminatePod(ctx, ns, "decode-0", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Errorf("deletionGracePeriodSeconds %v, want 30", p.DeletionGracePeriodSeconds)
	}
	next(watch.Modified, func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }, "a deletionTimestamp")

	if err := e.DeletePod(ctx, ns, "decode-0"); err != nil {
		t.Fatal(err)
	}
	next(watch.Deleted, func(*corev1.Pod) bool { return true }, "the pod gone")
}

// TestFindBinariesRequired checks that a missing binary fails the tier when
// TANDEM_K8S_TESTS=1 and skips it otherwise.
func TestFindBinariesRequired(t *testing.T) {
	for _, c := range []struct {
		required string
		want     string
	}{{"1", "failed"}, {"", "skipped"}, {"0", "skipped"}} {
		t.Setenv(Required, c.required)
		t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
		t.Setenv("TEST_ASSET_KUBE_APISERVER", "")
		t.Setenv("TEST_ASSET_ETCD", "")
		t.Setenv("TEST_ASSET_HELM", "")
		ft := &fakeT{TB: t}
		done := make(chan struct{})
		go func() { // Skip and Fatal end the goroutine, as they end a test
			defer close(done)
			FindBinaries(ft)
		}()
		<-done
		if got := ft.outcome(); got != c.want {
			t.Errorf("%s=%q with no binaries: %s, want %s (%s)", Required, c.required, got, c.want, ft.msg)
		}
	}
}

// fakeT records how FindBinaries ends a test.
type fakeT struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Skip(args ...any) {
	f.skipped, f.msg = true, fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeT) Skipf(format string, args ...any) { f.Skip(fmt.Sprintf(format, args...)) }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) outcome() string {
	switch {
	case f.failed:
		return "failed"
	case f.skipped:
		return "skipped"
	}
	return "ran"
}

// grantPodReader lets user get, list and watch pods in ns.
func grantPodReader(t *testing.T, e *Env, ns, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := e.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pod-reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}}
	if _, err := e.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
