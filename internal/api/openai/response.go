package openai

// Object names of the response documents and other fixed strings.
const (
	ObjectCompletion     = "text_completion"
	ObjectChatCompletion = "chat.completion"
	ObjectChatChunk      = "chat.completion.chunk"
	ObjectModel          = "model"
	ObjectList           = "list"
	FinishReasonStop     = "stop"
	FinishReasonLength   = "length"
	RoleAssistant        = "assistant"
	OwnedBy              = "tandem" // owned_by of the served model
	StreamDone           = "[DONE]" // the last SSE data line of a stream
)

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens        int                  `json:"prompt_tokens"`
	CompletionTokens    int                  `json:"completion_tokens"`
	TotalTokens         int                  `json:"total_tokens"`
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks down the prompt tokens.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// CompletionLogprobs is the legacy logprobs object of /v1/completions: one
// entry per token in each list. TextOffset is the character (rune) offset
// of each token's text in the choice's text. With echo the lists start with
// the prompt's tokens: the first one's TokenLogprobs entry is nil (null, as
// OpenAI sends), and TopLogprobs entries of prompt tokens are nil.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// PromptTokenLogprob is one token's entry in prompt_logprobs: its logprob
// given the prompt before it and its text.
type PromptTokenLogprob struct {
	Logprob      float64 `json:"logprob"`
	DecodedToken string  `json:"decoded_token"`
}

// PromptLogprobs is the prompt_logprobs member of a choice (vLLM's shape):
// one entry per prompt token, the first nil (null: nothing precedes it),
// each other a map from the token id, in decimal, to its
// PromptTokenLogprob. Only the prompt's own token is reported (no
// alternatives). The member is last in a choice and left out when not asked
// for, which is where the PD router splices it in.
type PromptLogprobs []map[string]PromptTokenLogprob

// CompletionChoice is one choice of a completion or of a streamed chunk.
// FinishReason is null until the choice ends. PromptLogprobs is set when
// asked for (prompt_logprobs, or echo with logprobs): in each choice of an
// answer, and in the first chunk of each choice of a stream.
type CompletionChoice struct {
	Index          int                 `json:"index"`
	Text           string              `json:"text"`
	Logprobs       *CompletionLogprobs `json:"logprobs"`
	FinishReason   *string             `json:"finish_reason"`
	PromptLogprobs PromptLogprobs      `json:"prompt_logprobs,omitempty"`
}

// CompletionResponse is the body of a /v1/completions answer, and of each
// streamed chunk (same object name, as OpenAI does).
type CompletionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []CompletionChoice `json:"choices"`
	Usage             *Usage             `json:"usage,omitempty"`
}

// TopLogprob is one alternative token in chat logprobs.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatTokenLogprob is one generated token in chat logprobs.
type ChatTokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// ChatLogprobs is a chat choice's logprobs object.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
}

// ChatMessage is the assistant message of a chat choice.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is the model's reasoning (<think>...</think>) when
	// the server splits it from the content, as vLLM and llama.cpp do.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
	// ToolCalls are the tool calls the model made (content is then null
	// when empty; see MarshalJSON in tools.go).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ChatDelta is the message fragment of a streamed chat chunk.
type ChatDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is the next piece of the model's reasoning.
	ReasoningContent *string `json:"reasoning_content,omitempty"`
	// ToolCalls are pieces of tool calls.
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ChatChoice is one choice of a chat completion. PromptLogprobs is set
// when prompt_logprobs was asked for.
type ChatChoice struct {
	Index          int            `json:"index"`
	Message        ChatMessage    `json:"message"`
	Logprobs       *ChatLogprobs  `json:"logprobs"`
	FinishReason   *string        `json:"finish_reason"`
	PromptLogprobs PromptLogprobs `json:"prompt_logprobs,omitempty"`
}

// ChatChunkChoice is one choice of a streamed chat chunk. PromptLogprobs
// is set, when asked for, in the first chunk of each choice (the one with
// the role).
type ChatChunkChoice struct {
	Index          int            `json:"index"`
	Delta          ChatDelta      `json:"delta"`
	Logprobs       *ChatLogprobs  `json:"logprobs"`
	FinishReason   *string        `json:"finish_reason"`
	PromptLogprobs PromptLogprobs `json:"prompt_logprobs,omitempty"`
}

// ChatResponse is the body of a /v1/chat/completions answer.
type ChatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
}

// ChatChunk is one streamed chunk of a chat completion.
type ChatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint string            `json:"system_fingerprint,omitempty"`
	Choices           []ChatChunkChoice `json:"choices"`
	Usage             *Usage            `json:"usage,omitempty"`
}

// Model describes a served model in /v1/models.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the context length in tokens (an extension, as vLLM's).
	MaxModelLen int `json:"max_model_len,omitempty"`
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}
