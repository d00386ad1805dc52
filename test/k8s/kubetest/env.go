package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Required is the environment variable that makes a missing binary a
// failure instead of a skip (CI sets it to 1); 0 skips the tier.
const Required = "TANDEM_K8S_TESTS"

// Binaries are the paths of the tier's programs.
type Binaries struct {
	APIServer, Etcd, Helm string
}

// FindBinaries resolves the binaries: TEST_ASSET_KUBE_APISERVER,
// TEST_ASSET_ETCD and TEST_ASSET_HELM, else the file of that name in
// $KUBEBUILDER_ASSETS. It skips t when one is missing, or fails it when
// $TANDEM_K8S_TESTS is 1, naming the missing ones and how to build them.
func FindBinaries(t testing.TB) Binaries {
	t.Helper()
	if os.Getenv(Required) == "0" {
		t.Skipf("%s=0: the Kubernetes test tier is off", Required)
	}
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	find := func(env, name string) (string, string) {
		p := os.Getenv(env)
		if p == "" && dir != "" {
			p = filepath.Join(dir, name)
		}
		if p == "" {
			return "", fmt.Sprintf("%s (neither %s nor KUBEBUILDER_ASSETS is set)", name, env)
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return "", fmt.Sprintf("%s (%s is not an executable file)", name, p)
		}
		return p, ""
	}
	var b Binaries
	var missing []string
	for _, f := range []struct {
		dst       *string
		env, name string
	}{{&b.APIServer, "TEST_ASSET_KUBE_APISERVER", "kube-apiserver"}, {&b.Etcd, "TEST_ASSET_ETCD", "etcd"}, {&b.Helm, "TEST_ASSET_HELM", "helm"}} {
		p, why := find(f.env, f.name)
		if why != "" {
			missing = append(missing, why)
		}
		*f.dst = p
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("Kubernetes test tier: missing %s. Build them with `export KUBEBUILDER_ASSETS=$(scripts/k8s-testbin.sh)` "+
			"(a cold build takes about 20 minutes)", strings.Join(missing, ", "))
		if os.Getenv(Required) == "1" {
			t.Fatalf("%s; %s=1 requires the tier to run", msg, Required)
		}
		t.Skip(msg + "; set " + Required + "=1 to make this a failure")
	}
	return b
}

// Env is a running control plane and clients of it, as the cluster's
// administrator (system:masters).
type Env struct {
	Bin       Binaries
	Config    *rest.Config
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Mapper    meta.ResettableRESTMapper
	Discovery discovery.DiscoveryInterface
	// Kubeconfig is the path of a kubeconfig file for the administrator, for
	// processes (helm, a router) run against the control plane.
	Kubeconfig string
	// Version is the API server's version, e.g. v1.37.2.
	Version string

	env *envtest.Environment
	dir string // scratch folder: kubeconfig files, helm's state

	mu       sync.Mutex
	warnings []string // API warnings seen by Config's clients, see Warnings
}

// Options are the extensions a control plane starts with.
type Options struct {
	// CRDDirs are folders of CustomResourceDefinition manifests to install.
	CRDDirs []string
}

var (
	sharedMu   sync.Mutex
	shared     *Env
	sharedErr  error
	sharedOpts Options
)

// Shared returns the test binary's control plane, starting it with opts on
// first use (later calls must pass the same opts; Main stops it). It skips
// or fails t as FindBinaries does when a binary is missing.
func Shared(t testing.TB, opts Options) *Env {
	t.Helper()
	bin := FindBinaries(t)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		sharedOpts = opts
		shared, sharedErr = Start(bin, opts)
	}
	if sharedErr != nil {
		t.Fatalf("start the control plane: %v", sharedErr)
	}
	if fmt.Sprint(opts) != fmt.Sprint(sharedOpts) {
		t.Fatalf("kubetest.Shared called with options %+v after %+v", opts, sharedOpts)
	}
	return shared
}

// Main runs the tests of a package that uses Shared and stops the control
// plane after them: func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "kubetest: stop the control plane:", err)
			if code == 0 {
				code = 1
			}
		}
		shared = nil
	}
	return code
}

// Start starts etcd and kube-apiserver from bin and waits until the API
// serves. Stop ends both. Most tests want Shared.
func Start(bin Binaries, opts Options) (*Env, error) {
	// envtest logs through controller-runtime's logger; without one set it
	// prints a warning with a stack trace. Its errors come back as errors.
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "tandem-kubetest-")
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		CRDDirectoryPaths:     opts.CRDDirs,
		ErrorIfCRDPathMissing: true,
		// Two shared cores start etcd and the API server in about 5-15 s;
		// envtest's default of 20 s is close.
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	te.ControlPlane.Etcd = &envtest.Etcd{Path: bin.Etcd}
	api := te.ControlPlane.GetAPIServer()
	api.Path = bin.APIServer
	args := api.Configure()
	// On loopback the endpoint reconciler would publish 127.0.0.1 as the
	// kubernetes Service's endpoint, which the API server refuses to do; no
	// test needs that Service.
	args.Set("endpoint-reconciler-type", "none")
	// PodSecurity stays on (it is a default plugin): namespaces that a test
	// labels with pod-security.kubernetes.io/enforce get it enforced.
	e := &Env{Bin: bin, env: te, dir: dir}
	if _, err := te.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("envtest (kube-apiserver %s, etcd %s): %w", bin.APIServer, bin.Etcd, err)
	}
	if err := e.connect(); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) connect() error {
	cfg := rest.CopyConfig(e.env.Config)
	cfg.WarningHandler = warningRecorder{e}
	e.Config = cfg
	var err error
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if e.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if e.Discovery, err = discovery.NewDiscoveryClientForConfig(cfg); err != nil {
		return err
	}
	e.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Discovery))
	v, err := e.Discovery.ServerVersion()
	if err != nil {
		return fmt.Errorf("read the API server's version: %w", err)
	}
	e.Version = v.GitVersion
	e.Kubeconfig = filepath.Join(e.dir, "admin.kubeconfig")
	return os.WriteFile(e.Kubeconfig, e.env.KubeConfig, 0o600)
}

// Stop stops the control plane and removes its scratch folder.
func (e *Env) Stop() error {
	err := e.env.Stop()
	os.RemoveAll(e.dir)
	return err
}

// UserKubeconfig writes a kubeconfig file for a user of the given name and
// groups (authenticated by a client certificate) and returns its path. Such
// a user has only what RBAC grants it; a name
// "system:serviceaccount:NS:NAME" gets what is bound to that ServiceAccount.
func (e *Env) UserKubeconfig(name string, groups ...string) (string, error) {
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("add user %s: %w", name, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(e.dir, "user-*.kubeconfig")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// Impersonate returns a client acting as user (with groups), for checking
// what RBAC lets that user do.
func (e *Env) Impersonate(user string, groups ...string) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return kubernetes.NewForConfig(cfg)
}

// Namespace creates a namespace with labels (for instance PodSecurity's) and
// deletes it when t ends. Namespaces are never finalized here (there is no
// controller manager), so every test needs a name of its own.
func (e *Env) Namespace(t testing.TB, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// Warnings returns the API warnings (deprecations, PodSecurity findings) the
// server sent to Config's clients since the last call, and forgets them.
func (e *Env) Warnings() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.warnings
	e.warnings = nil
	return w
}

type warningRecorder struct{ e *Env }

func (r warningRecorder) HandleWarningHeader(code int, agent, text string) {
	if code != 299 || text == "" {
		return
	}
	r.e.mu.Lock()
	r.e.warnings = append(r.e.warnings, text)
	r.e.mu.Unlock()
}

// Helm runs the helm binary against the control plane (KUBECONFIG set, its
// cache, config and data folders in the scratch folder) and returns its
// standard output; a failure fails t with helm's standard error.
func (e *Env) Helm(t testing.TB, args ...string) []byte {
	t.Helper()
	out, err := e.HelmErr(args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// HelmErr is Helm returning the error (which holds helm's standard error).
func (e *Env) HelmErr(args ...string) ([]byte, error) {
	return RunHelm(e.Bin.Helm, e.Kubeconfig, filepath.Join(e.dir, "helm"), args...)
}

// RunHelm runs helm with KUBECONFIG=kubeconfig (none when "") and helm's
// own folders under state, and returns its standard output.
func RunHelm(helm, kubeconfig, state string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(state, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(state, "config"),
		"HELM_DATA_HOME="+filepath.Join(state, "data"),
		"KUBECONFIG="+kubeconfig)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
