package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// PortAnnotation on a pod names its HTTP port by number; it wins over the
// named container port.
const PortAnnotation = "tandem.dev/http-port"

// The k8s defaults.
const (
	DefaultSelector    = RoleLabel // pods that carry a role label at all
	DefaultPortName    = "http"
	DefaultSyncTimeout = 30 * time.Second
)

// K8sOptions configures a Kubernetes source.
type K8sOptions struct {
	Common
	// Namespace whose pods are watched; required by NewK8s. New (from
	// flags) defaults it to the kubeconfig context's namespace, or the
	// router pod's own when it runs in a cluster.
	Namespace string
	// Selector is a label selector in full syntax ("app=tandem,tier in
	// (a,b),!canary"); default DefaultSelector. It is sent to the API
	// server and checked again on every pod.
	Selector string
	// PortName is the name of the container port that serves the worker's
	// HTTP API; default DefaultPortName. PortAnnotation wins over it.
	PortName string
	// Resync is the informer's resync period; 0 (the default) none.
	// Resyncs never change the membership by themselves.
	Resync time.Duration
	// SyncTimeout bounds the first list of pods; default
	// DefaultSyncTimeout. Run fails past it.
	SyncTimeout time.Duration
}

// PodClient lists and watches the pods of one namespace. client-go's typed
// pods client (clientset.CoreV1().Pods(namespace)) is one;
// NewK8sFromConfig builds a lighter one. A client that says it does not
// support watch-list semantics (IsWatchListSemanticsUnSupported, as
// client-go's fake clientset) gets a plain list, then a watch.
type PodClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// k8sSource watches pods through a client-go shared informer, built on a
// ListWatch as client-go's SharedInformerFactory builds its pod informer
// (the namespace's pods, the label selector in the list and watch
// options), without the factory, which links every API group (see
// restPods).
type k8sSource struct {
	*core
	pods PodClient
	o    K8sOptions
	sel  labels.Selector

	refreshes atomic.Int64 // how many times the membership was recomputed (tests)
}

// NewK8s returns a source of the pods that pods lists, which must be those
// of o.Namespace. It needs only list and watch on pods.
func NewK8s(pods PodClient, o K8sOptions) (Source, error) {
	if pods == nil {
		return nil, errors.New("discovery k8s: no Kubernetes client")
	}
	if o.Namespace == "" {
		return nil, errors.New("discovery k8s: no namespace given; give --discovery-namespace")
	}
	if o.Selector == "" {
		o.Selector = DefaultSelector
	}
	sel, err := labels.Parse(o.Selector)
	if err != nil {
		return nil, fmt.Errorf("discovery k8s: --discovery-selector %q is not a label selector: %w", o.Selector, err)
	}
	if o.PortName == "" {
		o.PortName = DefaultPortName
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if o.Resync < 0 || o.SyncTimeout < 0 {
		return nil, errors.New("discovery k8s: negative resync or sync timeout")
	}
	met, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	spec := fmt.Sprintf("k8s namespace=%s selector=%s port=%s", o.Namespace, sel.String(), o.PortName)
	return &k8sSource{core: newCore("k8s", spec, o.Logger, met), pods: pods, o: o, sel: sel}, nil
}

// NewK8sFromKubeconfig is NewK8sFromConfig with the configuration client-go
// finds: the kubeconfig file at path when given, else $KUBECONFIG, else
// ~/.kube/config, else the in-cluster service account. An empty
// o.Namespace takes that configuration's namespace (in a cluster, the
// router pod's own).
func NewK8sFromKubeconfig(path string, o K8sOptions) (Source, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, errors.New("discovery k8s: no Kubernetes API configuration: not running in a cluster, and no --kubeconfig, $KUBECONFIG or ~/.kube/config")
		}
		return nil, fmt.Errorf("discovery k8s: load the Kubernetes API configuration: %w", err)
	}
	if o.Namespace == "" {
		ns, _, err := cc.Namespace()
		if err != nil {
			return nil, fmt.Errorf("discovery k8s: find the namespace (give --discovery-namespace): %w", err)
		}
		o.Namespace = ns
	}
	return NewK8sFromConfig(cfg, o)
}

// Status returns what the source sees now.
func (k *k8sSource) Status() Status { return k.status() }

// Run watches the pods until ctx ends. It returns an error when the first
// list does not complete within SyncTimeout (check the API server, the
// namespace and the permission to list and watch pods).
func (k *k8sSource) Run(ctx context.Context, update func(Snapshot)) error {
	if err := k.start(); err != nil {
		return err
	}
	sel := k.sel.String()
	pods := k.pods
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			lo.LabelSelector = sel
			return pods.List(ctx, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.LabelSelector = sel
			return pods.Watch(ctx, lo)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, k.pods), &corev1.Pod{},
		cache.SharedIndexInformerOptions{ResyncPeriod: k.o.Resync, ObjectDescription: "pods " + k.o.Namespace + " " + sel})
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("discovery k8s: %w", err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(k.watchError); err != nil {
		return fmt.Errorf("discovery k8s: %w", err)
	}
	// Handlers only signal; Run recomputes the membership from the
	// informer's store, so a burst of events costs one pass and a relist
	// or resync that changes nothing delivers nothing.
	kick := make(chan struct{}, 1)
	signal := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}); err != nil {
		return fmt.Errorf("discovery k8s: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, below: the informer's goroutines end
	defer cancel()
	wg.Go(func() { inf.RunWithContext(ctx) })
	sctx, scancel := context.WithTimeout(ctx, k.o.SyncTimeout)
	synced := cache.WaitForCacheSync(sctx.Done(), inf.HasSynced)
	scancel()
	if !synced {
		if ctx.Err() != nil {
			return nil
		}
		why := ""
		if last := k.status().LastError; last != "" {
			why = "; last error: " + last
		}
		err := fmt.Errorf("discovery k8s: no list of pods in namespace %s within %v: check the API server address, the namespace and the permission to list and watch pods%s",
			k.o.Namespace, k.o.SyncTimeout, why)
		k.fail(errSync, err)
		return err
	}
	k.refresh(inf.GetStore(), update)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
			k.recovered(errWatch) // events flow again
			k.refresh(inf.GetStore(), update)
		}
	}
}

// watchError counts a failed list or watch; client-go retries it with
// backoff. An expired resource version or a closed watch is routine.
func (k *k8sSource) watchError(_ context.Context, _ *cache.Reflector, err error) {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) {
		k.log.Debug("pod watch restarts", "err", err)
		return
	}
	k.fail(errWatch, fmt.Errorf("list or watch pods in namespace %s: %w", k.o.Namespace, err))
}

// refresh recomputes the membership from the informer's store.
func (k *k8sSource) refresh(store cache.Store, update func(Snapshot)) {
	k.refreshes.Add(1)
	var ms []Member
	ignored := map[string]ignore{}
	for _, obj := range store.List() {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		m, ig, ok := k.member(p)
		switch {
		case ig != nil:
			ignored[m.Name] = *ig
		case ok:
			ms = append(ms, m)
		}
	}
	k.publish(dedupeURLs(ms, ignored), ignored, update)
}

// dedupeURLs keeps one member per URL (two pods can share one, as a
// terminating host-network pod and its successor on the same node): the
// Ready one, else the first by Name. The others go to ignored.
func dedupeURLs(ms []Member, ignored map[string]ignore) []Member {
	slices.SortFunc(ms, func(a, b Member) int {
		if c := cmp.Compare(a.URL, b.URL); c != 0 {
			return c
		}
		if a.Ready != b.Ready {
			if a.Ready {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Name, b.Name)
	})
	out := ms[:0]
	for _, m := range ms {
		if n := len(out); n > 0 && out[n-1].URL == m.URL {
			ignored[m.Name] = ignore{ignoredAddress, fmt.Sprintf("address %s is also pod %s's", m.URL, out[n-1].Name)}
			continue
		}
		out = append(out, m)
	}
	return out
}

// member turns a pod into a member. ok is false for a pod that is not one
// (yet): outside the namespace or selector (the API server filters, this
// checks again), or without an IP. ig is set for a pod that matches but is
// not a worker; m.Name is set then.
func (k *k8sSource) member(p *corev1.Pod) (m Member, ig *ignore, ok bool) {
	if p.Namespace != k.o.Namespace || !k.sel.Matches(labels.Set(p.Labels)) {
		return Member{}, nil, false
	}
	m.Name = p.Namespace + "/" + p.Name
	role, okRole := roleOf(p.Labels[RoleLabel])
	if !okRole {
		return m, &ignore{ignoredRole, fmt.Sprintf("label %s is %q, not prefill or decode", RoleLabel, p.Labels[RoleLabel])}, false
	}
	port, why := k.port(p)
	if why != "" {
		return m, &ignore{ignoredPort, why}, false
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return Member{}, nil, false // no sandbox yet, or its containers are gone for good: nothing to route to
	}
	m.URL = "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(port))
	m.Role = role
	m.Labels = maps.Clone(p.Labels)
	switch {
	case p.DeletionTimestamp != nil:
		m.Reason = "terminating"
	case !podReady(p):
		m.Reason = "pod not Ready"
	default:
		m.Ready = true
	}
	return m, nil, true
}

// port finds a pod's HTTP port: PortAnnotation when present, else the
// container port named o.PortName. why says what is wrong when neither
// gives one.
func (k *k8sSource) port(p *corev1.Pod) (port int, why string) {
	if v, ok := p.Annotations[PortAnnotation]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Sprintf("annotation %s is %q, not a port number", PortAnnotation, v)
		}
		return n, ""
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == k.o.PortName && cp.ContainerPort > 0 && cp.ContainerPort <= 65535 {
				return int(cp.ContainerPort), ""
			}
		}
	}
	return 0, fmt.Sprintf("no container port named %q and no %s annotation", k.o.PortName, PortAnnotation)
}

// podReady reports whether the pod's PodReady condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// stripManagedFields drops what the informer's cache need not hold.
func stripManagedFields(obj any) (any, error) {
	if a, ok := obj.(metav1.Object); ok {
		a.SetManagedFields(nil)
	}
	return obj, nil
}
