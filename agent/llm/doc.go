// Package llm holds the model planners of the agent: OpenAI-compatible chat
// completions with tool calls (OpenAI, vLLM, Ollama, LM Studio) and the
// Anthropic Messages API with tool use. Both implement agent.Planner over
// plain net/http — the official SDKs would triple the cold build time here for
// two small JSON requests.
//
// A planner is stateless between calls: every turn it sends the task, the
// Memory section, the page observation and a compact log of the turns so far,
// and reads back exactly one tool call. Secrets reach it only as
// {{secret:NAME}} placeholders (agent.State never holds their values).
//
// Configuration, each first found wins: the Config's own fields (pem's
// --model, --base-url, --temperature), then PEM_LLM_BASE_URL, PEM_LLM_MODEL,
// PEM_LLM_API_KEY, PEM_LLM_TEMPERATURE, then the provider's usual variables
// (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL; ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY, ANTHROPIC_MODEL), then the provider's public API. Model
// and key are checked at the first call, not before: a run that replays
// memory calls no model and needs neither. No temperature is sent unless one
// is set.
//
// It imports agent and engine and the standard library, nothing else.
package llm
