package answer

import "testing"

// TestCarriesToken: a chunk with reasoning_content only (a worker's
// reasoning parser) or tool_calls only carries a token, as one with content
// does; the role chunk does not.
func TestCarriesToken(t *testing.T) {
	for body, want := range map[string]bool{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`:                                                                   false,
		`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`:                                                                                    true,
		`{"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]}`:                                                                       true,
		`{"choices":[{"index":0,"delta":{}}]}`:                                                                                                  false,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`: true,
		`{"choices":[{"index":0,"delta":{"tool_calls":[]}}]}`:                                                                                   false,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`:                                                                           true,
		`{"choices":[{"index":0,"text":"x","finish_reason":null}]}`:                                                                             true,
	} {
		obj, err := ParseObject([]byte(body))
		if err != nil {
			t.Fatalf("ParseObject(%s): %v", body, err)
		}
		if got := CarriesToken(obj); got != want {
			t.Errorf("CarriesToken(%s) = %v, want %v", body, got, want)
		}
	}
}
