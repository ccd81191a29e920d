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
// It imports agent and engine and the standard library, nothing else.
package llm
