package leg

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

const testToken = "0123456789abcdef0123456789abcdef"

func testKeys(t *testing.T, token string, now time.Time) *Keys {
	t.Helper()
	k, err := NewKeys([]byte(token))
	if err != nil {
		t.Fatal(err)
	}
	k.now = func() time.Time { return now }
	return k
}

func signed(k *Keys, li Info, method, path string, body []byte) http.Header {
	h := http.Header{}
	li.Set(h)
	k.Sign(h, method, path, body)
	return h
}

var (
	t0     = time.UnixMilli(1_800_000_000_000)
	decode = Info{Room: "00112233445566778899aabbccddeeff", RequestID: "req-1", Leg: KindDecode, Prefill: "10.0.0.1:7000"}
	body   = []byte(`{"prompt":"hi","max_tokens":4}`)
)

func TestSignVerify(t *testing.T) {
	k := testKeys(t, testToken, t0)
	h := signed(k, decode, "POST", "/v1/completions", body)
	if got := h.Get(HeaderExpires); got != strconv.FormatInt(t0.Add(Lifetime).UnixMilli(), 10) {
		t.Errorf("%s = %q, want now+%s in unix ms", HeaderExpires, got, Lifetime)
	}
	if got := len(h.Get(HeaderSignature)); got != 64 {
		t.Errorf("%s has %d characters, want 64 hex digits", HeaderSignature, got)
	}
	li, err := k.Verify("POST", "/v1/completions", h, body)
	if err != nil || li != decode {
		t.Fatalf("Verify = %+v, %v; want %+v, nil", li, err, decode)
	}
	// A verifier with its own Keys from the same token, its clock a little
	// ahead or behind, accepts it too.
	for _, skew := range []time.Duration{-MaxSkew + time.Millisecond, 0, Lifetime - time.Millisecond} {
		v := testKeys(t, testToken, t0.Add(skew))
		if _, err := v.Verify("POST", "/v1/completions", h, body); err != nil {
			t.Errorf("verifier clock %v from the signer's: %v, want accepted", skew, err)
		}
	}
}

// TestVerifyRefuses: every covered field changed, the body changed, an
// expired or far-future expiry, another token, missing or malformed
// headers: each is refused with its error.
func TestVerifyRefuses(t *testing.T) {
	k := testKeys(t, testToken, t0)
	good := func() http.Header { return signed(k, decode, "POST", "/v1/completions", body) }
	set := func(name, v string) func(http.Header) { return func(h http.Header) { h.Set(name, v) } }
	del := func(name string) func(http.Header) { return func(h http.Header) { h.Del(name) } }
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		edit   func(http.Header)
		verify *Keys
		want   error
	}{
		{"method", "PUT", "/v1/completions", body, nil, k, ErrBadMAC},
		{"path", "POST", "/v1/chat/completions", body, nil, k, ErrBadMAC},
		{"body", "POST", "/v1/completions", []byte(`{"prompt":"hi","max_tokens":5}`), nil, k, ErrBadMAC},
		{"empty body", "POST", "/v1/completions", nil, nil, k, ErrBadMAC},
		{"room", "POST", "/v1/completions", body, set(HeaderRoom, "ffeeddccbbaa99887766554433221100"), k, ErrBadMAC},
		{"request id", "POST", "/v1/completions", body, set(HeaderRequestID, "req-2"), k, ErrBadMAC},
		{"leg kind", "POST", "/v1/completions", body, set(HeaderLeg, KindPrefill), k, ErrBadMAC},
		{"prefill address", "POST", "/v1/completions", body, set(HeaderPrefill, "10.0.0.9:7000"), k, ErrBadMAC},
		{"prefill address removed", "POST", "/v1/completions", body, del(HeaderPrefill), k, ErrBadMAC},
		{"expiry moved later", "POST", "/v1/completions", body, set(HeaderExpires, strconv.FormatInt(t0.Add(Lifetime+time.Second).UnixMilli(), 10)), k, ErrBadMAC},
		{"signature flipped", "POST", "/v1/completions", body, func(h http.Header) {
			s := []byte(h.Get(HeaderSignature))
			s[0] = "10"[min(1, int(s[0]-'0'))] // another hex digit
			h.Set(HeaderSignature, string(s))
		}, k, ErrBadMAC},
		{"another token", "POST", "/v1/completions", body, nil, testKeys(t, "another cluster token!", t0), ErrBadMAC},
		{"expired", "POST", "/v1/completions", body, nil, testKeys(t, testToken, t0.Add(Lifetime)), ErrExpired},
		{"verifier clock far behind", "POST", "/v1/completions", body, nil, testKeys(t, testToken, t0.Add(-MaxSkew-time.Millisecond)), ErrSkew},
		{"no signature headers", "POST", "/v1/completions", body, func(h http.Header) { h.Del(HeaderSignature); h.Del(HeaderExpires) }, k, ErrMissing},
		{"no signature", "POST", "/v1/completions", body, del(HeaderSignature), k, ErrMalformed},
		{"no expiry", "POST", "/v1/completions", body, del(HeaderExpires), k, ErrMalformed},
		{"no room", "POST", "/v1/completions", body, del(HeaderRoom), k, ErrMalformed},
		{"no request id", "POST", "/v1/completions", body, del(HeaderRequestID), k, ErrMalformed},
		{"no leg kind", "POST", "/v1/completions", body, del(HeaderLeg), k, ErrMalformed},
		{"unknown leg kind", "POST", "/v1/completions", body, set(HeaderLeg, "both"), k, ErrMalformed},
		{"expiry not a number", "POST", "/v1/completions", body, set(HeaderExpires, "-5"), k, ErrMalformed},
		{"expiry too long", "POST", "/v1/completions", body, set(HeaderExpires, "12345678901234567"), k, ErrMalformed},
		{"signature not hex", "POST", "/v1/completions", body, set(HeaderSignature, "zz"), k, ErrMalformed},
		{"signature short", "POST", "/v1/completions", body, set(HeaderSignature, "abcd"), k, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := good()
			if tc.edit != nil {
				tc.edit(h)
			}
			li, err := tc.verify.Verify(tc.method, tc.path, h, tc.body)
			if !errors.Is(err, tc.want) {
				t.Errorf("Verify = %+v, %v; want an error wrapping %q", li, err, tc.want)
			}
			if err != nil && li != (Info{}) {
				t.Errorf("a refused leg returned its headers %+v", li)
			}
		})
	}
}

// TestLocalLeg: a local leg (room and request id, no prefill address)
// signs and verifies, and its kind is covered by the signature: a signed
// decode leg relabelled local, or a local leg relabelled decode, is refused.
func TestLocalLeg(t *testing.T) {
	k := testKeys(t, testToken, t0)
	local := Info{Room: decode.Room, RequestID: "req-2", Leg: KindLocal}
	h := signed(k, local, "POST", "/v1/chat/completions", body)
	li, err := k.Verify("POST", "/v1/chat/completions", h, body)
	if err != nil || li != local {
		t.Fatalf("Verify = %+v, %v; want %+v, nil", li, err, local)
	}
	h.Set(HeaderLeg, KindDecode)
	if _, err := k.Verify("POST", "/v1/chat/completions", h, body); !errors.Is(err, ErrBadMAC) {
		t.Errorf("a local leg relabelled decode: %v, want ErrBadMAC", err)
	}
	d := signed(k, decode, "POST", "/v1/completions", body)
	d.Set(HeaderLeg, KindLocal)
	if _, err := k.Verify("POST", "/v1/completions", d, body); !errors.Is(err, ErrBadMAC) {
		t.Errorf("a decode leg relabelled local: %v, want ErrBadMAC", err)
	}
}

// TestCanonicalInjective: moving bytes from one field to the next changes
// the string (fields are length-prefixed).
func TestCanonicalInjective(t *testing.T) {
	a := Canonical("POST", "/v1/x", Info{Room: "ab", RequestID: "c", Leg: KindDecode, Prefill: "p"}, 1, nil)
	b := Canonical("POST", "/v1/x", Info{Room: "a", RequestID: "c", Leg: KindDecode, Prefill: "bp"}, 1, nil)
	if string(a) == string(b) {
		t.Fatalf("two different legs have one canonical string %q", a)
	}
}

// TestKeysAreDistinct: the leg key, the debug credential and the token
// differ, and the credential is HKDF-SHA256(token, LabelDebug) as
// documented.
func TestKeysAreDistinct(t *testing.T) {
	k := testKeys(t, testToken, t0)
	want, err := hkdf.Key(sha256.New, []byte(testToken), nil, LabelDebug, 32)
	if err != nil {
		t.Fatal(err)
	}
	if k.Credential() != "Bearer "+hex.EncodeToString(want) {
		t.Errorf("Credential() = %q, want Bearer hex(HKDF(token, %q))", k.Credential(), LabelDebug)
	}
	if hex.EncodeToString(k.mac) == k.debug || string(k.mac) == testToken {
		t.Error("the leg key equals the debug credential or the token")
	}
	if _, err := NewKeys([]byte("short")); err == nil {
		t.Error("NewKeys accepted a 5-byte token")
	}
}

func TestRequireCredential(t *testing.T) {
	k := testKeys(t, testToken, t0)
	other := testKeys(t, "another cluster token!", t0)
	h := k.RequireCredential(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"none", "", 401},
		{"another token's", other.Credential(), 401},
		{"not bearer", "Basic " + k.debug, 401},
		{"the token itself", "Bearer " + testToken, 401},
		{"right", k.Credential(), 204},
	} {
		r := httptest.NewRequest("GET", "/debug/rooms", nil)
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tc.want {
			t.Errorf("%s credential: status %d, want %d", tc.name, rec.Code, tc.want)
		}
		if tc.want == 401 && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s credential: 401 is not JSON: %q", tc.name, rec.Body)
		}
	}
	var nilKeys *Keys
	rec := httptest.NewRecorder()
	nilKeys.RequireCredential(h).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/rooms", nil))
	if rec.Code != 401 || !nilKeys.CheckCredential(http.Header{}) {
		t.Errorf("nil Keys: status %d through the guarded handler (want its own 401), CheckCredential false; want nil Keys to add no check", rec.Code)
	}
}

func TestTransportAddsCredential(t *testing.T) {
	k := testKeys(t, testToken, t0)
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	c := &http.Client{Transport: k.Transport(nil)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Authorization", "Bearer mine")
	if resp, err = c.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(got) != 2 || got[0] != k.Credential() || got[1] != "Bearer mine" {
		t.Errorf("server saw Authorization %q, want the credential then the caller's own", got)
	}
	if req.Header.Get("Authorization") != "Bearer mine" {
		t.Error("the transport changed the caller's request")
	}
}

// TestTraceContextSigned: a leg's W3C trace context is covered by its
// signature: a signed leg with one verifies and returns it; one added to,
// changed on or stripped from a signed leg is refused; and a leg without
// one signs the v1 string routers before traces signed.
func TestTraceContextSigned(t *testing.T) {
	k := testKeys(t, testToken, t0)
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traced := decode
	traced.TraceParent, traced.TraceState = tp, "vendor=x"
	h := signed(k, traced, "POST", "/v1/completions", body)
	li, err := k.Verify("POST", "/v1/completions", h, body)
	if err != nil || li != traced {
		t.Fatalf("Verify = %+v, %v; want %+v, nil", li, err, traced)
	}
	edits := map[string]func(http.Header){
		"traceparent changed": func(h http.Header) {
			h.Set(HeaderTraceParent, "00-0af7651916cd43dd8448eb211c80319d-b7ad6b7169203331-01")
		},
		"traceparent stripped": func(h http.Header) { h.Del(HeaderTraceParent) },
		"tracestate changed":   func(h http.Header) { h.Set(HeaderTraceState, "vendor=y") },
		"both stripped":        func(h http.Header) { h.Del(HeaderTraceParent); h.Del(HeaderTraceState) },
	}
	for name, edit := range edits {
		h := signed(k, traced, "POST", "/v1/completions", body)
		edit(h)
		if _, err := k.Verify("POST", "/v1/completions", h, body); !errors.Is(err, ErrBadMAC) {
			t.Errorf("%s: %v, want ErrBadMAC", name, err)
		}
	}
	plain := signed(k, decode, "POST", "/v1/completions", body)
	plain.Set(HeaderTraceParent, tp) // forged onto a leg signed without one
	if _, err := k.Verify("POST", "/v1/completions", plain, body); !errors.Is(err, ErrBadMAC) {
		t.Errorf("traceparent added to a leg signed without one: %v, want ErrBadMAC", err)
	}
	if got := string(Canonical("POST", "/p", decode, 1, nil)); got[:14] != "tandem-leg-v1\n" {
		t.Errorf("a leg without trace context signs %q, want the v1 string", got)
	}
}
