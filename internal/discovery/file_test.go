package discovery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

const twoWorkers = `# the fleet
endpoints:
- name: prefill-0
  namespace: tandem
  address: 10.0.0.1
  port: "8200"
  labels: {llm-d.ai/role: prefill, llm-d.ai/inferenceServing: "true"}
- name: decode-0
  address: 10.0.0.2
  port: 8200
  labels:
    llm-d.ai/role: decode
- name: epp
  address: 10.0.0.9
  port: 9002
  labels: {app: epp}
`

var twoWant = []string{
	"decode-0 http://10.0.0.2:8200 decode ready",
	"tandem/prefill-0 http://10.0.0.1:8200 prefill ready",
}

// fileEnv is a file source on a file in a temporary directory.
type fileEnv struct {
	t    *testing.T
	path string
	src  *fileSource
	rec  *recorder
	stop func() error
	logs *logRecorder
}

func newFileEnv(t *testing.T, content string) *fileEnv {
	t.Helper()
	e := &fileEnv{t: t, path: filepath.Join(t.TempDir(), "workers.yaml")}
	e.write(content)
	c, _, lr := testCommon()
	s, err := NewFile(FileOptions{Common: c, Path: e.path})
	if err != nil {
		t.Fatal(err)
	}
	e.src, e.logs = s.(*fileSource), lr
	e.rec, e.stop = run(t, s)
	synctest.Wait()
	return e
}

// write writes the file in place (truncate and write, same inode).
func (e *fileEnv) write(content string) {
	e.t.Helper()
	if err := os.WriteFile(e.path, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// replace writes a new file beside it and renames it over the old one, as
// editors and atomic writers do.
func (e *fileEnv) replace(content string) {
	e.t.Helper()
	tmp := e.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.path); err != nil {
		e.t.Fatal(err)
	}
}

// poll lets n checks of the file run.
func poll(n int) {
	time.Sleep(time.Duration(n) * DefaultFileInterval)
	synctest.Wait()
}

// TestFileReload: the file's endpoints become members (endpoints with no
// worker role are ignored, counted once); writes in place and saves by
// rename are seen within one interval; JSON works as well as YAML.
func TestFileReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFileEnv(t, twoWorkers)
		wantMembers(t, "start", e.rec.last(t).Members, twoWant...)
		if m := e.rec.last(t).Members[1]; m.Labels["llm-d.ai/inferenceServing"] != "true" {
			t.Errorf("labels %v", m.Labels)
		}
		st := e.src.Status()
		if len(st.Ignored) != 1 || st.Ignored[0].Name != "epp" || counter(t, e.src, "ignored", "role") != 1 {
			t.Errorf("ignored: %+v", st.Ignored)
		}

		poll(5)
		if n := e.rec.count(); n != 1 || counter(t, e.src, "ignored", "role") != 1 {
			t.Errorf("an unchanged file: %d snapshots, ignored counted %v times", n, counter(t, e.src, "ignored", "role"))
		}

		e.write(twoWorkers + "- {name: decode-1, address: 10.0.0.3, port: 8200, labels: {llm-d.ai/role: decode}}\n")
		poll(1)
		wantMembers(t, "written in place", e.rec.last(t).Members,
			"decode-0 http://10.0.0.2:8200 decode ready", "decode-1 http://10.0.0.3:8200 decode ready",
			"tandem/prefill-0 http://10.0.0.1:8200 prefill ready")

		// Same length, other content, by rename.
		e.replace(strings.Replace(twoWorkers, "10.0.0.2", "10.0.0.7", 1))
		poll(1)
		wantMembers(t, "replaced by rename", e.rec.last(t).Members,
			"decode-0 http://10.0.0.7:8200 decode ready", "tandem/prefill-0 http://10.0.0.1:8200 prefill ready")
		if got := counter(t, e.src, "changes", "decode", "update"); got != 1 {
			t.Errorf("changes{decode,update} = %v", got)
		}

		e.replace(`{"endpoints": [{"name": "p", "address": "fd00::1", "port": "8100", "labels": {"llm-d.ai/role": "prefill"}}]}`)
		poll(1)
		wantMembers(t, "JSON", e.rec.last(t).Members, "p http://[fd00::1]:8100 prefill ready")

		e.replace("endpoints: []\n")
		poll(1)
		wantMembers(t, "explicitly empty", e.rec.last(t).Members)
		if err := e.stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestFileSameSizeSameTime: a rewrite in place that keeps the size and the
// modification time (a coarse clock) is still seen, within fullReadEvery
// checks.
func TestFileSameSizeSameTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFileEnv(t, twoWorkers)
		fi, err := os.Stat(e.path)
		if err != nil {
			t.Fatal(err)
		}
		e.write(strings.Replace(twoWorkers, "10.0.0.2", "10.0.0.7", 1))
		if err := os.Chtimes(e.path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		poll(fullReadEvery)
		wantMembers(t, "same size and time", e.rec.last(t).Members,
			"decode-0 http://10.0.0.7:8200 decode ready", "tandem/prefill-0 http://10.0.0.1:8200 prefill ready")
	})
}

// TestFileBadContentKeepsMembers: a file that is invalid, empty, over the
// limit or gone keeps the last good membership; the error is counted,
// logged once while it stands, and shown in Status; a good file again
// clears it.
func TestFileBadContentKeepsMembers(t *testing.T) {
	big := "endpoints: []\n" + strings.Repeat("# padding padding padding padding padding padding padding\n", MaxFileBytes/58+1)
	for _, c := range []struct {
		name, kind, text string
		apply            func(e *fileEnv)
	}{
		{"not YAML", errParse, "parse", func(e *fileEnv) { e.replace("endpoints: [\n  - {name: x\n") }},
		{"wrong types", errParse, "parse", func(e *fileEnv) { e.replace("endpoints: {a: 1}\n") }},
		{"empty", errParse, "the file is empty", func(e *fileEnv) { e.write("") }},
		{"no endpoints list", errParse, `no "endpoints" list`, func(e *fileEnv) { e.replace("workers: []\n") }},
		{"no port", errParse, "no port", func(e *fileEnv) { e.replace("endpoints: [{name: a, address: 10.0.0.1}]\n") }},
		{"bad port", errParse, "not 1-65535", func(e *fileEnv) { e.replace("endpoints: [{name: a, address: 10.0.0.1, port: '99999'}]\n") }},
		{"bad address", errParse, "neither an IP address nor a host name", func(e *fileEnv) {
			e.replace("endpoints: [{name: a, address: 'http://x', port: 1}]\n")
		}},
		{"name twice", errParse, "given twice", func(e *fileEnv) {
			e.replace("endpoints: [{name: a, address: 10.0.0.1, port: 1, labels: {llm-d.ai/role: decode}}, {name: a, address: 10.0.0.2, port: 1}]\n")
		}},
		{"address twice", errParse, "given twice", func(e *fileEnv) {
			e.replace("endpoints: [{name: a, address: 10.0.0.1, port: 1, labels: {llm-d.ai/role: decode}}, {name: b, address: 10.0.0.1, port: 1, labels: {llm-d.ai/role: prefill}}]\n")
		}},
		{"over 1 MiB", errTooLarge, "over 1048576 bytes", func(e *fileEnv) { e.replace(big) }},
		{"deleted", errRead, "no such file", func(e *fileEnv) {
			if err := os.Remove(e.path); err != nil {
				e.t.Fatal(err)
			}
		}},
		{"a directory", errRead, "read", func(e *fileEnv) {
			if err := os.Remove(e.path); err != nil {
				e.t.Fatal(err)
			}
			if err := os.Mkdir(e.path, 0o755); err != nil {
				e.t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newFileEnv(t, twoWorkers)
				c.apply(e)
				poll(3 * fullReadEvery)
				wantMembers(t, "after the bad file", e.rec.last(t).Members, twoWant...)
				if n := e.rec.count(); n != 1 {
					t.Errorf("%d snapshots, want 1", n)
				}
				st := e.src.Status()
				if !st.Failing || !strings.Contains(st.LastError, c.text) || !strings.Contains(st.LastError, "the last good membership stays") {
					t.Errorf("Status: failing %v, last error %q; want %q", st.Failing, st.LastError, c.text)
				}
				if got := counter(t, e.src, "errors", c.kind); got < 1 {
					t.Errorf("errors{%s} = %v", c.kind, got)
				}
				if n := len(e.logs.matching("discovery error", "kind="+c.kind)); n != 1 {
					t.Errorf("%d error log lines over %d checks, want 1", n, 3*fullReadEvery)
				}
				if c.name == "a directory" {
					if err := os.Remove(e.path); err != nil {
						t.Fatal(err)
					}
				}
				e.replace(strings.Replace(twoWorkers, "10.0.0.2", "10.0.0.7", 1))
				poll(1)
				wantMembers(t, "fixed", e.rec.last(t).Members,
					"decode-0 http://10.0.0.7:8200 decode ready", "tandem/prefill-0 http://10.0.0.1:8200 prefill ready")
				if st := e.src.Status(); st.Failing {
					t.Errorf("still failing after the fix: %+v", st)
				}
			})
		})
	}
}

// TestFileParseErrorCountedOncePerVersion: the same bad content is parsed
// and counted once, not at every check; a different bad content counts
// again.
func TestFileParseErrorCountedOncePerVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFileEnv(t, twoWorkers)
		e.replace("endpoints: 7\n")
		poll(3 * fullReadEvery)
		if got := counter(t, e.src, "errors", errParse); got != 1 {
			t.Errorf("errors{parse} = %v after 30 checks of one bad file, want 1", got)
		}
		e.replace("endpoints: 8\n")
		poll(1)
		if got := counter(t, e.src, "errors", errParse); got != 2 {
			t.Errorf("errors{parse} = %v after a second bad version, want 2", got)
		}
	})
}

// TestFileDeletedAndBack: a deleted file keeps the membership until it is
// back, even with the same content.
func TestFileDeletedAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newFileEnv(t, twoWorkers)
		if err := os.Remove(e.path); err != nil {
			t.Fatal(err)
		}
		poll(4)
		wantMembers(t, "deleted", e.rec.last(t).Members, twoWant...)
		if got := counter(t, e.src, "errors", errRead); got != 4 {
			t.Errorf("errors{read} = %v after 4 checks", got)
		}
		e.write(twoWorkers)
		poll(1)
		if st := e.src.Status(); st.Failing || e.rec.count() != 1 {
			t.Errorf("back with the same content: failing %v, %d snapshots", st.Failing, e.rec.count())
		}
	})
}

// TestFileBadAtStart: a file that cannot be loaded at first fails Run.
func TestFileBadAtStart(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("endpoints: nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.yaml"), "no such file"},
		{bad, "parse"},
	} {
		src, err := NewFile(FileOptions{Path: c.path})
		if err != nil {
			t.Fatal(err)
		}
		err = src.Run(context.Background(), func(Snapshot) { t.Error("snapshot from a bad file") })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%s) = %v, want %q", c.path, err, c.want)
		}
		if st := src.Status(); !st.Failing || st.Synced {
			t.Errorf("Status %+v", st)
		}
	}
	if _, err := NewFile(FileOptions{}); err == nil {
		t.Error("NewFile without a path succeeded")
	}
}

// TestParseEndpoints checks the document rules directly.
func TestParseEndpoints(t *testing.T) {
	ms, ig, err := parseEndpoints([]byte(`endpoints:
- {address: 10.0.0.1, port: 1, labels: {llm-d.ai/role: decode}}
- {address: "::ffff:10.0.0.2", port: 2, labels: {llm-d.ai/role: prefill}}
- {address: worker-3.example, port: 3, namespace: ns, labels: {llm-d.ai/role: decode}}
- {address: 10.0.0.4, port: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	sortMembers(ms)
	wantMembers(t, "members", ms,
		"10.0.0.1:1 http://10.0.0.1:1 decode ready", "10.0.0.2:2 http://10.0.0.2:2 prefill ready",
		"ns/worker-3.example:3 http://worker-3.example:3 decode ready")
	if len(ig) != 1 || ig["10.0.0.4:4"].code != ignoredRole {
		t.Errorf("ignored %v", ig)
	}
	for _, bad := range []string{"", "  \n", "null", "endpoints:", "endpoints: [{address: 'fe80::1%eth0', port: 1}]",
		"endpoints: [{address: 10.0.0.1, port: 1.5}]", "endpoints: [{address: 10.0.0.1, port: true}]"} {
		if _, _, err := parseEndpoints([]byte(bad)); err == nil {
			t.Errorf("parseEndpoints(%q) succeeded", bad)
		}
	}
}

// FuzzParseEndpoints: any input gives members or an error, never a panic;
// members have unique names and URLs and a worker role.
func FuzzParseEndpoints(f *testing.F) {
	f.Add([]byte(twoWorkers))
	f.Add([]byte(`{"endpoints":[{"name":"a","address":"::1","port":"1","labels":{"llm-d.ai/role":"decode"}}]}`))
	f.Add([]byte("endpoints: []"))
	f.Add([]byte("a: &a [*a, *a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, ig, err := parseEndpoints(data)
		if err != nil {
			if ms != nil || ig != nil {
				t.Fatal("members with an error")
			}
			return
		}
		names, urls := map[string]bool{}, map[string]bool{}
		for _, m := range ms {
			if names[m.Name] || urls[m.URL] || !m.Ready || (m.Role != RolePrefill && m.Role != RoleDecode) ||
				!strings.HasPrefix(m.URL, "http://") {
				t.Fatalf("bad member %+v", m)
			}
			if _, err := baseURL(m.URL); err != nil {
				t.Fatalf("member URL %q: %v", m.URL, err)
			}
			names[m.Name], urls[m.URL] = true, true
		}
		for name := range ig {
			if names[name] {
				t.Fatalf("%q both a member and ignored", name)
			}
		}
	})
}
