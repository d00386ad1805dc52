package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"tandem/internal/router/answer"
)

// Limits of the chat client.
const (
	chatMaxEvent = 1 << 20  // one server-sent event
	chatMaxLine  = 1 << 20  // one line typed (or piped) in
	chatMaxBody  = 64 << 10 // an error answer read for its message
	// chatStartTimeout bounds the start of the server `chat --model` runs.
	chatStartTimeout = 5 * time.Minute
)

type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func chatCmd() *cobra.Command {
	var (
		url, modelRef, system, apiKey string
		maxTokens                     int
		temperature                   float64
		threads                       int
	)
	cmd := &cobra.Command{
		Use:   "chat [--url URL | --model MODEL]",
		Short: "Chat with a model in the terminal (the model's chat template, streamed, multi-turn)",
		Long: `Chat reads your messages line by line and streams the model's answers, keeping the
conversation: every turn sends the whole history to POST /v1/chat/completions, so the
server renders it with the model's chat template (as ` + "`ollama run`" + ` and ` + "`llama-cli -cnv`" + ` do).
Reasoning text (reasoning_content) is shown between "Thinking..." and "...done thinking."
and is not kept in the history.

--url URL chats with a running server or cluster (default http://127.0.0.1:8000).
--model MODEL starts a ` + "`tandem serve`" + ` of its own on a free loopback port for the session
and stops it at the end; MODEL is a path or a hub reference as --model takes everywhere
(ORG/REPO[:QUANT], hf.co/ORG/REPO[:QUANT]; pulled on first use; a path that exists wins).

Commands: /exit or /bye ends the session (so does end of input, Ctrl-D), /clear forgets
the conversation, /help lists them. A failed turn prints the server's message and is
dropped from the history.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if url != "" && modelRef != "" {
				return errors.New("give --url (a running server) or --model (start one), not both")
			}
			if maxTokens < 0 {
				return fmt.Errorf("--max-tokens %d must be positive (0: the server's default)", maxTokens)
			}
			if apiKey == "" {
				apiKey = os.Getenv("TANDEM_API_KEY")
			}
			ctx := cmd.Context()
			if modelRef != "" {
				base, stop, err := startChatServer(ctx, cmd.ErrOrStderr(), modelRef, threads)
				if err != nil {
					return err
				}
				defer stop()
				url, apiKey = base, ""
			}
			if url == "" {
				url = "http://127.0.0.1:8000"
			}
			c := &chatClient{base: strings.TrimSuffix(strings.TrimRight(url, "/"), "/v1"), apiKey: apiKey, maxTokens: maxTokens,
				temperature: temperature, http: &http.Client{}}
			return c.repl(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), system)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&url, "url", "", "chat with the server at this address (default http://127.0.0.1:8000)")
	fs.StringVar(&modelRef, "model", "", "start a server of this model for the session (path or hub reference)")
	fs.StringVar(&system, "system", "", "system message that opens the conversation")
	fs.StringVar(&apiKey, "api-key", "", "API key of the server at --url (default: $TANDEM_API_KEY)")
	fs.IntVar(&maxTokens, "max-tokens", 0, "max_tokens of each answer (0: the server's default, up to the context)")
	fs.Float64Var(&temperature, "temperature", 0.7, "sampling temperature")
	fs.IntVar(&threads, "threads", 0, "with --model: engine threads of the server (0: its default)")
	return cmd
}

type chatClient struct {
	base, apiKey, model string
	maxTokens           int
	temperature         float64
	http                *http.Client
}

// repl runs the conversation until /exit or the end of in.
func (c *chatClient) repl(ctx context.Context, in io.Reader, out io.Writer, system string) error {
	if err := c.discover(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "chatting with %s at %s (/exit to end, /clear to forget, /help)\n", c.model, c.base)
	var history []chatMsg
	if system != "" {
		history = append(history, chatMsg{"system", system})
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), chatMaxLine)
	for {
		fmt.Fprint(out, ">>> ")
		if !sc.Scan() {
			fmt.Fprintln(out)
			if err := sc.Err(); err != nil {
				return fmt.Errorf("read input: %w", err)
			}
			return nil
		}
		line := strings.TrimSpace(sc.Text())
		switch line {
		case "":
			continue
		case "/exit", "/bye", "/quit":
			return nil
		case "/clear":
			history = history[:0]
			if system != "" {
				history = append(history, chatMsg{"system", system})
			}
			fmt.Fprintln(out, "(conversation cleared)")
			continue
		case "/help", "/?":
			fmt.Fprintln(out, "/exit, /bye  end the session\n/clear       forget the conversation\n/help        this list")
			continue
		}
		if strings.HasPrefix(line, "/") && !strings.Contains(line, " ") {
			fmt.Fprintf(out, "unknown command %s (/help lists them)\n", line)
			continue
		}
		history = append(history, chatMsg{"user", line})
		reply, err := c.turn(ctx, history, out)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(out)
				return nil
			}
			history = history[:len(history)-1]
			fmt.Fprintf(out, "\nerror: %v\n", err)
			continue
		}
		history = append(history, chatMsg{"assistant", reply})
	}
}

// discover takes the model id the server lists first.
func (c *chatClient) discover(ctx context.Context) error {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if err := psGet(ctx, hc, c.base+"/v1/models", c.apiKey, &list); err != nil {
		return fmt.Errorf("%w (is a tandem serve or up running there? or give --model to start one)", err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return fmt.Errorf("%s/v1/models lists no model", c.base)
	}
	c.model = list.Data[0].ID
	return nil
}

// turn sends the conversation and streams the answer to out, returning
// its content (reasoning left out).
func (c *chatClient) turn(ctx context.Context, history []chatMsg, out io.Writer) (string, error) {
	req := map[string]any{"model": c.model, "messages": history, "stream": true, "temperature": c.temperature}
	if c.maxTokens > 0 {
		req["max_tokens"] = c.maxTokens
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, chatErrorMessage(resp.Body))
	}
	var content strings.Builder
	thinking := false
	sr := answer.NewReader(resp.Body, chatMaxEvent)
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("the stream ended without [DONE]")
		}
		if err != nil {
			return "", fmt.Errorf("read the answer: %w", err)
		}
		if !ev.HasData {
			continue
		}
		if string(bytes.TrimSpace(ev.Data)) == "[DONE]" {
			break
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &ch); err != nil {
			return "", fmt.Errorf("the server sent an event that is not JSON: %w", err)
		}
		if ch.Error != nil {
			return "", errors.New(ch.Error.Message)
		}
		for _, x := range ch.Choices {
			if r := x.Delta.ReasoningContent; r != "" {
				if !thinking {
					fmt.Fprint(out, "Thinking...\n")
					thinking = true
				}
				fmt.Fprint(out, r)
			}
			if t := x.Delta.Content; t != "" {
				if thinking {
					fmt.Fprint(out, "\n...done thinking.\n\n")
					thinking = false
				}
				fmt.Fprint(out, t)
				content.WriteString(t)
			}
		}
	}
	fmt.Fprintln(out)
	return content.String(), nil
}

// chatErrorMessage reads an OpenAI error body's message.
func chatErrorMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, chatMaxBody))
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) == nil && v.Error.Message != "" {
		return v.Error.Message
	}
	return strings.TrimSpace(string(b))
}

// startChatServer resolves modelRef (pulling it on first use), starts
// `tandem serve` of it on a free loopback port and waits until it is
// ready. stop ends it (SIGTERM, then SIGKILL after 10 s).
func startChatServer(ctx context.Context, logw io.Writer, modelRef string, threads int) (base string, stop func(), err error) {
	log := slog.New(slog.NewTextHandler(logw, nil))
	path, err := resolveModelTo(ctx, modelRef, logw, log)
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("find the tandem binary: %w", err)
	}
	args := []string{"serve", "--model", path, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}
	if threads > 0 {
		args = append(args, "--threads", strconv.Itoa(threads))
	}
	logs := &lockedWriter{} // the server's output, shown if it fails to start
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv := exec.CommandContext(sctx, self, args...)
	srv.Stdout, srv.Stderr = logs, logs
	srv.SysProcAttr = chatChildAttr()
	srv.Cancel = func() error { return srv.Process.Signal(os.Interrupt) }
	srv.WaitDelay = 10 * time.Second
	if err := srv.Start(); err != nil {
		cancel()
		return "", nil, fmt.Errorf("start tandem serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	stop = func() {
		cancel()
		<-exited
	}
	base = "http://127.0.0.1:" + strconv.Itoa(port)
	fmt.Fprintf(logw, "starting tandem serve of %s on %s...\n", modelRef, base)
	deadline := time.NewTimer(chatStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-exited:
			cancel()
			return "", nil, fmt.Errorf("tandem serve exited before it was ready (%v):\n%s", err, logs.String())
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-deadline.C:
			stop()
			return "", nil, fmt.Errorf("tandem serve was not ready after %s:\n%s", chatStartTimeout, logs.String())
		case <-tick.C:
			if resp, err := hc.Get(base + "/ready"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return base, stop, nil
				}
			}
		}
	}
}

// lockedWriter is a bytes.Buffer safe for a child's output and a reader.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 1<<20 { // keep the start: a failed start explains itself there
		return len(p), nil
	}
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
