package discovery

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spf13/pflag"
)

// TestStatic: the lists are normalized as the router always has, delivered
// once, every member Ready; bad lists are refused.
func TestStatic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, _ := testCommon()
		src, err := NewStatic(StaticOptions{Common: c, Prefill: []string{"127.0.0.1:8101", "http://h:1/"},
			Decode: []string{" https://d.example:8443 ", "http://h:2/api/"}})
		if err != nil {
			t.Fatal(err)
		}
		rec, stop := run(t, src)
		time.Sleep(time.Hour)
		synctest.Wait()
		if rec.count() != 1 {
			t.Fatalf("%d snapshots", rec.count())
		}
		wantMembers(t, "static", rec.last(t).Members,
			"http://127.0.0.1:8101 http://127.0.0.1:8101 prefill ready", "http://h:1 http://h:1 prefill ready",
			"http://h:2/api http://h:2/api decode ready", "https://d.example:8443 https://d.example:8443 decode ready")
		if got := counter(t, src, "changes", "prefill", "add"); got != 2 {
			t.Errorf("changes{prefill,add} = %v", got)
		}
		if err := stop(); err != nil {
			t.Error(err)
		}
		if err := src.Run(context.Background(), rec.update); !errors.Is(err, errRunTwice) {
			t.Errorf("second Run = %v", err)
		}
	})
	for _, c := range []struct {
		o    StaticOptions
		want string
	}{
		{StaticOptions{Decode: []string{"h:1"}}, "no --prefill worker"},
		{StaticOptions{Prefill: []string{"h:1"}}, "no --decode worker"},
		{StaticOptions{Prefill: []string{"h:1"}, Decode: []string{"http://h:1/"}}, "given twice"},
		{StaticOptions{Prefill: []string{"ftp://h:1"}, Decode: []string{"h:2"}}, "base URL"},
		{StaticOptions{Prefill: []string{"http://u@h:1"}, Decode: []string{"h:2"}}, "base URL"},
		{StaticOptions{Prefill: []string{"http://h:1?x"}, Decode: []string{"h:2"}}, "base URL"},
		{StaticOptions{Prefill: []string{"http://%zz"}, Decode: []string{"h:2"}}, "not a URL"},
	} {
		if _, err := NewStatic(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewStatic(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
}

// TestParseSpec: the four forms and what is refused.
func TestParseSpec(t *testing.T) {
	for _, c := range []struct{ spec, kind, arg string }{
		{"", KindStatic, ""}, {"static", KindStatic, ""}, {"k8s", KindK8s, ""},
		{"dns:tandem-decode", KindDNS, "tandem-decode"}, {"dns:_http._tcp.w.ns.svc.cluster.local.", KindDNS, "_http._tcp.w.ns.svc.cluster.local."},
		{"dns:w.ns.svc:8200", KindDNS, "w.ns.svc:8200"}, {"file:/etc/w.yaml", KindFile, "/etc/w.yaml"}, {"file:rel/w:1.json", KindFile, "rel/w:1.json"},
	} {
		kind, arg, err := ParseSpec(c.spec)
		if err != nil || kind != c.kind || arg != c.arg {
			t.Errorf("ParseSpec(%q) = %q, %q, %v", c.spec, kind, arg, err)
		}
	}
	for _, bad := range []string{"K8s", "k8s:x", "consul", "dns:", "dns:w:0", "dns:w:65536", "dns:w:http", "dns:a b", "dns:[::1]:80",
		"dns:" + strings.Repeat("a", 64), "file:", "static:x"} {
		if _, _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) succeeded", bad)
		}
	}
}

// FuzzParseSpec: no input panics; an accepted dns spec gives a valid name
// and port.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"static", "k8s", "dns:w.ns.svc:8200", "dns:_http._tcp.w", "file:/x", "dns:a:b:c", "dns::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		kind, arg, err := ParseSpec(spec)
		if err != nil || kind != KindDNS {
			return
		}
		name, port, err := parseDNSTarget(arg)
		if err != nil || !validDNSName(name) || port < 0 || port > 65535 {
			t.Fatalf("accepted %q: %q %d %v", spec, name, port, err)
		}
	})
}

// TestNewFromFlags: AddFlags and New build each kind from a command line;
// static lists with another source, and dns without a probe, are refused.
func TestNewFromFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.yaml")
	if err := os.WriteFile(path, []byte("endpoints: []"), 0o644); err != nil {
		t.Fatal(err)
	}
	probe := newFakeProbe(nil).probe
	for _, c := range []struct {
		args    []string
		static  bool
		spec    string
		wantErr string
	}{
		{args: nil, static: true, spec: "static prefill=1 decode=1"},
		{args: []string{"--discovery", "file:" + path, "--discovery-interval", "1s"}, spec: "file " + path},
		{args: []string{"--discovery", "dns:w.ns.svc:8200"}, spec: "dns w.ns.svc:8200"},
		{args: []string{"--discovery", "file:" + path}, static: true, wantErr: "--prefill and --decode are for --discovery static"},
		{args: []string{"--discovery", "nope"}, wantErr: "is not one of"},
		{args: []string{"--discovery", "k8s", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, wantErr: "discovery k8s"},
	} {
		var cfg Config
		fs := pflag.NewFlagSet("route", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if c.static {
			cfg.Prefill, cfg.Decode = []string{"h:1"}, []string{"h:2"}
		}
		cfg.Probe = probe
		src, err := New(cfg)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", c.args, err)
		case src.Status().Spec != c.spec:
			t.Errorf("%q: spec %q, want %q", c.args, src.Status().Spec, c.spec)
		}
	}
	if _, err := New(Config{Spec: "dns:w:1"}); err == nil || !strings.Contains(err.Error(), "no role probe") {
		t.Errorf("dns without a probe: %v", err)
	}
	var cfg Config
	fs := pflag.NewFlagSet("route", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	for _, name := range []string{"discovery", "discovery-namespace", "discovery-selector", "discovery-port-name", "kubeconfig",
		"discovery-interval", "discovery-timeout"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no --%s", name)
		}
	}
	if cfg.Spec != "static" || cfg.Selector != DefaultSelector || cfg.PortName != DefaultPortName || cfg.Timeout != DefaultDNSTimeout {
		t.Errorf("flag defaults %+v", cfg)
	}
}

// TestMetricsRegistered: the four families are registered with their
// help, and a second source on one registry is refused.
func TestMetricsRegistered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, reg, _ := testCommon()
		src, err := NewStatic(StaticOptions{Common: c, Prefill: []string{"h:1"}, Decode: []string{"h:2"}})
		if err != nil {
			t.Fatal(err)
		}
		run(t, src)
		synctest.Wait()
		src.(*staticSource).fail(errRead, errors.New("x"))
		src.(*staticSource).publish(src.(*staticSource).members, map[string]ignore{"n": {ignoredPort, "p"}}, func(Snapshot) {})
		names, err := testutil.GatherAndCount(reg)
		if err != nil || names == 0 {
			t.Fatalf("gather: %d, %v", names, err)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, mf := range mfs {
			got = append(got, mf.GetName())
		}
		want := []string{"tandem_discovery_changes_total", "tandem_discovery_errors_total", "tandem_discovery_ignored_total", "tandem_discovery_members"}
		if !slices.Equal(got, want) {
			t.Errorf("families %q, want %q", got, want)
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tandem_discovery_members Workers a discovery source sees now, by role and readiness.
# TYPE tandem_discovery_members gauge
tandem_discovery_members{ready="false",role="decode",source="static"} 0
tandem_discovery_members{ready="false",role="prefill",source="static"} 0
tandem_discovery_members{ready="false",role="unknown",source="static"} 0
tandem_discovery_members{ready="true",role="decode",source="static"} 1
tandem_discovery_members{ready="true",role="prefill",source="static"} 1
tandem_discovery_members{ready="true",role="unknown",source="static"} 0
`), "tandem_discovery_members"); err != nil {
			t.Error(err)
		}
		if _, err := NewStatic(StaticOptions{Common: Common{Registerer: reg}, Prefill: []string{"h:1"}, Decode: []string{"h:2"}}); err == nil ||
			!strings.Contains(err.Error(), "one source per registry") {
			t.Errorf("second source on one registry: %v", err)
		}
	})
}

// TestDiff: every kind, in Name order.
func TestDiff(t *testing.T) {
	m := func(name, url string, role Role, ready bool) Member {
		return Member{Name: name, URL: url, Role: role, Ready: ready}
	}
	prev := []Member{m("a", "u1", RoleDecode, true), m("b", "u2", RoleDecode, true), m("c", "u3", RolePrefill, false),
		m("d", "u4", RolePrefill, true), m("e", "u5", RoleDecode, true)}
	next := []Member{m("a", "u1", RoleDecode, true), m("b", "u2", RoleDecode, false), m("c", "u3", RolePrefill, true),
		m("d", "u9", RolePrefill, true), m("f", "u6", RoleDecode, true)}
	next[0].Labels = map[string]string{} // empty and nil labels are the same
	var got []string
	for _, c := range Diff(prev, next) {
		got = append(got, string(c.Kind)+" "+c.Member.Name+" "+c.Prev.URL)
	}
	want := []string{"unready b u2", "ready c u3", "update d u4", "remove e u5", "add f "}
	if !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if d := Diff(nil, nil); d != nil {
		t.Errorf("Diff(nil, nil) = %v", d)
	}
	labelled := []Member{{Name: "a", URL: "u1", Role: RoleDecode, Ready: true, Labels: map[string]string{"x": "1"}}}
	if d := Diff(prev[:1], labelled); len(d) != 1 || d[0].Kind != Updated {
		t.Errorf("a label change: %v", d)
	}
}

// TestHTTPProbe: the role from /pd/info, and errors for everything else.
func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cred" {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/prefill/pd/info":
			w.Write([]byte(`{"role":"prefill","transfer_addr":"127.0.0.1:9","model":"m"}`))
		case "/decode/pd/info":
			w.Write([]byte(`{"role":"decode"}`))
		case "/serve/pd/info":
			w.Write([]byte(`{"role":"serve"}`))
		case "/garbage/pd/info":
			w.Write([]byte(`{"role":`))
		case "/huge/pd/info":
			w.Write([]byte(`{"role":"decode","x":"` + strings.Repeat("x", probeBodyMax) + `"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("Authorization", "Bearer cred")
		return http.DefaultTransport.RoundTrip(r)
	})}
	probe := HTTPProbe(c)
	for _, cc := range []struct {
		path string
		role Role
		err  string
	}{
		{"/prefill", RolePrefill, ""}, {"/decode", RoleDecode, ""},
		{"/serve", "", `role "serve" is not prefill or decode`}, {"/garbage", "", "decode answer"},
		{"/huge", "", "answer over"}, {"/missing", "", "status 404"},
	} {
		role, err := probe(context.Background(), srv.URL+cc.path)
		if role != cc.role || (cc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), cc.err) {
			t.Errorf("%s: %q, %v; want %q, %q", cc.path, role, err, cc.role, cc.err)
		}
	}
	if _, err := HTTPProbe(http.DefaultClient)(context.Background(), srv.URL+"/decode"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without the credential: %v", err)
	}
	srv.Close()
	if _, err := probe(context.Background(), srv.URL+"/decode"); err == nil {
		t.Error("a closed server answered")
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
