// Temporary development tool (not committed): renders a template with a
// JSON context: devtool TEMPLATE_FILE CONTEXT_JSON_FILE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"tandem/internal/jinja"
)

func main() {
	src, _ := os.ReadFile(os.Args[1])
	ctxRaw, _ := os.ReadFile(os.Args[2])
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ctxRaw, &m); err != nil {
		panic(err)
	}
	t, err := jinja.Parse(string(src))
	if err != nil {
		fmt.Println("PARSE ERROR:", err)
		os.Exit(1)
	}
	vars := map[string]jinja.Value{}
	for k, raw := range m {
		v, err := jinja.FromJSON(raw, k == "messages" || k == "tools")
		if err != nil {
			panic(err)
		}
		vars[k] = v
	}
	out, err := t.Render(context.Background(), vars, jinja.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		fmt.Println("RENDER ERROR:", err)
		os.Exit(1)
	}
	fmt.Print(out.Text)
}
