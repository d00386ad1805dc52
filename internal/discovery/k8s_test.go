package discovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

const testNS = "tandem"

// pod builds a decode worker pod in testNS, labelled app=tandem, with a
// container port named http (8200), no IP and no conditions; mods change
// it.
func pod(name string, mods ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS,
			Labels: map[string]string{"app": "tandem", RoleLabel: "decode"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tandem",
			Ports: []corev1.ContainerPort{{Name: "transfer", ContainerPort: 9000}, {Name: "http", ContainerPort: 8200}}}}},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func withIP(ip string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.PodIP = ip } }

func withReady(ready bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: st}}
	}
}

func withLabel(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if v == "" {
			delete(p.Labels, k)
			return
		}
		p.Labels[k] = v
	}
}

func withAnnotation(k, v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func inNamespace(ns string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Namespace = ns } }

// fakePods is a fake clientset's pods client as a PodClient that, as the
// fake Clientset itself does, says it does not support watch-list
// semantics, so the informer lists and then watches.
type fakePods struct{ typedcorev1.PodInterface }

func (fakePods) IsWatchListSemanticsUnSupported() bool { return true }

func podsOf(c *fake.Clientset, ns string) fakePods { return fakePods{c.CoreV1().Pods(ns)} }

// k8sEnv is a fake API server and a k8s source on it, inside a synctest
// bubble.
type k8sEnv struct {
	t      *testing.T
	client *fake.Clientset
	src    *k8sSource
	rec    *recorder
	stop   func() error
	logs   *logRecorder
}

func newK8sEnv(t *testing.T, o K8sOptions, objs ...runtime.Object) *k8sEnv {
	t.Helper()
	client := fake.NewClientset(objs...)
	c, _, lr := testCommon()
	o.Common = c
	if o.Namespace == "" {
		o.Namespace = testNS
	}
	src, err := NewK8s(podsOf(client, o.Namespace), o)
	if err != nil {
		t.Fatal(err)
	}
	e := &k8sEnv{t: t, client: client, src: src.(*k8sSource), logs: lr}
	e.rec, e.stop = run(t, src)
	e.settle()
	return e
}

// settle lets the informer and the source catch up: a second of the
// bubble's clock covers the cache-sync poll (100 ms) and the event fan-out.
func (e *k8sEnv) settle() {
	time.Sleep(time.Second)
	synctest.Wait()
}

func (e *k8sEnv) create(p *corev1.Pod) {
	e.t.Helper()
	if _, err := e.client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.settle()
}

// change reads a pod, applies mods and writes it back.
func (e *k8sEnv) change(name string, mods ...func(*corev1.Pod)) {
	e.t.Helper()
	pods := e.client.CoreV1().Pods(testNS)
	p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range mods {
		m(p)
	}
	if _, err := pods.Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.settle()
}

func (e *k8sEnv) delete(name string) {
	e.t.Helper()
	if err := e.client.CoreV1().Pods(testNS).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.settle()
}

// members is the latest snapshot's members, which must equal Status's.
func (e *k8sEnv) members() []Member {
	e.t.Helper()
	last := e.rec.last(e.t).Members
	if st := e.src.Status(); strings.Join(brief(st.Members), "|") != strings.Join(brief(last), "|") {
		e.t.Fatalf("Status members %q differ from the last snapshot's %q", brief(st.Members), brief(last))
	}
	return last
}

// TestK8sPodLifecycle follows one pod from creation to deletion: it
// counts from when it has an IP, is Ready only while PodReady is True and
// it is not terminating, and leaves when deleted; every step is one
// snapshot and one counted change.
func TestK8sPodLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newK8sEnv(t, K8sOptions{Selector: "app=tandem"})
		if n := e.rec.count(); n != 1 || len(e.members()) != 0 || !e.src.Status().Synced {
			t.Fatalf("start: %d snapshots, members %q, want one empty one", n, brief(e.members()))
		}
		e.create(pod("d0"))
		if n := e.rec.count(); n != 1 {
			t.Fatalf("a pod without an IP was delivered: %d snapshots, %q", n, brief(e.members()))
		}
		steps := []struct {
			name string
			mod  []func(*corev1.Pod)
			want []string
			kind ChangeKind
		}{
			{"given an IP", []func(*corev1.Pod){withIP("10.1.0.7")},
				[]string{"tandem/d0 http://10.1.0.7:8200 decode unready(pod not Ready)"}, Added},
			{"Ready", []func(*corev1.Pod){withReady(true)}, []string{"tandem/d0 http://10.1.0.7:8200 decode ready"}, BecameReady},
			{"unready", []func(*corev1.Pod){withReady(false)},
				[]string{"tandem/d0 http://10.1.0.7:8200 decode unready(pod not Ready)"}, BecameUnready},
			{"Ready again", []func(*corev1.Pod){withReady(true)}, []string{"tandem/d0 http://10.1.0.7:8200 decode ready"}, BecameReady},
			{"terminating", []func(*corev1.Pod){func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }},
				[]string{"tandem/d0 http://10.1.0.7:8200 decode unready(terminating)"}, BecameUnready},
		}
		for i, s := range steps {
			e.change("d0", s.mod...)
			if n := e.rec.count(); n != i+2 {
				t.Fatalf("%s: %d snapshots, want %d", s.name, n, i+2)
			}
			wantMembers(t, s.name, e.members(), s.want...)
		}
		e.delete("d0")
		wantMembers(t, "deleted", e.members())
		for kind, want := range map[ChangeKind]float64{Added: 1, BecameReady: 2, BecameUnready: 2, Removed: 1, Updated: 0} {
			if got := counter(t, e.src, "changes", "decode", string(kind)); got != want {
				t.Errorf("changes{kind=%s} = %v, want %v", kind, got, want)
			}
		}
		if st := e.src.Status(); st.Changes != 6 || st.Errors != 0 {
			t.Errorf("Status: %d changes, %d errors; want 6 and 0", st.Changes, st.Errors)
		}
		if n := len(e.logs.matching("worker joined", "tandem/d0")); n != 1 {
			t.Errorf("%d 'worker joined' lines, want 1", n)
		}
		if err := e.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestK8sMembersGauge counts members by role and readiness.
func TestK8sMembersGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newK8sEnv(t, K8sOptions{},
			pod("p0", withLabel(RoleLabel, "prefill"), withIP("10.0.0.1"), withReady(true)),
			pod("d0", withIP("10.0.0.2"), withReady(true)),
			pod("d1", withIP("10.0.0.3"), withReady(false)))
		for _, c := range []struct {
			role, ready string
			want        float64
		}{{"prefill", "true", 1}, {"prefill", "false", 0}, {"decode", "true", 1}, {"decode", "false", 1}, {"unknown", "false", 0}} {
			if got := counter(t, e.src, "members", c.role, c.ready); got != c.want {
				t.Errorf("members{role=%s,ready=%s} = %v, want %v", c.role, c.ready, got, c.want)
			}
		}
		if got := e.rec.last(t).Ready(RoleDecode); len(got) != 1 || got[0].Name != "tandem/d0" {
			t.Errorf("Ready(decode) = %q", brief(got))
		}
	})
}

// TestK8sRelabel: a role that changes updates the member; a role that is
// not a worker's takes it out and is counted and logged once (again when
// the reason changes); leaving the selector takes it out silently.
func TestK8sRelabel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newK8sEnv(t, K8sOptions{Selector: "app=tandem"},
			pod("w0", withLabel(RoleLabel, "prefill"), withIP("10.0.0.1"), withReady(true)))
		wantMembers(t, "start", e.members(), "tandem/w0 http://10.0.0.1:8200 prefill ready")

		e.change("w0", withLabel(RoleLabel, "decode"))
		wantMembers(t, "relabelled decode", e.members(), "tandem/w0 http://10.0.0.1:8200 decode ready")
		if got := counter(t, e.src, "changes", "decode", "update"); got != 1 {
			t.Errorf("changes{decode,update} = %v, want 1", got)
		}
		if m := e.members()[0]; m.Labels[RoleLabel] != "decode" || m.Labels["app"] != "tandem" {
			t.Errorf("labels %v", m.Labels)
		}

		e.change("w0", withLabel(RoleLabel, "router"))
		wantMembers(t, "role router", e.members())
		e.change("w0", withAnnotation("note", "again")) // another event, same reason
		st := e.src.Status()
		if len(st.Ignored) != 1 || st.Ignored[0].Name != "tandem/w0" || !strings.Contains(st.Ignored[0].Reason, `"router"`) {
			t.Errorf("Ignored = %+v", st.Ignored)
		}
		if got := counter(t, e.src, "ignored", "role"); got != 1 {
			t.Errorf("ignored{role} = %v after two events, want 1", got)
		}
		if n := len(e.logs.matching("not a worker", "tandem/w0")); n != 1 {
			t.Errorf("%d 'not a worker' lines, want 1", n)
		}
		e.change("w0", withLabel(RoleLabel, "")) // the label goes: another reason
		if got := counter(t, e.src, "ignored", "role"); got != 2 {
			t.Errorf("ignored{role} = %v after the reason changed, want 2", got)
		}

		e.change("w0", withLabel("app", "other"))
		if st := e.src.Status(); len(st.Ignored) != 0 || len(st.Members) != 0 {
			t.Errorf("out of the selector: %+v", st)
		}
		e.change("w0", withLabel("app", "tandem"), withLabel(RoleLabel, "prefill"))
		wantMembers(t, "back", e.members(), "tandem/w0 http://10.0.0.1:8200 prefill ready")
	})
}

// TestK8sPorts: the named container port (default http, or another name),
// the annotation winning over it, IPv6 addresses; pods with no usable port
// are ignored with a reason.
func TestK8sPorts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		noHTTP := func(p *corev1.Pod) { p.Spec.Containers[0].Ports = p.Spec.Containers[0].Ports[:1] }
		second := func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = nil
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8300}}})
		}
		e := newK8sEnv(t, K8sOptions{},
			pod("named", withIP("10.0.0.1"), withReady(true)),
			pod("second-container", second, withIP("10.0.0.2"), withReady(true)),
			pod("annotated", withAnnotation(PortAnnotation, "9100"), withIP("10.0.0.3"), withReady(true)),
			pod("annotated-only", noHTTP, withAnnotation(PortAnnotation, "9200"), withIP("10.0.0.4"), withReady(true)),
			pod("v6", withIP("fd00::7"), withReady(true)),
			pod("bad-annotation", withAnnotation(PortAnnotation, "http"), withIP("10.0.0.5"), withReady(true)),
			pod("zero-annotation", withAnnotation(PortAnnotation, "0"), withIP("10.0.0.6"), withReady(true)),
			pod("no-port", noHTTP, withIP("10.0.0.8"), withReady(true)))
		wantMembers(t, "members", e.members(),
			"tandem/annotated http://10.0.0.3:9100 decode ready",
			"tandem/annotated-only http://10.0.0.4:9200 decode ready",
			"tandem/named http://10.0.0.1:8200 decode ready",
			"tandem/second-container http://10.0.0.2:8300 decode ready",
			"tandem/v6 http://[fd00::7]:8200 decode ready")
		st := e.src.Status()
		var got []string
		for _, ig := range st.Ignored {
			got = append(got, ig.Name+": "+ig.Reason)
		}
		want := []string{
			`tandem/bad-annotation: annotation tandem.dev/http-port is "http", not a port number`,
			`tandem/no-port: no container port named "http" and no tandem.dev/http-port annotation`,
			`tandem/zero-annotation: annotation tandem.dev/http-port is "0", not a port number`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("Ignored:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got := counter(t, e.src, "ignored", "port"); got != 3 {
			t.Errorf("ignored{port} = %v, want 3", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		e := newK8sEnv(t, K8sOptions{PortName: "transfer"}, pod("named", withIP("10.0.0.1"), withReady(true)))
		wantMembers(t, "PortName transfer", e.members(), "tandem/named http://10.0.0.1:9000 decode ready")
	})
}

// TestK8sSharedAddressAndFinishedPods: of two pods on one IP and port the
// Ready one is the member and the other is ignored, saying why; a pod
// whose containers finished is not a member at all.
func TestK8sSharedAddressAndFinishedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		terminating := func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }
		finished := func(phase corev1.PodPhase) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Status.Phase = phase } }
		e := newK8sEnv(t, K8sOptions{},
			pod("a-old", withIP("10.0.0.1"), withReady(false), terminating),
			pod("b-new", withIP("10.0.0.1"), withReady(true)),
			pod("done", withIP("10.0.0.2"), withReady(false), finished(corev1.PodSucceeded)),
			pod("failed", withIP("10.0.0.3"), withReady(false), finished(corev1.PodFailed)))
		wantMembers(t, "members", e.members(), "tandem/b-new http://10.0.0.1:8200 decode ready")
		st := e.src.Status()
		if len(st.Ignored) != 1 || st.Ignored[0].Name != "tandem/a-old" || !strings.Contains(st.Ignored[0].Reason, "also pod tandem/b-new's") {
			t.Errorf("Ignored %+v", st.Ignored)
		}
		if got := counter(t, e.src, "ignored", "address"); got != 1 {
			t.Errorf("ignored{address} = %v", got)
		}
		e.delete("a-old")
		if st := e.src.Status(); len(st.Ignored) != 0 || len(st.Members) != 1 {
			t.Errorf("after the old pod went: %+v", st)
		}
	})
}

// TestK8sSelectorAndNamespace: only pods of the namespace that match the
// whole selector are seen, whether they exist at the start (list) or
// come later (watch); the selector is sent to the API server too.
func TestK8sSelectorAndNamespace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sel := "app=tandem,tier in (gpu,cpu),!canary"
		gpu := withLabel("tier", "gpu")
		e := newK8sEnv(t, K8sOptions{Selector: sel},
			pod("match", gpu, withIP("10.0.0.1"), withReady(true)),
			pod("no-tier", withIP("10.0.0.2"), withReady(true)),
			pod("canary", gpu, withLabel("canary", "yes"), withIP("10.0.0.3"), withReady(true)),
			pod("other-ns", gpu, inNamespace("elsewhere"), withIP("10.0.0.4"), withReady(true)))
		e.create(pod("late-match", withLabel("tier", "cpu"), withIP("10.0.0.5"), withReady(true)))
		e.create(pod("late-other-app", gpu, withLabel("app", "web"), withIP("10.0.0.6"), withReady(true)))
		e.create(pod("late-tier", withLabel("tier", "tpu"), withIP("10.0.0.7"), withReady(true)))
		e.create(pod("late-other-ns", gpu, inNamespace("elsewhere"), withIP("10.0.0.8"), withReady(true)))
		wantMembers(t, "members", e.members(),
			"tandem/late-match http://10.0.0.5:8200 decode ready",
			"tandem/match http://10.0.0.1:8200 decode ready")
		if st := e.src.Status(); len(st.Ignored) != 0 {
			t.Errorf("pods outside the selector or namespace were ignored, not unseen: %+v", st.Ignored)
		}
		if n := e.rec.count(); n != 2 {
			t.Errorf("%d snapshots, want 2 (start, late-match)", n)
		}
		lists := 0
		for _, a := range e.client.Actions() {
			if a.GetVerb() == "create" {
				continue // the test's own
			}
			if a.GetVerb() != "list" && a.GetVerb() != "watch" {
				t.Errorf("the source did %s %s: it should only list and watch", a.GetVerb(), a.GetResource().Resource)
				continue
			}
			if a.GetResource().Resource != "pods" || a.GetNamespace() != testNS {
				t.Errorf("%s of %s in %q", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
			}
			if l, ok := a.(k8stesting.ListAction); ok {
				lists++
				if got := l.GetListRestrictions().Labels.String(); got != "app=tandem,!canary,tier in (cpu,gpu)" {
					t.Errorf("list sent selector %q", got)
				}
			}
		}
		if lists == 0 {
			t.Error("no list action")
		}
	})
}

// TestK8sRelistAndResyncDoNotFlap: a watch that fails, one that expires
// (which makes the informer list again) and periodic resyncs all recompute
// the membership, and none of them delivers a snapshot or counts a change.
func TestK8sRelistAndResyncDoNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(
			pod("d0", withIP("10.0.0.1"), withReady(true)),
			pod("p0", withLabel(RoleLabel, "prefill"), withIP("10.0.0.2"), withReady(true)))
		var (
			mu       sync.Mutex
			failNext []error
			current  watch.Interface
		)
		// Each new watch takes the next scripted failure, if any; the test
		// can also end the current one.
		client.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(failNext) > 0 {
				err := failNext[0]
				failNext = failNext[1:]
				return true, nil, err
			}
			w, err := client.Tracker().Watch(a.GetResource(), a.GetNamespace(), a.(k8stesting.WatchActionImpl).ListOptions)
			current = w
			return true, w, err
		})
		c, _, lr := testCommon()
		s, err := NewK8s(podsOf(client, testNS), K8sOptions{Common: c, Namespace: testNS, Resync: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		src := s.(*k8sSource)
		rec, stop := run(t, src)
		time.Sleep(time.Second)
		synctest.Wait()
		before := brief(rec.last(t).Members)
		if len(before) != 2 || rec.count() != 1 {
			t.Fatalf("start: %d snapshots, %q", rec.count(), before)
		}
		listsBefore := countVerb(client, "list")
		refreshesBefore := src.refreshes.Load()

		mu.Lock()
		failNext = []error{apierrors.NewInternalError(errors.New("etcd is down")), apierrors.NewResourceExpired("too old resource version")}
		current.Stop() // the watch ends; the next two fail; then a relist
		mu.Unlock()
		time.Sleep(30 * time.Second) // the reflector's backoff, several resyncs
		synctest.Wait()

		if got := countVerb(client, "list"); got <= listsBefore {
			t.Errorf("no relist: %d lists before, %d after", listsBefore, got)
		}
		if got := src.refreshes.Load(); got < refreshesBefore+5 {
			t.Errorf("the membership was recomputed %d times over 30 s of resyncs and a relist, want at least 5", got-refreshesBefore)
		}
		if n := rec.count(); n != 1 {
			t.Errorf("%d snapshots, want 1: a relist or resync delivered an unchanged membership", n)
		}
		if st := src.Status(); st.Changes != 2 {
			t.Errorf("%d changes, want the first 2", st.Changes)
		}
		if got := counter(t, src, "errors", "watch"); got != 1 {
			t.Errorf("errors{watch} = %v, want 1 (the internal error; expiry is routine)", got)
		}
		if n := len(lr.matching("discovery error", "etcd is down")); n != 1 {
			t.Errorf("%d log lines for the watch error, want 1", n)
		}
		if st := src.Status(); st.Failing {
			t.Errorf("still failing after the relist: %+v", st)
		}

		// The new watch works: a change gets through.
		if err := client.CoreV1().Pods(testNS).Delete(context.Background(), "d0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantMembers(t, "after delete", rec.last(t).Members, "tandem/p0 http://10.0.0.2:8200 prefill ready")
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func countVerb(c *fake.Clientset, verb string) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// TestK8sSyncTimeout: pods that cannot be listed fail Run after
// SyncTimeout, naming the cause.
func TestK8sSyncTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("RBAC says no"))
		})
		c, _, _ := testCommon()
		src, err := NewK8s(podsOf(client, testNS), K8sOptions{Common: c, Namespace: testNS, SyncTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		start := time.Now()
		err = src.Run(context.Background(), rec.update)
		if err == nil || !strings.Contains(err.Error(), "no list of pods in namespace tandem within 10s") ||
			!strings.Contains(err.Error(), "RBAC says no") {
			t.Fatalf("Run = %v", err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("Run returned after %v, want the 10s SyncTimeout", d)
		}
		if rec.count() != 0 {
			t.Errorf("a snapshot was delivered without a list")
		}
		if got := counter(t, src, "errors", "sync"); got != 1 {
			t.Errorf("errors{sync} = %v", got)
		}
		if err := src.Run(context.Background(), rec.update); !errors.Is(err, errRunTwice) {
			t.Errorf("second Run = %v", err)
		}
	})
}

// TestK8sOptionsRefused: a missing namespace or client and a bad selector
// are errors that say what to fix.
func TestK8sOptionsRefused(t *testing.T) {
	client := podsOf(fake.NewClientset(), "x")
	for _, c := range []struct {
		o    K8sOptions
		want string
	}{
		{K8sOptions{}, "no namespace given"},
		{K8sOptions{Namespace: "x", Selector: "app in (a"}, "is not a label selector"},
		{K8sOptions{Namespace: "x", Resync: -1}, "negative"},
	} {
		if _, err := NewK8s(client, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewK8s(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
	if _, err := NewK8s(nil, K8sOptions{Namespace: "x"}); err == nil {
		t.Error("NewK8s(nil client) succeeded")
	}
}

// TestK8sKubeconfig: the kubeconfig comes from the path, else $KUBECONFIG;
// its context's namespace is the default; no configuration at all is a
// clear error. NewK8sFromConfig makes a source that talks to that server.
func TestK8sKubeconfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: u
  user: {token: abc}
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: team-a}
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	for _, c := range []struct {
		name, path, env, ns, want string
	}{
		{"path", kc, "", "", "namespace=team-a "},
		{"path, namespace given", kc, "", "mine", "namespace=mine "},
		{"$KUBECONFIG", "", kc, "", "namespace=team-a "},
	} {
		t.Setenv("KUBECONFIG", c.env)
		src, err := NewK8sFromKubeconfig(c.path, K8sOptions{Namespace: c.ns})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if spec := src.Status().Spec; !strings.Contains(spec, c.want) {
			t.Errorf("%s: spec %q, want %q", c.name, spec, c.want)
		}
	}
	t.Setenv("KUBECONFIG", "")
	if _, err := NewK8sFromKubeconfig("", K8sOptions{}); err == nil || !strings.Contains(err.Error(), "no Kubernetes API configuration") {
		t.Errorf("no configuration: %v", err)
	}
	if _, err := NewK8sFromKubeconfig(filepath.Join(dir, "missing"), K8sOptions{}); err == nil {
		t.Error("a missing kubeconfig file was accepted")
	}

	// A server that refuses connections: Run fails after SyncTimeout and
	// says why. (Real time: the dial is real; the wait is the timeout.)
	src, err := NewK8sFromConfig(&rest.Config{Host: "http://127.0.0.1:1"}, K8sOptions{Namespace: "x", SyncTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = src.Run(context.Background(), func(Snapshot) { t.Error("snapshot without a server") })
	if err == nil || !strings.Contains(err.Error(), "no list of pods") {
		t.Errorf("Run against a closed port = %v", err)
	}
}
