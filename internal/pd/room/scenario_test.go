package room

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected traces in testdata/*.txt (review the diff)")

// The scenario language. A file is a list of cases separated by blank
// lines; each case is optional "#" comment lines, one command, a "----"
// line and the expected output (no blank lines). A case with only comments
// (the file's header) is kept as is. Commands:
//
//	new prefill|decode [hello=1s request= alloc= handshake= admission= prefill= progress= ttl= rooms=N tombstones=N]
//	at <time> [frame] <event> [room=N] [from=PEER|peer=PEER] [req=ID] [pages=1,2] [token=N] [logprob=F] [count=N] [bytes=N] [reason=NAME]
//	tick <time>     run Tick
//	room N          the room's line and its history
//	rooms           every room's line, oldest first
//	counters        the non-zero counters
//	next            NextDeadline
//
// The output of "at" and "tick" is the outcome (for "at"), then Ready's
// transitions and effects, one per line, after which the harness calls
// Advance. Room N is the ID whose last 8 bytes are N big-endian; traces
// print it as N.

type scenarioCase struct {
	comments []string
	command  string
	expected []string
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("Glob(testdata/*.txt) = %v, %v; want scenario files", files, err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScenarioFile(t, file) })
	}
}

func runScenarioFile(t *testing.T, file string) {
	cases, err := parseScenario(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 || len(cases[0].comments) == 0 {
		t.Errorf("%s: want a header comment saying what the file proves", file)
	}
	var h harness
	for i := range cases {
		c := &cases[i]
		if c.command == "" {
			continue
		}
		got, err := h.run(c.command)
		if err != nil {
			t.Fatalf("%s: %q: %v", file, c.command, err)
		}
		if h.m != nil {
			if err := h.m.checkAll(); err != nil {
				t.Errorf("%s: after %q: invariants: %v", file, c.command, err)
			}
		}
		if *rewrite {
			c.expected = got
			continue
		}
		if strings.Join(got, "\n") != strings.Join(c.expected, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", file, c.command, strings.Join(got, "\n"), strings.Join(c.expected, "\n"))
		}
	}
	if *rewrite {
		if err := writeScenario(file, cases); err != nil {
			t.Fatal(err)
		}
	}
}

func parseScenario(file string) ([]scenarioCase, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cases []scenarioCase
	var c scenarioCase
	inOutput := false
	flush := func() {
		if len(c.comments) > 0 || c.command != "" {
			cases = append(cases, c)
		}
		c, inOutput = scenarioCase{}, false
	}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		switch {
		case text == "":
			flush()
		case inOutput:
			c.expected = append(c.expected, text)
		case text == "----":
			if c.command == "" {
				return nil, fmt.Errorf("%s:%d: ---- without a command", file, line)
			}
			inOutput = true
		case strings.HasPrefix(text, "#") && c.command == "":
			c.comments = append(c.comments, text)
		case c.command == "":
			c.command = text
		default:
			return nil, fmt.Errorf("%s:%d: a second command %q in one case", file, line, text)
		}
	}
	flush()
	return cases, sc.Err()
}

func writeScenario(file string, cases []scenarioCase) error {
	var b strings.Builder
	for i, c := range cases {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, s := range c.comments {
			b.WriteString(s + "\n")
		}
		if c.command == "" {
			continue
		}
		b.WriteString(c.command + "\n----\n")
		for _, s := range c.expected {
			b.WriteString(s + "\n")
		}
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// harness runs scenario commands against one Machine at a time.
type harness struct {
	m     *Machine
	names map[string]string // full id hex -> scenario number
}

// defaultConfig is the scenarios' configuration unless "new" overrides it.
func defaultConfig(role Role) Config {
	return Config{
		Role: role, HelloTimeout: ms(1000), RequestTimeout: ms(1000), AllocTimeout: ms(2000),
		HandshakeTimeout: ms(1000), AdmissionTimeout: ms(2000), PrefillTimeout: ms(3000),
		ProgressTimeout: ms(500), TombstoneTTL: ms(10000), RoomsMax: 8, TombstonesMax: 8,
	}
}

func ms(n int64) Duration { return Duration(n * 1e6) }

// scenarioID is room N of a scenario.
func scenarioID(n uint64) ID {
	var id ID
	binary.BigEndian.PutUint64(id[8:], n)
	return id
}

func (h *harness) run(command string) ([]string, error) {
	fields := strings.Fields(command)
	switch fields[0] {
	case "new":
		return h.newMachine(fields[1:])
	}
	if h.m == nil {
		return nil, fmt.Errorf("no machine: start with new prefill|decode")
	}
	switch fields[0] {
	case "at":
		return h.at(fields[1:])
	case "tick":
		if len(fields) != 2 {
			return nil, fmt.Errorf("want tick <time>")
		}
		now, err := parseInstant(fields[1])
		if err != nil {
			return nil, err
		}
		h.m.Tick(now)
		return h.ready(nil), nil
	case "room", "rooms":
		return h.rooms(fields)
	case "counters":
		return h.counters(), nil
	case "next":
		at, ok := h.m.NextDeadline()
		return []string{fmt.Sprintf("next=%v ok=%v", at, ok)}, nil
	}
	return nil, fmt.Errorf("unknown command %q", fields[0])
}

func (h *harness) newMachine(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("want new prefill|decode")
	}
	var role Role
	switch args[0] {
	case "prefill":
		role = RolePrefill
	case "decode":
		role = RoleDecode
	default:
		return nil, fmt.Errorf("unknown role %q", args[0])
	}
	cfg := defaultConfig(role)
	durations := map[string]*Duration{
		"hello": &cfg.HelloTimeout, "request": &cfg.RequestTimeout, "alloc": &cfg.AllocTimeout,
		"handshake": &cfg.HandshakeTimeout, "admission": &cfg.AdmissionTimeout, "prefill": &cfg.PrefillTimeout,
		"progress": &cfg.ProgressTimeout, "ttl": &cfg.TombstoneTTL,
	}
	for _, kv := range args[1:] {
		key, value, _ := strings.Cut(kv, "=")
		var err error
		switch {
		case durations[key] != nil:
			var d Instant
			d, err = parseInstant(value)
			*durations[key] = Duration(d)
		case key == "rooms":
			cfg.RoomsMax, err = strconv.Atoi(value)
		case key == "tombstones":
			cfg.TombstonesMax, err = strconv.Atoi(value)
		default:
			err = fmt.Errorf("unknown option %q", key)
		}
		if err != nil {
			return nil, err
		}
	}
	m, err := New(cfg)
	if err != nil {
		return []string{"error: " + err.Error()}, nil
	}
	h.m, h.names = m, map[string]string{}
	return []string{"ok"}, nil
}

func (h *harness) at(args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("want at <time> <event> key=value...")
	}
	now, err := parseInstant(args[0])
	if err != nil {
		return nil, err
	}
	ev, err := h.parseEvent(args[1:])
	if err != nil {
		return nil, err
	}
	o := h.m.Step(now, ev)
	return h.ready([]string{"outcome=" + o.String()}), nil
}

func (h *harness) parseEvent(args []string) (Event, error) {
	var ev Event
	frame := args[0] == "frame"
	if frame {
		args = args[1:]
	}
	kind, ok := lookup(EventKinds(), args[0])
	if !ok || (frame && !in(&frameEvents, kind)) {
		return ev, fmt.Errorf("unknown event %q (frame %v)", args[0], frame)
	}
	ev.Kind = kind
	for _, kv := range args[1:] {
		if err := h.setField(&ev, kv); err != nil {
			return ev, err
		}
	}
	return ev, nil
}

func (h *harness) setField(ev *Event, kv string) error {
	key, value, _ := strings.Cut(kv, "=")
	var err error
	var n int64
	switch key {
	case "room":
		var id uint64
		id, err = strconv.ParseUint(value, 10, 64)
		ev.Room = scenarioID(id)
		h.names[ev.Room.String()] = value
	case "from", "peer":
		ev.Peer = value
	case "req":
		ev.RequestID = value
	case "pages":
		for _, p := range strings.Split(value, ",") {
			n, err = strconv.ParseInt(p, 10, 32)
			ev.Pages = append(ev.Pages, int32(n))
		}
	case "token":
		n, err = strconv.ParseInt(value, 10, 32)
		ev.Token = int32(n)
	case "logprob":
		var f float64
		f, err = strconv.ParseFloat(value, 32)
		ev.Logprob = float32(f)
	case "count":
		ev.PageCount, err = strconv.Atoi(value)
	case "bytes":
		ev.Bytes, err = strconv.ParseInt(value, 10, 64)
	case "reason":
		var ok bool
		if ev.Reason, ok = lookup(Reasons(), value); !ok {
			err = fmt.Errorf("unknown reason %q", value)
		}
	default:
		err = fmt.Errorf("unknown field %q", key)
	}
	return err
}

// lookup finds the enum value whose String is s.
func lookup[T fmt.Stringer](all []T, s string) (T, bool) {
	for _, v := range all {
		if v.String() == s {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// ready prints Ready after head, with room ids shortened, then Advances.
func (h *harness) ready(head []string) []string {
	rd := h.m.Ready()
	out := head
	for _, tr := range rd.Transitions {
		out = append(out, h.short(tr.String()))
	}
	for _, e := range rd.Effects {
		out = append(out, h.short(e.String()))
	}
	h.m.Advance()
	if len(out) == 0 {
		out = []string{"(nothing)"}
	}
	return out
}

func (h *harness) short(s string) string {
	for full, n := range h.names {
		s = strings.ReplaceAll(s, full, n)
	}
	return s
}

func (h *harness) rooms(fields []string) ([]string, error) {
	if fields[0] == "rooms" {
		var out []string
		for _, ri := range h.m.Rooms() {
			out = append(out, h.short(ri.String()))
		}
		if len(out) == 0 {
			out = []string{"(no rooms)"}
		}
		return out, nil
	}
	if len(fields) != 2 {
		return nil, fmt.Errorf("want room N")
	}
	n, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return nil, err
	}
	ri, ok := h.m.Room(scenarioID(n))
	if !ok {
		return []string{"(unknown)"}, nil
	}
	out := []string{h.short(ri.String())}
	for _, tr := range ri.History {
		out = append(out, "  "+h.short(tr.String()))
	}
	return out, nil
}

func (h *harness) counters() []string {
	c := h.m.Counters()
	var out []string
	for _, k := range EventKinds() {
		for _, o := range Outcomes() {
			if n := c.Events(k, o); n > 0 {
				out = append(out, fmt.Sprintf("events %v/%v=%d", k, o, n))
			}
		}
	}
	for _, r := range Reasons() {
		if n := c.Failures(r); n > 0 {
			out = append(out, fmt.Sprintf("failures %v=%d", r, n))
		}
	}
	for _, s := range States() {
		if n := c.LiveIn(s); n > 0 {
			out = append(out, fmt.Sprintf("live_in %v=%d", s, n))
		}
	}
	out = append(out, fmt.Sprintf("successes=%d late=%d rejected=%d forgotten=%d evicted=%d live=%d tombstones=%d",
		c.Successes, c.Late, c.Rejected, c.Forgotten, c.Evicted, c.Live, c.Tombstones))
	return out
}

// parseInstant reads "5ms", "1.5s", "250us", "7ns" or "0".
func parseInstant(s string) (Instant, error) {
	units := []struct {
		suffix string
		scale  float64
	}{{"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"s", 1e9}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("time %q: %w", s, err)
			}
			return Instant(math.Round(f * u.scale)), nil
		}
	}
	if s == "0" {
		return 0, nil
	}
	return 0, fmt.Errorf("time %q: want a number with ms, us, ns or s", s)
}
